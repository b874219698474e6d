//! Request preparation: a run's [`Runner`] made from the settings, the mode and the session
//! (policy, tool context, instruction files, the stored conversation), and each step's request
//! (system prompt, messages, tools) built from it.

use std::collections::HashSet;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use totem_protocol::{EventKind, Message, Part, ReasoningLevel, Run};
use totem_provider::{
    AssistantPart, ChatRequest, Message as ModelMessage, ToolDefinition, ToolMode,
};
use totem_snapshot::DirBlobStore;
use totem_tools::recover::RepeatGuard;
use totem_tools::{BlobSink, EventSink, ToolContext, ToolEvent};

use super::call::ToolState;
use super::compact::Conversation;
use super::guide;
use super::history::to_model_messages;
use super::run::Runner;
use super::settings::{ToolOffer, provider_for};
use super::system::{SystemPrompt, instruction_commands};
use super::{RunRequest, SessionAgent};
use crate::daemon::Daemon;
use crate::session::LiveSession;

/// What `write` takes when the content comes as a code block in the next answer, and `read`
/// for a model that writes code blocks (the whole file).
static PATH_ONLY: std::sync::LazyLock<serde_json::Value> = std::sync::LazyLock::new(|| {
    serde_json::json!({
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    })
});

/// How `write` is described when the content comes as a code block.
const CODE_BLOCK_WRITE_DESCRIPTION: &str = "Write a file's whole new content: give only its path here; you are then asked for the content, which you write in one code block.";

/// How `read` is described to a model that writes code blocks.
const WHOLE_READ_DESCRIPTION: &str = "Read a text file; lines are numbered.";

/// The calls of a run so far, as [`Runner::tally`] counts them.
#[derive(Debug, Default)]
struct Tally {
    calls: usize,
    ok: usize,
    failed: usize,
    changed: bool,
}

/// What every request of a run is made of besides the conversation.
pub(super) struct Setup {
    /// Only the read-only tools (Plan mode, or an agent marked `readOnly`).
    pub(super) read_only: bool,
    agent_prompt: Option<String>,
    reasoning: ReasoningLevel,
    /// A Total.js 5 project: the reminder and the conventions check apply.
    pub(super) totaljs: bool,
    /// The Total.js 5 primer goes in the system prompt: a Total.js 5 project and a model that
    /// is not small (there, the primer's essentials in a few lines stand in for it).
    primer: bool,
    /// Sampling sent with every request (the model's settings, else Totem's defaults for local
    /// servers).
    pub(super) sampling: Sampling,
    /// Which tools the model is offered, natively or in its text (written as JSON there when
    /// the model has no native tool calling, or its settings say so).
    pub(super) tool_offer: ToolOffer,
    /// The system prompt, rendered again after a compaction.
    pub(super) system: String,
    /// The run's prompt asks for a change ([`guide::asks_for_change`]); read once per run.
    pub(super) changes_asked: bool,
    /// The run's prompt says not to change anything ([`guide::forbids_changes`]); read once per
    /// run.
    pub(super) hands_off: bool,
}

/// Temperature, top_p and repeat_penalty of a run's requests.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Sampling {
    pub(super) temperature: Option<f32>,
    pub(super) top_p: Option<f32>,
    pub(super) repeat_penalty: Option<f32>,
}

/// Failed calls after which a constrained step may answer all the same (so a model that cannot
/// make a call work can still say so, instead of going round until the step cap).
const CALLS_BEFORE_ANSWER: usize = 3;

