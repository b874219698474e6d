//! The run loop: [`execute`] takes a queued prompt from its `run.started` to its last event, and
//! [`Runner::go`] asks the model, runs the tool calls it asks for, and loops until it answers
//! without calling a tool — or is aborted, fails, or runs out of steps.
//!
//! The rest of a run lives beside it, one idea a file: [`super::prepare`] builds the runner and
//! each request (policy, system prompt, tools), [`super::stream`] turns the model's answer into
//! stored parts and events, [`super::usage`] counts tokens and cost, [`super::call`] runs one tool
//! call and [`super::compact`] shortens the conversation before a request that would not fit.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use totem_protocol::{EventKind, Message, Part, Run, RunStatus, SessionStatus, Usage};
use totem_provider::{
    AssistantPart, Completion, FinishReason, Message as ModelMessage, ToolCall, ToolMode,
    estimate_tokens,
};
use totem_snapshot::{DirBlobStore, RecordOptions, RunChanges};
use totem_tools::recover::BadCall;

use super::call::ToolState;
use super::compact::Conversation;
use super::prepare::Setup;
use super::settings::{ResolvedModel, ToolOffer};
use super::{DaemonError, RunRequest, SessionAgent, lock};
use crate::config::SettingsFile;
use crate::daemon::Daemon;
use crate::session::LiveSession;
use crate::util::now_ms;

/// Model requests per run before it is stopped.
const MAX_STEPS: usize = 60;
/// The same call this many times in a row ends the run: the model did not change course after
/// the third one was refused.
const MAX_SAME_CALLS: usize = 5;
/// The fewest steps a run gets, however slow its model.
const MIN_STEPS: usize = 15;
/// The time a run's steps may take at the pace of its first steps: a slow model gets fewer.
const STEP_BUDGET: std::time::Duration = std::time::Duration::from_secs(15 * 60);
/// The steps timed before the cap is scaled to the model's pace.
const TIMED_STEPS: usize = 3;
/// This many steps in a row whose call could not be made (a tool that does not exist, JSON that
/// does not parse) end the run: the model cannot call a tool.
const MAX_UNUSABLE_CALLS: usize = 3;

pub(super) type Changes<'s> = RunChanges<'s, DirBlobStore>;

/// How a run ended.
pub(super) enum Outcome {
    Done,
    Failed(String),
    /// The provider refused the prompt itself: the run fails and its prompt is never sent again.
    Blocked(String),
    Aborted,
}

/// Why a step stopped early.
pub(super) enum StepError {
    Aborted,
    Failed(String),
    /// The provider refused the prompt itself (Gemini `promptFeedback.blockReason`).
    Blocked(String),
    /// The server refused native tool calls (its words): the step is asked again with tools
    /// in text.
    ToolsRefused(String),
    /// The provider said the request does not fit the window (`limit`: the window it has, when
    /// it said).
    Overflow {
        reason: String,
        limit: Option<u64>,
    },
}

/// How the whole action file a task describes is introduced, to copy.
const COPY_MARK: &str = "The task's action as a whole file, to copy (put any other work the task asks for in its action function):";
/// What [`Runner::action_options_note`] adds: NEWACTION's options in one line, with field names
/// unlike any task's.
const ACTION_OPTIONS: &str = "\n\nNEWACTION options: input: '*title:String, email:Email, count:Number' (* = required; a request with missing or invalid input gets HTTP 400 before the action runs), route: 'POST /api/items/' (the action's own route), action: function($, model) { $.success(model.title); } (model holds the input).";

/// After a change worked in a run asked for one (constrained steps).
const DONE_AFTER_CHANGE: &str = "\n\nIf this was the last change the task needs, answer now with {\"answer\": \"what you changed\"}; otherwise make the next change.";
/// After a read in a run asked a question (constrained steps).
const DONE_AFTER_LOOK: &str =
    "\n\nIf this answers the question, answer now with {\"answer\": \"your answer\"}.";
/// [`DONE_AFTER_CHANGE`] where the answer comes after [`totem_tools::recover::DONE`].
const DONE_AFTER_CHANGE_DONE: &str = "\n\nThe change is made: write {\"done\": true}.";
/// [`DONE_AFTER_LOOK`] where the answer comes after [`totem_tools::recover::DONE`].
const DONE_AFTER_LOOK_DONE: &str = "\n\nIf this answers the question, write {\"done\": true}.";
/// [`REPEATED_LOOK`] for a run that was not asked to change anything.
const REPEATED_LOOK_QUESTION: &str = "\n\nYou made this same call in the step before and got the same result. Do not call it again: look at another file, or answer.";
/// Added to the second identical read-only call in a row.
const REPEATED_LOOK: &str = "\n\nYou made this same call in the step before and got the same result. Do not call it again: act on it (edit or write a file, run a command) or answer.";

