//! Permission answers remembered for a whole project ("always for this project"), kept in the
//! `meta` keyspace under `project_permissions \0 project id` as the rules JSON of the permission
//! engine, so they survive restarts and apply to every session of the project. Also: the questions
//! a run left unanswered, read back from the session's events after a crash.

use totem_protocol::{EventKind, PermissionQuestion};

use super::{Result, Store, decode, encode, keys};

fn key(project_id: &str) -> Vec<u8> {
    keys::pair_key("project_permissions", project_id)
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
}

impl Store {
    /// The questions of run `run_id` that were asked (`permission.asked` is stored) and never
    /// resolved, oldest first. Pending questions live in memory only, so after the daemon stopped
    /// these are the ones no client can answer any more.
    pub fn unresolved_questions(
        &self,
        session_id: &str,
        run_id: &str,
    ) -> Result<Vec<PermissionQuestion>> {
        let mut open: Vec<PermissionQuestion> = Vec::new();
        for event in self.events_after(session_id, 0)? {
            match event.kind {
                EventKind::PermissionAsked { question } if question.run_id == run_id => {
                    open.push(question)
                }
                EventKind::PermissionResolved { question_id, .. } => {
                    open.retain(|q| q.id != question_id)
                }
                _ => {}
            }
        }
        Ok(open)
    }
}
