//! Plan and Build modes: Plan offers only the read-only tools and says so; a writing call made
//! anyway is refused without touching the disk.

mod agent_common;

use agent_common::{Answer, Env, follow, last, results, text, tool};
use serde_json::json;
use totem_protocol::EventKind;

fn tool_names(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_never_offers_a_writing_tool() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "x.txt", "content": "no"}),
    )]);
    env.push(vec![text("Plan: 1. do it")]);
    let events = env
        .run_done("plan the change", json!({"mode": "plan"}), Answer::None)
        .await;

    for request in env.sim.chat_requests() {
        let names = tool_names(&request.body);
        assert_eq!(names, ["read", "list", "glob", "grep", "todo"], "{names:?}");
        let system = request.body["messages"][0]["content"]
            .as_str()
            .unwrap_or("");
        assert!(system.contains("Mode: Plan"), "{system}");
        assert!(!system.contains("Mode: Build"));
    }
    let results = results(&events);
    assert!(
        results[0].2 && results[0].1.contains("not available"),
        "{results:?}"
    );
    assert!(!env.project.path().join("x.txt").exists());
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::PermissionAsked { .. })),
        "a refused tool asks nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_mode_offers_every_tool() {
    let env = Env::start().await;
    env.push(vec![text("ok")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("hi", json!({"mode": "build"})).await;
    follow(&env, &mut events, &run, Answer::None).await;
    let names = tool_names(&env.sim.chat_requests()[0].body);
    for needed in ["write", "edit", "patch", "bash", "job"] {
        assert!(names.iter().any(|n| n == needed), "{names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_mode_is_refused_with_the_known_ones() {
    let env = Env::start().await;
    let refused = env
        .client
        .call_raw(
            "session.prompt",
            json!({"sessionId": env.session, "text": "x", "mode": "yolo"}),
        )
        .await
        .expect_err("unknown mode");
    let message = refused.to_string();
    assert!(
        message.contains("build") && message.contains("plan"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_from_settings_brings_its_prompt_tools_and_rules() {
    let env = Env::start().await;
    let path = env.daemon.home.join("settings.json");
    let mut settings: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("settings.json")).expect("json");
    settings["agents"] = json!({
        "reviewer": {"prompt": "REVIEWER-PROMPT: only comment.", "readOnly": true, "deny": ["read(secret/**)"]},
    });
    std::fs::write(&path, serde_json::to_vec(&settings).expect("encode")).expect("write settings");
    agent_common::write_file(env.project.path(), "secret/key.txt", "hidden\n");

    env.push(vec![tool("c1", "read", json!({"path": "secret/key.txt"}))]);
    env.push(vec![text("Reviewed.")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("review", json!({"mode": "reviewer"})).await;
    let events = follow(&env, &mut events, &run, Answer::None).await;
    assert!(
        matches!(last(&events), EventKind::RunDone { run } if run.mode.as_deref() == Some("reviewer"))
    );
    let request = &env.sim.chat_requests()[0].body;
    let system = request["messages"][0]["content"].as_str().unwrap_or("");
    assert!(
        system.contains("REVIEWER-PROMPT") && system.contains("Mode: Plan"),
        "{system}"
    );
    assert_eq!(
        tool_names(request),
        ["read", "list", "glob", "grep", "todo"]
    );
    let results = results(&events);
    assert!(
        results[0].2 && results[0].1.contains("denied") && !results[0].1.contains("hidden"),
        "{results:?}"
    );
}
