//! Issue 31, end to end: the real totemd against simulators that answer an invalid history the
//! way the real server does (HTTP 400), and that end answers the ways real servers end them.

mod agent_common;

use agent_common::{Answer, Env, follow, last, notices, text, tool};
use serde_json::{Value, json};
use totem_protocol::{EventKind, SessionEvent};
use totem_tests::sim::{Reply, Sim, SimEvent, SimKind, SimModel};

/// Adds `sim` to the daemon as provider `name` (no retries), with `extra` fields merged in.
async fn add_provider(env: &Env, name: &str, sim: &Sim, extra: Value) {
    let kind = match sim.kind() {
        SimKind::Ollama => "ollama",
        SimKind::Openai | SimKind::Openrouter => "openai",
        SimKind::Anthropic => "anthropic",
        SimKind::Gemini => "gemini",
    };
    let mut params =
        json!({"name": name, "kind": kind, "url": sim.url(), "key": "sk-sim", "maxRetries": 0});
    if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            params.insert(key.clone(), value.clone());
        }
    }
    env.client
        .call_raw("provider.add", params)
        .await
        .expect("provider.add");
}

async fn run_to_end(env: &Env, prompt: &str, model: &str) -> Vec<SessionEvent> {
    let mut events = env.subscribe().await;
    let run = env.prompt(prompt, json!({"model": model})).await;
    follow(env, &mut events, &run, Answer::Once).await
}

fn failed_with(events: &[SessionEvent]) -> String {
    match last(events) {
        EventKind::RunFailed { run } => run.error.clone().unwrap_or_default(),
        other => panic!("the run did not fail: {other:?}"),
    }
}

fn assert_done(events: &[SessionEvent]) {
    assert!(
        matches!(last(events), EventKind::RunDone { .. }),
        "{:?}\n{:?}",
        last(events),
        notices(events)
    );
}

fn finish(reason: &str) -> SimEvent {
    SimEvent::Finish {
        reason: reason.into(),
    }
}

// ---- Item 5: an end that is not "done" is never shown as done ----

/// Each server's word for an answer cut at the output limit, refused or filtered fails the run
/// with the reason, on all four wires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ends_that_are_not_done_fail_the_run_with_the_reason() {
    let env = Env::start().await;
    let openai = Sim::start(SimKind::Openai).await;
    let anthropic = Sim::start(SimKind::Anthropic).await;
    let gemini = Sim::start(SimKind::Gemini).await;
    add_provider(&env, "oa", &openai, json!({})).await;
    add_provider(&env, "an", &anthropic, json!({})).await;
    add_provider(&env, "ge", &gemini, json!({})).await;
    let cases: [(&Sim, &str, &str, &str); 7] = [
        (&openai, "oa/gpt-4o-mini", "content_filter", "refused"),
        (&openai, "oa/gpt-4o-mini", "length", "output limit"),
        (
            &anthropic,
            "an/claude-3-5-haiku-20241022",
            "refusal",
            "refused",
        ),
        (
            &anthropic,
            "an/claude-3-5-haiku-20241022",
            "max_tokens",
            "output limit",
        ),
        (&gemini, "ge/gemini-2.0-flash", "SAFETY", "refused"),
        (&gemini, "ge/gemini-2.0-flash", "MAX_TOKENS", "output limit"),
        (&env.sim, "sim/llama3.2:latest", "length", "output limit"),
    ];
    for (sim, model, reason, says) in cases {
        sim.push(Reply::stream([
            SimEvent::text("The first half of an"),
            finish(reason),
        ]));
        let events = run_to_end(&env, "Tell me", model).await;
        let error = failed_with(&events);
        assert!(error.contains(says), "{model} {reason}: {error}");
    }
}

