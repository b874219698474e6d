//! `session.prompt`: the user's message is stored and announced, a run starts and ends. The model
//! run itself arrives with the agent; until then the run fails at once with a clear reason, so the
//! whole event path (store, numbering, fan-out) is real end to end.

use totem_protocol::{EventKind, Message, Part, PromptAccepted, Role, Run, RunStatus, SessionStatus};

use super::{Result, SessionHub};
use crate::util::{new_id, now_ms};

/// Why a run cannot do anything yet.
pub const NO_MODEL_RUN: &str = "Totem cannot run a model yet: this daemon has no agent loop. Your message is saved; update Totem to get answers.";

impl SessionHub {
    /// Stores the prompt, runs (for now: ends at once) and returns the run and message ids.
    pub fn prompt(&self, session_id: &str, text: String) -> Result<PromptAccepted> {
        let session = self.get(session_id)?;
        let store = self.store();
        let run_id = new_id("run");
        let message_id = new_id("msg");
        let mut run = Run {
            id: run_id.clone(),
            session_id: session_id.to_string(),
            status: RunStatus::Running,
            started_at: now_ms(),
            ended_at: None,
            error: None,
        };
        store.put_run(&run)?;
        session.emit_with(store, |seq| {
            let message = Message {
                id: message_id.clone(),
                session_id: session_id.to_string(),
                seq,
                role: Role::User,
                run_id: Some(run_id.clone()),
                created_at: now_ms(),
                parts: vec![Part::Text { text }],
            };
            // Stored before the event that announces it, under the session lock.
            store.put_message(&message)?;
            Ok(EventKind::MessageCreated { message })
        })?;
        session.update(store, |s| {
            s.message_count += 1;
            s.status = SessionStatus::Running;
        })?;
        session.emit(store, EventKind::RunStarted { run: run.clone() })?;

        run.status = RunStatus::Failed;
        run.ended_at = Some(now_ms());
        run.error = Some(NO_MODEL_RUN.to_string());
        store.put_run(&run)?;
        session.update(store, |s| s.status = SessionStatus::Idle)?;
        session.emit(store, EventKind::RunFailed { run })?;
        Ok(PromptAccepted { run_id, message_id })
    }
}
