//! Malformed tool calls from small models, end to end: each shape is repaired (or answered with a
//! precise error) and the run goes on. The full corpus lives in the tools crate's tests.

mod agent_common;

use agent_common::{Answer, Env, follow, last, results, text, tool};
use serde_json::json;
use totem_protocol::EventKind;
use totem_tests::sim::SimEvent;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_tool_calls_are_recovered_and_the_run_goes_on() {
    let env = Env::start().await;
    agent_common::write_file(env.project.path(), "notes.txt", "alpha\nbeta\n");
    // Arguments as a JSON string.
    env.push(vec![tool("c1", "read", json!("{\"path\": \"notes.txt\"}"))]);
    // Wrapped in an extra `input` object.
    env.push(vec![tool(
        "c2",
        "read",
        json!({"input": {"path": "notes.txt", "limit": 5}}),
    )]);
    // The tool name in another case.
    env.push(vec![tool(
        "c3",
        "READ",
        json!({"path": "notes.txt", "offset": 1}),
    )]);
    // A fenced JSON block in the text, no native call.
    env.push(vec![text(
        "I will read it.\n```json\n{\"name\": \"read\", \"arguments\": {\"path\": \"notes.txt\", \"limit\": 1}}\n```",
    )]);
    // An unknown tool: a precise error, not a failed run.
    env.push(vec![tool("c5", "open_file", json!({"path": "notes.txt"}))]);
    // A misnamed field is mapped to the expected one.
    env.push(vec![tool(
        "c6",
        "read",
        json!({"file": "notes.txt", "offset": 2}),
    )]);
    // Missing a required field: the expected fields come back.
    env.push(vec![tool("c7", "read", json!({"offset": 1}))]);
    env.push(vec![text("Read it.")]);
    let events = env.run_done("read notes", json!({}), Answer::None).await;
    let results = results(&events);
    assert_eq!(results.len(), 7, "{results:?}");
    for (i, result) in results.iter().take(4).enumerate() {
        assert!(
            !result.2 && result.1.contains("alpha"),
            "shape {i}: {result:?}"
        );
    }
    assert!(
        results[4].2 && results[4].1.contains("unknown tool"),
        "{:?}",
        results[4]
    );
    assert!(
        !results[5].2 && results[5].1.contains("beta"),
        "{:?}",
        results[5]
    );
    assert!(
        results[6].2 && results[6].1.contains("path"),
        "{:?}",
        results[6]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_call_three_times_in_a_row_is_stopped() {
    let env = Env::start().await;
    agent_common::write_file(env.project.path(), "a.txt", "x\n");
    for id in ["c1", "c2", "c3"] {
        env.push(vec![tool(id, "read", json!({"path": "a.txt"}))]);
    }
    env.push(vec![text("ok")]);
    let events = env.run("loop", json!({}), Answer::None).await;
    let results = results(&events);
    // The first read is plain; the second has its result and a push to act on it.
    assert!(
        !results[0].2 && !results[0].1.contains("same call"),
        "{results:?}"
    );
    assert!(
        !results[1].2
            && results[1].1.contains("x")
            && results[1]
                .1
                .contains("You made this same call in the step before"),
        "{:?}",
        results[1]
    );
    assert!(
        results[2].2 && results[2].1.contains("3 times"),
        "{:?}",
        results[2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_invalid_calls_are_stopped_and_end_the_run() {
    let env = Env::start().await;
    // The same invalid call (no `path`) again and again, as a looping small model sends it.
    for id in 0..8 {
        env.push(vec![tool(
            &format!("c{id}"),
            "read",
            json!({"file_path_x": 1}),
        )]);
    }
    let mut events = env.subscribe().await;
    let run = env.prompt("loop", json!({})).await;
    let events = follow(&env, &mut events, &run, Answer::None).await;
    let results = results(&events);
    assert!(results[0].2 && !results[0].1.contains("times in a row"));
    assert!(
        results[2].2 && results[2].1.contains("3 times in a row"),
        "the third identical invalid call is refused like a valid one: {:?}",
        results[2]
    );
    assert_eq!(results.len(), 5, "{results:?}");
    match last(&events) {
        EventKind::RunFailed { run } => assert!(
            run.error
                .as_deref()
                .is_some_and(|e| e.contains("5 times in a row")),
            "{:?}",
            run.error
        ),
        other => panic!("the run goes on: {other:?}"),
    }
    assert_eq!(
        env.sim.chat_requests().len(),
        5,
        "no request after the fifth"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_stream_that_repeats_itself_is_cut_and_the_run_ends() {
    let env = Env::start().await;
    let looping = "I will check the file again. ".repeat(400);
    env.push(vec![text("Let me think. "), text(&looping)]);
    let events = env.run_done("loop", json!({}), Answer::None).await;
    let notice = events.iter().find_map(|e| match &e.kind {
        EventKind::Notice { text, .. } if text.contains("repeating") => Some(text.clone()),
        _ => None,
    });
    assert!(notice.is_some(), "a notice says why the answer was cut");
    let answer: String = agent_common::parts(&events)
        .into_iter()
        .filter_map(|p| match p {
            totem_protocol::Part::Text { text } => Some(text),
            _ => None,
        })
        .collect();
    assert!(
        answer == "Let me think. I will check the file again. ",
        "the stored answer keeps one copy: {answer:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_native_tools_calls_them_in_its_text() {
    let env = Env::start().await;
    agent_common::write_file(env.project.path(), "notes.txt", "gamma\n");
    // Its answers are constrained (Ollama's `format`): a call, then the final answer.
    env.push(vec![text(
        "{\"name\": \"read\", \"arguments\": {\"path\": \"notes.txt\"}}",
    )]);
    env.push(vec![text("{\"answer\": \"It says gamma.\"}")]);
    // The simulator lists gemma3:4b without tool support and refuses `tools` for it.
    let events = env
        .run_done(
            "read notes",
            json!({"model": "sim/gemma3:4b"}),
            Answer::None,
        )
        .await;
    let results = results(&events);
    assert!(
        !results[0].2 && results[0].1.contains("gamma"),
        "{results:?}"
    );
    let first = &env.sim.chat_requests()[0].body;
    assert!(
        first.get("tools").is_none(),
        "tools were sent to a model without tool calling"
    );
    assert!(first["format"]["oneOf"].is_array(), "{first}");
    let system = first["messages"][0]["content"].as_str().unwrap_or("");
    assert!(
        system.contains("- read "),
        "the tools are described in the prompt: {system}"
    );
    // The result comes back as text, not in a tool role the model's template may not know.
    let second = env.sim.chat_requests()[1].body["messages"].to_string();
    assert!(!second.contains("\"tool\""), "{second}");
    assert!(second.contains("Result of read"), "{second}");
}

/// Gives the simulator's llama3.2 (listed with native tools and a 128k window) these settings.
async fn set_model(env: &Env, settings: serde_json::Value) {
    env.client
        .call_raw(
            "provider.add",
            json!({"name": "sim", "kind": "ollama", "url": env.sim.url(),
                   "defaultModel": "llama3.2:latest", "maxRetries": 0, "replace": true,
                   "models": {"llama3.2:latest": settings}}),
        )
        .await
        .expect("provider.add");
}

/// The first request of a one-answer run.
async fn first_request(env: &Env, mode: &str) -> serde_json::Value {
    env.push(vec![text("ok")]);
    let before = env.sim.chat_requests().len();
    let mut events = env.subscribe().await;
    let run = env.prompt("hi", json!({"mode": mode})).await;
    let events = follow(env, &mut events, &run, Answer::None).await;
    assert!(matches!(last(&events), EventKind::RunDone { .. }));
    // The run's own request (a session title may be asked for after it).
    env.sim.chat_requests()[before].body.clone()
}

fn tool_names(body: &serde_json::Value) -> Vec<String> {
    let mut names: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// `tools: text` in a model's settings (or saved by the probe) wins over the native tool calling
/// its server lists: the tools are described in the prompt and none are sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_set_to_text_tools_gets_them_in_its_prompt() {
    let env = Env::start().await;
    set_model(&env, json!({"tools": "text", "constrained": false})).await;
    let body = first_request(&env, "build").await;
    assert!(body.get("tools").is_none(), "{body}");
    let system = body["messages"][0]["content"].as_str().unwrap_or("");
    assert!(
        system.contains("- read {path: string, offset?: integer, limit?: integer}"),
        "{system}"
    );
}

/// `tools: none`: the model only answers; no tools are sent or described, and a call it writes
/// as JSON in its text is not run: the text stays the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_set_to_no_tools_gets_none_and_its_text_calls_stay_text() {
    let env = Env::start().await;
    set_model(&env, json!({"tools": "none"})).await;
    let body = first_request(&env, "build").await;
    assert!(body.get("tools").is_none(), "{body}");
    let system = body["messages"][0]["content"].as_str().unwrap_or("");
    assert!(!system.contains("Tools: call one"), "{system}");

    let written = r#"{"name": "write", "arguments": {"path": "x.txt", "content": "hi"}}"#;
    env.push(vec![text(written)]);
    let before = env.sim.chat_requests().len();
    let mut events = env.subscribe().await;
    let run = env.prompt("make x.txt", json!({})).await;
    let events = follow(&env, &mut events, &run, Answer::Once).await;
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{:?}",
        last(&events)
    );
    assert!(results(&events).is_empty(), "{:?}", results(&events));
    // (The subscription replays the earlier run's "ok" first.)
    let said = agent_common::parts_text(&events);
    assert!(said.ends_with(written), "{said}");
    assert!(!env.project.path().join("x.txt").exists());
    // One step: nothing was sent back to the model.
    let steps = env.sim.chat_requests()[before..]
        .iter()
        .filter(|r| r.body["messages"].to_string().contains("make x.txt"))
        .count();
    assert_eq!(steps, 1);
}

/// A model whose calls are read from its text wrote one whole, then ran on with keys of its own
/// until its output limit cut it (Qwen-sized and smaller models do at temperature 0): the call
/// runs, and the run goes on rather than failing as a cut answer. A call whose arguments the
/// limit cut is still a cut answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_call_written_on_past_until_the_limit_still_runs() {
    let env = Env::start().await;
    set_model(&env, json!({"tools": "text", "constrained": false})).await;
    agent_common::write_file(env.project.path(), "a.txt", "alpha");
    let cut = SimEvent::Finish {
        reason: "length".into(),
    };
    env.push(vec![
        text(r#"{"name": "read", "arguments": {"path": "a.txt"}, "options": {"read_only": true, "write_to: file" => function("#),
        cut.clone(),
    ]);
    env.push(vec![text("It says alpha.")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("read a.txt", json!({})).await;
    let got = follow(&env, &mut events, &run, Answer::Once).await;
    assert!(
        matches!(last(&got), EventKind::RunDone { .. }),
        "{:?}",
        last(&got)
    );
    let ran = results(&got);
    assert!(
        ran.iter()
            .any(|(tool, out, is_error)| tool == "read" && out.contains("alpha") && !is_error),
        "{ran:?}"
    );

    env.push(vec![
        text(r#"{"name": "write", "arguments": {"path": "b.txt", "content": "half of"#),
        cut,
    ]);
    let run = env.prompt("write b.txt", json!({})).await;
    let got = follow(&env, &mut events, &run, Answer::Once).await;
    assert!(
        matches!(last(&got), EventKind::RunFailed { .. }),
        "{:?}",
        last(&got)
    );
    assert!(!env.project.path().join("b.txt").exists());
}

/// A window of 8k tokens or less gets the reduced tool set: read, list, edit, write, bash (the
/// read-only ones in Plan mode), so the first request leaves room for the conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_window_gets_the_reduced_tool_set() {
    let env = Env::start().await;
    let full = first_request(&env, "build").await;
    assert!(tool_names(&full).len() > 5, "{:?}", tool_names(&full));
    set_model(&env, json!({"contextWindow": 8192})).await;
    let small = first_request(&env, "build").await;
    assert_eq!(
        tool_names(&small),
        ["bash", "edit", "list", "read", "write"]
    );
    let plan = first_request(&env, "plan").await;
    assert_eq!(tool_names(&plan), ["list", "read"]);
    let saved = full["tools"].to_string().len() - small["tools"].to_string().len();
    assert!(saved > 1000, "only {saved} B saved");

    // `reducedTools: false`: a capable small-window model gets every tool; `true`: a large
    // window gets the reduced set.
    set_model(&env, json!({"contextWindow": 8192, "reducedTools": false})).await;
    assert_eq!(
        tool_names(&first_request(&env, "build").await),
        tool_names(&full)
    );
    set_model(&env, json!({"reducedTools": true})).await;
    assert_eq!(
        tool_names(&first_request(&env, "build").await),
        ["bash", "edit", "list", "read", "write"]
    );
}
