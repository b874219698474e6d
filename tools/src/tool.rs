//! The tool framework: the `Tool` trait each tool implements, what a call asks permission for,
//! and what it returns. One file per tool lives under `tool/`.
//!
//! A call goes through two steps so the daemon can stand between them:
//! 1. `prepare` parses (and repairs) the arguments, resolves every path against the boundary and
//!    says what the call will access and which files it will change — nothing has happened yet;
//! 2. `run` does the work. Between the two the daemon asks permission and snapshots the files.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::boundary::{BoundaryError, Resolved};
use crate::context::ToolContext;

pub mod bash;
pub mod edit;
pub mod glob;
pub mod grep;
pub mod job;
pub mod list;
pub mod patch;
pub mod read;
pub mod todo;
pub mod write;

/// A tool the model can call. The input type is the single declaration of its arguments: it is
/// deserialised from the model's call and its JSON Schema is the definition the model sees.
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls.
    const NAME: &'static str;
    /// One or two short sentences for the model.
    const DESCRIPTION: &'static str;
    /// The arguments (serde + schemars, `deny_unknown_fields`, doc comments as descriptions).
    type Input: DeserializeOwned + schemars::JsonSchema + Send + 'static;

    /// What the call needs before it runs: permissions and the files it will change. Resolves every
    /// path against the project boundary; a path outside is an error here, so no question is asked.
    fn plan(&self, input: &Self::Input, ctx: &ToolContext) -> Result<Plan, ToolError>;

    /// Does the work. Paths are resolved again here, right before they are used.
    fn run(&self, input: Self::Input, ctx: &ToolContext)
    -> impl Future<Output = ToolOutput> + Send;
}

/// What kind of access a call needs permission for (tools need `Read`, `Write` and `Execute`).
pub use totem_permission::AccessKind;

/// One thing a call will do that a permission rule may allow, ask about or deny.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Access {
    /// Read, write, execute or an MCP call: which rules decide it.
    pub kind: AccessKind,
    /// The tool asking.
    pub tool: &'static str,
    /// A path relative to the project root (`.` for the root), or the shell command for `Execute`.
    pub target: String,
}

impl Access {
    /// Reading `target` (a relative path).
    pub fn read(tool: &'static str, target: impl Into<String>) -> Self {
        Self {
            kind: AccessKind::Read,
            tool,
            target: target.into(),
        }
    }
    /// Creating, changing or deleting `target` (a relative path).
    pub fn write(tool: &'static str, target: impl Into<String>) -> Self {
        Self {
            kind: AccessKind::Write,
            tool,
            target: target.into(),
        }
    }
    /// Running the shell command `target`.
    pub fn execute(tool: &'static str, target: impl Into<String>) -> Self {
        Self {
            kind: AccessKind::Execute,
            tool,
            target: target.into(),
        }
    }
}

/// What a call declares before it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Everything to ask permission for, in order.
    pub access: Vec<Access>,
    /// Files the call will create, change or delete (snapshot them first). Commands (`bash`, `job`)
    /// cannot say; the daemon scans for their changes instead.
    pub writes: Vec<Resolved>,
    /// The proposed change of each file the call writes, as a unified diff keyed by its relative
    /// path, for the permission question (write, edit, patch; absent when the change cannot be
    /// worked out before it runs — the run then says why).
    pub diffs: std::collections::BTreeMap<String, String>,
    /// The commands run where the daemon's sandbox cannot confine them (an interactive terminal),
    /// so a built-in allow does not cover them: they ask unless a rule of the user allows them.
    pub unconfined: bool,
    /// Programs run on through the call (a terminal's), so files may change that no access
    /// names: the daemon scans the project before and after, as for a command.
    pub programs_run: bool,
}

impl Plan {
    /// The call creates, changes or deletes files it names (the daemon runs the formatter and
    /// checks on them afterwards). Derived from the declared access, so a new tool needs no list.
    pub fn writes_files(&self) -> bool {
        self.access.iter().any(|a| a.kind == AccessKind::Write)
    }

    /// The call runs a shell command.
    pub fn executes(&self) -> bool {
        self.access.iter().any(|a| a.kind == AccessKind::Execute)
    }

    /// The call may change files it does not name (it runs a command, or programs run on
    /// through it): only a scan of the project before and after can find them.
    pub fn changes_unnamed_files(&self) -> bool {
        self.executes() || self.programs_run
    }
}

/// A file a call changed, for snapshots, diffs and clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// Relative to the project root.
    pub path: String,
    /// The file was there before the call (false: the call created it).
    pub existed_before: bool,
    /// The file is there after the call (false: the call deleted it).
    pub exists_after: bool,
}

/// Structured facts about a call's result, beside the text the model reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolMeta {
    /// Files the call changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileChange>,
    /// Unified diff of the change (write, edit, patch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Blob id of the full output when the text was cut, or of an image that was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// MIME type of an image that was read (its bytes are in `blob`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// A command's exit code, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// A command was killed at its timeout.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// The run was stopped while the call ran.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// The text was shortened (caps on lines, matches or bytes).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The job a `job start` began.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

