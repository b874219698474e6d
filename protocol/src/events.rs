//! What a session streams to its subscribers. Every event carries the session's sequence number;
//! a client that lost its connection resubscribes with `afterSeq` set to the last one it saw.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::types::{
    Message, NoticeLevel, Part, PartType, PermissionQuestion, PermissionReply, Run, Session,
    SessionActivity, TodoItem, Usage, WithdrawnReason,
};

/// One numbered event of a session, as sent in `session.event` notifications.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionEvent {
    /// The session the event is about.
    pub session_id: String,
    /// Strictly increasing per session. `lagged` repeats the last delivered number.
    pub seq: u64,
    /// Unix milliseconds.
    pub at: u64,
    /// What happened, tagged by `type`.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The kinds of event, following the life of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum EventKind {
    /// A message was stored (the user's prompt, or the start of the model's answer).
    #[serde(rename = "message.created")]
    MessageCreated {
        /// The message as stored, its parts so far.
        message: Message,
    },
    /// A prompt was accepted and waits for its turn behind the session's running run (or for
    /// the worker to take it). It is stored, but not yet part of the conversation: its
    /// `message.created` comes when its run starts, so it takes its place after the answers
    /// before it. Show it as queued until then.
    #[serde(rename = "run.queued")]
    RunQueued {
        /// The run, `running` (it has not started).
        run: Run,
        /// The prompt as it will be stored; its `seq` is 0 until its `message.created`.
        message: Message,
    },
    /// A run began: the prompt was taken and the model is being asked.
    #[serde(rename = "run.started")]
    RunStarted {
        /// The run, `running`.
        run: Run,
    },
    /// A part of a message began streaming.
    #[serde(rename = "part.started")]
    PartStarted {
        /// The run that streams it.
        run_id: String,
        /// The message it belongs to.
        message_id: String,
        /// Its position among the message's parts, from 0.
        index: u32,
        /// What kind of part it will be.
        part_type: PartType,
    },
    /// More text for a streaming part. Not stored: `part.done` carries the whole part.
    #[serde(rename = "part.delta")]
    PartDelta {
        /// The run that streams it.
        run_id: String,
        /// The message it belongs to.
        message_id: String,
        /// Its position among the message's parts, from 0.
        index: u32,
        /// The text to append to the part.
        text: String,
    },
    /// A part is finished and stored.
    #[serde(rename = "part.done")]
    PartDone {
        /// The run that streams it.
        run_id: String,
        /// The message it belongs to.
        message_id: String,
        /// Its position among the message's parts, from 0.
        index: u32,
        /// The whole part, as stored.
        part: Part,
    },
    /// Something the user should know that is not part of the conversation.
    #[serde(rename = "notice")]
    Notice {
        /// The run it is about; absent when it is about the session.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
        /// How much it matters: info, warning or error.
        level: NoticeLevel,
        /// What to tell the user, in words.
        text: String,
    },
    /// The docs MCP server (`role: "docs"`) found pages for the prompt; their text went to the
    /// model with the prompt.
    #[serde(rename = "docs.found")]
    DocsFound {
        /// The run whose prompt was looked up.
        run_id: String,
        /// The configured server that answered.
        server: String,
        /// The titles of the pages given to the model, best first.
        titles: Vec<String>,
    },
    /// The session's own fields changed (title, status).
    #[serde(rename = "session.updated")]
    SessionUpdated {
        /// The session as it is now.
        session: Session,
    },
    /// A run finished normally: the model answered without more tool calls.
    #[serde(rename = "run.done")]
    RunDone {
        /// The run, `done`.
        run: Run,
    },
    /// A run stopped on an error; the run's `error` says what went wrong.
    #[serde(rename = "run.failed")]
    RunFailed {
        /// The run, `failed`.
        run: Run,
    },
    /// A run was stopped on request (`run.abort`).
    #[serde(rename = "run.aborted")]
    RunAborted {
        /// The run, `aborted`.
        run: Run,
    },
    /// Tokens and cost of one model answer, with the run's and the session's totals so far.
    #[serde(rename = "usage")]
    Usage {
        /// The run the answer belongs to.
        run_id: String,
        /// The assistant message of the answer.
        message_id: String,
        /// This answer.
        usage: Usage,
        /// The run's total so far.
        run: Usage,
        /// The session's total so far.
        session: Usage,
        /// Estimated tokens of the request against the model's window, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context_tokens: Option<u64>,
        /// The model's context window in tokens, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context_window: Option<u64>,
    },
    /// The model replaced its plan (the `todo` tool).
    #[serde(rename = "todo")]
    Todo {
        /// The run whose model wrote the plan.
        run_id: String,
        /// The whole plan, in order; it replaces the previous one.
        todos: Vec<TodoItem>,
    },
    /// A tool call waits for a person's permission; answer with `permission.reply`.
    #[serde(rename = "permission.asked")]
    PermissionAsked {
        /// What is asked, with the choices.
        question: PermissionQuestion,
    },
    /// A question was answered (the first answer wins) or withdrawn because its run ended.
    #[serde(rename = "permission.resolved")]
    PermissionResolved {
        /// The question that was resolved.
        question_id: String,
        /// Absent when the question was withdrawn without an answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply: Option<PermissionReply>,
        /// Why a question was withdrawn without an answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<WithdrawnReason>,
    },
    /// A run was taken back (`session.undo`): its file changes, and its messages, which stay
    /// stored but marked undone and out of the model's history.
    #[serde(rename = "changes.undone")]
    ChangesUndone {
        /// The run taken back.
        run_id: String,
        /// The files restored, project-relative.
        files: Vec<String>,
        /// The run's messages, now undone: show them as such (dimmed).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        message_ids: Vec<String>,
    },
    /// An undone run was applied again (`session.redo`): its file changes, and its messages are
    /// part of the conversation again.
    #[serde(rename = "changes.redone")]
    ChangesRedone {
        /// The run applied again.
        run_id: String,
        /// The files written again, project-relative.
        files: Vec<String>,
        /// The run's messages, no longer undone.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        message_ids: Vec<String>,
    },
    /// Files on disk changed: written by a run's tools (announced after each call; what its
    /// shell commands changed, when the run ends) or by `session.undo`/`session.redo`. Editors
    /// reload these buffers.
    #[serde(rename = "files.changed")]
    FilesChanged {
        /// The run that wrote them, or whose changes were undone or redone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
        /// Project-relative, `/`-separated, in path order.
        paths: Vec<String>,
    },
    /// The daemon stopped while the run was going; found and marked when it started again.
    #[serde(rename = "run.interrupted")]
    RunInterrupted {
        /// The run, `interrupted`.
        run: Run,
    },
    /// The session was deleted; the subscription ends.
    #[serde(rename = "session.deleted")]
    SessionDeleted {},
    /// This subscription fell too far behind and was closed. Nothing after `seq` was delivered:
    /// call `session.subscribe` again with `afterSeq` = `seq`.
    #[serde(rename = "lagged")]
    Lagged {},
}

