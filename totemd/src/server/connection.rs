//! One client connection: reads newline-delimited JSON-RPC, dispatches to the method table and
//! hands every answer to the connection's writer.
//!
//! jsonrpsee provides the method table and subscriptions but only HTTP/WebSocket servers, so this
//! loop is ours: one `ConnectionId` per connection (never shared, so one client cannot touch
//! another's subscriptions), one writer task, a bounded queue, a line limit answered with an
//! error. Calls run concurrently; answers carry the request id.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use jsonrpsee::core::server::{
    BoundedSubscriptions, ConnectionId, Extensions, MethodCallback, MethodResponse, MethodSink,
    Methods, SubscriptionState,
};
use jsonrpsee::types::{ErrorObject, ErrorObjectOwned, Id, Notification, Params, Request};
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use totem_protocol::{ErrorCode, MAX_LINE_BYTES};

use super::writer;

/// Subscriptions one connection may hold at once.
const MAX_SUBSCRIPTIONS: u32 = 1024;
/// Calls one connection may have in flight; more wait for a slot (back-pressure on its reader).
const MAX_IN_FLIGHT: usize = 256;

/// What a method handler may know about the connection that called it (in its `Extensions`).
#[derive(Debug, Default)]
pub struct ConnectionState {
    /// The protocol version agreed by `initialize`; 0 until then.
    pub protocol_version: AtomicU32,
    /// The client said it can answer permission questions.
    pub answers_permissions: std::sync::atomic::AtomicBool,
}

impl ConnectionState {
    /// Whether the client has sent `initialize`.
    pub fn initialized(&self) -> bool {
        self.protocol_version.load(Ordering::Acquire) != 0
    }
}

/// Serves one connection until the client leaves.
pub async fn serve(stream: UnixStream, methods: Methods, conn_id: usize) {
    let (read, write) = stream.into_split();
    let (queue, queue_rx) = mpsc::channel::<Box<RawValue>>(writer::QUEUE_CAPACITY);
    let (finish, finish_rx) = oneshot::channel();
    let writer_task = tokio::spawn(writer::run(write, queue_rx, finish_rx));

    let state = Arc::new(ConnectionState::default());
    let mut extensions = Extensions::new();
    extensions.insert(ConnectionId(conn_id));
    extensions.insert(state.clone());
    let subscriptions = BoundedSubscriptions::new(MAX_SUBSCRIPTIONS);
    let mut in_flight = JoinSet::new();
    let mut reader = BufReader::new(read);
    let mut line = Vec::with_capacity(1024);

    loop {
        line.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        let read = (&mut reader).take(limit).read_until(b'\n', &mut line).await;
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(conn = conn_id, error = %e, "read failed");
                break;
            }
        }
        if line.last() != Some(&b'\n') && line.len() > MAX_LINE_BYTES {
            // Over the limit: throw the rest of the line away, answer, keep the connection.
            if !discard_rest_of_line(&mut reader).await {
                break;
            }
            let message = format!(
                "line longer than {MAX_LINE_BYTES} bytes was discarded; send smaller messages (large content belongs in files)"
            );
            send(
                &queue,
                error(Id::Null, ErrorCode::LINE_TOO_LONG, &message, None),
            )
            .await;
            continue;
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        while in_flight.len() >= MAX_IN_FLIGHT {
            in_flight.join_next().await;
        }
        // Reap finished calls so the set stays small.
        while in_flight.try_join_next().is_some() {}

        let call = match classify(&line) {
            Classified::Call(call) => call,
            Classified::Ignore => continue,
            Classified::Reply(reply) => {
                send(&queue, reply).await;
                continue;
            }
        };
        if call.method == "initialize" {
            // Answered before the next line is read: a client may send its first calls right
            // behind `initialize`, and they must find the connection initialized.
            let reply = dispatch(
                call,
                &methods,
                &queue,
                conn_id,
                extensions.clone(),
                None,
                &state,
            );
            if let Some(reply) = reply.await {
                send(&queue, reply).await;
            }
            continue;
        }
        let methods = methods.clone();
        let queue = queue.clone();
        let extensions = extensions.clone();
        let permit = subscriptions.acquire();
        let state = state.clone();
        in_flight.spawn(async move {
            if let Some(reply) =
                dispatch(call, &methods, &queue, conn_id, extensions, permit, &state).await
            {
                send(&queue, reply).await;
            }
        });
    }

    // The client closed its side: finish the calls it made, deliver their answers, then stop.
    while in_flight.join_next().await.is_some() {}
    let _ = finish.send(());
    drop(queue);
    let _ = writer_task.await;
}

