//! File snapshots per run: what a run changed, its diffs, and undo/redo.
//!
//! A pure library the daemon drives; it owns no state of its own beyond the blobs it is given a
//! [`BlobStore`] for.
//!
//! - **Recording** ([`RunChanges`]): before a tool changes a file the daemon calls
//!   [`RunChanges::record_before`], which keeps the file's content (or its absence) as a blob.
//!   Changes made by shell commands and jobs are found by a before/after scan of the project
//!   ([`RunChanges::scan_before`] before the run's first command; see [`scan`] for what it sees).
//!   [`RunChanges::finish`] returns a [`RunRecord`]: per file, its state before and after.
//!   We chose a scan over git because it works in any folder, sees untracked files, and does not
//!   touch the user's index or stash; a file ignored by `.gitignore` is not tracked.
//! - **Diffs** ([`diff()`]): unified diffs per file for one record, or for a session through
//!   [`RunRecord::combine`]; binary files are reported as such.
//! - **Undo/redo** ([`undo()`], [`redo()`]): byte-exact restoration of the before (or after)
//!   state. Created files are removed, deleted ones restored, a rename is a deletion plus a
//!   creation. A file changed since is not overwritten — the whole operation is refused, naming
//!   every such file — unless forced. Nothing is ever written outside the project: each path is
//!   opened beneath the root when written, and a folder turned into a link to elsewhere refuses
//!   the operation whatever `force` says.
//!
//! Undo "run by run back to the start" is the daemon's stack of records: undo the newest not yet
//! undone; redo re-applies the last undone one.

#![deny(missing_docs)]

mod beneath;
mod blob;
mod changes;
mod diff;
mod error;
mod record;
mod restore;
pub mod scan;

pub use blob::{BlobId, BlobStore, DirBlobStore};
pub use changes::{RecordOptions, RunChanges};
pub use diff::{FileDiff, diff, unified_diff};
pub use error::{Conflict, ConflictReason, SnapshotError};
pub use record::{FileChange, FileState, RunRecord};
pub use restore::{Restored, redo, undo};
pub use scan::{ScanOptions, TreeScan};
