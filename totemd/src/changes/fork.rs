//! `session.fork`: a new session that starts from a copy of another's history.
//!
//! The fork gets copies of the messages up to and including the chosen one, with new ids, each
//! announced as its own `message.created` event so a client replaying the fork sees the same
//! history `session.messages` returns. Runs, their file changes and usage stay with the parent: the
//! fork has nothing to undo until it runs something itself.

use std::sync::Arc;

use totem_protocol::{EventKind, Message, Session, SessionForkParams};

use super::{ChangesError, Result};
use crate::daemon::Daemon;
use crate::util::new_id;

/// Messages read per store page while looking for the fork point.
const PAGE: usize = 500;

/// `session.fork`.
pub fn fork(daemon: &Arc<Daemon>, p: SessionForkParams) -> Result<Session> {
    let parent = daemon.sessions.snapshot(&p.session_id)?;
    let store = daemon.store();
    let history = history_until(daemon, &p)?;

    let created = daemon.sessions.create(
        &parent.project_id,
        Some(format!("Fork of {}", parent.title)),
    )?;
    let live = daemon.sessions.get(&created.id)?;
    live.update(store, |s| s.parent_id = Some(parent.id.clone()))?;
    for original in &history {
        live.emit_with(store, |seq| {
            let message = Message {
                id: new_id("msg"),
                session_id: created.id.clone(),
                seq,
                role: original.role,
                // The runs are the parent's; the fork has none of its own yet.
                run_id: None,
                created_at: original.created_at,
                parts: original.parts.clone(),
            };
            Ok(EventKind::MessageCreated { message })
        })?;
    }
    let count = history.len() as u64;
    Ok(live.update(store, |s| s.message_count = count)?)
}

/// The parent's messages, oldest first, up to and including `p.message_id` (all when absent).
fn history_until(daemon: &Daemon, p: &SessionForkParams) -> Result<Vec<Message>> {
    let store = daemon.store();
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let (page, more) = store.messages_after(&p.session_id, after, PAGE)?;
        after = page.last().map_or(after, |m| m.seq);
        for message in page {
            let last = p.message_id.as_deref() == Some(message.id.as_str());
            out.push(message);
            if last {
                return Ok(out);
            }
        }
        if !more {
            break;
        }
    }
    match &p.message_id {
        Some(id) => Err(ChangesError::NotFound(format!(
            "no message {id} in session {}; list its messages with `session.messages`",
            p.session_id
        ))),
        None => Ok(out),
    }
}
