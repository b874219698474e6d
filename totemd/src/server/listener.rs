//! Getting the socket ready: the home lock (one daemon per home), the socket folder (0700), stale
//! socket replacement, the socket itself (0600).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use tokio::net::UnixListener;

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error(
        "another totemd already runs for {home} ({holder}). Stop it with `totem daemon stop`, or use another TOTEM_HOME"
    )]
    AlreadyRunning { home: PathBuf, holder: String },
    #[error(
        "a daemon already answers on {0}. Stop it with `totem daemon stop`, or start this one with --socket PATH"
    )]
    SocketInUse(PathBuf),
    #[error("cannot prepare {path}: {source}")]
    Io {
        path: PathBuf,
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
    let path = home.join("totemd.lock");
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
