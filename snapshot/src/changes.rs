//! Recording what one run changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::blob::BlobStore;
use crate::error::SnapshotError;
use crate::record::{FileChange, FileState, RunRecord, read_state, resolve};
use crate::scan::{ScanOptions, TreeScan};

/// Limits on what is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordOptions {
    /// For files a tool names before changing them: larger ones are not kept (default 64 MiB).
    pub max_file_size: u64,
    /// For the tree scans that catch changes made by commands.
    pub scan: ScanOptions,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            max_file_size: 64 * 1024 * 1024,
            scan: ScanOptions::default(),
        }
    }
}

/// Records the changes of one run. The daemon calls, in order:
///
/// 1. [`RunChanges::record_before`] before a tool (write, edit, patch) changes a file — the first
///    call for a path wins, so later edits of the same file in the run keep the original;
/// 2. [`RunChanges::scan_before`] once before the run's first shell command or job;
/// 3. [`RunChanges::finish`] when the run ends, which reads every recorded file's new state and,
///    if a scan was taken, scans again to find what commands changed.
pub struct RunChanges<'s, S: BlobStore + ?Sized> {
    root: PathBuf,
    store: &'s S,
    options: RecordOptions,
    before: BTreeMap<String, FileState>,
    created_dirs: Vec<String>,
    scan: Option<TreeScan>,
    /// The scan after the last command, for [`RunChanges::changed_by_last_command`].
    latest: Option<TreeScan>,
}

impl<'s, S: BlobStore + ?Sized> RunChanges<'s, S> {
    /// A recorder for the project at `root`.
    pub fn new(root: impl Into<PathBuf>, store: &'s S, options: RecordOptions) -> Self {
        RunChanges {
            root: root.into(),
            store,
            options,
            before: BTreeMap::new(),
            created_dirs: Vec::new(),
            scan: None,
            latest: None,
        }
    }

    /// The project root the recorded paths are relative to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The paths recorded with [`RunChanges::record_before`] so far, in path order.
    pub fn recorded(&self) -> Vec<String> {
        self.before.keys().cloned().collect()
    }

    /// Keeps the current content (or absence) of `path` (project-relative) before it changes.
    pub fn record_before(&mut self, path: &str) -> Result<(), SnapshotError> {
        if self.before.contains_key(path) {
            return Ok(());
        }
        let state = read_state(&self.root, path, self.store, self.options.max_file_size)?;
        if state.is_absent() {
            self.note_missing_dirs(path)?;
        }
        self.before.insert(path.to_string(), state);
        Ok(())
    }

    /// Scans the project so that changes made by commands can be found at the end. `previous` (the
    /// last scan of this project, e.g. the one [`RunChanges::finish`] returned for the run before)
    /// lets unchanged files be skipped without reading them. A second call does nothing.
    pub fn scan_before(&mut self, previous: Option<&TreeScan>) -> Result<(), SnapshotError> {
        if self.scan.is_none() {
            self.scan = Some(TreeScan::take(
                &self.root,
                self.store,
                self.options.scan,
                previous,
            )?);
        }
        Ok(())
    }

    /// What changed in the project since the previous call (since [`RunChanges::scan_before`] for
    /// the first): each changed path with its state then and now, in path order. Takes a new scan
    /// (files whose size and time did not change are not read); nothing without a scan before.
    pub fn changed_by_last_command(&mut self) -> Result<Vec<FileChange>, SnapshotError> {
        let Some(before) = self.latest.as_ref().or(self.scan.as_ref()) else {
            return Ok(Vec::new());
        };
        let after = TreeScan::take(&self.root, self.store, self.options.scan, Some(before))?;
        let changes = before
            .changed_paths(&after)
            .into_iter()
            .map(|path| FileChange {
                before: before.state(&path),
                after: after.state(&path),
                path,
            })
            .filter(|c| !c.before.same_as(&c.after))
            .collect();
        self.latest = Some(after);
        Ok(changes)
    }

    /// The record of the run, and the closing scan when one was taken (to pass as `previous` to the
    /// next run's [`RunChanges::scan_before`]).
    pub fn finish(self) -> Result<(RunRecord, Option<TreeScan>), SnapshotError> {
        let mut changes: BTreeMap<String, FileChange> = BTreeMap::new();
        let mut created_dirs = self.created_dirs;
        let after_scan = match &self.scan {
            Some(before) => {
                let after =
                    TreeScan::take(&self.root, self.store, self.options.scan, Some(before))?;
                for path in before.changed_paths(&after) {
                    if self.before.contains_key(&path) {
                        continue; // the explicit record is exact; handled below
                    }
                    let change = FileChange {
                        before: before.state(&path),
                        after: after.state(&path),
                        path: path.clone(),
                    };
                    if change.created() {
                        for dir in ancestors(&path) {
                            if !before.dirs.contains(&dir) && !created_dirs.contains(&dir) {
                                created_dirs.push(dir);
                            }
                        }
                    }
                    changes.insert(path, change);
                }
                Some(after)
            }
            None => None,
        };
        for (path, before) in self.before {
            let after = read_state(&self.root, &path, self.store, self.options.max_file_size)?;
            changes.insert(
                path.clone(),
                FileChange {
                    path,
                    before,
                    after,
                },
            );
        }
        let changes: Vec<FileChange> = changes
            .into_values()
            .filter(|c| !c.before.same_as(&c.after))
            .collect();
        // Keep only folders that still exist and hold something the run created.
        created_dirs.retain(|d| {
            resolve(&self.root, d).is_ok_and(|p| p.is_dir())
                && changes
                    .iter()
                    .any(|c| c.created() && c.path.starts_with(&format!("{d}/")))
        });
        created_dirs.sort_by_key(|d| d.matches('/').count());
        Ok((
            RunRecord {
                changes,
                created_dirs,
            },
            after_scan,
        ))
    }

    fn note_missing_dirs(&mut self, path: &str) -> Result<(), SnapshotError> {
        for dir in ancestors(path) {
            if !resolve(&self.root, &dir)?.exists() && !self.created_dirs.contains(&dir) {
                self.created_dirs.push(dir);
            }
        }
        Ok(())
    }
}

/// `a`, `a/b` for `a/b/c.txt`.
fn ancestors(path: &str) -> Vec<String> {
    let parts: Vec<&str> = path.split('/').collect();
    (1..parts.len()).map(|n| parts[..n].join("/")).collect()
}
