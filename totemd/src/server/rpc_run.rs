//! Handlers of the methods that follow a run to its end — `run.get`, `run.wait`, `session.ask`
//! (what other agents call through Totem's MCP server) — and of `mcpToken.rotate`.

use std::sync::Arc;
use std::time::Duration;

use jsonrpsee::core::server::RpcModule;
use jsonrpsee::types::ErrorObjectOwned;
use tokio::sync::broadcast::error::RecvError;
use totem_protocol::{
    ErrorCode, EventKind, NoParams, Part, PermissionQuestion, Role, Run, RunOutcome, RunRef,
    RunStatus, RunWaitParams, SessionAskParams, SessionPromptParams, method,
};

use super::rpc::{err, register};
use crate::daemon::Daemon;
use crate::session::Subscription;

type RpcResult<T> = Result<T, ErrorObjectOwned>;

use totem_protocol::{DEFAULT_WAIT_MS, MAX_WAIT_MS};

pub(super) fn register_all(m: &mut RpcModule<Daemon>) {
    register::<method::RunGet, _, _>(m, |p: RunRef, d, _| async move {
        let run = find_run(&d, &p.run_id)?;
        outcome(&d, run)
    });

    register::<method::RunWait, _, _>(m, |p: RunWaitParams, d, _| async move {
        let run = find_run(&d, &p.run_id)?;
        if run.status != RunStatus::Running {
            return outcome(&d, run);
        }
        let live = d.sessions.get(&run.session_id)?;
        let after = d.sessions.snapshot(&run.session_id)?.last_seq;
        let subscription = live.subscribe(d.store(), after)?;
        wait(&d, &p.run_id, subscription, p.timeout_ms).await
    });

    register::<method::SessionAsk, _, _>(m, |p: SessionAskParams, d, _| async move {
        if p.text.trim().is_empty() {
            return Err(err(
                ErrorCode::INVALID_PARAMS,
                "the prompt is empty; say what you want done",
            ));
        }
        // Subscribed before the prompt, so the run's end cannot slip past.
        let live = d.sessions.get(&p.session_id)?;
        let after = d.sessions.snapshot(&p.session_id)?.last_seq;
        let subscription = live.subscribe(d.store(), after)?;
        // What the user pre-approved for runs other agents start; the caller cannot add to it.
        let allow = d
            .settings
            .current()
            .mcp_server
            .as_ref()
            .map(|mcp| mcp.allow.clone())
            .unwrap_or_default();
        // Another agent is waiting: the run does not stop to ask about starting MCP servers.
        let accepted = crate::agent::prompt_as(
            &d,
            SessionPromptParams {
                session_id: p.session_id,
                text: p.text,
                mode: p.mode,
                model: p.model,
                reasoning: p.reasoning,
                allow,
                attachments: p.attachments,
            },
            false,
        )?;
        wait(&d, &accepted.run_id, subscription, p.timeout_ms).await
    });

    register::<method::McpTokenRotate, _, _>(m, |_: NoParams, d, _| async move {
        super::mcp_http::rotate_token(&d).map_err(|e| err(ErrorCode::INTERNAL_ERROR, e.to_string()))
    });

    register::<method::WebOpen, _, _>(m, |_: NoParams, d, _| async move {
        super::web::open(d)
            .await
            .map_err(|e| err(ErrorCode::INTERNAL_ERROR, e))
    });
}

fn find_run(d: &Daemon, run_id: &str) -> RpcResult<Run> {
    let run = d.store().get_run(run_id)?.ok_or_else(|| {
        err(
            ErrorCode::NOT_FOUND,
            format!("no run {run_id}; a run id comes from session.ask or session.prompt"),
        )
    })?;
    // A run that ended while the disk was full: its end is not stored yet, but it ended.
    if run.status == RunStatus::Running
        && let Some(ended) = d.sessions.unstored_end(&run.session_id, run_id)
    {
        return Ok(ended);
    }
    Ok(run)
}

/// Follows the session's events until run `run_id` ends, stops on a permission question, or the
/// wait is over, then answers with the run as stored (and the questions it waits on), so that a
/// caller who cannot answer a question learns of it at once instead of after the whole wait.
async fn wait(
    d: &Arc<Daemon>,
    run_id: &str,
    subscription: Subscription,
    timeout_ms: Option<u64>,
) -> RpcResult<RunOutcome> {
    let timeout = Duration::from_millis(timeout_ms.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_MS));
    let ended = |kind: &EventKind| match kind {
        EventKind::PermissionAsked { question } => question.run_id == run_id,
        EventKind::SessionDeleted {} => true,
        _ => kind.ended_run().is_some_and(|run| run.id == run_id),
    };
    let mut live = subscription.live;
    // An end before the subscription began is in the replay or already in the store.
    let run = find_run(d, run_id)?;
    let ended_before = subscription.replay.iter().any(|e| ended(&e.kind))
        || run.status != RunStatus::Running
        || !questions_of(d, &run).is_empty();
    if !ended_before {
        let _ = tokio::time::timeout(timeout, async {
            loop {
                match live.recv().await {
                    Ok(event) if ended(&event.kind) => return,
                    Ok(_) => {}
                    // Fell behind: the store says whether the run ended meanwhile.
                    Err(RecvError::Lagged(_)) => {
                        if find_run(d, run_id).is_ok_and(|r| r.status != RunStatus::Running) {
                            return;
                        }
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        })
        .await;
    }
    let run = find_run(d, run_id)?;
    outcome(d, run)
}

/// The permission questions the run waits on now.
fn questions_of(d: &Arc<Daemon>, run: &Run) -> Vec<PermissionQuestion> {
    match d.agents.session(d, &run.session_id) {
        Ok(agent) => agent
            .pending_questions()
            .into_iter()
            .filter(|q| q.run_id == run.id)
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The run with its last answer's text and the questions it waits on.
fn outcome(d: &Arc<Daemon>, run: Run) -> RpcResult<RunOutcome> {
    let (text, questions) = if run.status == RunStatus::Running {
        (None, questions_of(d, &run))
    } else {
        (last_answer(d, &run)?, Vec::new())
    };
    Ok(RunOutcome {
        run,
        text,
        questions,
    })
}

/// The text of the run's last assistant message that has any.
fn last_answer(d: &Daemon, run: &Run) -> RpcResult<Option<String>> {
    let (messages, _) = d.store().messages_after(&run.session_id, 0, usize::MAX)?;
    Ok(messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::Assistant && m.run_id.as_deref() == Some(run.id.as_str()))
        .find_map(|m| {
            let text: String = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            (!text.trim().is_empty()).then_some(text)
        }))
}
