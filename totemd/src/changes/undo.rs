//! `session.undo` and `session.redo`.
//!
//! Undo takes back the newest run not undone yet, so repeated undos walk back run by run to the
//! session's start: its file changes (if it made any) and its part of the conversation — its
//! messages stay stored, marked undone, and are left out of the model's history (see
//! [`UndoState::keeps`]). Redo walks forward again over the undos made in a row: each applies
//! the newest undone run again; they are gone once a newer run exists (that run worked on the
//! files and the conversation as the undos left them; the undone runs stay undone). Both are all-or-nothing and refuse to
//! overwrite a file changed since, unless forced (see `totem_snapshot::undo`).

use std::sync::Arc;

use totem_protocol::{ChangesApplied, EventKind, Part, Role, RunStatus};
use totem_snapshot::{Restored, RunRecord};

use super::{
    DaemonError, Result, blobs, ensure_idle, project_root, run_record, session_records,
    snapshot_failed,
};
use crate::daemon::Daemon;
use crate::store::{Redo, UndoState};

/// Undo and redo of one daemon never overlap: each reads the undo state, changes files and writes
/// the state back, and two at once would take the same run back twice. They are rare and short, so
/// one lock for the daemon is enough.
static UNDO_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Which runs can still be undone, newest last.
fn undoable(records: &[(totem_protocol::Run, RunRecord)], state: &UndoState) -> Vec<String> {
    records
        .iter()
        .filter(|(run, _)| run.status != RunStatus::Running && !state.undone.contains(&run.id))
        .map(|(run, _)| run.id.clone())
        .collect()
}

/// The ids of a run's messages, and the text of its prompt.
fn run_messages(
    daemon: &Daemon,
    session_id: &str,
    run_id: &str,
) -> Result<(Vec<String>, Option<String>)> {
    let (messages, _) = daemon.store().messages_after(session_id, 0, usize::MAX)?;
    let mut ids = Vec::new();
    let mut prompt = None;
    for message in messages {
        if message.run_id.as_deref() != Some(run_id) {
            continue;
        }
        if message.role == Role::User && prompt.is_none() {
            prompt = Some(Part::joined_text(&message.parts));
        }
        ids.push(message.id);
    }
    Ok((ids, prompt))
}

/// The redo on offer, unless a run came after the undo.
fn live_redo<'a>(
    records: &[(totem_protocol::Run, RunRecord)],
    state: &'a UndoState,
) -> Option<&'a Redo> {
    let newest = records.last().map(|(run, _)| run.id.clone());
    state.redo.as_ref().filter(|r| r.newest_run == newest)
}

fn touched(restored: &Restored) -> Vec<String> {
    let mut files: Vec<String> = restored
        .written
        .iter()
        .chain(&restored.removed)
        .cloned()
        .collect();
    files.sort();
    files.dedup();
    files
}

/// `session.undo`.
pub async fn undo(daemon: &Arc<Daemon>, session_id: &str, force: bool) -> Result<ChangesApplied> {
    undo_or_redo(daemon, session_id, force, true).await
}

/// `session.redo`.
pub async fn redo(daemon: &Arc<Daemon>, session_id: &str, force: bool) -> Result<ChangesApplied> {
    undo_or_redo(daemon, session_id, force, false).await
}

/// Undo (`undo`) or redo: picks the run, takes its files back or applies them again (off the
/// async threads), records the new state and tells the session.
async fn undo_or_redo(
    daemon: &Arc<Daemon>,
    session_id: &str,
    force: bool,
    undo: bool,
) -> Result<ChangesApplied> {
    let what = if undo { "undo" } else { "redo" };
    let _guard = UNDO_LOCK.lock().await;
    ensure_idle(daemon, session_id, what)?;
    let root = project_root(daemon, session_id)?;
    let store = daemon.store();
    let mut state = store.undo_state(session_id)?;
    let records = session_records(daemon, session_id)?;
    let run_id = if undo {
        undoable(&records, &state).pop().ok_or_else(|| {
            DaemonError::NotFound(format!(
                "nothing to undo: every run of session {session_id} is undone already"
            ))
        })?
    } else {
        live_redo(&records, &state)
            .map(|r| r.run_id.clone())
            .ok_or_else(|| {
                let why = if state.redo.is_some() {
                    "a run came after the last undo"
                } else {
                    "every undo is redone already"
                };
                DaemonError::NotFound(format!("nothing to redo in session {session_id}: {why}"))
            })?
    };
    let record = run_record(daemon, &run_id)?;
    let blobs = blobs(daemon);
    let restored = tokio::task::spawn_blocking(move || match undo {
        true => totem_snapshot::undo(&root, &blobs, &record, force),
        false => totem_snapshot::redo(&root, &blobs, &record, force),
    })
    .await
    .map_err(|e| DaemonError::Failed(format!("{what} stopped: {e}")))?
    .map_err(|e| snapshot_failed(&format!("{what} run {run_id}"), e))?;

    if undo {
        // Undos in a row pile up their redos; after a newer run the old ones are gone.
        let then = match live_redo(&records, &state) {
            Some(r) => std::iter::once(r.run_id.clone())
                .chain(r.then.iter().cloned())
                .collect(),
            None => Vec::new(),
        };
        state.undone.push(run_id.clone());
        state.redo = Some(Redo {
            run_id: run_id.clone(),
            then,
            newest_run: records.last().map(|(run, _)| run.id.clone()),
        });
    } else {
        state.undone.retain(|id| *id != run_id);
        state.redo = state.redo.take().and_then(|r| {
            let mut then = r.then.into_iter();
            then.next().map(|next| Redo {
                run_id: next,
                then: then.collect(),
                newest_run: r.newest_run,
            })
        });
    }
    store.put_undo_state(session_id, &state)?;
    let (message_ids, prompt) = run_messages(daemon, session_id, &run_id)?;
    let mut applied = announce(
        daemon,
        session_id,
        &run_id,
        &restored,
        &records,
        &state,
        (undo, message_ids),
    )?;
    // An undone run's prompt goes back to the client's prompt box.
    if undo {
        applied.prompt = prompt;
    }
    Ok(applied)
}

/// Tells the session's subscribers and builds the answer.
fn announce(
    daemon: &Daemon,
    session_id: &str,
    run_id: &str,
    restored: &Restored,
    records: &[(totem_protocol::Run, RunRecord)],
    state: &UndoState,
    (undone, message_ids): (bool, Vec<String>),
) -> Result<ChangesApplied> {
    let files = touched(restored);
    let kind = if undone {
        EventKind::ChangesUndone {
            run_id: run_id.to_string(),
            files: files.clone(),
            message_ids,
        }
    } else {
        EventKind::ChangesRedone {
            run_id: run_id.to_string(),
            files: files.clone(),
            message_ids,
        }
    };
    let live = daemon.sessions.get(session_id)?;
    live.emit(daemon.store(), kind)?;
    if !files.is_empty() {
        live.emit(
            daemon.store(),
            EventKind::FilesChanged {
                run_id: Some(run_id.to_string()),
                paths: files.clone(),
            },
        )?;
    }
    Ok(ChangesApplied {
        run_id: run_id.to_string(),
        files,
        overwritten: restored.overwritten.clone(),
        can_undo: !undoable(records, state).is_empty(),
        can_redo: live_redo(records, state).is_some(),
        prompt: None,
    })
}
