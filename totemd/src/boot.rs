//! The Total.js boot check: after a run's edits in a Total.js 5 project (and on `totem check
//! --boot`), start the app the way the project starts (`node index.js`, on a free loopback port),
//! wait until it listens or fails, ask the routes the edits declare (`GET` without parameters;
//! other methods only when the settings declare them safe), and stop it.
//!
//! The app runs in the same kernel sandbox as the commands Totem runs without asking (it reads
//! the project, writes only its own temp folder) plus one exception: it may bind and connect the
//! one TCP port chosen here ([`crate::sandbox::Launcher::tcp_port`]). Its temp, log and database
//! folders are moved into the temp folder by `totem_totaljs::BOOT_PRELOAD`, and it gets a clean
//! environment (no API keys). Without a kernel sandbox the agent loop does not run it; `totem
//! check --boot`, which the user asked for, runs it unconfined.
//!
//! What broke comes back as one short line: a boot error, an uncaught exception, a 500 or a
//! request that does not answer, with the first frame of the stack that is in the project.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use totem_totaljs::{BootRequest, read_errors};

use crate::util::lock;

/// How long the app may take to listen.
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take to answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// How much of the app's output is kept.
const MAX_OUTPUT: usize = 64 * 1024;

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootOutcome {
    /// The check did not run; the text says why and what to do.
    Skipped(String),
    /// The app listened and every request answered below 500.
    Passed {
        /// Each request with its status code.
        answered: Vec<(String, u16)>,
        /// From the start of `node` to its end.
        millis: u64,
    },
    /// The first thing that broke, as one line.
    Failed {
        /// E.g. `GET /api/items/ answered 500: TypeError: … (actions/items.js:4)`.
        finding: String,
        /// From the start of `node` to its end.
        millis: u64,
    },
}

impl BootOutcome {
    /// One line for the user (a notice) and, when it failed, for the model.
    pub fn describe(&self) -> String {
        match self {
            BootOutcome::Skipped(why) => format!("Boot check skipped: {why}"),
            BootOutcome::Passed { answered, millis } => {
                let asked = if answered.is_empty() {
                    String::new()
                } else {
                    let list: Vec<String> = answered
                        .iter()
                        .map(|(label, status)| format!("{label} {status}"))
                        .collect();
                    format!(" and answered {}", list.join(", "))
                };
                format!(
                    "Boot check: the app started{asked} ({:.1} s).",
                    *millis as f64 / 1000.0
                )
            }
            BootOutcome::Failed { finding, .. } => format!("Boot check failed: {finding}"),
        }
    }
}

/// Where and how to run the app.
#[derive(Debug, Clone)]
pub struct BootCheck {
    /// The project root (holds `index.js` and `node_modules/total5`).
    pub root: PathBuf,
    /// The requests to make once it listens.
    pub requests: Vec<BootRequest>,
    /// The parent of the check's temp folder (`$TOTEM_HOME/tmp`).
    pub tmp_parent: PathBuf,
    /// Run it inside the kernel sandbox with these secret patterns (unreadable files); `None`
    /// runs it unconfined.
    pub sandbox: Option<totem_permission::SecretSettings>,
    /// How long the app may take to listen.
    pub boot_timeout: Duration,
    /// How long one request may take.
    pub request_timeout: Duration,
}

/// Why the check cannot run in `root`, if it cannot: a library (no app), no `index.js`, no
/// `node`, no `node_modules/total5`.
pub fn unavailable(root: &Path) -> Option<String> {
    if matches!(
        totem_totaljs::detect(root),
        totem_totaljs::Project::Library { .. }
    ) {
        return Some(
            "the project is a library for Total.js 5 apps, with no app of its own to start".into(),
        );
    }
    if !root.join("index.js").is_file() {
        return Some("the project has no index.js to start".into());
    }
    if find_node().is_none() {
        return Some("`node` is not on PATH; install Node.js to have Totem start the app".into());
    }
    if !root.join("node_modules/total5").is_dir() {
        return Some(
            "node_modules/total5 is missing; run `npm install` to have Totem start the app".into(),
        );
    }
    None
}

