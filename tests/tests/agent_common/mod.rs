//! Shared set-up of the agent tests: the real totemd in a temporary home, a provider simulator
//! configured through `provider.add`, a project folder and a session, and helpers that follow a
//! run's events (answering permission questions when asked to).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use totem_client::{Client, EventStream};
use totem_protocol::{EventKind, Part, SessionEvent};
use totem_tests::harness::TestDaemon;
use totem_tests::sim::{Reply, Sim, SimEvent, SimKind};

pub struct Env {
    pub sim: Sim,
    pub daemon: TestDaemon,
    pub client: Client,
    pub project: tempfile::TempDir,
    pub session: String,
}

/// The model every test runs with (the Ollama simulator lists it with tools and a 128k window).
pub const MODEL: &str = "sim/llama3.2:latest";

impl Env {
    /// totemd, an Ollama simulator as provider `sim`, an empty project folder and a session.
    pub async fn start() -> Env {
        let project = tempfile::tempdir().expect("project folder");
        // An empty folder is a new Total.js project; these tests want a plain one.
        std::fs::write(project.path().join("README.md"), "# demo\n").expect("readme");
        Env::start_in(project).await
    }

    pub async fn start_in(project: tempfile::TempDir) -> Env {
        Env::start_on(TestDaemon::start(), project).await
    }

    /// As [`Env::start_in`], on a daemon started by the caller (with its own environment, say).
    pub async fn start_on(daemon: TestDaemon, project: tempfile::TempDir) -> Env {
        let sim = Sim::start(SimKind::Ollama).await;
        let client = daemon.client().await;
        client
            .call_raw(
                "provider.add",
                json!({"name": "sim", "kind": "ollama", "url": sim.url(),
                       "defaultModel": "llama3.2:latest", "maxRetries": 0}),
            )
            .await
            .expect("provider.add");
        let project_id = client
            .call_raw("project.open", json!({"path": project.path()}))
            .await
            .expect("project.open")["id"]
            .as_str()
            .expect("project id")
            .to_string();
        let session = client
            .call_raw("session.create", json!({"projectId": project_id}))
            .await
            .expect("session.create")["id"]
            .as_str()
            .expect("session id")
            .to_string();
        Env {
            sim,
            daemon,
            client,
            project,
            session,
        }
    }

    pub fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.project.path()).expect("canonical project")
    }

    pub fn file(&self, rel: &str) -> String {
        std::fs::read_to_string(self.project.path().join(rel)).unwrap_or_default()
    }

    pub async fn subscribe(&self) -> EventStream {
        self.client
            .subscribe(&self.session, 0)
            .await
            .expect("subscribe")
    }

    /// Sends a prompt (with [`MODEL`] unless `extra` names another) and returns the run id.
    pub async fn prompt(&self, text: &str, extra: Value) -> String {
        let mut params = json!({"sessionId": self.session, "text": text, "model": MODEL});
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let accepted = self
            .client
            .call_raw("session.prompt", params)
            .await
            .expect("session.prompt");
        accepted["runId"].as_str().expect("run id").to_string()
    }

    pub fn push(&self, events: Vec<SimEvent>) {
        self.sim.push(Reply::stream(events));
    }
}

/// How to treat permission questions while following a run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Leave them pending.
    None,
    /// Answer every question `once`.
    Once,
}

pub async fn next_event(stream: &mut EventStream, secs: u64) -> SessionEvent {
    tokio::time::timeout(Duration::from_secs(secs), stream.next())
        .await
        .expect("an event in time")
        .expect("stream open")
        .expect("event decodes")
}

pub fn is_run_end(kind: &EventKind) -> bool {
    kind.ended_run().is_some()
}

/// Events until the end of run `run_id`, answering questions as told.
pub async fn follow(
    env: &Env,
    stream: &mut EventStream,
    run_id: &str,
    answer: Answer,
) -> Vec<SessionEvent> {
    let mut out = Vec::new();
    loop {
        let e = next_event(stream, 60).await;
        if let (Answer::Once, EventKind::PermissionAsked { question }) = (answer, &e.kind) {
            env.client
                .call_raw(
                    "permission.reply",
                    json!({"sessionId": env.session, "questionId": question.id,
                           "reply": {"type": "once"}}),
                )
                .await
                .expect("permission.reply");
        }
        let end = match &e.kind {
            EventKind::RunDone { run }
            | EventKind::RunFailed { run }
            | EventKind::RunAborted { run } => run.id == run_id,
            _ => false,
        };
        out.push(e);
        if end {
            return out;
        }
    }
}

/// The finished parts of the events, in order.
pub fn parts(events: &[SessionEvent]) -> Vec<Part> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PartDone { part, .. } => Some(part.clone()),
            _ => None,
        })
        .collect()
}

/// The text the model answered in the events, all parts joined.
pub fn parts_text(events: &[SessionEvent]) -> String {
    parts(events)
        .into_iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text),
            _ => None,
        })
        .collect()
}

/// The tool results of the events, as (tool, output, is_error).
pub fn results(events: &[SessionEvent]) -> Vec<(String, String, bool)> {
    parts(events)
        .into_iter()
        .filter_map(|p| match p {
            Part::ToolResult {
                tool,
                output,
                is_error,
                ..
            } => Some((tool, output, is_error)),
            _ => None,
        })
        .collect()
}

pub fn last(events: &[SessionEvent]) -> &EventKind {
    &events.last().expect("events").kind
}

pub fn tool(id: &str, name: &str, args: Value) -> SimEvent {
    SimEvent::tool_call(id, name, args)
}

pub fn text(t: &str) -> SimEvent {
    SimEvent::text(t)
}

pub fn write_file(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("folder");
    }
    std::fs::write(path, content).expect("write file");
}
