//! What editors need from the protocol, over the socket against the real totemd: attachments on a
//! prompt (checked like reads, stored as parts, read by the model), `files.changed` after writes,
//! commands and undo/redo, the daemon's own stream (`daemon.subscribe`), and permission questions
//! that carry the proposed diff (or the sub-command that asked).

mod agent_common;

use std::time::Duration;

use agent_common::{Answer, Env, follow, next_event, text, tool};
use serde_json::json;
use totem_client::DaemonStream;
use totem_protocol::{
    DaemonEvent, DaemonEventKind, EventKind, Part, SessionActivity, SessionEvent,
};

fn changed(events: &[SessionEvent]) -> Vec<Vec<String>> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::FilesChanged { paths, .. } => Some(paths.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_are_checked_stored_as_parts_and_read_by_the_model() {
    let env = Env::start().await;
    std::fs::write(env.root().join("app.js"), "one\ntwo\nthree\nfour\n").expect("app.js");
    std::fs::write(env.root().join(".env"), "TOKEN=hush\n").expect(".env");
    env.push(vec![text("Seen.")]);
    let mut stream = env.subscribe().await;
    let run = env
        .prompt(
            "explain",
            json!({"attachments": [
                {"path": "app.js", "range": {"startLine": 2, "endLine": 3}},
                {"path": env.root().join("new.js"), "text": "let unsaved = 1;\n"},
            ]}),
        )
        .await;
    let events = follow(&env, &mut stream, &run, Answer::None).await;
    let prompt = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::MessageCreated { message } => Some(message.clone()),
            _ => None,
        })
        .expect("the prompt's message");
    assert_eq!(prompt.parts.len(), 3, "{:?}", prompt.parts);
    assert!(matches!(&prompt.parts[1],
        Part::Attachment { path, range: Some(r), text, unsaved: false }
            if path == "app.js" && r.start_line == 2 && text == "two\nthree\n"));
    assert!(matches!(&prompt.parts[2],
        Part::Attachment { path, range: None, text, unsaved: true }
            if path == "new.js" && text == "let unsaved = 1;\n"));
    // Stored: a client that reads the session later sees the same parts.
    let stored = env
        .client
        .call_raw("session.messages", json!({"sessionId": env.session}))
        .await
        .expect("session.messages");
    assert_eq!(stored["messages"][0]["parts"][1]["type"], "attachment");
    // The model got the lines and the unsaved text after the prompt.
    let request = env.sim.chat_requests().pop().expect("a chat request");
    let sent = request.body.to_string();
    assert!(
        sent.contains("Attached file `app.js` (lines 2-3)") && sent.contains("two\\nthree\\n"),
        "{sent}"
    );
    assert!(sent.contains("let unsaved = 1;"), "{sent}");
    assert!(!sent.contains("four"), "{sent}");

    // Outside the project, a secret, a folder: refused with a sentence, nothing stored.
    let before = env.sim.chat_requests().len();
    for (attachment, code, words) in [
        (
            json!({"path": "../elsewhere.txt"}),
            -32005,
            "outside the project",
        ),
        (
            json!({"path": "/etc/hostname"}),
            -32005,
            "outside the project",
        ),
        (json!({"path": "missing.js"}), -32005, "no such file"),
        (json!({"path": ".env"}), -32602, "secret"),
        (json!({"path": ".env", "text": "x"}), -32602, "secret"),
        (json!({"path": "."}), -32602, "folder"),
        (
            json!({"path": "app.js", "range": {"startLine": 3, "endLine": 1}}),
            -32602,
            "not a range",
        ),
        (
            json!({"path": "app.js", "text": "x".repeat(100_001)}),
            -32602,
            "too large",
        ),
    ] {
        let e = env
            .client
            .call_raw(
                "session.prompt",
                json!({"sessionId": env.session, "text": "look", "attachments": [attachment]}),
            )
            .await
            .expect_err("a refused attachment");
        assert_eq!(e.code(), Some(code), "{e}");
        assert!(e.to_string().contains(words), "{e}");
    }
    let messages = env
        .client
        .call_raw("session.messages", json!({"sessionId": env.session}))
        .await
        .expect("session.messages");
    assert_eq!(messages["messages"].as_array().map(Vec::len), Some(2));
    assert_eq!(env.sim.chat_requests().len(), before);

    // session.ask takes them too, checked the same way.
    let e = env
        .client
        .call_raw(
            "session.ask",
            json!({"sessionId": env.session, "text": "look", "attachments": [{"path": ".env"}]}),
        )
        .await
        .expect_err("a secret refused");
    assert!(e.to_string().contains("secret"), "{e}");
    env.push(vec![text("The last line is four.")]);
    let outcome = env
        .client
        .call_raw(
            "session.ask",
            json!({"sessionId": env.session, "text": "what is the last line?",
                   "attachments": [{"path": "app.js", "range": {"startLine": 4, "endLine": 4}}]}),
        )
        .await
        .expect("session.ask");
    assert_eq!(outcome["text"], "The last line is four.");
    let sent = env.sim.chat_requests().pop().expect("a chat request");
    let sent = sent.body.to_string();
    assert!(
        sent.contains("Attached file `app.js` (lines 4-4)") && sent.contains("four\\n"),
        "{sent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_changed_follows_writes_commands_and_undo() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "src/a.txt", "content": "a\n"}),
    )]);
    env.push(vec![tool(
        "c2",
        "bash",
        json!({"command": "printf 'b\\n' > b.txt"}),
    )]);
    env.push(vec![text("Done.")]);
    let mut stream = env.subscribe().await;
    let run = env.prompt("write two files", json!({})).await;
    let events = follow(&env, &mut stream, &run, Answer::Once).await;
    // The write is announced right after its call, the command's file when the run ends.
    assert_eq!(
        changed(&events),
        vec![vec!["src/a.txt".to_string()], vec!["b.txt".to_string()]]
    );
    let write_result = events
        .iter()
        .position(|e| matches!(&e.kind, EventKind::PartDone { part: Part::ToolResult { tool, .. }, .. } if tool == "write"))
        .expect("the write's result");
    let first_change = events
        .iter()
        .position(|e| matches!(&e.kind, EventKind::FilesChanged { .. }))
        .expect("files.changed");
    assert!(
        first_change < write_result,
        "announced before the next step"
    );
    assert!(events.iter().all(|e| match &e.kind {
        EventKind::FilesChanged { run_id, .. } => run_id.as_deref() == Some(run.as_str()),
        _ => true,
    }));

    env.client
        .call_raw("session.undo", json!({"sessionId": env.session}))
        .await
        .expect("undo");
    let mut undo_paths = None;
    while undo_paths.is_none() {
        if let EventKind::FilesChanged { run_id, paths } = next_event(&mut stream, 10).await.kind {
            assert_eq!(run_id.as_deref(), Some(run.as_str()));
            undo_paths = Some(paths);
        }
    }
    assert_eq!(
        undo_paths,
        Some(vec!["b.txt".to_string(), "src/a.txt".to_string()])
    );
    assert!(!env.root().join("b.txt").exists());
    env.client
        .call_raw("session.redo", json!({"sessionId": env.session}))
        .await
        .expect("redo");
    loop {
        if let EventKind::FilesChanged { paths, .. } = next_event(&mut stream, 10).await.kind {
            assert_eq!(paths, vec!["b.txt".to_string(), "src/a.txt".to_string()]);
            break;
        }
    }
    assert_eq!(env.file("b.txt"), "b\n");
}

