//! Where the daemon's socket lives. Client and daemon apply the same rules, so they meet without
//! configuration.

use std::path::{Path, PathBuf};

/// File name of the socket inside its folder.
pub const SOCKET_FILE: &str = "totemd.sock";

/// The Totem home: `$TOTEM_HOME`, else `~/.totem`. `None` when neither is known.
pub fn totem_home(totem_home_env: Option<&str>, home_env: Option<&str>) -> Option<PathBuf> {
    match totem_home_env.filter(|s| !s.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => home_env
            .filter(|s| !s.is_empty())
            .map(|h| Path::new(h).join(".totem")),
    }
}

/// The default socket path: `$XDG_RUNTIME_DIR/totem/totemd.sock` when `XDG_RUNTIME_DIR` is set and
/// `TOTEM_HOME` is not, else `$TOTEM_HOME/run/totemd.sock`.
///
/// An explicit `TOTEM_HOME` keeps the socket beside the home, so two homes (a test's and the user's)
/// never share a socket.
pub fn default_socket_path(
    totem_home_env: Option<&str>,
    xdg_runtime_dir: Option<&str>,
    home: &Path,
) -> PathBuf {
    let explicit_home = totem_home_env.is_some_and(|s| !s.is_empty());
    match xdg_runtime_dir.filter(|s| !s.is_empty()) {
        Some(runtime) if !explicit_home => Path::new(runtime).join("totem").join(SOCKET_FILE),
        _ => home.join("run").join(SOCKET_FILE),
    }
}

/// Resolves home and socket from the process environment (`TOTEM_HOME`, `HOME`, `XDG_RUNTIME_DIR`).
///
/// Without `XDG_RUNTIME_DIR` (MCP hosts start their servers with only HOME, LOGNAME, PATH, SHELL,
/// TERM and USER), the folder the system makes for the user, `/run/user/UID`, stands in for it when
/// it exists and is the user's, so a command started that way finds the same socket.
pub fn from_env() -> Option<(PathBuf, PathBuf)> {
    let totem_home_env = std::env::var("TOTEM_HOME").ok();
    let home_env = std::env::var("HOME").ok();
    let xdg = std::env::var("XDG_RUNTIME_DIR")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| user_runtime_dir(Path::new("/run/user")));
    let home = totem_home(totem_home_env.as_deref(), home_env.as_deref())?;
    let socket = default_socket_path(totem_home_env.as_deref(), xdg.as_deref(), &home);
    Some((home, socket))
}

/// `BASE/UID` when it is a folder owned by this process's user (the uid read from `/proc/self`).
fn user_runtime_dir(base: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    let dir = base.join(uid.to_string());
    let meta = std::fs::metadata(&dir).ok()?;
    (meta.is_dir() && meta.uid() == uid).then(|| dir.display().to_string())
}

/// The socket a running daemon named in the home's lock file (`pid N, socket PATH`), which it
/// writes when it starts. A client whose environment points elsewhere finds the daemon by it.
pub fn socket_in_lock_note(note: &str) -> Option<PathBuf> {
    let (_, socket) = note.trim().split_once(", socket ")?;
    let socket = Path::new(socket);
    socket.is_absolute().then(|| socket.to_path_buf())
}

/// The lock file a daemon holds for its whole life in its home.
pub const LOCK_FILE: &str = "totemd.lock";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_home_keeps_socket_beside_it() {
        let home = totem_home(Some("/tmp/h"), Some("/root")).unwrap();
        assert_eq!(home, PathBuf::from("/tmp/h"));
        let sock = default_socket_path(Some("/tmp/h"), Some("/run/user/1"), &home);
        assert_eq!(sock, PathBuf::from("/tmp/h/run/totemd.sock"));
    }

    #[test]
    fn the_lock_note_names_the_socket() {
        assert_eq!(
            socket_in_lock_note("pid 12, socket /run/user/1000/totem/totemd.sock\n"),
            Some(PathBuf::from("/run/user/1000/totem/totemd.sock"))
        );
        assert_eq!(socket_in_lock_note("pid 12"), None);
        assert_eq!(socket_in_lock_note("pid 12, socket relative.sock"), None);
    }

    #[test]
    fn the_users_runtime_folder_stands_in_for_a_missing_variable() {
        use std::os::unix::fs::MetadataExt;
        let base = std::env::temp_dir().join(format!("totem-run-user-{}", std::process::id()));
        let uid = std::fs::metadata("/proc/self").unwrap().uid();
        assert_eq!(user_runtime_dir(&base), None, "no folder, no stand-in");
        std::fs::create_dir_all(base.join(uid.to_string())).unwrap();
        assert_eq!(
            user_runtime_dir(&base),
            Some(base.join(uid.to_string()).display().to_string())
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn runtime_dir_is_used_for_the_default_home() {
        let home = totem_home(None, Some("/home/u")).unwrap();
        assert_eq!(home, PathBuf::from("/home/u/.totem"));
        let sock = default_socket_path(None, Some("/run/user/1000"), &home);
        assert_eq!(sock, PathBuf::from("/run/user/1000/totem/totemd.sock"));
        let sock = default_socket_path(None, None, &home);
        assert_eq!(sock, PathBuf::from("/home/u/.totem/run/totemd.sock"));
    }
}