/// The result of a call: text for the model, whether it failed, and metadata for the daemon.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// What the model reads.
    pub text: String,
    /// The call failed; `text` says why.
    pub is_error: bool,
    /// Facts for the daemon and clients.
    pub meta: ToolMeta,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// A failed result; the text tells the model what went wrong.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
            ..Self::default()
        }
    }

    /// Attaches metadata.
    pub fn with_meta(mut self, meta: ToolMeta) -> Self {
        self.meta = meta;
        self
    }
}

impl From<ToolError> for ToolOutput {
    fn from(e: ToolError) -> Self {
        ToolOutput::error(e.to_string())
    }
}

/// Why a call could not be prepared or run. The `Display` text is short and meant for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The model called a tool that does not exist.
    #[error("unknown tool {name:?}. Available tools: {available}")]
    UnknownTool {
        /// The name it called.
        name: String,
        /// The tools it may call, comma-separated.
        available: String,
    },
    /// The tool writes or runs, and the mode is read-only.
    #[error("tool {0} is not available in this mode (read-only); use read, list, glob or grep")]
    NotAllowed(String),
    /// The arguments do not fit the tool's schema.
    #[error("invalid arguments for {tool}: {reason}. Expected {expected}")]
    InvalidArguments {
        /// The tool called.
        tool: String,
        /// What is wrong with them.
        reason: String,
        /// The arguments the tool takes, in short.
        expected: String,
    },
    /// A path leaves the project or cannot be resolved.
    #[error(transparent)]
    Boundary(#[from] BoundaryError),
    /// The call ran and failed; the text says why.
    #[error("{0}")]
    Failed(String),
}

/// The future a prepared call runs.
pub type ToolFuture = Pin<Box<dyn Future<Output = ToolOutput> + Send>>;

/// A call that passed parsing and the boundary, waiting for permission.
pub struct PreparedCall {
    /// The tool's canonical name.
    pub name: String,
    /// The arguments after repair, as they were parsed (store these, not the raw ones).
    pub arguments: serde_json::Value,
    /// What to ask permission for and which files to snapshot.
    pub plan: Plan,
    run: Box<dyn FnOnce(ToolContext) -> ToolFuture + Send>,
}

impl std::fmt::Debug for PreparedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedCall")
            .field("name", &self.name)
            .field("arguments", &self.arguments)
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl PreparedCall {
    /// Builds a prepared call from a closure; for tools that implement [`DynTool`] directly (MCP).
    pub fn new(
        name: impl Into<String>,
        arguments: serde_json::Value,
        plan: Plan,
        run: impl FnOnce(ToolContext) -> ToolFuture + Send + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            arguments,
            plan,
            run: Box::new(run),
        }
    }

    /// Runs the call. Give it the same context it was prepared with.
    pub async fn run(self, ctx: &ToolContext) -> ToolOutput {
        (self.run)(ctx.clone()).await
    }
}

pub use totem_protocol::ToolDefinition;

/// The object-safe face of a tool, held by the registry. Built-in tools get it from [`Tool`] through
/// [`Typed`]; tools defined at run time (MCP) may implement it directly.
pub trait DynTool: Send + Sync {
    /// The name the model calls.
    fn name(&self) -> &str;
    /// The definition the model sees.
    fn definition(&self) -> &ToolDefinition;
    /// Parses already-repaired arguments and plans the call.
    fn prepare(
        &self,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<PreparedCall, ToolError>;
}

/// Adapts a [`Tool`] to [`DynTool`], generating its definition once.
pub struct Typed<T: Tool> {
    tool: Arc<T>,
    definition: ToolDefinition,
}

impl<T: Tool> Typed<T> {
    /// Wraps a tool and generates its definition.
    pub fn new(tool: T) -> Self {
        let definition = ToolDefinition {
            name: T::NAME.to_string(),
            description: T::DESCRIPTION.to_string(),
            parameters: crate::schema::parameters::<T::Input>(),
        };
        Self {
            tool: Arc::new(tool),
            definition,
        }
    }
}

impl<T: Tool> DynTool for Typed<T> {
    fn name(&self) -> &str {
        T::NAME
    }

    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(
        &self,
        arguments: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<PreparedCall, ToolError> {
        let input: T::Input =
            serde_json::from_value(arguments.clone()).map_err(|e| ToolError::InvalidArguments {
                tool: T::NAME.to_string(),
                reason: crate::recover::describe_serde_error(&e),
                expected: crate::schema::signature(&self.definition.parameters),
            })?;
        let plan = self.tool.plan(&input, ctx)?;
        let tool = Arc::clone(&self.tool);
        Ok(PreparedCall::new(T::NAME, arguments, plan, move |ctx| {
            Box::pin(async move { tool.run(input, &ctx).await })
        }))
    }
}
