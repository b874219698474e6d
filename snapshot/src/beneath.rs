//! Reading and writing project files so that no path component can lead outside the project.
//!
//! A path is checked by the kernel at the moment of each read or write, not beforehand: the folder
//! holding a file is opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` against a
//! descriptor of the project root, and the file is then read, written, renamed or removed relative
//! to that folder's descriptor, never following a link in its last component. A folder swapped for
//! a link to `/home/you` after the check cannot redirect the write. Where `openat2` is missing
//! (Linux before 5.6, or a seccomp filter that refuses it), the folders are opened one component at
//! a time with `O_NOFOLLOW`, which refuses every linked folder, even one that stays inside.

use std::ffi::{OsStr, OsString};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat, openat2};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};
use nix::unistd::UnlinkatFlags;

use crate::error::SnapshotError;

/// Why a path cannot be reached.
pub(crate) enum Reach {
    /// A folder on the way is missing (nothing to read, nothing to remove).
    Missing,
    /// A folder on the way is a link leading outside the project (or a link loop), or not a folder.
    Outside,
}

/// What is at a path, looked at without following a link there.
pub(crate) enum Found {
    /// Nothing.
    Absent,
    /// A folder.
    Dir,
    /// A regular file, with its permission bits.
    File { size: u64, mode: u32 },
    /// A symbolic link and its target text.
    Symlink(OsString),
    /// A named pipe.
    Fifo,
    /// A socket or a device.
    Other(&'static str),
}

/// A descriptor of the project root everything is opened against.
pub(crate) struct Root {
    fd: OwnedFd,
    path: PathBuf,
}

fn io(path: &Path, e: Errno) -> SnapshotError {
    SnapshotError::io(path, std::io::Error::from(e))
}

impl Root {
    /// Opens the project root (the root itself may be reached through links).
    pub(crate) fn open(root: &Path) -> Result<Root, SnapshotError> {
        let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::open(root, flags, Mode::empty()).map_err(|e| io(root, e))?;
        Ok(Root {
            fd,
            path: root.to_path_buf(),
        })
    }

    fn full(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Opens the folder `rel` (project-relative, `/`-separated; empty for the root) beneath the root.
    fn open_dir(&self, rel: &str) -> Result<Result<OwnedFd, Reach>, SnapshotError> {
        let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        let rel = if rel.is_empty() { "." } else { rel };
        let how = OpenHow::new()
            .flags(flags)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        match openat2(self.fd.as_fd(), rel, how) {
            Ok(fd) => Ok(Ok(fd)),
            Err(Errno::ENOENT) => Ok(Err(Reach::Missing)),
            Err(Errno::EXDEV | Errno::ELOOP | Errno::ENOTDIR) => Ok(Err(Reach::Outside)),
            Err(Errno::ENOSYS | Errno::EPERM | Errno::E2BIG) => self.walk_dir(rel),
            Err(e) => Err(io(&self.full(rel), e)),
        }
    }

    /// The fallback without `openat2`: one component at a time, refusing every link.
    fn walk_dir(&self, rel: &str) -> Result<Result<OwnedFd, Reach>, SnapshotError> {
        let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
        let mut cur =
            openat(self.fd.as_fd(), ".", flags, Mode::empty()).map_err(|e| io(&self.path, e))?;
        for part in rel.split('/').filter(|p| !p.is_empty() && *p != ".") {
            if part == ".." {
                return Ok(Err(Reach::Outside));
            }
            cur = match openat(cur.as_fd(), part, flags, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::ENOENT) => return Ok(Err(Reach::Missing)),
                Err(Errno::ELOOP | Errno::ENOTDIR) => return Ok(Err(Reach::Outside)),
                Err(e) => return Err(io(&self.full(rel), e)),
            };
        }
        Ok(Ok(cur))
    }

    /// The folder holding `rel` and the last component's name.
    pub(crate) fn parent(
        &self,
        rel: &str,
    ) -> Result<Result<(OwnedFd, OsString), Reach>, SnapshotError> {
        let (dir, name) = split(rel);
        Ok(self.open_dir(dir)?.map(|fd| (fd, name.to_os_string())))
    }

