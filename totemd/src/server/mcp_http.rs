//! Totem's MCP server over streamable HTTP (`mcpServer.http` in settings.json, off unless
//! enabled, read at start). The MCP side is `totem_mcp`, talking to this daemon over its own
//! socket like every client; this file owns the listener and its door: every request must carry
//! the bearer token `mcpToken.rotate` made (stored encrypted with the provider keys), a browser
//! `Origin` must be a localhost one, and an address other than loopback is not listened on while
//! no token exists. A refused request gets 401 without OAuth metadata, so clients do not start an
//! OAuth dance the server cannot finish.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use chacha20poly1305::aead::{KeyInit, OsRng};
use totem_client::Client;
use totem_mcp::{Connect, Connector, TotemMcp};
use totem_protocol::{ClientCapabilities, McpToken};

use crate::config::{ApiKey, ConfigError};
use crate::daemon::Daemon;

/// The token's name in the key store; no provider can have it (`:` is not allowed there).
pub const TOKEN_NAME: &str = "mcp-server:http";

/// `mcpToken.rotate`: a new random token replaces the old one at once.
pub fn rotate_token(daemon: &Daemon) -> Result<McpToken, ConfigError> {
    let bytes = chacha20poly1305::ChaCha20Poly1305::generate_key(&mut OsRng);
    let token = format!("totem_{}", hex::encode(bytes));
    let key = ApiKey::new(&token).map_err(ConfigError::BadRequest)?;
    daemon.settings.secrets().set(TOKEN_NAME, &key)?;
    tracing::info!("the MCP server's HTTP token was replaced");
    let http = http_settings(daemon);
    Ok(McpToken {
        token,
        url: http.url(),
        enabled: http.enabled,
    })
}

fn http_settings(daemon: &Daemon) -> crate::config::file::McpHttpSettings {
    daemon
        .settings
        .current()
        .mcp_server
        .clone()
        .unwrap_or_default()
        .http
}

/// Starts the listener when settings enable it; a failure is logged and leaves the daemon
/// serving its socket. Returns the address listened on. The same listener serves the web client
/// (`web.rs`); when MCP over HTTP is off, the first `web.open` starts it.
pub async fn start(daemon: Arc<Daemon>) -> Option<SocketAddr> {
    let http = http_settings(&daemon);
    if !http.enabled {
        return None;
    }
    match listen_now(daemon.clone(), true).await {
        Ok(addr) => {
            tracing::info!(%addr, "MCP server listening on http://{addr}/mcp");
            daemon.web.set_listening(addr).await;
            Some(addr)
        }
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "the MCP server's HTTP listener did not start");
            None
        }
    }
}

/// Binds `mcpServer.http`'s address and serves the web client there, and the MCP endpoint at
/// `/mcp` when `mcp` is set, until the daemon stops.
pub async fn listen_now(daemon: Arc<Daemon>, mcp: bool) -> anyhow::Result<SocketAddr> {
    let http = http_settings(&daemon);
    let addr = http.addr().map_err(anyhow::Error::msg)?;
    let loopback = addr.ip().is_loopback();
    if !loopback && !daemon.settings.secrets().has(TOKEN_NAME)? {
        anyhow::bail!(
            "refusing to listen on {addr} without a token: run `totem mcp token`, then restart totemd"
        );
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}; change mcpServer.http.port"))?;
    let addr = listener.local_addr()?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut router = super::web::router(daemon.clone(), loopback);
    if mcp {
        let socket = daemon.socket.clone();
        let connect: Connect = Arc::new(move || {
            let socket = socket.clone();
            Box::pin(async move {
                // It answers permission questions: with its clients' persons' answers.
                let capabilities = ClientCapabilities { permissions: true };
                let (client, _) = Client::connect(&socket, "totemd-mcp-http", capabilities).await?;
                Ok(client)
            })
        });
        let service = totem_mcp::http_service(
            TotemMcp::new(Connector::new(connect)),
            loopback,
            cancel.clone(),
        );
        let mcp_router = axum::Router::new()
            .nest_service("/mcp", service)
            .layer(middleware::from_fn_with_state(daemon.clone(), guard));
        router = mcp_router.merge(router);
    }
    let mut shutdown = daemon.shutdown_requested();
    tokio::spawn(async move {
        let stopped = async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
            cancel.cancel();
        };
        if let Err(e) = axum::serve(listener, router)
            .with_graceful_shutdown(stopped)
            .await
        {
            tracing::error!(error = %e, "the HTTP listener failed");
        }
    });
    Ok(addr)
}

