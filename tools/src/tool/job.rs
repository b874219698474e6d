//! `job`: background commands the model starts, reads, waits for and kills. The jobs belong to the
//! session's [`JobManager`](crate::job::JobManager), so they outlive the run that started them.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::ToolContext;
use crate::job::{JobOutput, JobStatus};
use crate::process;
use crate::tool::{Access, Plan, Tool, ToolError, ToolMeta, ToolOutput};

/// Seconds `wait` waits when the model gives no timeout.
const DEFAULT_WAIT: u64 = 30;
/// Bytes of output one read returns (the newest).
const MAX_TEXT: usize = 20_000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
/// Arguments of `job`.
// Doc comments here become the tool schema the model reads with every request: a field whose
// name says it all stays bare, to keep that schema short for small windows.
#[allow(missing_docs)]
pub struct JobInput {
    pub action: JobAction,
    /// For start
    pub command: Option<String>,
    /// Job id
    pub id: Option<String>,
    /// Seconds to wait (default 30)
    pub timeout: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
/// What `job` should do.
// Docs on these variants would turn the schema's plain enum into a longer oneOf.
#[allow(missing_docs)]
pub enum JobAction {
    Start,
    Output,
    Wait,
    Kill,
    List,
}

/// The `job` tool.
pub struct Job;

impl Tool for Job {
    const NAME: &'static str = "job";
    const DESCRIPTION: &'static str = "Background commands (servers, watchers, long builds): start, output (new output since last read), wait, kill, list.";
    type Input = JobInput;

    fn plan(&self, input: &JobInput, _ctx: &ToolContext) -> Result<Plan, ToolError> {
        let mut plan = Plan::default();
        match input.action {
            JobAction::Start => {
                let command = input.command.as_deref().unwrap_or("").trim();
                if command.is_empty() {
                    return Err(ToolError::Failed("job start needs a command".to_string()));
                }
                plan.access.push(Access::execute(Self::NAME, command));
            }
            JobAction::Output | JobAction::Wait | JobAction::Kill => {
                if input.id.as_deref().unwrap_or("").trim().is_empty() {
                    return Err(ToolError::Failed(
                        "this action needs the job id (see action=list)".to_string(),
                    ));
                }
            }
            JobAction::List => {}
        }
        Ok(plan)
    }

    async fn run(&self, input: JobInput, ctx: &ToolContext) -> ToolOutput {
        let jobs = &ctx.jobs;
        let id = input.id.as_deref().unwrap_or("").trim();
        let unknown = || ToolOutput::error(format!("no job {id:?}; see action=list"));
        match input.action {
            JobAction::Start => {
                let command = input.command.as_deref().unwrap_or("").trim();
                match jobs.start(command, ctx.root(), &ctx.shell) {
                    Ok(id) => ToolOutput::ok(format!(
                        "started job {id}; read it with action=output id={id}"
                    ))
                    .with_meta(ToolMeta {
                        job_id: Some(id),
                        ..ToolMeta::default()
                    }),
                    Err(e) => ToolOutput::error(e),
                }
            }
            JobAction::Output => match jobs.output(id) {
                Some(out) => render(id, out),
                None => unknown(),
            },
            JobAction::Wait => {
                let secs = input.timeout.unwrap_or(DEFAULT_WAIT).clamp(1, 600);
                if jobs
                    .wait(id, Duration::from_secs(secs), &ctx.cancel)
                    .await
                    .is_none()
                {
                    return unknown();
                }
                match jobs.output(id) {
                    Some(out) => render(id, out),
                    None => unknown(),
                }
            }
            JobAction::Kill => match jobs.kill(id).await {
                Some(true) => ToolOutput::ok(format!("killed job {id}")),
                Some(false) => ToolOutput::ok(format!("job {id} had already ended")),
                None => unknown(),
            },
            JobAction::List => {
                let list = jobs.list();
                if list.is_empty() {
                    return ToolOutput::ok("no jobs");
                }
                let text: String = list
                    .iter()
                    .map(|j| {
                        format!(
                            "{} [{}] {}s: {}\n",
                            j.id,
                            status_words(&j.status),
                            j.elapsed.as_secs(),
                            j.command
                        )
                    })
                    .collect();
                ToolOutput::ok(text)
            }
        }
    }
}

fn status_words(status: &JobStatus) -> String {
    match status {
        JobStatus::Running => "running".to_string(),
        JobStatus::Ended { how, .. } => format!("ended, {how}"),
    }
}

fn render(id: &str, out: JobOutput) -> ToolOutput {
    let mut meta = ToolMeta {
        job_id: Some(id.to_string()),
        ..ToolMeta::default()
    };
    let mut text = String::new();
    let mut skipped = out.skipped;
    let body = process::tail_bytes(&out.text, MAX_TEXT);
    if body.len() < out.text.len() {
        skipped += (out.text.len() - body.len()) as u64;
    }
    if skipped > 0 {
        meta.truncated = true;
        text.push_str(&format!("… {skipped} earlier bytes not shown …\n"));
    }
    text.push_str(body);
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if out.text.is_empty() {
        text.push_str("(no new output)\n");
    }
    if let JobStatus::Ended { code, .. } = &out.status {
        meta.exit_code = *code;
    }
    text.push_str(&format!("[job {id}: {}]", status_words(&out.status)));
    ToolOutput::ok(text).with_meta(meta)
}
