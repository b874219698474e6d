//! The method handlers, registered under the names of the protocol's method table. A handler
//! parses its params (unknown fields are errors), calls into the daemon and maps its errors to
//! protocol error codes with messages that say what to do.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use jsonrpsee::core::server::{
    Extensions, PendingSubscriptionSink, RpcModule, SubscriptionMessage,
};
use jsonrpsee::core::traits::IdProvider;
use jsonrpsee::types::{ErrorObject, ErrorObjectOwned, Params, SubscriptionId};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast::error::RecvError;
use totem_protocol::{
    Ack, DaemonCounts, DaemonEvent, DaemonEventKind, DaemonStatus, ErrorCode, EventKind,
    Implementation, InitializeParams, InitializeResult, ListParams, Method, NoParams, Page,
    ProjectOpenParams, SUPPORTED_VERSIONS, ServerCapabilities, SessionCreateParams, SessionDeleted,
    SessionEvent, SessionListParams, SessionMessages, SessionMessagesParams, SessionPromptParams,
    SessionRef, SessionRenameParams, SessionSubscribeParams, StoreBackupParams, StoreBackupResult,
    method,
};

use super::connection::ConnectionState;
use crate::daemon::{Daemon, ProjectError};
use crate::error::DaemonError;
use crate::session::{SessionError, Subscription};
use crate::store::StoreError;

type RpcResult<T> = Result<T, ErrorObjectOwned>;

/// Subscription ids: opaque strings, unique for the daemon's life.
#[derive(Debug)]
pub struct SubscriptionIds;

impl IdProvider for SubscriptionIds {
    fn next_id(&self) -> SubscriptionId<'static> {
        SubscriptionId::Str(crate::util::new_id("sub").into())
    }
}

/// A JSON-RPC error object with the protocol's `code` and `message`, without data.
pub fn err(code: ErrorCode, message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObject::owned(code.0, message.into(), None::<()>)
}

impl From<SessionError> for ErrorObjectOwned {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::NotFound(_) => err(ErrorCode::NOT_FOUND, e.to_string()),
            SessionError::Store(s) => s.into(),
        }
    }
}

impl From<ProjectError> for ErrorObjectOwned {
    fn from(e: ProjectError) -> Self {
        match e {
            ProjectError::Store(s) => s.into(),
            other => err(ErrorCode::INVALID_PATH, other.to_string()),
        }
    }
}

impl From<DaemonError> for ErrorObjectOwned {
    fn from(e: DaemonError) -> Self {
        match e {
            DaemonError::Session(s) => s.into(),
            DaemonError::Store(s) => s.into(),
            DaemonError::NotFound(m) => err(ErrorCode::NOT_FOUND, m),
            DaemonError::Invalid(m) => err(ErrorCode::INVALID_PARAMS, m),
            DaemonError::Busy(m) => err(ErrorCode::CONFLICT, m),
            DaemonError::Conflict { message, files } => ErrorObject::owned(
                ErrorCode::CONFLICT.0,
                message,
                Some(serde_json::json!({ "files": files })),
            ),
            DaemonError::Path(m) => err(ErrorCode::INVALID_PATH, m),
            DaemonError::Failed(m) => err(ErrorCode::INTERNAL_ERROR, m),
        }
    }
}

impl From<StoreError> for ErrorObjectOwned {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::BadCursor => err(ErrorCode::INVALID_PARAMS, e.to_string()),
            other => {
                tracing::error!(error = %other, "store failure");
                err(ErrorCode::INTERNAL_ERROR, other.to_string())
            }
        }
    }
}

/// Params as a named object; none at all counts as `{}`. Positional arrays are refused.
fn parse<T: DeserializeOwned>(params: &Params<'_>) -> RpcResult<T> {
    let raw = params.as_str().unwrap_or("{}");
    let raw = if raw.trim() == "null" { "{}" } else { raw };
    if raw.trim_start().starts_with('[') {
        return Err(err(
            ErrorCode::INVALID_PARAMS,
            "params must be an object with named fields, not an array",
        ));
    }
    serde_json::from_str(raw)
        .map_err(|e| err(ErrorCode::INVALID_PARAMS, format!("invalid params: {e}")))
}