impl Sampling {
    /// The model's settings, then the provider's temperature; a local server that is given
    /// neither gets [`super::settings::LOCAL_TEMPERATURE`].
    pub(super) fn of(model: &super::settings::ResolvedModel) -> Sampling {
        let config = model.provider.config();
        let settings = config.model(&model.model);
        let temperature = settings
            .temperature
            .or(config.temperature)
            .or_else(|| model.local().then_some(super::settings::LOCAL_TEMPERATURE));
        Sampling {
            temperature,
            top_p: settings.top_p,
            repeat_penalty: settings.repeat_penalty,
        }
    }
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
                status: t.status,
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

impl Runner {
    pub(super) async fn prepare(
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
                    level: totem_protocol::NoticeLevel::Info,
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
        // Everything stored except this run's prompt and the undone runs, minus what a summary
        // covers. Prompts still queued are not stored as messages yet.
        let undo = store
            .undo_state(&agent.session_id)
            .map_err(|e| e.to_string())?;
        let excluded = vec![message_id.to_string()];
        // Prompts the provider refused are never sent again (the rephrased one is).
        let blocked: HashSet<String> = store
            .session_runs(&agent.session_id)
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter(|r| r.prompt_blocked)
            .map(|r| r.id)
            .collect();
        let (stored, _) = store
            .messages_after(&agent.session_id, 0, 1_000_000)
            .map_err(|e| e.to_string())?;
        let stored: Vec<Message> = stored
            .into_iter()
            .filter(|m| !excluded.contains(&m.id) && undo.keeps(m))
            .filter(|m| {
                m.role != totem_protocol::Role::User
                    || m.run_id.as_ref().is_none_or(|r| !blocked.contains(r))
            })
            .filter(|m| compaction.as_ref().is_none_or(|c| c.keeps(m)))
            .collect();
        let prior_upto = stored.iter().map(|m| m.seq).max().unwrap_or(0);
        let mut tool_offer = model.tool_offer();
        if tool_offer.mode == ToolMode::Native
            && super::lock(&daemon.agents.text_tools).contains(&model.name)
        {
            tool_offer = model.text_tool_offer();
        }
        if tool_offer.constrained && super::lock(&daemon.agents.unconstrained).contains(&model.name)
        {
            tool_offer.constrained = false;
        }
        let totaljs = project.is_totaljs5();
        let primer = totaljs && !model.small();
        let sampling = Sampling::of(&model);

        let mut runner = Runner {
            daemon: daemon.clone(),
            agent: agent.clone(),
            live,
            run_id: run.id.clone(),
            cancel,
            settings,
            model,
            setup: Setup {
                read_only,
                agent_prompt: agent_settings.prompt,
                reasoning: request.reasoning.unwrap_or(ReasoningLevel::Off),
                totaljs,
                primer,
                sampling,
                tool_offer,
                system: String::new(),
                changes_asked: false,
                hands_off: false,
            },
            tools: ToolState {
                policy,
                registry: crate::terminal::tool::registry(daemon, &agent.session_id),
                ctx,
                repeats: RepeatGuard::default(),
                cycles: super::repeat::CycleGuard::default(),
                seen: super::guide::SeenFiles::default(),
                seen_instructions: HashSet::new(),
                format_commands,
                check_commands,
                jobs_started: Vec::new(),
                boot_pending: Vec::new(),
                boot_rounds: 0,
                boot_before: std::collections::HashMap::new(),
                boot_edited: Vec::new(),
                boot_failed_requests: Vec::new(),
                commands_changed: false,
                reads: std::collections::HashMap::new(),
                reread: false,
                edits_made: std::collections::HashMap::new(),
                edit_stuck: false,
                settled: false,
                named_unchanged: Vec::new(),
                action_options_told: false,
                routes_read: Vec::new(),
                answered_plainly: false,
                syntax: super::syntax::Checked::default(),
            },
            turns: Conversation {
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
            },
            usage: None,
        };
        let prompt = runner.prompt().unwrap_or("");
        let (changes_asked, hands_off) = (
            guide::asks_for_change(prompt),
            guide::forbids_changes(prompt),
        );
        runner.setup.changes_asked = changes_asked;
        runner.setup.hands_off = hands_off;
        runner.setup.system = runner.render_system();
        Ok(runner)
    }

    pub(super) fn render_system(&self) -> String {
        let files = self
            .model
            .small()
            .then(|| totem_tools::small_project_files(&self.tools.ctx))
            .flatten();
        let offer = &self.setup.tool_offer;
        let offers = |name: &str| offer.offers(name);
        let mut system = SystemPrompt {
            root: &self.agent.root,
            read_only: self.setup.read_only,
            agent_prompt: self.setup.agent_prompt.as_deref(),
            primer: self.setup.primer,
            essentials: self.setup.totaljs && !self.setup.primer,
            summary: self.turns.compaction.as_ref().map(|c| c.summary.as_str()),
            files: files.as_deref(),
            offers: &offers,
        }
        .render();
        if self.setup.tool_offer.in_text() {
            system.push_str("\n\n");
            let definitions = self.tools.registry.definitions(self.setup.read_only);
            system.push_str(&totem_tools::recover::text_tools_prompt(
                definitions
                    .iter()
                    .filter(|d| self.setup.tool_offer.offers(&d.name))
                    .map(|d| self.shown_tool(d)),
                self.setup.tool_offer.constrained,
                self.setup.tool_offer.writes_code_blocks(),
            ));
        }
        system
    }

