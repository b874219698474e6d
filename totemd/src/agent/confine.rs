//! How the commands of a run start: the environment they inherit, and — for commands the
//! built-in rules allow without asking, also when a broader rule of the user allows them too —
//! the kernel sandbox (`crate::sandbox`: the project read-only, writes only to a temp folder of
//! their own, no sockets, no process left behind) and `git` hardened against the repository's
//! own configuration.
//!
//! A hostile `.git/config` can name programs that `git status` and `git diff` run: an fsmonitor
//! (also through `include.path`, `includeIf` or `config.worktree`), hooks, a pager, an external
//! diff, textconv and clean/smudge/process filters, a GPG program, a lazy fetch. Such a command
//! gets `git` through a small wrapper (in a folder of its own the sandbox lets it run) that adds
//! `--no-pager` and `--no-ext-diff --no-textconv` (and drops `--ext-diff`/`--textconv`), and
//! `GIT_CONFIG_*` variables that set `core.fsmonitor=false`, `core.hooksPath=/dev/null`, every
//! filter command the configuration names to nothing, the signing programs to `false`, and no
//! system configuration or attributes (see [`hardened_git`]). git Totem starts itself
//! (`session.diff {git: true}`) gets the same, inside the same sandbox.
//!
//! The Total.js app reuses [`sandboxed_spec`] with [`Extras`]: more writable folders and one TCP
//! port.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use totem_permission::EnvSettings;
use totem_tools::ShellSpec;

use crate::daemon::Daemon;
use crate::sandbox::Launcher;
use crate::util::new_id;

/// How long `git config --list` may take.
const GIT_CONFIG_WAIT: Duration = Duration::from_secs(5);

/// The environment every command of a run gets: the daemon's minus secret-looking names and
/// values that carry a credential, plus what the settings set.
pub fn base_spec(env: &EnvSettings) -> ShellSpec {
    let vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    ShellSpec {
        launcher: None,
        env_remove: env.removed_vars(vars.iter().map(|(n, v)| (n.as_os_str(), v.as_os_str()))),
        env_set: env.set.iter().map(|(k, v)| (k.into(), v.into())).collect(),
    }
}

/// A folder of the daemon's `tmp/` for one confined command; removed when dropped unless kept
/// (a background job outlives its call; the next start clears what is left).
pub struct TempFolder {
    path: PathBuf,
    keep: bool,
}

impl TempFolder {
    /// A new folder of the daemon's `tmp/` (mode 0700) holding an empty `tmp/` folder; the path
    /// of the latter, and the guard that removes both.
    pub fn create(daemon: &Daemon, prefix: &str) -> Result<(PathBuf, TempFolder), String> {
        let dir = daemon.tmp_dir().join(new_id(prefix));
        let tmp = dir.join("tmp");
        std::fs::create_dir_all(&tmp)
            .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)))
            .map_err(|e| format!("cannot create a temp folder: {e}"))?;
        Ok((
            tmp,
            TempFolder {
                path: dir,
                keep: false,
            },
        ))
    }

    pub fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for TempFolder {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// What a sandboxed command may do beyond reading the project and writing its temp folder (see
/// [`crate::sandbox::Launcher`]): more writable folders and one TCP port. The Total.js app runs
/// with these; commands run without asking get none.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Folders the command may also write (not run).
    pub writable: Vec<PathBuf>,
    /// One TCP port it may bind and connect to (on any address; bind it to 127.0.0.1).
    pub tcp_port: Option<u16>,
}

/// The spec for a command the built-in rules allowed: `base` plus the temp folder, hardened
/// git, and the sandbox launcher when the kernel has Landlock.
pub async fn confined_spec(
    daemon: &Daemon,
    root: &Path,
    secrets: &totem_permission::SecretSettings,
    base: &ShellSpec,
) -> Result<(ShellSpec, TempFolder), String> {
    sandboxed_spec(daemon, root, secrets, base, Extras::default()).await
}

/// [`confined_spec`] with `extras`: the same sandbox as commands run without asking (reads of
/// the project, writes only to its own temp folder, no sockets, no process left behind), plus
/// the folders and the port `extras` names. The temp folder lives as long as the returned
/// [`TempFolder`] (call `keep` for a process that outlives it). Without Landlock the spec has no
/// launcher: the caller decides whether to run the command anyway.
pub async fn sandboxed_spec(
    daemon: &Daemon,
    root: &Path,
    secrets: &totem_permission::SecretSettings,
    base: &ShellSpec,
    extras: Extras,
) -> Result<(ShellSpec, TempFolder), String> {
    let dir = daemon.tmp_dir().join(new_id("cmd"));
    let bin = dir.join("bin");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&bin)
        .and_then(|()| std::fs::create_dir_all(&tmp))
        .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)))
        .map_err(|e| format!("cannot create a temp folder for the command: {e}"))?;
    let folder = TempFolder {
        path: dir.clone(),
        keep: false,
    };
    let mut spec = base.clone();
    spec.env_set.push(("TMPDIR".into(), tmp.clone().into()));
    if let Some(git) = real_program("git") {
        write_git_wrapper(&bin, &git)
            .map_err(|e| format!("cannot prepare git for the command: {e}"))?;
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut joined = OsString::from(bin.as_os_str());
        joined.push(":");
        joined.push(path);
        spec.env_set.push(("PATH".into(), joined));
        let hardened = hardened_git(&git, root, daemon.sandbox.is_sandboxed()).await;
        spec.env_remove.extend(hardened.remove);
        spec.env_set.extend(hardened.set);
    }
    if daemon.sandbox.is_sandboxed() {
        let program = std::env::current_exe()
            .map_err(|e| format!("cannot find totemd to start the sandbox: {e}"))?;
        let mut launcher = Launcher::new(program.clone(), root.to_path_buf(), tmp, secrets.clone());
        launcher.bin = Some(bin);
        launcher.writable = extras.writable;
        launcher.tcp_port = extras.tcp_port;
        spec.launcher = Some((program, launcher.args()));
    }
    Ok((spec, folder))
}

