//! Interactive terminals: programs on a pseudo-terminal that the daemon owns, for the model (the
//! `terminal` tool) and for every client (`terminal.*` methods, `totem attach --terminal`).
//!
//! - [`term`]: one terminal — the program, its screen (a `vt100` emulator with capped
//!   scrollback), the recent output for watchers, input that never blocks the daemon;
//! - [`procs`]: ending a terminal's whole session, and what a crashed daemon left behind;
//! - [`watch`]: a watcher's stream of output, batched and rate-limited, redrawn when it fell behind;
//! - [`tool`]: the model's `terminal` tool.
//!
//! A terminal belongs to a session and outlives runs and clients, not its session (deleting the
//! session closes it) or the daemon (stopping closes it; after a crash the next daemon ends it).
//! One nobody used for the idle time (no output, no input, no watcher) is closed.

pub mod procs;
pub mod term;
pub(crate) mod tool;
pub mod watch;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::util::lock;
use serde::{Deserialize, Serialize};

pub use term::{OpenedBy, Status, TermError, Terminal};

/// Terminals running at once in one session.
const MAX_PER_SESSION: usize = 8;
/// Terminals kept at once in the whole daemon, ended ones included.
const MAX_TOTAL: usize = 64;
/// Ended terminals kept per session (oldest forgotten first).
const KEEP_ENDED: usize = 8;

/// `terminals` in settings.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalSettings {
    /// A terminal without output, input or watchers for this long is closed (default 3600 s).
    #[serde(default = "default_idle")]
    pub idle_timeout_secs: u64,
    /// Lines of scrollback kept per terminal (default 1000, at most 100000).
    #[serde(default = "default_scrollback")]
    pub scrollback_lines: usize,
}

fn default_idle() -> u64 {
    3600
}

fn default_scrollback() -> usize {
    1000
}

impl Default for TerminalSettings {
    fn default() -> Self {
        Self {
            idle_timeout_secs: default_idle(),
            scrollback_lines: default_scrollback(),
        }
    }
}

impl TerminalSettings {
    /// The section as configured (the defaults when absent), within its limits.
    pub fn within_limits(configured: Option<&TerminalSettings>) -> Self {
        let mut s = configured.copied().unwrap_or_default();
        s.scrollback_lines = s.scrollback_lines.min(100_000);
        s.idle_timeout_secs = s.idle_timeout_secs.max(1);
        s
    }
}

/// What a new terminal is.
pub struct OpenRequest<'a> {
    /// The session the terminal belongs to.
    pub session_id: &'a str,
    /// The command line it runs.
    pub command: &'a str,
    /// The folder the command starts in.
    pub cwd: &'a Path,
    /// Width, columns.
    pub cols: u16,
    /// Height, rows.
    pub rows: u16,
    /// The model (the `terminal` tool) or the user (`terminal.open`).
    pub opened_by: OpenedBy,
    /// A user's terminal the model may see from the start (`terminal.open {shared: true}`).
    pub shared: bool,
    /// Limits from settings (scrollback, idle timeout, …).
    pub settings: TerminalSettings,
    /// The environment (`permission.environment`), as commands get it.
    pub env: &'a totem_tools::ShellSpec,
}

/// Every terminal of the daemon.
pub struct Terminals {
    list: Mutex<Vec<Arc<Terminal>>>,
    /// The last number given to a terminal of each session (`t1`, `t2`, …).
    numbers: Mutex<HashMap<String, u64>>,
    records: procs::RecordFile,
}

impl Terminals {
    /// The daemon's terminals, after ending whatever a previous daemon left running.
    pub fn new(home: &Path) -> Self {
        let records = procs::RecordFile::new(home);
        let ended = records.end_leftovers();
        if ended > 0 {
            tracing::info!(
                ended,
                "ended terminal programs a previous daemon left running"
            );
        }
        Self {
            list: Mutex::new(Vec::new()),
            numbers: Mutex::new(HashMap::new()),
            records,
        }
    }

    fn record(&self) {
        let records: Vec<procs::Record> = lock(&self.list)
            .iter()
            .filter(|t| !t.is_closed())
            .map(|t| procs::Record::of(t.pid))
            .collect();
        self.records.write(&records);
    }

