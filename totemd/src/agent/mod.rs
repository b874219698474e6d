//! The agent: turns a prompt into a run that streams the model's answer, calls tools and loops
//! until the work is done.
//!
//! Each session has one [`SessionAgent`]: its queue of prompts (one run at a time; prompts sent
//! during a run wait their turn), the cancellation token of the run going, its background jobs
//! (they outlive a run, not the session), its remembered permission answers and its pending
//! permission questions.
//!
//! - [`run`]: the run loop — a queued prompt from start to end, step after step;
//! - [`prepare`]: a run's state from settings and session, and each step's request;
//! - [`stream`]: the model's answer as stored parts and live events;
//! - [`usage`]: tokens and cost per answer, run and session;
//! - [`call`]: one tool call — repair, permission, snapshot, run, after-edit checks;
//! - [`ask`]: permission questions across clients;
//! - [`history`]: stored messages as model messages, and compaction summaries;
//! - [`compact`]: compaction before a request that would pass the threshold, mid-run included;
//! - [`system`]: the system prompt and instruction files;
//! - [`command`]: `session.command` (`/compact`, `/init`, custom commands);
//! - [`shell`]: `session.shell` (the user's own commands) and `job.list`;
//! - [`settings`]: what the run reads from settings, and [`settings::provider_for`];
//! - [`mcp`]: the run's side of MCP servers — asking to start them, calling their tools, the
//!   docs search before the first step (the client itself is `crate::mcp_client`).

mod ask;
pub mod attach;
mod blocks;
mod boot;
mod call;
pub mod command;
mod compact;
pub(crate) mod confine;
mod constrained;
mod guide;
mod history;
mod mcp;
mod prepare;
mod repeat;
mod run;
pub mod settings;
pub mod shell;
mod stream;
mod syntax;
pub mod system;
mod title;
mod usage;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use totem_permission::PermissionState;
use totem_protocol::{
    EventKind, Message, Part, PromptAccepted, ReasoningLevel, Role, Run, RunStatus, SessionAborted,
    SessionPromptParams, SessionStatus,
};
use totem_tools::JobManager;

use crate::daemon::Daemon;
use crate::error::DaemonError;

use crate::util::{lock, new_id, now_ms};

pub use ask::Pending;

/// The agents of the sessions that ran something since the daemon started.
#[derive(Default)]
pub struct Agents {
    sessions: Mutex<HashMap<String, Arc<SessionAgent>>>,
    /// Models (`provider/model`) whose server refused a constrained answer (a JSON schema):
    /// asked with plain text tools from then on, until the daemon restarts.
    pub unconstrained: Mutex<std::collections::HashSet<String>>,
    /// Models whose server refused native tool calls (vLLM without `--enable-auto-tool-choice`,
    /// Ollama "does not support tools"): offered tools in text from then on, until the daemon
    /// restarts.
    pub text_tools: Mutex<std::collections::HashSet<String>>,
    /// The MCP servers running for the projects, shared by their sessions.
    pub mcp_pool: crate::mcp_client::pool::Pool,
}

/// What a run is asked to do.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The prompt text the user typed.
    pub text: String,
    /// The agent (mode) to run in, `build`, `plan` or one from settings.
    pub mode: String,
    /// `provider/model` to run with; absent: the session's last model, else the agent's, else the
    /// default.
    pub model: Option<String>,
    /// How hard the model should reason; absent is off.
    pub reasoning: Option<ReasoningLevel>,
    /// Rules granted for this run only (`session.prompt {allow}`).
    pub allow: Vec<String>,
    /// The prompt's attachments, checked, as `attachment` parts.
    pub attachments: Vec<Part>,
    /// Whether the run may stop to ask the user before starting an MCP server. Runs another agent
    /// started (`session.ask`) go on with the servers already allowed, and say which were left out.
    pub ask_to_start_servers: bool,
}

/// A prompt waiting for its run.
struct Queued {
    run: Run,
    /// The prompt, stored with `run.queued`; its `message.created` comes when the run starts.
    message: Message,
    request: RunRequest,
}

