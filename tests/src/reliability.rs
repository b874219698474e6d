//! Shared by the reliability tests and the soak program: an Ollama-speaking echo server whose
//! answer names the prompt it answers (so an answer that reached the wrong session is seen), and
//! helpers to set up a daemon with it and follow runs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{Method, Uri};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use totem_client::{Client, EventStream};
use totem_protocol::{EventKind, Message, Part, SessionEvent, SessionMessages};

/// The model the echo server lists (with tools and a 128k window).
pub const ECHO_MODEL: &str = "echo/echo:latest";

/// How the echo server streams: `chunks` deltas with `delay_ms` between them.
#[derive(Default)]
pub struct EchoShape {
    pub chunks: AtomicUsize,
    pub delay_ms: AtomicU64,
    /// Chat requests answered so far.
    pub answered: AtomicUsize,
}

/// An Ollama `/api/chat` server that answers every prompt with [`echo_answer`] of the tag found
/// in it, streamed in `chunks` pieces.
pub struct Echo {
    pub addr: SocketAddr,
    pub shape: Arc<EchoShape>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Echo {
    pub async fn start(chunks: usize, delay_ms: u64) -> Echo {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the echo server");
        let addr = listener.local_addr().expect("echo address");
        let shape = Arc::new(EchoShape::default());
        shape.chunks.store(chunks.max(1), Ordering::Relaxed);
        shape.delay_ms.store(delay_ms, Ordering::Relaxed);
        let app = Router::new().fallback(handle).with_state(shape.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Echo { addr, shape, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set(&self, chunks: usize, delay_ms: u64) {
        self.shape.chunks.store(chunks.max(1), Ordering::Relaxed);
        self.shape.delay_ms.store(delay_ms, Ordering::Relaxed);
    }
}

/// The tag a prompt carries: the text between `[[` and `]]`.
pub fn tag_of(text: &str) -> Option<&str> {
    let start = text.rfind("[[")? + 2;
    let end = start + text[start..].find("]]")?;
    Some(&text[start..end])
}

/// The prompt text carrying `tag`.
pub fn prompt_text(tag: &str) -> String {
    format!("Please answer [[{tag}]]")
}

/// What the echo server answers to `tag`, streamed in `chunks` pieces: the whole is this text.
pub fn echo_answer(tag: &str, chunks: usize) -> String {
    pieces(tag, chunks).concat()
}

fn pieces(tag: &str, chunks: usize) -> Vec<String> {
    let mut out = vec![format!("answer to {tag}")];
    out.extend((1..chunks).map(|i| format!(" {i}")));
    out
}

async fn handle(
    State(shape): State<Arc<EchoShape>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let reply = |value: Value| {
        Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(value.to_string()))
            .unwrap_or_default()
    };
    match (method.as_str(), uri.path()) {
        ("GET", "/api/tags") => reply(json!({"models": [{"name": "echo:latest",
            "model": "echo:latest", "modified_at": "2025-05-04T17:37:44.706015396-07:00",
            "size": 1, "digest": "e0", "details": {"format": "gguf", "family": "llama"}}]})),
        ("POST", "/api/show") => reply(json!({
            "details": {"format": "gguf", "family": "llama"},
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
            "capabilities": ["completion", "tools"]})),
        ("POST", "/api/chat") => {
            let last_user = request["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_string();
            let tag = tag_of(&last_user).unwrap_or("no tag").to_string();
            let chunks = shape.chunks.load(Ordering::Relaxed);
            let delay = Duration::from_millis(shape.delay_ms.load(Ordering::Relaxed));
            shape.answered.fetch_add(1, Ordering::Relaxed);
            let line = |message: Value, done: bool| {
                let mut text = json!({"model": "echo:latest",
                    "created_at": "2026-01-02T10:00:00.1Z", "message": message, "done": done})
                .to_string();
                text.push('\n');
                Bytes::from(text)
            };
            let frames: Vec<Bytes> = pieces(&tag, chunks)
                .into_iter()
                .map(|p| line(json!({"role": "assistant", "content": p}), false))
                .collect();
            let mut last = json!({"model": "echo:latest", "created_at": "2026-01-02T10:00:00.1Z",
                "message": {"role": "assistant", "content": ""}, "done": true,
                "done_reason": "stop", "prompt_eval_count": 20, "eval_count": chunks})
            .to_string();
            last.push('\n');
            let stream = async_stream::stream! {
                for (i, frame) in frames.into_iter().enumerate() {
                    if i > 0 && !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    yield Ok::<Bytes, std::io::Error>(frame);
                }
                yield Ok(Bytes::from(last));
            };
            Response::builder()
                .header("content-type", "application/x-ndjson")
                .body(Body::from_stream(stream))
                .unwrap_or_default()
        }
        _ => Response::builder()
            .status(404)
            .body(Body::from(r#"{"error":"not found"}"#))
            .unwrap_or_default(),
    }
}

/// Adds the echo server as provider `echo` (no retries).
pub async fn add_echo_provider(client: &Client, echo: &Echo) {
    client
        .call_raw(
            "provider.add",
            json!({"name": "echo", "kind": "ollama", "url": echo.url(),
                   "defaultModel": "echo:latest", "maxRetries": 0}),
        )
        .await
        .expect("provider.add");
}

pub use crate::setup::{create_session, open_project, plain_project};

/// Sends the prompt for `tag` with the echo model; returns (run id, user message id).
pub async fn prompt(client: &Client, session: &str, tag: &str) -> (String, String) {
    let accepted = client
        .call_raw(
            "session.prompt",
            json!({"sessionId": session, "text": prompt_text(tag), "model": ECHO_MODEL}),
        )
        .await
        .expect("session.prompt");
    (
        accepted["runId"].as_str().expect("run id").to_string(),
        accepted["messageId"]
            .as_str()
            .expect("message id")
            .to_string(),
    )
}

/// The id of the run an event ends, if it ends one.
pub fn ended_run(kind: &EventKind) -> Option<&str> {
    match kind {
        EventKind::RunDone { run }
        | EventKind::RunFailed { run }
        | EventKind::RunAborted { run }
        | EventKind::RunInterrupted { run } => Some(&run.id),
        _ => None,
    }
}

/// Events until run `run_id` ends (the ending event included).
pub async fn follow(stream: &mut EventStream, run_id: &str, secs: u64) -> Vec<SessionEvent> {
    let mut out = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(secs), stream.next())
            .await
            .unwrap_or_else(|_| panic!("run {run_id} did not end within {secs} s: {out:#?}"))
            .expect("subscription open")
            .expect("event decodes");
        let end = ended_run(&event.kind) == Some(run_id);
        out.push(event);
        if end {
            return out;
        }
    }
}

/// The session's stored events after `after_seq`, up to now: subscribes, then renames the session
/// to `marker`, whose `session.updated` comes after the whole replay and is the last event
/// returned. Each event may take up to `secs`.
pub async fn replay_to_marker(
    client: &Client,
    session: &str,
    after_seq: u64,
    marker: &str,
    secs: u64,
) -> Result<Vec<SessionEvent>, String> {
    let mut events = client
        .subscribe(session, after_seq)
        .await
        .map_err(|e| format!("subscribe: {e}"))?;
    client
        .call_raw(
            "session.rename",
            json!({"sessionId": session, "title": marker}),
        )
        .await
        .map_err(|e| format!("session.rename: {e}"))?;
    let mut out = Vec::new();
    loop {
        let event = match tokio::time::timeout(Duration::from_secs(secs), events.next()).await {
            Ok(Some(Ok(event))) => event,
            other => return Err(format!("the replay of {session} did not end: {other:?}")),
        };
        let last = matches!(&event.kind,
            EventKind::SessionUpdated { session } if session.title == marker);
        out.push(event);
        if last {
            let _ = client.unsubscribe(&events.subscription).await;
            return Ok(out);
        }
    }
}

/// The text of the finished text parts among `events`, joined.
pub fn answer_text(events: &[SessionEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PartDone {
                part: Part::Text { text },
                ..
            } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Every stored message of a session, oldest first, read page by page.
pub async fn all_messages(client: &Client, session: &str) -> Result<Vec<Message>, String> {
    let mut out = Vec::new();
    let mut after = 0u64;
    loop {
        let page = client
            .call_raw(
                "session.messages",
                json!({"sessionId": session, "afterSeq": after, "limit": 1000}),
            )
            .await
            .map_err(|e| format!("session.messages: {e}"))?;
        let page: SessionMessages =
            serde_json::from_value(page).map_err(|e| format!("session.messages: {e}"))?;
        out.extend(page.messages);
        match page.next_after_seq {
            Some(next) => after = next,
            None => return Ok(out),
        }
    }
}

/// The text parts of a message, joined.
pub fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// A small random generator (xorshift), seeded so a failure can be replayed.
pub struct Rng(pub u64);

impl Rng {
    pub fn from_time() -> Rng {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9e37_79b9, |d| d.as_nanos() as u64);
        Rng(seed | 1)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}
