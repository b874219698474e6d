//! Getting the socket ready: the home lock (one daemon per home), the socket folder (0700), stale
//! socket replacement, the socket itself (0600) — or a listening socket inherited from systemd
//! (`LISTEN_FDS`, socket activation) — and telling systemd we are ready (`NOTIFY_SOCKET`).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use tokio::net::UnixListener;

/// Why the daemon cannot listen on its socket.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error(
        "another totemd already runs for {home} ({holder}). Stop it with `totem daemon stop`, or use another TOTEM_HOME"
    )]
    /// Another totemd holds the home's lock.
    AlreadyRunning {
        /// The Totem home.
        home: PathBuf,
        /// What the lock file says of its holder (its pid), or `pid unknown`.
        holder: String,
    },
    #[error(
        "a daemon already answers on {0}. Stop it with `totem daemon stop`, or start this one with --socket PATH"
    )]
    /// Something answers on the socket path already.
    SocketInUse(PathBuf),
    #[error(
        "systemd passed a socket (LISTEN_FDS) that totemd cannot use: {0}. Check ListenStream= in totemd.socket"
    )]
    /// The socket systemd passed cannot be used; the text says why.
    Inherited(String),
    /// Preparing the socket or its folder failed.
    #[error("cannot prepare {path}: {source}")]
    Io {
        /// The path being prepared.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ListenError + '_ {
    move |source| ListenError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Held for the daemon's whole life: while it is, no second daemon can use the same home.
pub struct HomeLock {
    _lock: Flock<File>,
}

/// Takes the home's lock file, writing our pid and socket into it for the error a second daemon
/// prints.
pub fn lock_home(home: &Path, socket: &Path) -> Result<HomeLock, ListenError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(home)
        .map_err(io(home))?;
    let path = home.join(totem_protocol::socket::LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io(&path))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            let note = format!("pid {}, socket {}", std::process::id(), socket.display());
            let written = lock
                .set_len(0)
                .and_then(|_| lock.rewind())
                .and_then(|_| lock.write_all(note.as_bytes()));
            written.map_err(io(&path))?;
            Ok(HomeLock { _lock: lock })
        }
        Err((mut file, _)) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            if holder.trim().is_empty() {
                holder = "pid unknown".to_string();
            }
            Err(ListenError::AlreadyRunning {
                home: home.to_path_buf(),
                holder: holder.trim().to_string(),
            })
        }
    }
}

/// Binds the socket: folder 0700, stale socket removed, socket 0600.
pub fn bind(socket: &Path) -> Result<UnixListener, ListenError> {
    if let Some(dir) = socket.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io(dir))?;
        // An existing folder keeps its mode on create: tighten it.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
    }
    if socket.exists() {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return Err(ListenError::SocketInUse(socket.to_path_buf()));
        }
        tracing::info!(socket = %socket.display(), "replacing a stale socket");
        std::fs::remove_file(socket).map_err(io(socket))?;
    }
    let listener = UnixListener::bind(socket).map_err(io(socket))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600)).map_err(io(socket))?;
    Ok(listener)
}

/// A listening socket passed by the service manager (socket activation), with the path it is bound
/// to when it has one.
#[derive(Debug)]
pub struct Inherited {
    /// The socket, already listening.
    pub listener: std::os::unix::net::UnixListener,
    /// The path it is bound to; absent for an abstract or unnamed socket.
    pub path: Option<PathBuf>,
}