impl From<DaemonError> for StepError {
    fn from(e: DaemonError) -> Self {
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
    prompt: Message,
    request: RunRequest,
    cancel: CancellationToken,
) -> Option<String> {
    let store = daemon.store();
    let Ok(live) = daemon.sessions.get(&agent.session_id) else {
        return None;
    };
    let message_id = prompt.id.clone();
    let started = async {
        if live.status() != SessionStatus::Running {
            let session = live.update(store, |s| s.status = SessionStatus::Running)?;
            live.emit(store, EventKind::SessionUpdated { session })?;
        }
        // The queued prompt takes its place in the conversation now, after the answers of the
        // runs before it.
        live.emit_with(store, |seq| {
            Ok(EventKind::MessageCreated {
                message: Message { seq, ..prompt },
            })
        })?;
        live.update(store, |s| s.message_count += 1)?;
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
                let _servers = runner
                    .start_mcp(&request.text, request.ask_to_start_servers)
                    .await;
                let outcome = runner.go(&mut changes).await;
                if matches!(outcome, Outcome::Aborted) {
                    runner.kill_jobs();
                }
                run_usage = runner.usage;
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
                    level: totem_protocol::NoticeLevel::Warning,
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
        Outcome::Blocked(reason) => {
            run.status = RunStatus::Failed;
            run.prompt_blocked = true;
            run.error = Some(format!(
                "{}. The prompt stays in the session but will not be sent to a model again",
                crate::redact::text(&reason)
            ));
            EventKind::RunFailed { run: run.clone() }
        }
        Outcome::Aborted => {
            run.status = RunStatus::Aborted;
            EventKind::RunAborted { run: run.clone() }
        }
    };
    // The run's end is its last event: the session turns idle just before it when nothing
    // waits, so a client reacting to the end finds the session free. Both are one write and one
    // announcement (the run's new status is stored with its end event): whoever sees the session
    // idle finds the run ended, in `run.get` and in the replay before anything done after.
    lock(&agent.queue).current = None;
    let idle = agent.queue_is_empty();
    if let Err(e) = live.end_run(store, kind, idle) {
        // The run ends now for everyone (`run.wait`, `runningRuns`, the clients following it);
        // its end is stored, with the same number, once the store writes again.
        tracing::warn!(run = %run.id, error = %e, "cannot store the end of the run; announcing it and storing it once the disk has room");
    }
    if run.status == RunStatus::Done {
        super::title::after_first_answer(daemon, &agent.session_id, &request.text);
    }
    used_model
}

/// One run's working state. Each file of the agent works on one group of it: the request's
/// [`Setup`], the [`ToolState`] of tool calls, the [`Conversation`] that compaction shortens.
pub(super) struct Runner {
    pub(super) daemon: Arc<Daemon>,
    pub(super) agent: Arc<SessionAgent>,
    pub(super) live: Arc<LiveSession>,
    pub(super) run_id: String,
    pub(super) cancel: CancellationToken,
    /// The settings in force when the run started.
    pub(super) settings: Arc<SettingsFile>,
    pub(super) model: ResolvedModel,
    /// What every request is made of besides the conversation.
    pub(super) setup: Setup,
    /// What tool calls use and leave behind.
    pub(super) tools: ToolState,
    /// The conversation the requests carry.
    pub(super) turns: Conversation,
    /// Tokens (and cost, when the model's prices are known) of this run so far.
    pub(super) usage: Option<Usage>,
}

impl Runner {
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

    pub(super) fn notice(&self, level: totem_protocol::NoticeLevel, text: String) {
        let _ = self.emit(EventKind::Notice {
            run_id: Some(self.run_id.clone()),
            level,
            text,
        });
    }

