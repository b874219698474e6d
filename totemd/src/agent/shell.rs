//! `session.shell` and `job.list`: what a person at a client does beside the model.
//!
//! `session.shell` runs the user's own command (the REPL's `!command`) through the `bash` tool
//! itself — its process group, timeout and output cap — after the same permission check a run in
//! build mode makes: allowed, denied, or asked across the session's clients and remembered as any
//! answer is. Nothing is stored in the session; the client decides what the model sees.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use totem_permission::{Access, AccessKind, Decision};
use totem_protocol::{JobInfo, JobList, PermissionQuestion, SessionShellParams, ShellResult};
use totem_tools::Registry;
use totem_tools::job::JobStatus;

use super::{BUILD, DaemonError, SessionAgent, lock};
use crate::daemon::Daemon;
use crate::util::{new_id, now_ms};

/// Runs `p.command` in the session's project folder if the permission rules allow it.
pub async fn shell(
    daemon: &Arc<Daemon>,
    p: SessionShellParams,
) -> Result<ShellResult, DaemonError> {
    let command = p.command.trim().to_string();
    if command.is_empty() {
        return Err(DaemonError::Invalid(
            "the command is empty: type one after `!`".into(),
        ));
    }
    let agent = daemon.agents.session(daemon, &p.session_id)?;
    let settings = super::settings::load(daemon).map_err(DaemonError::Invalid)?;
    let policy = settings.policy(BUILD, &[]).map_err(DaemonError::Invalid)?;
    // Cancelled when the caller goes away, so a question nobody waits for is withdrawn.
    let cancel = CancellationToken::new();
    let _guard = cancel.clone().drop_guard();
    let ctx = totem_tools::ToolContext::new(&agent.root)
        .map_err(|e| {
            DaemonError::Invalid(format!(
                "cannot open the project folder {}: {e}",
                agent.root.display()
            ))
        })?
        .with_cancel(cancel.clone())
        .with_jobs(agent.jobs.clone())
        .with_shell(super::confine::base_spec(policy.environment()));
    let mut arguments = serde_json::json!({ "command": command });
    if let Some(secs) = p.timeout_secs {
        arguments["timeout"] = secs.into();
    }
    let prepared = Registry::builtin()
        .prepare("bash", arguments, &ctx, false)
        .map_err(|e| DaemonError::Invalid(e.to_string()))?;

    let access = Access::new(AccessKind::Execute, "bash", command.clone());
    let verdict = {
        let state = lock(&agent.permissions);
        policy.evaluate(&access, &state)
    };
    match verdict.decision {
        Decision::Allow => {}
        Decision::Deny => {
            return Ok(refused(format!(
                "permission denied ({})",
                verdict.explain()
            )));
        }
        Decision::Ask => {
            if let Some(refusal) = ask(daemon, &agent, &access, verdict, &cancel).await? {
                return Ok(refused(refusal));
            }
        }
    }
    let output = prepared.run(&ctx).await;
    Ok(ShellResult {
        ran: true,
        output: output.text,
        exit_code: output.meta.exit_code,
        timed_out: output.meta.timed_out,
        truncated: output.meta.truncated,
    })
}

/// Asks the session's clients; `Some(reason)` when the answer was no.
async fn ask(
    daemon: &Arc<Daemon>,
    agent: &SessionAgent,
    access: &Access,
    verdict: totem_permission::Verdict,
    cancel: &CancellationToken,
) -> Result<Option<String>, DaemonError> {
    let live = daemon.sessions.get(&agent.session_id)?;
    let id = new_id("shell");
    let question = PermissionQuestion {
        id: new_id("perm"),
        session_id: agent.session_id.clone(),
        // Not a run's call: the user's own command.
        run_id: id.clone(),
        call_id: id,
        tool: access.tool.clone(),
        kind: totem_protocol::QuestionKind::Execute,
        target: access.target.clone(),
        explanation: verdict.explain(),
        always: serde_json::to_value(verdict.always_rules()).unwrap_or(serde_json::Value::Null),
        asked_at: now_ms(),
        diff: None,
        truncated: false,
        subcommand: super::ask::subcommand(access, &verdict),
    };
    Ok(
        match agent.ask(daemon, &live, question, verdict, cancel).await? {
            Some(answer) if answer.allowed => None,
            Some(answer) => {
                let mut text = format!("permission denied: `{}` was not run", access.target);
                if let Some(note) = answer.note.filter(|n| !n.trim().is_empty()) {
                    text.push_str(&format!(" ({})", note.trim()));
                }
                Some(text)
            }
            None => Some("cancelled before the command ran".into()),
        },
    )
}

fn refused(output: String) -> ShellResult {
    ShellResult {
        ran: false,
        output,
        exit_code: None,
        timed_out: false,
        truncated: false,
    }
}

/// `job.list`: the session's background jobs, oldest first.
pub fn jobs(agent: &SessionAgent) -> JobList {
    let jobs = agent
        .jobs
        .list()
        .into_iter()
        .map(|job| {
            let (running, ended, exit_code) = match job.status {
                JobStatus::Running => (true, None, None),
                JobStatus::Ended { code, how } => (false, Some(how), code),
            };
            JobInfo {
                id: job.id,
                command: job.command,
                running,
                ended,
                exit_code,
                elapsed_ms: u64::try_from(job.elapsed.as_millis()).unwrap_or(u64::MAX),
            }
        })
        .collect();
    JobList { jobs }
}
