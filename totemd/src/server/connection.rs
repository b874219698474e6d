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

use super::writer::{self, Outbox};

/// Subscriptions one connection may hold at once (a client follows a few sessions; each
/// subscription holds its replay and a receiver while it lives).
pub const MAX_SUBSCRIPTIONS: u32 = 256;
/// Subscription messages that may wait between the subscriptions and the connection's queue;
/// when they fill, live events make a subscription lag. As many as the queue holds: a replay
/// filling a smaller channel would make the live events right behind it lag.
const SINK_CAPACITY: usize = writer::QUEUE_CAPACITY;
/// Calls one connection may have in flight; more wait for a slot (back-pressure on its reader).
/// Each holds its answer until the connection's queue has room for it.
const MAX_IN_FLIGHT: usize = 64;

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
    let (queue, queue_rx, budget) = Outbox::new();
    let (finish, finish_rx) = oneshot::channel();
    let writer_task = tokio::spawn(writer::run(write, queue_rx, finish_rx, budget.clone()));
    // Subscriptions write through jsonrpsee's sink, a plain channel: a relay moves what they send
    // into the counted queue, in order.
    let (sink, mut sink_rx) = mpsc::channel::<Box<RawValue>>(SINK_CAPACITY);
    let relay = {
        let queue = queue.clone();
        tokio::spawn(async move {
            while let Some(message) = sink_rx.recv().await {
                if !queue.send(message, conn_id).await {
                    return;
                }
            }
        })
    };

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
        budget.room().await;
        let limit = MAX_LINE_BYTES as u64 + 1;
        let mut limited = (&mut reader).take(limit);
        let read = tokio::select! {
            read = limited.read_until(b'\n', &mut line) => read,
            _ = budget.over().cancelled() => break,
        };
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
            queue
                .send(
                    error(Id::Null, ErrorCode::LINE_TOO_LONG, &message, None),
                    conn_id,
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
            tokio::select! {
                _ = in_flight.join_next() => {}
                _ = budget.over().cancelled() => break,
            }
        }
        if budget.over().is_cancelled() {
            break;
        }
        // Reap finished calls so the set stays small.
        while in_flight.try_join_next().is_some() {}

        let call = match classify(&line) {
            Classified::Call(call) => call,
            Classified::Ignore => continue,
            Classified::Reply(reply) => {
                queue.send(reply, conn_id).await;
                continue;
            }
        };
        if call.method == "initialize" {
            // Answered before the next line is read: a client may send its first calls right
            // behind `initialize`, and they must find the connection initialized.
            let reply = dispatch(
                call,
                &methods,
                &sink,
                conn_id,
                extensions.clone(),
                None,
                &state,
            );
            if let Some(reply) = reply.await {
                queue.send(reply, conn_id).await;
            }
            continue;
        }
        let methods = methods.clone();
        let queue = queue.clone();
        let sink = sink.clone();
        let extensions = extensions.clone();
        let permit = subscriptions.acquire();
        let state = state.clone();
        in_flight.spawn(async move {
            if let Some(reply) =
                dispatch(call, &methods, &sink, conn_id, extensions, permit, &state).await
            {
                queue.send(reply, conn_id).await;
            }
        });
    }

    if budget.over().is_cancelled() {
        // Dropped for not reading: its calls are stopped, what waited for it is freed.
        in_flight.abort_all();
        while in_flight.join_next().await.is_some() {}
        relay.abort();
        drop(sink);
        drop(queue);
        let _ = writer_task.await;
        return;
    }
    // The client closed its side: finish the calls it made, deliver their answers, then stop.
    while in_flight.join_next().await.is_some() {}
    drop(sink);
    // Subscriptions end when their sink sees the connection gone; what they sent is relayed.
    let _ = finish.send(());
    relay.abort();
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
            // 64 bits, one no float holds such as 1e400) is not a notification: it gets an
            // answer, with a null id. Members are read raw, so no number is parsed here.
            let has_id = serde_json::from_str::<std::collections::HashMap<String, &RawValue>>(text)
                .is_ok_and(|v| v.contains_key("id"));
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
    sink: &mpsc::Sender<Box<RawValue>>,
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
                    ErrorCode::TOO_MANY_SUBSCRIPTIONS,
                    &format!(
                        "this connection already holds {MAX_SUBSCRIPTIONS} subscriptions, the most it may; unsubscribe from some first (or open another connection)"
                    ),
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
                MethodSink::new(sink.clone()),
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
