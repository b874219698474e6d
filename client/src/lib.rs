//! A client for totemd: connect to the socket, `initialize`, call methods with their typed
//! params and results, and follow sessions' events. Used by the `totem` command line, the tests
//! and the benchmarks; other Rust programs may use it too.

#![deny(missing_docs)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{mpsc, oneshot};
use totem_protocol::{
    ClientCapabilities, DaemonEvent, EventKind, Implementation, InitializeParams, InitializeResult,
    Method, PROTOCOL_VERSION, SessionEvent, TerminalEvent, method,
};

/// What can go wrong talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be opened (no daemon there, or no permission).
    #[error("cannot reach totemd at {path}: {source}")]
    Connect {
        /// The socket tried.
        path: PathBuf,
        /// Why it could not be opened.
        source: std::io::Error,
    },
    /// Something sits at the socket's path that may not be the user's own totemd: nothing was
    /// sent to it.
    #[error(
        "not talking to {path}: {reason}, so it may not be your totemd and nothing was sent to it (requests carry your provider keys). Remove it, or fix its owner and mode, and try again"
    )]
    Untrusted {
        /// The socket.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading or writing the open connection failed.
    #[error("connection to totemd failed: {0}")]
    Io(#[from] std::io::Error),
    /// The daemon closed the connection before answering.
    #[error("totemd closed the connection")]
    Closed,
    /// The daemon's sentence is for people; the code is for programs (`ClientError::code`).
    #[error("{message}")]
    Rpc {
        /// The protocol's error code (`totem_protocol::ErrorCode`).
        code: i32,
        /// What went wrong, for people.
        message: String,
        /// Details some errors carry (conflicting files, the question a run waits on).
        data: Option<Value>,
    },
    /// An answer or event that does not parse as the protocol's types.
    #[error("totemd sent something this client cannot read: {0}")]
    Decode(#[from] serde_json::Error),
}

impl ClientError {
    /// The protocol error code, when the daemon answered with an error.
    pub fn code(&self) -> Option<i32> {
        match self {
            ClientError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }
}

type Reply = Result<Value, ClientError>;

enum Slot {
    /// Notifications that arrived before the subscriber registered.
    Early(Vec<Value>),
    Live(mpsc::UnboundedSender<Value>),
}

#[derive(Default)]
struct Shared {
    pending: HashMap<u64, oneshot::Sender<Reply>>,
    subscriptions: HashMap<String, Slot>,
    closed: bool,
    /// Why the daemon refused this connection, when it did (it says so in one line, then closes).
    refused: Option<(i32, String)>,
}

impl Shared {
    /// The error for a call on a closed connection.
    fn closed_error(&self) -> ClientError {
        match &self.refused {
            Some((code, message)) => ClientError::Rpc {
                code: *code,
                message: message.clone(),
                data: None,
            },
            None => ClientError::Closed,
        }
    }
}

/// A connection to totemd. Calls may be made concurrently from clones of the same `Client`.
#[derive(Clone)]
pub struct Client {
    writer: Arc<tokio::sync::Mutex<OwnedWriteHalf>>,
    shared: Arc<Mutex<Shared>>,
    next_id: Arc<AtomicU64>,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// The events of one subscribed session.
pub struct EventStream {
    /// The subscription's id, for `session.unsubscribe`.
    pub subscription: String,
    rx: mpsc::UnboundedReceiver<Value>,
}

impl EventStream {
    /// The next event; None when the subscription or the connection ended.
    pub async fn next(&mut self) -> Option<Result<SessionEvent, ClientError>> {
        let value = self.rx.recv().await?;
        Some(serde_json::from_value(value).map_err(ClientError::from))
    }

    /// The next event as the daemon sent it, for clients that pass events on untouched (`--json`)
    /// or that must show kinds newer than their build. None when the subscription or the
    /// connection ended.
    pub async fn next_value(&mut self) -> Option<Value> {
        self.rx.recv().await
    }

    /// The next event both ways: typed when this build knows its kind, and as the daemon sent
    /// it. None when the subscription or the connection ended.
    pub async fn next_received(&mut self) -> Option<Received> {
        self.rx.recv().await.map(Received::from)
    }
}

/// An event as received: its JSON, to pass on untouched or to show a kind newer than this
/// build, and its typed form when this build knows the kind.
#[derive(Debug, Clone)]
pub struct Received {
    /// The event as the daemon sent it.
    pub json: Value,
    /// None for a kind this build does not know (or a known kind it cannot read).
    pub event: Option<SessionEvent>,
}

impl From<Value> for Received {
    fn from(json: Value) -> Received {
        let event = SessionEvent::deserialize(&json).ok();
        Received { json, event }
    }
}

impl Received {
    /// The typed kind, when known.
    pub fn kind(&self) -> Option<&EventKind> {
        self.event.as_ref().map(|e| &e.kind)
    }
}

/// The daemon's own events (`daemon.subscribe`).
pub struct DaemonStream {
    /// The subscription's id.
    pub subscription: String,
    rx: mpsc::UnboundedReceiver<Value>,
}

impl DaemonStream {
    /// The next event; None when the subscription or the connection ended.
    pub async fn next(&mut self) -> Option<Result<DaemonEvent, ClientError>> {
        let value = self.rx.recv().await?;
        Some(serde_json::from_value(value).map_err(ClientError::from))
    }
}

/// The events of one subscribed terminal.
pub struct TerminalStream {
    /// The subscription's id.
    pub subscription: String,
    rx: mpsc::UnboundedReceiver<Value>,
}

impl TerminalStream {
    /// The next event; None when the subscription or the connection ended.
    pub async fn next(&mut self) -> Option<Result<TerminalEvent, ClientError>> {
        let value = self.rx.recv().await?;
        Some(serde_json::from_value(value).map_err(ClientError::from))
    }
}

#[derive(Deserialize)]
struct Incoming {
    id: Option<Value>,
    method: Option<String>,
    params: Option<Value>,
    result: Option<Value>,
    error: Option<RpcErrorBody>,
}

#[derive(Deserialize)]
struct RpcErrorBody {
    code: i32,
    message: String,
    data: Option<Value>,
}

impl Client {
    /// Connects without initializing (for tests of the handshake itself).
    ///
    /// Before connecting, the socket and its folder must belong to this user and be writable by
    /// no one else; after, the process listening must run as this user (`SO_PEERCRED`). Anything
    /// else gets [`ClientError::Untrusted`]: requests carry provider keys and file contents.
    pub async fn connect_raw(socket: &Path) -> Result<Client, ClientError> {
        let untrusted = |reason: String| ClientError::Untrusted {
            path: socket.to_path_buf(),
            reason,
        };
        let uid = nix::unistd::geteuid().as_raw();
        check_owned(socket, uid).map_err(|e| match e {
            Owned::Io(source) => ClientError::Connect {
                path: socket.to_path_buf(),
                source,
            },
            Owned::Not(reason) => untrusted(reason),
        })?;
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|source| ClientError::Connect {
                path: socket.to_path_buf(),
                source,
            })?;
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == uid => {}
            Ok(cred) => {
                return Err(untrusted(format!(
                    "the program listening there runs as user {}, not as you (user {uid})",
                    cred.uid()
                )));
            }
            Err(e) => {
                return Err(untrusted(format!(
                    "the user of the program listening there cannot be read ({e})"
                )));
            }
        }
        let (read, write) = stream.into_split();
        let shared = Arc::new(Mutex::new(Shared::default()));
        tokio::spawn(read_loop(BufReader::new(read), shared.clone()));
        Ok(Client {
            writer: Arc::new(tokio::sync::Mutex::new(write)),
            shared,
            next_id: Arc::new(AtomicU64::new(1)),
        })
    }

    /// Connects and runs `initialize` for this protocol version.
    pub async fn connect(
        socket: &Path,
        name: &str,
        capabilities: ClientCapabilities,
    ) -> Result<(Client, InitializeResult), ClientError> {
        let client = Client::connect_raw(socket).await?;
        let init = client
            .call::<method::Initialize>(InitializeParams {
                protocol_version: PROTOCOL_VERSION,
                client: Implementation {
                    name: name.to_string(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                },
                capabilities,
            })
            .await?;
        Ok((client, init))
    }

    /// Calls a method of the protocol with typed params and result.
    pub async fn call<M: Method>(&self, params: M::Params) -> Result<M::Result, ClientError> {
        let value = self
            .call_raw(M::NAME, serde_json::to_value(params)?)
            .await?;
        Ok(serde_json::from_value(value)?)
    }

    /// Calls any method with JSON params.
    pub async fn call_raw(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut shared = lock(&self.shared);
            if shared.closed || shared.refused.is_some() {
                return Err(shared.closed_error());
            }
            shared.pending.insert(id, tx);
        }
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Err(e) = self
            .send_line(serde_json::to_string(&line)?.as_bytes())
            .await
        {
            // A daemon that refused the connection said why before closing it: prefer its reason
            // (it reaches the pending call once the reader has it) to the broken pipe.
            return match tokio::time::timeout(std::time::Duration::from_secs(1), rx).await {
                Ok(Ok(Err(refused @ ClientError::Rpc { .. }))) => Err(refused),
                _ => Err(e),
            };
        }
        rx.await.map_err(|_| ClientError::Closed)?
    }

    /// Writes one raw line (a newline is added). For tests of malformed input.
    pub async fn send_line(&self, line: &[u8]) -> Result<(), ClientError> {
        let mut writer = self.writer.lock().await;
        writer.write_all(line).await?;
        writer.write_all(b"\n").await?;
        writer.flush().await?;
        Ok(())
    }

    /// Subscribes to a session's events after `after_seq`.
    pub async fn subscribe(
        &self,
        session_id: &str,
        after_seq: u64,
    ) -> Result<EventStream, ClientError> {
        let params = json!({"sessionId": session_id, "afterSeq": after_seq});
        self.subscribe_raw(method::SessionSubscribe::NAME, params)
            .await
    }

    /// Subscribes to a terminal's output after `after_seq` (0: from a redraw of its screen).
    pub async fn subscribe_terminal(
        &self,
        terminal_id: &str,
        after_seq: u64,
    ) -> Result<TerminalStream, ClientError> {
        let params = json!({"id": terminal_id, "afterSeq": after_seq});
        let EventStream { subscription, rx } = self
            .subscribe_raw(method::TerminalSubscribe::NAME, params)
            .await?;
        Ok(TerminalStream { subscription, rx })
    }

    /// Ends a terminal subscription.
    pub async fn unsubscribe_terminal(&self, subscription: &str) -> Result<bool, ClientError> {
        self.unsubscribe_from(method::TerminalUnsubscribe::NAME, subscription)
            .await
    }

    /// Subscribes to the daemon's events across sessions (`daemon.subscribe`).
    pub async fn subscribe_daemon(&self) -> Result<DaemonStream, ClientError> {
        let EventStream { subscription, rx } = self
            .subscribe_raw(method::DaemonSubscribe::NAME, json!({}))
            .await?;
        Ok(DaemonStream { subscription, rx })
    }

    /// Ends a `daemon.subscribe` subscription.
    pub async fn unsubscribe_daemon(&self, subscription: &str) -> Result<bool, ClientError> {
        self.unsubscribe_from(method::DaemonUnsubscribe::NAME, subscription)
            .await
    }

    async fn subscribe_raw(&self, method: &str, params: Value) -> Result<EventStream, ClientError> {
        let value = self.call_raw(method, params).await?;
        let subscription: String = serde_json::from_value(value)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let mut shared = lock(&self.shared);
        if let Some(Slot::Early(early)) = shared.subscriptions.remove(&subscription) {
            for v in early {
                let _ = tx.send(v);
            }
        }
        if !shared.closed {
            shared
                .subscriptions
                .insert(subscription.clone(), Slot::Live(tx));
        }
        Ok(EventStream { subscription, rx })
    }

    /// Ends a subscription.
    pub async fn unsubscribe(&self, subscription: &str) -> Result<bool, ClientError> {
        self.unsubscribe_from(method::SessionUnsubscribe::NAME, subscription)
            .await
    }

    async fn unsubscribe_from(
        &self,
        method: &str,
        subscription: &str,
    ) -> Result<bool, ClientError> {
        let done = self
            .call_raw(method, json!({"subscription": subscription}))
            .await?;
        lock(&self.shared).subscriptions.remove(subscription);
        Ok(done.as_bool().unwrap_or(false))
    }
}

async fn read_loop(
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    shared: Arc<Mutex<Shared>>,
) {
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(incoming) = serde_json::from_str::<Incoming>(&line) else {
            continue;
        };
        dispatch(incoming, &shared);
    }
    let mut shared = lock(&shared);
    shared.closed = true;
    let pending: Vec<_> = shared.pending.drain().collect();
    for (_, tx) in pending {
        let _ = tx.send(Err(shared.closed_error()));
    }
    shared.subscriptions.clear();
}

fn dispatch(incoming: Incoming, shared: &Mutex<Shared>) {
    if let Some(method) = incoming.method {
        if !["session.event", "terminal.event", "daemon.event"].contains(&method.as_str()) {
            return;
        }
        let Some(mut params) = incoming.params else {
            return;
        };
        let Some(Value::String(sub)) = params.get("subscription").cloned() else {
            return;
        };
        let result = params
            .get_mut("result")
            .map(Value::take)
            .unwrap_or(Value::Null);
        let mut shared = lock(shared);
        match shared
            .subscriptions
            .entry(sub)
            .or_insert_with(|| Slot::Early(Vec::new()))
        {
            Slot::Early(early) => early.push(result),
            Slot::Live(tx) => {
                let _ = tx.send(result);
            }
        }
        return;
    }
    let Some(id) = incoming.id.as_ref().and_then(Value::as_u64) else {
        // The daemon refused the whole connection: every call, waiting or to come, gets its
        // reason (the line may come before the first call is sent).
        if let Some(e) = incoming
            .error
            .filter(|e| e.code == totem_protocol::ErrorCode::TOO_MANY_CONNECTIONS.0)
        {
            let mut shared = lock(shared);
            shared.refused = Some((e.code, e.message));
            let pending: Vec<_> = shared.pending.drain().collect();
            for (_, tx) in pending {
                let _ = tx.send(Err(shared.closed_error()));
            }
        }
        return;
    };
    let Some(tx) = lock(shared).pending.remove(&id) else {
        return;
    };
    let reply = match (incoming.error, incoming.result) {
        (Some(e), _) => Err(ClientError::Rpc {
            code: e.code,
            message: e.message,
            data: e.data,
        }),
        (None, result) => Ok(result.unwrap_or(Value::Null)),
    };
    let _ = tx.send(reply);
}

/// Why a socket path is not taken as the user's own.
enum Owned {
    /// It could not be looked at (missing: no daemon there).
    Io(std::io::Error),
    /// It is there but not the user's alone.
    Not(String),
}

/// The socket at `socket` and its folder belong to `uid` and are writable by no one else; the
/// socket is a socket, not a link to one.
fn check_owned(socket: &Path, uid: u32) -> Result<(), Owned> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let meta = std::fs::symlink_metadata(socket).map_err(Owned::Io)?;
    if !meta.file_type().is_socket() {
        return Err(Owned::Not("it is not a socket".into()));
    }
    let folder = match socket.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let folder_meta = std::fs::metadata(folder).map_err(Owned::Io)?;
    for (what, meta) in [("the socket", &meta), ("its folder", &folder_meta)] {
        if meta.uid() != uid {
            return Err(Owned::Not(format!(
                "{what} belongs to user {}, not to you (user {uid})",
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(Owned::Not(format!(
                "{what} can be changed by other users (mode {:o})",
                meta.mode() & 0o7777
            )));
        }
    }
    Ok(())
}
