//! The resources the daemon owns, as clients see them. Ids are opaque strings; times are Unix
//! milliseconds.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A folder the user works in. Its canonical path is its identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    /// `prj_…`; one per canonical path.
    pub id: String,
    /// Canonical absolute path of the project root.
    pub path: String,
    /// Last path component, for display.
    pub name: String,
    /// When the daemon first saw it, Unix milliseconds.
    pub created_at: u64,
    /// What the folder holds, detected when the daemon answers (`project.open`, `project.list`):
    /// `totaljs5` (a Total.js 5 app), `library` (a package for Total.js 5 apps), `totaljs4`,
    /// `totaljs3` (or older), `totaljs` (a Total.js layout of unknown version), `empty` or
    /// `other` (not Total.js). Absent when the folder could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// Whether a session is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SessionStatus {
    /// No run is going.
    Idle,
    /// A run is going; a new prompt is refused until it ends.
    Running,
}

/// What a session is doing, as `daemon.subscribe` reports it: a run going, a run waiting for a
/// person's answer to a permission question, or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SessionActivity {
    /// No run is going.
    Idle,
    /// A run is going.
    Running,
    /// A run waits for a person's answer to a permission question.
    Waiting,
}

/// A conversation with the agent inside one project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// `ses_…`, unique for the daemon.
    pub id: String,
    /// The project it works in.
    pub project_id: String,
    /// A short name for the conversation: given at creation, else taken from its first prompt.
    pub title: String,
    /// When it was created, Unix milliseconds.
    pub created_at: u64,
    /// Changes whenever something happens in the session; `session.list` sorts by it.
    pub updated_at: u64,
    /// Sequence number of the newest event; subscribe with `afterSeq` to resume after it.
    pub last_seq: u64,
    /// Whether a run is going.
    pub status: SessionStatus,
    /// Messages stored so far, undone ones included.
    pub message_count: u64,
    /// The session this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// Tokens and cost of every run so far; absent before the first model answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// The person at the keyboard (prompts, attachments).
    User,
    /// The model (text, reasoning, tool calls and results).
    Assistant,
}

/// One message of a session, with its parts in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// `msg_…`, unique for the daemon.
    pub id: String,
    /// The session it belongs to.
    pub session_id: String,
    /// The session event sequence number at which the message was created; messages sort by it.
    pub seq: u64,
    /// Who wrote it.
    pub role: Role,
    /// The run that produced it, or that its prompt started; absent for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// When it was stored, Unix milliseconds.
    pub created_at: u64,
    /// Its content, in order.
    pub parts: Vec<Part>,
    /// Its run was undone (`session.undo`): it is kept but left out of the model's history until
    /// a redo; show it as undone (dimmed). Set in `session.messages` answers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undone: bool,
    /// A compaction's summary stands in for it in the model's requests (`/compact`, or a request
    /// that passed the window's threshold): it is kept but the model no longer sees it as itself.
    /// Set in `session.messages` answers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compacted: bool,
}

/// One finished piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum Part {
    /// Text written by the user or the model.
    Text {
        /// The text, as written.
        text: String,
    },
    /// The model's visible reasoning.
    Reasoning {
        /// The reasoning text.
        text: String,
    },
    /// A tool the model called.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        /// The provider's id of the call; its result carries the same one.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// The arguments the model gave, as JSON.
        input: serde_json::Value,
    },
    /// What the tool returned.
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// The call it answers.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// What the model is shown as the tool's answer.
        output: String,
        /// The tool failed or refused; `output` says why.
        is_error: bool,
    },
    /// A file, or some lines of it, the user attached to a prompt (`session.prompt
    /// {attachments}`); the model sees its text after the prompt's.
    #[serde(rename_all = "camelCase")]
    Attachment {
        /// Project-relative, `/`-separated.
        path: String,
        /// The lines attached, when not the whole file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        range: Option<LineRange>,
        /// The text the model was given.
        text: String,
        /// The text came from the client (an editor's unsaved buffer), not from the file on disk.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unsaved: bool,
    },
}

impl Part {
    /// The text parts of a message, joined by newlines (what the user typed, what the model said).
    pub fn joined_text(parts: &[Part]) -> String {
        parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Lines of a file, 1-based and inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LineRange {
    /// The first line attached.
    pub start_line: u32,
    /// The last line attached.
    pub end_line: u32,
}

/// How a run ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RunStatus {
    /// It is still going.
    Running,
    /// It finished: the model answered without more tool calls.
    Done,
    /// It stopped on an error; `error` says what went wrong.
    Failed,
    /// It was stopped on request (`run.abort`).
    Aborted,
    /// The daemon stopped (or crashed) while the run was going.
    Interrupted,
}

/// One prompt's worth of agent work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// `run_…`, unique for the daemon.
    pub id: String,
    /// The session it belongs to.
    pub session_id: String,
    /// Where it stands.
    pub status: RunStatus,
    /// When it started, Unix milliseconds.
    pub started_at: u64,
    /// When it ended, Unix milliseconds; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    /// Why the run failed, in words a user can act on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The model that ran it, as `provider/model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The mode (agent) it ran in: `build`, `plan` or an agent from settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Tokens and cost of the run's model calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The provider refused the prompt itself (Gemini `promptFeedback.blockReason`): the prompt
    /// stays in the session, shown, but is never sent to a model again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompt_blocked: bool,
}

