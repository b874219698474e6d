//! The run loop: build the request, stream the model's answer into stored parts, run the tool
//! calls it asks for, and loop until it answers without calling a tool — or is aborted, fails, or
//! runs out of steps.
//!
//! Deltas go out live but are coalesced (about every 50 ms or 256 bytes) and never stored; each
//! part is stored when it finishes, before the `part.done` that announces it. Before each request
//! the estimated size is compared with the model's window; above the threshold the older turns are
//! compacted into a summary (see [`super::compact`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use totem_permission::Policy;
use totem_protocol::{
    EventKind, Message, Part, ReasoningLevel, Role, Run, RunStatus, SessionStatus, Usage,
};
use totem_provider::{
    AssistantPart, ChatRequest, Completion, Message as ModelMessage, ProviderError, StreamEvent,
    ToolCall, ToolDefinition, TurnBuilder, estimate_tokens,
};
use totem_snapshot::{DirBlobStore, RecordOptions, RunChanges};
use totem_tools::recover::RepeatGuard;
use totem_tools::{BlobSink, EventSink, Registry, ToolContext, ToolEvent};

use super::history::to_model_messages;
use super::settings::{ResolvedModel, provider_for};
use super::system::{SystemPrompt, instruction_commands};
use super::{AgentError, RunRequest, SessionAgent, lock};
use crate::config::SettingsFile;
use crate::daemon::Daemon;
use crate::session::LiveSession;
use crate::store::Compaction;
use crate::util::{new_id, now_ms};

/// Model requests per run before it is stopped.
const MAX_STEPS: usize = 60;
/// The same call this many times in a row ends the run: the model did not change course after
/// the third one was refused.
const MAX_SAME_CALLS: usize = 5;
/// Streamed text is checked for a loop each time this many bytes have arrived.
const LOOP_CHECK_BYTES: usize = 256;
/// Coalescing of deltas.
const DELTA_BYTES: usize = 256;
const DELTA_INTERVAL: Duration = Duration::from_millis(50);

pub(super) type Changes<'s> = RunChanges<'s, DirBlobStore>;

/// How a run ended.
pub(super) enum Outcome {
    Done,
    Failed(String),
    Aborted,
}

/// Why a step stopped early.
pub(super) enum StepError {
    Aborted,
    Failed(String),
    /// The provider said the request does not fit the window (`limit`: the window it has, when
    /// it said).
    Overflow {
        reason: String,
        limit: Option<u64>,
    },
}

impl From<AgentError> for StepError {
    fn from(e: AgentError) -> Self {
        // The session was deleted or the store failed: nothing more can be recorded.
        StepError::Failed(e.to_string())
    }
}

impl From<crate::session::SessionError> for StepError {
    fn from(e: crate::session::SessionError) -> Self {
        StepError::Failed(e.to_string())
    }
}

impl From<crate::store::StoreError> for StepError {
    fn from(e: crate::store::StoreError) -> Self {
        StepError::Failed(e.to_string())
    }
}

