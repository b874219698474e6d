//! glibc's allocator, set for a daemon that mostly waits (BENCHMARKS.md, "Where the idle daemon's
//! memory goes").
//!
//! By default glibc gives each thread that allocates while another holds the lock an arena of its
//! own, up to eight per core, and each arena keeps the memory it once held: the async workers,
//! the store's workers and the blocking pool's threads ended with a few arenas of a MiB or more
//! each. One arena is plenty for a daemon whose threads mostly wait (small blocks come from each
//! thread's cache without the lock), and after a run the freed memory inside it is given back to
//! the system. One rather than two since issue 37 item 3: over a long life every arena ends as
//! big as the busiest moment made it, with a few live blocks on most of its pages; a second
//! arena held about 4 MiB more at the soak's idle end, on average (BENCHMARKS.md, "Soak").
//!
//! The daemon's only other unsafe code is socket activation (`server::listener`): these are
//! calls into the C library with no safe form.

/// glibc's setting, read once when a program starts, that turns its per-thread caches off.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const NO_THREAD_CACHES: &str = "glibc.malloc.tcache_count=0";
/// Set for the daemon that [`no_thread_caches`] started again with [`NO_THREAD_CACHES`].
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const RESTARTED: &str = "TOTEMD_NO_THREAD_CACHES";

/// Starts the daemon again, in the same process, with glibc's per-thread caches off (issue 37
/// item 3). Each thread keeps up to seven freed blocks of every small size for itself, and
/// `malloc_trim` cannot give back the pages they lie on: after the soak's long life the long-lived
/// threads' caches (the async workers, the store's workers, the log writer) held ~1.5 MiB of
/// blocks spread over the whole heap, and turning them off took the idle end from 30.8 to
/// 25.3 MiB (BENCHMARKS.md, "Soak"). glibc reads the setting only from the environment, when a
/// program starts, so the daemon execs itself with it (same pid, arguments, open descriptors:
/// socket activation is unaffected), then removes it from its environment so that the commands it
/// runs keep their caches. Does nothing when `GLIBC_TUNABLES` is already set (the user's own
/// settings win; this is also the way to keep the caches) or when the exec fails. Call first in
/// `main`, before any thread starts.
#[allow(unsafe_code)]
pub fn no_thread_caches() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var_os(RESTARTED).is_some() {
            // SAFETY: called first in main, before any thread starts, so nothing reads or writes
            // the environment meanwhile.
            unsafe {
                std::env::remove_var(RESTARTED);
                std::env::remove_var("GLIBC_TUNABLES");
            }
            return;
        }
        if std::env::var_os("GLIBC_TUNABLES").is_some() {
            return;
        }
        use std::os::unix::process::CommandExt as _;
        let mut args = std::env::args_os();
        // /proc/self/exe: this very binary, even when its file was replaced since it started.
        let mut command = std::process::Command::new("/proc/self/exe");
        if let Some(arg0) = args.next() {
            command.arg0(arg0);
        }
        // Returns only when the exec failed: the daemon then goes on with the caches.
        let _ = command
            .args(args)
            .env("GLIBC_TUNABLES", NO_THREAD_CACHES)
            .env(RESTARTED, "1")
            .exec();
    }
}

/// Arenas for the whole daemon (glibc's `M_ARENA_MAX`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: i32 = 1;

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

/// When `TOTEM_MALLOC_REPORT` names a file, appends glibc's view of its arenas to it
/// (`mallinfo2` in one line, then `malloc_info`'s XML): what is in use against what the arenas
/// hold. A measuring aid for the long-life benchmark (BENCHMARKS.md, "Soak"); off otherwise.
#[allow(unsafe_code)]
pub fn report(when: &str) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let Some(path) = std::env::var_os("TOTEM_MALLOC_REPORT") else {
            return;
        };
        // SAFETY: mallinfo2 only reads the allocator's counters under its own locks.
        let info = unsafe { libc::mallinfo2() };
        let line = format!(
            "{when} ms={} arena={} ordblks={} in_use={} free={} mmapped={} mmaps={} top_free={}\n",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0),
            info.arena,
            info.ordblks,
            info.uordblks,
            info.fordblks,
            info.hblkhd,
            info.hblks,
            info.keepcost,
        );
        use std::io::Write as _;
        let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        else {
            return;
        };
        let _ = file.write_all(line.as_bytes());
        drop(file);
        let Ok(c_path) =
            std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
        else {
            return;
        };
        // SAFETY: fopen gets a NUL-terminated path and a constant mode; the stream is checked
        // for null, handed to malloc_info, and closed once.
        unsafe {
            let stream = libc::fopen(c_path.as_ptr(), c"a".as_ptr());
            if !stream.is_null() {
                libc::malloc_info(0, stream);
                libc::fclose(stream);
            }
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = when;
}
