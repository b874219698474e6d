//! The model's answer as stored parts: deltas go out live but coalesced (at most 50 ms after they
//! arrived, sooner once 256 bytes wait) and are never stored; each part is stored when it finishes, with the `part.done`
//! that announces it.

use std::time::{Duration, Instant};

use futures::StreamExt;
use totem_protocol::{EventKind, Message, Part, PartType, Role};
use totem_provider::{
    AssistantPart, ChatRequest, Completion, Message as ModelMessage, ProviderError, StreamEvent,
    ToolCall, TurnBuilder, estimate_tokens,
};

use super::run::{Runner, StepError};
use crate::util::{new_id, now_ms};

/// Coalescing of deltas.
const DELTA_BYTES: usize = 256;
const DELTA_INTERVAL: Duration = Duration::from_millis(50);
/// Streamed text is checked for a loop each time this many bytes have arrived.
pub(super) const LOOP_CHECK_BYTES: usize = 256;

impl Runner {
    /// Streams one answer into a new assistant message. Returns the turn, the message id and
    /// the next free part index. The message is created with the answer's first part, so a
    /// request that fails before any output leaves nothing behind.
    pub(super) async fn step(
        &mut self,
        request: ChatRequest,
    ) -> Result<(Completion, String, u32), StepError> {
        let message_id = new_id("msg");
        let mut created = false;
        // A constrained answer streams as JSON: only the final answer's text is shown. The
        // request is kept to ask again without the constraint if the server refuses it.
        let mut shaper = request
            .answer_schema
            .is_some()
            .then(super::constrained::AnswerText::default);
        let mut unconstrained = request.answer_schema.is_some().then(|| request.clone());
        let mut any_event = false;
        let mut seen = call_ids(&request);
        let native_tools = !request.tools.is_empty();
        let mut stream = self.model.provider.stream(request);
        let mut turn = TurnBuilder::new();
        let mut open: Option<OpenPart> = None;
        let mut index: u32 = 0;
        let mut cut_at = None;
        // A constrained answer as it came.
        let mut held = String::new();
        loop {
            // Text waiting to go out leaves at the end of its interval even when the model is
            // slow to send more: a few tokens a second still show word by word.
            let flush_at = open
                .as_ref()
                .filter(|p| !p.pending.is_empty())
                .map(|p| tokio::time::Instant::from_std(p.last_flush + DELTA_INTERVAL));
            let due = async move {
                match flush_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                _ = self.cancel.cancelled() => {
                    self.close(&message_id, &mut open)?;
                    return Err(StepError::Aborted);
                }
                () = due => {
                    if let Some(part) = open.as_mut() {
                        self.flush(&message_id, part)?;
                    }
                    continue;
                }
                next = stream.next() => next,
            };
            let event = match next {
                // A tiny model said it is done: its answer is asked for in plain words, without
                // the constraint, into this message (the 0.5B's JSON answers copied Totem's
                // notes: "To see what a file holds, read it, e.g. {").
                None if shaper.is_some()
                    && self.setup.tool_offer.writes_code_blocks()
                    && totem_tools::recover::is_done(&held) =>
                {
                    let Some(mut request) = unconstrained.take() else {
                        break;
                    };
                    let done = std::mem::replace(&mut turn, TurnBuilder::new()).finish();
                    self.create_message(&message_id, &mut created)?;
                    self.account(&done, &message_id, u64::from(estimate_tokens(&request)))?;
                    request.answer_schema = None;
                    // Greedy unless its settings chose a temperature: at 0.2 the 0.5B named the
                    // app's routes in 2 of 4 runs of the same step, at 0 in 4 of 4.
                    if request.temperature == Some(super::settings::LOCAL_TEMPERATURE) {
                        request.temperature = Some(0.0);
                    }
                    request.messages.push(ModelMessage::assistant(held.clone()));
                    request
                        .messages
                        .push(ModelMessage::user(if self.setup.changes_asked {
                            "Now say in plain words what you changed."
                        } else {
                            "Now answer the user's question in plain words, from what the files say."
                        }));
                    stream = self.model.provider.stream(request);
                    shaper = None;
                    self.tools.answered_plainly = true;
                    continue;
                }
                None => break,
                Some(Ok(StreamEvent::ToolCall(call))) => {
                    StreamEvent::ToolCall(self.repaired(unique_call(call, &mut seen)))
                }
                Some(Ok(event)) => event,
                Some(Err(e)) if !any_event && native_tools && refuses_native_tools(&e) => {
                    return Err(StepError::ToolsRefused(e.to_string()));
                }
                Some(Err(e)) if !any_event && refuses_schema(&e) && unconstrained.is_some() => {
                    let Some(mut request) = unconstrained.take() else {
                        continue;
                    };
                    stream = self.without_constraint(&mut request, &e);
                    shaper = None;
                    continue;
                }
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
                    if let ProviderError::Blocked { .. } = &e {
                        return Err(StepError::Blocked(e.to_string()));
                    }
                    return Err(StepError::Failed(e.to_string()));
                }
            };
            any_event = true;
            match &event {
                StreamEvent::TextDelta { text } if shaper.is_some() => {
                    held.push_str(text);
                    let shown = shaper.as_mut().map(|s| s.push(text)).unwrap_or_default();
                    if !shown.is_empty() {
                        self.create_message(&message_id, &mut created)?;
                        self.delta(&message_id, &mut open, &mut index, false, &shown)?;
                        // A final answer caught in a loop is cut as plain text is (the 0.5B
                        // wrote "line 2. Now: " until the 300 s limit).
                        if let Some(keep) = open.as_mut().and_then(OpenPart::looping) {
                            cut_at = Some(keep);
                            turn.push(event);
                            break;
                        }
                    }
                }
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
                    self.store_call(&message_id, index, call)?;
                    index += 1;
                }
                StreamEvent::Retry(notice) => {
                    self.notice(totem_protocol::NoticeLevel::Warning, notice.to_string())
                }
                StreamEvent::Notice { text } => {
                    self.notice(totem_protocol::NoticeLevel::Warning, text.clone())
                }
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
                match (shaper.is_some(), open.as_ref()) {
                    // The stored text is the answer's JSON: it becomes the answer as kept.
                    (true, Some(part)) => {
                        *text = serde_json::json!({ "answer": part.text }).to_string();
                    }
                    _ => text.truncate(keep),
                }
            }
            self.notice(
                totem_protocol::NoticeLevel::Warning,
                "The model kept repeating the same text, so its answer was cut there.".into(),
            );
        }
        self.close(&message_id, &mut open)?;
        Ok((completion, message_id, index))
    }

    /// The server refused the constrained answer: remembered for the model (until the daemon
    /// restarts), the run goes on with plain text tools, and the same step is asked again.
    fn without_constraint(
        &mut self,
        request: &mut ChatRequest,
        refusal: &ProviderError,
    ) -> totem_provider::EventStream {
        tracing::info!(model = %self.model.name, error = %refusal, "the server refused a constrained answer");
        super::lock(&self.daemon.agents.unconstrained).insert(self.model.name.clone());
        self.setup.tool_offer.constrained = false;
        self.setup.system = self.render_system();
        request.system = Some(self.setup.system.clone());
        request.answer_schema = None;
        self.notice(
            totem_protocol::NoticeLevel::Info,
            format!(
                "The server of {} does not take a JSON schema for the answer, so its tool calls are read from its text instead. Set \"constrained\": false in the model's settings to skip the attempt.",
                self.model.name
            ),
        );
        self.model.provider.stream(request.clone())
    }

    /// `call` with its arguments repaired as the tool will take them (JSON in a string, fields
    /// renamed, types coerced), so the stored call, and the history every later request sends,
    /// holds what was run rather than what the model first wrote. Arguments no repair can make
    /// into an object stay as they came: the tool's result says what is wrong, and each wire
    /// sends them back in a form its server takes.
    fn repaired(&self, mut call: ToolCall) -> ToolCall {
        // MCP tools (and the prompt and resource tools) are the servers' own.
        if self.agent.mcp.find(&call.name).is_some() || call.name.starts_with("mcp") {
            return call;
        }
        let names = self.tools.registry.names(false);
        let Some(name) = totem_tools::recover::normalize_tool_name(&call.name, &names) else {
            return call;
        };
        let Some(tool) = self.tools.registry.get(name) else {
            return call;
        };
        if let Ok(arguments) = totem_tools::recover::repair_arguments(
            call.arguments.clone(),
            &tool.definition().parameters,
        ) {
            call.arguments = arguments;
        }
        call
    }

    /// Creates the step's assistant message, once.
    pub(super) fn create_message(
        &mut self,
        message_id: &str,
        created: &mut bool,
    ) -> Result<(), StepError> {
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
                undone: false,
                compacted: false,
                parts: Vec::new(),
            };
            Ok(EventKind::MessageCreated { message })
        })?;
        self.turns.step_seq = event.seq;
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
                part_type: if reasoning {
                    PartType::Reasoning
                } else {
                    PartType::Text
                },
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

    /// A tool call the model made, stored as a part of its answer.
    pub(super) fn store_call(
        &self,
        message_id: &str,
        index: u32,
        call: &ToolCall,
    ) -> Result<(), StepError> {
        let part = Part::ToolCall {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            input: call.arguments.clone(),
        };
        self.store_part(message_id, index, PartType::ToolCall, part)
    }

    /// A part that is whole at once (a tool call): started, stored, done.
    fn store_part(
        &self,
        message_id: &str,
        index: u32,
        part_type: PartType,
        part: Part,
    ) -> Result<(), StepError> {
        self.emit(EventKind::PartStarted {
            run_id: self.run_id.clone(),
            message_id: message_id.to_string(),
            index,
            part_type,
        })?;
        self.finish_part(message_id, index, part)
    }

    /// Announces a finished part; the store writes the part with its `part.done` in one batch.
    pub(super) fn finish_part(
        &self,
        message_id: &str,
        index: u32,
        part: Part,
    ) -> Result<(), StepError> {
        let part = crate::redact::part(part);
        self.emit(EventKind::PartDone {
            run_id: self.run_id.clone(),
            message_id: message_id.to_string(),
            index,
            part,
        })
    }
}

