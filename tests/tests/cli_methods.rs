//! The daemon methods the command line added, over the socket: `session.shell` (the REPL's
//! `!command`, asking as the `bash` tool does) and `job.list` (the REPL's `/jobs`).

#[path = "agent_common/mod.rs"]
mod agent_common;

use std::time::Duration;

use agent_common::{Answer, Env, next_event, tool};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use totem_client::{Client, ClientError, EventStream};
use totem_protocol::{ClientCapabilities, EventKind, PermissionQuestion};

/// A client that may answer permission questions, as the REPL is.
async fn answering_client(env: &Env) -> Client {
    let (client, _) = Client::connect(
        &env.daemon.socket,
        "cli-methods-test",
        ClientCapabilities { permissions: true },
    )
    .await
    .expect("connect");
    client
}

/// Starts `session.shell` with `params` in the background and waits for the question it asks.
async fn shell_asking(
    env: &Env,
    events: &mut EventStream,
    mut params: Value,
) -> (JoinHandle<Result<Value, ClientError>>, PermissionQuestion) {
    params["sessionId"] = json!(env.session);
    let client = env.client.clone();
    let shell = tokio::spawn(async move { client.call_raw("session.shell", params).await });
    loop {
        if let EventKind::PermissionAsked { question } = next_event(events, 30).await.kind {
            return (shell, question);
        }
    }
}

/// Answers `question` from `answering` (the client that may answer).
async fn answer(answering: &Client, env: &Env, question: &PermissionQuestion, reply: Value) {
    answering
        .call_raw(
            "permission.reply",
            json!({"sessionId": env.session, "questionId": question.id, "reply": reply}),
        )
        .await
        .expect("permission.reply");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_runs_a_read_only_command_without_asking() {
    let env = Env::start().await;
    let result = env
        .client
        .call_raw(
            "session.shell",
            json!({"sessionId": env.session, "command": "ls"}),
        )
        .await
        .expect("session.shell");
    assert_eq!(result["ran"], true, "{result}");
    assert_eq!(result["exitCode"], 0, "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap_or("")
            .contains("README.md"),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_asks_like_bash_and_runs_only_when_allowed() {
    let env = Env::start().await;
    let answering = answering_client(&env).await;
    let mut events = env.subscribe().await;

    // Asked: the call waits until a client answers; "once" runs it.
    let (shell, question) =
        shell_asking(&env, &mut events, json!({"command": "touch made-by-shell"})).await;
    assert_eq!(question.tool, "bash");
    assert_eq!(question.target, "touch made-by-shell");
    assert!(!env.project.path().join("made-by-shell").exists());
    answer(&answering, &env, &question, json!({"type": "once"})).await;
    let result = tokio::time::timeout(Duration::from_secs(30), shell)
        .await
        .expect("answered in time")
        .expect("task")
        .expect("session.shell");
    assert_eq!(result["ran"], true, "{result}");
    assert!(env.project.path().join("made-by-shell").exists());

    // Denied with a note: nothing runs and the answer says why.
    let (shell, question) =
        shell_asking(&env, &mut events, json!({"command": "touch never-made"})).await;
    answer(
        &answering,
        &env,
        &question,
        json!({"type": "deny", "note": "not now"}),
    )
    .await;
    let result = shell.await.expect("task").expect("session.shell");
    assert_eq!(result["ran"], false, "{result}");
    let output = result["output"].as_str().unwrap_or("");
    assert!(
        output.contains("denied") && output.contains("not now"),
        "{result}"
    );
    assert!(!env.project.path().join("never-made").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_kills_a_command_at_its_timeout_and_refuses_an_empty_one() {
    let env = Env::start().await;
    let answering = answering_client(&env).await;
    let mut events = env.subscribe().await;
    // `sleep` is not on the read-only list: asked, and allowed once.
    let (shell, question) = shell_asking(
        &env,
        &mut events,
        json!({"command": "echo before; sleep 30", "timeoutSecs": 1}),
    )
    .await;
    answer(&answering, &env, &question, json!({"type": "once"})).await;
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(20), shell)
        .await
        .expect("killed at its timeout")
        .expect("task")
        .expect("session.shell");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(result["timedOut"], true, "{result}");
    assert!(
        result["output"].as_str().unwrap_or("").contains("before"),
        "{result}"
    );
    let empty = env
        .client
        .call_raw(
            "session.shell",
            json!({"sessionId": env.session, "command": "  "}),
        )
        .await;
    assert!(empty.is_err(), "{empty:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_list_shows_the_sessions_background_jobs() {
    let env = Env::start().await;
    let list = env
        .client
        .call_raw("job.list", json!({"sessionId": env.session}))
        .await
        .expect("job.list");
    assert_eq!(list["jobs"], json!([]), "{list}");

    env.push(vec![
        tool(
            "c1",
            "job",
            json!({"action": "start", "command": "sleep 30"}),
        ),
        tool(
            "c2",
            "job",
            json!({"action": "start", "command": "echo done-quickly"}),
        ),
    ]);
    env.push(vec![agent_common::text("Started.")]);
    env.run_done("start two jobs", json!({}), Answer::Once)
        .await;

    // The quick one ends on its own; the list says so once it has.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let list = loop {
        let list = env
            .client
            .call_raw("job.list", json!({"sessionId": env.session}))
            .await
            .expect("job.list");
        if list["jobs"][1]["running"] == false || std::time::Instant::now() > deadline {
            break list;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let jobs = list["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 2, "{list}");
    assert_eq!(jobs[0]["id"], "j1");
    assert_eq!(jobs[0]["command"], "sleep 30");
    assert_eq!(jobs[0]["running"], true);
    assert!(jobs[0].get("ended").is_none(), "{list}");
    assert_eq!(jobs[1]["command"], "echo done-quickly");
    assert_eq!(jobs[1]["running"], false, "{list}");
    assert_eq!(jobs[1]["exitCode"], 0, "{list}");

    let missing = env
        .client
        .call_raw("job.list", json!({"sessionId": "ses_missing"}))
        .await;
    assert!(missing.is_err(), "{missing:?}");
}