/// Runs one queued prompt from its user message to its last event. Returns the model it used.
pub(super) async fn execute(
    daemon: &Arc<Daemon>,
    agent: &Arc<SessionAgent>,
    mut run: Run,
    message_id: String,
    request: RunRequest,
    cancel: CancellationToken,
) -> Option<String> {
    let store = daemon.store();
    let Ok(live) = daemon.sessions.get(&agent.session_id) else {
        return None;
    };
    let started = async {
        if live.status() != SessionStatus::Running {
            let session = live.update(store, |s| s.status = SessionStatus::Running)?;
            live.emit(store, EventKind::SessionUpdated { session })?;
        }
        run.started_at = now_ms();
        live.emit(store, EventKind::RunStarted { run: run.clone() })?;
        Ok::<(), crate::session::SessionError>(())
    };
    // A run that cannot even record its start (a full disk) still ends, with that as its error.
    let start_error = started.await.err();
    if let Some(e) = &start_error {
        tracing::warn!(run = %run.id, error = %e, "run could not start");
    }

    let blobs = daemon.blobs.clone();
    let mut changes = RunChanges::new(agent.root.clone(), &blobs, RecordOptions::default());
    let mut used_model = None;
    let mut run_usage = None;
    let outcome = if let Some(e) = start_error {
        Outcome::Failed(e.to_string())
    } else {
        match Runner::prepare(
            daemon,
            agent,
            live.clone(),
            &run,
            &request,
            &message_id,
            cancel.clone(),
        )
        .await
        {
            Ok(mut runner) => {
                run.model = Some(runner.model.name.clone());
                used_model = Some(runner.model.name.clone());
                runner
                    .start_mcp(&request.text, request.ask_to_start_servers)
                    .await;
                let outcome = runner.go(&mut changes).await;
                if matches!(outcome, Outcome::Aborted) {
                    runner.kill_jobs();
                }
                run_usage = runner.usage.clone();
                outcome
            }
            Err(reason) => Outcome::Failed(reason),
        }
    };

    let announced = changes.recorded();
    match tokio::task::block_in_place(|| changes.finish()) {
        Ok((record, scan)) => {
            // What the run's commands changed; its own writes were announced call by call.
            let paths: Vec<String> = record
                .changes
                .iter()
                .map(|c| c.path.clone())
                .filter(|p| !announced.contains(p))
                .collect();
            if !paths.is_empty() {
                let _ = live.emit(
                    store,
                    EventKind::FilesChanged {
                        run_id: Some(run.id.clone()),
                        paths,
                    },
                );
            }
            match serde_json::to_vec(&record) {
                Ok(bytes) => {
                    if let Err(e) = store.put_run_changes(&run.id, &bytes) {
                        tracing::warn!(run = %run.id, error = %e, "cannot store the run's changes");
                    }
                }
                Err(e) => {
                    tracing::warn!(run = %run.id, error = %e, "cannot encode the run's changes")
                }
            }
            if scan.is_some() {
                *lock(&agent.last_scan) = scan;
            }
        }
        Err(e) => {
            tracing::warn!(run = %run.id, error = %e, "cannot record the run's changes");
            let _ = live.emit(
                store,
                EventKind::Notice {
                    run_id: Some(run.id.clone()),
                    level: "warning".into(),
                    text: format!(
                        "The changes of this run could not be recorded, so undo cannot revert them: {}",
                        crate::disk::explain(&e, daemon.blobs.dir())
                    ),
                },
            );
        }
    }

    run.ended_at = Some(now_ms());
    run.usage = run_usage;
    let kind = match outcome {
        Outcome::Done => {
            run.status = RunStatus::Done;
            EventKind::RunDone { run: run.clone() }
        }
        Outcome::Failed(reason) => {
            run.status = RunStatus::Failed;
            run.error = Some(crate::redact::text(&reason).into_owned());
            EventKind::RunFailed { run: run.clone() }
        }
        Outcome::Aborted => {
            run.status = RunStatus::Aborted;
            EventKind::RunAborted { run: run.clone() }
        }
    };
    if let Err(e) = store.put_run(&run) {
        tracing::warn!(run = %run.id, error = %e, "cannot store the finished run");
    }
    // The run's end is its last event: the session turns idle first when nothing waits, and a
    // client reacting to the end finds the session free.
    lock(&agent.queue).current = None;
    if agent.queue_is_empty()
        && let Ok(session) = live.update(store, |s| s.status = SessionStatus::Idle)
    {
        let _ = live.emit(store, EventKind::SessionUpdated { session });
    }
    if let Err(e) = live.emit(store, kind.clone()) {
        tracing::warn!(run = %run.id, error = %e, "cannot store the end of the run; announcing it anyway");
        live.announce_unstored(kind);
    }
    used_model
}

/// Full command outputs and images go to the daemon's blob store.
struct Blobs(DirBlobStore);

impl BlobSink for Blobs {
    fn put(&self, bytes: &[u8]) -> String {
        match totem_snapshot::BlobStore::put(&self.0, bytes) {
            Ok(id) => id.into(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot store a tool output blob");
                "unavailable".into()
            }
        }
    }
}

