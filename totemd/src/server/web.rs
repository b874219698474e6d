//! The web client (`web/` in the repository): a page served on the HTTP listener, speaking the
//! daemon's JSON-RPC protocol over a WebSocket at `/rpc`. Each WebSocket is relayed to a socket
//! connection of its own, so the page gets exactly the methods, events and errors every other
//! client gets (one protocol, one more transport).
//!
//! The door has the MCP endpoint's threat model: `web.open` (what `totem web` calls) mints a
//! one-time token that expires after five minutes; the page's first load trades it for an
//! HttpOnly, SameSite=Strict cookie, and nothing is answered without that token or cookie. The
//! `Host` must be a loopback name while the listener is on loopback (DNS rebinding), a browser's
//! `Origin` must be the page's own, the WebSocket needs that `Origin`, and every page carries a
//! Content-Security-Policy that allows only the page's own script, style and connection. The
//! bundle is built by `npm run build` in `web/` and embedded here, so a plain `cargo build`
//! serves it with no Node on the machine.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use chacha20poly1305::aead::{KeyInit, OsRng};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use totem_protocol::{ErrorCode, MAX_LINE_BYTES, WebOpened};

use crate::daemon::Daemon;

const INDEX_HTML: &str = include_str!("../../../web/dist/index.html");
const APP_JS: &str = include_str!("../../../web/dist/app.js");
const APP_CSS: &str = include_str!("../../../web/dist/app.css");

/// The cookie the one-time token is traded for.
const COOKIE: &str = "totem_web";
/// How long a one-time token from `web.open` stays good.
const TICKET_LIFE: Duration = Duration::from_secs(300);
/// One-time tokens kept at most (older ones are dropped first).
const MAX_TICKETS: usize = 64;
/// Cookies kept at most (one per browser that opened the page; the oldest goes first).
const MAX_COOKIES: usize = 256;

/// The web client's state: the listener's address and the tokens and cookies it accepts.
#[derive(Default)]
pub struct Web {
    /// Where the HTTP listener answers, once it runs (started with the daemon when the MCP
    /// endpoint is enabled, else by the first `web.open`).
    listening: tokio::sync::Mutex<Option<SocketAddr>>,
    tickets: Mutex<HashMap<String, Instant>>,
    cookies: Mutex<Vec<String>>,
}

impl Web {
    /// Records the running listener's address.
    pub async fn set_listening(&self, addr: SocketAddr) {
        *self.listening.lock().await = Some(addr);
    }

    fn mint_ticket(&self) -> String {
        let ticket = random_token();
        let mut tickets = self.tickets.lock().unwrap_or_else(|p| p.into_inner());
        tickets.retain(|_, made| made.elapsed() < TICKET_LIFE);
        if tickets.len() >= MAX_TICKETS
            && let Some(oldest) = tickets
                .iter()
                .min_by_key(|(_, made)| **made)
                .map(|(t, _)| t.clone())
        {
            tickets.remove(&oldest);
        }
        tickets.insert(ticket.clone(), Instant::now());
        ticket
    }

    /// Takes a one-time token: true once, while it is fresh.
    fn redeem(&self, offered: &str) -> bool {
        let mut tickets = self.tickets.lock().unwrap_or_else(|p| p.into_inner());
        let found = tickets
            .keys()
            .find(|t| same(t.as_bytes(), offered.as_bytes()))
            .cloned();
        match found.and_then(|t| tickets.remove(&t)) {
            Some(made) => made.elapsed() < TICKET_LIFE,
            None => false,
        }
    }

    fn new_cookie(&self) -> String {
        let cookie = random_token();
        let mut cookies = self.cookies.lock().unwrap_or_else(|p| p.into_inner());
        if cookies.len() >= MAX_COOKIES {
            cookies.remove(0);
        }
        cookies.push(cookie.clone());
        cookie
    }

    fn knows_cookie(&self, offered: &str) -> bool {
        let cookies = self.cookies.lock().unwrap_or_else(|p| p.into_inner());
        cookies
            .iter()
            .any(|c| same(c.as_bytes(), offered.as_bytes()))
    }
}

fn random_token() -> String {
    hex::encode(chacha20poly1305::ChaCha20Poly1305::generate_key(&mut OsRng))
}

