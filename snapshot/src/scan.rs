//! Before/after scans of the project tree, to see what shell commands changed.
//!
//! A command cannot say which files it will touch, so before the first command of a run the
//! project is scanned and every file's content kept as a blob; after the run a second scan finds
//! what differs. The walk honours `.gitignore`, `.ignore` and `.git/info/exclude` (also outside a
//! git repository) and skips `.git/`, so build outputs are neither kept nor tracked. Files over
//! [`ScanOptions::max_file_size`] are tracked by size and modification time only ([`NotKept`]).
//! A symbolic link is tracked by its target text and a named pipe, socket or device by its kind:
//! neither is followed nor opened.
//! A file whose size and modification time equal the previous scan's is not read again.
//!
//! [`NotKept`]: crate::FileState::NotKept

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::beneath::read_regular;
use crate::blob::BlobStore;
use crate::error::SnapshotError;
use crate::record::{FileState, link_state, mode_of};

/// Limits of a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanOptions {
    /// Larger files are tracked but their content is not kept (default 1 MiB).
    pub max_file_size: u64,
    /// The scan stops after this many files (default 50 000); see [`TreeScan::truncated`].
    pub max_files: usize,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            max_file_size: 1024 * 1024,
            max_files: 50_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanEntry {
    pub(crate) size: u64,
    pub(crate) modified_ns: u128,
    pub(crate) state: FileState,
}

/// The files (and folders) of a project at one moment.
#[derive(Debug, Clone, Default)]
pub struct TreeScan {
    pub(crate) files: BTreeMap<String, ScanEntry>,
    pub(crate) dirs: BTreeSet<String>,
    truncated: bool,
}

impl TreeScan {
    /// Scans `root`, keeping file contents in `store`. Entries of `previous` with the same size and
    /// modification time are reused without reading the file.
    pub fn take(
        root: &Path,
        store: &(impl BlobStore + ?Sized),
        options: ScanOptions,
        previous: Option<&TreeScan>,
    ) -> Result<TreeScan, SnapshotError> {
        let mut scan = TreeScan::default();
        let walker = ignore::WalkBuilder::new(root)
            .hidden(false)
            .parents(false)
            .git_global(false)
            .require_git(false)
            .follow_links(false)
            .filter_entry(|e| e.file_name() != ".git")
            .sort_by_file_name(|a, b| a.cmp(b))
            .build();
        for entry in walker {
            let entry = entry.map_err(|e| SnapshotError::Scan {
                message: e.to_string(),
            })?;
            let Some(rel) = relative(root, entry.path()) else {
                continue;
            };
            let Some(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                scan.dirs.insert(rel);
                continue;
            }
            if scan.files.len() >= options.max_files {
                scan.truncated = true;
                break;
            }
            let meta = entry.metadata().map_err(|e| SnapshotError::Scan {
                message: e.to_string(),
            })?;
            if !kind.is_file() {
                // Links are kept as their target text, pipes and devices by their kind: neither
                // is followed or opened.
                let state = if kind.is_symlink() {
                    match std::fs::read_link(entry.path()) {
                        Ok(target) => link_state(target.as_os_str()),
                        Err(_) => continue,
                    }
                } else {
                    FileState::Special {
                        kind: special_kind(&kind).to_string(),
                    }
                };
                scan.files.insert(
                    rel,
                    ScanEntry {
                        size: 0,
                        modified_ns: 0,
                        state,
                    },
                );
                continue;
            }
            let size = meta.len();
            let modified_ns = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            let mode = mode_of(&meta);
            let reused = previous
                .and_then(|p| p.files.get(&rel))
                .filter(|p| p.size == size && p.modified_ns == modified_ns && modified_ns != 0)
                .filter(|p| match &p.state {
                    FileState::File { mode: m, .. } => *m == mode,
                    _ => true,
                })
                .map(|p| p.state.clone());
            let state = match reused {
                Some(state) => state,
                None if size > options.max_file_size => FileState::NotKept { size },
                None => {
                    let path = entry.path();
                    match read_regular(path) {
                        Ok(Some(bytes)) => FileState::File {
                            blob: store.put(&bytes)?,
                            size: bytes.len() as u64,
                            mode,
                        },
                        // Gone, replaced or unreadable between listing and reading: not tracked.
                        Ok(None) | Err(_) => continue,
                    }
                }
            };
            scan.files.insert(
                rel,
                ScanEntry {
                    size,
                    modified_ns,
                    state,
                },
            );
        }
        Ok(scan)
    }

    /// The scan stopped at [`ScanOptions::max_files`]; changes past that point are not seen.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// Number of files seen.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// No file seen.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The state of `path` at scan time (`Absent` when the scan did not see it).
    pub fn state(&self, path: &str) -> FileState {
        self.files
            .get(path)
            .map_or(FileState::Absent, |e| e.state.clone())
    }

    /// Paths whose state differs between `self` (before) and `after`.
    pub(crate) fn changed_paths(&self, after: &TreeScan) -> Vec<String> {
        let mut paths: BTreeSet<&String> = BTreeSet::new();
        for (path, entry) in &self.files {
            match after.files.get(path) {
                Some(a) if same_entry(entry, a) => {}
                _ => {
                    paths.insert(path);
                }
            }
        }
        for path in after.files.keys() {
            if !self.files.contains_key(path) {
                paths.insert(path);
            }
        }
        paths.into_iter().cloned().collect()
    }
}

fn special_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_fifo() {
        "fifo"
    } else if kind.is_socket() {
        "socket"
    } else {
        "device"
    }
}

fn same_entry(a: &ScanEntry, b: &ScanEntry) -> bool {
    match (&a.state, &b.state) {
        (FileState::NotKept { .. }, _) | (_, FileState::NotKept { .. }) => {
            a.size == b.size && a.modified_ns == b.modified_ns
        }
        (x, y) => x.same_as(y),
    }
}

/// `path` relative to `root`, with `/` separators; `None` for the root itself.
fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel: PathBuf = path.strip_prefix(root).ok()?.to_path_buf();
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}
