//! Putting a run's files back (undo) and applying them again (redo).
//!
//! Both are all-or-nothing: every file must still be as the run left it (for undo) or as the undo
//! left it (for redo). If any is not — a person edited it since — nothing is written and the error
//! names every such file; `force` overwrites them. Files are written through a temporary file in
//! the same folder and renamed into place, with their permission bits.

use std::io::{ErrorKind, Write};
use std::path::Path;

use crate::blob::{BlobId, BlobStore};
use crate::error::{Conflict, ConflictReason, SnapshotError};
use crate::record::{FileState, RunRecord, resolve};

/// What undo or redo did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restored {
    /// Files written back, project-relative.
    pub written: Vec<String>,
    /// Files removed.
    pub removed: Vec<String>,
    /// Files overwritten although they had changed (only with `force`).
    pub overwritten: Vec<String>,
}

/// Restores every file of `record` to its state before the run: created files are removed (and
/// the folders the run created, when empty), changed and deleted files get their content back.
pub fn undo(
    root: &Path,
    store: &(impl BlobStore + ?Sized),
    record: &RunRecord,
    force: bool,
) -> Result<Restored, SnapshotError> {
    let restored = apply(root, store, record, Way::Back, force)?;
    remove_empty_dirs(root, &record.created_dirs)?;
    Ok(restored)
}

/// Applies `record` again after an undo: every file back to its state after the run.
pub fn redo(
    root: &Path,
    store: &(impl BlobStore + ?Sized),
    record: &RunRecord,
    force: bool,
) -> Result<Restored, SnapshotError> {
    apply(root, store, record, Way::Again, force)
}

/// Which way a run's changes are applied.
#[derive(Clone, Copy)]
enum Way {
    /// From the run's after-states back to its before-states (undo).
    Back,
    /// From the before-states to the after-states again (redo).
    Again,
}

/// Moves each file of `record` from the state `way` starts at to the one it ends at.
fn apply(
    root: &Path,
    store: &(impl BlobStore + ?Sized),
    record: &RunRecord,
    way: Way,
    force: bool,
) -> Result<Restored, SnapshotError> {
    let moves: Vec<(&str, &FileState, &FileState)> = record
        .changes
        .iter()
        .map(|c| match way {
            Way::Back => (c.path.as_str(), &c.after, &c.before),
            Way::Again => (c.path.as_str(), &c.before, &c.after),
        })
        .collect();
    let mut conflicts = Vec::new();
    let mut changed_since = Vec::new();
    for &(path, expected, target) in &moves {
        if matches!(target, FileState::NotKept { .. }) {
            conflicts.push(Conflict {
                path: path.to_string(),
                reason: ConflictReason::NotKept,
            });
        } else if !matches_state(root, path, expected)? {
            changed_since.push(path.to_string());
            if !force {
                conflicts.push(Conflict {
                    path: path.to_string(),
                    reason: ConflictReason::ChangedSince,
                });
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(SnapshotError::Conflicts { conflicts });
    }
    // Every blob must be readable before anything is touched.
    let mut contents = Vec::new();
    for &(path, _, target) in &moves {
        if let FileState::File { blob, mode, .. } = target {
            contents.push((path, store.get(blob)?, *mode, blob));
        }
    }
    let mut restored = Restored {
        overwritten: changed_since,
        ..Restored::default()
    };
    // Removals first, so a file can come back where the run left a folder and the other way round.
    for &(path, _, target) in &moves {
        if target.is_absent() {
            let full = resolve(root, path)?;
            match std::fs::remove_file(&full) {
                Ok(()) => restored.removed.push(path.to_string()),
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(SnapshotError::io(&full, e)),
            }
        }
    }
    for (path, bytes, mode, blob) in contents {
        write_file(root, path, &bytes, mode, blob)?;
        restored.written.push(path.to_string());
    }
    Ok(restored)
}

/// Whether `path` is now in `state`.
fn matches_state(root: &Path, path: &str, state: &FileState) -> Result<bool, SnapshotError> {
    let full = resolve(root, path)?;
    let meta = match std::fs::symlink_metadata(&full) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(state.is_absent()),
        Err(e) => return Err(SnapshotError::io(&full, e)),
    };
    match state {
        FileState::Absent => Ok(false),
        FileState::NotKept { size } => Ok(meta.is_file() && meta.len() == *size),
        FileState::File { blob, size, .. } => {
            if !meta.is_file() || meta.len() != *size {
                return Ok(false);
            }
            let bytes = std::fs::read(&full).map_err(|e| SnapshotError::io(&full, e))?;
            Ok(BlobId::of(&bytes) == *blob)
        }
    }
}

fn write_file(
    root: &Path,
    path: &str,
    bytes: &[u8],
    mode: Option<u32>,
    blob: &BlobId,
) -> Result<(), SnapshotError> {
    let full = resolve(root, path)?;
    let folder = full.parent().unwrap_or(root);
    std::fs::create_dir_all(folder).map_err(|e| SnapshotError::io(folder, e))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".totem-restore-")
        .tempfile_in(folder)
        .map_err(|e| SnapshotError::io(folder, e))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| SnapshotError::io(tmp.path(), e))?;
    set_mode(tmp.path(), mode)?;
    tmp.persist(&full)
        .map_err(|e| SnapshotError::io(&full, e.error))?;
    // A restored file that does not hash to its blob would be a silent corruption; check it.
    let written = std::fs::read(&full).map_err(|e| SnapshotError::io(&full, e))?;
    if BlobId::of(&written) != *blob {
        return Err(SnapshotError::CorruptBlob {
            id: blob.clone(),
            path: full,
        });
    }
    Ok(())
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: Option<u32>) -> Result<(), SnapshotError> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(mode) = mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| SnapshotError::io(path, e))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: Option<u32>) -> Result<(), SnapshotError> {
    Ok(())
}

/// Removes the folders a run created, deepest first, when they are empty.
fn remove_empty_dirs(root: &Path, dirs: &[String]) -> Result<(), SnapshotError> {
    let mut dirs: Vec<&String> = dirs.iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    for dir in dirs {
        let full = resolve(root, dir)?;
        let empty = std::fs::read_dir(&full).is_ok_and(|mut it| it.next().is_none());
        if empty {
            std::fs::remove_dir(&full).map_err(|e| SnapshotError::io(&full, e))?;
        }
    }
    Ok(())
}
