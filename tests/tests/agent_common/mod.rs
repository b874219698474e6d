//! Shared set-up of the agent tests: the real totemd in a temporary home, a provider simulator
//! configured through `provider.add`, a project folder and a session, and helpers that follow a
//! run's events (answering permission questions when asked to).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use totem_client::{Client, EventStream};
use totem_protocol::{EventKind, Part, PermissionQuestion, SessionEvent};
use totem_tests::harness::TestDaemon;
use totem_tests::setup::{SimAgent, plain_project};
use totem_tests::sim::{Reply, Sim, SimEvent};

pub struct Env {
    pub sim: Sim,
    pub daemon: TestDaemon,
    pub client: Client,
    pub project: tempfile::TempDir,
    pub session: String,
}

pub use totem_tests::setup::MODEL;

impl Env {
    /// totemd, an Ollama simulator as provider `sim`, a plain project folder and a session.
    pub async fn start() -> Env {
        Env::start_in(plain_project()).await
    }

    pub async fn start_in(project: tempfile::TempDir) -> Env {
        Env::start_on(TestDaemon::start(), project).await
    }

    /// As [`Env::start_in`], on a daemon started by the caller (with its own environment, say).
    pub async fn start_on(daemon: TestDaemon, project: tempfile::TempDir) -> Env {
        let SimAgent {
            sim,
            daemon,
            client,
            session,
            ..
        } = SimAgent::start(daemon, project.path()).await;
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

    /// Prompts as [`Env::prompt`] does and follows the run to its end, answering questions as
    /// told; returns the session's events up to that end.
    pub async fn run(&self, text: &str, extra: Value, answer: Answer) -> Vec<SessionEvent> {
        let mut stream = self.subscribe().await;
        let run = self.prompt(text, extra).await;
        follow(self, &mut stream, &run, answer).await
    }

    /// As [`Env::run`], and the run must have ended done.
    pub async fn run_done(&self, text: &str, extra: Value, answer: Answer) -> Vec<SessionEvent> {
        let events = self.run(text, extra, answer).await;
        assert!(
            matches!(last(&events), EventKind::RunDone { .. }),
            "{events:?}"
        );
        events
    }

    /// Answers question `question_id` of the session with `reply`.
    pub async fn reply(&self, question_id: &str, reply: Value) {
        let params = json!({"sessionId": self.session, "questionId": question_id, "reply": reply});
        self.client
            .call_raw("permission.reply", params)
            .await
            .expect("permission.reply");
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

/// Events until the end of run `run_id`, answering its questions as told.
pub async fn follow(
    env: &Env,
    stream: &mut EventStream,
    run_id: &str,
    answer: Answer,
) -> Vec<SessionEvent> {
    let reply = (answer == Answer::Once).then(|| json!({"type": "once"}));
    follow_replying(env, stream, run_id, reply).await.0
}

/// Follows run `run_id` to its end, answering each of its questions with `reply` (leaving them
/// pending when there is none); returns the events and the questions asked.
pub async fn follow_replying(
    env: &Env,
    stream: &mut EventStream,
    run_id: &str,
    reply: Option<Value>,
) -> (Vec<SessionEvent>, Vec<PermissionQuestion>) {
    let mut events = Vec::new();
    let mut questions = Vec::new();
    loop {
        let e = next_event(stream, 60).await;
        if let EventKind::PermissionAsked { question } = &e.kind
            && question.run_id == run_id
        {
            questions.push(question.clone());
            if let Some(reply) = &reply {
                env.reply(&question.id, reply.clone()).await;
            }
        }
        let end = e.kind.ended_run().is_some_and(|run| run.id == run_id);
        events.push(e);
        if end {
            return (events, questions);
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

/// The text of every notice in `events`, in order.
pub fn notices(events: &[SessionEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Notice { text, .. } => Some(text.clone()),
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