/// A server's refusal of the request as malformed: for a constrained request, the schema it
/// cannot take (llama.cpp answers 400 "JSON schema conversion failed", other servers 400 or 422
/// for an unknown `response_format`).
fn refuses_schema(error: &ProviderError) -> bool {
    // llama-cpp-python answers its validation errors with a 500, typed as invalid too.
    matches!(error, ProviderError::InvalidRequest { .. })
}

/// A server's refusal of native tool calls: vLLM started without `--enable-auto-tool-choice`
/// ("\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set"),
/// Ollama with a model it lists without tools ("… does not support tools").
fn refuses_native_tools(error: &ProviderError) -> bool {
    match error {
        ProviderError::InvalidRequest { message, .. } => {
            message.contains("--enable-auto-tool-choice")
                || message.contains("does not support tools")
        }
        _ => false,
    }
}

/// The call ids a request's conversation already uses.
fn call_ids(request: &ChatRequest) -> std::collections::HashSet<String> {
    let mut ids = std::collections::HashSet::new();
    for message in &request.messages {
        match message {
            totem_provider::Message::Assistant { parts } => {
                for part in parts {
                    if let AssistantPart::ToolCall(call) = part {
                        ids.insert(call.id.clone());
                    }
                }
            }
            totem_provider::Message::ToolResult(result) => {
                ids.insert(result.call_id.clone());
            }
            totem_provider::Message::User { .. } => {}
        }
    }
    ids
}

/// `call` with an id no other call of the conversation has: a server that repeats ids (two
/// parallel calls with one id, or ids numbered from 0 each answer) gets a suffix on the repeat,
/// before the call is stored, so every provider the session moves to takes the history.
fn unique_call(mut call: ToolCall, seen: &mut std::collections::HashSet<String>) -> ToolCall {
    if call.id.is_empty() {
        call.id = totem_provider::synthetic_call_id("call_");
    }
    if seen.contains(&call.id) {
        let base = call.id.clone();
        let mut n = 2;
        while seen.contains(&format!("{base}_{n}")) {
            n += 1;
        }
        call.id = format!("{base}_{n}");
    }
    seen.insert(call.id.clone());
    call
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
