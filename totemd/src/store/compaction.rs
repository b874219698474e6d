//! A session's compaction: the summary that replaces its older messages in model requests. The
//! messages themselves stay in the store; this only records up to where the summary reaches. Kept
//! in the `meta` keyspace under `compaction \0 session id`.

use serde::{Deserialize, Serialize};

use super::{Result, Store, decode, encode, keys};

/// The summary of a session's messages up to `upto_seq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
    /// The sequence number of the last message the summary covers.
    pub upto_seq: u64,
    /// The summary the model wrote, sent in place of those messages.
    pub summary: String,
    /// When the compaction was made, Unix milliseconds.
    pub at: u64,
    /// Messages at or below `upto_seq` the summary does not cover (prompts that were queued
    /// behind the run that compacted); they stay in later requests.
    #[serde(default)]
    pub keep: Vec<String>,
}

impl Compaction {
    /// Whether `message` still goes into requests as itself (the summary does not cover it).
    pub fn keeps(&self, message: &totem_protocol::Message) -> bool {
        message.seq > self.upto_seq || self.keep.contains(&message.id)
    }

    /// Marks the messages the summary stands in for (`compacted`).
    pub fn mark(compaction: Option<&Self>, messages: &mut [totem_protocol::Message]) {
        for message in messages {
            message.compacted = compaction.is_some_and(|c| !c.keeps(message));
        }
    }
}

pub(super) fn key(session_id: &str) -> Vec<u8> {
    keys::pair_key("compaction", session_id)
}

impl Store {
    /// The latest compaction of a session, when it has one.
    pub fn compaction(&self, session_id: &str) -> Result<Option<Compaction>> {
        match self.meta.get(key(session_id))? {
            Some(v) => Ok(Some(decode("compaction", &v)?)),
            None => Ok(None),
        }
    }

    /// Stores a session's compaction, replacing the previous one.
    pub fn put_compaction(&self, session_id: &str, compaction: &Compaction) -> Result<()> {
        self.meta.insert(key(session_id), encode(compaction)?)?;
        Ok(())
    }
}