/// Anthropic `model_context_window_exceeded` is not a finished answer either: with nothing to
/// compact, the run fails saying the context ran out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_context_window_exceeded_is_not_done() {
    let env = Env::start().await;
    let anthropic = Sim::start(SimKind::Anthropic).await;
    add_provider(&env, "an", &anthropic, json!({})).await;
    anthropic.push(Reply::stream([
        SimEvent::text("Part of it"),
        finish("model_context_window_exceeded"),
    ]));
    let events = run_to_end(&env, "Tell me", "an/claude-3-5-haiku-20241022").await;
    assert!(failed_with(&events).contains("context window"));
}

/// Anthropic `pause_turn`: the paused turn goes back as it is (no new user message) and the run
/// ends when the model does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_pause_turn_is_continued() {
    let env = Env::start().await;
    let anthropic = Sim::start(SimKind::Anthropic).await;
    add_provider(&env, "an", &anthropic, json!({})).await;
    anthropic.push(Reply::stream([
        SimEvent::text("Searching first."),
        finish("pause_turn"),
    ]));
    anthropic.push(Reply::stream([SimEvent::text("Found it.")]));
    let events = run_to_end(&env, "Find it", "an/claude-3-5-haiku-20241022").await;
    assert_done(&events);
    let requests = anthropic.chat_requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().expect("messages");
    let paused = messages.last().expect("a message");
    assert_eq!(paused["role"], "assistant", "{messages:?}");
    assert_eq!(paused["content"][0]["text"], "Searching first.");
}

/// A tool call cut at the output limit is not run: the step is asked again with more room, and
/// the call that then comes whole is run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_cut_at_the_limit_is_asked_again_with_more_room() {
    let env = Env::start().await;
    let openai = Sim::start(SimKind::Openai).await;
    add_provider(&env, "oa", &openai, json!({})).await;
    agent_common::write_file(&env.root(), "a.txt", "alpha");
    openai.push(Reply::stream([
        SimEvent::tool_call("call_1", "read", json!("{\"path\": \"a.t")),
        SimEvent::usage(100, 4000),
        finish("length"),
    ]));
    openai.push(Reply::stream([tool(
        "call_2",
        "read",
        json!({"path": "a.txt"}),
    )]));
    openai.push(Reply::stream([text("It says alpha.")]));
    let events = run_to_end(&env, "Read a.txt", "oa/gpt-4o-mini").await;
    assert_done(&events);
    let requests = openai.chat_requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1].body["max_tokens"], 8192);
    let results = agent_common::results(&events);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].1.contains("alpha"), "{results:?}");
}

// ---- Item 1: reasoning a server needs back is sent back ----

fn thinking(text: &str) -> SimEvent {
    SimEvent::thinking(text, None)
}

fn assistant_with_calls(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .cloned()
        .collect()
}

/// DeepSeek thinking models answer 400 for a tool call sent back without its
/// `reasoning_content`: it goes back within the run and in every later prompt's history, so the
/// session stays alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deepseek_gets_its_reasoning_back_on_tool_calls_in_later_prompts_too() {
    let env = Env::start().await;
    let deepseek = Sim::start(SimKind::Openai).await;
    deepseek.set_models(vec![SimModel::new("deepseek-reasoner", 128000).thinking()]);
    deepseek.set_variants(|v| v.deepseek = true);
    add_provider(&env, "ds", &deepseek, json!({})).await;
    agent_common::write_file(&env.root(), "a.txt", "alpha");
    deepseek.push(Reply::stream([
        thinking("I should read a.txt."),
        tool("call_r1", "read", json!({"path": "a.txt"})),
    ]));
    deepseek.push(Reply::stream([thinking("It says alpha."), text("alpha")]));
    let events = run_to_end(&env, "What is in a.txt?", "ds/deepseek-reasoner").await;
    assert_done(&events);
    deepseek.push(Reply::stream([text("Still alpha.")]));
    let events = run_to_end(&env, "And now?", "ds/deepseek-reasoner").await;
    assert_done(&events);
    let requests = deepseek.chat_requests();
    assert_eq!(requests.len(), 3);
    for request in &requests[1..] {
        let calls = assistant_with_calls(&request.body);
        assert_eq!(calls.len(), 1, "{:?}", request.body);
        assert_eq!(calls[0]["reasoning_content"], "I should read a.txt.");
    }
}