/// The todo tool's plan goes out as a `todo` event.
struct TodoEvents {
    daemon: Arc<Daemon>,
    live: Arc<LiveSession>,
    run_id: String,
}

impl EventSink for TodoEvents {
    fn emit(&self, event: ToolEvent) {
        #[allow(unreachable_patterns)]
        let todos = match event {
            ToolEvent::Todos { todos } => todos,
            _ => return,
        };
        let todos = todos
            .into_iter()
            .map(|t| totem_protocol::TodoItem {
                status: serde_json::to_value(t.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "pending".into()),
                content: t.content,
            })
            .collect();
        let kind = EventKind::Todo {
            run_id: self.run_id.clone(),
            todos,
        };
        if let Err(e) = self.live.emit(self.daemon.store(), kind) {
            tracing::warn!(error = %e, "cannot announce the todo list");
        }
    }
}

/// One run's working state.
pub(super) struct Runner {
    pub(super) daemon: Arc<Daemon>,
    pub(super) agent: Arc<SessionAgent>,
    pub(super) live: Arc<LiveSession>,
    pub(super) run_id: String,
    pub(super) cancel: CancellationToken,
    pub(super) settings: Arc<SettingsFile>,
    pub(super) model: ResolvedModel,
    pub(super) compaction_model: Option<String>,
    pub(super) read_only: bool,
    agent_prompt: Option<String>,
    reasoning: ReasoningLevel,
    pub(super) policy: Policy,
    pub(super) registry: Registry,
    pub(super) ctx: ToolContext,
    pub(super) repeats: RepeatGuard,
    pub(super) totaljs: bool,
    /// Tool calls are written as JSON in the text (the model has no native tool calling).
    text_tools: bool,
    pub(super) seen_instructions: HashSet<PathBuf>,
    pub(super) format_commands: Vec<String>,
    pub(super) check_commands: Vec<String>,
    pub(super) jobs_started: Vec<String>,
    pub(super) usage: Option<Usage>,
    /// The session before this run (after the compaction point), and this run's turns: its
    /// prompt, then each answer followed by its tool results.
    pub(super) prior: Vec<ModelMessage>,
    pub(super) current: Vec<ModelMessage>,
    /// The stored seq of each answer in `current`, in order (see [`super::compact`]).
    pub(super) turn_seqs: Vec<u64>,
    /// The stored seq of the answer the last step created.
    step_seq: u64,
    /// The highest seq among the stored messages in `prior`, and the stored messages left out.
    pub(super) prior_upto: u64,
    pub(super) excluded: Vec<String>,
    pub(super) compaction: Option<Compaction>,
    /// A summary request failed in this run; it is not tried again at every step.
    pub(super) compaction_failed: bool,
    pub(super) system: String,
}

