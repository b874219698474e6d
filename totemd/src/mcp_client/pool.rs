//! One instance of each server per project, shared by the project's sessions: a session that
//! may use a server (the user allowed it there) gets the running instance, or starts it. An
//! instance no run used for the idle time (`mcpServerIdleSecs`, 10 minutes by default) stops; the
//! next run that wants it starts it again.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::client::Connection;
use super::server_config::ServerConfig;
use crate::util::lock;

/// How long a server no run uses keeps running unless `mcpServerIdleSecs` says otherwise.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(600);

/// A slot per (project, server name): held while the server starts, so two sessions wanting it
/// at once start it once.
type Slot = Arc<tokio::sync::Mutex<Option<Arc<Connection>>>>;

/// The running servers of every project.
#[derive(Default)]
pub struct Pool {
    slots: Mutex<HashMap<(String, String), Slot>>,
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
    /// The running instance of `config` in `project` (`root` is its folder), started when there
    /// is none, it stopped, or its configuration changed. It stops after `idle` without a run.
    pub async fn get_or_start(
        &self,
        project: &str,
        config: &ServerConfig,
        root: &Path,
        idle: Duration,
    ) -> Result<Arc<Connection>, String> {
        let slot = lock(&self.slots)
            .entry((project.to_string(), config.name.clone()))
            .or_default()
            .clone();
        let mut slot = slot.lock().await;
        if let Some(running) = slot.as_ref()
            && !running.is_stopped()
            && running.config == *config
        {
            return Ok(running.clone());
        }
        if let Some(old) = slot.take() {
            old.kill();
        }
        let connection = Arc::new(Connection::start(config.clone(), root).await?);
        tracing::info!(server = %config.name, project, tools = connection.tools().len(), "MCP server started");
        watch_idle(Arc::downgrade(&connection), idle);
        *slot = Some(connection.clone());
        Ok(connection)
    }

    /// Stops every server (the daemon stops).
    pub fn stop_all(&self) {
        let slots: Vec<Slot> = lock(&self.slots).drain().map(|(_, s)| s).collect();
        for slot in slots {
            if let Ok(mut slot) = slot.try_lock()
                && let Some(connection) = slot.take()
            {
                connection.kill();
            }
        }
    }
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
            let idle_for = {
                let usage = lock(&connection.usage);
                if usage.runs > 0 {
                    Duration::ZERO
                } else {
                    usage.since.elapsed()
                }
            };
            if idle_for >= idle {
                tracing::info!(server = %connection.name(), idle_secs = idle.as_secs(), "stopping an idle MCP server");
                connection.kill();
                return;
            }
        }
    });
}

/// The servers a run uses, held until it ends: they do not count as idle meanwhile.
pub struct RunLease(Vec<Arc<Connection>>);

impl RunLease {
    /// Holds `connections` until the lease is dropped.
    pub fn new(connections: Vec<Arc<Connection>>) -> RunLease {
        for connection in &connections {
            lock(&connection.usage).runs += 1;
        }
        RunLease(connections)
    }
}

impl Drop for RunLease {
    fn drop(&mut self) {
        for connection in &self.0 {
            let mut usage = lock(&connection.usage);
            usage.runs = usage.runs.saturating_sub(1);
            usage.since = Instant::now();
        }
    }
}