/// The first `name` on PATH.
pub(crate) fn real_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The `-c` settings every git Totem starts (and every auto-allowed git) gets, whatever the
/// repository's configuration says: no fsmonitor, hooks, pager, signature check, ssh, lazy
/// fetch or submodule walk.
const GIT_OVERRIDES: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.sshCommand", "false"),
    ("core.attributesFile", "/dev/null"),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.defaultKeyCommand", "false"),
    ("log.showSignature", "false"),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
];

/// Variables git must not take from the daemon's environment.
const GIT_REMOVED: &[&str] = &[
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
    "GIT_CONFIG_PARAMETERS",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_EXEC_PATH",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
];

/// The environment that hardens git against the repository: what to remove and what to set.
pub(crate) struct HardenedGit {
    pub remove: Vec<OsString>,
    pub set: Vec<(OsString, OsString)>,
}

/// `GIT_CONFIG_*` variables that switch off every program the configuration could make git run
/// ([`GIT_OVERRIDES`], and for each filter driver the configuration names — also through
/// `include.path`, `includeIf` and `config.worktree`, which `git config --list` follows — its
/// clean, smudge and process commands set to nothing and textconv to `cat`), no system
/// configuration or attributes, no optional locks (a read writes no index), and — with `sandboxed`
/// — no global configuration either (the home folder is out of reach there).
pub(crate) async fn hardened_git(git: &Path, root: &Path, sandboxed: bool) -> HardenedGit {
    let mut settings: Vec<(String, String)> = GIT_OVERRIDES
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut list = tokio::process::Command::new(git);
    list.args(["config", "--list", "--name-only"])
        .current_dir(root)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    for name in GIT_REMOVED {
        list.env_remove(name);
    }
    if sandboxed {
        list.env("GIT_CONFIG_GLOBAL", "/dev/null");
    }
    if let Ok(Ok(out)) = tokio::time::timeout(GIT_CONFIG_WAIT, list.output()).await {
        for name in String::from_utf8_lossy(&out.stdout).lines() {
            let lower = name.to_ascii_lowercase();
            let Some((section, key)) = lower.split_once('.') else {
                continue;
            };
            let Some((_, key)) = key.rsplit_once('.') else {
                continue;
            };
            match (section, key) {
                ("filter", "clean" | "smudge" | "process") => {
                    settings.push((name.to_string(), String::new()));
                }
                ("filter", "required") => settings.push((name.to_string(), "false".into())),
                // An empty textconv makes git fail; `cat` shows the file as it is.
                ("diff", "textconv") => settings.push((name.to_string(), "cat".into())),
                _ => {}
            }
        }
    }
    let mut set: Vec<(OsString, OsString)> = vec![
        ("GIT_CONFIG_COUNT".into(), settings.len().to_string().into()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("GIT_ATTR_NOSYSTEM".into(), "1".into()),
        ("GIT_OPTIONAL_LOCKS".into(), "0".into()),
        ("GIT_NO_LAZY_FETCH".into(), "1".into()),
        ("GIT_SSH_COMMAND".into(), "false".into()),
        ("GIT_PAGER".into(), "cat".into()),
        ("GIT_TERMINAL_PROMPT".into(), "0".into()),
    ];
    if sandboxed {
        set.push(("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()));
    }
    for (i, (key, value)) in settings.into_iter().enumerate() {
        set.push((format!("GIT_CONFIG_KEY_{i}").into(), key.into()));
        set.push((format!("GIT_CONFIG_VALUE_{i}").into(), value.into()));
    }
    HardenedGit {
        remove: GIT_REMOVED.iter().map(OsString::from).collect(),
        set,
    }
}

fn write_git_wrapper(bin: &Path, git: &Path) -> std::io::Result<()> {
    let real = git.display().to_string().replace('\'', r"'\''");
    let script = format!(
        r#"#!/bin/sh
# Written by totemd: git for a command run without asking. The repository's configuration
# cannot run an external diff, textconv program or pager through it.
n=$#
sub=${{1:-}}
while [ "$n" -gt 0 ]; do
  a=$1; shift; n=$((n-1))
  case $a in --ext-diff|--textconv) ;; *) set -- "$@" "$a" ;; esac
done
case $sub in
  diff|log|show) shift; exec '{real}' --no-pager "$sub" --no-ext-diff --no-textconv "$@" ;;
  blame) shift; exec '{real}' --no-pager blame --no-textconv "$@" ;;
esac
exec '{real}' --no-pager "$@"
"#
    );
    let path = bin.join("git");
    std::fs::write(&path, script)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
}