impl Runner {
    async fn prepare(
        daemon: &Arc<Daemon>,
        agent: &Arc<SessionAgent>,
        live: Arc<LiveSession>,
        run: &Run,
        request: &RunRequest,
        message_id: &str,
        cancel: CancellationToken,
    ) -> Result<Runner, String> {
        let settings = super::settings::load(daemon)?;
        let agent_settings = settings.agent(&request.mode);
        let read_only = request.mode == super::PLAN || agent_settings.read_only;
        let wanted = request.model.clone().or(agent_settings.model.clone());
        let model = provider_for(daemon, wanted.as_deref()).await?;

        let mut policy = settings.policy(&request.mode, &request.allow)?;
        if !daemon.sandbox.is_sandboxed() {
            policy.shrink_defaults();
        }
        let secrets = policy.secrets().clone();
        let shell = super::confine::base_spec(policy.environment());
        let ctx = ToolContext::new(&agent.root)
            .map_err(|e| {
                format!(
                    "cannot open the project folder {}: {e}",
                    agent.root.display()
                )
            })?
            .with_cancel(cancel.clone())
            .with_jobs(agent.jobs.clone())
            .with_blobs(Arc::new(Blobs(daemon.blobs.clone())))
            .with_events(Arc::new(TodoEvents {
                daemon: daemon.clone(),
                live: live.clone(),
                run_id: run.id.clone(),
            }))
            .with_secret_filter(Arc::new(move |path: &str| secrets.is_secret(path)))
            .with_shell(shell);

        let project = totem_totaljs::detect(&agent.root);
        if matches!(project, totem_totaljs::Project::Legacy { .. })
            && let Some(text) = project.message()
        {
            let _ = live.emit(
                daemon.store(),
                EventKind::Notice {
                    run_id: Some(run.id.clone()),
                    level: "info".into(),
                    text,
                },
            );
        }
        // Commands from the project's AGENTS.md; settings.json's own run from `settings`.
        let (format_commands, check_commands) = instruction_commands(&agent.root);

        let store = daemon.store();
        let compaction = store
            .compaction(&agent.session_id)
            .map_err(|e| e.to_string())?;
        // Everything stored except this run's prompt and the prompts still queued (their seq may
        // be lower than answers of runs that went before them), minus what a summary covers.
        let mut excluded = agent.queued_messages();
        excluded.push(message_id.to_string());
        let (stored, _) = store
            .messages_after(&agent.session_id, 0, 1_000_000)
            .map_err(|e| e.to_string())?;
        let stored: Vec<Message> = stored
            .into_iter()
            .filter(|m| !excluded.contains(&m.id))
            .filter(|m| compaction.as_ref().is_none_or(|c| c.keeps(m)))
            .collect();
        let prior_upto = stored.iter().map(|m| m.seq).max().unwrap_or(0);
        let text_tools = model.info.as_ref().is_some_and(|i| !i.capabilities.tools);

        let mut runner = Runner {
            daemon: daemon.clone(),
            agent: agent.clone(),
            live,
            run_id: run.id.clone(),
            cancel,
            compaction_model: settings.compaction.as_ref().and_then(|c| c.model.clone()),
            agent_prompt: agent_settings.prompt.clone(),
            settings,
            model,
            read_only,
            reasoning: request.reasoning.unwrap_or(ReasoningLevel::Off),
            policy,
            registry: crate::terminal::tool::registry(daemon, &agent.session_id),
            ctx,
            repeats: RepeatGuard::default(),
            totaljs: project.is_totaljs5(),
            text_tools,
            seen_instructions: HashSet::new(),
            format_commands,
            check_commands,
            jobs_started: Vec::new(),
            usage: None,
            prior: to_model_messages(&stored),
            current: vec![ModelMessage::user(super::attach::model_text(
                &std::iter::once(Part::Text {
                    text: request.text.clone(),
                })
                .chain(request.attachments.iter().cloned())
                .collect::<Vec<_>>(),
            ))],
            turn_seqs: Vec::new(),
            step_seq: 0,
            prior_upto,
            excluded,
            compaction,
            compaction_failed: false,
            system: String::new(),
        };
        runner.system = runner.render_system();
        Ok(runner)
    }

    pub(super) fn render_system(&self) -> String {
        let mut system = SystemPrompt {
            root: &self.agent.root,
            read_only: self.read_only,
            agent_prompt: self.agent_prompt.as_deref(),
            totaljs: self.totaljs,
            summary: self.compaction.as_ref().map(|c| c.summary.as_str()),
        }
        .render();
        if self.text_tools {
            system.push_str("\n\nTools: call one by writing only a JSON object {\"name\": \"TOOL\", \"arguments\": {…}} in your answer, then wait for the result.\n");
            for def in self.registry.definitions(self.read_only) {
                system.push_str(&format!(
                    "- {} {}: {}\n",
                    def.name,
                    totem_tools::schema::signature(&def.parameters),
                    def.description
                ));
            }
        }
        system
    }

