//! The resources the daemon owns, as clients see them. Ids are opaque strings; times are Unix
//! milliseconds.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A folder the user works in. Its canonical path is its identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    pub id: String,
    /// Canonical absolute path of the project root.
    pub path: String,
    /// Last path component, for display.
    pub name: String,
    pub created_at: u64,
}

/// Whether a session is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SessionStatus {
    Idle,
    Running,
}

/// A conversation with the agent inside one project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub id: String,
    pub project_id: String,
    pub title: String,
    pub created_at: u64,
    /// Changes whenever something happens in the session; `session.list` sorts by it.
    pub updated_at: u64,
    /// Sequence number of the newest event; subscribe with `afterSeq` to resume after it.
    pub last_seq: u64,
    pub status: SessionStatus,
    pub message_count: u64,
    /// The session this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    User,
    Assistant,
}

/// One message of a session, with its parts in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: String,
    pub session_id: String,
    /// The session event sequence number at which the message was created; messages sort by it.
    pub seq: u64,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub created_at: u64,
    pub parts: Vec<Part>,
}

/// One finished piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum Part {
    /// Text written by the user or the model.
    Text { text: String },
    /// The model's visible reasoning.
    Reasoning { text: String },
    /// A tool the model called.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        call_id: String,
        tool: String,
        input: serde_json::Value,
    },
    /// What the tool returned.
    #[serde(rename_all = "camelCase")]
    ToolResult {
        call_id: String,
        tool: String,
        output: String,
        is_error: bool,
    },
}

/// How a run ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RunStatus {
    Running,
    Done,
    Failed,
    Aborted,
    /// The daemon stopped (or crashed) while the run was going.
    Interrupted,
}

/// One prompt's worth of agent work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub id: String,
    pub session_id: String,
    pub status: RunStatus,
    pub started_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    /// Why the run failed, in words a user can act on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A page of a cursor-paginated list. Pass `nextCursor` back as `cursor` for the next page; it is
/// absent on the last page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub items: Vec<T>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
