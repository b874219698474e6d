//! The conversation's history as the REPL shows it, through a pty and over the socket:
//! - after a restart: a session that was `/compact`ed, then stopped with `totem daemon stop`,
//!   shows its messages when reattached — the ones before the summary and the ones after — for a
//!   short session and one of 200 messages;
//! - after `/undo`: the undone prompt is back in the input line, the run is dimmed and marked
//!   `(undone)` in another terminal, and the model's next request leaves it out.

mod cli_common;

use std::time::Duration;

use cli_common::{Cli, assert_exit};
use expectrl::session::OsSession;
use expectrl::{Eof, Expect, Regex, Session};
use serde_json::{Value, json};
use totem_client::Client;
use totem_protocol::{ClientCapabilities, EventKind};
use totem_tests::sim::{Reply, Sim, SimEvent};

struct Env {
    cli: Cli,
    sim: Sim,
    runtime: tokio::runtime::Runtime,
}

impl Env {
    fn start() -> Env {
        let cli = Cli::new();
        std::fs::write(cli.project.path().join("README.md"), "# demo\n").expect("readme");
        let (runtime, sim) = cli_common::sim_settings(&cli);
        assert_exit(&cli.run(["daemon", "start"]), 0);
        Env { cli, sim, runtime }
    }

    /// `totem ARGS` in a pty.
    fn repl(&self, args: &[&str]) -> OsSession {
        let mut command = self.cli.command(args);
        command.env("TERM", "xterm");
        let mut repl = Session::spawn(command).expect("spawn totem in a pty");
        repl.set_expect_timeout(Some(Duration::from_secs(20)));
        repl
    }

    async fn client(&self) -> Client {
        let (client, _) = Client::connect(
            &self.cli.socket(),
            "history-test",
            ClientCapabilities::default(),
        )
        .await
        .expect("connect");
        client
    }
}

/// A session of `exchanges` prompts and answers, compacted, then one more exchange: its id.
async fn compacted_session(env: &Env, exchanges: usize) -> String {
    let client = env.client().await;
    let project = client
        .call_raw("project.open", json!({"path": env.cli.project.path()}))
        .await
        .expect("project.open");
    let session = client
        .call_raw("session.create", json!({"projectId": project["id"]}))
        .await
        .expect("session.create")["id"]
        .as_str()
        .expect("id")
        .to_string();
    let mut events = client.subscribe(&session, 0).await.expect("subscribe");
    let exchange = |text: String, answer: String| {
        env.sim.push(Reply::stream([SimEvent::text(answer)]));
        let client = &client;
        let session = &session;
        async move {
            client
                .call_raw(
                    "session.prompt",
                    json!({"sessionId": session, "text": text}),
                )
                .await
                .expect("session.prompt");
        }
    };
    // Prompts queue behind each other; all go in at once and run in order.
    for i in 0..exchanges {
        exchange(format!("question {i}"), format!("answer {i}")).await;
    }
    wait_runs(&mut events, exchanges).await;
    env.sim
        .push(Reply::stream([SimEvent::text("They asked questions.")]));
    let compacted = client
        .call_raw(
            "session.command",
            json!({"sessionId": session, "command": "compact"}),
        )
        .await
        .expect("/compact");
    assert!(
        compacted["text"]
            .as_str()
            .is_some_and(|t| t.contains("Compacted")),
        "{compacted}"
    );
    exchange("after the summary".into(), "the last answer".into()).await;
    wait_runs(&mut events, 1).await;
    session
}

async fn wait_runs(events: &mut totem_client::EventStream, mut runs: usize) {
    while runs > 0 {
        let event = tokio::time::timeout(Duration::from_secs(60), events.next())
            .await
            .expect("an event in time")
            .expect("stream open")
            .expect("event decodes");
        match &event.kind {
            EventKind::RunDone { .. } => runs -= 1,
            EventKind::RunFailed { run } => panic!("a run failed: {run:?}"),
            _ => {}
        }
    }
}

/// `totem daemon stop`, then `totem daemon start`.
fn restart(env: &Env) {
    assert_exit(&env.cli.run(["daemon", "stop"]), 0);
    assert_exit(&env.cli.run(["daemon", "start"]), 0);
}