    /// Like [`Root::parent`], creating missing folders (each beneath the one before).
    fn parent_made(&self, rel: &str) -> Result<(OwnedFd, OsString), SnapshotError> {
        let (dir, name) = split(rel);
        match self.open_dir(dir)? {
            Ok(fd) => return Ok((fd, name.to_os_string())),
            Err(Reach::Outside) => return Err(outside(rel)),
            Err(Reach::Missing) => {}
        }
        let mut made = String::new();
        for part in dir.split('/') {
            let above = made.clone();
            if !made.is_empty() {
                made.push('/');
            }
            made.push_str(part);
            match self.open_dir(&made)? {
                Ok(_) => continue,
                Err(Reach::Outside) => return Err(outside(rel)),
                Err(Reach::Missing) => {}
            }
            let parent = match self.open_dir(&above)? {
                Ok(fd) => fd,
                Err(_) => return Err(outside(rel)),
            };
            match nix::sys::stat::mkdirat(parent.as_fd(), part, Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(io(&self.full(&made), e)),
            }
        }
        match self.open_dir(dir)? {
            Ok(fd) => Ok((fd, name.to_os_string())),
            Err(_) => Err(outside(rel)),
        }
    }

    /// What is at `rel`, without following a link there.
    pub(crate) fn look(&self, rel: &str) -> Result<Result<Found, Reach>, SnapshotError> {
        let (dir, name) = match self.parent(rel)? {
            Ok(found) => found,
            Err(Reach::Missing) => return Ok(Ok(Found::Absent)),
            Err(reach) => return Ok(Err(reach)),
        };
        let stat = match fstatat(
            dir.as_fd(),
            name.as_os_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => stat,
            Err(Errno::ENOENT) => return Ok(Ok(Found::Absent)),
            Err(e) => return Err(io(&self.full(rel), e)),
        };
        Ok(Ok(match kind(&stat) {
            SFlag::S_IFDIR => Found::Dir,
            SFlag::S_IFREG => Found::File {
                size: u64::try_from(stat.st_size).unwrap_or(0),
                mode: stat.st_mode & 0o7777,
            },
            SFlag::S_IFLNK => Found::Symlink(
                nix::fcntl::readlinkat(dir.as_fd(), name.as_os_str())
                    .map_err(|e| io(&self.full(rel), e))?,
            ),
            SFlag::S_IFIFO => Found::Fifo,
            SFlag::S_IFSOCK => Found::Other("socket"),
            _ => Found::Other("device"),
        }))
    }

    /// The bytes of the regular file at `rel`; `None` when it is no longer a regular file there.
    pub(crate) fn read(&self, rel: &str) -> Result<Option<Vec<u8>>, SnapshotError> {
        let Ok((dir, name)) = self.parent(rel)? else {
            return Ok(None);
        };
        read_regular_at(dir.as_fd(), &name).map_err(|e| SnapshotError::io(&self.full(rel), e))
    }

    /// Removes the file, link or pipe at `rel`; false when nothing was there.
    pub(crate) fn remove(&self, rel: &str) -> Result<bool, SnapshotError> {
        let (dir, name) = match self.parent(rel)? {
            Ok(found) => found,
            Err(Reach::Missing) => return Ok(false),
            Err(Reach::Outside) => return Err(outside(rel)),
        };
        match nix::unistd::unlinkat(dir.as_fd(), name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) => Ok(true),
            Err(Errno::ENOENT) => Ok(false),
            Err(e) => Err(io(&self.full(rel), e)),
        }
    }

    /// Removes the folder `rel` when it is empty (and a folder, not a link).
    pub(crate) fn remove_empty_dir(&self, rel: &str) -> Result<(), SnapshotError> {
        let Ok((dir, name)) = self.parent(rel)? else {
            return Ok(());
        };
        match nix::unistd::unlinkat(dir.as_fd(), name.as_os_str(), UnlinkatFlags::RemoveDir) {
            Ok(()) | Err(Errno::ENOENT | Errno::ENOTEMPTY | Errno::EEXIST | Errno::ENOTDIR) => {
                Ok(())
            }
            Err(e) => Err(io(&self.full(rel), e)),
        }
    }

