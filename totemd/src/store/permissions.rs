//! Permission answers remembered for a whole project ("always for this project"), kept in the
//! `meta` keyspace under `project_permissions \0 project id` as the rules JSON of the permission
//! engine, so they survive restarts and apply to every session of the project.

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
