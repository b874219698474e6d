//! `session.fork`: a new session that starts from a copy of another's history; and
//! `session.import`, which does the same with messages exported elsewhere (`totem export`).
//!
//! The fork gets copies of the messages up to and including the chosen one, with new ids, each
//! announced as its own `message.created` event so a client replaying the fork sees the same
//! history `session.messages` returns. Runs, their file changes and usage stay with the parent: the
//! fork has nothing to undo until it runs something itself.

use std::sync::Arc;

use totem_protocol::{
    CompactionSummary, EventKind, ImportedMessage, Message, Part, Session, SessionForkParams,
    SessionImportParams,
};

use super::{DaemonError, Result};
use crate::daemon::Daemon;
use crate::session::LiveSession;
use crate::store::{Compaction, Store};
use crate::util::{new_id, now_ms};

/// Messages read per store page while looking for the fork point.
const PAGE: usize = 500;

/// `session.fork`.
pub fn fork(daemon: &Arc<Daemon>, p: SessionForkParams) -> Result<Session> {
    let parent = daemon.sessions.snapshot(&p.session_id)?;
    let store = daemon.store();
    let undo = store.undo_state(&p.session_id)?;
    let mut history = history_until(daemon, &p)?;
    // The fork continues the conversation as the model sees it: undone runs stay behind, and
    // what the parent's summary stands in for stays summarised.
    history.retain(|m| undo.keeps(m));
    let compaction = store.compaction(&p.session_id)?;
    Compaction::mark(compaction.as_ref(), &mut history);
    let summary = compaction
        .filter(|_| history.iter().any(|m| m.compacted))
        .map(|c| CompactionSummary {
            summary: c.summary,
            at: Some(c.at),
        });

    let created = daemon.sessions.create(
        &parent.project_id,
        Some(format!("Fork of {}", parent.title)),
    )?;
    let live = daemon.sessions.get(&created.id)?;
    live.update(store, |s| s.parent_id = Some(parent.id.clone()))?;
    let copies = history.into_iter().map(|m| ImportedMessage {
        role: m.role,
        created_at: Some(m.created_at),
        parts: m.parts,
        undone: false,
        compacted: m.compacted,
    });
    append(&live, store, copies, summary)
}

/// Messages at most in one import.
const MAX_IMPORTED: usize = 100_000;

/// `session.import`.
pub fn import(daemon: &Arc<Daemon>, p: SessionImportParams) -> Result<Session> {
    let store = daemon.store();
    if store.get_project(&p.project_id)?.is_none() {
        return Err(DaemonError::NotFound(format!(
            "no project {}; open one first",
            p.project_id
        )));
    }
    check_importable(&p.messages)?;
    if p.compaction.is_none() && p.messages.iter().any(|m| m.compacted) {
        return Err(DaemonError::Invalid(
            "messages are marked compacted but the file holds no summary for them; export the \
             session again with `totem export SESSION --format json`"
                .into(),
        ));
    }
    let title = p
        .title
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "Imported session".to_string());
    let created = daemon.sessions.create(&p.project_id, Some(title))?;
    let live = daemon.sessions.get(&created.id)?;
    append(&live, store, p.messages.into_iter(), p.compaction)
}

/// Refuses what would give the model a history it cannot read: no messages, too many, or a
/// tool result without the call it answers.
fn check_importable(messages: &[ImportedMessage]) -> Result<()> {
    if messages.is_empty() {
        return Err(DaemonError::Invalid(
            "the file holds no messages; export a session with `totem export SESSION --format json`"
                .into(),
        ));
    }
    if messages.len() > MAX_IMPORTED {
        return Err(DaemonError::Invalid(format!(
            "the file holds {} messages, more than the {MAX_IMPORTED} one session can take",
            messages.len()
        )));
    }
    let mut calls = std::collections::HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        for part in &message.parts {
            match part {
                Part::ToolCall { call_id, .. } => {
                    calls.insert(call_id.as_str());
                }
                Part::ToolResult { call_id, .. } if !calls.contains(call_id.as_str()) => {
                    return Err(DaemonError::Invalid(format!(
                        "message {} has the result of tool call {call_id}, which no earlier \
                         message makes",
                        index + 1
                    )));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Appends copies of `messages` to a new session, each announced as its own `message.created`
/// event (with its marks: an undone message stays undone, without a run to redo), stores the
/// compaction that stands in for the ones marked `compacted`, and sets the session's message
/// count.
fn append(
    live: &LiveSession,
    store: &Store,
    messages: impl Iterator<Item = ImportedMessage>,
    summary: Option<CompactionSummary>,
) -> Result<Session> {
    let mut count = 0;
    // (seq, id, compacted) of every copy, for the compaction record.
    let mut stored = Vec::new();
    for original in messages {
        let id = new_id("msg");
        let seq = live
            .emit_with(store, |seq| {
                let message = Message {
                    id: id.clone(),
                    session_id: live.id().to_string(),
                    seq,
                    role: original.role,
                    // Runs stay where they ran: the new session has none of its own yet.
                    run_id: None,
                    created_at: original.created_at.unwrap_or_else(now_ms),
                    undone: original.undone,
                    compacted: original.compacted,
                    parts: original.parts,
                };
                Ok(EventKind::MessageCreated { message })
            })?
            .seq;
        stored.push((seq, id, original.compacted));
        count += 1;
    }
    if let Some(summary) = summary {
        let upto_seq = stored
            .iter()
            .filter(|(_, _, compacted)| *compacted)
            .map(|(seq, _, _)| *seq)
            .max()
            .unwrap_or(0);
        let keep = stored
            .iter()
            .filter(|(seq, _, compacted)| *seq <= upto_seq && !compacted)
            .map(|(_, id, _)| id.clone())
            .collect();
        store.put_compaction(
            live.id(),
            &Compaction {
                upto_seq,
                summary: summary.summary,
                at: summary.at.unwrap_or_else(now_ms),
                keep,
            },
        )?;
    }
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
        Some(id) => Err(DaemonError::NotFound(format!(
            "no message {id} in session {}; list its messages with `session.messages`",
            p.session_id
        ))),
        None => Ok(out),
    }
}