    /// A tool as the model is told of it: its name, parameters and description, except `write`
    /// when content comes as code blocks (it then takes only the path).
    fn shown_tool<'a>(
        &self,
        tool: &'a ToolDefinition,
    ) -> (&'a str, &'a serde_json::Value, &'a str) {
        if self.setup.tool_offer.writes_code_blocks() {
            match tool.name.as_str() {
                "write" => return ("write", &PATH_ONLY, CODE_BLOCK_WRITE_DESCRIPTION),
                // The whole file: the 0.5B paged a 13-line file one line at a time, twice.
                "read" => return ("read", &PATH_ONLY, WHOLE_READ_DESCRIPTION),
                _ => {}
            }
        }
        (
            tool.name.as_str(),
            &tool.parameters,
            tool.description.as_str(),
        )
    }

    /// Whether a constrained step may be the final answer: once a call of this run that saw more
    /// than names succeeded (a `list` alone is not enough: the 1.5B listed the project and
    /// answered that its one route was "GET /default"), or
    /// after [`CALLS_BEFORE_ANSWER`] calls that all failed. Before that a small model answers
    /// without having seen the project (Qwen2.5-Coder 0.5B answered "What you did", or "The path
    /// is outside the project" after one refused `list /`).
    ///
    /// A prompt that asks for a change (see [`guide::asks_for_change`]) is answered once a change
    /// worked, or after [`guide::CALLS_BEFORE_UNCHANGED_ANSWER`] calls: Qwen2.5-Coder 1.5B read
    /// the file and answered "Added a route…" with nothing changed.
    fn may_answer(&self, tally: &Tally) -> bool {
        let &Tally {
            calls,
            ok,
            failed,
            changed,
        } = tally;
        if !self.setup.read_only
            && !changed
            && calls < guide::CALLS_BEFORE_UNCHANGED_ANSWER
            && self.setup.changes_asked
        {
            return false;
        }
        // Failures alone open the answer only when nothing worked (a list that worked is a
        // start: the 1.5B listed two folders, failed on three it had guessed, and answered
        // with the file names as routes).
        ok > 0
            || (failed >= CALLS_BEFORE_ANSWER && failed == calls)
            || calls >= guide::CALLS_BEFORE_UNCHANGED_ANSWER
    }

    /// The calls of this run so far (Totem's first reads included): how many, how many saw more
    /// than names, how many failed, and whether one changed the project.
    fn tally(&self) -> Tally {
        let mut tally = Tally {
            changed: self.tools.commands_changed,
            ..Tally::default()
        };
        for message in &self.turns.current {
            let ModelMessage::ToolResult(result) = message else {
                continue;
            };
            tally.calls += 1;
            if result.is_error {
                tally.failed += 1;
            } else if !guide::NAMES_ONLY.contains(&result.tool_name.as_str()) {
                tally.ok += 1;
                tally.changed |= guide::CHANGE_TOOLS.contains(&result.tool_name.as_str());
            }
        }
        tally
    }

    /// The user's words that started this run.
    pub(super) fn prompt(&self) -> Option<&str> {
        self.turns.current.iter().find_map(|m| match m {
            ModelMessage::User { text, .. } => Some(text.as_str()),
            _ => None,
        })
    }

