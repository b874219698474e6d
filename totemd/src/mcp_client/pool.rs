//! One instance of each server per project, shared by the project's sessions: a session that
//! may use a server (the user allowed it there) gets the running instance, or starts it. An
//! instance no run used for the idle time (`mcpServerIdleSecs`, 10 minutes by default) stops; the
//! next run that wants it starts it again.
//!
//! A server starts on a task of its own, so that one that is slow to answer `initialize` holds
//! up nobody: a run waits for a starting server at most [`START_WAIT`] from the moment it began
//! starting (less when the server's own `timeoutSecs` is shorter), then goes on without it, and
//! the server's tools join the run when it answers. A server that failed to start (it exited, or
//! did not answer within its `timeoutSecs`) is remembered as failed: no run waits for it again
//! until its settings change, `totem mcp test` finds it working, or the daemon restarts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::client::Connection;
use super::server_config::ServerConfig;
use crate::util::lock;

/// How long a server no run uses keeps running unless `mcpServerIdleSecs` says otherwise.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(600);

/// How long after a server began starting a run still waits for it before going on without it,
/// unless `mcpServerStartWaitSecs` says otherwise.
pub const START_WAIT: Duration = Duration::from_secs(10);

/// How a start ended: the connection, or why it failed.
type Started = Result<Arc<Connection>, Failure>;

/// A server that did not start.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Which start failed (a session reports each failure once).
    pub id: u64,
    /// Why, in words.
    pub error: String,
}

/// What one project's server is doing.
enum Slot {
    Starting {
        id: u64,
        config: ServerConfig,
        since: Instant,
        done: watch::Receiver<Option<Started>>,
        cancel: CancellationToken,
    },
    Running(Arc<Connection>),
    Failed {
        config: ServerConfig,
        failure: Failure,
    },
}

type Slots = Arc<Mutex<HashMap<(String, String), Slot>>>;

/// The running servers of every project.
#[derive(Default)]
pub struct Pool {
    slots: Slots,
    next_id: std::sync::atomic::AtomicU64,
}

/// What a run asking for a server gets.
pub enum Request {
    /// The server runs; the run's lease holds it.
    Ready(Arc<Connection>),
    /// The server is starting.
    Starting(Pending),
    /// The server did not start, and is not tried again until its settings change.
    Failed(Failure),
}

/// A server being started.
#[derive(Clone)]
pub struct Pending {
    /// When the run stops waiting for it and goes on without it; `None` when the server's own
    /// timeout ends its start first (the run learns how it ended).
    pub deadline: Option<Instant>,
    done: watch::Receiver<Option<Started>>,
}

impl Pending {
    /// How the start ended; `None` when it was given up (its settings changed meanwhile, or the
    /// daemon is stopping).
    pub async fn outcome(mut self) -> Option<Started> {
        match self.done.wait_for(Option::is_some).await {
            Ok(started) => started.clone(),
            Err(_) => None,
        }
    }
}

/// How a connection is used: the runs holding it now, and when the last one let it go.
pub struct Usage {
    runs: usize,
    since: Instant,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            runs: 0,
            since: Instant::now(),
        }
    }
}

impl Pool {
    /// The instance of `config` in `project` (`root` is its folder): the running one (held by
    /// `lease` at once, so that it cannot stop as idle meanwhile), the one starting, or a new
    /// start when there is none, it stopped, or its configuration changed. A server that failed
    /// to start with this configuration is not started again. A run waits for a starting server
    /// until `wait` after it began starting. It stops after `idle` without a run.
    pub fn request(
        &self,
        project: &str,
        config: &ServerConfig,
        root: &Path,
        (idle, wait): (Duration, Duration),
        lease: &RunLease,
    ) -> Request {
        let key = (project.to_string(), config.name.clone());
        let mut slots = lock(&self.slots);
        match slots.get(&key) {
            Some(Slot::Running(running)) if running.config == *config && lease.hold(running) => {
                return Request::Ready(running.clone());
            }
            Some(Slot::Starting {
                config: starting,
                since,
                done,
                ..
            }) if starting == config => {
                return Request::Starting(Pending {
                    deadline: deadline(*since, config, wait),
                    done: done.clone(),
                });
            }
            Some(Slot::Failed {
                config: failed,
                failure,
            }) if failed == config => return Request::Failed(failure.clone()),
            _ => {}
        }
        match slots.remove(&key) {
            Some(Slot::Running(old)) => old.kill(),
            Some(Slot::Starting { cancel, .. }) => cancel.cancel(),
            _ => {}
        }
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, done) = watch::channel(None);
        let cancel = CancellationToken::new();
        let since = Instant::now();
        slots.insert(
            key.clone(),
            Slot::Starting {
                id,
                config: config.clone(),
                since,
                done: done.clone(),
                cancel: cancel.clone(),
            },
        );
        tokio::spawn(start(
            self.slots.clone(),
            key,
            id,
            config.clone(),
            root.to_path_buf(),
            idle,
            cancel,
            tx,
        ));
        Request::Starting(Pending {
            deadline: deadline(since, config, wait),
            done,
        })
    }

    /// Forgets that the server `name` failed to start, in every project: the next run tries it
    /// again (`totem mcp test` found it working).
    pub fn forget_failures(&self, name: &str) {
        lock(&self.slots)
            .retain(|(_, server), slot| !(server == name && matches!(slot, Slot::Failed { .. })));
    }

    /// Stops every server (the daemon stops), and every start under way.
    pub fn stop_all(&self) {
        let slots: Vec<Slot> = lock(&self.slots).drain().map(|(_, s)| s).collect();
        for slot in slots {
            match slot {
                Slot::Running(connection) => connection.kill(),
                Slot::Starting { cancel, .. } => cancel.cancel(),
                Slot::Failed { .. } => {}
            }
        }
    }
}

