//! Handlers of the `terminal.*` methods: the daemon's interactive terminals for clients.

use std::sync::Arc;
use std::time::Duration;

use jsonrpsee::core::server::{PendingSubscriptionSink, RpcModule, SubscriptionMessage};
use jsonrpsee::types::{ErrorObjectOwned, Params};
use totem_protocol::{
    ErrorCode, Method, TerminalList, TerminalListParams, TerminalOpenParams, TerminalRef,
    TerminalResizeParams, TerminalScreenParams, TerminalShareParams, TerminalSubscribeParams,
    TerminalWriteParams, TerminalWritten, method,
};

use super::rpc::{err, register};
use crate::daemon::Daemon;
use crate::terminal::watch::Watcher;
use crate::terminal::{OpenRequest, OpenedBy, TermError, TerminalSettings};

/// Largest `terminal.write`.
const MAX_WRITE: usize = 64 * 1024;
/// A watcher sends nothing while its connection has more than this many messages queued: the
/// client is not reading, and the output it misses becomes a redraw when it reads again.
const QUEUED_BEFORE_PAUSE: usize = 16;

impl From<TermError> for ErrorObjectOwned {
    fn from(e: TermError) -> Self {
        let code = match e {
            TermError::NotFound(_) => ErrorCode::NOT_FOUND,
            TermError::Invalid(_) => ErrorCode::INVALID_PARAMS,
            TermError::Conflict(_) => ErrorCode::CONFLICT,
            TermError::Failed(_) => ErrorCode::INTERNAL_ERROR,
        };
        err(code, e.to_string())
    }
}

pub(super) fn register_all(m: &mut RpcModule<Daemon>) {
    register::<method::TerminalOpen, _, _>(m, |p: TerminalOpenParams, d, _| async move {
        let agent = d
            .agents
            .session(&d, &p.session_id)
            .map_err(|e| err(ErrorCode::NOT_FOUND, e.to_string()))?;
        let settings = terminal_settings(&d);
        let environment = d
            .settings
            .current()
            .permission
            .as_ref()
            .map(|p| p.environment.clone())
            .unwrap_or_default();
        let env = crate::agent::confine::base_spec(&environment);
        let terminal = d.terminals.open(OpenRequest {
            session_id: &p.session_id,
            command: &p.command,
            cwd: &agent.root,
            cols: p.cols.unwrap_or(80),
            rows: p.rows.unwrap_or(24),
            opened_by: OpenedBy::User,
            shared: p.shared.unwrap_or(false),
            settings,
            env: &env,
        })?;
        Ok(terminal.info())
    });

    register::<method::TerminalWrite, _, _>(m, |p: TerminalWriteParams, d, _| async move {
        if p.data.len() > MAX_WRITE {
            return Err(err(
                ErrorCode::INVALID_PARAMS,
                format!("at most {MAX_WRITE} bytes per write; split the input"),
            ));
        }
        let terminal = d.terminals.get(&p.id)?;
        let bytes = terminal.write(p.data.as_bytes())?;
        Ok(TerminalWritten {
            bytes: bytes as u64,
        })
    });

    register::<method::TerminalResize, _, _>(m, |p: TerminalResizeParams, d, _| async move {
        let terminal = d.terminals.get(&p.id)?;
        terminal.resize(p.cols, p.rows)?;
        Ok(terminal.info())
    });

    register::<method::TerminalShare, _, _>(m, |p: TerminalShareParams, d, _| async move {
        let terminal = d.terminals.get(&p.id)?;
        terminal.share(p.shared);
        Ok(terminal.info())
    });

    register::<method::TerminalClose, _, _>(m, |p: TerminalRef, d, _| async move {
        let terminal = d.terminals.get(&p.id)?;
        let closing = terminal.clone();
        let manager = d.terminals.clone();
        tokio::task::spawn_blocking(move || manager.close(&closing, "closed"))
            .await
            .map_err(|e| err(ErrorCode::INTERNAL_ERROR, e.to_string()))?;
        Ok(terminal.info())
    });

    register::<method::TerminalList, _, _>(m, |p: TerminalListParams, d, _| async move {
        Ok(TerminalList {
            terminals: d
                .terminals
                .list(p.session_id.as_deref())
                .iter()
                .map(|t| t.info())
                .collect(),
        })
    });

    register::<method::TerminalScreen, _, _>(m, |p: TerminalScreenParams, d, _| async move {
        let terminal = d.terminals.get(&p.id)?;
        Ok(terminal.screen(p.scrollback.unwrap_or(0)))
    });

    let subscribed = m.register_subscription(
        method::TerminalSubscribe::NAME,
        "terminal.event",
        method::TerminalUnsubscribe::NAME,
        |params, pending, d, _| async move { subscribe(params, pending, d).await },
    );
    if let Err(e) = subscribed {
        tracing::error!(error = %e, "terminal subscription registered twice");
    }
}

/// The `terminals` section of the settings as they are now.
pub fn terminal_settings(d: &Daemon) -> TerminalSettings {
    TerminalSettings::within_limits(d.settings.current().terminals.as_ref())
}

async fn subscribe(params: Params<'static>, pending: PendingSubscriptionSink, d: Arc<Daemon>) {
    let raw = params.as_str().unwrap_or("{}");
    let p: TerminalSubscribeParams = match serde_json::from_str(raw) {
        Ok(p) => p,
        Err(e) => {
            return pending
                .reject(err(
                    ErrorCode::INVALID_PARAMS,
                    format!("invalid params: {e}"),
                ))
                .await;
        }
    };
    let terminal = match d.terminals.get(&p.id) {
        Ok(t) => t,
        Err(e) => return pending.reject(ErrorObjectOwned::from(e)).await,
    };
    let Ok(sink) = pending.accept().await else {
        return;
    };
    let mut watcher = Watcher::new(terminal, p.after_seq);
    loop {
        // A client that stopped reading gets nothing more until it reads again; what it missed
        // comes as a redraw then.
        if sink.max_capacity() - sink.capacity() > QUEUED_BEFORE_PAUSE {
            watcher.fell_behind();
            tokio::select! {
                _ = sink.closed() => return,
                _ = tokio::time::sleep(Duration::from_millis(20)) => continue,
            }
        }
        let event = tokio::select! {
            _ = sink.closed() => return,
            event = watcher.next() => event,
        };
        let Some(event) = event else {
            return;
        };
        let Ok(raw) = serde_json::value::to_raw_value(&event) else {
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
}