impl EventKind {
    /// The run this event ends (`run.done`, `run.failed`, `run.aborted`, `run.interrupted`):
    /// the one place clients and the daemon decide that a run is over.
    pub fn ended_run(&self) -> Option<&Run> {
        match self {
            EventKind::RunDone { run }
            | EventKind::RunFailed { run }
            | EventKind::RunAborted { run }
            | EventKind::RunInterrupted { run } => Some(run),
            _ => None,
        }
    }

    /// The run this event belongs to, when it belongs to one. Every kind says, so a new kind
    /// has to decide.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            EventKind::MessageCreated { message } => message.run_id.as_deref(),
            EventKind::RunQueued { run, .. }
            | EventKind::RunStarted { run }
            | EventKind::RunDone { run }
            | EventKind::RunFailed { run }
            | EventKind::RunAborted { run }
            | EventKind::RunInterrupted { run } => Some(&run.id),
            EventKind::PartStarted { run_id, .. }
            | EventKind::PartDelta { run_id, .. }
            | EventKind::PartDone { run_id, .. }
            | EventKind::DocsFound { run_id, .. }
            | EventKind::Usage { run_id, .. }
            | EventKind::Todo { run_id, .. }
            | EventKind::ChangesUndone { run_id, .. }
            | EventKind::ChangesRedone { run_id, .. } => Some(run_id),
            EventKind::Notice { run_id, .. } | EventKind::FilesChanged { run_id, .. } => {
                run_id.as_deref()
            }
            EventKind::PermissionAsked { question } => Some(&question.run_id),
            EventKind::SessionUpdated { .. }
            | EventKind::PermissionResolved { .. }
            | EventKind::SessionDeleted {}
            | EventKind::Lagged {} => None,
        }
    }

    /// Deltas are sent live but not stored; the finished part replaces them.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            EventKind::PartDelta { .. } | EventKind::Lagged {} | EventKind::SessionDeleted {}
        )
    }
}