/// Compares in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `web.open`: starts the listener when it is not running and returns the page's URL with a
/// fresh one-time token.
pub async fn open(daemon: Arc<Daemon>) -> Result<WebOpened, String> {
    let addr = {
        let mut listening = daemon.web.listening.lock().await;
        match *listening {
            Some(addr) => addr,
            None => {
                let addr = super::mcp_http::listen_now(daemon.clone(), false)
                    .await
                    .map_err(|e| format!("{e:#}"))?;
                *listening = Some(addr);
                addr
            }
        }
    };
    let remote = !addr.ip().is_loopback();
    if remote {
        tracing::warn!(
            %addr,
            "the web client is reachable from other machines at {addr}; anyone with a one-time token from `totem web` can steer this daemon"
        );
    }
    let ticket = daemon.web.mint_ticket();
    let host = if addr.ip().is_unspecified() || addr.ip().is_loopback() {
        match addr {
            SocketAddr::V6(_) if !addr.ip().is_unspecified() => format!("[::1]:{}", addr.port()),
            _ => format!("127.0.0.1:{}", addr.port()),
        }
    } else {
        addr.to_string()
    };
    Ok(WebOpened {
        url: format!("http://{host}/?token={ticket}"),
        remote,
    })
}

/// The web routes, behind their door.
pub fn router(daemon: Arc<Daemon>, loopback: bool) -> axum::Router {
    let door = Door { daemon, loopback };
    axum::Router::new()
        .route("/", axum::routing::get(index))
        .route("/app.js", axum::routing::get(app_js))
        .route("/app.css", axum::routing::get(app_css))
        .route("/rpc", axum::routing::get(rpc))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(door.clone(), guard))
        .with_state(door)
}

#[derive(Clone)]
struct Door {
    daemon: Arc<Daemon>,
    loopback: bool,
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::CONNECTION, "close"),
        ],
        format!("{message}\n"),
    )
        .into_response()
}

/// The door: Host, Origin, then the one-time token or the cookie. Adds the security headers to
/// every answer.
async fn guard(State(door): State<Door>, mut request: Request, next: Next) -> Response {
    let host = match request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
    {
        Some(host) if plain_host(host) => host.to_string(),
        _ => return with_headers(refuse(StatusCode::BAD_REQUEST, "a Host header is needed")),
    };
    if door.loopback && !loopback_host(&host) {
        // A page of another site whose name was pointed at 127.0.0.1 (DNS rebinding).
        return with_headers(refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "this listener answers only to localhost, 127.0.0.1 and [::1]; open the address `totem web` prints",
        ));
    }
    let origin = request.headers().get(header::ORIGIN).cloned();
    if let Some(origin) = &origin
        && origin.as_bytes() != format!("http://{host}").as_bytes()
    {
        return with_headers(refuse(
            StatusCode::FORBIDDEN,
            "Origin not allowed: only the page Totem serves may call it",
        ));
    }
    let is_rpc = request.uri().path() == "/rpc";
    if is_rpc && origin.is_none() {
        return with_headers(refuse(
            StatusCode::FORBIDDEN,
            "the WebSocket needs the page's Origin",
        ));
    }
    let ticket = query_token(request.uri().query());
    let mut new_cookie = None;
    let admitted = match ticket {
        Some(ticket) if request.uri().path() == "/" && request.method() == Method::GET => {
            if door.daemon.web.redeem(&ticket) {
                new_cookie = Some(door.daemon.web.new_cookie());
                true
            } else {
                return with_headers(refuse(
                    StatusCode::UNAUTHORIZED,
                    "this link was used already or has expired: run `totem web` for a new one",
                ));
            }
        }
        _ => cookie(request.headers()).is_some_and(|c| door.daemon.web.knows_cookie(&c)),
    };
    if !admitted {
        return with_headers(refuse(
            StatusCode::UNAUTHORIZED,
            "open the address `totem web` prints (this browser has no valid Totem cookie)",
        ));
    }
    // xterm.js (the terminals) writes `<style>` elements of its own: the policy admits a
    // `<style>` only with this answer's nonce, which the page reads from its `<meta>`.
    let nonce = StyleNonce(random_token()[..32].to_string());
    request.extensions_mut().insert(nonce.clone());
    let mut response = next.run(request).await;
    if let Some(cookie) = new_cookie
        && let Ok(value) = HeaderValue::from_str(&format!(
            "{COOKIE}={cookie}; HttpOnly; SameSite=Strict; Path=/"
        ))
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    let csp = format!(
        "default-src 'none'; script-src 'self'; style-src 'self' 'nonce-{}'; img-src 'self' data:; \
         font-src 'self'; connect-src 'self' ws://{host}; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'",
        nonce.0
    );
    if let Ok(value) = HeaderValue::from_str(&csp) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, value);
    }
    with_headers(response)
}

