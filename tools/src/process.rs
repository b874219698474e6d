//! Starting shell commands in their own process group, collecting their output, and killing the
//! whole group. Shared by `bash` and the job manager.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};

/// How a shell command starts: through a launcher (the daemon's sandbox) or not, and which
/// environment variables it does not inherit or gets set. The default starts `bash -c` directly
/// with the daemon's whole environment.
#[derive(Debug, Clone, Default)]
pub struct ShellSpec {
    /// A program that runs the shell for us (`totemd __sandbox … --`), with its arguments.
    pub launcher: Option<(PathBuf, Vec<OsString>)>,
    /// Variables removed from the inherited environment.
    pub env_remove: Vec<OsString>,
    /// Variables set (after the removals).
    pub env_set: Vec<(OsString, OsString)>,
}

impl ShellSpec {
    /// Applies the environment part to any command (also ones that are not `bash -c`).
    pub fn apply_env(&self, cmd: &mut tokio::process::Command) {
        for name in &self.env_remove {
            cmd.env_remove(name);
        }
        for (name, value) in &self.env_set {
            cmd.env(name, value);
        }
    }
}

/// A command for `bash -c` (or `sh -c` where bash is missing), in `cwd`, as the leader of a new
/// process group so that everything it starts can be killed together.
pub(crate) fn shell_command(
    command: &str,
    cwd: &Path,
    spec: &ShellSpec,
) -> tokio::process::Command {
    let shell = if Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    let mut cmd = match &spec.launcher {
        Some((program, args)) => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args).arg(shell);
            cmd
        }
        None => tokio::process::Command::new(shell),
    };
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Nothing interactive: no pagers, no colours, no credential prompts.
        .env("TERM", "dumb")
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("NO_COLOR", "1")
        .kill_on_drop(true);
    spec.apply_env(&mut cmd);
    cmd
}

/// Sends SIGKILL to the process group led by `pid`. A group already gone is not an error.
pub(crate) fn kill_group(pid: u32) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(raw),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// How long a command's leader gets after SIGTERM before its group is killed: the sandbox
/// launcher uses it to end every process below it, also those that left the group (`setsid`).
const TERM_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// SIGTERM to the leader `pid` of a command that has not been reaped.
fn term_leader(pid: u32) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(raw),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
}

/// Ends a command still running: SIGTERM to its leader, up to [`TERM_GRACE`] for it to end, then
/// SIGKILL to the whole group.
pub(crate) async fn end_running(child: &mut tokio::process::Child, pid: u32) {
    term_leader(pid);
    let _ = tokio::time::timeout(TERM_GRACE, child.wait()).await;
    kill_group(pid);
}

/// [`end_running`] for a caller that cannot wait (a job killed by id, a closing session): the
/// group's SIGKILL follows from a short-lived thread.
pub(crate) fn end_running_later(pid: u32) {
    term_leader(pid);
    let spawned = std::thread::Builder::new()
        .name("end-command".into())
        .spawn(move || {
            std::thread::sleep(TERM_GRACE);
            kill_group(pid);
        });
    if spawned.is_err() {
        kill_group(pid);
    }
}

/// Output of a command, stdout and stderr interleaved as they arrive. Keeps at most `cap` bytes —
/// the newest — and remembers how many came before.
#[derive(Debug)]
pub(crate) struct OutputBuf {
    data: Vec<u8>,
    /// Absolute offset of `data[0]` in the whole output.
    start: u64,
    cap: usize,
}

impl OutputBuf {
    pub fn new(cap: usize) -> Self {
        Self {
            data: Vec::new(),
            start: 0,
            cap,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.data.extend_from_slice(bytes);
        if self.data.len() > self.cap {
            let excess = self.data.len() - self.cap;
            self.data.drain(..excess);
            self.start += excess as u64;
        }
    }

    /// Total bytes ever written.
    pub fn total(&self) -> u64 {
        self.start + self.data.len() as u64
    }

    /// Bytes from absolute offset `from` on, and how many of those were already dropped.
    pub fn since(&self, from: u64) -> (&[u8], u64) {
        let skipped = self.start.saturating_sub(from);
        let index = from.saturating_sub(self.start) as usize;
        (self.data.get(index..).unwrap_or(&[]), skipped)
    }
}

pub(crate) type SharedOutput = Arc<Mutex<OutputBuf>>;

/// Copies a pipe into the shared buffer until it closes.
pub(crate) async fn pump(mut reader: impl AsyncRead + Unpin, out: SharedOutput) {
    let mut chunk = vec![0u8; 8192];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Ok(mut buf) = out.lock() {
                    buf.push(&chunk[..n]);
                }
            }
        }
    }
}

/// Starts pumping a child's stdout and stderr into one buffer.
pub(crate) fn collect(
    child: &mut tokio::process::Child,
    out: &SharedOutput,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        tasks.push(tokio::spawn(pump(stdout, Arc::clone(out))));
    }
    if let Some(stderr) = child.stderr.take() {
        tasks.push(tokio::spawn(pump(stderr, Arc::clone(out))));
    }
    tasks
}

/// Waits briefly for the pumps to reach end of file; a process that left the group and keeps the
/// pipe open must not hold the call forever.
pub(crate) async fn finish(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for task in tasks {
        let abort = task.abort_handle();
        if tokio::time::timeout(std::time::Duration::from_millis(500), task)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
}

/// How a process ended, in words for the model.
pub(crate) fn describe_status(status: &std::process::ExitStatus) -> (Option<i32>, String) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => (Some(code), format!("exit code {code}")),
        (None, Some(signal)) => (None, format!("killed by signal {signal}")),
        (None, None) => (None, "ended".to_string()),
    }
}

/// `text` cut to at most `max` bytes on a character boundary.
pub(crate) fn truncate_bytes(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// The last `max` bytes of `text`, starting on a character boundary.
pub(crate) fn tail_bytes(text: &str, max: usize) -> &str {
    &text[text.ceil_char_boundary(text.len().saturating_sub(max))..]
}

/// Terminal output as a model should read it: colour and cursor escape sequences removed, and a
/// line redrawn with `\r` (progress bars) reduced to its last state.
pub(crate) fn clean_terminal_text(text: &str) -> String {
    if !text.contains(['\u{1b}', '\r']) {
        return text.to_string();
    }
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            plain.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameters and intermediates, then one final byte.
            Some('[') => {
                for n in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&n) {
                        break;
                    }
                }
            }
            // OSC: up to BEL or ESC \.
            Some(']') => {
                while let Some(n) = chars.next() {
                    if n == '\u{7}' {
                        break;
                    }
                    if n == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    plain
        .split('\n')
        .map(|line| {
            let line = line.strip_suffix('\r').unwrap_or(line);
            line.rsplit('\r').next().unwrap_or(line)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_terminal_text_drops_colours_and_progress_redraws() {
        let raw = "\u{1b}[31merror\u{1b}[0m: bad\r\n10%\r50%\r100%\ndone\u{1b}]0;title\u{7}\n";
        assert_eq!(clean_terminal_text(raw), "error: bad\n100%\ndone\n");
    }
}