    /// The request for the next step.
    pub(super) fn request(&self) -> ChatRequest {
        let mut messages = self.prior.clone();
        messages.extend(self.current.iter().cloned());
        if self.totaljs
            && let Some(ModelMessage::User { text, .. }) = messages
                .iter_mut()
                .rev()
                .find(|m| matches!(m, ModelMessage::User { .. }))
        {
            text.push_str("\n\n");
            text.push_str(totem_totaljs::reminder());
        }
        if self.text_tools {
            messages = as_plain_text(messages);
        }
        let tools = if self.text_tools {
            Vec::new()
        } else {
            self.registry
                .definitions(self.read_only)
                .into_iter()
                .map(|d| ToolDefinition {
                    name: d.name,
                    description: d.description,
                    parameters: d.parameters,
                })
                .chain(self.agent.mcp.definitions(self.read_only))
                .collect()
        };
        ChatRequest {
            model: self.model.model.clone(),
            system: Some(self.system.clone()),
            messages,
            tools,
            reasoning: match self.reasoning {
                ReasoningLevel::Off => totem_provider::ReasoningLevel::Off,
                ReasoningLevel::Low => totem_provider::ReasoningLevel::Low,
                ReasoningLevel::Medium => totem_provider::ReasoningLevel::Medium,
                ReasoningLevel::High => totem_provider::ReasoningLevel::High,
            },
            ..ChatRequest::default()
        }
    }

    pub(super) fn window(&self) -> Option<u64> {
        self.model.info.as_ref().and_then(|i| i.context_window)
    }

    /// The server said its window is `limit` tokens: compaction uses that from now on.
    fn learn_window(&mut self, limit: u64) {
        let model = self.model.model.clone();
        let info = self
            .model
            .info
            .get_or_insert_with(|| totem_provider::ModelInfo {
                id: model,
                ..totem_provider::ModelInfo::default()
            });
        info.context_window = Some(info.context_window.map_or(limit, |w| w.min(limit)));
    }

    pub(super) fn emit(&self, kind: EventKind) -> Result<(), StepError> {
        self.live.emit(self.daemon.store(), kind)?;
        Ok(())
    }

    pub(super) fn notice(&self, level: &str, text: String) {
        let _ = self.emit(EventKind::Notice {
            run_id: Some(self.run_id.clone()),
            level: level.into(),
            text,
        });
    }

    async fn go(&mut self, changes: &mut Changes<'_>) -> Outcome {
        let mut compacted_for_overflow = false;
        for step in 0..MAX_STEPS {
            if self.cancel.is_cancelled() {
                return Outcome::Aborted;
            }
            // Compaction is checked before every request, so a long run compacts mid-way too.
            let request = self.fit_request().await;
            let context = u64::from(estimate_tokens(&request));
            let (completion, message_id, mut index) = match self.step(request).await {
                Ok(done) => done,
                Err(StepError::Aborted) => return Outcome::Aborted,
                Err(StepError::Failed(reason)) => return Outcome::Failed(reason),
                Err(StepError::Overflow { reason, limit }) => {
                    if let Some(limit) = limit {
                        self.learn_window(limit);
                    }
                    if !compacted_for_overflow && self.has_older_turns() {
                        compacted_for_overflow = true;
                        let window = self
                            .window()
                            .map_or_else(String::new, |w| format!(" of {w} tokens"));
                        self.notice(
                            "warning",
                            format!(
                                "The conversation does not fit the model's context{window} ({reason}); compacting it and trying again."
                            ),
                        );
                        if self.compact_all().await.is_ok() {
                            continue;
                        }
                    }
                    return Outcome::Failed(format!(
                        "{reason}. The conversation no longer fits the model's context: run /compact, start a new session, or pick a model with a larger window"
                    ));
                }
            };
            if let Err(StepError::Failed(reason)) = self.account(&completion, &message_id, context)
            {
                return Outcome::Failed(reason);
            }

            let mut parts = completion.parts.clone();
            let mut calls: Vec<ToolCall> = completion.tool_calls().cloned().collect();
            if calls.is_empty() {
                for (i, found) in self
                    .registry
                    .calls_from_text(&completion.text())
                    .into_iter()
                    .enumerate()
                {
                    let call = ToolCall {
                        id: format!("text_{step}_{i}"),
                        name: found.name,
                        arguments: found.arguments,
                        signature: None,
                    };
                    if let Err(e) = self.store_part(
                        &message_id,
                        index,
                        "toolCall",
                        Part::ToolCall {
                            call_id: call.id.clone(),
                            tool: call.name.clone(),
                            input: call.arguments.clone(),
                        },
                    ) {
                        return step_failed(e);
                    }
                    index += 1;
                    parts.push(AssistantPart::ToolCall(call.clone()));
                    calls.push(call);
                }
            }
            if !parts.is_empty() {
                self.current.push(ModelMessage::Assistant { parts });
                self.turn_seqs.push(self.step_seq);
            }
            if calls.is_empty() {
                if completion.parts.is_empty() {
                    self.notice("warning", "The model returned an empty answer.".into());
                }
                return Outcome::Done;
            }
            for call in calls {
                if self.cancel.is_cancelled() {
                    return Outcome::Aborted;
                }
                if let Err(e) = self.emit(EventKind::PartStarted {
                    run_id: self.run_id.clone(),
                    message_id: message_id.clone(),
                    index,
                    part_type: "toolResult".into(),
                }) {
                    return step_failed(e);
                }
                let (output, is_error) = self.call(&call, changes).await;
                let part = Part::ToolResult {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    output: output.clone(),
                    is_error,
                };
                if let Err(e) = self.finish_part(&message_id, index, part) {
                    return step_failed(e);
                }
                index += 1;
                if self.repeats.count() >= MAX_SAME_CALLS {
                    return Outcome::Failed(format!(
                        "stopped: the model called {} {MAX_SAME_CALLS} times in a row with the same arguments; try again with a clearer prompt or a larger model",
                        call.name
                    ));
                }
                self.current
                    .push(ModelMessage::ToolResult(totem_provider::ToolResult {
                        call_id: call.id,
                        tool_name: call.name,
                        content: output,
                        is_error,
                    }));
            }
        }
        Outcome::Failed(format!(
            "stopped after {MAX_STEPS} model steps without a final answer; send another prompt to continue"
        ))
    }

