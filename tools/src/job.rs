//! Background commands of a session. A `JobManager` belongs to the session, not to a run: jobs keep
//! running after the run that started them ends, and are killed (with their whole process group)
//! when the last handle to the manager is dropped or `kill_all` is called.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::process::{self, OutputBuf, SharedOutput};

/// Bytes of output kept per job (the newest).
const JOB_KEEP: usize = 1 << 20;
/// Jobs running at once per session.
const MAX_RUNNING: usize = 16;

/// How a job stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    /// Still running.
    Running,
    /// Ended; the words say how (`exit code 0`, `killed by signal 9`).
    Ended {
        /// The exit code, when it exited rather than being killed.
        code: Option<i32>,
        /// How it ended, in words.
        how: String,
    },
}

/// A job as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    /// The id the model passes to `job` to read, wait for or kill it.
    pub id: String,
    /// The command line it runs.
    pub command: String,
    /// Running, or how it ended.
    pub status: JobStatus,
    /// Time since it started.
    pub elapsed: Duration,
}

/// Output read from a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutput {
    /// New output since the previous read.
    pub text: String,
    /// Bytes of new output that were too old to keep.
    pub skipped: u64,
    /// Running, or how it ended.
    pub status: JobStatus,
}

struct Entry {
    id: String,
    command: String,
    pid: u32,
    started: Instant,
    output: SharedOutput,
    status: watch::Receiver<JobStatus>,
    read_to: Mutex<u64>,
}

#[derive(Default)]
struct Inner {
    jobs: Mutex<Vec<Arc<Entry>>>,
    next: AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(jobs) = self.jobs.lock() {
            for job in jobs.iter() {
                if *job.status.borrow() == JobStatus::Running {
                    process::end_running_later(job.pid);
                }
            }
        }
    }
}

/// The session's background commands. Clones share the same jobs.
#[derive(Clone, Default)]
pub struct JobManager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for JobManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobManager")
            .field("jobs", &self.list().len())
            .finish()
    }
}

impl JobManager {
    /// A manager without jobs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts `command` in `cwd` in its own process group and returns the job id (`j1`, `j2`, …).
    /// Needs a tokio runtime.
    pub fn start(
        &self,
        command: &str,
        cwd: &Path,
        spec: &process::ShellSpec,
    ) -> Result<String, String> {
        let running = self
            .list()
            .iter()
            .filter(|j| j.status == JobStatus::Running)
            .count();
        if running >= MAX_RUNNING {
            return Err(format!(
                "{running} jobs are already running; kill one first (job action=kill)"
            ));
        }
        let mut child = process::shell_command(command, cwd, spec)
            .spawn()
            .map_err(|e| format!("cannot start job: {e}"))?;
        let pid = child.id().ok_or("job ended before it started")?;
        let output: SharedOutput = Arc::new(Mutex::new(OutputBuf::new(JOB_KEEP)));
        let pumps = process::collect(&mut child, &output);
        let (tx, rx) = watch::channel(JobStatus::Running);
        tokio::spawn(async move {
            let status = child.wait().await;
            // Let the pumps read what is left so the final status comes with all output.
            process::finish(pumps).await;
            let status = match status {
                Ok(s) => {
                    let (code, how) = process::describe_status(&s);
                    JobStatus::Ended { code, how }
                }
                Err(e) => JobStatus::Ended {
                    code: None,
                    how: format!("lost: {e}"),
                },
            };
            let _ = tx.send(status);
        });
        let id = format!("j{}", self.inner.next.fetch_add(1, Ordering::Relaxed) + 1);
        let entry = Arc::new(Entry {
            id: id.clone(),
            command: command.to_string(),
            pid,
            started: Instant::now(),
            output,
            status: rx,
            read_to: Mutex::new(0),
        });
        if let Ok(mut jobs) = self.inner.jobs.lock() {
            jobs.push(entry);
        }
        Ok(id)
    }

    fn entry(&self, id: &str) -> Option<Arc<Entry>> {
        let jobs = self.inner.jobs.lock().ok()?;
        jobs.iter().find(|j| j.id == id.trim()).cloned()
    }

    /// The job's status, or `None` for an unknown id.
    pub fn status(&self, id: &str) -> Option<JobStatus> {
        Some(self.entry(id)?.status.borrow().clone())
    }

    /// Output produced since the previous `output` call on this job.
    pub fn output(&self, id: &str) -> Option<JobOutput> {
        let job = self.entry(id)?;
        // Read the status first: output read after it is at least as complete.
        let status = job.status.borrow().clone();
        let buf = job.output.lock().ok()?;
        let mut read_to = job.read_to.lock().ok()?;
        let (bytes, skipped) = buf.since(*read_to);
        let text = process::clean_terminal_text(&String::from_utf8_lossy(bytes));
        *read_to = buf.total();
        Some(JobOutput {
            text,
            skipped,
            status,
        })
    }

    /// Waits until the job ends, `timeout` passes or `cancel` fires; returns the status then.
    pub async fn wait(
        &self,
        id: &str,
        timeout: Duration,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Option<JobStatus> {
        let job = self.entry(id)?;
        let mut rx = job.status.clone();
        let ended = rx.wait_for(|s| *s != JobStatus::Running);
        tokio::select! {
            _ = ended => {}
            _ = tokio::time::sleep(timeout) => {}
            _ = cancel.cancelled() => {}
        }
        Some(job.status.borrow().clone())
    }

    /// Kills the job's whole process group and waits briefly for it to be reaped. `None` for an
    /// unknown id; `Some(false)` when it had already ended.
    pub async fn kill(&self, id: &str) -> Option<bool> {
        let job = self.entry(id)?;
        if *job.status.borrow() != JobStatus::Running {
            return Some(false);
        }
        process::end_running_later(job.pid);
        let mut rx = job.status.clone();
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            rx.wait_for(|s| *s != JobStatus::Running),
        )
        .await;
        Some(true)
    }

    /// Every job of the session, oldest first.
    pub fn list(&self) -> Vec<JobInfo> {
        let Ok(jobs) = self.inner.jobs.lock() else {
            return Vec::new();
        };
        jobs.iter()
            .map(|j| JobInfo {
                id: j.id.clone(),
                command: j.command.clone(),
                status: j.status.borrow().clone(),
                elapsed: j.started.elapsed(),
            })
            .collect()
    }

    /// Kills every running job (the session is closing).
    pub fn kill_all(&self) {
        if let Ok(jobs) = self.inner.jobs.lock() {
            for job in jobs.iter() {
                if *job.status.borrow() == JobStatus::Running {
                    process::end_running_later(job.pid);
                }
            }
        }
    }

    /// The process id (and process group id) of a job; for tests and diagnostics.
    pub fn pid(&self, id: &str) -> Option<u32> {
        Some(self.entry(id)?.pid)
    }
}
