//! Totem's tools: what the model can do to a project, and the guard rails around it.
//!
//! - [`tool`]: the `Tool` trait, one file per tool, what a call asks permission for and returns;
//! - [`registry`]: the tools on offer, their definitions, and the one `READ_ONLY` list;
//! - [`boundary`]: the project root as a hard limit for every path;
//! - [`recover`]: repairs for the tool calls small models get wrong;
//! - [`context`]: what a call runs with (cancellation, blob and event sinks, jobs);
//! - [`job`]: background commands that outlive a run but not the session.
//!
//! The daemon calls [`Registry::prepare`], asks permission for the returned plan, snapshots the
//! files it names, then runs the call.

#![deny(missing_docs)]

pub mod boundary;
pub mod context;
mod fsutil;
pub mod job;
mod process;
pub mod recover;
pub mod registry;
pub mod schema;
pub mod tool;

pub use boundary::{Boundary, BoundaryError, Resolved};
pub use context::{BlobSink, EventSink, MemoryBlobs, MemoryEvents, ToolContext, ToolEvent};
pub use fsutil::{set_temp_dir, small_project_files};
pub use job::JobManager;
pub use process::ShellSpec;
pub use registry::{READ_ONLY, Registry};
pub use tool::{
    Access, AccessKind, DynTool, FileChange, Plan, PreparedCall, Tool, ToolDefinition, ToolError,
    ToolMeta, ToolOutput,
};

/// Lines of context shown around changed lines, and the most lines shown.
const CHANGE_CONTEXT: usize = 1;
const CHANGE_SHOWN: usize = 12;

/// ". Now:" and the lines `first..=last` (1-based) of `content` with a line of context each side,
/// numbered as `read` numbers them (at most 12): what a model is shown of a change it made.
pub fn lines_now(content: &str, first: usize, last: usize) -> String {
    let first = first.saturating_sub(CHANGE_CONTEXT).max(1);
    let last = last.max(first) + CHANGE_CONTEXT;
    let mut shown = String::from(". Now:\n");
    let mut cut = false;
    for (no, text) in content.lines().enumerate().map(|(i, t)| (i + 1, t)) {
        if no < first || no > last {
            continue;
        }
        if no >= first + CHANGE_SHOWN {
            cut = true;
            break;
        }
        shown.push_str(&format!("{no:>5}\t{text}\n"));
    }
    if cut {
        shown.push_str("  (more lines follow)\n");
    }
    shown.trim_end().to_string()
}