    /// Streams one answer into a new assistant message. Returns the turn, the message id and
    /// the next free part index. The message is created with the answer's first part, so a
    /// request that fails before any output leaves nothing behind.
    async fn step(&mut self, request: ChatRequest) -> Result<(Completion, String, u32), StepError> {
        let message_id = new_id("msg");
        let mut created = false;
        let mut stream = self.model.provider.stream(request);
        let mut turn = TurnBuilder::new();
        let mut open: Option<OpenPart> = None;
        let mut index: u32 = 0;
        let mut cut_at = None;
        loop {
            let next = tokio::select! {
                _ = self.cancel.cancelled() => {
                    self.close(&message_id, &mut open)?;
                    return Err(StepError::Aborted);
                }
                next = stream.next() => next,
            };
            let event = match next {
                None => break,
                Some(Ok(event)) => event,
                Some(Err(e)) => {
                    // What streamed is kept, marked as cut off.
                    if let Some(part) = open.as_mut() {
                        part.text.push_str(CUT_MARK);
                        part.pending.push_str(CUT_MARK);
                    }
                    self.close(&message_id, &mut open)?;
                    if let ProviderError::ContextOverflow { limit, .. } = &e {
                        return Err(StepError::Overflow {
                            reason: e.to_string(),
                            limit: *limit,
                        });
                    }
                    return Err(StepError::Failed(e.to_string()));
                }
            };
            match &event {
                StreamEvent::TextDelta { text } => {
                    self.create_message(&message_id, &mut created)?;
                    self.delta(&message_id, &mut open, &mut index, false, text)?;
                    if let Some(keep) = open.as_mut().and_then(OpenPart::looping) {
                        cut_at = Some(keep);
                        turn.push(event);
                        break;
                    }
                }
                StreamEvent::ReasoningDelta { text } => {
                    self.create_message(&message_id, &mut created)?;
                    self.delta(&message_id, &mut open, &mut index, true, text)?
                }
                StreamEvent::PartEnd { .. } => self.close(&message_id, &mut open)?,
                StreamEvent::ToolCall(call) => {
                    self.create_message(&message_id, &mut created)?;
                    self.close(&message_id, &mut open)?;
                    self.store_part(
                        &message_id,
                        index,
                        "toolCall",
                        Part::ToolCall {
                            call_id: call.id.clone(),
                            tool: call.name.clone(),
                            input: call.arguments.clone(),
                        },
                    )?;
                    index += 1;
                }
                StreamEvent::Retry(notice) => self.notice("warning", notice.to_string()),
                _ => {}
            }
            turn.push(event);
        }
        // An answer with nothing in it is still an answer: recorded, and counted.
        self.create_message(&message_id, &mut created)?;
        let mut completion = turn.finish();
        if let Some(keep) = cut_at {
            // Dropping the stream closes the connection, which stops the server generating.
            drop(stream);
            if let Some(part) = open.as_mut() {
                part.text.truncate(keep);
                part.pending.clear();
            }
            if let Some(AssistantPart::Text { text, .. }) = completion.parts.last_mut() {
                text.truncate(keep);
            }
            self.notice(
                "warning",
                "The model kept repeating the same text, so its answer was cut there.".into(),
            );
        }
        self.close(&message_id, &mut open)?;
        Ok((completion, message_id, index))
    }

