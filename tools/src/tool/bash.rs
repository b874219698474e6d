//! `bash`: run a shell command in the project root.
//!
//! The command leads its own process group; on timeout or cancellation the whole group is killed,
//! grandchildren included. When the command itself returns, whatever it left running in the
//! background is killed too — long-lived processes belong in `job`. Output beyond `MAX_TEXT` bytes
//! is cut to its head and tail for the model; the full output goes to the blob sink.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::ToolContext;
use crate::process::{self, OutputBuf, SharedOutput};
use crate::tool::{Access, Plan, Tool, ToolError, ToolMeta, ToolOutput};

/// Seconds a command may run when the model gives no timeout.
pub const DEFAULT_TIMEOUT: u64 = 120;
/// The longest timeout a model may ask for, in seconds.
pub const MAX_TIMEOUT: u64 = 600;
/// Bytes of output the model sees.
pub const MAX_TEXT: usize = 30_000;
/// Bytes of output kept in memory (and in the blob).
const KEEP: usize = 16 << 20;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
/// Arguments of `bash`.
// Doc comments here become the tool schema the model reads with every request: a field whose
// name says it all stays bare, to keep that schema short for small windows.
#[allow(missing_docs)]
pub struct BashInput {
    pub command: String,
    /// Seconds (default 120)
    pub timeout: Option<u64>,
}

/// The `bash` tool.
pub struct Bash;

impl Tool for Bash {
    const NAME: &'static str = "bash";
    const DESCRIPTION: &'static str = "Run a shell command in the project root (timeout 120 s, output capped). For servers or long tasks use job.";
    type Input = BashInput;

    fn plan(&self, input: &BashInput, _ctx: &ToolContext) -> Result<Plan, ToolError> {
        if input.command.trim().is_empty() {
            return Err(ToolError::Failed("command is empty".to_string()));
        }
        Ok(Plan {
            access: vec![Access::execute(Self::NAME, input.command.trim())],
            ..Plan::default()
        })
    }

    async fn run(&self, input: BashInput, ctx: &ToolContext) -> ToolOutput {
        let timeout = seconds(input.timeout);
        run_command(&input.command, Duration::from_secs(timeout), ctx).await
    }
}

/// The timeout in seconds. Models used to other agents send milliseconds (`120000`); no one means
/// a timeout of more than a day, so large values are read as milliseconds.
fn seconds(timeout: Option<u64>) -> u64 {
    let t = timeout.unwrap_or(DEFAULT_TIMEOUT);
    let t = if t > 86_400 { t / 1000 } else { t };
    t.clamp(1, MAX_TIMEOUT)
}

enum Ending {
    Exited(std::io::Result<std::process::ExitStatus>),
    TimedOut,
    Cancelled,
}

async fn run_command(command: &str, timeout: Duration, ctx: &ToolContext) -> ToolOutput {
    if ctx.cancel.is_cancelled() {
        return ToolOutput::error("cancelled before the command started");
    }
    let mut child = match process::shell_command(command, ctx.root(), &ctx.shell).spawn() {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(format!("cannot start the shell: {e}")),
    };
    let Some(pid) = child.id() else {
        return ToolOutput::error("the command ended before it started");
    };
    let output: SharedOutput = Arc::new(Mutex::new(OutputBuf::new(KEEP)));
    let pumps = process::collect(&mut child, &output);
    let ending = tokio::select! {
        status = child.wait() => Ending::Exited(status),
        _ = tokio::time::sleep(timeout) => Ending::TimedOut,
        _ = ctx.cancel.cancelled() => Ending::Cancelled,
    };
    // The whole group: on timeout and abort, and after a normal exit for anything left behind.
    if !matches!(ending, Ending::Exited(_)) {
        process::end_running(&mut child, pid).await;
    }
    process::kill_group(pid);
    if !matches!(ending, Ending::Exited(_)) {
        let _ = child.wait().await;
    }
    process::finish(pumps).await;
    let (bytes, total) = match output.lock() {
        Ok(buf) => {
            let (bytes, _) = buf.since(0);
            (bytes.to_vec(), buf.total())
        }
        Err(_) => (Vec::new(), 0),
    };
    let full = process::clean_terminal_text(&String::from_utf8_lossy(&bytes));
    let mut meta = ToolMeta::default();
    let mut text = if full.len() > MAX_TEXT {
        meta.truncated = true;
        meta.blob = Some(ctx.blobs.put(&bytes));
        let head = process::truncate_bytes(&full, MAX_TEXT / 3);
        let tail = process::tail_bytes(&full, MAX_TEXT - MAX_TEXT / 3);
        format!(
            "{head}\n… {} bytes omitted (output was {total} bytes; the full output is kept) …\n{tail}",
            full.len() - head.len() - tail.len()
        )
    } else {
        full
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let is_error = match ending {
        Ending::Exited(Ok(status)) => {
            let (code, how) = process::describe_status(&status);
            meta.exit_code = code;
            if code != Some(0) {
                text.push_str(&format!("[{how}]"));
            } else if text.is_empty() {
                text.push_str("[no output]");
            }
            code != Some(0)
        }
        Ending::Exited(Err(e)) => {
            text.push_str(&format!("[lost the command: {e}]"));
            true
        }
        Ending::TimedOut => {
            meta.timed_out = true;
            text.push_str(&format!(
                "[timed out after {} s; the command and its children were killed. Use job for long tasks]",
                timeout.as_secs()
            ));
            true
        }
        Ending::Cancelled => {
            meta.cancelled = true;
            text.push_str("[cancelled; the command and its children were killed]");
            true
        }
    };
    ToolOutput {
        text,
        is_error,
        meta,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_in_milliseconds_are_read_as_seconds() {
        assert_eq!(seconds(None), 120);
        assert_eq!(seconds(Some(30)), 30);
        assert_eq!(seconds(Some(120_000)), 120);
        assert_eq!(seconds(Some(0)), 1);
        assert_eq!(seconds(Some(5000)), 600);
    }
}
