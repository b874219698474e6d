//! The daemon's shared state, handed to every method handler: the store, the live sessions, the
//! paths it serves, and the shutdown switch.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use tokio::sync::watch;
use totem_protocol::{EventKind, Project, RunStatus, SessionStatus, WithdrawnReason};

use crate::session::SessionHub;
use crate::store::{Store, StoreError};
use crate::util::{new_id, now_ms};

/// Why a folder cannot be opened as a project.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The path given is relative.
    #[error("project path must be absolute: {0}")]
    NotAbsolute(String),
    /// The folder cannot be read or canonicalised.
    #[error("cannot open project {path}: {source}")]
    Unreadable {
        /// The path as given.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The path exists but is a file.
    #[error("project path is not a folder: {0}")]
    NotAFolder(String),
    #[error(
        "{path} {what}, so Totem does not open it as a project unless you name it on purpose. Start Totem in your project's folder, or pass `--project {path}` if you mean it"
    )]
    /// The folder is the whole disk, the home folder or one holding it, and was not named on
    /// purpose.
    TooBroad {
        /// The folder as given.
        path: String,
        /// Why it is too broad, as [`too_broad`] says it.
        what: &'static str,
    },
    /// Recording the project failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why `folder` is too broad to be a project without being named: the whole disk, a folder that
/// holds the home folder, or the home folder itself.
pub fn too_broad(folder: &Path, home: Option<&Path>) -> Option<&'static str> {
    if folder.parent().is_none() {
        return Some("is the whole disk");
    }
    let home = home?;
    if home == folder {
        Some("is your home folder")
    } else if home.starts_with(folder) {
        Some("holds your home folder")
    } else {
        None
    }
}

/// The daemon: its home, store, sessions and agents, shared by every connection.
pub struct Daemon {
    /// The Totem home (`TOTEM_HOME`): settings, secrets, store, logs.
    pub home: PathBuf,
    /// The Unix socket clients connect to.
    pub socket: PathBuf,
    store: Store,
    /// Content-addressed blobs: file snapshots and full tool outputs, one store for both.
    pub blobs: totem_snapshot::DirBlobStore,
    /// The live sessions and their event streams.
    pub sessions: SessionHub,
    /// When the daemon started, for `daemon.status` uptime.
    pub started: Instant,
    /// When the daemon started, Unix milliseconds.
    pub started_at: u64,
    /// Client connections open now.
    pub connections: AtomicU64,
    /// Connections the daemon holds at most (from its file descriptor limit); more are refused
    /// with a one-line reason.
    pub max_connections: u64,
    /// Sentences for the first client to show (what a damaged store lost, when it was repaired).
    notices: std::sync::Mutex<Vec<String>>,
    /// settings.json, provider keys, providers and model lists.
    pub settings: crate::config::Settings,
    /// The run queues, jobs and permission questions of the sessions.
    pub agents: crate::agent::Agents,
    /// The interactive terminals of every session.
    pub terminals: std::sync::Arc<crate::terminal::Terminals>,
    /// Whether commands run without asking are confined by the kernel (probed at start).
    pub sandbox: crate::sandbox::Mode,
    /// OAuth logins to MCP servers waiting for the browser (`mcpServer.login`).
    pub mcp_logins: crate::mcp_client::oauth::Logins,
    /// The web client's listener address, one-time tokens and cookies.
    pub web: crate::server::web::Web,
    shutdown: watch::Sender<bool>,
    failed: std::sync::atomic::AtomicBool,
    /// The newest stored event of each session as last written to `store/acked`.
    acked: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// What the start found lost at the journal's end, for `daemon.status`.
    lost_tail: std::sync::Mutex<Option<String>>,
}