/// Takes the listening socket systemd passed (`LISTEN_FDS`/`LISTEN_PID`, as `sd_listen_fds(3)`
/// describes: fd 3), or `None` when none was passed to this process. The variables are removed so
/// that the commands tools run do not see them.
///
/// Call it first thing in `main`, before any thread starts: it edits the environment.
pub fn take_inherited() -> Result<Option<Inherited>, ListenError> {
    let Some(fd) = take_listen_fd()? else {
        return Ok(None);
    };
    use nix::sys::socket::{SockType, getsockname, sockopt};
    let kind = nix::sys::socket::getsockopt(&fd, sockopt::SockType)
        .map_err(|e| ListenError::Inherited(format!("fd 3 is not a socket ({e})")))?;
    let listening = nix::sys::socket::getsockopt(&fd, sockopt::AcceptConn).unwrap_or(false);
    let address = getsockname::<nix::sys::socket::UnixAddr>(fd.as_raw_fd())
        .map_err(|e| ListenError::Inherited(format!("fd 3 is not a Unix socket ({e})")))?;
    if kind != SockType::Stream || !listening {
        return Err(ListenError::Inherited(
            "fd 3 is not a listening stream socket (use ListenStream=, and Accept=no)".to_string(),
        ));
    }
    let listener = std::os::unix::net::UnixListener::from(fd);
    Ok(Some(Inherited {
        listener,
        path: address.path().map(Path::to_path_buf),
    }))
}

/// The first fd of socket activation, when `LISTEN_PID` names this process and `LISTEN_FDS` is at
/// least 1. The only unsafe code of the daemon: taking ownership of a raw descriptor and editing
/// the environment have no safe form.
#[allow(unsafe_code)]
fn take_listen_fd() -> Result<Option<OwnedFd>, ListenError> {
    use std::os::fd::FromRawFd;
    const SD_LISTEN_FDS_START: i32 = 3;
    let pid = std::env::var("LISTEN_PID").ok();
    let count = std::env::var("LISTEN_FDS").ok();
    if pid.is_none() && count.is_none() {
        return Ok(None);
    }
    if std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() > 1) {
        return Err(ListenError::Inherited(
            "read after a thread started (a bug in totemd)".to_string(),
        ));
    }
    // SAFETY: no other thread runs yet (checked just above), so nothing reads the environment
    // while it changes.
    unsafe {
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    let ours = pid.and_then(|p| p.trim().parse::<u32>().ok()) == Some(std::process::id());
    let count = count
        .and_then(|c| c.trim().parse::<u32>().ok())
        .unwrap_or(0);
    if !ours || count == 0 {
        // Meant for another process (our parent's), or nothing passed: bind our own.
        return Ok(None);
    }
    // Only the first socket is used (totemd.socket declares one).
    match std::fs::read_link(format!("/proc/self/fd/{SD_LISTEN_FDS_START}")) {
        Ok(target) if target.to_string_lossy().starts_with("socket:") => {}
        Ok(target) => {
            return Err(ListenError::Inherited(format!(
                "fd 3 is {}, not a socket",
                target.display()
            )));
        }
        Err(_) => {
            return Err(ListenError::Inherited(
                "LISTEN_FDS is set but fd 3 is not open".to_string(),
            ));
        }
    }
    // SAFETY: fd 3 is open (checked above) and LISTEN_PID names this process, so the service
    // manager opened it for us and nothing in this process has taken it yet (this runs once, first
    // thing in main); it becomes owned exactly once, here.
    let fd = unsafe { OwnedFd::from_raw_fd(SD_LISTEN_FDS_START) };
    Ok(Some(fd))
}

/// Tells systemd the daemon is ready (`READY=1` on `NOTIFY_SOCKET`, `Type=notify` units); does
/// nothing when `NOTIFY_SOCKET` is not set.
pub fn notify_ready() -> std::io::Result<()> {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(());
    };
    let message = format!("READY=1\nMAINPID={}\n", std::process::id());
    let socket = std::os::unix::net::UnixDatagram::unbound()?;
    let bytes = target.as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        // An abstract socket: the name after `@`, as systemd writes it.
        use std::os::linux::net::SocketAddrExt;
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        socket.send_to_addr(message.as_bytes(), &address)?;
    } else {
        socket.send_to(message.as_bytes(), Path::new(&target))?;
    }
    Ok(())
}
