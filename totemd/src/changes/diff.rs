//! `session.diff`: the recorded changes of one run or of the session, or git's view.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use totem_protocol::{ChangedFile, FileStatus, SessionDiff, SessionDiffParams};
use totem_snapshot::{FileDiff, RunRecord};

use super::{DaemonError, Result, blobs, project_root, run_record, session_records};
use crate::daemon::Daemon;

/// git gets this long to answer; a repository that slow is not worth a stuck request.
const GIT_TIMEOUT: Duration = Duration::from_secs(15);

/// `session.diff`.
pub async fn diff(daemon: &Arc<Daemon>, p: SessionDiffParams) -> Result<SessionDiff> {
    let root = project_root(daemon, &p.session_id)?;
    if p.git {
        if p.run_id.is_some() {
            return Err(DaemonError::Invalid(
                "git's view covers the whole project; ask for either `git` or `runId`, not both"
                    .into(),
            ));
        }
        return git_diff(daemon, &root).await;
    }
    let (record, run_ids) = match &p.run_id {
        Some(run_id) => {
            let belongs = daemon
                .store()
                .get_run(run_id)?
                .is_some_and(|r| r.session_id == p.session_id);
            if !belongs {
                return Err(DaemonError::NotFound(format!(
                    "no run {run_id} in session {}; its runs are in the `run.*` events",
                    p.session_id
                )));
            }
            (run_record(daemon, run_id)?, vec![run_id.clone()])
        }
        None => {
            let undone = daemon.store().undo_state(&p.session_id)?.undone;
            let records: Vec<_> = session_records(daemon, &p.session_id)?
                .into_iter()
                .filter(|(run, record)| !record.is_empty() && !undone.contains(&run.id))
                .collect();
            let ids = records.iter().map(|(run, _)| run.id.clone()).collect();
            (RunRecord::combine(records.iter().map(|(_, r)| r)), ids)
        }
    };
    let blobs = blobs(daemon);
    let diffs = tokio::task::spawn_blocking(move || {
        totem_snapshot::diff(&blobs, &record).map(|d| (d, record))
    })
    .await
    .map_err(|e| DaemonError::Failed(format!("diff stopped: {e}")))?;
    let (diffs, record) = diffs.map_err(|e| {
        DaemonError::Failed(format!(
            "cannot show the diff: {e}. The kept copies of the files are damaged or gone"
        ))
    })?;

    let mut files = Vec::new();
    let mut text = String::new();
    for (d, change) in diffs.into_iter().zip(&record.changes) {
        let status = if change.created() {
            FileStatus::Added
        } else if change.deleted() {
            FileStatus::Deleted
        } else {
            FileStatus::Modified
        };
        let (old, new) = (
            side("a", &change.path, status != FileStatus::Added),
            side("b", &change.path, status != FileStatus::Deleted),
        );
        let file = match d {
            FileDiff::Text { path, diff } => {
                text.push_str(&diff);
                ChangedFile {
                    path,
                    status,
                    diff: Some(diff),
                    binary: false,
                    not_kept: false,
                }
            }
            FileDiff::Binary { path, .. } => {
                text.push_str(&format!("Binary files {old} and {new} differ\n"));
                ChangedFile {
                    path,
                    status,
                    diff: None,
                    binary: true,
                    not_kept: false,
                }
            }
            FileDiff::NotKept { path } => {
                text.push_str(&format!(
                    "{path}: too large to keep a copy of, so there is no diff\n"
                ));
                ChangedFile {
                    path,
                    status,
                    diff: None,
                    binary: false,
                    not_kept: true,
                }
            }
        };
        files.push(file);
    }
    Ok(SessionDiff {
        files,
        diff: text,
        run_ids,
    })
}

/// `a/path`, or `/dev/null` for the side where the file does not exist.
fn side(prefix: &str, path: &str, exists: bool) -> String {
    if exists {
        format!("{prefix}/{path}")
    } else {
        "/dev/null".to_string()
    }
}

