//! What a session streams to its subscribers. Every event carries the session's sequence number;
//! a client that lost its connection resubscribes with `afterSeq` set to the last one it saw.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::types::{Message, Part, Run, Session};

/// One numbered event of a session, as sent in `session.event` notifications.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionEvent {
    pub session_id: String,
    /// Strictly increasing per session. `lagged` repeats the last delivered number.
    pub seq: u64,
    /// Unix milliseconds.
    pub at: u64,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The kinds of event, following the life of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum EventKind {
    /// A message was stored (the user's prompt, or the start of the model's answer).
    #[serde(rename = "message.created")]
    MessageCreated { message: Message },
    #[serde(rename = "run.started")]
    RunStarted { run: Run },
    /// A part of a message began streaming.
    #[serde(rename = "part.started")]
    PartStarted {
        run_id: String,
        message_id: String,
        index: u32,
        /// `text`, `reasoning`, `toolCall` or `toolResult`.
        part_type: String,
    },
    /// More text for a streaming part. Not stored: `part.done` carries the whole part.
    #[serde(rename = "part.delta")]
    PartDelta {
        run_id: String,
        message_id: String,
        index: u32,
        text: String,
    },
    /// A part is finished and stored.
    #[serde(rename = "part.done")]
    PartDone {
        run_id: String,
        message_id: String,
        index: u32,
        part: Part,
    },
    /// Something the user should know that is not part of the conversation.
    #[serde(rename = "notice")]
    Notice {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
        /// `info`, `warning` or `error`.
        level: String,
        text: String,
    },
    /// The session's own fields changed (title, status).
    #[serde(rename = "session.updated")]
    SessionUpdated { session: Session },
    #[serde(rename = "run.done")]
    RunDone { run: Run },
    #[serde(rename = "run.failed")]
    RunFailed { run: Run },
    #[serde(rename = "run.aborted")]
    RunAborted { run: Run },
    /// The daemon stopped while the run was going; found and marked when it started again.
    #[serde(rename = "run.interrupted")]
    RunInterrupted { run: Run },
    /// The session was deleted; the subscription ends.
    #[serde(rename = "session.deleted")]
    SessionDeleted {},
    /// This subscription fell too far behind and was closed. Nothing after `seq` was delivered:
    /// call `session.subscribe` again with `afterSeq` = `seq`.
    #[serde(rename = "lagged")]
    Lagged {},
}

impl EventKind {
    /// Deltas are sent live but not stored; the finished part replaces them.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            EventKind::PartDelta { .. } | EventKind::Lagged {} | EventKind::SessionDeleted {}
        )
    }
}

/// A notification the daemon sends without being asked.
#[derive(Debug, Clone, Copy)]
pub struct NotificationInfo {
    pub name: &'static str,
    pub doc: &'static str,
}

/// Every notification method.
pub const NOTIFICATIONS: &[NotificationInfo] = &[NotificationInfo {
    name: "session.event",
    doc: "An event of a subscribed session: params are {subscription, result: SessionEvent}.",
}];
