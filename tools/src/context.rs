//! What a tool call runs with: the project, a cancellation signal, and the daemon's sinks.
//!
//! A `ToolContext` is cheap to clone (everything is shared). The daemon builds one per run — with the
//! run's cancellation token, the session's `JobManager`, a blob store and an event sink — and passes
//! it to every call of that run.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::boundary::{Boundary, BoundaryError, Resolved};
use crate::job::JobManager;
use crate::process::ShellSpec;

/// Stores large outputs (full command output, images) so the model's text can stay short.
pub trait BlobSink: Send + Sync {
    /// Stores `bytes` and returns an id the daemon can resolve later.
    fn put(&self, bytes: &[u8]) -> String;
}

/// Receives what tools report outside their result (the todo list today).
pub trait EventSink: Send + Sync {
    /// Delivers one event; must not block.
    fn emit(&self, event: ToolEvent);
}

/// Something a tool tells the clients while or after it runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ToolEvent {
    /// The model replaced its plan.
    Todos {
        /// The whole new plan, in order.
        todos: Vec<crate::tool::todo::TodoItem>,
    },
}

/// Keeps blobs in memory; for tests and for callers without a store.
#[derive(Debug, Default)]
pub struct MemoryBlobs {
    blobs: Mutex<Vec<Vec<u8>>>,
}

impl MemoryBlobs {
    /// The bytes stored under `id`, if any.
    pub fn get(&self, id: &str) -> Option<Vec<u8>> {
        let index: usize = id.strip_prefix("mem-")?.parse().ok()?;
        self.blobs.lock().ok()?.get(index).cloned()
    }
}

impl BlobSink for MemoryBlobs {
    fn put(&self, bytes: &[u8]) -> String {
        match self.blobs.lock() {
            Ok(mut blobs) => {
                blobs.push(bytes.to_vec());
                format!("mem-{}", blobs.len() - 1)
            }
            Err(_) => "mem-unavailable".to_string(),
        }
    }
}

/// Collects events in memory; for tests.
#[derive(Debug, Default)]
pub struct MemoryEvents {
    events: Mutex<Vec<ToolEvent>>,
}

impl MemoryEvents {
    /// Every event emitted so far.
    pub fn events(&self) -> Vec<ToolEvent> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

impl EventSink for MemoryEvents {
    fn emit(&self, event: ToolEvent) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event);
        }
    }
}

/// Decides which files tools must not read on their own (secret files): `grep` skips them, `list`
/// and `glob` still name them. Reading one through `read` is the permission engine's decision.
pub type SecretFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Everything a tool call needs from its surroundings.
#[derive(Clone)]
pub struct ToolContext {
    boundary: Arc<Boundary>,
    /// Cancelled when the run is aborted; long tools stop and kill what they started.
    pub cancel: CancellationToken,
    /// Where large outputs go.
    pub blobs: Arc<dyn BlobSink>,
    /// The session's background commands.
    pub jobs: JobManager,
    /// Where tool events go.
    pub events: Arc<dyn EventSink>,
    /// Files `grep` must not open (relative path → true to skip).
    pub secret: Option<SecretFilter>,
    /// How `bash` and `job` start their commands (sandbox launcher, environment).
    pub shell: Arc<ShellSpec>,
}

impl ToolContext {
    /// A context for `root` with a fresh cancellation token, in-memory sinks and a new job manager.
    /// Replace the parts the daemon owns with the `with_*` methods.
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Self {
            boundary: Arc::new(Boundary::new(root)?),
            cancel: CancellationToken::new(),
            blobs: Arc::new(MemoryBlobs::default()),
            jobs: JobManager::new(),
            events: Arc::new(MemoryEvents::default()),
            secret: None,
            shell: Arc::new(ShellSpec::default()),
        })
    }

    /// Uses the run's cancellation token.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Uses the daemon's blob store.
    pub fn with_blobs(mut self, blobs: Arc<dyn BlobSink>) -> Self {
        self.blobs = blobs;
        self
    }

    /// Uses the session's job manager (jobs outlive the run).
    pub fn with_jobs(mut self, jobs: JobManager) -> Self {
        self.jobs = jobs;
        self
    }

    /// Sends tool events to the daemon.
    pub fn with_events(mut self, events: Arc<dyn EventSink>) -> Self {
        self.events = events;
        self
    }

    /// Names the files `grep` must not open.
    pub fn with_secret_filter(mut self, secret: SecretFilter) -> Self {
        self.secret = Some(secret);
        self
    }

    /// Starts `bash` and `job` commands as `shell` says.
    pub fn with_shell(mut self, shell: ShellSpec) -> Self {
        self.shell = Arc::new(shell);
        self
    }

    /// The canonical project root.
    pub fn root(&self) -> &Path {
        self.boundary.root()
    }

    /// The project boundary.
    pub fn boundary(&self) -> &Boundary {
        &self.boundary
    }

    /// Resolves a path from the model against the boundary (see [`Boundary::resolve`]).
    pub fn resolve(&self, path: &str) -> Result<Resolved, BoundaryError> {
        self.boundary.resolve(path)
    }

    pub(crate) fn is_secret(&self, rel: &str) -> bool {
        self.secret.as_ref().is_some_and(|f| f(rel))
    }
}
