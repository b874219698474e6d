//! Small shared helpers: clocks, ids and locks.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// Locks a mutex; one poisoned by a panic still holds plain data, so serving goes on.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// [`lock`] for reading a `RwLock`.
pub fn read_lock<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// [`lock`] for writing a `RwLock`.
pub fn write_lock<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A new opaque id: a prefix saying what it names, then a ULID (sortable by creation time).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", ulid::Ulid::new().to_string().to_lowercase())
}

/// Unix milliseconds, strictly increasing across calls in this process: two sessions touched in
/// the same millisecond still get distinct `updatedAt`s, so "newest first" is a total order.
pub fn tick_ms() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    // Process-wide on purpose: the order must hold across every session of the daemon.
    static LAST: AtomicU64 = AtomicU64::new(0);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now_ms().max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// Creates `dir` (and its parents) readable by the user only (0700).
pub fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Makes `path` and everything below it readable by the user only: folders 0700, files 0600.
/// Symlinks are left alone (their own mode means nothing). Returns how many modes it changed.
pub fn make_private(path: &std::path::Path) -> usize {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    let mut changed = 0;
    let wanted = if meta.is_dir() {
        0o700
    } else if meta.is_file() {
        0o600
    } else {
        return 0;
    };
    if meta.permissions().mode() & 0o777 != wanted
        && std::fs::set_permissions(path, std::fs::Permissions::from_mode(wanted)).is_ok()
    {
        changed += 1;
    }
    if meta.is_dir()
        && let Ok(entries) = std::fs::read_dir(path)
    {
        for entry in entries.flatten() {
            changed += make_private(&entry.path());
        }
    }
    changed
}
