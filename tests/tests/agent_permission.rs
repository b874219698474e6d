//! Permission questions across clients: every attached client sees `permission.asked`, the first
//! answer wins and `permission.resolved` withdraws the question elsewhere; a question outlives its
//! clients; a denial's note reaches the model; secret files ask even for reading.

mod agent_common;

use std::time::{Duration, Instant};

use agent_common::{Answer, Env, follow, last, next_event, results, text, tool};
use serde_json::json;
use totem_client::Client;
use totem_protocol::{ClientCapabilities, EventKind};

async fn second_client(env: &Env) -> Client {
    let (client, _) = Client::connect(
        &env.daemon.socket,
        "second",
        ClientCapabilities { permissions: true },
    )
    .await
    .expect("second client");
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_from_a_second_connection() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "hello.txt", "content": "hi\n"}),
    )]);
    env.push(vec![text("Wrote it.")]);
    let mut first = env.subscribe().await;
    let other = second_client(&env).await;
    let mut second = other.subscribe(&env.session, 0).await.expect("subscribe");
    let run = env.prompt("write hello", json!({})).await;

    let question = loop {
        if let EventKind::PermissionAsked { question } = next_event(&mut second, 30).await.kind {
            break question;
        }
    };
    assert_eq!(
        (question.tool.as_str(), question.target.as_str()),
        ("write", "hello.txt")
    );
    other
        .call_raw(
            "permission.reply",
            json!({"sessionId": env.session, "questionId": question.id, "reply": {"type": "alwaysSession"}}),
        )
        .await
        .expect("the second client answers");
    // The first answer won: a late one is refused.
    let late = env
        .client
        .call_raw(
            "permission.reply",
            json!({"sessionId": env.session, "questionId": question.id, "reply": {"type": "once"}}),
        )
        .await
        .expect_err("a second answer");
    assert_eq!(late.code(), Some(-32009));

    let events = follow(&env, &mut first, &run, Answer::None).await;
    assert!(events.iter().any(
        |e| matches!(&e.kind, EventKind::PermissionAsked { question: q } if q.id == question.id)
    ));
    assert!(events.iter().any(|e| matches!(&e.kind, EventKind::PermissionResolved { question_id, reply: Some(_), .. } if *question_id == question.id)));
    assert!(matches!(last(&events), EventKind::RunDone { .. }));
    assert_eq!(env.file("hello.txt"), "hi\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_waits_for_a_client_that_attaches_later() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "bash",
        json!({"command": "touch made-by-bash"}),
    )]);
    env.push(vec![text("Done.")]);
    let run = env.prompt("make a file", json!({})).await;
    // Only this client was attached; it leaves.
    drop(env.client.clone());
    let Env {
        sim,
        daemon,
        client,
        project,
        session,
    } = env;
    drop(client);

    // Later, another client attaches and finds the question pending.
    let late = {
        let (c, _) = Client::connect(
            &daemon.socket,
            "late",
            ClientCapabilities { permissions: true },
        )
        .await
        .expect("late client");
        c
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let question = loop {
        let list = late
            .call_raw("permission.list", json!({"sessionId": session}))
            .await
            .expect("permission.list");
        if let Some(q) = list["questions"]
            .as_array()
            .and_then(|q| q.first())
            .cloned()
        {
            break q;
        }
        assert!(Instant::now() < deadline, "no question became pending");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(question["tool"], "bash");
    // Replay shows it too.
    let mut stream = late.subscribe(&session, 0).await.expect("subscribe");
    loop {
        if let EventKind::PermissionAsked { question: q } = next_event(&mut stream, 10).await.kind {
            assert_eq!(q.id, question["id"].as_str().unwrap_or_default());
            break;
        }
    }
    late.call_raw(
        "permission.reply",
        json!({"sessionId": session, "questionId": question["id"], "reply": {"type": "once"}}),
    )
    .await
    .expect("reply");
    loop {
        match next_event(&mut stream, 30).await.kind {
            EventKind::RunDone { run: r } if r.id == run => break,
            EventKind::RunFailed { run: r } | EventKind::RunAborted { run: r } if r.id == run => {
                panic!("run ended badly: {r:?}")
            }
            _ => {}
        }
    }
    assert!(project.path().join("made-by-bash").exists());
    drop(sim);
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_with_a_note_reaches_the_model() {
    let env = Env::start().await;
    env.push(vec![tool("c1", "bash", json!({"command": "rm -rf build"}))]);
    env.push(vec![text("Understood.")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("clean", json!({})).await;
    loop {
        if let EventKind::PermissionAsked { question } = next_event(&mut events, 30).await.kind {
            env.reply(
                &question.id,
                json!({"type": "deny", "note": "keep the build folder"}),
            )
            .await;
            break;
        }
    }
    let events = follow(&env, &mut events, &run, Answer::None).await;
    let results = results(&events);
    assert!(
        results[0].2 && results[0].1.contains("keep the build folder"),
        "{results:?}"
    );
    let next = env.sim.chat_requests()[1].body["messages"].to_string();
    assert!(next.contains("keep the build folder"), "{next}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_a_secret_file_asks_first() {
    let env = Env::start().await;
    agent_common::write_file(env.project.path(), ".env", "TOKEN=abc\n");
    env.push(vec![tool("c1", "read", json!({"path": ".env"}))]);
    env.push(vec![text("ok")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("show env", json!({})).await;
    loop {
        if let EventKind::PermissionAsked { question } = next_event(&mut events, 30).await.kind {
            assert_eq!(question.target, ".env");
            env.reply(&question.id, json!({"type": "deny"})).await;
            break;
        }
    }
    let events = follow(&env, &mut events, &run, Answer::None).await;
    let results = results(&events);
    assert!(results[0].2 && !results[0].1.contains("abc"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_for_the_project_is_remembered_by_a_new_session() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "out.txt", "content": "1\n"}),
    )]);
    env.push(vec![text("ok")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("write", json!({})).await;
    loop {
        if let EventKind::PermissionAsked { question } = next_event(&mut events, 30).await.kind {
            env.reply(&question.id, json!({"type": "alwaysProject"}))
                .await;
            break;
        }
    }
    follow(&env, &mut events, &run, Answer::None).await;

    // A new session of the same project writes the same file without asking.
    let session = env
        .client
        .call_raw("session.get", json!({"sessionId": env.session}))
        .await
        .expect("get");
    let other = env
        .client
        .call_raw("session.create", json!({"projectId": session["projectId"]}))
        .await
        .expect("create")["id"]
        .as_str()
        .expect("id")
        .to_string();
    env.push(vec![tool(
        "c2",
        "write",
        json!({"path": "out.txt", "content": "2\n"}),
    )]);
    env.push(vec![text("ok")]);
    let mut stream = env.client.subscribe(&other, 0).await.expect("subscribe");
    let accepted = env
        .client
        .call_raw(
            "session.prompt",
            json!({"sessionId": other, "text": "again", "model": agent_common::MODEL}),
        )
        .await
        .expect("prompt");
    loop {
        match next_event(&mut stream, 30).await.kind {
            EventKind::PermissionAsked { .. } => panic!("asked again"),
            EventKind::RunDone { run } if run.id == accepted["runId"] => break,
            _ => {}
        }
    }
    assert_eq!(env.file("out.txt"), "2\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_did_not_declare_permissions_cannot_answer() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "bash",
        json!({"command": "touch viewer-test"}),
    )]);
    env.push(vec![text("ok")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("go", json!({})).await;
    let question = loop {
        if let EventKind::PermissionAsked { question } = next_event(&mut events, 30).await.kind {
            break question;
        }
    };
    let (viewer, _) = Client::connect(&env.daemon.socket, "viewer", ClientCapabilities::default())
        .await
        .expect("viewer");
    let refused = viewer
        .call_raw(
            "permission.reply",
            json!({"sessionId": env.session, "questionId": question.id, "reply": {"type": "once"}}),
        )
        .await
        .expect_err("a viewer cannot answer");
    assert!(
        refused.to_string().contains("capabilities.permissions"),
        "{refused}"
    );
    // The question is still open and the declared client answers it.
    env.reply(&question.id, json!({"type": "once"})).await;
    let events = follow(&env, &mut events, &run, Answer::None).await;
    assert!(matches!(last(&events), EventKind::RunDone { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_pending_when_the_daemon_is_killed_is_withdrawn_on_restart() {
    let mut env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "bash",
        json!({"command": "echo never > never.txt"}),
    )]);
    let mut events = env.subscribe().await;
    let run = env.prompt("write never.txt", json!({})).await;
    let question = loop {
        if let EventKind::PermissionAsked { question } = next_event(&mut events, 30).await.kind {
            break question;
        }
    };
    let open = env
        .client
        .call_raw("permission.list", json!({"sessionId": env.session}))
        .await
        .expect("permission.list");
    assert_eq!(open["questions"][0]["id"], question.id.as_str());

    env.daemon.kill9();
    let daemon = totem_tests::harness::TestDaemon::start_in(&env.daemon.home);
    let client = daemon.client().await;
    let open = client
        .call_raw("permission.list", json!({"sessionId": env.session}))
        .await
        .expect("permission.list after the restart");
    assert_eq!(open["questions"], json!([]));

    // A client attaching from the start sees the question withdrawn, then the run interrupted.
    let mut stream = client.subscribe(&env.session, 0).await.expect("subscribe");
    let mut replayed = Vec::new();
    loop {
        let e = next_event(&mut stream, 30).await;
        let end = matches!(&e.kind, EventKind::RunInterrupted { run: r } if r.id == run);
        replayed.push(e.kind);
        if end {
            break;
        }
    }
    let asked = replayed
        .iter()
        .position(
            |k| matches!(k, EventKind::PermissionAsked { question: q } if q.id == question.id),
        )
        .expect("the question is in the log");
    let withdrawn = replayed
        .iter()
        .position(|k| {
            matches!(k, EventKind::PermissionResolved { question_id, reply: None, reason }
                if *question_id == question.id && *reason == Some(totem_protocol::WithdrawnReason::Interrupted))
        })
        .expect("the question was withdrawn with the reason `interrupted`");
    assert!(asked < withdrawn && withdrawn < replayed.len() - 1);
    let session = client
        .call_raw("session.get", json!({"sessionId": env.session}))
        .await
        .expect("session.get");
    assert_eq!(session["status"], "idle", "{session}");
    assert!(!env.project.path().join("never.txt").exists());

    // A second restart finds nothing more to withdraw.
    drop(client);
    drop(daemon);
    let daemon = totem_tests::harness::TestDaemon::start_in(&env.daemon.home);
    let client = daemon.client().await;
    let mut stream = client.subscribe(&env.session, 0).await.expect("subscribe");
    let mut resolved = 0;
    while let Ok(Some(Ok(e))) =
        tokio::time::timeout(Duration::from_millis(500), stream.next()).await
    {
        if matches!(e.kind, EventKind::PermissionResolved { .. }) {
            resolved += 1;
        }
    }
    assert_eq!(resolved, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_in_this_session_survives_a_daemon_restart() {
    let mut env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "out.txt", "content": "1\n"}),
    )]);
    env.push(vec![text("ok")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("write", json!({})).await;
    loop {
        if let EventKind::PermissionAsked { question } = next_event(&mut events, 30).await.kind {
            env.reply(&question.id, json!({"type": "alwaysSession"}))
                .await;
            break;
        }
    }
    follow(&env, &mut events, &run, Answer::None).await;

    // A daemon killed and started again still knows what the person said for this session.
    env.daemon.kill9();
    let daemon = totem_tests::harness::TestDaemon::start_in(&env.daemon.home);
    let client = daemon.client().await;
    env.push(vec![tool(
        "c2",
        "write",
        json!({"path": "out.txt", "content": "2\n"}),
    )]);
    env.push(vec![text("ok")]);
    let mut stream = client.subscribe(&env.session, 0).await.expect("subscribe");
    let accepted = client
        .call_raw(
            "session.prompt",
            json!({"sessionId": env.session, "text": "again", "model": agent_common::MODEL}),
        )
        .await
        .expect("prompt");
    loop {
        match next_event(&mut stream, 30).await.kind {
            EventKind::PermissionAsked { question } if question.run_id == accepted["runId"] => {
                panic!("asked again after a restart")
            }
            EventKind::RunDone { run } if run.id == accepted["runId"] => break,
            _ => {}
        }
    }
    assert_eq!(env.file("out.txt"), "2\n");
}