/// Why the check cannot run in the sandbox, which reads nothing outside the project: the app's
/// `node_modules/total5` is a link to a folder outside it (a shared install, `npm link`), so the
/// app would fail to load Total.js for a reason that is not the model's code.
pub fn outside_the_sandbox(root: &Path) -> Option<String> {
    let root = std::fs::canonicalize(root).ok()?;
    let total5 = std::fs::canonicalize(root.join("node_modules/total5")).ok()?;
    (!total5.starts_with(&root)).then(|| {
        format!(
            "node_modules/total5 links to {}, outside the project, which the sandbox does not let the app read; run `totem check --boot` to start the app yourself",
            total5.display()
        )
    })
}

pub(crate) fn find_node() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("node"))
        .find(|p| p.is_file())
}

/// Removes the check's temp folder when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The app's stdout and stderr, as one text.
#[derive(Clone, Default)]
struct Output(Arc<Mutex<String>>);

impl Output {
    fn collect(&self, mut from: impl AsyncRead + Unpin + Send + 'static) {
        let out = self.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = from.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut text = lock(&out.0);
                if text.len() < MAX_OUTPUT {
                    text.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
    }

    fn len(&self) -> usize {
        lock(&self.0).len()
    }

    fn since(&self, start: usize) -> String {
        lock(&self.0).get(start..).unwrap_or("").to_string()
    }
}

impl BootCheck {
    /// Starts the app, asks the routes, stops it.
    pub async fn run(&self) -> BootOutcome {
        if let Some(why) = unavailable(&self.root) {
            return BootOutcome::Skipped(why);
        }
        let Some(node) = find_node() else {
            return BootOutcome::Skipped("`node` is not on PATH".into());
        };
        let dir = self.tmp_parent.join(crate::util::new_id("boot"));
        if let Err(e) = create_private_dir(&dir) {
            return BootOutcome::Skipped(format!("cannot create a temp folder: {e}"));
        }
        let _guard = TempDir(dir.clone());
        let preload = dir.join("totem-boot.js");
        if let Err(e) = std::fs::write(&preload, totem_totaljs::BOOT_PRELOAD) {
            return BootOutcome::Skipped(format!("cannot write the start script: {e}"));
        }
        let port = match std::net::TcpListener::bind(("127.0.0.1", 0)).and_then(|l| l.local_addr())
        {
            Ok(addr) => addr.port(),
            Err(e) => return BootOutcome::Skipped(format!("no free loopback port: {e}")),
        };
        let mut command = match &self.sandbox {
            Some(secrets) => {
                let program = match std::env::current_exe() {
                    Ok(p) => p,
                    Err(e) => {
                        return BootOutcome::Skipped(format!("cannot find totemd: {e}"));
                    }
                };
                let mut launcher = crate::sandbox::Launcher::new(
                    program.clone(),
                    self.root.clone(),
                    dir.clone(),
                    secrets.clone(),
                );
                launcher.tcp_port = Some(port);
                let mut c = tokio::process::Command::new(program);
                c.args(launcher.args()).arg(&node);
                c
            }
            None => tokio::process::Command::new(&node),
        };
        command
            .arg("--require")
            .arg(&preload)
            .arg("index.js")
            .current_dir(&self.root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &dir)
            .env("TMPDIR", &dir)
            .env("LANG", "C.UTF-8")
            // Node.js reads /etc/ssl/openssl.cnf at start, which the sandbox does not let it.
            .env("OPENSSL_CONF", "/dev/null")
            .env("TOTEM_BOOT_PORT", port.to_string())
            .env("TOTEM_BOOT_TMP", &dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let started = Instant::now();
        let mut child = match command.spawn() {
            Ok(c) => c,
            Err(e) => return BootOutcome::Skipped(format!("cannot start node: {e}")),
        };
        let output = Output::default();
        if let Some(out) = child.stdout.take() {
            output.collect(out);
        }
        if let Some(err) = child.stderr.take() {
            output.collect(err);
        }
        let result = self.probe(&mut child, port, &output).await;
        stop(&mut child).await;
        let millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match result {
            Ok(answered) => BootOutcome::Passed { answered, millis },
            Err(finding) => BootOutcome::Failed { finding, millis },
        }
    }

    /// Waits for the app to listen, then asks each route. `Err` is the finding.
    async fn probe(
        &self,
        child: &mut tokio::process::Child,
        port: u16,
        output: &Output,
    ) -> Result<Vec<(String, u16)>, String> {
        let deadline = Instant::now() + self.boot_timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                // Let the readers take the last of the output.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let text = output.since(0);
                return Err(match self.first_error(&text) {
                    Some(error) => format!("the app did not start: {error}"),
                    None => format!(
                        "the app exited ({status}) before it listened{}",
                        tail(&text)
                    ),
                });
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            if Instant::now() >= deadline {
                let text = output.since(0);
                return Err(match self.first_error(&text) {
                    Some(error) => format!("the app did not start: {error}"),
                    None => format!(
                        "the app did not listen within {} s{}",
                        self.boot_timeout.as_secs(),
                        tail(&text)
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        // An error logged while loading, though the server listens (ON('ready') handlers…).
        if let Some(error) = self.first_error(&output.since(0)) {
            return Err(format!("the app started but logged {error}"));
        }
        let mut answered = Vec::new();
        for request in &self.requests {
            let mark = output.len();
            let label = request.label();
            // A finding names the body sent, for the model to see which request broke.
            let what = request.describe();
            let status = tokio::time::timeout(self.request_timeout, ask(port, request)).await;
            // Errors are printed as the request fails; give the pipe a moment.
            tokio::time::sleep(Duration::from_millis(30)).await;
            let error = self.first_error(&output.since(mark));
            match (status, error) {
                (Err(_), Some(error)) => {
                    return Err(format!("{what} threw {error} and never answered"));
                }
                (Err(_), None) => {
                    return Err(format!(
                        "{what} did not answer within {} s (the handler never calls $.success, $.json, $.view or $.callback, or a view is missing its layout)",
                        self.request_timeout.as_secs()
                    ));
                }
                (Ok(Err(e)), _) => {
                    return Err(format!("{what} failed: {e}"));
                }
                (Ok(Ok(Answer { code, .. })), Some(error)) if code >= 500 => {
                    return Err(format!("{what} answered {code}: {error}"));
                }
                (Ok(Ok(Answer { code, .. })), None) if code >= 500 => {
                    return Err(format!("{what} answered {code}"));
                }
                (Ok(Ok(Answer { code, .. })), Some(error)) => {
                    return Err(format!("{what} answered {code} but the app logged {error}"));
                }
                (
                    Ok(Ok(Answer {
                        code,
                        missing_action: Some(action),
                    })),
                    None,
                ) => {
                    return Err(format!(
                        "{what} answered {code}: the action {action} it runs is not declared (no NEWACTION('{action}') in actions/)"
                    ));
                }
                (Ok(Ok(Answer { code, .. })), None) => answered.push((label, code)),
            }
        }
        Ok(answered)
    }

    fn first_error(&self, text: &str) -> Option<String> {
        read_errors(text, &self.root)
            .first()
            .map(totem_totaljs::BootError::describe)
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// The last lines of the output, after `: `, or nothing.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("===="))
        .collect();
    let last: Vec<&str> = lines.iter().rev().take(3).rev().copied().collect();
    if last.is_empty() {
        String::new()
    } else {
        format!(": {}", last.join(" / "))
    }
}

/// What the app answered to one request.
struct Answer {
    code: u16,
    /// For a 400, the action its body says is not declared (`The action "X" not found`).
    missing_action: Option<String>,
}

/// How much of a 400's body is read for [`Answer::missing_action`].
const MAX_BODY: usize = 8 * 1024;

/// One HTTP/1.1 request on loopback: its status code, and for a 400 the action its body says is
/// missing.
async fn ask(port: u16, request: &BootRequest) -> std::io::Result<Answer> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let body = match &request.body {
        Some(body) => body.as_str(),
        None if request.method == "GET" => "",
        None => "{}",
    };
    let head = format!(
        "{} {} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: totem-boot-check\r\nAccept: */*\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        request.method,
        request.path,
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.contains(&b'\n') {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let code: u16 = String::from_utf8_lossy(&got)
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the connection closed without an HTTP answer",
            )
        })?;
    let mut missing_action = None;
    if code == 400 {
        // Total.js keeps the connection open and sends the body chunked: read until the body is
        // whole, the cap, the end, or a moment without data.
        loop {
            let text = String::from_utf8_lossy(&got);
            if let Some((_, rest)) = text.split_once("\r\n\r\n")
                && let Some(action) = totem_totaljs::missing_action(&dechunk(rest))
            {
                missing_action = Some(action);
                break;
            }
            if got.len() > MAX_BODY {
                break;
            }
            match tokio::time::timeout(Duration::from_millis(300), stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
    }
    Ok(Answer {
        code,
        missing_action,
    })
}

/// A body as sent, or joined from its chunks when it is chunked (`1c\r\n…\r\n0\r\n\r\n`).
fn dechunk(body: &str) -> String {
    let chunked = body
        .split_once("\r\n")
        .is_some_and(|(size, _)| usize::from_str_radix(size.trim(), 16).is_ok());
    if !chunked {
        return body.to_string();
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n")
        && let Ok(size) = usize::from_str_radix(size.trim(), 16)
    {
        out.push_str(after.get(..size.min(after.len())).unwrap_or(""));
        if size == 0 || after.len() < size {
            break;
        }
        rest = after.get(size..).unwrap_or("").trim_start_matches("\r\n");
    }
    out
}

/// SIGTERM to the app's process group, SIGKILL after a second.
async fn stop(child: &mut tokio::process::Child) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    let group = Pid::from_raw(pid);
    let _ = killpg(group, Signal::SIGTERM);
    if tokio::time::timeout(Duration::from_secs(1), child.wait())
        .await
        .is_err()
    {
        let _ = killpg(group, Signal::SIGKILL);
        let _ = child.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_is_joined() {
        let body =
            "34\r\n[{\"error\":\"The action \\\"Products|list\\\" not found\"}]\r\n0\r\n\r\n";
        assert_eq!(
            totem_totaljs::missing_action(&dechunk(body)).as_deref(),
            Some("Products|list")
        );
        assert_eq!(dechunk("[1]"), "[1]");
        // Cut mid-chunk: what came so far.
        assert_eq!(dechunk("a\r\n[1,2"), "[1,2");
    }

    #[test]
    fn total5_linked_from_outside_the_project_is_named_and_a_copy_inside_is_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("app");
        let shared = dir.path().join("shared/node_modules/total5");
        std::fs::create_dir_all(&shared).expect("shared install");
        std::fs::create_dir_all(&root).expect("app");
        std::os::unix::fs::symlink(
            dir.path().join("shared/node_modules"),
            root.join("node_modules"),
        )
        .expect("link");
        let why = outside_the_sandbox(&root).expect("a link outside is named");
        assert!(
            why.starts_with("node_modules/total5 links to ") && why.contains("outside the project"),
            "{why}"
        );
        std::fs::remove_file(root.join("node_modules")).expect("unlink");
        std::fs::create_dir_all(root.join("node_modules/total5")).expect("inside");
        assert_eq!(outside_the_sandbox(&root), None);
    }
}
