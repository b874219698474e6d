//! What a run streams: deltas coalesced (never one event per token) yet each sent within 50 ms, reasoning as its own part,
//! the todo list as an event, usage with cost from the model list's prices, and a stream cut
//! mid-way keeping what arrived while the run fails with the reason.

mod agent_common;

use agent_common::{Answer, Env, follow, last, parts, text, tool};
use serde_json::json;
use totem_protocol::{EventKind, Part};
use totem_tests::sim::{Reply, Script, Sim, SimEvent, SimKind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_are_coalesced_and_add_up_to_the_part() {
    let env = Env::start().await;
    env.sim.push(Reply::Bench { deltas: 5000 });
    let events = env.run_done("talk", json!({}), Answer::None).await;
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PartDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        !deltas.is_empty() && deltas.len() < 500,
        "{} delta events for 5000 tokens",
        deltas.len()
    );
    let whole = deltas.concat();
    assert_eq!(
        parts(&events),
        vec![Part::Text {
            text: whole.clone()
        }]
    );
    assert_eq!(whole, totem_tests::sim::bench_text(5000));
}

/// A slow model (a word a second): each word goes out on its own, not held until the next one
/// arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_stream_sends_each_word_before_the_next_arrives() {
    let env = Env::start().await;
    env.sim.push(Reply::Stream(Script {
        delay_ms: 1000,
        ..Script::new(vec![text("Hello "), text("slow "), text("world.")])
    }));
    let events = env.run("talk", json!({}), Answer::None).await;
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PartDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["Hello ", "slow ", "world."]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_is_a_part_of_its_own_and_todo_goes_out_as_an_event() {
    let env = Env::start().await;
    env.push(vec![
        SimEvent::thinking("Let me plan.", None),
        tool(
            "c1",
            "todo",
            json!({"todos": [{"content": "read the code", "status": "in_progress"}, {"content": "fix it", "status": "pending"}]}),
        ),
    ]);
    env.push(vec![text("Planned.")]);
    let events = env
        .run_done(
            "plan",
            json!({"model": "sim/qwen3:8b", "reasoning": "high"}),
            Answer::None,
        )
        .await;
    assert_eq!(
        parts(&events)[0],
        Part::Reasoning {
            text: "Let me plan.".into()
        }
    );
    let todos = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Todo { todos, .. } => Some(todos.clone()),
            _ => None,
        })
        .expect("a todo event");
    assert_eq!(todos.len(), 2);
    assert_eq!(
        (todos[0].content.as_str(), todos[0].status),
        ("read the code", totem_protocol::TodoStatus::InProgress)
    );
    // Thinking was asked of the model.
    assert_eq!(env.sim.chat_requests()[0].body["think"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_comes_from_the_model_list_prices() {
    let env = Env::start().await;
    let priced = Sim::start(SimKind::Openrouter).await;
    env.client
        .call_raw(
            "provider.add",
            json!({"name": "or", "kind": "openai", "url": priced.url(), "key": "sk-or-test", "maxRetries": 0}),
        )
        .await
        .expect("provider.add");
    priced.push(Reply::stream([text("priced"), SimEvent::usage(1000, 500)]));
    let mut events = env.subscribe().await;
    let run = env
        .prompt("hi", json!({"model": "or/openai/gpt-4o-mini"}))
        .await;
    let events = follow(&env, &mut events, &run, Answer::None).await;
    let usage = match last(&events) {
        EventKind::RunDone { run } => run.usage.expect("run usage"),
        other => panic!("{other:?}"),
    };
    // 1000 × $0.15/M + 500 × $0.60/M
    let cost = usage.cost_usd.expect("a cost");
    assert!((cost - 0.00045).abs() < 1e-9, "{cost}");
    let session = env
        .client
        .call_raw("session.get", json!({"sessionId": env.session}))
        .await
        .expect("session.get");
    assert!(
        (session["usage"]["costUsd"].as_f64().unwrap_or(0.0) - 0.00045).abs() < 1e-9,
        "{session}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_mid_way_keeps_what_arrived_and_fails_the_run() {
    let env = Env::start().await;
    let mut script = Script::new([text("partial "), text("answer "), text("lost")]);
    script.cut_after = Some(2);
    env.sim.push(Reply::Stream(script));
    let mut events = env.subscribe().await;
    let run = env.prompt("hi", json!({})).await;
    let events = follow(&env, &mut events, &run, Answer::None).await;
    match last(&events) {
        EventKind::RunFailed { run } => assert!(run.error.is_some()),
        other => panic!("expected run.failed, got {other:?}"),
    }
    match parts(&events).first() {
        Some(Part::Text { text }) => assert!(text.starts_with("partial"), "{text}"),
        other => panic!("the streamed text was not kept: {other:?}"),
    }
    let session = env
        .client
        .call_raw("session.get", json!({"sessionId": env.session}))
        .await
        .expect("session.get");
    assert_eq!(session["status"], "idle");
}