/// Reads and drops bytes up to and including the next newline. False when the connection ended.
async fn discard_rest_of_line(reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>) -> bool {
    loop {
        let (done, used) = match reader.fill_buf().await {
            Ok([]) | Err(_) => return false,
            Ok(buf) => match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (true, i + 1),
                None => (false, buf.len()),
            },
        };
        reader.consume(used);
        if done {
            return true;
        }
    }
}

/// A parsed request, owned so it can move into a task.
struct Call {
    id: Id<'static>,
    method: String,
    params: Option<String>,
}

enum Classified {
    Call(Call),
    /// A notification from the client: nothing to answer.
    Ignore,
    /// An error to send back at once.
    Reply(Box<RawValue>),
}

fn classify(line: &[u8]) -> Classified {
    let Ok(text) = std::str::from_utf8(line) else {
        return Classified::Reply(error(
            Id::Null,
            ErrorCode::PARSE_ERROR,
            "the line is not valid UTF-8",
            None,
        ));
    };
    if text.trim_start().starts_with('[') {
        return Classified::Reply(error(
            Id::Null,
            ErrorCode::INVALID_REQUEST,
            "batches are not supported; send one request per line",
            None,
        ));
    }
    match serde_json::from_str::<Request>(text) {
        Ok(req) => Classified::Call(Call {
            id: req.id.into_owned(),
            method: req.method.into_owned(),
            params: req.params.map(|p| p.get().to_string()),
        }),
        Err(parse_err) => {
            // A request whose id is not a string or an integer (1.5, true, {}, a number past
            // 64 bits) is not a notification: it gets an answer, with a null id.
            let has_id = serde_json::from_str::<serde_json::Value>(text)
                .is_ok_and(|v| v.get("id").is_some());
            if has_id {
                return Classified::Reply(error(
                    Id::Null,
                    ErrorCode::INVALID_REQUEST,
                    "the request id must be a string or an integer",
                    None,
                ));
            }
            if serde_json::from_str::<Notification<Option<&RawValue>>>(text).is_ok() {
                return Classified::Ignore;
            }
            match serde_json::from_str::<serde_json::Value>(text) {
                Err(_) => Classified::Reply(error(
                    Id::Null,
                    ErrorCode::PARSE_ERROR,
                    &format!("the line is not valid JSON: {parse_err}"),
                    None,
                )),
                Ok(value) => {
                    let id = match value.get("id") {
                        Some(serde_json::Value::Number(n)) => {
                            n.as_u64().map_or(Id::Null, Id::Number)
                        }
                        Some(serde_json::Value::String(s)) => Id::Str(s.clone().into()),
                        _ => Id::Null,
                    };
                    Classified::Reply(error(
                        id,
                        ErrorCode::INVALID_REQUEST,
                        "not a JSON-RPC 2.0 request: expected {\"jsonrpc\":\"2.0\",\"id\":…,\"method\":\"…\",\"params\":{…}}",
                        None,
                    ))
                }
            }
        }
    }
}