    /// Creates the step's assistant message, once.
    fn create_message(&mut self, message_id: &str, created: &mut bool) -> Result<(), StepError> {
        if *created {
            return Ok(());
        }
        let store = self.daemon.store();
        let event = self.live.emit_with(store, |seq| {
            let message = Message {
                id: message_id.to_owned(),
                session_id: self.agent.session_id.clone(),
                seq,
                role: Role::Assistant,
                run_id: Some(self.run_id.clone()),
                created_at: now_ms(),
                parts: Vec::new(),
            };
            store.put_message(&message)?;
            Ok(EventKind::MessageCreated { message })
        })?;
        self.step_seq = event.seq;
        self.live.update(store, |s| s.message_count += 1)?;
        *created = true;
        Ok(())
    }

    fn delta(
        &self,
        message_id: &str,
        open: &mut Option<OpenPart>,
        index: &mut u32,
        reasoning: bool,
        text: &str,
    ) -> Result<(), StepError> {
        if open.as_ref().is_some_and(|p| p.reasoning != reasoning) {
            self.close(message_id, open)?;
        }
        if open.is_none() {
            self.emit(EventKind::PartStarted {
                run_id: self.run_id.clone(),
                message_id: message_id.to_string(),
                index: *index,
                part_type: if reasoning { "reasoning" } else { "text" }.into(),
            })?;
            *open = Some(OpenPart {
                index: *index,
                reasoning,
                text: String::new(),
                pending: String::new(),
                last_flush: Instant::now(),
                checked: 0,
            });
            *index += 1;
        }
        if let Some(part) = open.as_mut() {
            part.text.push_str(text);
            part.pending.push_str(text);
            if part.pending.len() >= DELTA_BYTES || part.last_flush.elapsed() >= DELTA_INTERVAL {
                self.flush(message_id, part)?;
            }
        }
        Ok(())
    }

    fn flush(&self, message_id: &str, part: &mut OpenPart) -> Result<(), StepError> {
        if part.pending.is_empty() {
            return Ok(());
        }
        self.emit(EventKind::PartDelta {
            run_id: self.run_id.clone(),
            message_id: message_id.to_string(),
            index: part.index,
            text: std::mem::take(&mut part.pending),
        })?;
        part.last_flush = Instant::now();
        Ok(())
    }

    /// Finishes the streaming part: last delta, stored, announced.
    fn close(&self, message_id: &str, open: &mut Option<OpenPart>) -> Result<(), StepError> {
        let Some(mut part) = open.take() else {
            return Ok(());
        };
        self.flush(message_id, &mut part)?;
        let stored = if part.reasoning {
            Part::Reasoning { text: part.text }
        } else {
            Part::Text { text: part.text }
        };
        self.finish_part(message_id, part.index, stored)
    }

    /// A part that is whole at once (a tool call): started, stored, done.
    fn store_part(
        &self,
        message_id: &str,
        index: u32,
        part_type: &str,
        part: Part,
    ) -> Result<(), StepError> {
        self.emit(EventKind::PartStarted {
            run_id: self.run_id.clone(),
            message_id: message_id.to_string(),
            index,
            part_type: part_type.into(),
        })?;
        self.finish_part(message_id, index, part)
    }