async fn next_daemon(stream: &mut DaemonStream) -> DaemonEvent {
    tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("a daemon event in time")
        .expect("stream open")
        .expect("event decodes")
}

/// Daemon events until one matches, returning those seen (the match last).
async fn daemon_until(
    stream: &mut DaemonStream,
    what: impl Fn(&DaemonEventKind) -> bool,
) -> Vec<DaemonEventKind> {
    let mut seen = Vec::new();
    loop {
        let event = next_daemon(stream).await;
        let done = what(&event.kind);
        seen.push(event.kind);
        if done {
            return seen;
        }
    }
}

fn status_of(kind: &DaemonEventKind, session: &str) -> Option<SessionActivity> {
    match kind {
        DaemonEventKind::SessionStatus {
            session_id, status, ..
        } if session_id == session => Some(*status),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_stream_follows_sessions_status_and_questions() {
    let env = Env::start().await;
    let mut daemon = env
        .client
        .subscribe_daemon()
        .await
        .expect("daemon.subscribe");
    // Sessions created and renamed, in any project.
    let project = env
        .client
        .call_raw("project.open", json!({"path": env.root()}))
        .await
        .expect("project.open");
    let other = env
        .client
        .call_raw(
            "session.create",
            json!({"projectId": project["id"], "title": "other"}),
        )
        .await
        .expect("session.create");
    let other_id = other["id"].as_str().expect("id").to_string();
    let created = daemon_until(&mut daemon, |k| {
        matches!(k, DaemonEventKind::SessionCreated { .. })
    })
    .await;
    assert!(
        matches!(created.last(), Some(DaemonEventKind::SessionCreated { session }) if session.id == other_id && session.title == "other")
    );
    env.client
        .call_raw(
            "session.rename",
            json!({"sessionId": other_id, "title": "renamed"}),
        )
        .await
        .expect("rename");
    daemon_until(
        &mut daemon,
        |k| matches!(k, DaemonEventKind::SessionUpdated { session } if session.title == "renamed"),
    )
    .await;

    // A run: running, then waiting on a question, then running, then idle, and its end.
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "x.txt", "content": "x\n"}),
    )]);
    env.push(vec![text("Wrote it.")]);
    let run = env.prompt("write x", json!({})).await;
    let until_question = daemon_until(&mut daemon, |k| {
        matches!(k, DaemonEventKind::PermissionAsked { .. })
    })
    .await;
    let statuses: Vec<SessionActivity> = until_question
        .iter()
        .filter_map(|k| status_of(k, &env.session))
        .collect();
    assert_eq!(statuses, vec![SessionActivity::Running]);
    let Some(DaemonEventKind::PermissionAsked { question }) = until_question.last() else {
        unreachable!()
    };
    let waiting = next_daemon(&mut daemon).await.kind;
    assert_eq!(
        status_of(&waiting, &env.session),
        Some(SessionActivity::Waiting)
    );

    // A client that subscribes now is told the state first: waiting, and the open question.
    let late = totem_client::Client::connect(
        &env.daemon.socket,
        "late",
        totem_protocol::ClientCapabilities { permissions: true },
    )
    .await
    .expect("late client")
    .0;
    let mut late_stream = late.subscribe_daemon().await.expect("daemon.subscribe");
    let first = next_daemon(&mut late_stream).await.kind;
    assert_eq!(
        status_of(&first, &env.session),
        Some(SessionActivity::Waiting)
    );
    assert!(
        matches!(next_daemon(&mut late_stream).await.kind, DaemonEventKind::PermissionAsked { question: q } if q.id == question.id)
    );

    late.call_raw(
        "permission.reply",
        json!({"sessionId": env.session, "questionId": question.id, "reply": {"type": "once"}}),
    )
    .await
    .expect("reply");
    let rest = daemon_until(
        &mut daemon,
        |k| matches!(k, DaemonEventKind::RunEnded { run: r } if r.id == run),
    )
    .await;
    assert!(rest.iter().any(|k| matches!(k,
        DaemonEventKind::PermissionResolved { session_id, question_id, reply: Some(_), .. }
            if *session_id == env.session && *question_id == question.id)));
    let statuses: Vec<SessionActivity> = rest
        .iter()
        .filter_map(|k| status_of(k, &env.session))
        .collect();
    assert_eq!(
        statuses,
        vec![SessionActivity::Running, SessionActivity::Idle]
    );
    assert!(
        matches!(rest.last(), Some(DaemonEventKind::RunEnded { run: r })
        if r.status == totem_protocol::RunStatus::Done)
    );

    env.client
        .call_raw("session.delete", json!({"sessionId": other_id}))
        .await
        .expect("delete");
    daemon_until(
        &mut daemon,
        |k| matches!(k, DaemonEventKind::SessionDeleted { session_id } if *session_id == other_id),
    )
    .await;
    // Params are checked like any method's.
    let e = env
        .client
        .call_raw("daemon.subscribe", json!({"project": "x"}))
        .await
        .expect_err("unknown field");
    assert_eq!(e.code(), Some(-32602));
    assert!(
        env.client
            .unsubscribe_daemon(&daemon.subscription)
            .await
            .expect("daemon.unsubscribe")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_carry_the_proposed_diff_or_the_subcommand() {
    let env = Env::start().await;
    std::fs::write(env.root().join("math.js"), "const a = 1;\nconst b = 2;\n").expect("math.js");
    let long: String = (0..1000).map(|i| format!("line {i}\n")).collect();
    env.push(vec![
        tool(
            "c1",
            "edit",
            json!({"path": "math.js", "oldString": "const b = 2;", "newString": "const b = 3;"}),
        ),
        tool("c2", "write", json!({"path": "long.txt", "content": long})),
        tool("c3", "bash", json!({"command": "ls && touch made.txt"})),
    ]);
    env.push(vec![text("Done.")]);
    let events = env.run("change things", json!({}), Answer::Once).await;
    let questions: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PermissionAsked { question } => Some(question.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(questions.len(), 3, "{questions:?}");
    let edit = &questions[0];
    assert_eq!(
        edit.diff.as_deref(),
        Some(
            "--- a/math.js\n+++ b/math.js\n@@ -1,2 +1,2 @@\n const a = 1;\n-const b = 2;\n+const b = 3;\n"
        )
    );
    assert!(!edit.truncated);
    let write = &questions[1];
    let diff = write.diff.as_deref().expect("the write's diff");
    assert!(write.truncated);
    assert_eq!(diff.lines().count(), 400);
    assert!(diff.starts_with("--- a/long.txt\n+++ b/long.txt\n@@ -0,0 +1,1000 @@\n+line 0\n"));
    let bash = &questions[2];
    assert_eq!(bash.diff, None);
    assert_eq!(bash.target, "ls && touch made.txt");
    assert_eq!(bash.subcommand.as_deref(), Some("touch made.txt"));
    assert_eq!(env.file("math.js"), "const a = 1;\nconst b = 3;\n");
}