    /// The request for the next step.
    pub(super) fn request(&self) -> ChatRequest {
        let tools = if self.setup.tool_offer.mode != ToolMode::Native {
            if self.setup.tool_offer.constrained {
                let definitions = self.tools.registry.definitions(self.setup.read_only);
                let offered: Vec<_> = definitions
                    .iter()
                    .filter(|d| self.setup.tool_offer.offers(&d.name))
                    .collect();
                // A tool just called twice in a row with the same arguments is left out of the
                // next step: the small models copied their last call five times over, also at a
                // higher temperature and with "Do not call it again" in the result.
                // A look repeated leaves out every look: the step must act, as the repeated
                // result says (the 0.5B went from read to list of the same file and back).
                // A file read again with the same content counts as a repeated read, also
                // with other calls between (the 1.5B read two files in turn, over and over).
                let repeated = self
                    .tools
                    .repeats
                    .repeated()
                    .or(self.tools.reread.then_some("read"));
                let looked = repeated.is_some_and(|r| guide::LOOK_TOOLS.contains(&r));
                // A prompt that says not to change anything is offered only the looks (the 0.5B
                // edited and created files while asked which routes an app defines).
                let hands_off = self.setup.hands_off;
                let tally = self.tally();
                // A model that writes code blocks, asked for a change, that has made
                // [`guide::CALLS_BEFORE_WRITE`] calls without one is offered only `write`: the
                // 0.5B read, listed and ran the app for 300 s without writing.
                let must_write = self.setup.tool_offer.writes_code_blocks()
                    && self.setup.changes_asked
                    && offered.iter().any(|d| d.name == "write")
                    && repeated != Some("write")
                    && !tally.changed
                    && tally.calls >= guide::CALLS_BEFORE_WRITE;
                // A model that writes code blocks and made the change asked for is offered only
                // the end: the 0.5B wrote the right heading, then wrote the file again and again
                // until the time limit, never saying it was done.
                let settled = self.setup.tool_offer.writes_code_blocks() && self.tools.settled;
                let fresh = |name: &str| {
                    if settled || (self.tools.edit_stuck && name == "edit") {
                        return false;
                    }
                    if must_write {
                        return name == "write";
                    }
                    if hands_off {
                        return guide::LOOK_TOOLS.contains(&name)
                            && (Some(name) != repeated
                                || !offered.iter().any(|d| {
                                    d.name != name && guide::LOOK_TOOLS.contains(&d.name.as_str())
                                }));
                    }
                    offered.len() < 2
                        || if looked {
                            !guide::LOOK_TOOLS.contains(&name)
                        } else {
                            Some(name) != repeated
                        }
                };
                let schema = totem_tools::recover::answer_schema(
                    offered.iter().filter(|d| fresh(&d.name)).map(|d| {
                        let (name, parameters, _) = self.shown_tool(d);
                        (name, parameters)
                    }),
                    settled || self.may_answer(&tally),
                    self.setup.tool_offer.writes_code_blocks(),
                );
                let mut request = self
                    .setup
                    .request(&self.model.model, &self.turns, Vec::new());
                request.answer_schema = Some(schema);
                return request;
            }
            Vec::new()
        } else {
            self.tools
                .registry
                .definitions(self.setup.read_only)
                .into_iter()
                .chain(self.agent.mcp.definitions(self.setup.read_only))
                .filter(|d| self.setup.tool_offer.offers(&d.name))
                .collect()
        };
        self.setup.request(&self.model.model, &self.turns, tools)
    }
}