    /// Starts a program on a new terminal. Needs the tokio runtime.
    pub fn open(self: &Arc<Self>, req: OpenRequest<'_>) -> Result<Arc<Terminal>, TermError> {
        let command = req.command.trim();
        if command.is_empty() {
            return Err(TermError::Invalid(
                "the command is empty; say which program to start".into(),
            ));
        }
        let (cols, rows) = term::check_size(req.cols, req.rows)?;
        {
            let mut list = lock(&self.list);
            let running = list
                .iter()
                .filter(|t| t.session_id == req.session_id && t.is_running())
                .count();
            if running >= MAX_PER_SESSION {
                return Err(TermError::Conflict(format!(
                    "{running} terminals already run in this session; close one first"
                )));
            }
            // Forget the oldest ended terminals of the session beyond the few kept.
            let ended: Vec<String> = list
                .iter()
                .filter(|t| t.session_id == req.session_id && !t.is_running())
                .map(|t| t.id.clone())
                .collect();
            if ended.len() >= KEEP_ENDED {
                let drop: Vec<&String> = ended.iter().take(ended.len() + 1 - KEEP_ENDED).collect();
                list.retain(|t| !drop.contains(&&t.id));
            }
            if list.len() >= MAX_TOTAL {
                return Err(TermError::Conflict(format!(
                    "the daemon holds {} terminals; close some first",
                    list.len()
                )));
            }
        }
        let number = {
            let mut numbers = lock(&self.numbers);
            let n = numbers.entry(req.session_id.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        let terminal = Terminal::spawn(term::Spawn {
            id: crate::util::new_id("term"),
            session_id: req.session_id.to_string(),
            name: format!("t{number}"),
            command,
            cwd: req.cwd,
            cols,
            rows,
            scrollback: req.settings.scrollback_lines,
            opened_by: req.opened_by,
            shared: req.shared,
            env: req.env,
        })?;
        lock(&self.list).push(terminal.clone());
        self.record();
        tracing::info!(terminal = %terminal.id, pid = terminal.pid, command, "terminal opened");
        let idle = Duration::from_secs(req.settings.idle_timeout_secs);
        let manager = Arc::downgrade(self);
        let weak = Arc::downgrade(&terminal);
        tokio::spawn(async move { close_when_idle(manager, weak, idle).await });
        Ok(terminal)
    }

    /// The terminal with this id (`term_…`).
    pub fn get(&self, id: &str) -> Result<Arc<Terminal>, TermError> {
        lock(&self.list)
            .iter()
            .find(|t| t.id == id)
            .cloned()
            .ok_or_else(|| {
                TermError::NotFound(format!(
                    "no terminal {id}; `terminal.list` shows the open ones"
                ))
            })
    }

    /// The session's terminal called `name` (`t1`) or with that id.
    pub fn find(&self, session_id: &str, name: &str) -> Option<Arc<Terminal>> {
        let name = name.trim();
        lock(&self.list)
            .iter()
            .find(|t| t.session_id == session_id && (t.name == name || t.id == name))
            .cloned()
    }

    /// The session's terminal called `name` (`t1`) or with that id, when its model may see it: one
    /// the model started, or a user's the user shared. A user's terminal is otherwise not there.
    pub fn find_for_model(&self, session_id: &str, name: &str) -> Option<Arc<Terminal>> {
        self.find(session_id, name).filter(|t| t.model_sees())
    }

    /// The session's terminals its model may see, oldest first (see [`Terminals::find_for_model`]).
    pub fn list_for_model(&self, session_id: &str) -> Vec<Arc<Terminal>> {
        self.list(Some(session_id))
            .into_iter()
            .filter(|t| t.model_sees())
            .collect()
    }

    /// Every terminal, oldest first, optionally of one session.
    pub fn list(&self, session_id: Option<&str>) -> Vec<Arc<Terminal>> {
        lock(&self.list)
            .iter()
            .filter(|t| session_id.is_none_or(|s| t.session_id == s))
            .cloned()
            .collect()
    }

    /// Closes a terminal for `reason` and forgets it. Blocking for up to a third of a second.
    pub fn close(&self, terminal: &Arc<Terminal>, reason: &str) {
        lock(&self.list).retain(|t| t.id != terminal.id);
        terminal.close(reason);
        self.record();
        tracing::info!(terminal = %terminal.id, reason, "terminal closed");
    }

    /// Closes every terminal of a session (it was deleted).
    pub fn close_session(&self, session_id: &str) {
        for terminal in self.list(Some(session_id)) {
            self.close(&terminal, "sessionDeleted");
        }
    }

    /// Closes every terminal (the daemon is stopping).
    pub fn close_all(&self) {
        for terminal in self.list(None) {
            self.close(&terminal, "shutdown");
        }
    }
}

/// Closes the terminal once it was idle for `idle`: no output, no input, nobody watching.
async fn close_when_idle(
    manager: std::sync::Weak<Terminals>,
    terminal: std::sync::Weak<Terminal>,
    idle: Duration,
) {
    loop {
        let wait = {
            let Some(t) = terminal.upgrade() else {
                return;
            };
            let state = t.state();
            if state.closed.is_some() {
                return;
            }
            let quiet = state.last_activity.elapsed();
            let watched = t.watchers.load(std::sync::atomic::Ordering::Relaxed) > 0;
            if quiet >= idle && !watched {
                None
            } else if watched {
                Some(idle)
            } else {
                Some(idle - quiet)
            }
        };
        match wait {
            Some(wait) => tokio::time::sleep(wait.max(Duration::from_millis(50))).await,
            None => {
                let (Some(manager), Some(t)) = (manager.upgrade(), terminal.upgrade()) else {
                    return;
                };
                let _ = tokio::task::spawn_blocking(move || manager.close(&t, "idle")).await;
                return;
            }
        }
    }
}
