//! File helpers shared by the tools: atomic writes, diffs, walkers that stay in the project, and
//! "did you mean" suggestions.

use std::borrow::Cow;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::boundary::Boundary;

/// Where half-written files go when a daemon set one (its `tmp/`, emptied at each start): a
/// write killed half-way then leaves nothing in the project.
static TEMP_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Names the folder for half-written files (see [`write_atomic`]). Only the first call counts.
pub fn set_temp_dir(dir: PathBuf) {
    let _ = TEMP_DIR.set(dir);
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a reader never sees half a
/// file. Keeps the permissions of a file it replaces. The temporary file is made in the folder
/// [`set_temp_dir`] named; where that is another file system, beside `path`.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir)?;
    if let Some(temp_dir) = TEMP_DIR.get() {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = temp_dir.join(format!("write-{}-{n}.tmp", std::process::id()));
        match write_then_rename(&tmp, path, bytes) {
            Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !temp_dir.is_dir() => {}
            done => return done,
        }
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.totem-{}.tmp", std::process::id()));
    write_then_rename(&tmp, path, bytes)
}

fn write_then_rename(tmp: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let result = (|| {
        let mut file = std::fs::File::create(tmp)?;
        file.write_all(bytes)?;
        file.sync_data()?;
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(tmp, meta.permissions())?;
        }
        std::fs::rename(tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    result
}

/// A unified diff of one file's change, for clients (capped so a huge rewrite stays small).
pub(crate) fn unified_diff(rel: &str, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{rel}"), &format!("b/{rel}"))
        .to_string();
    const CAP: usize = 100_000;
    if text.len() > CAP {
        format!(
            "{}\n… diff cut at {CAP} bytes\n",
            crate::process::truncate_bytes(&text, CAP)
        )
    } else {
        text
    }
}

/// A walker over `start` that honours .gitignore/.ignore (also outside git repositories), shows
/// hidden files, never enters `.git`, never follows symlinks, and yields entries in name order. It
/// does not enter dependency folders (`node_modules`) that a project without ignore files would
/// otherwise pour into a listing; the folder itself is still yielded.
pub(crate) fn shallow_walker(start: &Path, max_depth: Option<usize>) -> ignore::Walk {
    builder(start, max_depth)
        .filter_entry(|e| {
            e.file_name() != ".git"
                && !(e.depth() > 0 && e.path().parent().is_some_and(is_dependency_dir))
        })
        .build()
}

/// Folders whose content a listing leaves out.
pub(crate) fn is_dependency_dir(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "node_modules")
}

/// A walker over `start` on one thread per core (as `rg`), in no particular order (callers sort).
/// Honours .gitignore/.ignore (also outside git repositories), shows hidden files, never enters
/// `.git`, never follows symlinks. `within` is a chain of folder names below `start` (see
/// [`PathGlob::folders`]): only that chain is entered, so `src/**` does not read the rest of the
/// tree. The walk still starts at `start`, so ignore rules and symlinks along the chain are
/// treated exactly as in a full walk.
pub(crate) fn parallel_walker(start: &Path, within: &[String]) -> ignore::WalkParallel {
    let within: Vec<std::ffi::OsString> = within.iter().map(Into::into).collect();
    let mut builder = ignore::WalkBuilder::new(start);
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |e| {
            if e.file_name() == ".git" {
                return false;
            }
            match e.depth().checked_sub(1).and_then(|i| within.get(i)) {
                Some(name) => e.file_name() == name.as_os_str(),
                None => true,
            }
        });
    builder.build_parallel()
}

/// What one walker thread gathers, handed to the shared list in batches (one lock per 64 items)
/// and when the thread's visitor is dropped at the end of the walk.
pub(crate) struct Batch<'a, T> {
    mine: Vec<T>,
    all: &'a Mutex<Vec<T>>,
}

impl<'a, T> Batch<'a, T> {
    pub fn new(all: &'a Mutex<Vec<T>>) -> Self {
        Self {
            mine: Vec::new(),
            all,
        }
    }

    pub fn push(&mut self, item: T) {
        self.mine.push(item);
        if self.mine.len() >= 64 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if let Ok(mut all) = self.all.lock() {
            all.append(&mut self.mine);
        }
    }
}

impl<T> Drop for Batch<'_, T> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Modification times of walked entries (not following symlinks), for one walker thread. Each is
/// read with `fstatat` against its folder, opened once while the walk lists that folder, instead
/// of a `stat` of the full path: the kernel's lookup of every path component was a quarter of
/// `glob`'s time for 20,000 matches.
#[derive(Default)]
pub(crate) struct Mtimes {
    folder: Option<(Vec<u8>, std::os::fd::OwnedFd)>,
}