    fn finish_part(&self, message_id: &str, index: u32, part: Part) -> Result<(), StepError> {
        let part = crate::redact::part(part);
        self.daemon.store().put_part(message_id, index, &part)?;
        self.emit(EventKind::PartDone {
            run_id: self.run_id.clone(),
            message_id: message_id.to_string(),
            index,
            part,
        })
    }

    /// Adds an answer's usage to the run and the session and announces it.
    fn account(
        &mut self,
        completion: &Completion,
        message_id: &str,
        context: u64,
    ) -> Result<(), StepError> {
        let Some(u) = completion.usage else {
            return Ok(());
        };
        let mut usage = Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
            reasoning_tokens: u.reasoning_tokens,
            cost_usd: None,
        };
        if let Some(p) = self.model.info.as_ref().and_then(|i| i.prices) {
            let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
            usage.cost_usd = Some(
                per(u.input_tokens, p.input_per_million)
                    + per(u.output_tokens, p.output_per_million)
                    + per(
                        u.cache_read_tokens,
                        p.cache_read_per_million.unwrap_or(p.input_per_million),
                    )
                    + per(
                        u.cache_write_tokens,
                        p.cache_write_per_million.unwrap_or(p.input_per_million),
                    ),
            );
        }
        let run = self.usage.get_or_insert_with(Usage::default);
        run.add(&usage);
        let run = run.clone();
        let session = self.live.update(self.daemon.store(), |s| {
            s.usage.get_or_insert_with(Usage::default).add(&usage);
        })?;
        self.emit(EventKind::Usage {
            run_id: self.run_id.clone(),
            message_id: message_id.to_string(),
            usage,
            run,
            session: session.usage.unwrap_or_default(),
            context_tokens: Some(context),
            context_window: self.window(),
        })
    }

    /// Kills the background jobs this run started (on abort).
    fn kill_jobs(&self) {
        for id in &self.jobs_started {
            if let Some(pid) = self.agent.jobs.pid(id)
                && let Ok(pid) = i32::try_from(pid)
            {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// The conversation for a model without native tool calling: its calls stay in its own text, and
/// results come back as user messages, so no chat template meets a tool role it does not know.
fn as_plain_text(messages: Vec<ModelMessage>) -> Vec<ModelMessage> {
    messages
        .into_iter()
        .filter_map(|message| match message {
            ModelMessage::Assistant { parts } => {
                let parts: Vec<AssistantPart> = parts
                    .into_iter()
                    .filter(|p| matches!(p, AssistantPart::Text { .. }))
                    .collect();
                (!parts.is_empty()).then_some(ModelMessage::Assistant { parts })
            }
            ModelMessage::ToolResult(result) => Some(ModelMessage::user(format!(
                "Result of {}{}:\n{}",
                result.tool_name,
                if result.is_error { " (error)" } else { "" },
                result.content
            ))),
            other => Some(other),
        })
        .collect()
}

fn step_failed(e: StepError) -> Outcome {
    match e {
        StepError::Aborted => Outcome::Aborted,
        StepError::Failed(reason) | StepError::Overflow { reason, .. } => Outcome::Failed(reason),
    }
}

/// How the text of an answer whose stream broke off ends, so neither the user nor the model
/// takes it for the whole answer.
const CUT_MARK: &str = "\n\n[cut off: the stream ended before the answer was complete]";

/// A text or reasoning part still streaming.
struct OpenPart {
    index: u32,
    reasoning: bool,
    text: String,
    /// Deltas not sent yet.
    pending: String,
    last_flush: Instant,
    /// The text's length when it was last checked for a loop.
    checked: usize,
}

impl OpenPart {
    /// The length to cut the text to when it ends in a loop (checked every
    /// [`LOOP_CHECK_BYTES`]).
    fn looping(&mut self) -> Option<usize> {
        if self.reasoning || self.text.len() < self.checked + LOOP_CHECK_BYTES {
            return None;
        }
        self.checked = self.text.len();
        super::repeat::looping_tail(&self.text)
    }
}
