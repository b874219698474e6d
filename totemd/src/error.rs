//! The error of the daemon's session methods (the agent's and the changes'): one type, so a
//! failure means the same protocol code wherever it happens. The mapping to codes is beside the
//! other errors' in `server/rpc.rs`.

use crate::session::SessionError;
use crate::store::StoreError;

/// Why a session method failed. The message is for people: it says what happened and what to do.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The session is unknown or its store failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// What the call names does not exist (a run, a question, a project).
    #[error("{0}")]
    NotFound(String),
    /// The params cannot be done as given.
    #[error("{0}")]
    Invalid(String),
    /// Not now: the session is busy, or there is nothing to take back.
    #[error("{0}")]
    Busy(String),
    /// Files changed since: nothing was touched. `files` are project-relative.
    #[error("{message}")]
    Conflict {
        /// What happened, naming the files.
        message: String,
        /// Every such file.
        files: Vec<String>,
    },
    /// A path outside the project, or one that does not exist.
    #[error("{0}")]
    Path(String),
    /// The daemon could not do it (unreadable records, a failed snapshot).
    #[error("{0}")]
    Failed(String),
}
