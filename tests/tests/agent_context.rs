//! What goes into a request: compaction at the threshold (the next request carries the summary,
//! not the old turns, while the store keeps them), `/compact`, instruction files from the project
//! only, and the slash commands `/init` and custom ones.

mod agent_common;

use agent_common::{Answer, Env, follow, last, parts_text, results, text, tool};
use serde_json::json;
use totem_protocol::EventKind;
use totem_tests::sim::{SimEvent, SimModel};

fn system_of(body: &serde_json::Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_triggers_at_the_threshold_and_the_summary_replaces_old_turns() {
    let env = Env::start().await;
    env.sim.set_models(vec![SimModel::new("small:1b", 16384)]);
    let model = json!({"model": "sim/small:1b"});
    // About 6k tokens of prompt and 7k of answer: the second run's request passes 80 % of 16k.
    let old_prompt = format!("OLD-PROMPT {}", "lorem ipsum ".repeat(2000));
    let old_answer = format!("OLD-ANSWER {} OLD-END", "dolor sit ".repeat(2800));
    env.push(vec![text(&old_answer), SimEvent::usage(6000, 7000)]);
    let mut events = env.subscribe().await;
    let run = env.prompt(&old_prompt, model.clone()).await;
    let first = follow(&env, &mut events, &run, Answer::None).await;
    assert!(
        matches!(last(&first), EventKind::RunDone { .. }),
        "{:?}",
        last(&first)
    );
    assert!(
        !first.iter().any(
            |e| matches!(&e.kind, EventKind::Notice { text, .. } if text.contains("Compacted"))
        )
    );

    env.push(vec![text(
        "SUMMARY-XYZ: the user sent lorem ipsum; the model answered dolor sit.",
    )]);
    env.push(vec![text("Continuing.")]);
    let run = env.prompt("next step", model).await;
    let second = follow(&env, &mut events, &run, Answer::None).await;
    assert!(
        matches!(last(&second), EventKind::RunDone { .. }),
        "{:?}",
        last(&second)
    );
    assert!(
        second.iter().any(
            |e| matches!(&e.kind, EventKind::Notice { text, .. } if text.contains("Compacted"))
        )
    );

    let requests = env.sim.chat_requests();
    assert_eq!(requests.len(), 3);
    // Ollama's num_ctx grew past the 8192 floor to fit the first request, within the window.
    let num_ctx = requests[0].body["options"]["num_ctx"].as_u64().unwrap_or(0);
    assert!(num_ctx > 8192 && num_ctx <= 16384, "num_ctx {num_ctx}");
    assert!(
        !requests.iter().any(|r| r.truncated),
        "a request was silently cut"
    );
    // The summary request saw the old turns and offered no tools.
    let summary_request = requests[1].body.to_string();
    // (the middle of a long session is cut to fit the summariser's window; start and end stay)
    assert!(summary_request.contains("OLD-PROMPT") && summary_request.contains("OLD-END"));
    assert!(
        requests[1]
            .body
            .get("tools")
            .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty))
    );
    // The next request carries the summary and not the old turns.
    let next = &requests[2].body;
    assert!(
        system_of(next).contains("SUMMARY-XYZ"),
        "{}",
        system_of(next)
    );
    let messages = next["messages"].to_string();
    assert!(!messages.contains("OLD-PROMPT") && !messages.contains("OLD-ANSWER"));
    assert!(messages.contains("next step"));

    // The store still has everything.
    let stored = env
        .client
        .call_raw("session.messages", json!({"sessionId": env.session}))
        .await
        .expect("messages")
        .to_string();
    assert!(stored.contains("OLD-PROMPT") && stored.contains("OLD-ANSWER"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_compacts_mid_run_and_goes_on_with_the_summary() {
    let env = Env::start().await;
    env.sim.set_models(vec![
        SimModel::new("coder:16k", 16384),
        SimModel::new("summariser:1b", 32768),
    ]);
    let model = json!({"model": "sim/coder:16k"});
    // `compaction.model` names the model that writes summaries.
    let path = env.daemon.home.join("settings.json");
    let mut settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("settings")).expect("json");
    settings["compaction"] = json!({"model": "sim/summariser:1b"});
    std::fs::write(&path, settings.to_string()).expect("write settings");
    // Three files of about 4k tokens each (every line starts with the file's marker): the request
    // after the third result passes 80 % of the 16k window; the ones before stay below it.
    for name in ["a", "b", "c"] {
        let marker = format!("FILE-{}-MARKER", name.to_uppercase());
        let body: String = (0..10)
            .map(|_| format!("{marker} {}\n", "x".repeat(1580)))
            .collect();
        agent_common::write_file(env.project.path(), &format!("{name}.txt"), &body);
    }
    env.push(vec![tool("c1", "read", json!({"path": "a.txt"}))]);
    env.push(vec![tool("c2", "read", json!({"path": "b.txt"}))]);
    env.push(vec![tool("c3", "read", json!({"path": "c.txt"}))]);
    env.push(vec![text(
        "SUMMARY-MIDRUN: a.txt and b.txt were read; c.txt next.",
    )]);
    env.push(vec![text("Read all three files: ALL-READ.")]);
    let mut events = env.subscribe().await;
    let run = env
        .prompt("read a.txt, b.txt and c.txt", model.clone())
        .await;
    let events = follow(&env, &mut events, &run, Answer::None).await;
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{:?}",
        last(&events)
    );
    let notice = events.iter().find_map(|e| match &e.kind {
        EventKind::Notice { text, run_id, .. } if text.contains("Compacted") => {
            Some((text.clone(), run_id.clone()))
        }
        _ => None,
    });
    let (notice, notice_run) = notice.expect("a compaction notice during the run");
    assert_eq!(notice_run.as_deref(), Some(run.as_str()));
    assert!(notice.contains("16384"), "{notice}");
    assert!(notice.contains("sim/summariser:1b"), "{notice}");
    assert!(
        parts_text(&events).contains("ALL-READ"),
        "the run finished with the model's final answer"
    );

    let requests = env.sim.chat_requests();
    assert_eq!(requests.len(), 5, "three steps, the summary, the last step");
    for before in &requests[..3] {
        assert!(!system_of(&before.body).contains("SUMMARY-MIDRUN"));
    }
    // The summary request saw the older steps of this very run and offered no tools.
    let summary_request = &requests[3].body;
    assert_eq!(summary_request["model"], "summariser:1b");
    assert_eq!(requests[4].body["model"], "coder:16k");
    let asked = summary_request.to_string();
    assert!(asked.contains("FILE-A-MARKER") && asked.contains("FILE-B-MARKER"));
    assert!(
        summary_request
            .get("tools")
            .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty))
    );
    // The following request carries the summary instead of the old steps; it keeps the task
    // and the newest step, and every call in it still has its result.
    let next = &requests[4].body;
    assert!(
        system_of(next).contains("SUMMARY-MIDRUN"),
        "{}",
        system_of(next)
    );
    let messages = next["messages"].to_string();
    assert!(!messages.contains("FILE-A-MARKER") && !messages.contains("FILE-B-MARKER"));
    assert!(messages.contains("FILE-C-MARKER"));
    assert!(messages.contains("read a.txt, b.txt and c.txt"));
    assert!(!requests.iter().any(|r| r.truncated), "a request was cut");

    // A later run starts from the same point: summary, prompt, newest step, new prompt.
    env.push(vec![text("ok")]);
    let run = env.prompt("what next?", model).await;
    let mut stream = env.subscribe().await;
    follow(&env, &mut stream, &run, Answer::None).await;
    let later = env.sim.chat_requests().pop().expect("a request").body;
    assert!(system_of(&later).contains("SUMMARY-MIDRUN"));
    let messages = later["messages"].to_string();
    assert!(!messages.contains("FILE-A-MARKER") && !messages.contains("FILE-B-MARKER"));
    assert!(messages.contains("FILE-C-MARKER") && messages.contains("what next?"));

    // The store keeps every step.
    let stored = env
        .client
        .call_raw("session.messages", json!({"sessionId": env.session}))
        .await
        .expect("messages")
        .to_string();
    assert!(stored.contains("FILE-A-MARKER") && stored.contains("FILE-B-MARKER"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_command_summarises_on_demand() {
    let env = Env::start().await;
    env.push(vec![text("first answer FIRST-TURN")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("first FIRST-TURN", json!({})).await;
    follow(&env, &mut events, &run, Answer::None).await;

    env.push(vec![text("SUMMARY-ON-DEMAND")]);
    let result = env
        .client
        .call_raw(
            "session.command",
            json!({"sessionId": env.session, "command": "/compact"}),
        )
        .await
        .expect("/compact");
    assert!(
        result["text"].as_str().unwrap_or("").contains("Compacted"),
        "{result}"
    );

    env.push(vec![text("ok")]);
    let run = env.prompt("second", json!({})).await;
    follow(&env, &mut events, &run, Answer::None).await;
    let last_request = env.sim.chat_requests().pop().expect("a request").body;
    assert!(system_of(&last_request).contains("SUMMARY-ON-DEMAND"));
    assert!(!last_request["messages"].to_string().contains("FIRST-TURN"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instruction_files_outside_the_root_are_never_read() {
    let outer = tempfile::tempdir().expect("outer folder");
    std::fs::write(outer.path().join("AGENTS.md"), "OUTSIDE-SECRET rule\n").expect("outer agents");
    let project = outer.path().join("project");
    agent_common::write_file(&project, "AGENTS.md", "ROOT-RULE: use tabs\n");
    agent_common::write_file(&project, "sub/AGENTS.md", "SUB-RULE: small functions\n");
    agent_common::write_file(&project, "sub/code.txt", "sub code\n");
    agent_common::write_file(&project, "linked/code.txt", "linked code\n");
    // A link inside the project that points at the outer instructions.
    std::os::unix::fs::symlink(
        outer.path().join("AGENTS.md"),
        project.join("linked/AGENTS.md"),
    )
    .expect("symlink");

    let holder = tempfile::TempDir::new().expect("holder");
    let env = Env::start_in(holder).await;
    let project_id = env
        .client
        .call_raw("project.open", json!({"path": project}))
        .await
        .expect("project.open")["id"]
        .clone();
    let session = env
        .client
        .call_raw("session.create", json!({"projectId": project_id}))
        .await
        .expect("session")["id"]
        .as_str()
        .expect("id")
        .to_string();
    env.push(vec![tool("c1", "read", json!({"path": "sub/code.txt"}))]);
    env.push(vec![tool("c2", "read", json!({"path": "linked/code.txt"}))]);
    env.push(vec![text("done")]);
    let mut stream = env.client.subscribe(&session, 0).await.expect("subscribe");
    let accepted = env
        .client
        .call_raw(
            "session.prompt",
            json!({"sessionId": session, "text": "read", "model": agent_common::MODEL}),
        )
        .await
        .expect("prompt");
    let run = accepted["runId"].as_str().expect("run").to_string();
    let events = follow(&env, &mut stream, &run, Answer::None).await;
    assert!(matches!(last(&events), EventKind::RunDone { .. }));

    let requests = env.sim.chat_requests();
    assert!(system_of(&requests[0].body).contains("ROOT-RULE"));
    for request in &requests {
        assert!(
            !request.body.to_string().contains("OUTSIDE-SECRET"),
            "outside instructions leaked"
        );
    }
    let results = results(&events);
    assert!(results[0].1.contains("SUB-RULE"), "{:?}", results[0]);
    assert!(!results[1].1.contains("OUTSIDE-SECRET"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_writes_agents_md_and_custom_commands_become_prompts() {
    let env = Env::start().await;
    agent_common::write_file(
        env.project.path(),
        "package.json",
        r#"{"name": "demo", "scripts": {"test": "node test.js", "lint": "eslint ."}}"#,
    );
    let result = env
        .client
        .call_raw(
            "session.command",
            json!({"sessionId": env.session, "command": "init"}),
        )
        .await
        .expect("/init");
    assert!(result["text"].as_str().unwrap_or("").contains("AGENTS.md"));
    let agents = env.file("AGENTS.md");
    assert!(
        agents.contains("npm run test") && agents.contains("npm run lint"),
        "{agents}"
    );

    agent_common::write_file(
        env.project.path(),
        ".totem/commands/review.md",
        "---\nmode: plan\n---\nReview $ARGUMENTS carefully.\n",
    );
    env.push(vec![text("Looks fine.")]);
    let mut events = env.subscribe().await;
    let result = env
        .client
        .call_raw(
            "session.command",
            json!({"sessionId": env.session, "command": "/review", "args": "src/app.js"}),
        )
        .await
        .expect("/review");
    let run = result["runId"].as_str().expect("a run").to_string();
    follow(&env, &mut events, &run, Answer::None).await;
    let request = &env.sim.chat_requests()[0].body;
    assert!(
        request["messages"]
            .to_string()
            .contains("Review src/app.js carefully.")
    );
    assert!(system_of(request).contains("Mode: Plan"));

    let unknown = env
        .client
        .call_raw(
            "session.command",
            json!({"sessionId": env.session, "command": "/nope"}),
        )
        .await
        .expect_err("unknown command");
    assert_eq!(unknown.code(), Some(-32004));
}
