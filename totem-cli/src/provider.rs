//! `totem provider add|list|remove|test` and `totem models`: the model providers in Totem's
//! settings and the models they serve. A key is asked for without echo (or read from stdin with
//! `--key-stdin`), sent once to the daemon, which stores it encrypted, and never printed.

use std::io::{BufRead, IsTerminal};

use totem_protocol::{
    ModelListParams, ModelProbe, ModelSettings, NoParams, ProviderAddParams, ProviderKind,
    ProviderRef, ProviderTestParams, ToolMode, method,
};

use crate::cli::{ModelsArgs, ProviderAddArgs, ProviderCommand};
use crate::daemon::{self, Endpoint};
use crate::exit::Exit;

pub async fn command(endpoint: &Endpoint, command: ProviderCommand) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start(endpoint).await?;
    let client = &connection.client;
    match command {
        ProviderCommand::Add(args) => {
            let key = read_key(&args)?;
            let info = client
                .call::<method::ProviderAdd>(ProviderAddParams {
                    name: args.name.clone(),
                    kind: args.kind.into(),
                    url: args.url.clone(),
                    key,
                    default_model: args.default_model.clone(),
                    ollama: None,
                    temperature: None,
                    timeouts: None,
                    max_retries: None,
                    models: None,
                    replace: args.replace,
                })
                .await?;
            println!(
                "Added provider {} ({}, {}){}.",
                info.settings.name,
                kind_name(info.settings.kind),
                info.settings.url,
                if info.has_key {
                    ", key stored encrypted"
                } else {
                    ""
                }
            );
            println!(
                "Check it with `totem provider test {}`; list its models with `totem models --provider {}`.",
                info.settings.name, info.settings.name
            );
            Ok(Exit::Success)
        }
        ProviderCommand::List { json } => {
            let list = client.call::<method::ProviderList>(NoParams {}).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
                return Ok(Exit::Success);
            }
            if let Some(error) = &list.settings_error {
                eprintln!("settings.json has an error, fix it first: {error}");
            }
            if list.providers.is_empty() {
                println!(
                    "No provider configured; a local Ollama (127.0.0.1:11434, or where OLLAMA_HOST says) is used when it answers."
                );
                println!(
                    "Add one with `totem provider add NAME --kind ollama|openai|anthropic|gemini --url URL`."
                );
            }
            for info in &list.providers {
                let p = &info.settings;
                println!(
                    "{:<16} {:<10} {:<44} {}{}",
                    p.name,
                    kind_name(p.kind),
                    p.url,
                    if info.has_key { "key set" } else { "no key" },
                    p.default_model
                        .as_deref()
                        .map(|m| format!(", default model {m}"))
                        .unwrap_or_default()
                );
            }
            if let Some(model) = &list.default_model {
                println!("Default model: {model}");
            }
            Ok(Exit::Success)
        }
        ProviderCommand::Remove { name } => {
            let removed = client
                .call::<method::ProviderRemove>(ProviderRef { name })
                .await?;
            println!("Removed provider {} and its key.", removed.name);
            Ok(Exit::Success)
        }
        ProviderCommand::Test { name } => {
            let result = client
                .call::<method::ProviderTest>(ProviderTestParams {
                    name,
                    ..ProviderTestParams::default()
                })
                .await?;
            println!(
                "{} ({}): {} [{} ms]",
                result.name, result.url, result.message, result.elapsed_ms
            );
            Ok(
                if result.reachable && result.default_model_listed != Some(false) {
                    Exit::Success
                } else {
                    Exit::Failed
                },
            )
        }
    }
}

pub async fn models(endpoint: &Endpoint, args: ModelsArgs) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start(endpoint).await?;
    if let Some(model) = args.probe.as_deref() {
        return probe(&connection.client, args.provider, model, args.json).await;
    }
    let list = connection
        .client
        .call::<method::ModelList>(ModelListParams {
            provider: args.provider,
        })
        .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(Exit::Success);
    }
    if list.models.is_empty() && list.errors.is_empty() {
        println!("No models. Add a provider with `totem provider add NAME --kind … --url …`.");
    }
    if !list.models.is_empty() {
        println!(
            "{:<44} {:>9}  {:<22} PRICE $/M in/out",
            "MODEL", "CONTEXT", "CAPABILITIES"
        );
    }
    for m in &list.models {
        // What settings.json (or a probe) says about tools wins over what the server lists.
        let tools = match m.settings.as_ref().and_then(|s| s.tools) {
            Some(mode) => Some(format!("tools:{}", tool_mode_name(mode))),
            None => m.capabilities.tools.then(|| "tools".to_string()),
        };
        let mut caps: Vec<String> = tools.into_iter().collect();
        for (on, name) in [
            (m.capabilities.thinking, "thinking"),
            (m.capabilities.vision, "vision"),
        ] {
            if on {
                caps.push(name.to_string());
            }
        }
        let context = m
            .context_window
            .map_or_else(|| "?".to_string(), |c| c.to_string());
        let price = m.prices.as_ref().map_or_else(
            || "-".to_string(),
            |p| format!("{:.2}/{:.2}", p.input_per_million, p.output_per_million),
        );
        let marker = if list.default_model.as_deref() == Some(m.name.as_str()) {
            " (default)"
        } else {
            ""
        };
        println!(
            "{:<44} {:>9}  {:<22} {price}{marker}",
            m.name,
            context,
            caps.join(",")
        );
        if let Some(settings) = m.settings.as_ref().map(settings_line)
            && !settings.is_empty()
        {
            println!("    settings: {settings}");
        }
    }
    for e in &list.errors {
        eprintln!(
            "{}: {} — check it with `totem provider test {}`",
            e.provider, e.message, e.provider
        );
    }
    Ok(if list.errors.is_empty() {
        Exit::Success
    } else {
        Exit::Failed
    })
}

