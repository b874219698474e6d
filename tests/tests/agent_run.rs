//! Runs end to end: the real totemd, an Ollama simulator scripted per test, a client on the
//! socket. A prompt becomes a run that streams parts, calls tools, asks permission, and ends.

mod agent_common;

use agent_common::{Answer, Env, follow, last, next_event, parts, results, text, tool};
use serde_json::json;
use totem_protocol::{EventKind, Part, Role};
use totem_tests::sim::SimEvent;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_answer_is_streamed_stored_and_counted() {
    let env = Env::start().await;
    env.push(vec![text("Hello"), text(" world"), SimEvent::usage(120, 7)]);
    let mut events = env.subscribe().await;
    let run = env.prompt("Say hello", json!({})).await;
    let events = follow(&env, &mut events, &run, Answer::None).await;

    assert!(
        matches!(last(&events), EventKind::RunDone { run: r } if r.model.as_deref() == Some(agent_common::MODEL)),
        "{:?}",
        last(&events)
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::RunStarted { .. }))
    );
    assert_eq!(
        parts(&events),
        vec![Part::Text {
            text: "Hello world".into()
        }]
    );
    let usage = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Usage { usage, session, .. } => Some((*usage, *session)),
            _ => None,
        })
        .expect("a usage event");
    assert_eq!((usage.0.input_tokens, usage.0.output_tokens), (120, 7));
    assert_eq!(usage.1.input_tokens, 120);

    // Stored: the prompt and the answer, with the answer's part.
    let stored = env
        .client
        .call_raw("session.messages", json!({"sessionId": env.session}))
        .await
        .expect("messages");
    let messages: Vec<totem_protocol::Message> =
        serde_json::from_value(stored["messages"].clone()).expect("messages decode");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].role, Role::User);
    assert_eq!(
        messages[1].parts,
        vec![Part::Text {
            text: "Hello world".into()
        }]
    );
    let session: totem_protocol::Session = serde_json::from_value(
        env.client
            .call_raw("session.get", json!({"sessionId": env.session}))
            .await
            .expect("session.get"),
    )
    .expect("session decodes");
    assert_eq!(session.usage.map(|u| u.output_tokens), Some(7));

    // The request carried the system prompt, the prompt and the tools.
    let request = &env.sim.chat_requests()[0].body;
    assert_eq!(request["messages"][0]["role"], "system");
    assert!(
        request["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("Mode: Build")
    );
    let names: Vec<&str> = request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|tool| tool["function"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        names,
        [
            "read", "list", "glob", "grep", "write", "edit", "patch", "bash", "job", "todo",
            "terminal"
        ],
        "{}",
        request["tools"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_run_reads_edits_runs_a_command_and_answers() {
    let env = Env::start().await;
    agent_common::write_file(
        env.project.path(),
        "src/app.js",
        "var a = 1;\nconsole.log(a);\n",
    );
    env.push(vec![tool("c1", "read", json!({"path": "src/app.js"}))]);
    env.push(vec![tool(
        "c2",
        "edit",
        json!({"path": "src/app.js", "oldString": "var a = 1;", "newString": "var a = 2;"}),
    )]);
    env.push(vec![tool(
        "c3",
        "bash",
        json!({"command": "grep -c 'a = 2' src/app.js > count.txt"}),
    )]);
    env.push(vec![text("Changed a to 2 and counted it.")]);
    let events = env.run_done("Set a to 2", json!({}), Answer::Once).await;
    assert_eq!(env.file("src/app.js"), "var a = 2;\nconsole.log(a);\n");
    assert_eq!(env.file("count.txt").trim(), "1");
    let results = results(&events);
    assert_eq!(
        results.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        ["read", "edit", "bash"]
    );
    assert!(results.iter().all(|r| !r.2), "{results:?}");
    assert!(results[0].1.contains("console.log"), "{}", results[0].1);
    // Editing and running a command asked; reading did not.
    let asked: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PermissionAsked { question } => Some(question.tool.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, ["edit", "bash"]);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::PermissionResolved { .. }))
            .count(),
        2
    );
    // The model saw each result in the next request.
    let requests = env.sim.chat_requests();
    assert_eq!(requests.len(), 4);
    let second = requests[1].body["messages"].to_string();
    assert!(second.contains("console.log"), "{second}");
    assert_eq!(
        parts(&events).last(),
        Some(&Part::Text {
            text: "Changed a to 2 and counted it.".into()
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_sent_during_a_run_wait_their_turn_and_join_the_conversation_when_they_start() {
    let env = Env::start().await;
    // A slow model: the first answer starts after 1.5 s, while two more prompts are sent.
    let mut slow = totem_tests::sim::Script::new(vec![text("one"), text(" two"), text(" three")]);
    slow.first_delay_ms = 1500;
    slow.delay_ms = 100;
    env.sim.push(totem_tests::sim::Reply::Stream(slow));
    env.push(vec![text("second answer")]);
    env.push(vec![text("third answer")]);
    let mut events = env.subscribe().await;
    let first = env.prompt("first", json!({})).await;
    let second = env.prompt("second", json!({})).await;
    let third = env.prompt("third", json!({})).await;
    let mut seen = follow(&env, &mut events, &first, Answer::None).await;
    seen.extend(follow(&env, &mut events, &second, Answer::None).await);
    seen.extend(follow(&env, &mut events, &third, Answer::None).await);
    assert_eq!(
        env.sim.chat_requests().len(),
        3,
        "no request before the first answer"
    );
    let order: Vec<String> = seen
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::RunStarted { run } => Some(format!("start {}", run.id)),
            EventKind::RunDone { run } => Some(format!("done {}", run.id)),
            EventKind::MessageCreated { message } => Some(format!(
                "{:?} {}",
                message.role,
                parts_text_of(&message.parts)
            )),
            EventKind::PartDone {
                part: Part::Text { text },
                ..
            } => Some(format!("answer {text}")),
            _ => None,
        })
        .collect();
    // Each prompt joins the conversation when its run starts, after the answers before it.
    let expected = [
        "User first".into(),
        format!("start {first}"),
        "Assistant ".into(),
        "answer one two three".into(),
        format!("done {first}"),
        "User second".into(),
        format!("start {second}"),
        "Assistant ".into(),
        "answer second answer".into(),
        format!("done {second}"),
        "User third".into(),
        format!("start {third}"),
        "Assistant ".into(),
        "answer third answer".into(),
        format!("done {third}"),
    ];
    assert_eq!(order, expected);
    // And each was announced as queued when it was sent, before the first answer.
    let at = |wanted: &dyn Fn(&EventKind) -> bool| {
        seen.iter()
            .position(|e| wanted(&e.kind))
            .unwrap_or_else(|| panic!("missing in {seen:?}"))
    };
    let first_answer = at(&|k| matches!(k, EventKind::PartDone { .. }));
    for run_id in [&first, &second, &third] {
        let queued = at(&|k| matches!(k, EventKind::RunQueued { run, .. } if run.id == *run_id));
        assert!(queued < first_answer, "{run_id} queued at {queued}");
    }

    // What the model was sent: each prompt after the answers before it.
    let roles_and_text = |i: usize| -> Vec<String> {
        let body = &env.sim.chat_requests()[i].body;
        body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|m| m["role"] != "system")
            .map(|m| {
                format!(
                    "{} {}",
                    m["role"].as_str().unwrap_or(""),
                    m["content"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    assert_eq!(
        roles_and_text(1),
        ["user first", "assistant one two three", "user second"]
    );
    assert_eq!(
        roles_and_text(2),
        [
            "user first",
            "assistant one two three",
            "user second",
            "assistant second answer",
            "user third"
        ]
    );

    // The replay from 0 and session.messages tell the same order.
    let mut replay = env.subscribe().await;
    let mut replayed = Vec::new();
    while replayed.len() < 6 {
        if let EventKind::MessageCreated { message } = next_event(&mut replay, 10).await.kind {
            replayed.push(message.id);
        }
    }
    let stored = env
        .client
        .call_raw("session.messages", json!({"sessionId": env.session}))
        .await
        .expect("messages");
    let messages: Vec<totem_protocol::Message> =
        serde_json::from_value(stored["messages"].clone()).expect("messages decode");
    let texts: Vec<String> = messages.iter().map(|m| parts_text_of(&m.parts)).collect();
    assert_eq!(
        texts,
        [
            "first",
            "one two three",
            "second",
            "second answer",
            "third",
            "third answer"
        ]
    );
    let ids: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
    assert_eq!(replayed, ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_prompt_aborted_before_its_run_starts_never_joins_the_conversation() {
    let env = Env::start().await;
    let mut slow = totem_tests::sim::Script::new(vec![text("late")]);
    slow.first_delay_ms = 20_000;
    env.sim.push(totem_tests::sim::Reply::Stream(slow));
    let mut events = env.subscribe().await;
    let first = env.prompt("first", json!({})).await;
    let second = env.prompt("never sent", json!({})).await;
    // The first run waits on the model; then both are stopped.
    loop {
        if let EventKind::RunQueued { run, .. } = next_event(&mut events, 10).await.kind
            && run.id == second
        {
            break;
        }
    }
    env.client
        .call_raw("session.abort", json!({"sessionId": env.session}))
        .await
        .expect("session.abort");
    let mut lives: std::collections::BTreeMap<String, Vec<&'static str>> = Default::default();
    let mut ended = 0;
    while ended < 2 {
        let event = next_event(&mut events, 20).await;
        let what = match &event.kind {
            EventKind::RunStarted { .. } => "started",
            EventKind::RunAborted { .. } => {
                ended += 1;
                "aborted"
            }
            EventKind::MessageCreated { .. } => "message",
            _ => continue,
        };
        if let Some(run) = event.kind.run_id() {
            lives.entry(run.to_string()).or_default().push(what);
        }
    }
    assert_eq!(lives[&second], ["aborted"], "{lives:?}");
    let stored = env
        .client
        .call_raw("session.messages", json!({"sessionId": env.session}))
        .await
        .expect("messages");
    assert!(!stored.to_string().contains("never sent"), "{stored}");
    let run = env
        .client
        .call_raw("run.get", json!({"runId": second}))
        .await
        .expect("run.get");
    assert_eq!(run["run"]["status"], "aborted", "{run}");
    let _ = first;
}

fn parts_text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failure_fails_the_run_with_its_reason() {
    let env = Env::start().await;
    env.sim
        .push(totem_tests::sim::Reply::error(500, "model crashed"));
    let mut events = env.subscribe().await;
    let run = env.prompt("hi", json!({})).await;
    let events = follow(&env, &mut events, &run, Answer::None).await;
    match last(&events) {
        EventKind::RunFailed { run } => {
            let error = run.error.clone().unwrap_or_default();
            assert!(error.contains("model crashed"), "{error}");
        }
        other => panic!("expected run.failed, got {other:?}"),
    }
    // The session is usable afterwards.
    env.push(vec![text("fine now")]);
    let mut events2 = env.subscribe().await;
    let run2 = env.prompt("again", json!({})).await;
    let events2 = follow(&env, &mut events2, &run2, Answer::None).await;
    assert!(matches!(last(&events2), EventKind::RunDone { .. }));
}

/// Sets `titleModel` in the daemon's settings.json (read at the next run).
fn set_title_model(env: &Env, model: &str) {
    let path = env.daemon.home.join("settings.json");
    let mut settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("settings.json"))
            .expect("settings JSON");
    settings["titleModel"] = json!(model);
    std::fs::write(&path, serde_json::to_vec_pretty(&settings).expect("encode")).expect("write");
}

/// The session's title as `session.get` tells it.
async fn title_of(env: &Env) -> String {
    let session = env
        .client
        .call_raw("session.get", json!({"sessionId": env.session}))
        .await
        .expect("session.get");
    session["title"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_title_model_names_the_session_after_its_first_answer_and_the_run_does_not_wait() {
    let env = Env::start().await;
    set_title_model(&env, agent_common::MODEL);
    env.push(vec![text("They guide ships past rocks at night.\n")]);
    // What the title model answers, in two chunks a second apart.
    env.sim
        .push(totem_tests::sim::Reply::Stream(totem_tests::sim::Script {
            delay_ms: 1_000,
            ..totem_tests::sim::Script::new(vec![text("\"Lighthouse "), text("basics\"")])
        }));
    let mut stream = env.subscribe().await;
    let run = env.prompt("tell me about lighthouses", json!({})).await;
    let events = follow(&env, &mut stream, &run, Answer::None).await;
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{events:?}"
    );
    // The run ended with the title its prompt gave; the model's title comes after, on the side.
    let titles: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SessionUpdated { session } => Some(session.title.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        titles.iter().all(|t| *t == "tell me about lighthouses"),
        "no model-written title before the run's end: {titles:?}"
    );
    let titled = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let event = agent_common::next_event(&mut stream, 30).await;
            if let EventKind::SessionUpdated { session } = &event.kind
                && session.title != "tell me about lighthouses"
            {
                return session.title.clone();
            }
        }
    })
    .await
    .expect("a session.updated with the model's title");
    assert_eq!(titled, "Lighthouse basics");
    assert_eq!(title_of(&env).await, "Lighthouse basics");

    // The title model read the prompt and the answer, and was asked for a title.
    let requests = env.sim.chat_requests();
    assert_eq!(requests.len(), 2, "the run's request and the title's");
    let asked = requests[1].body.to_string();
    assert!(asked.contains("You name coding sessions"), "{asked}");
    assert!(
        asked.contains("tell me about lighthouses") && asked.contains("guide ships past rocks"),
        "{asked}"
    );

    // A later run keeps the title: the title model is not asked again.
    env.push(vec![text("Fresnel lenses.\n")]);
    env.run_done("and their lenses?", json!({}), Answer::None)
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(env.sim.chat_requests().len(), 3);
    assert_eq!(title_of(&env).await, "Lighthouse basics");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_renamed_before_its_first_answer_keeps_its_name_and_no_title_model_means_none() {
    // Renamed while the first run goes on: the title model is not asked.
    let env = Env::start().await;
    set_title_model(&env, agent_common::MODEL);
    env.sim
        .push(totem_tests::sim::Reply::Stream(totem_tests::sim::Script {
            delay_ms: 800,
            ..totem_tests::sim::Script::new(vec![text("One "), text("two.\n")])
        }));
    let mut stream = env.subscribe().await;
    let run = env.prompt("count to two", json!({})).await;
    env.client
        .call_raw(
            "session.rename",
            json!({"sessionId": env.session, "title": "Counting"}),
        )
        .await
        .expect("session.rename");
    let events = follow(&env, &mut stream, &run, Answer::None).await;
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{events:?}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert_eq!(env.sim.chat_requests().len(), 1, "no title request");
    assert_eq!(title_of(&env).await, "Counting");

    // Without titleModel a session keeps its prompt's title and nothing more is asked.
    let env = Env::start().await;
    env.push(vec![text("Hi.\n")]);
    env.run_done("say hi", json!({}), Answer::None).await;
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert_eq!(env.sim.chat_requests().len(), 1);
    assert_eq!(title_of(&env).await, "say hi");
}
