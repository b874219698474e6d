//! What runs changed on disk, seen and taken back: `session.diff`, `session.undo`,
//! `session.redo`; and `session.fork`, which copies a session's history into a new one.
//!
//! The agent records each run's changes as a [`RunRecord`] (see `agent/run.rs`) with its file
//! contents in the blob store under `$TOTEM_HOME/blobs`. Undo walks those records newest first,
//! skipping the runs already undone; the session's [`UndoState`] in the store says which those are
//! and what redo would apply again.
//!
//! - [`diff`]: the diff of one run, of the session, or git's view of the project;
//! - [`undo`]: undo and redo;
//! - [`fork`]: the fork of a session.
//!
//! [`UndoState`]: crate::store::UndoState

pub mod diff;
pub mod fork;
pub mod undo;

use std::path::PathBuf;

use totem_protocol::{Run, RunStatus, SessionStatus};
use totem_snapshot::{DirBlobStore, RunRecord, SnapshotError};

use crate::daemon::Daemon;
use crate::error::DaemonError;

/// Results of the undo, redo, diff and fork operations.
pub type Result<T> = std::result::Result<T, DaemonError>;

/// The blob store the agent records runs into.
fn blobs(daemon: &Daemon) -> DirBlobStore {
    daemon.blobs.clone()
}

/// The project root of a session.
fn project_root(daemon: &Daemon, session_id: &str) -> Result<PathBuf> {
    let session = daemon.sessions.snapshot(session_id)?;
    let project = daemon
        .store()
        .get_project(&session.project_id)?
        .ok_or_else(|| {
            DaemonError::NotFound(format!("the project of session {session_id} is gone"))
        })?;
    Ok(PathBuf::from(project.path))
}

/// The stored record of what `run_id` changed (empty when nothing was recorded).
fn run_record(daemon: &Daemon, run_id: &str) -> Result<RunRecord> {
    match daemon.store().get_run_changes(run_id)? {
        Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            DaemonError::Failed(format!(
                "the recorded changes of run {run_id} are unreadable ({e}); they cannot be shown or undone"
            ))
        }),
        None => Ok(RunRecord::default()),
    }
}

/// The session's runs, oldest first, each with its record.
fn session_records(daemon: &Daemon, session_id: &str) -> Result<Vec<(Run, RunRecord)>> {
    let mut out = Vec::new();
    for run in daemon.store().session_runs(session_id)? {
        let record = run_record(daemon, &run.id)?;
        out.push((run, record));
    }
    Ok(out)
}

/// Refuses while a run of the session is going or queued: it could be writing the very files.
fn ensure_idle(daemon: &Daemon, session_id: &str, what: &str) -> Result<()> {
    let live = daemon.sessions.get(session_id)?;
    let queued = daemon
        .store()
        .session_runs(session_id)?
        .iter()
        .any(|r| r.status == RunStatus::Running);
    if live.status() == SessionStatus::Running || queued {
        return Err(DaemonError::Busy(format!(
            "cannot {what} while a run of session {session_id} is going or queued; wait for it to end or stop it with `session.abort`"
        )));
    }
    Ok(())
}

fn snapshot_failed(what: &str, e: SnapshotError) -> DaemonError {
    match e {
        SnapshotError::Conflicts { ref conflicts } => DaemonError::Conflict {
            files: conflicts.iter().map(|c| c.path.clone()).collect(),
            message: format!("cannot {what}: {e}"),
        },
        // Force does not help here, so this is not a conflict a client would offer to force.
        SnapshotError::Outside { .. } => DaemonError::Path(format!("cannot {what}: {e}")),
        SnapshotError::Io { ref path, .. } => {
            DaemonError::Failed(format!("cannot {what}: {}", crate::disk::explain(&e, path)))
        }
        other => DaemonError::Failed(format!("cannot {what}: {other}")),
    }
}