impl Setup {
    /// A request to `model` with the conversation so far, nothing added to the user's words
    /// (what is appended there small models take for the project's own content). A model
    /// without native tool calling gets its calls and their results as plain text and no
    /// `tools` (they are described in the system prompt instead).
    fn request(
        &self,
        model: &str,
        turns: &Conversation,
        tools: Vec<ToolDefinition>,
    ) -> ChatRequest {
        let mut messages = turns.prior.clone();
        messages.extend(turns.current.iter().cloned());
        // Without native tools (in text, or none at all), earlier calls and results go as text:
        // no chat template meets a tool role it does not know.
        let native = self.tool_offer.mode == ToolMode::Native;
        if !native {
            messages = as_plain_text(messages);
        }
        ChatRequest {
            model: model.to_string(),
            system: Some(self.system.clone()),
            messages,
            tools: if native { tools } else { Vec::new() },
            reasoning: self.reasoning,
            temperature: self.sampling.temperature,
            top_p: self.sampling.top_p,
            repeat_penalty: self.sampling.repeat_penalty,
            ..ChatRequest::default()
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
                let has_text = parts.iter().any(
                    |p| matches!(p, AssistantPart::Text { text, .. } if !text.trim().is_empty()),
                );
                // A call with no text of its own (a native call, or a constrained step whose
                // JSON was stored as the call) is written out as the JSON the model would write.
                let parts: Vec<AssistantPart> = parts
                    .into_iter()
                    .filter_map(|p| match p {
                        AssistantPart::Text { .. } => Some(p),
                        AssistantPart::ToolCall(call) if !has_text => Some(AssistantPart::Text {
                            text:
                                serde_json::json!({"name": call.name, "arguments": call.arguments})
                                    .to_string(),
                            signature: None,
                        }),
                        _ => None,
                    })
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

#[cfg(test)]
mod tests {
    use totem_provider::{ToolCall, ToolResult};

    use super::*;

    fn setup(totaljs: bool, text_tools: bool) -> Setup {
        let mode = if text_tools {
            ToolMode::Text
        } else {
            ToolMode::Native
        };
        Setup {
            read_only: false,
            agent_prompt: None,
            reasoning: ReasoningLevel::Medium,
            totaljs,
            primer: totaljs,
            sampling: Sampling::default(),
            tool_offer: ToolOffer {
                mode,
                reduced: false,
                constrained: false,
                code_blocks: false,
            },
            system: "base".into(),
            changes_asked: false,
            hands_off: false,
        }
    }

    fn turns() -> Conversation {
        let call = ToolCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: serde_json::json!({"path": "a.js"}),
            signature: None,
        };
        Conversation {
            prior: vec![ModelMessage::user("earlier")],
            current: vec![
                ModelMessage::user("fix it"),
                ModelMessage::Assistant {
                    parts: vec![
                        AssistantPart::Text {
                            text: "Reading.".into(),
                            signature: None,
                        },
                        AssistantPart::ToolCall(call),
                    ],
                },
                ModelMessage::ToolResult(ToolResult {
                    call_id: "c1".into(),
                    tool_name: "read".into(),
                    content: "let a;".into(),
                    is_error: false,
                }),
            ],
            turn_seqs: vec![4],
            step_seq: 4,
            prior_upto: 2,
            excluded: Vec::new(),
            compaction: None,
            compaction_failed: false,
        }
    }

    fn tool() -> ToolDefinition {
        ToolDefinition {
            name: "read".into(),
            description: "Reads a file.".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn user_text(message: &ModelMessage) -> &str {
        match message {
            ModelMessage::User { text, .. } => text,
            other => panic!("not a user message: {other:?}"),
        }
    }

    #[test]
    fn request_carries_prior_then_current_with_tools_and_reasoning() {
        let request = setup(false, false).request("qwen3:8b", &turns(), vec![tool()]);
        assert_eq!(request.model, "qwen3:8b");
        assert_eq!(request.system.as_deref(), Some("base"));
        assert_eq!(request.messages.len(), 4);
        assert_eq!(user_text(&request.messages[0]), "earlier");
        assert_eq!(user_text(&request.messages[1]), "fix it");
        assert!(matches!(request.messages[3], ModelMessage::ToolResult(_)));
        assert_eq!(request.tools.len(), 1);
        assert_eq!(request.reasoning, ReasoningLevel::Medium);
    }

    #[test]
    fn nothing_is_appended_to_the_users_words_in_a_totaljs_project() {
        let request = setup(true, false).request("m", &turns(), vec![tool()]);
        assert_eq!(user_text(&request.messages[0]), "earlier");
        assert_eq!(user_text(&request.messages[1]), "fix it");
    }

    #[test]
    fn text_tools_get_calls_as_text_results_as_user_messages_and_no_tools() {
        let request = setup(false, true).request("m", &turns(), vec![tool()]);
        assert!(request.tools.is_empty());
        let ModelMessage::Assistant { parts } = &request.messages[2] else {
            panic!("{:?}", request.messages[2]);
        };
        assert!(
            parts
                .iter()
                .all(|p| matches!(p, AssistantPart::Text { .. })),
            "{parts:?}"
        );
        assert_eq!(user_text(&request.messages[3]), "Result of read:\nlet a;");
    }
}