async fn dispatch(
    call: Call,
    methods: &Methods,
    queue: &mpsc::Sender<Box<RawValue>>,
    conn_id: usize,
    extensions: Extensions,
    permit: Option<jsonrpsee::core::server::SubscriptionPermit>,
    state: &ConnectionState,
) -> Option<Box<RawValue>> {
    let Call { id, method, params } = call;
    if method != "initialize" && !state.initialized() {
        return Some(error(
            id,
            ErrorCode::NOT_INITIALIZED,
            "call initialize first: {\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"client\":{\"name\":\"…\",\"version\":\"…\"}}}",
            None,
        ));
    }
    if let Some(field) = params.as_deref().and_then(oversized_id) {
        return Some(error(
            id,
            ErrorCode::NOT_FOUND,
            &format!("no such {field}: ids are at most {MAX_ID_BYTES} bytes"),
            None,
        ));
    }
    let Some((_, callback)) = methods.method_with_name(&method) else {
        return Some(error(
            id,
            ErrorCode::METHOD_NOT_FOUND,
            &format!("no method `{method}`; `initialize` lists the methods this daemon serves"),
            None,
        ));
    };
    let params = match (method.as_str(), params) {
        // jsonrpsee's unsubscribe takes `[id]`; the protocol says `{"subscription": id}`.
        ("session.unsubscribe" | "terminal.unsubscribe" | "daemon.unsubscribe", Some(p)) => {
            match serde_json::from_str::<totem_protocol::SessionUnsubscribeParams>(&p) {
                Ok(u) => Some(serde_json::to_string(&[u.subscription]).unwrap_or_default()),
                Err(e) => {
                    return Some(error(
                        id,
                        ErrorCode::INVALID_PARAMS,
                        &format!("invalid params: {e}"),
                        None,
                    ));
                }
            }
        }
        (_, p) => p,
    };
    let params = Params::new(params.as_deref());
    let max = usize::MAX;
    let response: MethodResponse = match callback {
        MethodCallback::Sync(cb) => (cb)(id, params, max, extensions),
        MethodCallback::Async(cb) => {
            (cb)(
                id,
                params.into_owned(),
                ConnectionId(conn_id),
                max,
                extensions,
            )
            .await
        }
        MethodCallback::Subscription(cb) => {
            let Some(permit) = permit else {
                return Some(error(
                    id,
                    ErrorCode::CONFLICT,
                    "too many subscriptions on this connection; unsubscribe from some first",
                    None,
                ));
            };
            let conn_state = SubscriptionState {
                conn_id: ConnectionId(conn_id),
                id_provider: &super::rpc::SubscriptionIds,
                subscription_permit: permit,
            };
            // The subscription answers through the sink itself.
            let _ = (cb)(
                id,
                params,
                MethodSink::new(queue.clone()),
                conn_state,
                extensions,
            )
            .await;
            return None;
        }
        MethodCallback::Unsubscription(cb) => {
            (cb)(id, params, ConnectionId(conn_id), max, extensions)
        }
    };
    if !response.is_method_call() {
        return None;
    }
    let (json, notify, _) = response.into_parts();
    if let Some(n) = notify {
        n.notify(true);
    }
    Some(json)
}

/// Longest id a parameter may hold. Real ids are about 30 bytes; the store's keys end at 64 KiB,
/// so a longer one could never name anything.
const MAX_ID_BYTES: usize = 1024;

/// The name of a parameter that holds an id (`sessionId`, `id`, `subscription` …) longer than
/// [`MAX_ID_BYTES`], if any.
fn oversized_id(params: &str) -> Option<String> {
    // Cheap test first: a line shorter than the limit cannot hold such an id.
    if params.len() <= MAX_ID_BYTES {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(params).ok()?;
    let object = value.as_object()?;
    object.iter().find_map(|(name, value)| {
        let is_id = name == "id" || name.ends_with("Id") || name == "subscription";
        let long = value.as_str().is_some_and(|s| s.len() > MAX_ID_BYTES);
        (is_id && long).then(|| name.clone())
    })
}

async fn send(queue: &mpsc::Sender<Box<RawValue>>, message: Box<RawValue>) {
    // A closed queue means the client is gone; there is nobody to tell.
    let _ = queue.send(message).await;
}

/// A JSON-RPC error response as one compact line.
pub fn error(
    id: Id<'_>,
    code: ErrorCode,
    message: &str,
    data: Option<serde_json::Value>,
) -> Box<RawValue> {
    let err: ErrorObjectOwned = ErrorObject::owned(code.0, message, data);
    MethodResponse::error(id, err).into_json()
}