/// The projects with their detected kind (`totem_totaljs::detect`, a few small files read per
/// project, off the async threads). A folder that is gone keeps no kind.
async fn with_kind(mut items: Vec<totem_protocol::Project>) -> Vec<totem_protocol::Project> {
    let paths: Vec<String> = items.iter().map(|p| p.path.clone()).collect();
    let kinds = tokio::task::spawn_blocking(move || {
        paths
            .iter()
            .map(|p| {
                let root = std::path::Path::new(p);
                root.is_dir()
                    .then(|| totem_totaljs::detect(root).kind().to_string())
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    for (item, kind) in items.iter_mut().zip(kinds) {
        item.kind = kind;
    }
    items
}

fn page_limit(limit: Option<u32>, default: usize, max: usize) -> usize {
    limit.map_or(default, |l| (l as usize).clamp(1, max))
}

/// Registers one async method under its table name with typed params and result.
pub(super) fn register<M, F, Fut>(module: &mut RpcModule<Daemon>, handler: F)
where
    M: Method,
    F: Fn(M::Params, Arc<Daemon>, Extensions) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = RpcResult<M::Result>> + Send + 'static,
    M::Params: Send,
    M::Result: Clone + Send + 'static,
{
    let registered = module.register_async_method(M::NAME, move |params, daemon, ext| {
        let handler = handler.clone();
        async move {
            let params: M::Params = parse(&params)?;
            handler(params, daemon, ext).await
        }
    });
    if let Err(e) = registered {
        tracing::error!(method = M::NAME, error = %e, "method registered twice");
    }
}

/// Builds the method table the connections dispatch to.
pub fn module(daemon: Arc<Daemon>) -> RpcModule<Daemon> {
    let mut m = RpcModule::from_arc(daemon);

    register::<method::Initialize, _, _>(&mut m, |p: InitializeParams, d, ext| async move {
        if !SUPPORTED_VERSIONS.contains(&p.protocol_version) {
            return Err(ErrorObject::owned(
                ErrorCode::UNSUPPORTED_VERSION.0,
                format!(
                    "protocol version {} is not supported; this daemon speaks {:?}. Update the client or the daemon",
                    p.protocol_version, SUPPORTED_VERSIONS
                ),
                Some(serde_json::json!({ "supported": SUPPORTED_VERSIONS })),
            ));
        }
        if let Some(state) = ext.get::<Arc<ConnectionState>>() {
            state
                .protocol_version
                .store(p.protocol_version, Ordering::Release);
            state
                .answers_permissions
                .store(p.capabilities.permissions, Ordering::Release);
        }
        tracing::debug!(client = %p.client.name, version = %p.client.version, "client initialized");
        Ok(InitializeResult {
            protocol_version: p.protocol_version,
            supported_versions: SUPPORTED_VERSIONS.to_vec(),
            server: Implementation {
                name: "totemd".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            capabilities: ServerCapabilities {
                max_line_bytes: totem_protocol::MAX_LINE_BYTES as u64,
                methods: totem_protocol::METHODS
                    .iter()
                    .map(|m| m.name.to_string())
                    .collect(),
            },
            notices: d.take_notices(),
        })
    });

    register::<method::DaemonStatus, _, _>(&mut m, |_: NoParams, d, _| async move {
        Ok(DaemonStatus {
            version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: totem_protocol::PROTOCOL_VERSION,
            pid: std::process::id(),
            uptime_ms: d.started.elapsed().as_millis() as u64,
            started_at: d.started_at,
            home: d.home.display().to_string(),
            socket: d.socket.display().to_string(),
            store_path: d.store().path().display().to_string(),
            counts: DaemonCounts {
                projects: d.store().count_projects(),
                sessions: d.store().count_sessions(),
                connections: d.connections.load(Ordering::Relaxed),
                running_runs: d.sessions.running(),
                max_connections: Some(d.max_connections).filter(|m| *m != u64::MAX),
            },
            sandbox: Some(totem_protocol::SandboxStatus {
                mode: if d.sandbox.is_sandboxed() {
                    "landlock"
                } else {
                    "none"
                }
                .into(),
                detail: d.sandbox.describe(),
            }),
            store: Some(d.store_status()),
        })
    });

    register::<method::DaemonShutdown, _, _>(&mut m, |_: NoParams, d, _| async move {
        tracing::info!("shutdown requested by a client");
        // Answer first; the shutdown starts right after.
        let d2 = d.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            d2.request_shutdown();
        });
        Ok(Ack {})
    });

    register::<method::StoreBackup, _, _>(&mut m, |p: StoreBackupParams, d, _| async move {
        let path = std::path::PathBuf::from(&p.path);
        if !path.is_absolute() {
            return Err(err(
                ErrorCode::INVALID_PATH,
                format!("the backup file must be an absolute path, not {}", p.path),
            ));
        }
        let store = d.store().clone();
        let blobs = d.blobs.dir().to_path_buf();
        let written = tokio::task::spawn_blocking(move || store.backup(&blobs, &path))
            .await
            .map_err(|e| err(ErrorCode::INTERNAL_ERROR, e.to_string()))?;
        let summary = written.map_err(|e| {
            err(
                ErrorCode::INTERNAL_ERROR,
                format!("cannot write the backup {}: {e}", p.path),
            )
        })?;
        tracing::info!(path = %p.path, records = summary.records, blobs = summary.blobs, bytes = summary.bytes, "backup written");
        Ok(StoreBackupResult {
            path: p.path,
            records: summary.records,
            blobs: summary.blobs,
            bytes: summary.bytes,
        })
    });

    register::<method::ProjectOpen, _, _>(&mut m, |p: ProjectOpenParams, d, _| async move {
        let project = d.open_project(&p.path, p.by_name)?;
        let mut items = with_kind(vec![project]).await;
        items
            .pop()
            .ok_or_else(|| err(ErrorCode::INTERNAL_ERROR, "the project was lost"))
    });

    register::<method::ProjectList, _, _>(&mut m, |p: ListParams, d, _| async move {
        let (items, next_cursor) = d
            .store()
            .list_projects(p.cursor.as_deref(), page_limit(p.limit, 50, 500))?;
        Ok(Page {
            items: with_kind(items).await,
            next_cursor,
        })
    });

    register::<method::SessionCreate, _, _>(&mut m, |p: SessionCreateParams, d, _| async move {
        if d.store().get_project(&p.project_id)?.is_none() {
            return Err(err(
                ErrorCode::NOT_FOUND,
                format!(
                    "no project {}; open one with `project.open {{path}}`",
                    p.project_id
                ),
            ));
        }
        Ok(d.sessions.create(&p.project_id, p.title)?)
    });

    register::<method::SessionList, _, _>(&mut m, |p: SessionListParams, d, _| async move {
        let needle = p
            .search
            .as_deref()
            .map(|s| s.trim().to_lowercase())
            .filter(|s| !s.is_empty());
        let store = d.store();
        let (records, next_cursor) = store.list_sessions_where(
            p.project_id.as_deref(),
            p.cursor.as_deref(),
            page_limit(p.limit, 50, 500),
            |record| match &needle {
                Some(needle) => store.session_mentions(record, needle),
                None => Ok(true),
            },
        )?;
        let items = records.into_iter().map(|r| d.sessions.refresh(r)).collect();
        Ok(Page { items, next_cursor })
    });

    register::<method::SessionGet, _, _>(&mut m, |p: SessionRef, d, _| async move {
        Ok(d.sessions.snapshot(&p.session_id)?)
    });

    register::<method::SessionRename, _, _>(&mut m, |p: SessionRenameParams, d, _| async move {
        let title = p.title.trim();
        if title.is_empty() {
            return Err(err(
                ErrorCode::INVALID_PARAMS,
                "title is empty; give the session a name",
            ));
        }
        Ok(d.sessions.rename(&p.session_id, title.to_string())?)
    });

    register::<method::SessionDelete, _, _>(&mut m, |p: SessionRef, d, _| async move {
        d.sessions.delete(&p.session_id)?;
        d.agents.forget(&p.session_id);
        let terminals = d.terminals.clone();
        let session = p.session_id.clone();
        let _ = tokio::task::spawn_blocking(move || terminals.close_session(&session)).await;
        Ok(SessionDeleted {
            session_id: p.session_id,
        })
    });

    register::<method::SessionMessages, _, _>(
        &mut m,
        |p: SessionMessagesParams, d, _| async move {
            d.sessions.get(&p.session_id)?;
            let limit = page_limit(p.limit, 100, 1000);
            let (messages, more) = match p.newest {
                true => (
                    d.store()
                        .newest_messages(&p.session_id, p.after_seq, limit)?,
                    false,
                ),
                false => d
                    .store()
                    .messages_after(&p.session_id, p.after_seq, limit)?,
            };
            let mut messages = messages;
            d.store().undo_state(&p.session_id)?.mark(&mut messages);
            let compaction = d.store().compaction(&p.session_id)?;
            crate::store::Compaction::mark(compaction.as_ref(), &mut messages);
            let next_after_seq = if more {
                messages.last().map(|m| m.seq)
            } else {
                None
            };
            Ok(SessionMessages {
                messages,
                next_after_seq,
                compaction: compaction.map(|c| totem_protocol::CompactionSummary {
                    summary: c.summary,
                    at: Some(c.at),
                }),
            })
        },
    );

    register::<method::SessionPrompt, _, _>(&mut m, |p: SessionPromptParams, d, _| async move {
        if p.text.trim().is_empty() {
            return Err(err(
                ErrorCode::INVALID_PARAMS,
                "the prompt is empty; say what you want done",
            ));
        }
        Ok(crate::agent::prompt(&d, p)?)
    });

    super::rpc_provider::register_all(&mut m);
    super::rpc_agent::register_all(&mut m);
    super::rpc_changes::register_all(&mut m);
    super::rpc_check::register_all(&mut m);
    super::rpc_run::register_all(&mut m);
    super::rpc_terminal::register_all(&mut m);

    let subscribed = m.register_subscription(
        method::SessionSubscribe::NAME,
        "session.event",
        "session.unsubscribe",
        |params, pending, d, _| async move { subscribe(params, pending, d).await },
    );
    if let Err(e) = subscribed {
        tracing::error!(error = %e, "subscription registered twice");
    }
    let subscribed = m.register_subscription(
        method::DaemonSubscribe::NAME,
        "daemon.event",
        method::DaemonUnsubscribe::NAME,
        |params, pending, d, _| async move { subscribe_daemon(params, pending, d).await },
    );
    if let Err(e) = subscribed {
        tracing::error!(error = %e, "subscription registered twice");
    }
    m
}

/// `daemon.subscribe`: the current state first, then every daemon event; a subscriber whose
/// queue is full is told it lagged and its subscription ends.
async fn subscribe_daemon(
    params: Params<'static>,
    pending: PendingSubscriptionSink,
    d: Arc<Daemon>,
) {
    if let Err(e) = parse::<NoParams>(&params) {
        return pending.reject(e).await;
    }
    // Listen before accepting: once the client has its subscription id it may act (create a
    // session, say), and the event of that must not slip past between the two.
    let (current, mut live) = d.sessions.subscribe_daemon();
    let Ok(mut sink) = pending.accept().await else {
        return;
    };
    for event in current {
        let Ok(raw) = serde_json::value::to_raw_value(&*event) else {
            continue;
        };
        let sent = tokio::select! {
            _ = sink.closed() => return,
            sent = sink.send(SubscriptionMessage::from(raw)) => sent,
        };
        if sent.is_err() {
            return;
        }
    }
    loop {
        let event = tokio::select! {
            _ = sink.closed() => return,
            received = live.recv() => match received {
                Ok(e) => e,
                Err(RecvError::Closed) => return,
                Err(RecvError::Lagged(_)) => return daemon_lagged(&sink).await,
            },
        };
        let Ok(raw) = serde_json::value::to_raw_value(&*event) else {
            continue;
        };
        match sink.try_send(SubscriptionMessage::from(raw)) {
            Ok(()) => {}
            Err(jsonrpsee::core::server::TrySendError::Full(_)) => {
                drop(live);
                return daemon_lagged(&sink).await;
            }
            Err(jsonrpsee::core::server::TrySendError::Closed(_)) => return,
        }
    }
}

async fn daemon_lagged(sink: &jsonrpsee::core::server::SubscriptionSink) {
    let event = DaemonEvent {
        at: crate::util::now_ms(),
        kind: DaemonEventKind::Lagged {},
    };
    send_last(sink, &event).await;
}

async fn subscribe(params: Params<'static>, pending: PendingSubscriptionSink, d: Arc<Daemon>) {
    let p: SessionSubscribeParams = match parse(&params) {
        Ok(p) => p,
        Err(e) => return pending.reject(e).await,
    };
    let subscription = match d
        .sessions
        .get(&p.session_id)
        .and_then(|s| s.subscribe(d.store(), p.after_seq))
    {
        Ok(s) => s,
        Err(e) => return pending.reject(ErrorObjectOwned::from(e)).await,
    };
    let Ok(mut sink) = pending.accept().await else {
        return;
    };
    let session = p.session_id.as_str();
    let mut delivered = p.after_seq;
    let Subscription { replay, mut live } = subscription;
    tracing::debug!(
        session,
        after_seq = p.after_seq,
        replay = replay.len(),
        "subscribed"
    );
    // The replay is this subscriber's own backlog: wait for room in its connection's queue (that
    // holds up nobody else) rather than calling a replay bigger than the queue a lag. Live events
    // meanwhile wait in the broadcast receiver; if they overflow it, that is the lag.
    for event in replay {
        let deleted = matches!(event.kind, EventKind::SessionDeleted {});
        if event.seq <= delivered && !deleted {
            continue;
        }
        let Ok(raw) = serde_json::value::to_raw_value(&*event) else {
            continue;
        };
        let sent = tokio::select! {
            _ = sink.closed() => return,
            sent = sink.send(SubscriptionMessage::from(raw)) => sent,
        };
        if sent.is_err() || deleted {
            return;
        }
        delivered = event.seq;
    }
    // Live events: a subscriber whose queue is full is told it lagged rather than slowing the
    // session (and every other subscriber) down.
    loop {
        let event = tokio::select! {
            _ = sink.closed() => return,
            received = live.recv() => match received {
                Ok(e) => e,
                Err(RecvError::Closed) => return,
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(session, missed, "subscriber fell behind the session's broadcast");
                    drop(live);
                    return lagged(&sink, session, delivered).await;
                }
            },
        };
        let deleted = matches!(event.kind, EventKind::SessionDeleted {});
        if event.seq <= delivered && !deleted {
            continue;
        }
        let Ok(raw) = serde_json::value::to_raw_value(&*event) else {
            continue;
        };
        match sink.try_send(SubscriptionMessage::from(raw)) {
            Ok(()) => delivered = event.seq,
            Err(jsonrpsee::core::server::TrySendError::Full(_)) => {
                drop(live);
                return lagged(&sink, session, delivered).await;
            }
            Err(jsonrpsee::core::server::TrySendError::Closed(_)) => return,
        }
        if deleted {
            return;
        }
    }
}

/// Tells a subscriber it fell behind and ends its subscription; it resubscribes from `seq`, the
/// last event it was given. The notice waits for room behind that backlog for as long as the
/// connection stays open (a client may stop reading for minutes; it must still find the notice
/// when it reads again): only this subscription's task waits, nobody else is held up.
async fn lagged(sink: &jsonrpsee::core::server::SubscriptionSink, session_id: &str, seq: u64) {
    tracing::debug!(session = session_id, seq, "subscriber lagged");
    let event = SessionEvent {
        session_id: session_id.to_string(),
        seq,
        at: crate::util::now_ms(),
        kind: EventKind::Lagged {},
    };
    send_last(sink, &event).await;
}

/// Sends a subscription's last message, waiting for room behind its backlog for as long as the
/// connection stays open.
async fn send_last(
    sink: &jsonrpsee::core::server::SubscriptionSink,
    event: &impl serde::Serialize,
) {
    let Ok(raw) = serde_json::value::to_raw_value(event) else {
        return;
    };
    tokio::select! {
        _ = sink.closed() => {}
        _ = sink.send(SubscriptionMessage::from(raw)) => {}
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[tokio::test]
    async fn the_daemon_registers_exactly_the_methods_the_table_declares() {
        let home = tempfile::tempdir().unwrap();
        let daemon = Daemon::open(home.path(), &home.path().join("totemd.sock")).unwrap();
        let module = module(Arc::new(daemon));
        let registered: BTreeSet<&str> = module.method_names().collect();
        let declared: BTreeSet<&str> = totem_protocol::METHODS.iter().map(|m| m.name).collect();
        assert_eq!(registered, declared);
    }
}