/// What a reattaching client finds over the socket: the newest messages, and the events from
/// the first of them on.
async fn check_socket(env: &Env, session: &str, messages: u64) {
    let client = env.client().await;
    let got = client
        .call_raw("session.get", json!({"sessionId": session}))
        .await
        .expect("session.get");
    assert_eq!(got["messageCount"], messages, "{got}");
    let all = client
        .call_raw(
            "session.messages",
            json!({"sessionId": session, "limit": 1000}),
        )
        .await
        .expect("session.messages");
    let all = all["messages"].as_array().expect("messages").clone();
    assert_eq!(all.len() as u64, messages);
    let newest = client
        .call_raw(
            "session.messages",
            json!({"sessionId": session, "limit": 4, "newest": true}),
        )
        .await
        .expect("session.messages newest");
    let newest = newest["messages"].as_array().expect("messages").clone();
    assert_eq!(
        newest,
        all[all.len() - 4..],
        "the newest four, oldest first"
    );

    // The session's lastSeq is its last event, not a number reserved ahead: counting back from
    // it finds the history (the REPL of earlier versions replayed lastSeq - 200 and saw nothing).
    let last_seq = got["lastSeq"].as_u64().expect("lastSeq");
    let mut stream = client
        .subscribe(session, last_seq.saturating_sub(30))
        .await
        .expect("subscribe");
    let mut replay = Vec::new();
    while let Ok(Some(event)) =
        tokio::time::timeout(Duration::from_millis(500), stream.next()).await
    {
        replay.push(event.expect("event decodes"));
    }
    let last = replay.last().expect("the replay is not empty");
    assert_eq!(last.seq, last_seq);
    let texts: Vec<String> = replay
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PartDone { part, .. } => serde_json::to_value(part).ok(),
            EventKind::MessageCreated { message } => serde_json::to_value(message).ok(),
            _ => None,
        })
        .map(|v: Value| v.to_string())
        .collect();
    let texts = texts.join("\n");
    assert!(texts.contains("after the summary"), "{texts}");
    assert!(texts.contains("the last answer"), "{texts}");

    // A new event after the restart is numbered above every earlier one.
    let first_new = newest.first().and_then(|m| m["seq"].as_u64()).expect("seq");
    let mut stream = client
        .subscribe(session, first_new - 1)
        .await
        .expect("subscribe from the newest messages");
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("a replayed event")
        .expect("open")
        .expect("decodes");
    assert!(
        matches!(&first.kind, EventKind::MessageCreated { message } if message.seq == first_new),
        "{first:?}"
    );
}

