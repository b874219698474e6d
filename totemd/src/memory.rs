//! glibc's allocator, set for a daemon that mostly waits (BENCHMARKS.md, "Where the idle daemon's
//! memory goes").
//!
//! By default glibc gives each thread that allocates while another holds the lock an arena of its
//! own, up to eight per core, and each arena keeps the memory it once held: the async workers,
//! the store's workers and the blocking pool's threads ended with a few arenas of a MiB or more
//! each. Two arenas are plenty for a daemon whose threads mostly wait, and after a run the freed
//! memory inside them is given back to the system.
//!
//! The daemon's only other unsafe code is socket activation (`server::listener`): these are two
//! calls into the C library with no safe form.

/// Arenas for the whole daemon (glibc's `M_ARENA_MAX`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: i32 = 2;

/// Caps the allocator's arenas, unless `MALLOC_ARENA_MAX` (glibc's own setting) says otherwise.
/// Call before any thread starts.
#[allow(unsafe_code)]
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a parameter of glibc's allocator, which takes its own lock;
        // it reads and writes no memory of ours.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ARENAS);
        }
    }
}

/// Gives the free pages inside the allocator's arenas back to the system (glibc's
/// `malloc_trim`): after a run, the conversation, the provider's buffers and the tools' output
/// are freed, but glibc keeps all but the top of each arena. Takes well under a millisecond on
/// the daemon's small heaps.
#[allow(unsafe_code)]
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes the allocator's locks itself and only releases pages that hold
    // no allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}