/// A history another model made (tool calls without reasoning) is refused by DeepSeek: those
/// turns go as plain text, the user is told, and the run and the next ones work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_deepseek_cannot_take_is_sent_as_text_and_said() {
    let env = Env::start().await;
    let deepseek = Sim::start(SimKind::Openai).await;
    deepseek.set_models(vec![SimModel::new("deepseek-reasoner", 128000).thinking()]);
    deepseek.set_variants(|v| v.deepseek = true);
    add_provider(&env, "ds", &deepseek, json!({})).await;
    agent_common::write_file(&env.root(), "a.txt", "alpha");
    env.push(vec![tool("", "read", json!({"path": "a.txt"}))]);
    env.push(vec![text("alpha")]);
    assert_done(&run_to_end(&env, "Read a.txt", "sim/llama3.2:latest").await);
    deepseek.push(Reply::stream([text("It was alpha.")]));
    let events = run_to_end(&env, "What was it?", "ds/deepseek-reasoner").await;
    assert_done(&events);
    assert!(
        notices(&events).iter().any(|n| n.contains("plain text")),
        "{:?}",
        notices(&events)
    );
    let last = deepseek.chat_requests().pop().expect("a request");
    assert!(
        assistant_with_calls(&last.body).is_empty(),
        "{:?}",
        last.body
    );
    // The next prompt is not refused for the same reason.
    deepseek.push(Reply::stream([text("Yes.")]));
    assert_done(&run_to_end(&env, "Sure?", "ds/deepseek-reasoner").await);
}

/// Gemini 3 through Google's OpenAI endpoint refuses a call sent back without
/// `extra_content.google.thought_signature`: it goes back as it came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_openai_endpoint_gets_its_thought_signature_back() {
    let env = Env::start().await;
    let google = Sim::start(SimKind::Openai).await;
    google.set_models(vec![
        SimModel::new("gemini-3-pro-preview", 1048576).thinking(),
    ]);
    google.set_variants(|v| v.gemini_openai = true);
    add_provider(&env, "go", &google, json!({})).await;
    agent_common::write_file(&env.root(), "a.txt", "alpha");
    google.push(Reply::stream([SimEvent::ToolCall {
        id: "function-call-1".into(),
        name: "read".into(),
        arguments: json!({"path": "a.txt"}),
        signature: Some("c2lnLWdlbWluaQ==".into()),
    }]));
    google.push(Reply::stream([text("alpha")]));
    let events = run_to_end(&env, "Read a.txt", "go/gemini-3-pro-preview").await;
    assert_done(&events);
    let second = &google.chat_requests()[1].body;
    let calls = assistant_with_calls(second);
    assert_eq!(
        calls[0]["tool_calls"][0]["extra_content"]["google"]["thought_signature"],
        "c2lnLWdlbWluaQ=="
    );
}

/// OpenRouter in front of Gemini 3: `reasoning_details` (the encrypted reasoning) goes back
/// unchanged with the calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openrouter_gets_its_reasoning_details_back() {
    let env = Env::start().await;
    let router = Sim::start(SimKind::Openrouter).await;
    router.set_models(vec![
        SimModel::new("google/gemini-3-pro-preview", 1048576).thinking(),
    ]);
    add_provider(&env, "or", &router, json!({})).await;
    agent_common::write_file(&env.root(), "a.txt", "alpha");
    router.push(Reply::stream([
        thinking("Read it."),
        SimEvent::RedactedThinking {
            data: "ZW5jcnlwdGVk".into(),
        },
        tool("tool_0_read", "read", json!({"path": "a.txt"})),
    ]));
    router.push(Reply::stream([text("alpha")]));
    let events = run_to_end(&env, "Read a.txt", "or/google/gemini-3-pro-preview").await;
    assert_done(&events);
    let calls = assistant_with_calls(&router.chat_requests()[1].body);
    let details = calls[0]["reasoning_details"].as_array().expect("details");
    assert!(
        details
            .iter()
            .any(|d| d["type"] == "reasoning.encrypted" && d["data"] == "ZW5jcnlwdGVk"),
        "{details:?}"
    );
    assert!(
        details
            .iter()
            .any(|d| d["type"] == "reasoning.text" && d["text"] == "Read it."),
        "{details:?}"
    );
}