#[derive(Default)]
struct RunQueue {
    queue: VecDeque<Queued>,
    /// The run going and its cancellation token.
    current: Option<(String, CancellationToken)>,
    /// A worker task is draining the queue.
    worker: bool,
    /// The model of the last run, used when a prompt names none.
    last_model: Option<String>,
    /// The mode (agent) of the newest prompt: the session's current mode, which a project
    /// command may not widen (see `command::custom`).
    last_mode: Option<String>,
}

/// One session's agent state.
pub struct SessionAgent {
    /// The session this agent runs (`ses_…`).
    pub session_id: String,
    /// The project the session belongs to (`prj_…`).
    pub project_id: String,
    /// The project root, canonical.
    pub root: PathBuf,
    queue: Mutex<RunQueue>,
    /// Background commands of the session; dropped (and killed) with the session's agent.
    pub jobs: JobManager,
    permissions: Mutex<PermissionState>,
    questions: Mutex<Vec<Pending>>,
    /// The last tree scan, so the next one skips unchanged files.
    last_scan: Mutex<Option<totem_snapshot::TreeScan>>,
    /// The MCP servers this session uses.
    pub mcp: crate::mcp_client::SessionServers,
}

impl Agents {
    /// The session's agent, created on first use.
    pub fn session(
        &self,
        daemon: &Daemon,
        session_id: &str,
    ) -> Result<Arc<SessionAgent>, DaemonError> {
        if let Some(agent) = lock(&self.sessions).get(session_id) {
            return Ok(agent.clone());
        }
        let session = daemon.sessions.snapshot(session_id)?;
        let project = daemon
            .store()
            .get_project(&session.project_id)?
            .ok_or_else(|| {
                DaemonError::NotFound(format!("the project of session {session_id} is gone"))
            })?;
        let rules = daemon.store().project_permissions(&project.id)?;
        let mut state: PermissionState = serde_json::from_value(rules)
            .ok()
            .and_then(|rules| PermissionState::with_project_rules(rules).ok())
            .unwrap_or_default();
        // "Always in this session" answers given before a restart.
        let session_rules = daemon.store().session_permissions(session_id)?;
        if let Ok(rules) = serde_json::from_value(session_rules)
            && let Err(e) = state.remember(totem_permission::Scope::Session, &rules)
        {
            tracing::warn!(session = %session_id, error = %e, "stored session answers do not compile");
        }
        let agent = Arc::new(SessionAgent {
            session_id: session_id.to_string(),
            project_id: project.id,
            root: PathBuf::from(project.path),
            queue: Mutex::new(RunQueue::default()),
            jobs: JobManager::new(),
            permissions: Mutex::new(state),
            questions: Mutex::new(Vec::new()),
            last_scan: Mutex::new(None),
            mcp: crate::mcp_client::SessionServers::default(),
        });
        Ok(lock(&self.sessions)
            .entry(session_id.to_string())
            .or_insert(agent)
            .clone())
    }

    /// Forgets a session's agent (after the session was deleted): its jobs are killed, and the
    /// MCP servers no other session uses stop.
    pub fn forget(&self, session_id: &str) {
        let mut sessions = lock(&self.sessions);
        if let Some(agent) = sessions.remove(session_id) {
            agent.abort_all();
            agent.jobs.kill_all();
            for connection in agent.mcp.detach_all() {
                if !sessions.values().any(|a| a.mcp.holds(&connection)) {
                    connection.kill();
                }
            }
        }
    }

    /// Stops every MCP server (the daemon is stopping): their processes are killed.
    pub fn stop_mcp_servers(&self) {
        self.mcp_pool.stop_all();
        for agent in lock(&self.sessions).values() {
            for connection in agent.mcp.detach_all() {
                connection.kill();
            }
        }
    }
}

pub use crate::config::sections::{BUILD, PLAN};

/// `session.prompt`: queues a run for the prompt and starts the session's worker if it is idle.
pub fn prompt(daemon: &Arc<Daemon>, p: SessionPromptParams) -> Result<PromptAccepted, DaemonError> {
    prompt_as(daemon, p, true)
}