    /// Puts something new at `rel` the way `make` builds it under a temporary name in the same
    /// folder, then renames it into place (replacing a link there, never following it).
    fn replace_with(
        &self,
        rel: &str,
        make: impl FnOnce(&OwnedFd, &OsStr) -> Result<(), Errno>,
    ) -> Result<(), SnapshotError> {
        let (dir, name) = self.parent_made(rel)?;
        let tmp = temp_name();
        if let Err(e) = make(&dir, &tmp) {
            let _ = nix::unistd::unlinkat(dir.as_fd(), tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
            return Err(io(&self.full(rel), e));
        }
        if let Err(e) =
            nix::fcntl::renameat(dir.as_fd(), tmp.as_os_str(), dir.as_fd(), name.as_os_str())
        {
            let _ = nix::unistd::unlinkat(dir.as_fd(), tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
            return Err(io(&self.full(rel), e));
        }
        Ok(())
    }

    /// Writes `bytes` with permission bits `mode` to `rel`.
    pub(crate) fn write(
        &self,
        rel: &str,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<(), SnapshotError> {
        self.replace_with(rel, |dir, tmp| {
            let flags = OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_WRONLY
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC;
            let fd = openat(dir.as_fd(), tmp, flags, Mode::from_bits_truncate(0o600))?;
            if let Some(mode) = mode {
                nix::sys::stat::fchmod(fd.as_fd(), Mode::from_bits_truncate(mode))?;
            }
            let mut file = std::fs::File::from(fd);
            file.write_all(bytes)
                .and_then(|()| file.sync_all())
                .map_err(|e| e.raw_os_error().map_or(Errno::EIO, Errno::from_raw))
        })
    }

    /// Makes `rel` a symbolic link to `target`.
    pub(crate) fn symlink(&self, rel: &str, target: &str) -> Result<(), SnapshotError> {
        self.replace_with(rel, |dir, tmp| {
            nix::unistd::symlinkat(target, dir.as_fd(), tmp)
        })
    }

    /// Makes `rel` a named pipe.
    pub(crate) fn fifo(&self, rel: &str) -> Result<(), SnapshotError> {
        self.replace_with(rel, |dir, tmp| {
            nix::unistd::mkfifoat(dir.as_fd(), tmp, Mode::from_bits_truncate(0o644))
        })
    }
}

fn kind(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits())
}

/// The refusal for a path behind a link that leads outside.
pub(crate) fn outside(rel: &str) -> SnapshotError {
    SnapshotError::Outside {
        paths: vec![rel.to_string()],
    }
}

/// `("a/b", "c")` for `a/b/c`, `("", "c")` for `c`.
fn split(rel: &str) -> (&str, &OsStr) {
    match rel.rsplit_once('/') {
        Some((dir, name)) => (dir, OsStr::from_bytes(name.as_bytes())),
        None => ("", OsStr::from_bytes(rel.as_bytes())),
    }
}

fn temp_name() -> OsString {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    OsString::from(format!(
        ".totem-restore-{}-{}-{nanos}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Reads `name` in `dir` if it is a regular file: never follows a link, never waits on a pipe.
pub(crate) fn read_regular_at(dir: impl AsFd, name: &OsStr) -> std::io::Result<Option<Vec<u8>>> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = match openat(dir.as_fd(), name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT | Errno::ELOOP | Errno::ENXIO) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    read_if_regular(fd)
}

/// Reads the file at `path` if it is a regular file: never follows a link in its last component,
/// never waits on a pipe.
pub(crate) fn read_regular(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = match nix::fcntl::open(path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT | Errno::ELOOP | Errno::ENXIO) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    read_if_regular(fd)
}

fn read_if_regular(fd: OwnedFd) -> std::io::Result<Option<Vec<u8>>> {
    let stat = fstat(fd.as_fd())?;
    if kind(&stat) != SFlag::S_IFREG {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    match std::fs::File::from(fd).read_to_end(&mut bytes) {
        Ok(_) => Ok(Some(bytes)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