// ---- Item 2: tool-call ids are unique in a session ----

/// The four provider kinds, each answering with the ids its servers give (Ollama and Gemini
/// none, an OpenAI-compatible server the same id for two parallel calls and again next step),
/// visited in a chain that switches between every ordered pair after a multi-step run. Each
/// simulator refuses what its server refuses (Anthropic: repeated or malformed `tool_use` ids,
/// results without their call; OpenAI: tool messages without their call; Gemini: as many
/// responses as calls), so every switch must send a history the new provider accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_between_every_pair_of_provider_kinds_keeps_a_valid_history() {
    let env = Env::start().await;
    let openai = Sim::start(SimKind::Openai).await;
    let anthropic = Sim::start(SimKind::Anthropic).await;
    let gemini = Sim::start(SimKind::Gemini).await;
    add_provider(&env, "oa", &openai, json!({})).await;
    add_provider(&env, "an", &anthropic, json!({})).await;
    add_provider(&env, "ge", &gemini, json!({})).await;
    agent_common::write_file(&env.root(), "a.txt", "alpha");
    agent_common::write_file(&env.root(), "b.txt", "beta");
    let kinds: [(&Sim, &str, &str); 4] = [
        (&env.sim, "sim/llama3.2:latest", "ollama"),
        (&openai, "oa/gpt-4o-mini", "openai"),
        (&anthropic, "an/claude-3-5-haiku-20241022", "anthropic"),
        (&gemini, "ge/gemini-2.0-flash", "gemini"),
    ];
    // An Eulerian circuit of the complete directed graph on the four: every ordered pair once.
    let chain = [0, 1, 0, 2, 0, 3, 1, 2, 1, 3, 2, 3, 0];
    for (n, &which) in chain.iter().enumerate() {
        let (sim, model, kind) = kinds[which];
        let (first, second) = match kind {
            "openai" => ("call_0", "call_0"),
            "anthropic" => ("toolu_01A", "toolu_01B"),
            _ => ("", ""),
        };
        sim.push(Reply::stream([
            tool(first, "read", json!({"path": "a.txt"})),
            tool(second, "read", json!({"path": "b.txt"})),
        ]));
        let third = if kind == "anthropic" {
            "toolu_01C"
        } else {
            first
        };
        sim.push(Reply::stream([tool(
            third,
            "read",
            json!({"path": "a.txt"}),
        )]));
        sim.push(Reply::stream([text("Both read.")]));
        let events = run_to_end(&env, &format!("Read both, round {n}"), model).await;
        let from = n.checked_sub(1).map_or("start", |p| kinds[chain[p]].2);
        assert!(
            matches!(last(&events), EventKind::RunDone { .. }),
            "switch {from} -> {kind}: {:?}",
            last(&events)
        );
        sim.clear_replies();
    }
}

// ---- Item 6: Gemini MALFORMED_FUNCTION_CALL ----

fn malformed() -> SimEvent {
    finish("MALFORMED_FUNCTION_CALL")
}