impl Daemon {
    /// Opens the store under `home` and marks runs a previous daemon left running as interrupted.
    pub fn open(home: &Path, socket: &Path) -> anyhow::Result<Daemon> {
        crate::util::create_private_dir(&home.join("store"))?;
        let store = Store::open(&home.join("store"))?;
        let blobs_dir = home.join("blobs");
        crate::util::create_private_dir(&blobs_dir)?;
        let blobs = totem_snapshot::DirBlobStore::new(blobs_dir);
        let (shutdown, _) = watch::channel(false);
        let daemon = Daemon {
            home: home.to_path_buf(),
            socket: socket.to_path_buf(),
            sessions: SessionHub::new(store.clone()),
            store,
            blobs,
            started: Instant::now(),
            started_at: now_ms(),
            connections: AtomicU64::new(0),
            max_connections: crate::server::limits::connection_capacity(),
            notices: std::sync::Mutex::new(Vec::new()),
            settings: crate::config::Settings::open(home),
            agents: crate::agent::Agents::default(),
            terminals: std::sync::Arc::new(crate::terminal::Terminals::new(home)),
            sandbox: crate::sandbox::probe(),
            mcp_logins: crate::mcp_client::oauth::Logins::default(),
            web: crate::server::web::Web::default(),
            shutdown,
            failed: std::sync::atomic::AtomicBool::new(false),
            acked: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            lost_tail: std::sync::Mutex::new(None),
        };
        // Temp folders of commands and writes a previous daemon left behind.
        let tmp = daemon.tmp_dir();
        let _ = std::fs::remove_dir_all(&tmp);
        crate::util::create_private_dir(&tmp)?;
        totem_tools::set_temp_dir(tmp);
        let ended = crate::mcp_client::leftovers::end_previous(home);
        if ended > 0 {
            tracing::warn!(ended, "ended MCP servers a previous totemd left running");
        }
        tracing::info!(sandbox = %daemon.sandbox.describe(), "commands run without asking");
        daemon.check_acked();
        daemon.mark_interrupted_runs()?;
        daemon.repair_run_ends()?;
        if let Some(repair) = daemon.store.repair() {
            let text = crate::store::repair_notice::describe(&daemon.store, repair);
            tracing::warn!(notice = %text, "store repaired at open");
            // Kept beside the damaged copy too, for `totem doctor`.
            let _ = std::fs::write(repair.copy.join("NOTE.txt"), format!("{text}\n"));
            crate::util::lock(&daemon.notices).push(text);
        }
        Ok(daemon)
    }

    /// Compares what the store holds with the marks of what it had stored (`store/acked`): a
    /// session whose events now end below its mark lost the journal's tail. The user is told
    /// (the log, the first client's notices, `daemon.status` and `totem doctor`), once.
    fn check_acked(&self) {
        use crate::store::acked;
        let path = self.store.path();
        let mut marks = acked::read(path);
        let lost = acked::check(&self.store, &marks);
        if !lost.is_empty() {
            let text = acked::describe(&lost);
            tracing::warn!(notice = %text, "the store lost the end of its journal");
            crate::util::lock(&self.notices).push(text.clone());
            // For `totem doctor`, as a repair leaves its note.
            let note = self.home.join(format!("store.damaged-{}", now_ms() / 1000));
            if crate::util::create_private_dir(&note).is_ok() {
                let _ = std::fs::write(note.join("NOTE.txt"), format!("{text}\n"));
            }
            *crate::util::lock(&self.lost_tail) = Some(text);
            // Told once: the marks now start from what is left.
            for l in &lost {
                marks.insert(l.session_id.clone(), l.found);
            }
            if let Err(e) = acked::write(path, &marks) {
                tracing::warn!(error = %e, "cannot write the marks of what is stored");
            }
        }
        *crate::util::lock(&self.acked) = marks;
    }

    /// Brings `store/acked` up to date with what the sessions stored since it was written.
    pub fn write_acked(&self) {
        let mut marks = crate::util::lock(&self.acked);
        let mut changed = false;
        for (id, seq) in self.sessions.stored_marks() {
            let mark = marks.entry(id).or_insert(0);
            if seq > *mark {
                *mark = seq;
                changed = true;
            }
        }
        if changed && let Err(e) = crate::store::acked::write(self.store.path(), &marks) {
            tracing::warn!(error = %e, "cannot write the marks of what is stored");
        }
    }