/// [`prompt`], saying whether the run may ask to start MCP servers.
pub fn prompt_as(
    daemon: &Arc<Daemon>,
    p: SessionPromptParams,
    ask_to_start_servers: bool,
) -> Result<PromptAccepted, DaemonError> {
    let mode = p.mode.clone().unwrap_or_else(|| BUILD.to_string());
    if mode != BUILD && mode != PLAN {
        let settings = settings::load(daemon).map_err(DaemonError::Invalid)?;
        if !settings.agents.contains_key(&mode) {
            let mut known = vec![BUILD.to_string(), PLAN.to_string()];
            known.extend(settings.agents.keys().cloned());
            return Err(DaemonError::Invalid(format!(
                "no mode `{mode}`; use one of: {}",
                known.join(", ")
            )));
        }
    }
    if let Some(model) = &p.model
        && !model.contains('/')
    {
        return Err(DaemonError::Invalid(format!(
            "`{model}` is not a model name: write provider/model, e.g. ollama/qwen3:8b"
        )));
    }
    if let Err(e) = totem_permission::Rules::from_lists(&p.allow, &[]) {
        return Err(DaemonError::Invalid(format!(
            "{e}; write a rule key (`edit`) or a key with a pattern (`bash(cargo test*)`)"
        )));
    }
    let agent = daemon.agents.session(daemon, &p.session_id)?;
    let attachments = attach::resolve(daemon, &agent.root, &mode, &p.attachments)?;
    let title = title_from_prompt(&p.text);
    let accepted = queue_run(
        daemon,
        &agent,
        RunRequest {
            text: p.text,
            mode,
            model: p.model,
            reasoning: p.reasoning,
            allow: p.allow,
            attachments,
            ask_to_start_servers,
        },
    )?;
    // A session still untitled is named after its first prompt at once (`session.updated`).
    if let Some(title) = title
        && daemon
            .sessions
            .snapshot(&p.session_id)
            .is_ok_and(|s| s.title == crate::session::UNTITLED)
        && let Err(e) = daemon.sessions.rename(&p.session_id, title)
    {
        tracing::warn!(session = %p.session_id, error = %e, "cannot title the session");
    }
    Ok(accepted)
}

/// Longest title taken from a prompt, in characters.
const TITLE_CHARS: usize = 60;

/// A session's title from its first prompt: the first line with words, cut at a word near
/// [`TITLE_CHARS`]. None when the prompt has no words.
pub fn title_from_prompt(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut title = String::new();
    for word in words {
        let len = title.chars().count() + word.chars().count() + 1;
        if len > TITLE_CHARS {
            if title.is_empty() {
                title = word.chars().take(TITLE_CHARS).collect();
            }
            title.push('…');
            break;
        }
        if !title.is_empty() {
            title.push(' ');
        }
        title.push_str(word);
    }
    Some(title)
}

/// Stores the run as queued and makes sure a worker drains the queue.
pub fn queue_run(
    daemon: &Arc<Daemon>,
    agent: &Arc<SessionAgent>,
    request: RunRequest,
) -> Result<PromptAccepted, DaemonError> {
    let run = Run {
        id: new_id("run"),
        session_id: agent.session_id.clone(),
        status: RunStatus::Running,
        started_at: now_ms(),
        ended_at: None,
        error: None,
        model: None,
        mode: Some(request.mode.clone()),
        usage: None,
        prompt_blocked: false,
    };
    let store = daemon.store();
    let live = daemon.sessions.get(&agent.session_id)?;
    let accepted = PromptAccepted {
        run_id: run.id.clone(),
        message_id: new_id("msg"),
    };
    let message = Message {
        id: accepted.message_id.clone(),
        session_id: agent.session_id.clone(),
        seq: 0,
        role: Role::User,
        run_id: Some(run.id.clone()),
        created_at: now_ms(),
        undone: false,
        compacted: false,
        parts: std::iter::once(Part::Text {
            text: request.text.clone(),
        })
        .chain(request.attachments.iter().cloned())
        .collect(),
    };
    // The prompt is stored before it is acknowledged, so an answered `session.prompt` survives a
    // crash even while its run waits behind another one; it joins the conversation (its
    // `message.created`) when its run starts.
    live.emit(
        store,
        EventKind::RunQueued {
            run: run.clone(),
            message: message.clone(),
        },
    )?;
    let start_worker = {
        let mut q = lock(&agent.queue);
        q.last_mode = Some(request.mode.clone());
        q.queue.push_back(Queued {
            run,
            message,
            request,
        });
        !std::mem::replace(&mut q.worker, true)
    };
    if start_worker {
        let daemon = daemon.clone();
        let agent = agent.clone();
        tokio::spawn(async move { worker(daemon, agent).await });
    }
    Ok(accepted)
}