/// A malformed call (no parts) is asked again once with a word to the model; the second answer
/// is the run's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_malformed_function_call_is_asked_again_once_with_a_hint() {
    let env = Env::start().await;
    let gemini = Sim::start(SimKind::Gemini).await;
    add_provider(&env, "ge", &gemini, json!({})).await;
    gemini.push(Reply::stream([malformed()]));
    gemini.push(Reply::stream([text("Here it is.")]));
    let events = run_to_end(&env, "Do it", "ge/gemini-2.5-flash").await;
    assert_done(&events);
    let requests = gemini.chat_requests();
    assert_eq!(requests.len(), 2);
    let contents = requests[1].body["contents"].as_array().expect("contents");
    let hint = contents.last().expect("a content");
    assert_eq!(hint["role"], "user");
    assert!(
        hint["parts"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("malformed")),
        "{hint}"
    );
    // Twice in a row: the run fails, with what Gemini said about the call.
    gemini.push(Reply::Raw {
        status: 200,
        content_type: "text/event-stream".into(),
        body: format!(
            "data: {}\r\n\r\n",
            json!({"candidates": [{"content": {"role": "model", "parts": []},
                "finishReason": "MALFORMED_FUNCTION_CALL",
                "finishMessage": "Malformed function call: print(read(path=))"}]})
        ),
    });
    gemini.push(Reply::Raw {
        status: 200,
        content_type: "text/event-stream".into(),
        body: format!(
            "data: {}\r\n\r\n",
            json!({"candidates": [{"content": {"role": "model", "parts": []},
                "finishReason": "MALFORMED_FUNCTION_CALL",
                "finishMessage": "Malformed function call: print(read(path=))"}]})
        ),
    });
    let events = run_to_end(&env, "Again", "ge/gemini-2.5-flash").await;
    let error = failed_with(&events);
    assert!(
        error.contains("malformed tool call twice") && error.contains("print(read(path=))"),
        "{error}"
    );
}

/// MAX_TOKENS before any answer names the cause: thinking used the output budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_max_tokens_with_no_answer_says_thinking_used_the_budget() {
    let env = Env::start().await;
    let gemini = Sim::start(SimKind::Gemini).await;
    add_provider(&env, "ge", &gemini, json!({})).await;
    gemini.push(Reply::stream([finish("MAX_TOKENS")]));
    let events = run_to_end(&env, "Think hard", "ge/gemini-2.5-flash").await;
    assert!(failed_with(&events).contains("thinking used the whole output budget"));
}

// ---- Item 7: a blocked prompt leaves the conversation ----

/// After Gemini blocks a prompt, the rephrased prompt goes alone: the blocked one stays in the
/// session (shown) but is never sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_prompt_is_never_sent_again() {
    let env = Env::start().await;
    let gemini = Sim::start(SimKind::Gemini).await;
    add_provider(&env, "ge", &gemini, json!({})).await;
    gemini.push(totem_tests::sim::gemini::blocked_prompt("SAFETY", None));
    let events = run_to_end(&env, "BLOCKED WORDS", "ge/gemini-2.5-flash").await;
    let error = failed_with(&events);
    assert!(error.contains("blocked the prompt"), "{error}");
    gemini.push(Reply::stream([text("Fine.")]));
    assert_done(&run_to_end(&env, "Rephrased", "ge/gemini-2.5-flash").await);
    let sent = gemini
        .chat_requests()
        .pop()
        .expect("a request")
        .body
        .to_string();
    assert!(sent.contains("Rephrased"), "{sent}");
    assert!(!sent.contains("BLOCKED WORDS"), "{sent}");
    // Still in the session for people to see.
    let stored = env
        .client
        .call_raw("session.messages", json!({"sessionId": env.session}))
        .await
        .expect("messages");
    assert!(stored.to_string().contains("BLOCKED WORDS"));
}

// ---- Item 8: errors that are not what they look like ----

