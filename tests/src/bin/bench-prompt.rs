//! Prompt size: bytes and tokens (cl100k_base) of the fixed part of the first request — system
//! prompt plus tool definitions (and anything added to the user's words, which is nothing now) —
//! in Build and Plan mode, for a plain project and a Total.js 5 project, with a large window, with
//! an 8k one, and for a small model by its name (1.5B) with its tools in text and constrained
//! steps (the short prompt: the reduced tool set, the Total.js primer's essentials instead of the
//! primer). Measured on the real request: totemd runs one prompt against the Ollama simulator,
//! which records the body it received.
//!
//! Targets for a plain project: Build ≤ 8,000 B, Plan ≤ 5,000 B; for the small model in a
//! Total.js 5 project, Build ≤ 800 tokens; what a Total.js 5 project adds for a small model ≤ 150
//! tokens. Reference: OpenCode 1.18 sends 30,729 B (10 tools) before the user's first words.
//!
//! Run: `cargo run -p totem-tests --bin bench-prompt` (builds totemd first if it is missing).

use std::time::Duration;

use serde_json::{Value, json};
use totem_client::Client;
use totem_protocol::EventKind;
use totem_tests::harness::TestDaemon;
use totem_tests::sim::{Reply, Sim, SimEvent, SimKind};

const OPENCODE_BYTES: usize = 30_729;
/// The user's words of the measured request.
const PROMPT: &str = "hi";

struct Figure {
    project: &'static str,
    mode: &'static str,
    /// The model's window: the simulator's 128k, or 8k given in its settings (a small local
    /// model, offered the reduced tool set).
    window: &'static str,
    system: String,
    /// The `tools` field as sent (JSON).
    tools: String,
    tool_count: usize,
    /// What is added to the user's message of every request (the Total.js 5 reminder).
    reminder: String,
}

impl Figure {
    fn bytes(&self) -> usize {
        self.system.len() + self.tools.len() + self.reminder.len()
    }

    fn tokens(&self, bpe: &tiktoken_rs::CoreBPE) -> usize {
        [&self.system, &self.tools, &self.reminder]
            .iter()
            .map(|t| bpe.encode_ordinary(t).len())
            .sum()
    }
}