/// Runs the session's queued prompts one after the other.
async fn worker(daemon: Arc<Daemon>, agent: Arc<SessionAgent>) {
    loop {
        let (next, cancel) = {
            let mut q = lock(&agent.queue);
            match q.queue.pop_front() {
                Some(next) => {
                    let cancel = CancellationToken::new();
                    q.current = Some((next.run.id.clone(), cancel.clone()));
                    if next.request.model.is_none() {
                        // Keep the session on the model it used last.
                        (
                            Queued {
                                request: RunRequest {
                                    model: q.last_model.clone(),
                                    ..next.request
                                },
                                ..next
                            },
                            cancel,
                        )
                    } else {
                        (next, cancel)
                    }
                }
                None => {
                    q.worker = false;
                    q.current = None;
                    break;
                }
            }
        };
        let used = run::execute(
            &daemon,
            &agent,
            next.run,
            next.message,
            next.request,
            cancel,
        )
        .await;
        let mut q = lock(&agent.queue);
        q.current = None;
        if used.is_some() {
            q.last_model = used;
        }
    }
    // Normally the run already set the session idle before its last event.
    if let Ok(live) = daemon.sessions.get(&agent.session_id)
        && live.status() == SessionStatus::Running
        && let Err(e) = live.update(daemon.store(), |s| s.status = SessionStatus::Idle)
    {
        tracing::warn!(session = %agent.session_id, error = %e, "cannot mark the session idle");
    }
    // What the run freed (its conversation, the provider's buffers, the tools' output) goes back
    // to the system once nothing runs.
    if daemon.sessions.running() == 0 {
        crate::memory::give_back();
    }
}

impl SessionAgent {
    fn queue_is_empty(&self) -> bool {
        lock(&self.queue).queue.is_empty()
    }
}

impl SessionAgent {
    /// Stops the run going and drops the prompts queued behind it.
    pub fn abort(&self, daemon: &Daemon) -> SessionAborted {
        let (current, dropped) = {
            let mut q = lock(&self.queue);
            let dropped: Vec<Queued> = q.queue.drain(..).collect();
            (q.current.clone(), dropped)
        };
        if let Some((_, cancel)) = &current {
            cancel.cancel();
        }
        let count = dropped.len() as u32;
        if let Ok(live) = daemon.sessions.get(&self.session_id) {
            for queued in dropped {
                let mut run = queued.run;
                run.status = RunStatus::Aborted;
                run.ended_at = Some(now_ms());
                let _ = live.emit(daemon.store(), EventKind::RunAborted { run });
            }
        }
        SessionAborted {
            run_id: current.map(|(id, _)| id),
            dropped_queued: count,
        }
    }

    fn abort_all(&self) {
        let mut q = lock(&self.queue);
        q.queue.clear();
        if let Some((_, cancel)) = &q.current {
            cancel.cancel();
        }
    }

    /// Whether a run is going or waiting.
    pub fn busy(&self) -> bool {
        let q = lock(&self.queue);
        q.current.is_some() || !q.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::title_from_prompt;

    #[test]
    fn a_title_is_the_prompts_first_line_with_words_cut_at_a_word() {
        assert_eq!(
            title_from_prompt("\n  fix the   login page\nand the rest").as_deref(),
            Some("fix the login page")
        );
        let long = "word ".repeat(30);
        let title = title_from_prompt(&long).unwrap_or_default();
        assert!(
            title.ends_with("word…") && title.chars().count() <= 61,
            "{title}"
        );
        assert_eq!(title_from_prompt("   \n "), None);
    }
}
