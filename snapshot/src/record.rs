//! What a run changed: per file, its state before and after, as blob ids.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::beneath::{Found, Reach, Root, outside};
use crate::blob::{BlobId, BlobStore};
use crate::error::SnapshotError;

/// The state of one path at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum FileState {
    /// No file there.
    Absent,
    /// A file whose bytes are blob `blob`.
    #[serde(rename_all = "camelCase")]
    File {
        /// The content.
        blob: BlobId,
        /// Bytes.
        size: u64,
        /// Unix permission bits, restored with the content.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<u32>,
    },
    /// A file too large to keep a copy of: the change is known, but cannot be undone.
    #[serde(rename_all = "camelCase")]
    NotKept {
        /// Bytes.
        size: u64,
    },
    /// A symbolic link, never followed: only its target text is kept.
    #[serde(rename_all = "camelCase")]
    Symlink {
        /// Where it points, as written in the link.
        target: String,
    },
    /// A named pipe, a socket or a device file, never opened: only its kind is kept.
    #[serde(rename_all = "camelCase")]
    Special {
        /// `fifo`, `socket` or `device`.
        kind: String,
    },
}

impl FileState {
    /// There is no file.
    pub fn is_absent(&self) -> bool {
        matches!(self, FileState::Absent)
    }

    /// Same content and mode (a `NotKept` state is never known to be the same as another).
    pub(crate) fn same_as(&self, other: &FileState) -> bool {
        match (self, other) {
            (FileState::Absent, FileState::Absent) => true,
            (
                FileState::File {
                    blob: a, mode: ma, ..
                },
                FileState::File {
                    blob: b, mode: mb, ..
                },
            ) => a == b && ma == mb,
            (FileState::Symlink { target: a }, FileState::Symlink { target: b }) => a == b,
            (FileState::Special { kind: a }, FileState::Special { kind: b }) => a == b,
            _ => false,
        }
    }
}

/// One file a run created, changed or deleted. A rename is a deletion plus a creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileChange {
    /// Project-relative, `/`-separated.
    pub path: String,
    /// Before the run.
    pub before: FileState,
    /// After the run.
    pub after: FileState,
}

impl FileChange {
    /// The run created the file.
    pub fn created(&self) -> bool {
        self.before.is_absent() && !self.after.is_absent()
    }

    /// The run deleted the file.
    pub fn deleted(&self) -> bool {
        !self.before.is_absent() && self.after.is_absent()
    }
}

/// Everything one run changed in the project, ordered by path. Small enough to keep in the store
/// beside the run; the contents live in the blob store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunRecord {
    /// Each changed file, by path.
    pub changes: Vec<FileChange>,
    /// Folders the run created (project-relative, parents first); undo removes them when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_dirs: Vec<String>,
}

impl RunRecord {
    /// The run changed no file.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// One record for several runs in order: each file's state before the first run that touched
    /// it and after the last. Files that ended where they started drop out. For a session diff.
    pub fn combine<'a>(records: impl IntoIterator<Item = &'a RunRecord>) -> RunRecord {
        let mut by_path: BTreeMap<String, FileChange> = BTreeMap::new();
        let mut dirs: Vec<String> = Vec::new();
        for record in records {
            for change in &record.changes {
                by_path
                    .entry(change.path.clone())
                    .and_modify(|c| c.after = change.after.clone())
                    .or_insert_with(|| change.clone());
            }
            for dir in &record.created_dirs {
                if !dirs.contains(dir) {
                    dirs.push(dir.clone());
                }
            }
        }
        RunRecord {
            changes: by_path
                .into_values()
                .filter(|c| !c.before.same_as(&c.after))
                .collect(),
            created_dirs: dirs,
        }
    }
}

/// `root` joined with a project-relative path, refusing anything that could leave the root.
pub(crate) fn resolve(root: &Path, path: &str) -> Result<PathBuf, SnapshotError> {
    let rel = Path::new(path);
    let clean = !path.is_empty()
        && !path.contains('\0')
        && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !clean {
        return Err(SnapshotError::BadPath {
            path: path.to_string(),
        });
    }
    Ok(root.join(rel))
}

/// Reads the current state of `path`, storing its bytes when they are at most `max_size`. A link
/// is recorded as a link (never followed), a pipe or device by its kind (never opened); a path
/// behind a folder link that leads outside the project is refused.
pub(crate) fn read_state(
    root: &Path,
    path: &str,
    store: &(impl BlobStore + ?Sized),
    max_size: u64,
) -> Result<FileState, SnapshotError> {
    resolve(root, path)?;
    let root = Root::open(root)?;
    current_state(&root, path, store, max_size)
}

/// The state of `path` under an opened root; see [`read_state`].
pub(crate) fn current_state(
    root: &Root,
    path: &str,
    store: &(impl BlobStore + ?Sized),
    max_size: u64,
) -> Result<FileState, SnapshotError> {
    let found = match root.look(path)? {
        Ok(found) => found,
        Err(Reach::Missing) => return Ok(FileState::Absent),
        Err(Reach::Outside) => return Err(outside(path)),
    };
    Ok(match found {
        Found::Absent | Found::Dir => FileState::Absent,
        Found::File { size, .. } if size > max_size => FileState::NotKept { size },
        Found::File { mode, .. } => match root.read(path)? {
            Some(bytes) => FileState::File {
                blob: store.put(&bytes)?,
                size: bytes.len() as u64,
                mode: Some(mode),
            },
            None => FileState::Absent,
        },
        Found::Symlink(target) => link_state(&target),
        Found::Fifo => FileState::Special {
            kind: "fifo".to_string(),
        },
        Found::Other(kind) => FileState::Special {
            kind: kind.to_string(),
        },
    })
}

/// The state of a link with target text `target` (one that is not UTF-8 cannot be made again).
pub(crate) fn link_state(target: &std::ffi::OsStr) -> FileState {
    match target.to_str() {
        Some(text) => FileState::Symlink {
            target: text.to_string(),
        },
        None => FileState::Special {
            kind: "symlink".to_string(),
        },
    }
}

#[cfg(unix)]
pub(crate) fn mode_of(meta: &std::fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    Some(meta.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
pub(crate) fn mode_of(_meta: &std::fs::Metadata) -> Option<u32> {
    None
}