/// `totem models --probe [MODEL]`: probes one model, or the models of `--provider`, or of every
/// provider in use, and prints what each can do.
async fn probe(
    client: &totem_client::Client,
    provider: Option<String>,
    model: &str,
    json: bool,
) -> anyhow::Result<Exit> {
    let targets: Vec<(String, Option<String>)> = if model.is_empty() {
        let list = client
            .call::<method::ModelList>(ModelListParams { provider })
            .await?;
        let mut names: Vec<String> = list.models.iter().map(|m| m.provider.clone()).collect();
        names.dedup();
        names.into_iter().map(|name| (name, None)).collect()
    } else {
        let Some((name, id)) = model.split_once('/') else {
            anyhow::bail!("name the model as provider/model, e.g. ollama/qwen3:8b");
        };
        vec![(name.to_string(), Some(id.to_string()))]
    };
    if targets.is_empty() {
        println!(
            "No models to probe. Add a provider with `totem provider add NAME --kind … --url …`."
        );
        return Ok(Exit::Failed);
    }
    let mut results = Vec::new();
    for (name, model) in targets {
        if !json {
            eprintln!("Probing {name} (a few short questions per model)…");
        }
        let result = client
            .call::<method::ProviderTest>(ProviderTestParams {
                name,
                probe: true,
                model,
            })
            .await?;
        if !json {
            if !result.reachable {
                println!("{}: {}", result.name, result.message);
            }
            for p in &result.probes {
                print_probe(p);
            }
        }
        results.push(result);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    }
    let ok = results
        .iter()
        .all(|r| r.reachable && r.probes.iter().all(|p| p.answers));
    Ok(if ok { Exit::Success } else { Exit::Failed })
}

fn print_probe(p: &ModelProbe) {
    let yes = |b: bool| if b { "yes" } else { "no" };
    let streamed = match p.streams_tool_calls {
        Some(true) => ", streamed too",
        Some(false) => ", not when streamed",
        None => "",
    };
    let window = p
        .context_window
        .map_or_else(|| "unknown".to_string(), |w| w.to_string());
    let speed = p
        .tokens_per_second
        .map_or_else(String::new, |t| format!(", {t} tokens/s"));
    let constrained = p
        .constrained
        .map_or_else(String::new, |c| format!(", constrained {}", yes(c)));
    println!(
        "{}: answers {}, native tools {}{streamed}, text tools {}{constrained}, window {window}{speed}",
        p.name,
        yes(p.answers),
        yes(p.native_tools),
        yes(p.text_tools)
    );
    println!("    {}", p.message);
    let saved = settings_line(&p.settings);
    if p.answers && !saved.is_empty() && !p.message.contains("not saved") {
        println!("    saved: {saved}");
    }
}

fn tool_mode_name(mode: ToolMode) -> &'static str {
    match mode {
        ToolMode::Native => "native",
        ToolMode::Text => "text",
        ToolMode::None => "none",
    }
}

/// A model's settings from settings.json, in one short line.
fn settings_line(s: &ModelSettings) -> String {
    let mut out = Vec::new();
    if let Some(w) = s.context_window {
        out.push(format!("contextWindow {w}"));
    }
    if let Some(n) = s.max_output_tokens {
        out.push(format!("maxOutputTokens {n}"));
    }
    if let Some(mode) = s.tools {
        out.push(format!("tools {}", tool_mode_name(mode)));
    }
    if let Some(t) = s.temperature {
        out.push(format!("temperature {t}"));
    }
    if let Some(stream) = s.stream {
        out.push(format!("stream {stream}"));
    }
    if let Some(reduced) = s.reduced_tools {
        out.push(format!("reducedTools {reduced}"));
    }
    if let Some(constrained) = s.constrained {
        out.push(format!("constrained {constrained}"));
    }
    if let Some(p) = s.top_p {
        out.push(format!("topP {p}"));
    }
    if let Some(p) = s.repeat_penalty {
        out.push(format!("repeatPenalty {p}"));
    }
    if let Some(small) = s.small {
        out.push(format!("small {small}"));
    }
    if let Some(t) = s.tokens_per_second {
        out.push(format!("tokensPerSecond {t}"));
    }
    out.join(", ")
}

pub(crate) fn kind_name(kind: ProviderKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The key: from stdin with `--key-stdin`, else asked on the terminal without echo for kinds
/// that need one; none for a local Ollama or when stdin is not a terminal.
fn read_key(args: &ProviderAddArgs) -> anyhow::Result<Option<String>> {
    let key = if args.key_stdin {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line.trim().to_string()
    } else if !matches!(args.kind, crate::cli::KindArg::Ollama) && std::io::stdin().is_terminal() {
        rpassword::prompt_password(format!(
            "API key for {} (input hidden; empty for none): ",
            args.name
        ))?
        .trim()
        .to_string()
    } else {
        String::new()
    };
    Ok((!key.is_empty()).then_some(key))
}
