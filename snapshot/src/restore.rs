//! Putting a run's files back (undo) and applying them again (redo).
//!
//! Both are all-or-nothing: every file must still be as the run left it (for undo) or as the undo
//! left it (for redo). If any is not — a person edited it since — nothing is written and the error
//! names every such file; `force` overwrites them. Files are written through a temporary file in
//! the same folder and renamed into place, with their permission bits.
//!
//! Undo and redo never write outside the project, `force` or not: every path is opened beneath
//! the project root at the moment of writing (see [`crate::beneath`]). A path behind a folder that
//! became a link to elsewhere stops the whole operation before anything is written
//! ([`SnapshotError::Outside`]), like a conflict; the rest is not done either, so the run stays
//! whole to undo once the link is gone.

use std::path::Path;

use crate::beneath::{Found, Reach, Root, outside};
use crate::blob::{BlobId, BlobStore};
use crate::error::{Conflict, ConflictReason, SnapshotError};
use crate::record::{FileState, RunRecord, link_state, resolve};

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
///
/// All or nothing, checked first: a path that cannot be restored, changed since (unless `force`),
/// or that lies behind a folder link leading outside the project (even with `force`) stops the
/// whole operation before anything is written. Each write then opens its folder again beneath the
/// root (see [`crate::beneath`]), so a folder swapped for a link after the check fails that write
/// instead of following the link.
fn apply(
    root: &Path,
    store: &(impl BlobStore + ?Sized),
    record: &RunRecord,
    way: Way,
    force: bool,
) -> Result<Restored, SnapshotError> {
    let root_dir = Root::open(root)?;
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
    let mut outside = Vec::new();
    for &(path, expected, target) in &moves {
        resolve(root, path)?;
        let matches = match matches_state(&root_dir, path, expected) {
            Ok(matches) => matches,
            Err(SnapshotError::Outside { .. }) => {
                outside.push(path.to_string());
                continue;
            }
            Err(e) => return Err(e),
        };
        if !restorable(target) {
            conflicts.push(Conflict {
                path: path.to_string(),
                reason: match target {
                    FileState::NotKept { .. } => ConflictReason::NotKept,
                    _ => ConflictReason::NotRestorable,
                },
            });
        } else if !matches {
            changed_since.push(path.to_string());
            if !force {
                conflicts.push(Conflict {
                    path: path.to_string(),
                    reason: ConflictReason::ChangedSince,
                });
            }
        }
    }
    if !outside.is_empty() {
        return Err(SnapshotError::Outside { paths: outside });
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
        if target.is_absent() && root_dir.remove(path)? {
            restored.removed.push(path.to_string());
        }
    }
    for (path, bytes, mode, blob) in contents {
        root_dir.write(path, &bytes, mode)?;
        // A restored file that does not hash to its blob would be a silent corruption; check it.
        let written = root_dir.read(path)?.unwrap_or_default();
        if BlobId::of(&written) != *blob {
            return Err(SnapshotError::CorruptBlob {
                id: blob.clone(),
                path: root.join(path),
            });
        }
        restored.written.push(path.to_string());
    }
    for &(path, _, target) in &moves {
        match target {
            FileState::Symlink { target } => root_dir.symlink(path, target)?,
            FileState::Special { .. } => root_dir.fifo(path)?,
            _ => continue,
        }
        restored.written.push(path.to_string());
    }
    Ok(restored)
}

/// Whether undo or redo can bring `state` back: not a file too large to keep, not a socket or
/// device (a named pipe is made again).
fn restorable(state: &FileState) -> bool {
    match state {
        FileState::NotKept { .. } => false,
        FileState::Special { kind } => kind == "fifo",
        _ => true,
    }
}

/// Whether `path` is now in `state` (never following a link there, never opening a pipe).
fn matches_state(root: &Root, path: &str, state: &FileState) -> Result<bool, SnapshotError> {
    let found = match root.look(path)? {
        Ok(found) => found,
        Err(Reach::Missing) => return Ok(state.is_absent()),
        Err(Reach::Outside) => return Err(outside(path)),
    };
    Ok(match (state, found) {
        (FileState::Absent, Found::Absent) => true,
        (FileState::NotKept { size }, Found::File { size: now, .. }) => now == *size,
        (FileState::File { blob, size, .. }, Found::File { size: now, .. }) => {
            now == *size
                && root
                    .read(path)?
                    .is_some_and(|bytes| BlobId::of(&bytes) == *blob)
        }
        (FileState::Symlink { .. } | FileState::Special { .. }, Found::Symlink(target)) => {
            link_state(&target).same_as(state)
        }
        (FileState::Special { kind }, Found::Fifo) => kind == "fifo",
        (FileState::Special { kind }, Found::Other(now)) => kind == now,
        _ => false,
    })
}

/// Removes the folders a run created, deepest first, when they are empty.
fn remove_empty_dirs(root: &Path, dirs: &[String]) -> Result<(), SnapshotError> {
    let root_dir = Root::open(root)?;
    let mut dirs: Vec<&String> = dirs.iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    for dir in dirs {
        resolve(root, dir)?;
        root_dir.remove_empty_dir(dir)?;
    }
    Ok(())
}