/// The REPL reattached through a pty shows the exchange after the summary and one before it.
fn check_pty(env: &Env, session: &str, before: &str, earlier: Option<&str>) {
    let mut repl = env.repl(&["attach", "--session", session]);
    repl.expect(session).expect("the header names the session");
    if let Some(earlier) = earlier {
        repl.expect(earlier)
            .expect("the earlier messages are counted");
    }
    repl.expect(before).expect("a message before the summary");
    repl.expect("Compacted the conversation")
        .expect("the compaction notice");
    repl.expect("› after the summary")
        .expect("the prompt after the summary");
    repl.expect("the last answer").expect("its answer");
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn a_short_compacted_session_replays_after_a_restart() {
    let env = Env::start();
    let session = env.runtime.block_on(compacted_session(&env, 1));
    restart(&env);
    env.runtime.block_on(check_socket(&env, &session, 4));
    check_pty(&env, &session, "answer 0", None);
}

#[test]
fn a_compacted_session_of_200_messages_replays_its_newest_after_a_restart() {
    let env = Env::start();
    let session = env.runtime.block_on(compacted_session(&env, 99));
    restart(&env);
    env.runtime.block_on(check_socket(&env, &session, 200));
    // The REPL shows the newest 40 messages and counts the 160 before them.
    check_pty(
        &env,
        &session,
        "answer 98",
        Some("160 earlier messages not shown"),
    );
}

#[test]
fn undo_puts_the_prompt_back_and_the_model_no_longer_sees_the_run() {
    let env = Env::start();
    {
        let _guard = env.runtime.enter();
        env.sim.push(Reply::stream([SimEvent::tool_call(
            "c1",
            "write",
            json!({"path": "math.js", "content": "exports.add = (a, b) => a + b;\n"}),
        )]));
        env.sim
            .push(Reply::stream([SimEvent::text("Wrote math.js.")]));
        env.sim
            .push(Reply::stream([SimEvent::text("Written again.")]));
    }
    let mut repl = env.repl(&["attach", "--new"]);
    let header = repl
        .expect(Regex(r"(ses_[0-9a-z]+) ──"))
        .expect("the header names the session");
    let session = String::from_utf8_lossy(header.get(1).expect("id")).into_owned();
    repl.expect("Type a prompt").expect("greeting");
    repl.send("write math.js\r").expect("a prompt");
    repl.expect("Answer: o = once").expect("asked to write");
    repl.send("o\r").expect("answer once");
    repl.expect("✓ done").expect("run done");
    assert!(env.cli.project.path().join("math.js").exists());

    repl.send("/undo\r").expect("/undo");
    // The answer to /undo is read before the event that tells every terminal.
    repl.expect("back in the input line").expect("the note");
    repl.expect("math.js; the model no longer sees it")
        .expect("the undo is told");
    repl.expect("› write math.js")
        .expect("the prompt is back in the line");
    assert!(!env.cli.project.path().join("math.js").exists());

    // Another terminal shows the undone run dimmed and marked.
    let mut other = env.repl(&["attach", "--session", &session]);
    other
        .expect("› write math.js (undone)")
        .expect("the undone prompt is marked");
    cli_common::ctrl_d_until(&mut other, Eof);

    // Enter sends the prompt that was put back; the model sees it once, without the undone run.
    repl.send("\r").expect("Enter");
    repl.expect("Written again.").expect("the answer");
    let requests = {
        let _guard = env.runtime.enter();
        env.sim.chat_requests()
    };
    let last = requests.last().expect("a request").body.to_string();
    assert_eq!(last.matches("write math.js").count(), 1, "{last}");
    assert!(!last.contains("exports.add"), "the undone call: {last}");
    assert!(
        !last.contains("Wrote math.js."),
        "the undone answer: {last}"
    );
    cli_common::ctrl_d_until(&mut repl, Eof);
}

/// The undone prompt's run ids, newest undo last, as the session's messages mark them.
async fn undone_prompts(env: &Env, session: &str) -> Vec<String> {
    let client = env.client().await;
    let page = client
        .call_raw(
            "session.messages",
            json!({"sessionId": session, "limit": 100}),
        )
        .await
        .expect("session.messages");
    page["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user" && m["undone"] == true)
        .map(|m| m["parts"][0]["text"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn undo_and_redo_typed_on_the_restored_prompt_run_as_commands_any_number_of_times() {
    let env = Env::start();
    {
        let _guard = env.runtime.enter();
        env.sim
            .push(Reply::stream([SimEvent::text("First answer.")]));
        env.sim
            .push(Reply::stream([SimEvent::text("Second answer.")]));
    }
    let mut repl = env.repl(&["attach", "--new"]);
    let header = repl
        .expect(Regex(r"(ses_[0-9a-z]+) ──"))
        .expect("the header names the session");
    let session = String::from_utf8_lossy(header.get(1).expect("id")).into_owned();
    repl.expect("Type a prompt").expect("greeting");
    repl.send("change the greeting\r").expect("a prompt");
    repl.expect("First answer.").expect("first answer");
    repl.expect("✓ done").expect("run done");
    repl.send("add a farewell\r").expect("a prompt");
    repl.expect("Second answer.").expect("second answer");
    repl.expect("✓ done").expect("run done");

    // /undo, then /undo typed on the prompt it put back: two runs undone, nothing sent.
    repl.send("/undo\r").expect("/undo");
    repl.expect("the model no longer sees it").expect("undone");
    repl.expect("› add a farewell").expect("the prompt is back");
    repl.send("/undo\r").expect("/undo on the draft");
    repl.expect("the model no longer sees it")
        .expect("the second undo");
    repl.expect("› change the greeting")
        .expect("the older prompt is back");
    let undone = env.runtime.block_on(undone_prompts(&env, &session));
    assert_eq!(undone, ["change the greeting", "add a farewell"]);

    // /redo on the draft redoes, and the draft stays in the line.
    repl.send("/redo\r").expect("/redo on the draft");
    repl.expect("it is back in the conversation")
        .expect("the redo");
    repl.expect("› change the greeting")
        .expect("the draft stays");
    repl.send("/redo\r").expect("a second /redo");
    repl.expect("it is back in the conversation")
        .expect("the second redo");
    repl.expect("› change the greeting")
        .expect("the draft stays");
    let undone = env.runtime.block_on(undone_prompts(&env, &session));
    assert!(undone.is_empty(), "{undone:?}");
    let requests = {
        let _guard = env.runtime.enter();
        env.sim.chat_requests()
    };
    assert_eq!(
        requests.len(),
        2,
        "no command went to the model as a prompt"
    );
    // Ctrl-U clears the draft, then Ctrl-D leaves.
    repl.send("\x15").expect("Ctrl-U");
    cli_common::ctrl_d_until(&mut repl, Eof);
}
