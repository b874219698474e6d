//! What can go wrong while recording, diffing, undoing or redoing.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::blob::BlobId;

/// A file that undo or redo will not overwrite, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Project-relative path.
    pub path: String,
    /// Why it is not overwritten.
    pub reason: ConflictReason,
}

/// Why undo or redo will not overwrite a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictReason {
    /// The file changed after the run (or after the undo, for redo).
    ChangedSince,
    /// The file was too large to keep, so its earlier content cannot be restored.
    NotKept,
    /// A socket or device file, which undo and redo do not make.
    NotRestorable,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            ConflictReason::ChangedSince => write!(f, "{} was changed since", self.path),
            ConflictReason::NotKept => {
                write!(f, "{} was too large to keep a copy of", self.path)
            }
            ConflictReason::NotRestorable => {
                write!(
                    f,
                    "{} is a socket or device file, which cannot be made again",
                    self.path
                )
            }
        }
    }
}

/// Why recording, diffing, undo or redo failed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A record names content the blob store does not have.
    #[error("blob {id} is missing from the store")]
    MissingBlob {
        /// The missing blob.
        id: BlobId,
    },
    /// A blob's content does not hash to its id.
    #[error("blob {id} at {} does not match its id; the store is damaged", path.display())]
    CorruptBlob {
        /// The blob's id.
        id: BlobId,
        /// Where it is stored.
        path: PathBuf,
    },
    /// A recorded path leaves the project.
    #[error("`{path}` is not a path inside the project")]
    BadPath {
        /// The path as recorded.
        path: String,
    },
    /// Walking the project for a before/after scan failed.
    #[error("scanning the project failed: {message}")]
    Scan {
        /// What failed.
        message: String,
    },
    /// A path lies behind a folder link leading outside the project; nothing was written, even
    /// with force.
    #[error(
        "nothing was changed: {} {} behind a link that leads outside the project, and undo and redo never write outside it, even with force. Remove the link (or put the folder back) and try again.",
        paths.join(", "),
        if paths.len() == 1 { "is" } else { "are" }
    )]
    Outside {
        /// Every such path, project-relative.
        paths: Vec<String>,
    },
    /// Undo or redo would overwrite files changed since; nothing was written.
    #[error(
        "not changed, to keep your edits: {}. Pass force to overwrite them.",
        list(conflicts)
    )]
    Conflicts {
        /// Every such file.
        conflicts: Vec<Conflict>,
    },
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
