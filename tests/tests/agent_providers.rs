//! Providers as a run meets them in the field (issue 20), end to end: the real totemd against a
//! provider simulator taking on the wire variants of real servers.

mod agent_common;

use agent_common::{Answer, Env, follow, last, notices, text};
use serde_json::json;
use totem_protocol::EventKind;

fn count(env: &Env, path: &str) -> usize {
    env.sim.requests().iter().filter(|r| r.path == path).count()
}

/// A run asks for the model list once (not once to resolve the model and again to stream),
/// and what `/api/show` said about each installed model is not asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_lists_models_once() {
    let env = Env::start().await;
    for answer in ["one", "two"] {
        env.push(vec![text(answer)]);
        env.run_done("hi", json!({}), Answer::None).await;
    }
    // Three installed models, each shown once; the tags listed once.
    assert_eq!(count(&env, "/api/tags"), 1, "{:?}", env.sim.requests());
    assert_eq!(count(&env, "/api/show"), 3, "{:?}", env.sim.requests());
    assert_eq!(env.sim.chat_requests().len(), 2);
}

async fn messages(env: &Env) -> Vec<totem_protocol::Message> {
    let stored = env
        .client
        .call_raw("session.messages", json!({"sessionId": env.session}))
        .await
        .expect("messages");
    serde_json::from_value(stored["messages"].clone()).expect("messages decode")
}

async fn run_to_end(
    env: &Env,
    prompt: &str,
    extra: serde_json::Value,
) -> Vec<totem_protocol::SessionEvent> {
    let mut events = env.subscribe().await;
    let run = env.prompt(prompt, extra).await;
    follow(env, &mut events, &run, Answer::None).await
}

/// Each retry is told to the user while it waits: who failed, how, and how long until the next
/// try; the answer that follows is the run's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_retry_is_announced_with_status_and_wait() {
    let env = Env::start().await;
    // The same server as a provider that retries (the shared one does not).
    env.client
        .call_raw(
            "provider.add",
            json!({"name": "patient", "kind": "ollama", "url": env.sim.url(), "maxRetries": 2}),
        )
        .await
        .expect("provider.add");
    env.sim
        .push(totem_tests::sim::Reply::error(503, "server busy"));
    env.push(vec![text("made it")]);
    let events = run_to_end(&env, "hi", json!({"model": "patient/llama3.2:latest"})).await;
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{:?}",
        last(&events)
    );
    let notices = notices(&events);
    let retry = notices
        .iter()
        .find(|n| n.contains("retry 1 of 2"))
        .unwrap_or_else(|| panic!("no retry notice in {notices:?}"));
    assert!(
        retry.starts_with("patient is overloaded (HTTP 503)"),
        "{retry}"
    );
    assert!(retry.contains("trying again in 500 ms"), "{retry}");
    assert_eq!(env.sim.chat_requests().len(), 2);
}

/// A request the server refuses as too long for its context: the run says so, compacts the
/// older turns and goes on, instead of failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_error_compacts_and_the_run_goes_on() {
    let env = Env::start().await;
    env.push(vec![text("first answer")]);
    let events = run_to_end(&env, "first", json!({})).await;
    assert!(matches!(last(&events), EventKind::RunDone { .. }));

    env.sim.push(totem_tests::sim::Reply::error(
        400,
        "the request exceeds the available context size (context length of only 4096 tokens)",
    ));
    env.push(vec![text("SUMMARY: the user said first.")]);
    env.push(vec![text("second answer")]);
    let events = run_to_end(&env, "second", json!({})).await;
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{:?}",
        last(&events)
    );
    let notices = notices(&events);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("does not fit") && n.contains("4096") && n.contains("compacting")),
        "{notices:?}"
    );
    let requests = env.sim.chat_requests();
    assert_eq!(requests.len(), 4, "first, refused, summary, second");
    assert!(
        requests[3]
            .body
            .to_string()
            .contains("SUMMARY: the user said first.")
    );
}

