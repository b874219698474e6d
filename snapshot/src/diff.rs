//! Unified diffs of a run's changes.

use serde::{Deserialize, Serialize};
use similar::TextDiff;

use crate::blob::BlobStore;
use crate::error::SnapshotError;
use crate::record::{FileChange, FileState, RunRecord};

/// The diff of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FileDiff {
    /// A unified diff with `a/`/`b/` headers (`/dev/null` for a created or deleted file).
    Text {
        /// Project-relative path.
        path: String,
        /// The unified diff.
        diff: String,
    },
    /// Either side is not text.
    #[serde(rename_all = "camelCase")]
    Binary {
        /// Project-relative path.
        path: String,
        /// Bytes before; none when the file was created.
        before_size: Option<u64>,
        /// Bytes after; none when the file was deleted.
        after_size: Option<u64>,
    },
    /// A side was too large to keep.
    #[serde(rename_all = "camelCase")]
    NotKept {
        /// Project-relative path.
        path: String,
    },
}

impl FileDiff {
    /// The project-relative path of the file.
    pub fn path(&self) -> &str {
        match self {
            FileDiff::Text { path, .. }
            | FileDiff::Binary { path, .. }
            | FileDiff::NotKept { path } => path,
        }
    }
}

/// Diffs every file of `record`, in path order.
pub fn diff(
    store: &(impl BlobStore + ?Sized),
    record: &RunRecord,
) -> Result<Vec<FileDiff>, SnapshotError> {
    record
        .changes
        .iter()
        .map(|c| diff_change(store, c))
        .collect()
}

fn content(
    store: &(impl BlobStore + ?Sized),
    state: &FileState,
) -> Result<Option<Vec<u8>>, SnapshotError> {
    match state {
        FileState::File { blob, .. } => Ok(Some(store.get(blob)?)),
        FileState::Symlink { .. } | FileState::Special { .. } => {
            Ok(describe(state).map(String::into_bytes))
        }
        _ => Ok(None),
    }
}

/// The one line that stands for a link, pipe, socket or device in a diff: what it is, and for a
/// link the target text, never what it points to.
pub(crate) fn describe(state: &FileState) -> Option<String> {
    match state {
        FileState::Symlink { target } => Some(format!("symbolic link to {target}\n")),
        FileState::Special { kind } => Some(match kind.as_str() {
            "fifo" => "named pipe (FIFO), not read\n".to_string(),
            "symlink" => "symbolic link (target not UTF-8)\n".to_string(),
            other => format!("{other} file, not read\n"),
        }),
        _ => None,
    }
}

fn diff_change(
    store: &(impl BlobStore + ?Sized),
    change: &FileChange,
) -> Result<FileDiff, SnapshotError> {
    let path = change.path.clone();
    if matches!(change.before, FileState::NotKept { .. })
        || matches!(change.after, FileState::NotKept { .. })
    {
        return Ok(FileDiff::NotKept { path });
    }
    let before = content(store, &change.before)?;
    let after = content(store, &change.after)?;
    Ok(unified_diff(&path, before.as_deref(), after.as_deref()))
}

/// Text is valid UTF-8 without NUL bytes (git's test looks for NUL in the first 8000 bytes).
fn is_text(bytes: &[u8]) -> bool {
    !bytes.iter().take(8000).any(|b| *b == 0) && std::str::from_utf8(bytes).is_ok()
}

/// The diff of one file from `before` to `after` (`None` = absent).
pub fn unified_diff(path: &str, before: Option<&[u8]>, after: Option<&[u8]>) -> FileDiff {
    let old = before.unwrap_or_default();
    let new = after.unwrap_or_default();
    if !is_text(old) || !is_text(new) {
        return FileDiff::Binary {
            path: path.to_string(),
            before_size: before.map(|b| b.len() as u64),
            after_size: after.map(|b| b.len() as u64),
        };
    }
    let (old_text, new_text) = (
        std::str::from_utf8(old).unwrap_or_default(),
        std::str::from_utf8(new).unwrap_or_default(),
    );
    let old_name = if before.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_string()
    };
    let new_name = if after.is_some() {
        format!("b/{path}")
    } else {
        "/dev/null".to_string()
    };
    let diff = TextDiff::from_lines(old_text, new_text)
        .unified_diff()
        .context_radius(3)
        .header(&old_name, &new_name)
        .to_string();
    FileDiff::Text {
        path: path.to_string(),
        diff,
    }
}
