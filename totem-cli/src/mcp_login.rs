//! `totem mcp login|logout`: OAuth for remote MCP servers. The CLI holds the loopback address the
//! browser comes back to (127.0.0.1, a free port), because the browser is where the user is;
//! totemd does the rest (discovery, registration, PKCE, the `state` check, the token exchange)
//! and keeps the tokens sealed.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use totem_protocol::{
    McpServerLoginFinishParams, McpServerLoginParams, NoParams, ProviderRef, method,
};

use crate::daemon::{self, Endpoint};
use crate::exit::Exit;
use crate::mcp::McpLoginArgs;

/// How long the browser has to come back.
const LOGIN_WAIT: Duration = Duration::from_secs(10 * 60);

/// The path of the loopback redirect.
const CALLBACK: &str = "/callback";

/// `totem mcp login NAME`.
pub async fn login(endpoint: &Endpoint, args: McpLoginArgs) -> anyhow::Result<Exit> {
    let name = args.name;
    let connection = daemon::connect_or_start(endpoint).await?;
    // Back at the address of Totem's last registration with this server's authorization server,
    // so that it is reused (a redirect URI is part of a registration); a free port when that one
    // is taken or there is none.
    let registered_port = match &args.client_id {
        Some(_) => None,
        None => connection
            .client
            .call::<method::McpServerList>(NoParams {})
            .await?
            .servers
            .into_iter()
            .find(|s| s.name == name)
            .and_then(|s| s.login_redirect_uri)
            .and_then(|uri| {
                let rest = uri.strip_prefix("http://127.0.0.1:")?;
                let port = rest.strip_suffix(CALLBACK)?;
                port.parse::<u16>().ok()
            }),
    };
    let listener = match registered_port {
        Some(port) => match TcpListener::bind(("127.0.0.1", port)).await {
            Ok(listener) => listener,
            Err(_) => TcpListener::bind(("127.0.0.1", 0)).await?,
        },
        None => TcpListener::bind(("127.0.0.1", 0)).await?,
    };
    let port = listener.local_addr()?.port();
    let started = connection
        .client
        .call::<method::McpServerLogin>(McpServerLoginParams {
            name: name.clone(),
            redirect_uri: format!("http://127.0.0.1:{port}{CALLBACK}"),
            client_id: args.client_id,
        })
        .await?;
    let url = started.authorization_url;
    println!("Log in to MCP server {name} on this page:\n  {url}");
    if !args.no_browser && open_browser(&url) {
        println!("(opened in your browser)");
    }
    println!("Waiting for the browser to come back to Totem (Ctrl-C gives up)…");
    loop {
        let accepted = tokio::time::timeout(LOGIN_WAIT, listener.accept()).await;
        let Ok(accepted) = accepted else {
            anyhow::bail!(
                "the browser did not come back within {} minutes; run `totem mcp login {name}` again",
                LOGIN_WAIT.as_secs() / 60
            );
        };
        let (mut stream, _) = accepted?;
        let Some(target) = request_target(&mut stream).await else {
            continue;
        };
        if !target.starts_with(CALLBACK) {
            // A favicon or a stray request: not the login's answer.
            answer(&mut stream, "404 Not Found", "Not the login's address.").await;
            continue;
        }
        let finished = connection
            .client
            .call::<method::McpServerLoginFinish>(McpServerLoginFinishParams {
                name: name.clone(),
                callback_url: format!("http://127.0.0.1:{port}{target}"),
            })
            .await;
        return match finished {
            Ok(_) => {
                let text =
                    format!("Totem is logged in to MCP server {name}. You can close this page.");
                answer(&mut stream, "200 OK", &text).await;
                println!(
                    "Logged in to MCP server {name}; its tokens are stored encrypted and refreshed when they expire. `totem mcp test {name}` checks it."
                );
                Ok(Exit::Success)
            }
            Err(e) => {
                let text = format!("Totem could not log in to MCP server {name}: {e}");
                answer(&mut stream, "400 Bad Request", &text).await;
                Err(e.into())
            }
        };
    }
}

/// `totem mcp logout NAME`.
pub async fn logout(endpoint: &Endpoint, name: &str) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start(endpoint).await?;
    let result = connection
        .client
        .call::<method::McpServerLogout>(ProviderRef {
            name: name.to_string(),
        })
        .await?;
    match result.was_logged_in {
        true => println!(
            "Logged out of MCP server {name}: its tokens are deleted. `totem mcp login {name}` logs in again."
        ),
        false => println!("MCP server {name} was not logged in; nothing to forget."),
    }
    Ok(Exit::Success)
}

/// The target (`/callback?code=…&state=…`) of the browser's GET, or `None` for anything else.
async fn request_target(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await;
        match read {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let mut words = head.lines().next()?.split_whitespace();
    match (words.next(), words.next()) {
        (Some("GET"), Some(target)) if target.starts_with('/') => Some(target.to_string()),
        _ => None,
    }
}

/// A small page for the browser.
async fn answer(stream: &mut TcpStream, status: &str, text: &str) {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>Totem</title><p style=\"font:16px sans-serif\">{escaped}</p>\n"
    );
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Opens `url` in the user's browser when there is one to open; returns whether it was started.
pub(crate) fn open_browser(url: &str) -> bool {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    {
        "xdg-open"
    } else {
        return false;
    };
    std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}
