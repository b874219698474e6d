//! Small shared helpers: clocks and ids.

use std::time::{SystemTime, UNIX_EPOCH};

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