/// One event of the daemon as a whole (`daemon.subscribe`), sent in `daemon.event`
/// notifications: what a status line, a badge or a session picker needs without subscribing to
/// every session. Not stored and not numbered: a client that reconnects subscribes again and
/// is first told the state as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonEvent {
    /// Unix milliseconds.
    pub at: u64,
    /// What happened, tagged by `type`.
    #[serde(flatten)]
    pub kind: DaemonEventKind,
}

/// The kinds of daemon event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum DaemonEventKind {
    /// A session was created (`session.create`, `session.fork`).
    #[serde(rename = "session.created")]
    SessionCreated {
        /// The new session.
        session: Session,
    },
    /// A session's fields changed (title, status, counts).
    #[serde(rename = "session.updated")]
    SessionUpdated {
        /// The session as it is now.
        session: Session,
    },
    /// A session was deleted.
    #[serde(rename = "session.deleted")]
    SessionDeleted {
        /// The deleted session's id.
        session_id: String,
    },
    /// What a session is doing changed; on subscribing, sent for every session that is not idle.
    #[serde(rename = "session.status")]
    SessionStatus {
        /// The session whose activity changed.
        session_id: String,
        /// The project it belongs to.
        project_id: String,
        /// What it is doing now.
        status: SessionActivity,
    },
    /// A permission question waits for a person; on subscribing, sent for every open question.
    #[serde(rename = "permission.asked")]
    PermissionAsked {
        /// What is asked, with the choices.
        question: PermissionQuestion,
    },
    /// A question was answered or withdrawn: stop showing it.
    #[serde(rename = "permission.resolved")]
    PermissionResolved {
        /// The session the question belongs to.
        session_id: String,
        /// The question that was resolved.
        question_id: String,
        /// The answer; absent when the question was withdrawn.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply: Option<PermissionReply>,
        /// Why it was withdrawn without an answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<WithdrawnReason>,
    },
    /// A run ended (`status` says how).
    #[serde(rename = "run.ended")]
    RunEnded {
        /// The run as it ended.
        run: Run,
    },
    /// This subscription fell too far behind and was closed: subscribe again.
    #[serde(rename = "lagged")]
    Lagged {},
}

/// A notification the daemon sends without being asked.
#[derive(Clone, Copy)]
pub struct NotificationInfo {
    /// The JSON-RPC method name (`session.event`).
    pub name: &'static str,
    /// What it carries; the schema's `description` of it.
    pub doc: &'static str,
    /// The schema of its `result`.
    pub result_schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
}

impl std::fmt::Debug for NotificationInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotificationInfo")
            .field("name", &self.name)
            .finish()
    }
}

/// Every notification method.
pub const NOTIFICATIONS: &[NotificationInfo] = &[
    NotificationInfo {
        name: "session.event",
        doc: "An event of a subscribed session: params are {subscription, result: SessionEvent}.",
        result_schema: |g| g.subschema_for::<SessionEvent>(),
    },
    NotificationInfo {
        name: "terminal.event",
        doc: "An event of a subscribed terminal: params are {subscription, result: TerminalEvent}.",
        result_schema: |g| g.subschema_for::<crate::api_terminal::TerminalEvent>(),
    },
    NotificationInfo {
        name: "daemon.event",
        doc: "An event of the daemon (`daemon.subscribe`): params are {subscription, result: DaemonEvent}.",
        result_schema: |g| g.subschema_for::<DaemonEvent>(),
    },
];