/// Token counts and cost, for one model answer, a run or a whole session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens not served from a cache.
    pub input_tokens: u64,
    /// Tokens the model wrote, reasoning included.
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Reasoning tokens, already included in `outputTokens`.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// USD, from the model list's prices; absent when the provider lists none (local models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// Every prompt token, cached or not.
    pub fn total_input(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    /// Adds another count to this one (costs add when either is known).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
    }
}

/// One step of the model's plan, as the `todo` tool records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TodoItem {
    /// The step, in the model's words.
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
}

/// Where a step of the model's plan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    // The aliases are for the `todo` tool, which reads the words models use.
    /// Being worked on now.
    #[serde(alias = "in-progress", alias = "active")]
    InProgress,
    /// Finished.
    #[serde(alias = "completed", alias = "complete")]
    Done,
}

/// The kind of a part that began streaming (`part.started`); the finished [`Part`] has the same
/// `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PartType {
    /// Text written by the user or the model.
    Text,
    /// The model's visible reasoning.
    Reasoning,
    /// A tool call.
    ToolCall,
    /// A tool's answer.
    ToolResult,
}

/// How much a `notice` matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum NoticeLevel {
    /// For information.
    Info,
    /// Something went wrong but the work goes on.
    Warning,
    /// Something failed.
    Error,
}

/// What a permission question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum QuestionKind {
    /// Reading a file.
    Read,
    /// Creating, changing or deleting a file.
    Write,
    /// Running a command.
    Execute,
    /// Calling a tool of an MCP server.
    Mcp,
    /// Starting a configured MCP server (`callId` is then empty).
    McpServer,
}

/// Why a permission question was withdrawn without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum WithdrawnReason {
    /// Its run was stopped.
    Aborted,
    /// The daemon stopped while it waited; found when it started again.
    Interrupted,
}

/// A permission question waiting for a person: shown by every client that answers permissions,
/// and listed by `permission.list` until it is answered or its run ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionQuestion {
    /// `perm_…`; what `permission.reply` answers.
    pub id: String,
    /// The session whose run asks.
    pub session_id: String,
    /// The run that waits.
    pub run_id: String,
    /// The tool call that waits for the answer.
    pub call_id: String,
    /// The tool that asks.
    pub tool: String,
    /// What is asked for.
    pub kind: QuestionKind,
    /// The project-relative path, the command line, the MCP tool (`server/tool`) or server name.
    pub target: String,
    /// One line for a person: what is asked and why.
    pub explanation: String,
    /// What an "always" answer would remember: rule key → pattern → `allow`.
    pub always: serde_json::Value,
    /// When it was asked, Unix milliseconds.
    pub asked_at: u64,
    /// For `write`, `edit` and `patch`: the proposed change of `target` as a unified diff
    /// (`--- a/…`/`+++ b/…`), cut at 400 lines or 32 KB (then `truncated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// `diff` was cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// For `bash`: the part of the command line that needed asking (`target` is the whole line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subcommand: Option<String>,
}

// The permission engine (totem-permission) takes this type as it is: one type from the wire to
// `PermissionState::answer`.
/// A person's answer to a permission question. Unknown fields, and a note on anything but a
/// deny, are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum PermissionReply {
    /// Allow this once.
    Once,
    /// Allow, and do not ask again for the same thing in this session.
    AlwaysSession,
    /// Allow, and do not ask again for the same thing in this project (remembered).
    AlwaysProject,
    /// Refuse; the note, if any, is passed to the model.
    Deny {
        /// Why, for the model; absent for none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

/// The wire form of [`PermissionReply`] as it is read: through a struct, because serde ignores
/// unknown fields on the unit variants of an internally tagged enum. (Read by hand rather than
/// with `#[serde(try_from)]`, which would make schemars describe this struct instead of the enum.)
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyWire {
    #[serde(rename = "type")]
    kind: ReplyKind,
    #[serde(default)]
    note: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
enum ReplyKind {
    Once,
    AlwaysSession,
    AlwaysProject,
    Deny,
}

impl<'de> Deserialize<'de> for PermissionReply {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = ReplyWire::deserialize(d)?;
        match (wire.kind, wire.note) {
            (ReplyKind::Deny, note) => Ok(PermissionReply::Deny { note }),
            (_, Some(_)) => Err(serde::de::Error::custom(
                "only a `deny` reply carries a note",
            )),
            (ReplyKind::Once, None) => Ok(PermissionReply::Once),
            (ReplyKind::AlwaysSession, None) => Ok(PermissionReply::AlwaysSession),
            (ReplyKind::AlwaysProject, None) => Ok(PermissionReply::AlwaysProject),
        }
    }
}

/// A page of a cursor-paginated list. Pass `nextCursor` back as `cursor` for the next page; it is
/// absent on the last page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    /// This page's items, in the list's order.
    pub items: Vec<T>,
    /// Where the next page starts; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
