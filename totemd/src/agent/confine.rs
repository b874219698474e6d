//! How the commands of a run start: the environment they inherit, and — for commands the
//! built-in rules allowed without asking — the kernel sandbox (`crate::sandbox`), a temp folder
//! of their own, and `git` hardened against the repository's own configuration.
//!
//! A hostile `.git/config` can name programs that `git status` and `git diff` run: an fsmonitor,
//! hooks, an external diff, textconv and clean/smudge filters, a GPG program, a lazy fetch. An
//! auto-allowed command gets `git` through a small wrapper that adds `--no-ext-diff
//! --no-textconv` (and drops `--ext-diff`/`--textconv`), and `GIT_CONFIG_*` variables that set
//! `core.fsmonitor=false`, `core.hooksPath=/dev/null`, every driver command the configuration
//! names to nothing, and the signing programs to `false`.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use totem_permission::{Decision, EnvSettings, Reason, Source, Verdict};
use totem_tools::ShellSpec;

use crate::daemon::Daemon;
use crate::sandbox::Launcher;
use crate::util::new_id;

/// How long `git config --list` may take.
const GIT_CONFIG_WAIT: Duration = Duration::from_secs(5);

/// The environment every command of a run gets: the daemon's minus secret-looking names, plus
/// what the settings set.
pub fn base_spec(env: &EnvSettings) -> ShellSpec {
    let names: Vec<OsString> = std::env::vars_os().map(|(name, _)| name).collect();
    ShellSpec {
        launcher: None,
        env_remove: env.removed(names.iter().map(OsString::as_os_str)),
        env_set: env.set.iter().map(|(k, v)| (k.into(), v.into())).collect(),
    }
}

/// Whether a verdict let a command run only because a built-in rule allows it: nobody was asked
/// and nothing the user configured or answered decided it.
pub fn built_in_allow(verdict: &Verdict) -> bool {
    verdict.decision == Decision::Allow
        && verdict.parts.iter().any(|p| {
            matches!(&p.reason, Reason::Rule { rule } if rule.source == Source::Default
                && rule.decision == Decision::Allow)
        })
}

/// A folder of the daemon's `tmp/` for one confined command; removed when dropped unless kept
/// (a background job outlives its call; the next start clears what is left).
pub struct TempFolder {
    path: PathBuf,
    keep: bool,
}

impl TempFolder {
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

/// The spec for a command the built-in rules allowed: `base` plus the temp folder, hardened
/// git, and the sandbox launcher when the kernel has Landlock.
pub async fn confined_spec(
    daemon: &Daemon,
    root: &Path,
    secrets: &totem_permission::SecretSettings,
    base: &ShellSpec,
) -> Result<(ShellSpec, TempFolder), String> {
    let dir = daemon.tmp_dir().join(new_id("cmd"));
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)
        .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)))
        .map_err(|e| format!("cannot create a temp folder for the command: {e}"))?;
    let folder = TempFolder {
        path: dir.clone(),
        keep: false,
    };
    let mut spec = base.clone();
    spec.env_set.push(("TMPDIR".into(), dir.clone().into()));
    if let Some(git) = real_program("git") {
        write_git_wrapper(&bin, &git)
            .map_err(|e| format!("cannot prepare git for the command: {e}"))?;
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut joined = OsString::from(bin.as_os_str());
        joined.push(":");
        joined.push(path);
        spec.env_set.push(("PATH".into(), joined));
        spec.env_set.extend(git_settings(&git, root).await);
    }
    if daemon.sandbox.is_sandboxed() {
        // The home folder is out of reach: git would warn about its own ~/.gitconfig.
        spec.env_set
            .push(("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()));
        let program = std::env::current_exe()
            .map_err(|e| format!("cannot find totemd to start the sandbox: {e}"))?;
        let launcher = Launcher {
            program: program.clone(),
            project: root.to_path_buf(),
            tmp: dir,
            secrets: secrets.clone(),
        };
        spec.launcher = Some((program, launcher.args()));
    }
    Ok((spec, folder))
}

/// The first `name` on PATH.
fn real_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn write_git_wrapper(bin: &Path, git: &Path) -> std::io::Result<()> {
    let real = git.display().to_string().replace('\'', r"'\''");
    let script = format!(
        r#"#!/bin/sh
# Written by totemd: git for a command run without asking. The repository's configuration
# cannot run an external diff or textconv program through it.
n=$#
sub=${{1:-}}
while [ "$n" -gt 0 ]; do
  a=$1; shift; n=$((n-1))
  case $a in --ext-diff|--textconv) ;; *) set -- "$@" "$a" ;; esac
done
case $sub in
  diff|log|show) shift; exec '{real}' "$sub" --no-ext-diff --no-textconv "$@" ;;
  blame) shift; exec '{real}' blame --no-textconv "$@" ;;
esac
exec '{real}' "$@"
"#
    );
    let path = bin.join("git");
    std::fs::write(&path, script)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
}

/// `GIT_CONFIG_*` variables that switch off every program the configuration could make git run,
/// and the variables that stop lazy fetches and ssh.
async fn git_settings(git: &Path, root: &Path) -> Vec<(OsString, OsString)> {
    let mut settings: Vec<(String, String)> = vec![
        ("core.fsmonitor".into(), "false".into()),
        ("core.hooksPath".into(), "/dev/null".into()),
        ("core.sshCommand".into(), "false".into()),
        ("gpg.program".into(), "false".into()),
        ("gpg.ssh.program".into(), "false".into()),
        ("gpg.x509.program".into(), "false".into()),
        ("log.showSignature".into(), "false".into()),
    ];
    let mut list = tokio::process::Command::new(git);
    list.args(["config", "--list", "--name-only"])
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    if let Ok(Ok(out)) = tokio::time::timeout(GIT_CONFIG_WAIT, list.output()).await {
        for name in String::from_utf8_lossy(&out.stdout).lines() {
            let lower = name.to_ascii_lowercase();
            let Some((section, key)) = lower.split_once('.') else {
                continue;
            };
            let Some((_, key)) = key.rsplit_once('.') else {
                continue;
            };
            let runs = matches!(
                (section, key),
                ("filter", "clean" | "smudge" | "process")
                    | ("diff", "command" | "textconv")
                    | ("merge", "driver")
            );
            if runs {
                settings.push((name.to_string(), String::new()));
            }
            if (section, key) == ("filter", "required") {
                settings.push((name.to_string(), "false".into()));
            }
        }
    }
    let mut env: Vec<(OsString, OsString)> = vec![
        ("GIT_CONFIG_COUNT".into(), settings.len().to_string().into()),
        ("GIT_NO_LAZY_FETCH".into(), "1".into()),
        ("GIT_SSH_COMMAND".into(), "false".into()),
    ];
    for (i, (key, value)) in settings.into_iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}").into(), key.into()));
        env.push((format!("GIT_CONFIG_VALUE_{i}").into(), value.into()));
    }
    env
}