/// When a run waiting `wait` for `config`'s server, starting `since`, goes on without it.
fn deadline(since: Instant, config: &ServerConfig, wait: Duration) -> Option<Instant> {
    (wait < config.timeout()).then(|| since + wait)
}

/// Starts the server (the slot `key`, start `id`), records how that ended in its slot unless a
/// newer start or the daemon's stop replaced it, and tells the runs waiting.
#[allow(clippy::too_many_arguments)]
async fn start(
    slots: Slots,
    key: (String, String),
    id: u64,
    config: ServerConfig,
    root: PathBuf,
    idle: Duration,
    cancel: CancellationToken,
    tx: watch::Sender<Option<Started>>,
) {
    let name = config.name.clone();
    let started = tokio::select! {
        _ = cancel.cancelled() => return,
        started = Connection::start(config.clone(), &root) => started,
    };
    let mut slots = lock(&slots);
    let current =
        matches!(slots.get(&key), Some(Slot::Starting { id: current, .. }) if *current == id);
    let outcome = match started {
        Ok(connection) => {
            let connection = Arc::new(connection);
            if !current {
                connection.kill();
                return;
            }
            tracing::info!(server = %name, project = %key.0, tools = connection.tools().len(), "MCP server started");
            watch_idle(Arc::downgrade(&connection), idle);
            slots.insert(key, Slot::Running(connection.clone()));
            Ok(connection)
        }
        Err(error) => {
            if !current {
                return;
            }
            tracing::warn!(server = %name, project = %key.0, %error, "MCP server did not start");
            let failure = Failure { id, error };
            slots.insert(
                key,
                Slot::Failed {
                    config,
                    failure: failure.clone(),
                },
            );
            Err(failure)
        }
    };
    drop(slots);
    let _ = tx.send(Some(outcome));
}

/// Stops the connection once no run used it for `idle`.
fn watch_idle(connection: Weak<Connection>, idle: Duration) {
    let tick = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(tick).await;
            let Some(connection) = connection.upgrade() else {
                return;
            };
            if connection.is_stopped() {
                return;
            }
            // Decided under the usage lock, which a run takes to hold the connection: a run
            // holds it before this looks, or finds it stopped.
            let stop = {
                let usage = lock(&connection.usage);
                let stop = usage.runs == 0 && usage.since.elapsed() >= idle;
                if stop {
                    connection.mark_stopped();
                }
                stop
            };
            if stop {
                tracing::info!(server = %connection.name(), idle_secs = idle.as_secs(), "stopping an idle MCP server");
                connection.kill();
                return;
            }
        }
    });
}

/// The servers a run uses, held until it ends: they do not count as idle meanwhile. A server
/// that answers after the run began joins it (see [`RunLease::downgrade`]).
pub struct RunLease(Arc<Held>);

/// What a lease holds; let go when the last handle to it goes.
#[derive(Default)]
pub struct Held(Mutex<Vec<Arc<Connection>>>);

impl RunLease {
    /// A lease holding nothing yet.
    pub fn new() -> RunLease {
        RunLease(Arc::new(Held::default()))
    }

    /// Holds `connection` until the lease ends, unless it stopped already; whether it is held.
    pub fn hold(&self, connection: &Arc<Connection>) -> bool {
        self.0.hold(connection)
    }

    /// A handle that holds servers joining later, for as long as the run still goes.
    pub fn downgrade(&self) -> Weak<Held> {
        Arc::downgrade(&self.0)
    }
}

impl Default for RunLease {
    fn default() -> Self {
        RunLease::new()
    }
}

impl Held {
    /// See [`RunLease::hold`].
    pub fn hold(&self, connection: &Arc<Connection>) -> bool {
        let mut held = lock(&self.0);
        if held.iter().any(|c| Arc::ptr_eq(c, connection)) {
            return true;
        }
        {
            let mut usage = lock(&connection.usage);
            if connection.is_stopped() {
                return false;
            }
            usage.runs += 1;
        }
        held.push(connection.clone());
        true
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        for connection in lock(&self.0).iter() {
            let mut usage = lock(&connection.usage);
            usage.runs = usage.runs.saturating_sub(1);
            usage.since = Instant::now();
        }
    }
}