/// vLLM started without `--enable-auto-tool-choice` refuses every request with tools (400
/// "\"auto\" tool choice requires …"): the run goes on with the tools in text, says so, and
/// the model's next run goes there at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_without_auto_tool_choice_falls_back_to_text_tools() {
    let env = Env::start().await;
    let vllm = Sim::start(SimKind::Openai).await;
    vllm.set_models(vec![SimModel::new("Qwen/Qwen2.5-7B-Instruct", 32768)]);
    vllm.set_variants(|v| v.vllm_no_auto_tools = true);
    add_provider(&env, "vl", &vllm, json!({})).await;
    agent_common::write_file(&env.root(), "a.txt", "alpha");
    // Tools in text on an OpenAI-compatible server are constrained: the answers are the JSON
    // the server would hold them to.
    vllm.push(Reply::stream([text(
        r#"{"name": "read", "arguments": {"path": "a.txt"}}"#,
    )]));
    vllm.push(Reply::stream([text(r#"{"answer": "It says alpha."}"#)]));
    let model = "vl/Qwen/Qwen2.5-7B-Instruct";
    let events = run_to_end(&env, "Read a.txt", model).await;
    assert_done(&events);
    assert!(
        notices(&events)
            .iter()
            .any(|n| n.contains("does not take native tool calls")),
        "{:?}",
        notices(&events)
    );
    let requests = vllm.chat_requests();
    assert_eq!(requests.len(), 3, "one refused, then two in text");
    assert!(requests[0].body["tools"].is_array());
    for sent in &requests[1..] {
        assert!(sent.body.get("tools").is_none(), "{}", sent.body);
    }
    // The tool ran: its result went back.
    let second = requests[2].body["messages"].to_string();
    assert!(second.contains("alpha"), "{second}");
    // The next run starts in text: no refused request first. (A constrained run's first step
    // is a call, so it looks before it answers.)
    vllm.push(Reply::stream([text(
        r#"{"name": "read", "arguments": {"path": "a.txt"}}"#,
    )]));
    vllm.push(Reply::stream([text(r#"{"answer": "Yes."}"#)]));
    assert_done(&run_to_end(&env, "Sure?", model).await);
    let requests = vllm.chat_requests();
    assert_eq!(requests.len(), 5);
    assert!(requests[3].body.get("tools").is_none());
    assert!(requests[4].body.get("tools").is_none());
}

/// Arguments a model wrote wrong and Totem repaired are stored repaired: the next request, to
/// any provider, carries the object the tool ran with, not the text the model sent (Gemini and
/// Ollama refuse a string where an object goes). Arguments no repair can read go back as `{}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repaired_arguments_are_stored_repaired_and_sent_in_a_form_each_server_takes() {
    let env = Env::start().await;
    let openai = Sim::start(SimKind::Openai).await;
    let gemini = Sim::start(SimKind::Gemini).await;
    add_provider(&env, "oa", &openai, json!({})).await;
    add_provider(&env, "ge", &gemini, json!({})).await;
    agent_common::write_file(&env.root(), "a.txt", "alpha");
    // Arguments as a JSON string in a code fence (repairable), then as an array (not).
    openai.push(Reply::stream([tool(
        "call_a",
        "read",
        Value::String("```json\n{\"path\": \"a.txt\"}\n```".into()),
    )]));
    openai.push(Reply::stream([tool("call_b", "read", json!([1, 2]))]));
    openai.push(Reply::stream([text("alpha")]));
    assert_done(&run_to_end(&env, "Read a.txt", "oa/gpt-4o-mini").await);
    let sent = openai.chat_requests()[2].body["messages"].clone();
    let arguments: Vec<String> = assistant_with_calls(&json!({ "messages": sent }))
        .iter()
        .map(|m| {
            m["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        arguments
            .iter()
            .map(|a| serde_json::from_str::<Value>(a).unwrap())
            .collect::<Vec<_>>(),
        vec![json!({"path": "a.txt"}), json!({})],
        "{arguments:?}"
    );
    // Gemini and Ollama take the history.
    gemini.push(Reply::stream([text("Still alpha.")]));
    assert_done(&run_to_end(&env, "Again", "ge/gemini-2.0-flash").await);
    let contents = gemini.chat_requests()[0].body["contents"].to_string();
    assert!(
        contents.contains(r#""args":{"path":"a.txt"}"#),
        "{contents}"
    );
    env.sim.push(Reply::stream([text("Yes.")]));
    assert_done(&run_to_end(&env, "Once more", "sim/llama3.2:latest").await);
}