    /// `$TOTEM_HOME/tmp`: temp folders of confined commands and half-written files; emptied
    /// when the daemon starts.
    pub fn tmp_dir(&self) -> PathBuf {
        self.home.join("tmp")
    }

    /// The notices for a client that just initialized: all of them for the first, then none.
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *crate::util::lock(&self.notices))
    }

    /// The store's state and the room on its disk, for `daemon.status`.
    pub fn store_status(&self) -> totem_protocol::StoreStatus {
        use crate::store::Health;
        let store = &self.store;
        let (state, message) = match store.health() {
            Health::Ok => ("ok", None),
            Health::Full => ("full", Some(crate::disk::full_message(store.path()))),
            Health::Failed(reason) => (
                "failed",
                Some(format!(
                    "a write failed ({reason}); the next one reopens the store"
                )),
            ),
            Health::Closed(reason) => (
                "closed",
                Some(format!(
                    "the store cannot be reopened ({reason}); the daemon is stopping so that a fresh one can start"
                )),
            ),
        };
        totem_protocol::StoreStatus {
            state: state.to_string(),
            free_bytes: crate::disk::free_bytes(store.path()),
            message,
            repaired: store
                .repair()
                .map(|r| crate::store::repair_notice::describe(store, r))
                .or_else(|| crate::util::lock(&self.lost_tail).clone()),
        }
    }

    /// Watches a store that stopped writing: reopens it once the disk has room, and stops the
    /// daemon when it cannot be reopened, so that a fresh one starts (the service manager or the
    /// next `totem` command) instead of one that stays up unable to write. Also lets go of the
    /// sessions nobody uses, every 10 s.
    ///
    /// On a thread of its own that sleeps between its ticks, not a task handing each tick to the
    /// blocking pool: a blocking thread ends after 10 s without work, but the pool wakes its idle
    /// threads in turn, so a tick every second kept every thread a busy moment had started alive
    /// for the daemon's life (each with its stack: 9 threads at the soak's idle end, not 7).
    pub fn watch_store(self: &std::sync::Arc<Self>) {
        self.watch_store_every(std::time::Duration::from_secs(1));
    }

    /// [`Daemon::watch_store`] with a tick of `tick` (shorter in tests).
    fn watch_store_every(self: &std::sync::Arc<Self>, tick: std::time::Duration) {
        let daemon = std::sync::Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("totemd-watch".into())
            .spawn(move || {
                let mut ticks: u64 = 0;
                loop {
                    std::thread::sleep(tick);
                    ticks += 1;
                    let Some(daemon) = daemon.upgrade() else {
                        return;
                    };
                    if !daemon.watch_tick(ticks) {
                        return;
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the store's watch");
        }
    }

    /// One second of [`Daemon::watch_store`]; false once the daemon is stopping for good.
    fn watch_tick(&self, ticks: u64) -> bool {
        /// Ticks between two sweeps of the sessions nobody uses.
        const IDLE_SWEEP_TICKS: u64 = 10;
        if *self.shutdown.borrow() {
            return false;
        }
        if self.store.health() == crate::store::Health::Ok {
            // Run ends announced while the disk was full are stored now, and the marks of what
            // is stored are brought up to date.
            self.sessions.store_unstored();
            self.write_acked();
            // Every 10 s, once their marks are written: sessions nobody runs or watches are let
            // go (their recent events and broadcast buffer), not only when another session is
            // loaded, and so are the providers' HTTP clients unused for `CLIENT_IDLE`. When
            // nothing runs and nothing was written for a few seconds, the store's recent writes
            // go to a table file. Then what was freed goes back to the system.
            let idle = self.sessions.running() == 0;
            let mut give_back = false;
            if ticks.is_multiple_of(IDLE_SWEEP_TICKS) {
                self.sessions.release_unused();
                if idle {
                    self.settings
                        .release_idle_clients(totem_provider::CLIENT_IDLE);
                }
                give_back = idle;
            }
            if idle && self.store.flush_when_quiet() {
                give_back = true;
            }
            if give_back {
                crate::memory::give_back();
                crate::memory::report("idle");
            }
            return true;
        }
        let _ = self.store.recover();
        if let crate::store::Health::Closed(reason) = self.store.health() {
            tracing::error!(reason = %reason, "the store cannot be written; stopping");
            self.failed
                .store(true, std::sync::atomic::Ordering::Relaxed);
            self.request_shutdown();
            return false;
        }
        true
    }

    /// Whether the daemon stops because its store could not be reopened (it exits with failure).
    pub fn failed(&self) -> bool {
        self.failed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The store every session, run and project is kept in.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Ends every run a previous daemon left `running` as interrupted, all in one write (one batch,
    /// one fsync): a restart after hundreds of queued prompts costs one write, not three each.
    fn mark_interrupted_runs(&self) -> anyhow::Result<()> {
        let runs = self.store.running_runs()?;
        if runs.is_empty() {
            return Ok(());
        }
        let mut by_session: std::collections::BTreeMap<String, Vec<totem_protocol::Run>> =
            std::collections::BTreeMap::new();
        for mut run in runs {
            run.status = RunStatus::Interrupted;
            run.ended_at = Some(now_ms());
            run.error = Some("the daemon stopped while this run was going".into());
            by_session
                .entry(run.session_id.clone())
                .or_default()
                .push(run);
        }
        let mut batch = self.store.begin()?;
        let mut staged = Vec::new();
        for (session_id, runs) in by_session {
            let session = match self.sessions.get(&session_id) {
                Ok(session) => session,
                Err(e) => {
                    tracing::warn!(session = %session_id, error = %e, "interrupted runs of a missing session");
                    for run in &runs {
                        self.store.batch_put_run(&mut batch, run)?;
                    }
                    continue;
                }
            };
            // One read of the session's events: the questions still open, and the order in which
            // the prompts were queued (run ids made in the same millisecond do not sort by time).
            let mut questions: Vec<totem_protocol::PermissionQuestion> = Vec::new();
            let mut queued_at = std::collections::HashMap::new();
            for event in self.store.events_after(&session_id, 0)? {
                match event.kind {
                    EventKind::PermissionAsked { question } => questions.push(question),
                    EventKind::PermissionResolved { question_id, .. } => {
                        questions.retain(|q| q.id != question_id)
                    }
                    EventKind::RunQueued { run, .. } => {
                        queued_at.insert(run.id, event.seq);
                    }
                    _ => {}
                }
            }
            let mut runs = runs;
            runs.sort_by(|a, b| {
                let at = |r: &totem_protocol::Run| {
                    (
                        queued_at.get(&r.id).copied().unwrap_or(u64::MAX),
                        r.started_at,
                    )
                };
                at(a).cmp(&at(b)).then_with(|| a.id.cmp(&b.id))
            });
            let mut makes: Vec<Box<dyn FnOnce(u64) -> EventKind>> = Vec::new();
            let mut joined = 0;
            for run in runs {
                // A question that waited has nobody left to answer it: withdraw it, so a client
                // attaching later does not show it.
                for question in questions.iter().filter(|q| q.run_id == run.id) {
                    let question_id = question.id.clone();
                    makes.push(Box::new(move |_| EventKind::PermissionResolved {
                        question_id,
                        reply: None,
                        reason: Some(WithdrawnReason::Interrupted),
                    }));
                }
                // A prompt still queued joins the conversation as the prompt of a run that was
                // interrupted: nothing acknowledged is lost. Its run goes the one way every run
                // goes once its prompt joins: `run.started`, then its end.
                if let Some(prompt) = self.store.queued_prompt(&run.id)? {
                    joined += 1;
                    makes.push(Box::new(move |seq| EventKind::MessageCreated {
                        message: totem_protocol::Message { seq, ..prompt },
                    }));
                    let started = totem_protocol::Run {
                        status: RunStatus::Running,
                        ended_at: None,
                        error: None,
                        ..run.clone()
                    };
                    makes.push(Box::new(move |_| EventKind::RunStarted { run: started }));
                }
                makes.push(Box::new(move |_| EventKind::RunInterrupted { run }));
            }
            let stage = session.stage(
                &self.store,
                &mut batch,
                |s| {
                    s.status = SessionStatus::Idle;
                    s.message_count += joined;
                },
                makes,
            )?;
            staged.push((session, stage));
        }
        self.store.commit_durably(batch)?;
        for (session, stage) in staged {
            session.publish_staged(stage);
        }
        Ok(())
    }

    /// Gives every run an older daemon stored as ended without its end event (a crash between
    /// the two writes) that event, once per store: the replay then says how each run ended.
    fn repair_run_ends(&self) -> anyhow::Result<()> {
        if self.store.run_ends_checked()? {
            return Ok(());
        }
        let runs = self.store.runs_without_end()?;
        if !runs.is_empty() {
            tracing::warn!(
                runs = runs.len(),
                "runs stored as ended without their end event: recording it"
            );
        }
        for run in runs {
            let session = match self.sessions.get(&run.session_id) {
                Ok(session) => session,
                Err(e) => {
                    tracing::warn!(run = %run.id, error = %e, "ended run of a missing session");
                    continue;
                }
            };
            if session.status() == SessionStatus::Running {
                session.update(&self.store, |s| s.status = SessionStatus::Idle)?;
            }
            let kind = match run.status {
                RunStatus::Done => EventKind::RunDone { run },
                RunStatus::Failed => EventKind::RunFailed { run },
                RunStatus::Aborted => EventKind::RunAborted { run },
                RunStatus::Interrupted | RunStatus::Running => EventKind::RunInterrupted { run },
            };
            session.emit(&self.store, kind)?;
        }
        self.store.set_run_ends_checked()?;
        Ok(())
    }

    /// Finds or registers the project whose root is the canonical form of `path`.
    /// Registers `path` as a project (or finds it). `/`, a folder holding the home folder and the
    /// home folder itself are refused unless the user named the folder (`by_name`): a model
    /// working there could read anything the user can.
    pub fn open_project(&self, path: &str, by_name: bool) -> Result<Project, ProjectError> {
        if !Path::new(path).is_absolute() {
            return Err(ProjectError::NotAbsolute(path.to_string()));
        }
        let canonical = std::fs::canonicalize(path).map_err(|source| ProjectError::Unreadable {
            path: path.to_string(),
            source,
        })?;
        if !canonical.is_dir() {
            return Err(ProjectError::NotAFolder(canonical.display().to_string()));
        }
        let home = std::env::var_os("HOME").and_then(|h| std::fs::canonicalize(h).ok());
        if !by_name && let Some(what) = too_broad(&canonical, home.as_deref()) {
            return Err(ProjectError::TooBroad {
                path: canonical.display().to_string(),
                what,
            });
        }
        let key = canonical.display().to_string();
        if let Some(project) = self.store.project_by_path(&key)? {
            return Ok(project);
        }
        let project = Project {
            id: new_id("prj"),
            name: canonical
                .file_name()
                .map_or_else(|| key.clone(), |n| n.to_string_lossy().into_owned()),
            path: key,
            created_at: now_ms(),
            kind: None,
        };
        self.store.put_project(&project)?;
        Ok(project)
    }

    /// Asks the daemon to stop; the listener and connections watch for it.
    pub fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// A receiver that turns `true` once a shutdown is requested.
    pub fn shutdown_requested(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(session_id: &str, status: RunStatus) -> totem_protocol::Run {
        totem_protocol::Run {
            id: new_id("run"),
            session_id: session_id.into(),
            status,
            started_at: 1,
            ended_at: None,
            error: None,
            model: None,
            mode: None,
            usage: None,
            prompt_blocked: false,
        }
    }

    fn ends(daemon: &Daemon, session: &str) -> Vec<(String, RunStatus)> {
        let events = daemon.store.events_after(session, 0).unwrap();
        events
            .iter()
            .filter_map(|e| e.kind.ended_run())
            .map(|r| (r.id.clone(), r.status))
            .collect()
    }

    /// The threads of this process named `name`.
    fn threads_named(name: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.trim_end() == name)
            .count()
    }

    /// The store's watch ticks without the blocking pool, so the threads a busy moment started
    /// end once idle (the pool wakes its idle threads in turn: a task every tick kept them all
    /// alive for good). Here with a 50 ms tick and a 400 ms keep-alive, as 1 s and 10 s in the
    /// daemon.
    #[test]
    fn the_stores_watch_leaves_no_blocking_thread_alive_after_a_busy_moment() {
        const POOL: &str = "watch-test-pool";
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(POOL)
            .thread_keep_alive(std::time::Duration::from_millis(400))
            .enable_all()
            .build()
            .unwrap();
        let home = tempfile::tempdir().unwrap();
        runtime.block_on(async {
            let daemon =
                std::sync::Arc::new(Daemon::open(home.path(), &home.path().join("sock")).unwrap());
            daemon.watch_store_every(std::time::Duration::from_millis(50));
            let busy: Vec<_> = (0..3)
                .map(|_| {
                    tokio::task::spawn_blocking(|| {
                        std::thread::sleep(std::time::Duration::from_millis(100))
                    })
                })
                .collect();
            for task in busy {
                task.await.unwrap();
            }
            assert!(
                threads_named(POOL) >= 4,
                "one worker and three blocking threads"
            );
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
            assert_eq!(
                threads_named(POOL),
                1,
                "the blocking threads ended once idle; only the worker is left"
            );
            daemon.request_shutdown();
        });
    }

    #[test]
    fn a_runs_end_is_stored_with_its_status_and_older_stores_are_repaired_at_start() {
        let home = tempfile::tempdir().unwrap();
        let socket = home.path().join("sock");
        let daemon = Daemon::open(home.path(), &socket).unwrap();
        let session = daemon.sessions.create("prj_x", None).unwrap().id;
        let live = daemon.sessions.get(&session).unwrap();

        // Today: one write stores the status with the end event.
        let mut ended = run(&session, RunStatus::Running);
        daemon.store.put_run(&ended).unwrap();
        ended.status = RunStatus::Done;
        live.emit(&daemon.store, EventKind::RunDone { run: ended.clone() })
            .unwrap();
        assert_eq!(
            daemon.store.get_run(&ended.id).unwrap().unwrap().status,
            RunStatus::Done
        );

        // What an older daemon left when killed between its two writes: the status says done,
        // no event says so, and the session still says running.
        let mut cut = run(&session, RunStatus::Running);
        daemon.store.put_run(&cut).unwrap();
        cut.status = RunStatus::Done;
        cut.ended_at = Some(2);
        daemon.store.put_run(&cut).unwrap();
        live.update(&daemon.store, |s| s.status = SessionStatus::Running)
            .unwrap();
        daemon.store.forget_run_ends_checked().unwrap();
        // And a run a kill caught going.
        let going = run(&session, RunStatus::Running);
        daemon.store.put_run(&going).unwrap();
        drop(live);
        daemon.store.persist().unwrap();
        drop(daemon);

        let daemon = Daemon::open(home.path(), &socket).unwrap();
        assert_eq!(
            ends(&daemon, &session),
            [
                (ended.id.clone(), RunStatus::Done),
                (going.id.clone(), RunStatus::Interrupted),
                (cut.id.clone(), RunStatus::Done),
            ]
        );
        assert_eq!(
            daemon.store.get_run(&going.id).unwrap().unwrap().status,
            RunStatus::Interrupted
        );
        assert_eq!(
            daemon.sessions.snapshot(&session).unwrap().status,
            SessionStatus::Idle
        );
        assert!(daemon.store.run_ends_checked().unwrap());
        drop(daemon);
        // Once: a second start adds nothing.
        let daemon = Daemon::open(home.path(), &socket).unwrap();
        assert_eq!(ends(&daemon, &session).len(), 3);
    }

    #[test]
    fn queued_prompts_left_by_a_kill_join_their_conversations_in_one_write_at_start() {
        let home = tempfile::tempdir().unwrap();
        let socket = home.path().join("sock");
        let daemon = Daemon::open(home.path(), &socket).unwrap();
        let mut queued = Vec::new();
        for _ in 0..2 {
            let session = daemon.sessions.create("prj_x", None).unwrap().id;
            let live = daemon.sessions.get(&session).unwrap();
            live.update(&daemon.store, |s| s.status = SessionStatus::Running)
                .unwrap();
            for i in 0..3 {
                let run = run(&session, RunStatus::Running);
                let message = totem_protocol::Message {
                    id: new_id("msg"),
                    session_id: session.clone(),
                    seq: 0,
                    role: totem_protocol::Role::User,
                    run_id: Some(run.id.clone()),
                    created_at: 1,
                    undone: false,
                    compacted: false,
                    parts: vec![totem_protocol::Part::Text {
                        text: format!("prompt {i}"),
                    }],
                };
                live.emit(
                    &daemon.store,
                    EventKind::RunQueued {
                        run: run.clone(),
                        message,
                    },
                )
                .unwrap();
                queued.push((session.clone(), run.id));
            }
        }
        daemon.store.persist().unwrap();
        drop(daemon);

        let daemon = Daemon::open(home.path(), &socket).unwrap();
        for session in [&queued[0].0, &queued[3].0] {
            let events = daemon.store.events_after(session, 0).unwrap();
            // After the three run.queued: each prompt, its run's start, then its end, in order:
            // no run ends without having started.
            let after: Vec<_> = events[3..]
                .iter()
                .map(|e| match &e.kind {
                    EventKind::MessageCreated { message } => {
                        assert_eq!(message.seq, e.seq, "a message's seq is its event's");
                        format!("prompt of {}", message.run_id.clone().unwrap())
                    }
                    EventKind::RunStarted { run } => format!("start of {}", run.id),
                    EventKind::RunInterrupted { run } => format!("end of {}", run.id),
                    other => panic!("unexpected {other:?}"),
                })
                .collect();
            let runs: Vec<_> = queued.iter().filter(|(s, _)| s == session).collect();
            let expected: Vec<_> = runs
                .iter()
                .flat_map(|(_, r)| {
                    [
                        format!("prompt of {r}"),
                        format!("start of {r}"),
                        format!("end of {r}"),
                    ]
                })
                .collect();
            assert_eq!(after, expected);
            let snapshot = daemon.sessions.snapshot(session).unwrap();
            assert_eq!(snapshot.status, SessionStatus::Idle);
            assert_eq!(snapshot.message_count, 3);
            assert_eq!(snapshot.last_seq, events.last().unwrap().seq);
            assert_eq!(
                daemon.store.messages_after(session, 0, 10).unwrap().0.len(),
                3
            );
        }
        for (_, run) in &queued {
            assert!(daemon.store.queued_prompt(run).unwrap().is_none());
            assert_eq!(
                daemon.store.get_run(run).unwrap().unwrap().status,
                RunStatus::Interrupted
            );
        }
        drop(daemon);
        // Once: a second start adds nothing.
        let daemon = Daemon::open(home.path(), &socket).unwrap();
        assert_eq!(
            daemon.store.events_after(&queued[0].0, 0).unwrap().len(),
            12
        );
    }

    #[test]
    fn the_disk_and_folders_holding_the_home_are_too_broad() {
        let home = Some(Path::new("/home/ann"));
        assert_eq!(too_broad(Path::new("/"), home), Some("is the whole disk"));
        assert_eq!(too_broad(Path::new("/"), None), Some("is the whole disk"));
        assert_eq!(
            too_broad(Path::new("/home"), home),
            Some("holds your home folder")
        );
        assert_eq!(
            too_broad(Path::new("/home/ann"), home),
            Some("is your home folder")
        );
        assert_eq!(too_broad(Path::new("/home/ann/app"), home), None);
        assert_eq!(too_broad(Path::new("/home/bob"), home), None);
        assert_eq!(too_broad(Path::new("/srv/app"), None), None);
    }
}