async fn measure(
    client: &Client,
    sim: &Sim,
    project: &std::path::Path,
    mode: &str,
    model: &str,
    answer: &str,
) -> anyhow::Result<(String, String, usize, String)> {
    let project_id = client
        .call_raw("project.open", json!({"path": project}))
        .await?["id"]
        .clone();
    let session = client
        .call_raw("session.create", json!({"projectId": project_id}))
        .await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    sim.push(Reply::stream([SimEvent::text(answer)]));
    let before = sim.chat_requests().len();
    let mut events = client.subscribe(&session, 0).await?;
    client
        .call_raw(
            "session.prompt",
            json!({"sessionId": session, "text": PROMPT, "mode": mode, "model": model}),
        )
        .await?;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("event stream ended"))??;
        match event.kind {
            EventKind::RunDone { .. } => break,
            EventKind::RunFailed { run } | EventKind::RunAborted { run } => {
                anyhow::bail!("the run did not finish: {:?}", run.error)
            }
            _ => {}
        }
    }
    let requests = sim.chat_requests();
    let body = &requests
        .get(before)
        .ok_or_else(|| anyhow::anyhow!("the simulator saw no request"))?
        .body;
    let system = body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "system"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let user = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let tools = body.get("tools").cloned().unwrap_or(Value::Null);
    let tool_count = tools.as_array().map_or(0, Vec::len);
    let tools = if tools.is_null() {
        String::new()
    } else {
        serde_json::to_string(&tools)?
    };
    Ok((
        system.to_string(),
        tools,
        tool_count,
        user.strip_prefix(PROMPT).unwrap_or(user).to_string(),
    ))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sim = Sim::start(SimKind::Ollama).await;
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    client
        .call_raw(
            "provider.add",
            json!({"name": "sim", "kind": "ollama", "url": sim.url(), "maxRetries": 0}),
        )
        .await?;
    // The same simulator as a server whose model has an 8k window (given in its settings).
    client
        .call_raw(
            "provider.add",
            json!({"name": "small", "kind": "ollama", "url": sim.url(), "maxRetries": 0,
                   "models": {"llama3.2:latest": {"contextWindow": 8192}}}),
        )
        .await?;

    // A small model by its name (1.5B parameters), its tools in text with constrained steps, as
    // the probe finds Qwen2.5-Coder on llama-server: the short prompt whatever its window.
    let mut models = vec![totem_tests::sim::SimModel::new("qwen2.5-coder:1.5b", 32768)];
    models.extend([totem_tests::sim::SimModel::new("llama3.2:latest", 131072)]);
    sim.set_models(models);
    client
        .call_raw(
            "provider.add",
            json!({"name": "tiny", "kind": "ollama", "url": sim.url(), "maxRetries": 0,
                   "models": {"qwen2.5-coder:1.5b": {"tools": "text"}}}),
        )
        .await?;

    let plain = tempfile::tempdir()?;
    std::fs::write(plain.path().join("README.md"), "# demo\n")?;
    let totaljs = tempfile::tempdir()?;
    std::fs::write(
        totaljs.path().join("package.json"),
        r#"{"name": "app", "dependencies": {"total5": "latest"}}"#,
    )?;
    std::fs::write(
        totaljs.path().join("index.js"),
        "require('total5');\nTotal.run();\n",
    )?;

    let mut figures = Vec::new();
    for (window, model, answer) in [
        ("128k", "sim/llama3.2:latest", "ok"),
        ("8k", "small/llama3.2:latest", "ok"),
        ("1.5B", "tiny/qwen2.5-coder:1.5b", r#"{"answer": "ok"}"#),
    ] {
        for (project, path) in [("plain", plain.path()), ("Total.js 5", totaljs.path())] {
            for mode in ["build", "plan"] {
                let (system, tools, tool_count, reminder) =
                    measure(&client, &sim, path, mode, model, answer).await?;
                figures.push(Figure {
                    project,
                    mode,
                    window,
                    system,
                    tools,
                    tool_count,
                    reminder,
                });
            }
        }
    }

    let bpe = tiktoken_rs::cl100k_base()?;
    println!(
        "Fixed part of the first request (system prompt + tool definitions + anything added to the user's words), as sent to Ollama; tokens by cl100k_base:\n"
    );
    println!(
        "{:<11} {:<6} {:>6} {:>9} {:>8} {:>6} {:>11} {:>9} {:>7}  target",
        "project", "mode", "window", "system B", "tools B", "tools", "added B", "total B", "tokens"
    );
    for f in &figures {
        let total = f.bytes();
        let target = match (f.project, f.mode, f.window) {
            ("plain", "build", "128k") => format!("≤ 8,000 B {}", verdict(total <= 8000)),
            ("plain", "plan", "128k") => format!("≤ 5,000 B {}", verdict(total <= 5000)),
            ("Total.js 5", "build", "1.5B") => {
                let tokens = f.tokens(&bpe);
                format!("≤ 800 tokens {}", verdict(tokens <= 800))
            }
            _ => "-".to_string(),
        };
        println!(
            "{:<11} {:<6} {:>6} {:>9} {:>8} {:>6} {:>11} {:>9} {:>7}  {target}",
            f.project,
            f.mode,
            f.window,
            f.system.len(),
            f.tools.len(),
            f.tool_count,
            f.reminder.len(),
            total,
            f.tokens(&bpe)
        );
    }
    if let Some(build) = figures.first() {
        println!(
            "\nReference: OpenCode 1.18 sends {OPENCODE_BYTES} B before the user's first words; plain Build is {:.1} × smaller.",
            OPENCODE_BYTES as f64 / build.bytes().max(1) as f64
        );
    }
    // What a Total.js 5 project adds to the first request, per window and mode.
    for window in ["128k", "8k", "1.5B"] {
        for mode in ["build", "plan"] {
            let find = |project: &str| {
                figures
                    .iter()
                    .find(|f| f.project == project && f.mode == mode && f.window == window)
            };
            if let (Some(plain), Some(totaljs)) = (find("plain"), find("Total.js 5")) {
                let added = totaljs.tokens(&bpe).saturating_sub(plain.tokens(&bpe));
                let budget = if window != "128k" {
                    format!("; budget 150 {}", verdict(added <= 150))
                } else {
                    String::new()
                };
                println!(
                    "Total.js 5 adds to the first request, {window} window, {mode}: {added} tokens{budget}."
                );
            }
        }
    }
    let primer = totem_totaljs::primer();
    let tokens = bpe.encode_ordinary(primer).len();
    println!(
        "Total.js 5 primer: {} B, {tokens} tokens (cl100k_base, a real BPE tokenizer); budget 1,200 {}.",
        primer.len(),
        verdict(tokens <= 1200)
    );
    let essentials = totem_totaljs::reminder();
    let tokens = bpe.encode_ordinary(essentials).len();
    println!(
        "Total.js 5 essentials in a small model's system prompt: {} B, {tokens} tokens (cl100k_base); budget 150 {}.",
        essentials.len(),
        verdict(tokens <= 150)
    );
    Ok(())
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "OVER" }
}
