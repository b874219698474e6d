//! `totem mcp add|list|remove|test`: the MCP servers of the user's settings, managed without
//! editing JSON. Secret header and environment values go to totemd, which stores them encrypted;
//! they are never printed.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal};

use totem_protocol::{McpServerAddParams, McpServerTestParams, NoParams, ProviderRef, method};

use crate::daemon::{self, Endpoint};
use crate::exit::{Exit, UsageError};
use crate::mcp::McpAddArgs;

/// `totem mcp add`.
pub async fn add(endpoint: &Endpoint, args: McpAddArgs) -> anyhow::Result<Exit> {
    let (command, rest) = match args.command.split_first() {
        Some((command, rest)) => (Some(command.clone()), rest.to_vec()),
        None => (None, Vec::new()),
    };
    if command.is_some() == args.url.is_some() {
        return Err(UsageError(
            "give the server's command after `--` (totem mcp add NAME -- COMMAND ARGS…) or its --url, one of them".into(),
        )
        .into());
    }
    let (env, secret_env_names) = split(&args.env, '=', "--env")?;
    let (headers, secret_header_names) = split(&args.headers, ':', "--header")?;
    let mut reader = SecretReader::new(args.value_stdin, &args.name);
    let mut secret_env = BTreeMap::new();
    for name in secret_env_names {
        let value = reader.read(&format!("variable {name}"))?;
        secret_env.insert(name, value);
    }
    let mut secret_headers = BTreeMap::new();
    for name in secret_header_names {
        let value = reader.read(&format!("header {name}"))?;
        secret_headers.insert(name, value);
    }
    let connection = daemon::connect_or_start(endpoint).await?;
    let info = connection
        .client
        .call::<method::McpServerAdd>(McpServerAddParams {
            name: args.name.clone(),
            command,
            args: rest,
            url: args.url,
            env,
            headers,
            secret_env,
            secret_headers,
            tools: (!args.tools.is_empty()).then_some(args.tools),
            replace: args.replace,
        })
        .await?;
    let secrets = match info.secrets.len() {
        0 => String::new(),
        n => format!(
            " ({n} secret{} stored encrypted)",
            if n == 1 { "" } else { "s" }
        ),
    };
    println!(
        "Added MCP server {}{secrets}. Check it with `totem mcp test {}`; Totem asks before a session first starts it.",
        info.name, info.name
    );
    Ok(Exit::Success)
}

/// `totem mcp list`.
pub async fn list(endpoint: &Endpoint, json: bool) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start(endpoint).await?;
    let list = connection
        .client
        .call::<method::McpServerList>(NoParams {})
        .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(Exit::Success);
    }
    if list.servers.is_empty() {
        println!(
            "No MCP servers in your settings. Add one with `totem mcp add NAME -- COMMAND` or `--url URL`."
        );
        return Ok(Exit::Success);
    }
    for server in &list.servers {
        let what = match (&server.command, &server.url) {
            (Some(command), _) => std::iter::once(command.as_str())
                .chain(server.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            (None, Some(url)) => url.clone(),
            (None, None) => String::new(),
        };
        let off = if server.enabled { "" } else { " (off)" };
        println!("{}{off}  {what}", server.name);
        if let Some(why) = &server.login_refused {
            println!(
                "  login expired ({why}): run `totem mcp login {}` again",
                server.name
            );
        }
        if server.logged_in {
            println!(
                "  logged in (OAuth tokens stored encrypted; `totem mcp logout {}` forgets them)",
                server.name
            );
        }
        let named = |names: &[String], kind: &str| -> Vec<String> {
            names
                .iter()
                .map(|n| match server.secrets.contains(&format!("{kind} {n}")) {
                    true => format!("{n} (secret)"),
                    false => n.clone(),
                })
                .collect()
        };
        if !server.env.is_empty() {
            println!("  env: {}", named(&server.env, "env").join(", "));
        }
        if !server.headers.is_empty() {
            println!("  headers: {}", named(&server.headers, "header").join(", "));
        }
        if let Some(tools) = &server.tools {
            println!("  tools: {}", tools.join(", "));
        }
    }
    Ok(Exit::Success)
}

/// `totem mcp remove`.
pub async fn remove(endpoint: &Endpoint, name: &str) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start(endpoint).await?;
    connection
        .client
        .call::<method::McpServerRemove>(ProviderRef {
            name: name.to_string(),
        })
        .await?;
    println!("Removed MCP server {name} and its stored secrets.");
    Ok(Exit::Success)
}

/// `totem mcp test`: exit 1 when the server does not start or answer.
pub async fn test(endpoint: &Endpoint, name: &str) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start(endpoint).await?;
    let dir = std::env::current_dir()
        .ok()
        .map(|d| d.display().to_string());
    let result = connection
        .client
        .call::<method::McpServerTest>(McpServerTestParams {
            name: name.to_string(),
            dir,
        })
        .await?;
    if result.ok {
        println!(
            "MCP server {name} answered in {} ms with {} tool{}: {}",
            result.millis,
            result.tools.len(),
            if result.tools.len() == 1 { "" } else { "s" },
            result.tools.join(", ")
        );
        return Ok(Exit::Success);
    }
    eprintln!(
        "MCP server {name} did not start: {}",
        result.error.as_deref().unwrap_or("no reason given")
    );
    Ok(Exit::Failed)
}

/// Splits `KEY=VALUE` (or `Name: value`) items into plain values and the names given alone,
/// which are secrets.
fn split(
    items: &[String],
    separator: char,
    flag: &str,
) -> Result<(BTreeMap<String, String>, Vec<String>), UsageError> {
    let mut plain = BTreeMap::new();
    let mut secret = Vec::new();
    for item in items {
        match item.split_once(separator) {
            Some((key, value)) if !key.trim().is_empty() => {
                plain.insert(key.trim().to_string(), value.trim().to_string());
            }
            Some(_) => {
                return Err(UsageError(format!(
                    "{flag} {item:?} has no name before `{separator}`"
                )));
            }
            None if item.trim().is_empty() => {
                return Err(UsageError(format!("{flag} needs a name")));
            }
            None => secret.push(item.trim().to_string()),
        }
    }
    Ok((plain, secret))
}

/// Where secret values come from: standard input, a line each, or a prompt without echo.
struct SecretReader<'a> {
    from_stdin: bool,
    server: &'a str,
}

impl<'a> SecretReader<'a> {
    fn new(from_stdin: bool, server: &'a str) -> SecretReader<'a> {
        SecretReader { from_stdin, server }
    }

    fn read(&mut self, what: &str) -> anyhow::Result<String> {
        let value = if self.from_stdin {
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            line.trim_end_matches(['\n', '\r']).to_string()
        } else if std::io::stdin().is_terminal() {
            rpassword::prompt_password(format!(
                "Secret {what} of MCP server {} (input hidden): ",
                self.server
            ))?
        } else {
            return Err(UsageError(format!(
                "{what} has no value: give it as a secret with --value-stdin (one line each), or run on a terminal to be asked"
            ))
            .into());
        };
        if value.trim().is_empty() {
            return Err(UsageError(format!("the value of {what} is empty")).into());
        }
        Ok(value)
    }
}