fn with_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
        );
    }
    response
}

/// A Host header of plain characters (it is echoed into the policy).
fn plain_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
}

/// `localhost`, `127.0.0.1` or `[::1]`, with or without a port.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    matches!(name, "localhost" | "127.0.0.1" | "::1")
}

fn query_token(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .map(str::to_string)
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            pair.trim()
                .strip_prefix(&format!("{COOKIE}="))
                .map(str::to_string)
        })
}

fn asset(content_type: &'static str, body: &'static str, cache: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, cache),
        ],
        body,
    )
        .into_response()
}

/// The nonce a `<style>` element needs in this answer's page (fresh for every answer).
#[derive(Clone)]
struct StyleNonce(String);

async fn index(axum::Extension(nonce): axum::Extension<StyleNonce>) -> Response {
    let page = INDEX_HTML.replacen(
        r#"<meta name="totem-style-nonce" content="">"#,
        &format!(r#"<meta name="totem-style-nonce" content="{}">"#, nonce.0),
        1,
    );
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page,
    )
        .into_response()
}

async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS, "no-cache")
}

async fn app_css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS, "no-cache")
}

async fn not_found() -> Response {
    refuse(StatusCode::NOT_FOUND, "no such page")
}

async fn rpc(State(door): State<Door>, request: Request) -> Response {
    let (mut parts, _) = request.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let socket = door.daemon.socket.clone();
    upgrade
        .max_message_size(MAX_LINE_BYTES)
        .on_upgrade(move |ws| relay(ws, socket))
}

/// Relays one WebSocket to a socket connection of its own until either side closes.
async fn relay(ws: WebSocket, socket: PathBuf) {
    let (mut to_page, mut from_page) = ws.split();
    let stream = match tokio::net::UnixStream::connect(&socket).await {
        Ok(stream) => stream,
        Err(e) => {
            tracing::warn!(error = %e, "the web client's WebSocket could not reach the socket");
            let _ = to_page.send(Message::Close(None)).await;
            return;
        }
    };
    let (read, mut write) = stream.into_split();
    let (errors, mut error_rx) = tokio::sync::mpsc::channel::<String>(8);
    let up = async move {
        while let Some(Ok(message)) = from_page.next().await {
            let text = match message {
                Message::Text(text) => text,
                Message::Close(_) => break,
                Message::Binary(_) => {
                    let _ = errors
                        .send(error_line("send JSON-RPC messages as text, not binary"))
                        .await;
                    continue;
                }
                _ => continue,
            };
            if text.as_str().contains('\n') {
                let _ = errors
                    .send(error_line(
                        "one JSON-RPC message per WebSocket message, with no raw newline inside",
                    ))
                    .await;
                continue;
            }
            if write.write_all(text.as_bytes()).await.is_err()
                || write.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
    };
    let down = async move {
        let mut lines = BufReader::new(read).lines();
        loop {
            let line = tokio::select! {
                line = lines.next_line() => match line {
                    Ok(Some(line)) => line,
                    _ => break,
                },
                Some(error) = error_rx.recv() => error,
            };
            if to_page.send(Message::Text(line.into())).await.is_err() {
                break;
            }
        }
        let _ = to_page.send(Message::Close(None)).await;
    };
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}

fn error_line(message: &str) -> String {
    super::connection::error(
        jsonrpsee::types::Id::Null,
        ErrorCode::INVALID_REQUEST,
        message,
        None,
    )
    .get()
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_pass_on_loopback() {
        for ok in ["localhost:7311", "127.0.0.1:1", "[::1]:8080", "localhost"] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in ["evil.example:7311", "localhost.evil.example", "127.0.0.2:1"] {
            assert!(!loopback_host(bad), "{bad}");
        }
        assert!(!plain_host("a\"b"));
        assert!(!plain_host("a b"));
    }

    #[test]
    fn a_ticket_works_once() {
        let web = Web::default();
        let ticket = web.mint_ticket();
        assert!(web.redeem(&ticket));
        assert!(!web.redeem(&ticket));
        assert!(!web.redeem("nonsense"));
        let cookie = web.new_cookie();
        assert!(web.knows_cookie(&cookie));
        assert!(!web.knows_cookie("nonsense"));
    }
}