impl Mtimes {
    /// `entry`'s modification time; the epoch when it cannot be read.
    pub fn of(&mut self, entry: &ignore::DirEntry) -> SystemTime {
        use nix::fcntl::{OFlag, open};
        use nix::sys::stat::{Mode, fstatat};
        use std::os::unix::ffi::OsStrExt as _;
        let path = entry.path().as_os_str().as_bytes();
        let Some(slash) = path.iter().rposition(|b| *b == b'/') else {
            return modified(entry);
        };
        let (folder, name) = (&path[..slash.max(1)], &path[slash + 1..]);
        if self.folder.as_ref().is_none_or(|(open, _)| open != folder) {
            let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
            self.folder = open(std::ffi::OsStr::from_bytes(folder), flags, Mode::empty())
                .ok()
                .map(|fd| (folder.to_vec(), fd));
        }
        let Some((_, fd)) = &self.folder else {
            return modified(entry);
        };
        let flags = nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW;
        match fstatat(fd, std::ffi::OsStr::from_bytes(name), flags) {
            Ok(stat) => {
                let since = Duration::new(
                    stat.st_mtime.unsigned_abs(),
                    u32::try_from(stat.st_mtime_nsec).unwrap_or(0),
                );
                if stat.st_mtime >= 0 {
                    UNIX_EPOCH + since
                } else {
                    UNIX_EPOCH.checked_sub(since).unwrap_or(UNIX_EPOCH)
                }
            }
            Err(_) => modified(entry),
        }
    }
}

fn modified(entry: &ignore::DirEntry) -> SystemTime {
    entry
        .metadata()
        .ok()
        .and_then(|m| m.modified().ok())
        .unwrap_or(UNIX_EPOCH)
}

/// `path` relative to `base` (an ancestor on the walk), borrowed when the path is UTF-8; empty for
/// `base` itself, `None` when `path` is not below `base`. Compares bytes: the walker builds every
/// path as `base/name/…`, and `Path::strip_prefix`'s component walk showed in the profile.
pub(crate) fn below<'p>(base: &Path, path: &'p Path) -> Option<Cow<'p, str>> {
    use std::os::unix::ffi::OsStrExt as _;
    let base = base.as_os_str().as_bytes();
    let rest = path.as_os_str().as_bytes().strip_prefix(base)?;
    let rest = match rest {
        [] => rest,
        _ if base.ends_with(b"/") => rest,
        [b'/', tail @ ..] => tail,
        _ => return None,
    };
    Some(match std::str::from_utf8(rest) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => Cow::Owned(String::from_utf8_lossy(rest).into_owned()),
    })
}

fn builder(start: &Path, max_depth: Option<usize>) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(start);
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(max_depth)
        .sort_by_file_name(|a, b| a.cmp(b));
    builder
}

/// Whether a walked entry may be reported and opened: a symlink only when its target is inside.
pub(crate) fn entry_inside(boundary: &Boundary, entry: &ignore::DirEntry) -> bool {
    !entry.path_is_symlink() || boundary.contains(entry.path())
}

/// Up to three names in the missing path's folder that look like the one asked for.
pub(crate) fn suggestions(boundary: &Boundary, missing: &Path) -> Vec<String> {
    let (Some(dir), Some(name)) = (missing.parent(), missing.file_name()) else {
        return Vec::new();
    };
    let wanted = name.to_string_lossy().to_lowercase();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let close = entries.filter_map(Result::ok).filter_map(|e| {
        let candidate = e.file_name().to_string_lossy().into_owned();
        let lower = candidate.to_lowercase();
        let near = lower.starts_with(&wanted) || wanted.starts_with(&lower);
        let path = dir.join(&candidate);
        // A link out of the project (node_modules linked to a shared install) is not offered:
        // the next call would be refused as outside.
        if !boundary.contains(&path) {
            return None;
        }
        let rel = boundary.relative(&path)?;
        Some((rel, near))
    });
    closest(&wanted, close, 3, Some(0.6))
}