    async fn go(&mut self, changes: &mut Changes<'_>) -> Outcome {
        let mut compacted_for_overflow = false;
        // Steps in a row whose call could not be made, and the last unknown name called.
        let mut unusable = 0;
        let mut last_unknown = String::new();
        // Time spent waiting for the model (not for tools or the user).
        let mut model_time = std::time::Duration::ZERO;
        let mut max_steps = MAX_STEPS;
        // Output room for a step asked again after a tool call was cut at the output limit.
        let mut more_room: Option<u32> = None;
        // A word to the model for a step asked again after a malformed call (Gemini).
        let mut hint: Option<&str> = None;
        let mut hinted = false;
        // The next step is sampled hotter: the model repeated its last call.
        let mut heat = false;
        if self.setup.tool_offer.in_text()
            && self.model.small()
            && let Err(e) = self.read_named_files(changes).await
        {
            return step_failed(e);
        }
        for step in 0..MAX_STEPS {
            if self.cancel.is_cancelled() {
                return Outcome::Aborted;
            }
            if step == TIMED_STEPS {
                max_steps = scaled_step_cap(model_time / TIMED_STEPS as u32);
            }
            if step >= max_steps {
                let minutes = model_time.as_secs().div_ceil(60);
                return Outcome::Failed(format!(
                    "stopped after {step} model steps without a final answer (the model took {minutes} min; a model this slow gets {max_steps} steps a run); send another prompt to continue"
                ));
            }
            // Compaction is checked before every request, so a long run compacts mid-way too.
            let mut request = self.fit_request().await;
            if let Some(room) = more_room.take() {
                request.max_output_tokens = Some(room);
            }
            if let Some(hint) = hint.take() {
                request.messages.push(ModelMessage::user(hint));
            }
            if std::mem::take(&mut heat) {
                let hot = request
                    .temperature
                    .map_or(super::guide::HOT_TEMPERATURE, |t| {
                        t.max(super::guide::HOT_TEMPERATURE)
                    });
                request.temperature = Some(hot);
            }
            let context = u64::from(estimate_tokens(&request));
            let asked = std::time::Instant::now();
            let answered = self.step(request).await;
            model_time += asked.elapsed();
            let (completion, message_id, mut index) = match answered {
                Ok(done) => done,
                Err(StepError::Aborted) => return Outcome::Aborted,
                Err(StepError::Failed(reason)) => return Outcome::Failed(reason),
                Err(StepError::Blocked(reason)) => return Outcome::Blocked(reason),
                Err(StepError::ToolsRefused(reason)) => {
                    if self.tools_in_text() {
                        continue;
                    }
                    return Outcome::Failed(reason);
                }
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
                            totem_protocol::NoticeLevel::Warning,
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

            match self.ending(&completion, context, compacted_for_overflow) {
                Ending::Go => {}
                Ending::Fail(reason) => return Outcome::Failed(reason),
                Ending::AgainWithRoom(room) => {
                    more_room = Some(room);
                    continue;
                }
                Ending::Malformed(_) if !hinted => {
                    hinted = true;
                    self.notice(
                        totem_protocol::NoticeLevel::Warning,
                        "The model wrote a malformed tool call; asking it again once.".into(),
                    );
                    hint = Some(MALFORMED_CALL_HINT);
                    continue;
                }
                Ending::Malformed(words) => {
                    return Outcome::Failed(format!(
                        "The model wrote a malformed tool call twice{}. Try again, rephrase the prompt, or pick another model",
                        if words.is_empty() {
                            String::new()
                        } else {
                            format!(" ({words})")
                        }
                    ));
                }
                Ending::Compact => {
                    compacted_for_overflow = true;
                    if self.compact_all().await.is_ok() {
                        continue;
                    }
                    return Outcome::Failed(
                        "The conversation no longer fits the model's context: run /compact, start a new session, or pick a model with a larger window".into(),
                    );
                }
                Ending::Continue => {
                    // Anthropic `pause_turn`: the turn goes back as it is and the model goes on.
                    if !completion.parts.is_empty() {
                        self.turns.current.push(ModelMessage::Assistant {
                            parts: completion.parts.clone(),
                        });
                        self.turns.turn_seqs.push(self.turns.step_seq);
                    }
                    continue;
                }
            }

            let mut parts = completion.parts.clone();
            let raw = completion.text();
            if self.setup.tool_offer.constrained {
                // A constrained final answer: its text, not the JSON around it.
                let mut shaper = super::constrained::AnswerText::default();
                let answer = shaper.push(&raw);
                if shaper.is_json() && !answer.is_empty() {
                    parts.retain(|p| !matches!(p, AssistantPart::Text { .. }));
                    parts.push(AssistantPart::Text {
                        text: answer,
                        signature: None,
                    });
                }
            }
            let mut calls: Vec<ToolCall> = completion.tool_calls().cloned().collect();
            let mut unreadable = None;
            // A model set to `tools: none` only answers: a call it writes as JSON stays text.
            let plain = std::mem::take(&mut self.tools.answered_plainly);
            if calls.is_empty() && self.setup.tool_offer.mode != ToolMode::None && !plain {
                let mut found = self.tools.registry.calls_from_text(&raw);
                if found.is_empty() {
                    // Written as a call but of no tool there is (it gets the list of names), or
                    // not JSON at all (it gets the parse error).
                    match totem_tools::recover::bad_call_in_text(&raw) {
                        Some(BadCall::UnknownTool { name, arguments }) => {
                            found.push(totem_tools::recover::TextCall { name, arguments });
                        }
                        Some(BadCall::Unreadable { error }) => unreadable = Some(error),
                        None => {}
                    }
                }
                for mut found in found {
                    // A tiny model names the file it writes; its content comes as a code block.
                    if found.name == "write"
                        && self.setup.tool_offer.writes_code_blocks()
                        && found.arguments.get("content").is_none()
                        && let Some(path) = found.arguments["path"].as_str().map(str::to_string)
                    {
                        match self.code_block(&message_id, &raw, &path).await {
                            Ok(Some(content)) => {
                                if let Some(arguments) = found.arguments.as_object_mut() {
                                    arguments.insert("content".into(), content.into());
                                }
                            }
                            // The write's own error says the content is missing.
                            Ok(None) => {}
                            Err(e) => return step_failed(e),
                        }
                    }
                    let call = ToolCall {
                        id: totem_provider::synthetic_call_id("text_"),
                        name: found.name,
                        arguments: found.arguments,
                        signature: None,
                    };
                    if let Err(e) = self.store_call(&message_id, index, &call) {
                        return step_failed(e);
                    }
                    index += 1;
                    parts.push(AssistantPart::ToolCall(call.clone()));
                    calls.push(call);
                }
            }
            if !parts.is_empty() {
                self.turns.current.push(ModelMessage::Assistant { parts });
                self.turns.turn_seqs.push(self.turns.step_seq);
            }
            if let Some(error) = unreadable {
                unusable += 1;
                if unusable >= MAX_UNUSABLE_CALLS {
                    return self.cannot_call(format!("its last call could not be read ({error})"));
                }
                self.notice(
                    totem_protocol::NoticeLevel::Warning,
                    format!("The model's tool call could not be read ({error}); it is asked to write it again."),
                );
                self.turns.current.push(ModelMessage::user(format!(
                    "Your tool call could not be read: {error}. Write it again as one JSON object with the tool's name and its arguments, without comments or other text."
                )));
                continue;
            }
            if calls.is_empty() {
                if completion.parts.is_empty() {
                    self.notice(
                        totem_protocol::NoticeLevel::Warning,
                        "The model returned an empty answer.".into(),
                    );
                } else if !plain && looks_like_a_call(&raw) {
                    // `tools: none`: the model wrote a call nobody runs.
                    self.notice(
                        totem_protocol::NoticeLevel::Warning,
                        "The model's last answer is a tool call written as JSON, not an answer: it is offered no tools (\"tools\": \"none\" in its settings), so nothing was run.".into(),
                    );
                } else if let Some(finding) = self.boot_check().await {
                    // The answer counts once the app boots: the model gets what broke.
                    self.turns.current.push(finding);
                    self.tools.settled = false;
                    continue;
                }
                if self.cancel.is_cancelled() {
                    return Outcome::Aborted;
                }
                return Outcome::Done;
            }
            let mut all_unknown = true;
            for call in calls {
                if self.cancel.is_cancelled() {
                    return Outcome::Aborted;
                }
                if let Err(e) = self.emit(EventKind::PartStarted {
                    run_id: self.run_id.clone(),
                    message_id: message_id.clone(),
                    index,
                    part_type: totem_protocol::PartType::ToolResult,
                }) {
                    return step_failed(e);
                }
                let (mut output, is_error) = self.call(&call, changes).await;
                self.edit_made_before(&call, &mut output, is_error);
                // A look repeated at once gets its result and a push onwards: small models read
                // the same file over and over until the repeat guard ends the run (bench-tasks).
                let changes_asked = self.setup.changes_asked;
                let reread = self.read_again(&call, &output, is_error);
                if !is_error
                    && (self.tools.repeats.count() == 2 || reread)
                    && matches!(call.name.as_str(), "read" | "list" | "grep" | "glob")
                {
                    output.push_str(if changes_asked {
                        REPEATED_LOOK
                    } else {
                        REPEATED_LOOK_QUESTION
                    });
                }
                // A small model lists folder after folder without reading a file (the 1.5B
                // listed five, three of them guessed, then answered with the file names): a
                // list before any read names the file to read, as a call it can copy.
                if !is_error
                    && call.name == "list"
                    && self.setup.tool_offer.constrained
                    && !self.has_read()
                    && let Some(path) = super::guide::first_listed_file(
                        call.arguments["path"].as_str().unwrap_or("."),
                        &output,
                        self.prompt().unwrap_or(""),
                    )
                {
                    let read = serde_json::json!({"name": "read", "arguments": {"path": path}});
                    output.push_str(&format!(
                        "\n\nTo see what a file holds, read it, e.g. {read}"
                    ));
                }
                // A small model goes on after the work is done (the 1.5B added the route, then
                // rewrote views/layout.html three times; it read the controller, then looked
                // for files that do not exist): a result that may end the task says so.
                // A JavaScript file read or written gets its syntax checked: the model is told
                // the line of the first error, and is not told it may be done.
                let mut broken = false;
                // A failed edit of a broken file says so too (the 1.5B was told "not found" and
                // took the file for fixed).
                if (!is_error || call.name == "edit")
                    && let Some(found) = self.syntax_note(&call).await
                {
                    output.push_str(&found);
                    broken = true;
                }
                if !is_error && let Some(routes) = self.routes_note(&call) {
                    output.push_str(&routes);
                }
                if !is_error && let Some(options) = self.action_options_note(&call) {
                    output.push_str(&options);
                }
                // A change the conventions check says broke the app (a route removed, an
                // error added) is not a place to stop either: the 0.5B broke a route and was
                // told in the same result that it could answer now.
                broken |= totem_totaljs::BREAK_MARKS
                    .iter()
                    .any(|m| output.contains(m));
                // An action file still unlike the task that describes it: the whole file again.
                let action_path = super::guide::key(call.arguments["path"].as_str().unwrap_or(""));
                if !is_error
                    && self.setup.tool_offer.constrained
                    && self.setup.totaljs
                    && super::guide::CHANGE_TOOLS.contains(&call.name.as_str())
                    && action_path.starts_with("actions/")
                    && !output.contains(COPY_MARK)
                    && (broken || self.action_unlike_task())
                    && let Some(copy) = self.action_file_copy(&action_path)
                {
                    output.push_str(&copy);
                }
                self.tools.settled = false;
                if !is_error && !broken && self.setup.tool_offer.constrained {
                    let changed = super::guide::CHANGE_TOOLS.contains(&call.name.as_str())
                        || output.contains(super::guide::COMMAND_CHANGED);
                    let done = self.setup.tool_offer.writes_code_blocks();
                    let left = &self.tools.named_unchanged;
                    if changes_asked && changed && !left.is_empty() {
                        output.push_str(&still_named(self.tools.ctx.root(), left));
                    }
                    // What an earlier change removed is still missing: the 1.5B was told its
                    // edit removed Products|list, changed the controller next, was told it may
                    // answer, and did.
                    let project = if changes_asked && changed && self.setup.totaljs {
                        totem_totaljs::route_files(self.tools.ctx.root())
                    } else {
                        Vec::new()
                    };
                    let removed = self.removed_by_run(&project);
                    if !removed.is_empty() {
                        output.push_str(&format!(
                            "\n\nYour changes removed {}, which the project had before. Put {} back unless the task is to remove {}.",
                            removed.join(", "),
                            if removed.len() == 1 { "it" } else { "them" },
                            if removed.len() == 1 { "it" } else { "them" },
                        ));
                        if let Some(restore) = self.restore_call(&removed) {
                            output.push_str(&restore);
                        }
                    }
                    // A route the task names that no file declares: the 1.5B wrote the action
                    // of "served at POST /api/contact/" without a route, and the app answered 404.
                    let undeclared = if project.is_empty() {
                        Vec::new()
                    } else {
                        let prompt = self.prompt().unwrap_or("");
                        totem_totaljs::undeclared_routes(
                            &project,
                            &super::guide::named_routes(prompt),
                        )
                    };
                    for route in &undeclared {
                        output.push_str(&super::guide::undeclared_route(
                            route,
                            self.prompt().unwrap_or(""),
                        ));
                    }
                    let prompt = self.prompt().unwrap_or("");
                    let input = super::guide::missing_input(prompt, &project);
                    let answer = super::guide::missing_success(prompt, &project);
                    for told in input.iter().chain(&answer) {
                        output.push_str(told);
                    }
                    let left = &self.tools.named_unchanged;
                    self.tools.settled = changes_asked
                        && changed
                        && left.is_empty()
                        && removed.is_empty()
                        && undeclared.is_empty()
                        && input.is_none()
                        && answer.is_none();
                    if self.tools.settled {
                        output.push_str(if done {
                            DONE_AFTER_CHANGE_DONE
                        } else {
                            DONE_AFTER_CHANGE
                        });
                    } else if !changes_asked && call.name == "read" {
                        output.push_str(if done {
                            DONE_AFTER_LOOK_DONE
                        } else {
                            DONE_AFTER_LOOK
                        });
                    }
                }
                let unknown = is_error && output.starts_with("unknown tool");
                all_unknown &= unknown;
                if unknown {
                    last_unknown = call.name.clone();
                }
                let cycle = self
                    .tools
                    .cycles
                    .record(&call.name, &call.arguments, &output);
                if let Err(e) = self.tool_result(&message_id, index, &call, output, is_error) {
                    return step_failed(e);
                }
                index += 1;
                if let Some(cycle) = cycle {
                    let text = format!(
                        "The model made the same {} calls over and over with the same results: {}. The run was stopped.",
                        cycle.len(),
                        cycle.join(", then ")
                    );
                    self.notice(totem_protocol::NoticeLevel::Warning, text);
                    return Outcome::Failed(format!(
                        "stopped: the model repeated the same {} calls 3 times with the same results ({}); try again with a clearer prompt or a larger model",
                        cycle.len(),
                        cycle.join(", then ")
                    ));
                }
                if self.tools.repeats.count() >= MAX_SAME_CALLS {
                    return Outcome::Failed(format!(
                        "stopped: the model called {} {MAX_SAME_CALLS} times in a row with the same arguments; try again with a clearer prompt or a larger model",
                        call.name
                    ));
                }
            }
            // A small model given the same conversation at a low temperature writes the same
            // call again; the step after a repeat is sampled hotter (bench-tasks).
            // Not for a model that writes code blocks: the repeated look is not offered again
            // anyway, and at 0.8 the 0.5B wrote its heading into views/layout.html instead of
            // views/index.html (at 0.2: index.html in 4 of 4 replays).
            heat = self.setup.tool_offer.in_text()
                && !self.setup.tool_offer.writes_code_blocks()
                && self.tools.repeats.count() >= 2;
            if all_unknown {
                unusable += 1;
                if unusable >= MAX_UNUSABLE_CALLS {
                    return self.cannot_call(format!(
                        "it called {last_unknown:?}, which is not one of its tools"
                    ));
                }
            } else {
                unusable = 0;
            }
        }
        Outcome::Failed(format!(
            "stopped after {MAX_STEPS} model steps without a final answer; send another prompt to continue"
        ))
    }

    /// Reads the files the user's prompt names ("… in controllers/default.js") as the run's first
    /// step, stored as Totem's own `read` calls: a small model then starts from their content
    /// instead of spending steps (10–50 s each on a CPU) finding and reading them, or writing
    /// over them unread. Secret files and files outside the project are left to the model.
    async fn read_named_files(&mut self, changes: &mut Changes<'_>) -> Result<(), StepError> {
        let secrets = self.tools.policy.secrets();
        let prompt = self.prompt().unwrap_or("");
        let root = self.tools.ctx.root();
        let mut files = super::guide::named_files(prompt, root, |rel| secrets.is_secret(rel));
        let mut named = files.clone();
        named.extend(super::guide::new_files_named(prompt, root, |rel| {
            secrets.is_secret(rel)
        }));
        // A Total.js prompt that names no file: the files of the folders its words point at
        // ("routes": controllers/).
        if files.is_empty() && self.setup.totaljs {
            files = super::guide::topic_files(prompt, root, |rel| secrets.is_secret(rel));
        }
        self.tools.named_unchanged = named;
        if files.is_empty() {
            return Ok(());
        }
        let message_id = crate::util::new_id("msg");
        self.create_message(&message_id, &mut false)?;
        let calls: Vec<ToolCall> = files
            .iter()
            .map(|path| ToolCall {
                id: totem_provider::synthetic_call_id("totem_"),
                name: "read".into(),
                arguments: serde_json::json!({ "path": path }),
                signature: None,
            })
            .collect();
        let mut index = 0;
        for call in &calls {
            self.store_call(&message_id, index, call)?;
            index += 1;
        }
        self.turns.current.push(ModelMessage::Assistant {
            parts: calls.iter().cloned().map(AssistantPart::ToolCall).collect(),
        });
        self.turns.turn_seqs.push(self.turns.step_seq);
        for call in calls {
            self.emit(EventKind::PartStarted {
                run_id: self.run_id.clone(),
                message_id: message_id.clone(),
                index,
                part_type: totem_protocol::PartType::ToolResult,
            })?;
            let (mut output, is_error) = self.call(&call, changes).await;
            self.read_again(&call, &output, is_error);
            if !is_error && let Some(found) = self.syntax_note(&call).await {
                output.push_str(&found);
            }
            if !is_error && let Some(routes) = self.routes_note(&call) {
                output.push_str(&routes);
            }
            self.tool_result(&message_id, index, &call, output, is_error)?;
            index += 1;
        }
        Ok(())
    }

    /// Whether `call` read a file this run already read with the same result (and a different
    /// call came between: a call repeated at once is the repeat guard's). Remembered for the
    /// next step's offer (constrained steps).
    fn read_again(&mut self, call: &ToolCall, output: &str, is_error: bool) -> bool {
        use std::hash::{Hash, Hasher};
        self.tools.reread = false;
        if is_error || call.name != "read" || !self.setup.tool_offer.constrained {
            return false;
        }
        let path = super::guide::key(call.arguments["path"].as_str().unwrap_or(""));
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (
            output,
            call.arguments["offset"].as_u64(),
            call.arguments["limit"].as_u64(),
        )
            .hash(&mut hasher);
        let hash = hasher.finish();
        let again = self.tools.reads.insert(path, hash) == Some(hash);
        self.tools.reread = again && self.tools.repeats.count() < 2;
        self.tools.reread
    }

    /// What `node --check` finds wrong in the JavaScript file `call` read, wrote or edited
    /// (constrained steps only; see [`super::syntax`]). A file unchanged since its last check in
    /// this run gets that check's finding without node running again.
    async fn syntax_note(&mut self, call: &ToolCall) -> Option<String> {
        if !self.setup.tool_offer.constrained
            || !matches!(call.name.as_str(), "read" | "write" | "edit")
        {
            return None;
        }
        let path = super::guide::key(call.arguments["path"].as_str().unwrap_or(""));
        let note = self.tools.syntax.note(self.tools.ctx.root(), &path).await?;
        // A model that writes code blocks fixes a line by writing the file (it ran the app,
        // over and over, on "Fix that line").
        Some(if self.setup.tool_offer.writes_code_blocks() {
            format!("{note} Write the file with it fixed.")
        } else {
            note
        })
    }

    /// The routes a JavaScript file of a Total.js project declares, in one plain line after its
    /// `read`, when the task is a question (constrained steps only; see
    /// [`totem_totaljs::describe_routes`]). Not when it asks for a change: asked to add a route,
    /// the 1.5B copied the line's `GET /api/products/ (action Products|list)` into
    /// `ROUTE('GET /api/ping/ --> Products|ping')`, an action that does not exist.
    fn routes_note(&mut self, call: &ToolCall) -> Option<String> {
        if !self.setup.tool_offer.constrained
            || !self.setup.totaljs
            || self.setup.changes_asked
            || call.name != "read"
        {
            return None;
        }
        let path = super::guide::key(call.arguments["path"].as_str().unwrap_or(""));
        if !path.ends_with(".js") {
            return None;
        }
        let file = self.tools.ctx.root().join(&path);
        if std::fs::metadata(&file).ok()?.len() > 512 * 1024 {
            return None;
        }
        let content = std::fs::read_to_string(file).ok()?;
        if let Some(routes) = totem_totaljs::route_summary(&content) {
            let line = format!("\n\nRoutes this file declares: {routes}.");
            self.tools.routes_read.retain(|(p, _)| *p != path);
            self.tools.routes_read.push((path, routes));
            return Some(line);
        }
        // A file without routes after one with them: the 1.5B read the controller, then the
        // action, and answered that the app has "a single route", the action's (c32). Told
        // first that "this file declares no routes", it answered just that (c33).
        let earlier: Vec<String> = self
            .tools
            .routes_read
            .iter()
            .map(|(p, routes)| format!("{routes} (in {p})"))
            .collect();
        (!earlier.is_empty()).then(|| format!("\n\nRoutes read so far: {}.", earlier.join("; ")))
    }

    /// The routes and actions of a Total.js project that the files this run changed declared
    /// before it and that no file of `project` (its route files now) declares (see
    /// [`totem_totaljs::removed_by_run`]).
    fn removed_by_run(&self, project: &[(String, String)]) -> Vec<String> {
        if project.is_empty() {
            return Vec::new();
        }
        let before = self.scripts_before_run();
        if before.is_empty() {
            return Vec::new();
        }
        totem_totaljs::removed_by_run(&before, project)
    }

    /// The JavaScript files this run changed that existed before it, with their text then,
    /// sorted by path.
    fn scripts_before_run(&self) -> Vec<(String, String)> {
        let mut before: Vec<(String, String)> = self
            .tools
            .boot_before
            .iter()
            .filter(|(rel, _)| rel.ends_with(".js"))
            .filter_map(|(rel, text)| Some((rel.clone(), text.clone()?)))
            .collect();
        before.sort();
        before
    }

    /// NEWACTION's options, once a run, after the first change of a file in actions/ (constrained
    /// steps in a Total.js project). The small-model prompt names NEWACTION only; the 1.5B wrote
    /// an action "that takes a required email" with no `input`, so nothing checked the email.
    fn action_options_note(&mut self, call: &ToolCall) -> Option<String> {
        let path = super::guide::key(call.arguments["path"].as_str().unwrap_or(""));
        if !self.setup.tool_offer.constrained
            || !self.setup.totaljs
            || self.tools.action_options_told
            || !matches!(call.name.as_str(), "write" | "edit")
            || !path.starts_with("actions/")
            || !path.ends_with(".js")
        {
            return None;
        }
        self.tools.action_options_told = true;
        // The task's own action, whole, where it names one: told the options in general, the
        // 1.5B wrote `$.view()` back five times, and no `input` (c34, c36).
        let prompt = self.prompt().unwrap_or("");
        let route = self.task_route_outside(&path);
        let mut note = match super::guide::action_skeleton(prompt, &path, route.as_ref()) {
            Some(skeleton) => format!("\n{skeleton}"),
            None => return Some(ACTION_OPTIONS.to_string()),
        };
        if let Some(copy) = self.action_file_copy(&path) {
            note.push_str(&copy);
        }
        Some(note)
    }

    /// The route the task names, unless a file other than `path` declares it: the change ran
    /// already, and the action's own `route:` belongs in what it is shown (the 0.5B was shown
    /// its action without the route it had written, c40).
    fn task_route_outside(&self, path: &str) -> Option<String> {
        let mut others = totem_totaljs::route_files(self.tools.ctx.root());
        others.retain(|(p, _)| p != path);
        let prompt = self.prompt().unwrap_or("");
        totem_totaljs::undeclared_routes(&others, &super::guide::named_routes(prompt))
            .into_iter()
            .next()
    }

    /// Whether the task's action lacks the `input` or the `$.success()` the task describes.
    fn action_unlike_task(&self) -> bool {
        let prompt = self.prompt().unwrap_or("");
        let project = totem_totaljs::route_files(self.tools.ctx.root());
        super::guide::missing_input(prompt, &project).is_some()
            || super::guide::missing_success(prompt, &project).is_some()
    }

    /// For an action file `path` that holds only the task's action, written otherwise than a
    /// task that describes it completely: the whole file, to copy. The 1.5B wrote
    /// Contact|create with `$.view()` and no route, then copied the conventions finding's words
    /// into it as code (c39); shown the file once, it took its route and input and kept its
    /// `$.view()` (c43), so it is shown again while the action is still wrong.
    fn action_file_copy(&self, path: &str) -> Option<String> {
        // A model that writes code blocks sends no content in its calls: its request for the
        // file's content shows the task's action (see `blocks.rs`).
        if self.setup.tool_offer.writes_code_blocks() {
            return None;
        }
        let prompt = self.prompt().unwrap_or("");
        let now = std::fs::read_to_string(self.tools.ctx.root().join(path)).ok()?;
        let only_the_action = super::guide::named_action_block(prompt, &now)
            .is_some_and(|block| block.trim() == now.trim());
        let file = super::guide::action_file(prompt, path, self.task_route_outside(path).as_ref())?;
        if !only_the_action || super::guide::same_code(&now, &file) {
            return None;
        }
        let copy =
            serde_json::json!({"name": "write", "arguments": {"path": path, "content": file}});
        Some(format!("\n{COPY_MARK} {copy}"))
    }

    /// The call that puts the first removed action of `removed` back as it was, at the end of the
    /// file that declared it, as a sentence to append (a model that writes JSON content only):
    /// told to put Products|list back, the 1.5B sent the same rename again until stopped (c29).
    fn restore_call(&self, removed: &[String]) -> Option<String> {
        if self.setup.tool_offer.writes_code_blocks() {
            return None;
        }
        let root = self.tools.ctx.root();
        let before = self.scripts_before_run();
        for id in removed.iter().filter_map(|r| r.strip_prefix("the action ")) {
            for (rel, text) in &before {
                let Some(block) = totem_totaljs::action_block(text, id) else {
                    continue;
                };
                let now = std::fs::read_to_string(root.join(rel.as_str())).unwrap_or_default();
                if now.len() + block.len() > super::guide::WHOLE_FILE_CALL_BYTES {
                    return None;
                }
                let content = format!("{}\n\n{block}\n", now.trim_end());
                let call = serde_json::json!({"name": "write", "arguments": {"path": rel, "content": content}});
                return Some(format!(
                    " To put {id} back as it was, beside your changes, copy this call: {call}"
                ));
            }
        }
        None
    }

    /// Whether a `read` of this run worked.
    fn has_read(&self) -> bool {
        self.turns.current.iter().any(
            |m| matches!(m, ModelMessage::ToolResult(r) if r.tool_name == "read" && !r.is_error),
        )
    }

    /// A call's result: stored as part `index` of the step's message, and in the conversation.
    fn tool_result(
        &mut self,
        message_id: &str,
        index: u32,
        call: &ToolCall,
        output: String,
        is_error: bool,
    ) -> Result<(), StepError> {
        let part = Part::ToolResult {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            output: output.clone(),
            is_error,
        };
        self.finish_part(message_id, index, part)?;
        self.turns
            .current
            .push(ModelMessage::ToolResult(totem_provider::ToolResult {
                call_id: call.id.clone(),
                tool_name: call.name.clone(),
                content: output,
                is_error,
            }));
        Ok(())
    }

    /// The server refused native tool calls: the model is offered its tools in text from now
    /// on (remembered until the daemon restarts), with a notice. `false` when its settings keep
    /// it on native tools.
    fn tools_in_text(&mut self) -> bool {
        let offer = self.model.text_tool_offer();
        if offer.mode == ToolMode::Native {
            return false;
        }
        super::lock(&self.daemon.agents.text_tools).insert(self.model.name.clone());
        let unconstrained =
            super::lock(&self.daemon.agents.unconstrained).contains(&self.model.name);
        self.setup.tool_offer = ToolOffer {
            constrained: offer.constrained && !unconstrained,
            ..offer
        };
        self.setup.system = self.render_system();
        self.notice(
            totem_protocol::NoticeLevel::Warning,
            format!(
                "The server of {} does not take native tool calls (vLLM needs --enable-auto-tool-choice and --tool-call-parser), so the tools are described in the prompt and its calls read from its text. Set \"tools\": \"text\" in the model's settings to skip the attempt.",
                self.model.name
            ),
        );
        true
    }

    /// Ends a run whose model could not call a tool [`MAX_UNUSABLE_CALLS`] steps in a row: a
    /// notice says so and the run fails (`totem run` exits non-zero).
    fn cannot_call(&self, why: String) -> Outcome {
        let text = format!(
            "The model could not call a tool {MAX_UNUSABLE_CALLS} times in a row: {why}. Try a larger model, or a clearer prompt."
        );
        self.notice(totem_protocol::NoticeLevel::Warning, text.clone());
        Outcome::Failed(format!("stopped: the model could not call a tool: {why}"))
    }

    /// What the way an answer ended means for the run: an end that is not "done" (cut at the
    /// output limit, refused, filtered, out of context, paused) is never taken for a finished
    /// answer.
    fn ending(&self, completion: &Completion, context: u64, compacted: bool) -> Ending {
        let cut_calls = completion.tool_calls().count() > 0;
        match &completion.finish {
            // Gemini: MAX_TOKENS before any answer means thinking took the whole budget.
            Some(FinishReason::Length)
                if completion
                    .parts
                    .iter()
                    .all(|p| matches!(p, AssistantPart::Reasoning { .. })) =>
            {
                Ending::Fail(
                    "The model reached its output limit before answering: its thinking used the whole output budget. Raise maxOutputTokens for the model or lower the reasoning level".into(),
                )
            }
            // A small model that wrote its call whole, then ran on with keys of its own until
            // the limit cut it: the call is read from its text like any other.
            Some(FinishReason::Length) if !cut_calls && self.whole_call_in_text(completion) => {
                Ending::Go
            }
            Some(FinishReason::Length) => {
                let used = completion.usage.map_or(0, |u| u.output_tokens);
                let room = u32::try_from(used.saturating_mul(2).max(8192)).unwrap_or(u32::MAX);
                let fits = self
                    .window()
                    .is_none_or(|window| context + u64::from(room) <= window);
                if cut_calls && fits && used > 0 {
                    self.notice(
                        totem_protocol::NoticeLevel::Warning,
                        format!(
                            "The model's tool call was cut at its output limit ({used} tokens); asking again with room for {room}."
                        ),
                    );
                    return Ending::AgainWithRoom(room);
                }
                Ending::Fail(if cut_calls {
                    "The model's tool call was cut at its output limit and the context leaves no more room; raise maxOutputTokens for the model or start a new session".into()
                } else {
                    "The answer was cut: the model reached its output limit. Ask it to continue, or raise maxOutputTokens for the model".into()
                })
            }
            Some(FinishReason::ContentFilter) => Ending::Fail(
                "The provider stopped the answer: the model refused or its safety filter blocked it. Rephrase the prompt or try another model".into(),
            ),
            Some(FinishReason::ContextWindow) if !compacted && self.has_older_turns() => {
                self.notice(
                    totem_protocol::NoticeLevel::Warning,
                    "The model ran out of context window mid-answer; compacting the conversation and trying again.".into(),
                );
                Ending::Compact
            }
            Some(FinishReason::ContextWindow) => Ending::Fail(
                "The answer was cut: the model ran out of context window. Run /compact, start a new session, or pick a model with a larger window".into(),
            ),
            Some(FinishReason::Other(reason)) if reason == "pause_turn" => Ending::Continue,
            Some(FinishReason::Other(reason)) if reason.starts_with("MALFORMED_FUNCTION_CALL") => {
                let words = reason
                    .strip_prefix("MALFORMED_FUNCTION_CALL")
                    .unwrap_or_default()
                    .trim_start_matches(':')
                    .trim();
                Ending::Malformed(words.to_owned())
            }
            _ => Ending::Go,
        }
    }

    /// An edit that worked is remembered; the same edit again, now "not found", is told it was
    /// made and what its line reads now (the 1.5B turned `about;` into `about`, then sent that
    /// edit four more times, each told only "oldString not found").
    fn edit_made_before(&mut self, call: &ToolCall, output: &mut String, is_error: bool) {
        if !is_error && super::guide::CHANGE_TOOLS.contains(&call.name.as_str()) {
            self.tools.edit_stuck = false;
        }
        if call.name != "edit" {
            return;
        }
        let text = |key: &str| call.arguments[key].as_str().unwrap_or_default().to_string();
        let key = (text("path"), text("oldString"), text("newString"));
        if !is_error {
            let line = output
                .split_once(": line ")
                .and_then(|(_, rest)| {
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    digits.parse().ok()
                })
                .unwrap_or(0);
            self.tools.edits_made.insert(key, line);
            return;
        }
        let Some(&line) = self.tools.edits_made.get(&key) else {
            return;
        };
        if !output.starts_with("oldString not found") {
            return;
        }
        let now = std::fs::read_to_string(self.tools.ctx.root().join(&key.0))
            .ok()
            .and_then(|content| {
                let text = content
                    .lines()
                    .nth(line.checked_sub(1)?)?
                    .trim()
                    .to_string();
                Some(format!(
                    " Line {line} of {} now reads: {}",
                    key.0,
                    text.chars().take(160).collect::<String>()
                ))
            })
            .unwrap_or_default();
        self.tools.edit_stuck = true;
        *output = format!(
            "This edit was already made by your earlier call, so its oldString is gone; do not make it again.{now}"
        );
    }

    /// Whether the text of an answer holds a tool call whose name and arguments are whole, for a
    /// model whose calls are read from its text.
    fn whole_call_in_text(&self, completion: &Completion) -> bool {
        self.setup.tool_offer.mode != ToolMode::None
            && !self.tools.answered_plainly
            && !self
                .tools
                .registry
                .calls_from_text(&completion.text())
                .is_empty()
    }

    /// Kills the background jobs this run started (on abort).
    fn kill_jobs(&self) {
        for id in &self.tools.jobs_started {
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

/// The step cap for a model whose steps take `per_step` each: what fits in [`STEP_BUDGET`],
/// between [`MIN_STEPS`] and [`MAX_STEPS`].
fn scaled_step_cap(per_step: std::time::Duration) -> usize {
    let fits = STEP_BUDGET.as_secs_f64() / per_step.as_secs_f64().max(0.001);
    (fits as usize).clamp(MIN_STEPS, MAX_STEPS)
}

/// A bare JSON object written as a tool call (`{"name": …, "arguments": …}`).
fn looks_like_a_call(text: &str) -> bool {
    let text = text.trim();
    text.starts_with('{')
        && text.ends_with('}')
        && totem_tools::recover::bad_call_in_text(text).is_some()
}

/// What to do after an answer, by the way it ended.
enum Ending {
    /// A finished answer (or tool calls): go on as usual.
    Go,
    /// The run fails with this reason.
    Fail(String),
    /// Ask the same again with this much output room.
    AgainWithRoom(u32),
    /// Compact the conversation and ask again.
    Compact,
    /// Send the answer back as it is and let the model go on (Anthropic `pause_turn`).
    Continue,
    /// The model wrote a call the provider could not read (Gemini `MALFORMED_FUNCTION_CALL`),
    /// with the provider's words on it.
    Malformed(String),
}

/// What the model is told when asked again after a malformed tool call.
const MALFORMED_CALL_HINT: &str = "Your last tool call was malformed and could not be read. Call the tool again with arguments that are one valid JSON object matching its parameters, or answer in text.";

fn step_failed(e: StepError) -> Outcome {
    match e {
        StepError::Aborted => Outcome::Aborted,
        StepError::Failed(reason)
        | StepError::Blocked(reason)
        | StepError::ToolsRefused(reason)
        | StepError::Overflow { reason, .. } => Outcome::Failed(reason),
    }
}

/// "The task also names controllers/default.js, which you have not changed yet: …" for the
/// files a task names that the run has not changed, and "… actions/contact.js, which does not
/// exist yet: create it …" for those it has not created.
fn still_named(root: &std::path::Path, left: &[String]) -> String {
    let (there, missing): (Vec<&String>, Vec<&String>) =
        left.iter().partition(|f| root.join(f.as_str()).exists());
    let join = |files: &[&String]| {
        files
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join(" and ")
    };
    let mut out = String::new();
    if !there.is_empty() {
        out.push_str(&format!(
            "\n\nThe task also names {}, which you have not changed yet: change it next if the task needs it.",
            join(&there)
        ));
    }
    if !missing.is_empty() {
        let (it, does) = if missing.len() == 1 {
            ("it", "does")
        } else {
            ("them", "do")
        };
        out.push_str(&format!(
            "\n\nThe task also names {}, which {does} not exist yet: create {it} next if the task needs {it}.",
            join(&missing)
        ));
    }
    out
}
