//! A session's undo state: which runs' file changes are taken back, and the redos on offer.
//! The changes themselves are the runs' records (`run_changes`); this only says where the session
//! stands among them. Kept in the `meta` keyspace under `undo \0 session id`.

use serde::{Deserialize, Serialize};

use super::{Result, Store, decode, encode, keys};

/// Where a session stands in its undo history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UndoState {
    /// Runs whose changes are undone, in the order they were undone.
    #[serde(default)]
    pub undone: Vec<String>,
    /// What `session.redo` would apply again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redo: Option<Redo>,
}

/// The undos in a row that can still be redone, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Redo {
    /// The run the last undo reverted, which the next redo puts back.
    pub run_id: String,
    /// The runs the undos before it reverted, which further redos put back, next first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub then: Vec<String>,
    /// The session's newest run when the undo was made: once a newer run exists the redo is gone,
    /// since that run worked on the files as the undo left them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_run: Option<String>,
}

impl UndoState {
    /// Whether `message` is part of the conversation: its run is not undone. A message without a
    /// run stored as undone (imported so, `session.import`) stays undone: there is nothing here
    /// to redo.
    pub fn keeps(&self, message: &totem_protocol::Message) -> bool {
        match &message.run_id {
            Some(run) => !self.undone.contains(run),
            None => !message.undone,
        }
    }

    /// Marks the messages whose run is undone.
    pub fn mark(&self, messages: &mut [totem_protocol::Message]) {
        for message in messages {
            message.undone = !self.keeps(message);
        }
    }
}

pub(super) fn key(session_id: &str) -> Vec<u8> {
    keys::pair_key("undo", session_id)
}

impl Store {
    /// A session's undo and redo state; the empty default when none is stored.
    pub fn undo_state(&self, session_id: &str) -> Result<UndoState> {
        match self.meta.get(key(session_id))? {
            Some(v) => decode("undo state", &v),
            None => Ok(UndoState::default()),
        }
    }

    /// Stores a session's undo and redo state.
    pub fn put_undo_state(&self, session_id: &str, state: &UndoState) -> Result<()> {
        self.meta.insert(key(session_id), encode(state)?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use totem_protocol::{Session, SessionStatus};

    use super::*;
    use crate::store::SessionRecord;

    #[test]
    fn undo_state_is_kept_per_session_and_goes_with_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let record = SessionRecord {
            session: Session {
                id: "ses_1".into(),
                project_id: "prj_1".into(),
                title: "t".into(),
                created_at: 1,
                updated_at: 1,
                last_seq: 0,
                status: SessionStatus::Idle,
                message_count: 0,
                parent_id: None,
                usage: None,
            },
            seq_reserved: 0,
        };
        store.put_session(&record, None).unwrap();
        let state = UndoState {
            undone: vec!["run_1".into()],
            redo: Some(Redo {
                run_id: "run_1".into(),
                then: vec!["run_0".into()],
                newest_run: Some("run_2".into()),
            }),
        };
        store.put_undo_state("ses_1", &state).unwrap();
        assert_eq!(store.undo_state("ses_1").unwrap(), state);
        assert_eq!(store.undo_state("ses_2").unwrap(), UndoState::default());

        store.delete_session(&record).unwrap();
        assert_eq!(store.undo_state("ses_1").unwrap(), UndoState::default());
    }
}
