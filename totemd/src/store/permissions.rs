//! Permission answers remembered for a whole project ("always for this project"), kept in the
//! `meta` keyspace under `project_permissions \0 project id` as the rules JSON of the permission
//! engine, so they survive restarts and apply to every session of the project; and those remembered
//! for one session ("always in this session") under `session_permissions \0 session id`, so a
//! restart does not forget them either (removed with the session).

use super::{Result, Store, decode, encode, keys};

fn key(project_id: &str) -> Vec<u8> {
    keys::pair_key("project_permissions", project_id)
}

pub(super) fn session_key(session_id: &str) -> Vec<u8> {
    keys::pair_key("session_permissions", session_id)
}

impl Store {
    /// The rules remembered for a project (an empty map when none).
    pub fn project_permissions(&self, project_id: &str) -> Result<serde_json::Value> {
        match self.meta.get(key(project_id))? {
            Some(v) => decode("project permissions", &v),
            None => Ok(serde_json::Value::Object(Default::default())),
        }
    }

    /// Replaces the rules remembered for a project, durably: an answer must survive a crash.
    pub fn put_project_permissions(
        &self,
        project_id: &str,
        rules: &serde_json::Value,
    ) -> Result<()> {
        self.meta.insert(key(project_id), encode(rules)?)?;
        self.persist()
    }

    /// The rules "always in this session" answers added to a session (an empty map when none).
    pub fn session_permissions(&self, session_id: &str) -> Result<serde_json::Value> {
        match self.meta.get(session_key(session_id))? {
            Some(v) => decode("session permissions", &v),
            None => Ok(serde_json::Value::Object(Default::default())),
        }
    }

    /// Replaces the rules remembered for a session, durably: an answer must survive a crash.
    pub fn put_session_permissions(
        &self,
        session_id: &str,
        rules: &serde_json::Value,
    ) -> Result<()> {
        self.meta.insert(session_key(session_id), encode(rules)?)?;
        self.persist()
    }
}
