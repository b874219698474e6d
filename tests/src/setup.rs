//! The set-up agent tests and benchmarks share: the real totemd, the Ollama simulator added as
//! provider `sim`, a project folder opened and a session in it.

use std::path::Path;

use serde_json::{Value, json};
use totem_client::Client;

use crate::harness::TestDaemon;
use crate::sim::{Sim, SimKind};

/// The model runs use: the Ollama simulator lists it with tools and a 128k window.
pub const MODEL: &str = "sim/llama3.2:latest";

/// The settings of provider `sim`: the simulator, its model the default, no retries (a test
/// that scripts a failure wants to see it). For `provider.add` and for settings.json.
pub fn sim_provider(sim: &Sim) -> Value {
    json!({"name": "sim", "kind": "ollama", "url": sim.url(),
           "defaultModel": "llama3.2:latest", "maxRetries": 0})
}

/// A running totemd with the simulator as provider `sim`, a project and a session in it.
pub struct SimAgent {
    pub sim: Sim,
    pub daemon: TestDaemon,
    pub client: Client,
    pub project_id: String,
    pub session: String,
}

impl SimAgent {
    /// On `daemon`: a new simulator added as provider `sim`, `project` opened, a session created.
    pub async fn start(daemon: TestDaemon, project: &Path) -> SimAgent {
        let sim = Sim::start(SimKind::Ollama).await;
        let client = daemon.client().await;
        client
            .call_raw("provider.add", sim_provider(&sim))
            .await
            .expect("provider.add");
        let project_id = open_project(&client, project).await;
        let session = create_session(&client, &project_id).await;
        SimAgent {
            sim,
            daemon,
            client,
            project_id,
            session,
        }
    }

    /// Another session in the same project.
    pub async fn new_session(&self) -> String {
        create_session(&self.client, &self.project_id).await
    }
}

/// Opens `path` as a project and returns its id.
pub async fn open_project(client: &Client, path: &Path) -> String {
    client
        .call_raw("project.open", json!({"path": path}))
        .await
        .expect("project.open")["id"]
        .as_str()
        .expect("project id")
        .to_string()
}

/// Creates a session in a project and returns its id.
pub async fn create_session(client: &Client, project_id: &str) -> String {
    client
        .call_raw("session.create", json!({"projectId": project_id}))
        .await
        .expect("session.create")["id"]
        .as_str()
        .expect("session id")
        .to_string()
}

/// A plain project folder (an empty one would be taken for a new Total.js project).
pub fn plain_project() -> tempfile::TempDir {
    let project = tempfile::tempdir().expect("project folder");
    std::fs::write(project.path().join("README.md"), "# demo\n").expect("readme");
    project
}

/// Sets `servers` as `mcpServers` in the settings.json of `home` (made when there is none); a
/// daemon reads them at its next run.
pub fn configure_servers(home: &Path, servers: Value) {
    let path = home.join("settings.json");
    let mut settings: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}));
    settings["mcpServers"] = servers;
    std::fs::write(&path, serde_json::to_vec_pretty(&settings).expect("encode")).expect("write");
}

/// `program` with nothing of this process's environment but PATH, and the closed Ollama port
/// (what a host that trims the environment gives the programs it starts).
pub fn clean_command(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("OLLAMA_HOST", crate::harness::closed_ollama_host());
    command
}