/// The `n` candidates whose last path segment looks most like `wanted` (lower case), best first,
/// each given as (path, kept whatever its likeness). With `floor`, the others below that ratio
/// are left out.
fn closest(
    wanted: &str,
    candidates: impl Iterator<Item = (String, bool)>,
    n: usize,
    floor: Option<f32>,
) -> Vec<String> {
    let mut scored: Vec<(f32, String)> = candidates
        .filter_map(|(rel, keep)| {
            let name = rel.rsplit('/').next().unwrap_or(&rel).to_lowercase();
            let ratio = similar::TextDiff::from_chars(wanted, name.as_str()).ratio();
            (keep || floor.is_none_or(|f| ratio >= f)).then_some((ratio, rel))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(n).map(|(_, rel)| rel).collect()
}

/// Files a small project holds at most for a not-found error to list them all.
const LIST_ALL_UP_TO: usize = 25;
/// Entries a not-found hint walks at most (it must stay cheap in a large tree).
const HINT_WALK_CAP: usize = 2_000;

/// The project's files (not secret ones, not ignored ones, 4 folders deep), in walk order, as
/// many as [`HINT_WALK_CAP`] entries give.
fn walked_files(ctx: &crate::ToolContext) -> Vec<String> {
    let boundary = ctx.boundary();
    let mut files: Vec<String> = Vec::new();
    for entry in shallow_walker(boundary.root(), Some(4))
        .filter_map(Result::ok)
        .take(HINT_WALK_CAP)
    {
        if entry.file_type().is_some_and(|t| t.is_file())
            && let Some(rel) = boundary.relative(entry.path())
            && !ctx.is_secret(&rel)
        {
            files.push(rel);
        }
    }
    files
}

/// Every file of a small project (at most [`LIST_ALL_UP_TO`]), sorted; `None` for a larger one.
/// What a small model is told up front, so it does not list folders that do not exist.
pub fn small_project_files(ctx: &crate::ToolContext) -> Option<Vec<String>> {
    let mut files = walked_files(ctx);
    files.sort();
    (files.len() <= LIST_ALL_UP_TO).then_some(files)
}

/// What a tool says after "not found" so the next call names a real path: names close to the one
/// asked for in its folder, else the project's files when it has few (a small model asked for
/// `/api/ping/`, a URL, five times over), else the files whose names look most like it.
pub(crate) fn not_found_hint(ctx: &crate::ToolContext, missing: &Path) -> String {
    let boundary = ctx.boundary();
    let close = suggestions(boundary, missing);
    if !close.is_empty() {
        return format!(" Did you mean: {}?", close.join(", "));
    }
    let wanted = missing
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let files = walked_files(ctx);
    if files.is_empty() {
        return " The project has no files yet.".to_string();
    }
    if files.len() <= LIST_ALL_UP_TO {
        return format!(" The project's files: {}.", files.join(", "));
    }
    let names = closest(&wanted, files.into_iter().map(|rel| (rel, true)), 5, None);
    format!(
        " Files with similar names: {}; list shows the others.",
        names.join(", ")
    )
}

/// Runs blocking file work off the async threads.
pub(crate) async fn blocking<F>(work: F) -> crate::tool::ToolOutput
where
    F: FnOnce() -> crate::tool::ToolOutput + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(output) => output,
        Err(e) => crate::tool::ToolOutput::error(format!("the tool failed internally: {e}")),
    }
}

/// Glob matching as models expect it: a pattern without `/` matches file names anywhere
/// (`*.rs`), one with `/` matches the path from the project root (`src/**/*.rs`).
pub(crate) struct PathGlob {
    /// A set of one: unlike a `GlobMatcher` (always a regex), a set matches `*.rs` by extension
    /// and `Cargo.toml` by name without running a regex.
    matcher: globset::GlobSet,
    name_only: bool,
    folders: Vec<String>,
}

impl PathGlob {
    pub fn new(pattern: &str) -> Result<Self, String> {
        let pattern = pattern.trim().trim_start_matches("./");
        let name_only = !pattern.contains('/');
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| format!("invalid glob pattern {pattern:?}: {}", e.kind()))?;
        // The leading folders written without wildcards: `pkg03/src/**/*.ts` → `pkg03`, `src`.
        let mut parts: Vec<&str> = pattern.split('/').collect();
        parts.pop();
        let folders = parts
            .into_iter()
            .take_while(|part| {
                !part.is_empty()
                    && *part != "."
                    && !part.contains(['*', '?', '[', ']', '{', '}', '\\'])
            })
            .map(str::to_string)
            .collect();
        let matcher = globset::GlobSetBuilder::new()
            .add(glob)
            .build()
            .map_err(|e| format!("invalid glob pattern {pattern:?}: {}", e.kind()))?;
        Ok(Self {
            matcher,
            name_only,
            folders,
        })
    }

    /// The folders every match lies in, outermost first (empty for a name pattern or one that
    /// starts with a wildcard); for [`parallel_walker`].
    pub fn folders(&self) -> &[String] {
        &self.folders
    }

    /// `rel` is relative to the project root, `/`-separated.
    pub fn is_match(&self, rel: &str) -> bool {
        if self.name_only {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            self.matcher.is_match(name)
        } else {
            self.matcher.is_match(rel)
        }
    }
}