/// A request that fails before any answer leaves no empty assistant message behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_request_stores_no_empty_answer() {
    let env = Env::start().await;
    env.sim.push(totem_tests::sim::Reply::error(
        400,
        "bad request from the model server",
    ));
    let events = run_to_end(&env, "hi", json!({})).await;
    assert!(
        matches!(last(&events), EventKind::RunFailed { .. }),
        "{:?}",
        last(&events)
    );
    let stored = messages(&env).await;
    assert_eq!(stored.len(), 1, "only the prompt: {stored:?}");
    assert_eq!(stored[0].role, totem_protocol::Role::User);
    assert!(
        !events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::MessageCreated { message } if message.role == totem_protocol::Role::Assistant)),
        "no assistant message announced"
    );
}

/// A stream cut after some text keeps that text, marked as cut, and the run says why it failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_stream_keeps_its_text_marked_as_cut() {
    let env = Env::start().await;
    let mut script = totem_tests::sim::Script::new([text("The first half"), text(" and the rest")]);
    script.cut_after = Some(1);
    env.sim.push(totem_tests::sim::Reply::Stream(script));
    let events = run_to_end(&env, "hi", json!({})).await;
    match last(&events) {
        EventKind::RunFailed { run } => {
            let error = run.error.clone().unwrap_or_default();
            assert!(
                error.contains("broke before the answer was complete"),
                "{error}"
            );
        }
        other => panic!("expected run.failed, got {other:?}"),
    }
    let stored = messages(&env).await;
    let answer = stored.last().expect("the answer");
    assert_eq!(answer.role, totem_protocol::Role::Assistant);
    match answer.parts.as_slice() {
        [totem_protocol::Part::Text { text }] => {
            assert!(text.starts_with("The first half"), "{text}");
            assert!(!text.contains("the rest"), "{text}");
            assert!(text.ends_with(CUT_MARK), "{text}");
        }
        other => panic!("unexpected parts {other:?}"),
    }
}

/// How a cut answer's text ends.
const CUT_MARK: &str = "[cut off: the stream ended before the answer was complete]";

/// Arguments cut short inside a string: the model hears they were not valid JSON and where,
/// and the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_arguments_are_explained_to_the_model() {
    let env = Env::start().await;
    agent_common::write_file(env.project.path(), "hello.txt", "hi there\n");
    // Closed by the recovery: only the brace was missing.
    env.push(vec![agent_common::tool(
        "c1",
        "read",
        json!("{\"path\": \"hello.txt\""),
    )]);
    // Cut inside a string: cannot be repaired.
    env.push(vec![agent_common::tool(
        "c2",
        "read",
        json!("{\"path\": \"hello.t"),
    )]);
    env.push(vec![text("done")]);
    let events = run_to_end(&env, "read hello.txt", json!({})).await;
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{:?}",
        last(&events)
    );
    let results = agent_common::results(&events);
    assert!(
        !results[0].2 && results[0].1.contains("hi there"),
        "{:?}",
        results[0]
    );
    assert!(results[1].2, "{:?}", results[1]);
    assert!(results[1].1.contains("not valid JSON"), "{:?}", results[1]);
    assert!(results[1].1.contains("\"hello.t⟨here⟩"), "{:?}", results[1]);
    assert!(!results[1].1.contains("not found"), "{:?}", results[1]);
}

/// The same for an OpenAI-compatible server: one `/v1/models` per run, not one to resolve the
/// model and another before streaming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_an_openai_compatible_server_lists_models_once() {
    let env = Env::start().await;
    let server = totem_tests::sim::Sim::start(totem_tests::sim::SimKind::Openai).await;
    env.client
        .call_raw(
            "provider.add",
            json!({"name": "compat", "kind": "openai", "url": server.url(), "maxRetries": 0}),
        )
        .await
        .expect("provider.add");
    server.push(totem_tests::sim::Reply::stream([text("hello")]));
    let events = run_to_end(&env, "hi", json!({"model": "compat/gpt-4o-mini"})).await;
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{:?}",
        last(&events)
    );
    let lists = server
        .requests()
        .iter()
        .filter(|r| r.path == "/v1/models")
        .count();
    assert_eq!(lists, 1, "{:?}", server.requests());
    assert_eq!(server.chat_requests().len(), 1);
}