/// The door: Origin, then the bearer token; a session DELETE answers 204.
async fn guard(State(daemon): State<Arc<Daemon>>, request: Request, next: Next) -> Response {
    if let Some(origin) = request.headers().get(header::ORIGIN)
        && !local_origin(origin)
    {
        return (
            StatusCode::FORBIDDEN,
            [(header::CONNECTION, "close")],
            "Origin not allowed: only pages served from localhost may call Totem's MCP server\n",
        )
            .into_response();
    }
    if let Err(message) = check_token(&daemon, request.headers()) {
        return (
            StatusCode::UNAUTHORIZED,
            // The body is left unread, so the connection cannot be used again: say so, or a
            // client sends its next request on it and finds it closed.
            [
                (header::WWW_AUTHENTICATE, "Bearer realm=\"totem\""),
                (header::CONNECTION, "close"),
            ],
            message,
        )
            .into_response();
    }
    let request = match whole_body(request).await {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let delete = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

/// Largest request body read (MCP messages are small).
const MAX_BODY: usize = 4 << 20;
/// How long a client may take to send a body.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Reads a POST's whole body within [`BODY_TIMEOUT`] and [`MAX_BODY`], and refuses a JSON body
/// that does not parse with 400 (rather than the MCP layer's 415), so a slow or endless body
/// cannot hold a connection and a bad one gets a plain answer.
async fn whole_body(request: Request) -> Result<Request, Response> {
    if request.method() != Method::POST {
        return Ok(request);
    }
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > MAX_BODY as u64) {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {} MiB\n", MAX_BODY >> 20),
        )
            .into_response());
    }
    let (parts, body) = request.into_parts();
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY)).await
    {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return Err((
                StatusCode::BAD_REQUEST,
                format!(
                    "the body could not be read (at most {} MiB)\n",
                    MAX_BODY >> 20
                ),
            )
                .into_response());
        }
        Err(_) => {
            return Err((
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body did not arrive within {} s\n",
                    BODY_TIMEOUT.as_secs()
                ),
            )
                .into_response());
        }
    };
    if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
        return Err((
            StatusCode::BAD_REQUEST,
            "the body is not valid JSON: send one JSON-RPC message\n",
        )
            .into_response());
    }
    Ok(Request::from_parts(parts, axum::body::Body::from(bytes)))
}

fn check_token(daemon: &Daemon, headers: &HeaderMap) -> Result<(), &'static str> {
    let offered = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .ok_or("missing bearer token: send `Authorization: Bearer TOKEN` (`totem mcp token` makes one)\n")?;
    let stored = match daemon.settings.secrets().get(TOKEN_NAME) {
        Ok(Some(stored)) => stored,
        Ok(None) => {
            return Err("no token is set: run `totem mcp token` and use the token it prints\n");
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot read the MCP server's token");
            return Err("the stored token cannot be read: run `totem mcp token` for a new one\n");
        }
    };
    crate::redact::register(stored.expose());
    if same(offered.as_bytes(), stored.expose().as_bytes()) {
        Ok(())
    } else {
        Err("wrong bearer token: use the one `totem mcp token` printed last\n")
    }
}

/// Compares in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `http(s)://localhost`, `127.0.0.1` or `[::1]`, any port.
fn local_origin(origin: &HeaderValue) -> bool {
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => rest.split(':').next().unwrap_or(""),
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_localhost_origins_pass() {
        for ok in [
            "http://localhost:3000",
            "https://localhost",
            "http://127.0.0.1:7311",
            "http://[::1]:8080",
        ] {
            assert!(local_origin(&HeaderValue::from_static(ok)), "{ok}");
        }
        for bad in [
            "https://evil.example",
            "http://localhost.evil.example",
            "null",
            "http://127.0.0.2",
        ] {
            assert!(!local_origin(&HeaderValue::from_static(bad)), "{bad}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"totem_ab", b"totem_ab"));
        assert!(!same(b"totem_ab", b"totem_ac"));
        assert!(!same(b"totem_a", b"totem_ab"));
    }
}
