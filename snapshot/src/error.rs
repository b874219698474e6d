//! What can go wrong while recording, diffing, undoing or redoing.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::blob::BlobId;

/// A file that undo or redo will not overwrite, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Project-relative path.
    pub path: String,
    pub reason: ConflictReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictReason {
    /// The file changed after the run (or after the undo, for redo).
    ChangedSince,
    /// The file was too large to keep, so its earlier content cannot be restored.
    NotKept,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            ConflictReason::ChangedSince => write!(f, "{} was changed since", self.path),
            ConflictReason::NotKept => {
                write!(f, "{} was too large to keep a copy of", self.path)
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("blob {id} is missing from the store")]
    MissingBlob { id: BlobId },
    #[error("blob {id} at {} does not match its id; the store is damaged", path.display())]
    CorruptBlob { id: BlobId, path: PathBuf },
    #[error("`{path}` is not a path inside the project")]
    BadPath { path: String },
    #[error("scanning the project failed: {message}")]
    Scan { message: String },
    #[error(
        "not changed, to keep your edits: {}. Pass force to overwrite them.",
        list(conflicts)
    )]
    Conflicts { conflicts: Vec<Conflict> },
}

fn list(conflicts: &[Conflict]) -> String {
    conflicts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl SnapshotError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        SnapshotError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