/// Runs git in `root` with a timeout; its stdout, or what went wrong in words. git runs in the
/// read-only sandbox of the commands run without asking (when the kernel has it), hardened
/// against the repository's configuration: no fsmonitor, hooks, pager, external diff, textconv,
/// filters or signature checks (see `agent::confine::hardened_git`).
async fn git(
    daemon: &Daemon,
    root: &Path,
    args: &[&str],
) -> Result<std::result::Result<String, String>> {
    let Some(real) = crate::agent::confine::real_program("git") else {
        return Err(DaemonError::Invalid(
            "cannot run git (it is not on PATH); install git or ask for the recorded diff without `git`".into(),
        ));
    };
    let sandboxed = daemon.sandbox.is_sandboxed();
    let hardened = crate::agent::confine::hardened_git(&real, root, sandboxed).await;
    let git_args = [
        "--no-pager",
        "-c",
        "core.quotepath=off",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.hooksPath=/dev/null",
    ];
    let mut _temp = None;
    let mut command = if sandboxed {
        let (dir, folder) = crate::agent::confine::TempFolder::create(daemon, "git")
            .map_err(DaemonError::Failed)?;
        _temp = Some(folder);
        let program = std::env::current_exe().map_err(|e| {
            DaemonError::Failed(format!("cannot find totemd to start the sandbox: {e}"))
        })?;
        // The user's own view: secret files of the project are shown to them as they are.
        let secrets = totem_permission::SecretSettings {
            except: vec!["**".into()],
            ..Default::default()
        };
        let launcher =
            crate::sandbox::Launcher::new(program.clone(), repository_top(root), dir, secrets);
        let mut command = tokio::process::Command::new(program);
        command.args(launcher.args()).arg(&real);
        command
    } else {
        tokio::process::Command::new(&real)
    };
    for name in &hardened.remove {
        command.env_remove(name);
    }
    command
        .args(git_args)
        .args(args)
        .current_dir(root)
        .envs(hardened.set)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let child = command.spawn().map_err(|e| {
        DaemonError::Invalid(format!(
            "cannot run git ({e}); install git or ask for the recorded diff without `git`"
        ))
    })?;
    let pid = child.id();
    let output = match tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output()).await {
        Ok(output) => output.map_err(|e| DaemonError::Failed(format!("git failed: {e}")))?,
        Err(_) => {
            if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            return Err(DaemonError::Failed(format!(
                "git diff took longer than {} s in {} and was stopped",
                GIT_TIMEOUT.as_secs(),
                root.display()
            )));
        }
    };
    if output.status.success() {
        Ok(Ok(String::from_utf8_lossy(&output.stdout).into_owned()))
    } else {
        Ok(Err(String::from_utf8_lossy(&output.stderr)
            .trim()
            .to_string()))
    }
}

/// The folder of the repository that holds `root`: the nearest one (`root` or above) with a
/// `.git` folder or file. The sandbox lets git read it (not a `.git` file's target outside it).
fn repository_top(root: &Path) -> std::path::PathBuf {
    root.ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(root)
        .to_path_buf()
}

/// git's tree of an empty commit: what a repository without commits is compared with.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// `git diff HEAD` of the project, split per file.
async fn git_diff(daemon: &Daemon, root: &Path) -> Result<SessionDiff> {
    if git(daemon, root, &["rev-parse", "--is-inside-work-tree"])
        .await?
        .is_err()
    {
        return Err(DaemonError::Invalid(format!(
            "{} is not in a git repository; ask for the recorded diff without `git`",
            root.display()
        )));
    }
    let base = match git(daemon, root, &["rev-parse", "--verify", "--quiet", "HEAD"]).await? {
        Ok(_) => "HEAD",
        Err(_) => EMPTY_TREE,
    };
    let text = git(
        daemon,
        root,
        &[
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            // Paths relative to the project, which may be a folder inside the repository.
            "--relative",
            base,
            "--",
            ".",
        ],
    )
    .await?
    .map_err(|e| DaemonError::Failed(format!("git diff failed: {e}")))?;
    Ok(SessionDiff {
        files: split_git_diff(&text),
        diff: text,
        run_ids: Vec::new(),
    })
}

/// The files of `git diff` output (renames off), each with its part of the text.
fn split_git_diff(text: &str) -> Vec<ChangedFile> {
    let mut chunks: Vec<String> = Vec::new();
    for line in text.split_inclusive('\n') {
        match chunks.last_mut() {
            Some(chunk) if !line.starts_with("diff --git ") => chunk.push_str(line),
            _ => chunks.push(line.to_string()),
        }
    }
    let mut files: Vec<ChangedFile> = chunks
        .into_iter()
        .filter(|c| c.starts_with("diff --git "))
        .map(|chunk| {
            let header = chunk.lines().next().unwrap_or_default();
            let mut path = header
                .rsplit_once(" b/")
                .map(|(_, p)| p.to_string())
                .unwrap_or_default();
            let mut status = FileStatus::Modified;
            let mut binary = false;
            for line in chunk.lines() {
                if line.starts_with("new file mode") {
                    status = FileStatus::Added;
                } else if line.starts_with("deleted file mode") {
                    status = FileStatus::Deleted;
                } else if line.starts_with("Binary files ") || line == "GIT binary patch" {
                    binary = true;
                } else if let Some(p) = line.strip_prefix("+++ b/") {
                    path = p.to_string();
                } else if let Some(p) = line.strip_prefix("--- a/")
                    && status == FileStatus::Deleted
                {
                    path = p.to_string();
                }
            }
            ChangedFile {
                path,
                status,
                diff: (!binary).then_some(chunk),
                binary,
                not_kept: false,
            }
        })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_output_splits_into_files_with_their_status() {
        let text = "diff --git a/a.txt b/a.txt\nindex 1..2 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n+y\n\
diff --git a/bin.dat b/bin.dat\nnew file mode 100644\nindex 0..3\nBinary files /dev/null and b/bin.dat differ\n\
diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\nindex 4..0\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-z\n";
        let files = split_git_diff(text);
        let summary: Vec<(&str, FileStatus, bool)> = files
            .iter()
            .map(|f| (f.path.as_str(), f.status, f.binary))
            .collect();
        assert_eq!(
            summary,
            [
                ("a.txt", FileStatus::Modified, false),
                ("bin.dat", FileStatus::Added, true),
                ("gone.txt", FileStatus::Deleted, false),
            ]
        );
        assert!(files[0].diff.as_deref().is_some_and(|d| d.contains("+y\n")));
        assert!(files[1].diff.is_none());
    }
}
