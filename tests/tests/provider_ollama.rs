//! The Ollama provider against the Ollama simulator: native `/api/chat` only, `num_ctx` sizing,
//! `think` gating, tool calls, and every fault class.

use serde_json::json;
use totem_provider::{
    AssistantPart, ChatRequest, FinishReason, Message, ProviderError, ReasoningLevel, ToolCall,
    ToolResult, estimate_tokens, size_num_ctx,
};
use totem_tests::sim::harness::{self, config_for, provider, request, run, weather_tool};
use totem_tests::sim::{Reply, Script, Sim, SimEvent, SimKind, SimModel};

const KIND: SimKind = SimKind::Ollama;

#[tokio::test]
async fn ollama_streams_text_and_usage() {
    harness::check_text_and_usage(KIND).await;
}

#[tokio::test]
async fn ollama_uses_the_native_api_only() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    run(p.as_ref(), request("llama3.2:latest", "hi"))
        .await
        .expect_ok();
    let requests = sim.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert!(r.path.starts_with("/api/"), "used {}", r.path);
    }
    let chat = &sim.chat_requests()[0];
    assert_eq!(chat.body["stream"], json!(true));
    assert_eq!(
        chat.body["messages"][0],
        json!({"role": "system", "content": "You are terse."})
    );
    assert_eq!(
        chat.body["messages"][1],
        json!({"role": "user", "content": "hi"})
    );
}

#[tokio::test]
async fn ollama_tool_call_arrives_whole_with_object_arguments() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([
        SimEvent::tool_call("call_k3j9x0qa", "get_weather", json!({"city": "Paris"})),
        SimEvent::usage(40, 12),
    ]));
    let p = provider(config_for(&sim));
    let mut req = request("llama3.2:latest", "Weather in Paris?");
    req.tools = vec![weather_tool()];
    let done = run(p.as_ref(), req).await.expect_ok();
    let calls: Vec<_> = done.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_k3j9x0qa");
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
    // done_reason stays "stop" on Ollama; the calls make it a tool-call finish.
    assert_eq!(done.finish, Some(FinishReason::ToolCalls));
    let sent = &sim.chat_requests()[0].body;
    assert_eq!(sent["tools"][0]["type"], "function");
    assert_eq!(sent["tools"][0]["function"]["name"], "get_weather");
}

#[tokio::test]
async fn ollama_parallel_tool_calls_keep_their_order() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([
        SimEvent::tool_call("call_a", "get_weather", json!({"city": "Paris"})),
        SimEvent::tool_call("call_b", "get_weather", json!({"city": "Oslo"})),
    ]));
    let p = provider(config_for(&sim));
    let mut req = request("llama3.2:latest", "Paris and Oslo?");
    req.tools = vec![weather_tool()];
    let done = run(p.as_ref(), req).await.expect_ok();
    let calls: Vec<_> = done
        .tool_calls()
        .map(|c| (c.id.as_str(), c.arguments["city"].clone()))
        .collect();
    assert_eq!(
        calls,
        [("call_a", json!("Paris")), ("call_b", json!("Oslo"))]
    );
}

#[tokio::test]
async fn ollama_tool_results_go_back_with_name_and_call_id() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("18C and sunny.")]));
    let p = provider(config_for(&sim));
    let mut req = request("llama3.2:latest", "Weather in Paris?");
    req.tools = vec![weather_tool()];
    req.messages.push(Message::Assistant {
        parts: vec![AssistantPart::ToolCall(ToolCall {
            id: "call_ab12cd34".into(),
            name: "get_weather".into(),
            arguments: json!({"city": "Paris"}),
            signature: None,
        })],
    });
    req.messages.push(Message::ToolResult(ToolResult {
        call_id: "call_ab12cd34".into(),
        tool_name: "get_weather".into(),
        content: "18C sunny".into(),
        is_error: false,
    }));
    run(p.as_ref(), req).await.expect_ok();
    let messages = &sim.chat_requests()[0].body["messages"];
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": "", "tool_calls": [{"id": "call_ab12cd34",
            "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}}}]})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "content": "18C sunny", "tool_name": "get_weather",
            "tool_call_id": "call_ab12cd34"})
    );
}

#[tokio::test]
async fn ollama_thinking_streams_and_round_trips_as_thinking() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([
        SimEvent::thinking("The user", None),
        SimEvent::thinking(" wants weather", None),
        SimEvent::text("Checking."),
    ]));
    sim.push(Reply::stream([SimEvent::text("done")]));
    let p = provider(config_for(&sim));
    let mut req = request("qwen3:8b", "Weather?");
    req.reasoning = ReasoningLevel::High;
    let first = run(p.as_ref(), req.clone()).await.expect_ok();
    assert_eq!(first.reasoning(), "The user wants weather");
    assert_eq!(first.text(), "Checking.");
    assert_eq!(sim.chat_requests()[0].body["think"], json!(true));

    req.messages.push(Message::Assistant { parts: first.parts });
    req.messages.push(Message::user("and now?"));
    run(p.as_ref(), req).await.expect_ok();
    let sent = &sim.chat_requests()[1].body["messages"][2];
    assert_eq!(sent["thinking"], "The user wants weather");
    assert_eq!(sent["content"], "Checking.");
}

#[tokio::test]
async fn ollama_think_is_gated_by_capability() {
    let sim = Sim::start(KIND).await;
    for _ in 0..2 {
        sim.push(Reply::stream([SimEvent::text("ok")]));
    }
    let p = provider(config_for(&sim));
    // A model without the thinking capability gets no `think` (the server would answer 400).
    let mut req = request("llama3.2:latest", "hi");
    req.reasoning = ReasoningLevel::High;
    run(p.as_ref(), req).await.expect_ok();
    assert!(sim.chat_requests()[0].body.get("think").is_none());
    // A thinking model with reasoning off is told so: omitting `think` would mean "on".
    run(p.as_ref(), request("qwen3:8b", "hi")).await.expect_ok();
    assert_eq!(sim.chat_requests()[1].body["think"], json!(false));
}

#[tokio::test]
async fn ollama_sends_temperature_keep_alive_and_num_predict() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let mut config = config_for(&sim);
    config.temperature = Some(0.2);
    config.ollama.keep_alive = Some("10m".into());
    let p = provider(config);
    let mut req = request("llama3.2:latest", "hi");
    req.max_output_tokens = Some(1024);
    run(p.as_ref(), req).await.expect_ok();
    let body = &sim.chat_requests()[0].body;
    assert_eq!(body["keep_alive"], "10m");
    assert!((body["options"]["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert_eq!(body["options"]["num_predict"], 1024);
}

fn long_request(model: &str, bytes: usize) -> ChatRequest {
    request(model, &"word ".repeat(bytes / 5))
}

#[tokio::test]
async fn ollama_num_ctx_is_the_floor_for_small_requests() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    run(p.as_ref(), request("llama3.2:latest", "hi"))
        .await
        .expect_ok();
    assert_eq!(sim.chat_requests()[0].body["options"]["num_ctx"], 8192);
}

#[tokio::test]
async fn ollama_num_ctx_grows_in_steps_of_4096_to_fit() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    let req = long_request("llama3.2:latest", 60_000);
    let needed = estimate_tokens(&req) + 2048;
    run(p.as_ref(), req).await.expect_ok();
    let num_ctx = sim.chat_requests()[0].body["options"]["num_ctx"]
        .as_u64()
        .unwrap() as u32;
    assert!(num_ctx >= needed, "{num_ctx} < {needed}");
    assert!(num_ctx < needed + 4096);
    assert_eq!((num_ctx - 8192) % 4096, 0);
    assert_eq!(num_ctx, 20480);
    // And the simulator saw a prompt that fit: no silent truncation.
    assert!(!sim.chat_requests()[0].truncated);
}

#[tokio::test]
async fn ollama_num_ctx_never_exceeds_the_model_window() {
    let sim = Sim::start(KIND).await;
    sim.set_models(vec![SimModel::new("small:1b", 18000)]);
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    // Needs about 17k tokens: steps would give 20480, the window is 18000.
    let req = long_request("small:1b", 60_000);
    run(p.as_ref(), req).await.expect_ok();
    assert_eq!(sim.chat_requests()[0].body["options"]["num_ctx"], 18000);
}

#[tokio::test]
async fn ollama_num_ctx_never_exceeds_the_configured_ceiling() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let mut config = config_for(&sim);
    config.ollama.ctx_max = Some(18000);
    let p = provider(config);
    run(p.as_ref(), long_request("llama3.2:latest", 60_000))
        .await
        .expect_ok();
    assert_eq!(sim.chat_requests()[0].body["options"]["num_ctx"], 18000);
}

#[tokio::test]
async fn ollama_request_that_cannot_fit_is_refused_before_sending() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("never")]));
    let mut config = config_for(&sim);
    config.ollama.ctx_max = Some(16384);
    let p = provider(config);
    let req = long_request("llama3.2:latest", 100_000);
    let out = run(p.as_ref(), req).await;
    match out.expect_err() {
        e @ ProviderError::ContextOverflow { needed, limit, .. } => {
            assert!(needed.unwrap() > 16384);
            assert_eq!(*limit, Some(16384));
            assert!(e.is_context_overflow());
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        sim.chat_requests().is_empty(),
        "an over-long request was sent"
    );
}

#[tokio::test]
async fn ollama_simulator_truncates_silently_when_num_ctx_is_too_small() {
    // What Totem avoids: a request without num_ctx runs at the server default and is cut.
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let mut messages = vec![json!({"role": "system", "content": "sys"})];
    for _ in 0..10 {
        messages.push(json!({"role": "user", "content": "word ".repeat(800)}));
    }
    let response = client
        .post(format!("{}/api/chat", sim.url()))
        .json(&json!({"model": "llama3.2:latest", "messages": messages}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let body = response.text().await.unwrap();
    let last: serde_json::Value = serde_json::from_str(body.lines().last().unwrap()).unwrap();
    let evaluated = last["prompt_eval_count"].as_u64().unwrap();
    assert!(evaluated <= 4096, "{evaluated}");
    assert!(sim.chat_requests()[0].truncated);

    // The provider sizes num_ctx for the same conversation, so nothing is cut.
    let p = provider(config_for(&sim));
    let mut req = request("llama3.2:latest", "last");
    req.messages = (0..10)
        .map(|_| Message::user("word ".repeat(800)))
        .collect();
    let done = run(p.as_ref(), req).await.expect_ok();
    assert!(!sim.chat_requests()[1].truncated);
    assert!(done.usage.unwrap().input_tokens > 4096);
}

#[test]
fn ollama_num_ctx_sizing_branches() {
    assert_eq!(size_num_ctx(100, 8192, None, Some(40960)), Ok(8192));
    assert_eq!(size_num_ctx(9000, 8192, None, Some(40960)), Ok(12288));
    assert_eq!(size_num_ctx(39000, 8192, None, Some(40000)), Ok(40000));
    assert_eq!(size_num_ctx(15000, 8192, Some(16000), None), Ok(16000));
    assert!(size_num_ctx(50000, 8192, None, Some(40960)).is_err());
}

#[tokio::test]
async fn ollama_model_list_comes_from_tags_and_show() {
    let sim = Sim::start(KIND).await;
    let p = provider(config_for(&sim));
    let models = p.list_models().await.unwrap();
    let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["qwen3:8b", "llama3.2:latest", "gemma3:4b"]);
    assert_eq!(models[0].context_window, Some(40960));
    assert!(models[0].capabilities.thinking && models[0].capabilities.tools);
    assert!(!models[1].capabilities.thinking);
    assert!(!models[2].capabilities.tools && models[2].capabilities.vision);
    let paths: Vec<String> = sim.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths[0], "/api/tags");
    assert!(paths[1..].iter().all(|p| p == "/api/show"));
}

#[tokio::test]
async fn ollama_unknown_model_is_model_not_found() {
    let sim = Sim::start(KIND).await;
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("llama9", "hi")).await;
    match out.expect_err() {
        ProviderError::ModelNotFound { model, message, .. } => {
            assert_eq!(model, "llama9");
            assert!(message.contains("not found"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn ollama_tools_on_a_model_without_tools_is_invalid_request() {
    let sim = Sim::start(KIND).await;
    let p = provider(config_for(&sim));
    let mut req = request("gemma3:4b", "hi");
    req.tools = vec![weather_tool()];
    let out = run(p.as_ref(), req).await;
    match out.expect_err() {
        ProviderError::InvalidRequest {
            status, message, ..
        } => {
            assert_eq!(*status, 400);
            assert!(message.contains("does not support tools"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn ollama_500_is_retried() {
    harness::check_server_error_is_retried(KIND, 500).await;
}

#[tokio::test]
async fn ollama_503_retries_give_up_with_message() {
    harness::check_retries_give_up_with_provider_message(KIND, 503).await;
}

#[tokio::test]
async fn ollama_429_honours_retry_after() {
    harness::check_retry_after_is_honoured(KIND).await;
}

#[tokio::test]
async fn ollama_long_retry_after_goes_to_caller() {
    harness::check_long_retry_after_goes_to_caller(KIND).await;
}

#[tokio::test]
async fn ollama_refused_connection_is_connect_error() {
    harness::check_refused_connection(KIND).await;
}

#[tokio::test]
async fn ollama_cut_stream_after_output_is_not_retried() {
    harness::check_cut_after_output(KIND).await;
}

#[tokio::test]
async fn ollama_cut_stream_before_output_is_retried() {
    harness::check_cut_before_output_is_retried(KIND).await;
}

#[tokio::test]
async fn ollama_malformed_line_is_malformed_error() {
    harness::check_malformed_chunk(KIND).await;
}

#[tokio::test]
async fn ollama_slow_stream_hits_between_chunk_timeout() {
    harness::check_slow_stream_times_out(KIND).await;
}

#[tokio::test]
async fn ollama_slow_stream_within_timeout_completes() {
    harness::check_slow_stream_within_timeout(KIND).await;
}

#[tokio::test]
async fn ollama_error_line_mid_stream_ends_the_stream() {
    harness::check_mid_stream_error(KIND, None).await;
}

#[tokio::test]
async fn ollama_context_error_line_is_context_overflow() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::Stream(Script::new([SimEvent::Error {
        message: "input length exceeds the context length".into(),
        code: None,
    }])));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("llama3.2:latest", "hi")).await;
    assert!(out.expect_err().is_context_overflow(), "{:?}", out.error);
}

// ---- servers that speak part of Ollama's API, and error lines (issue 20) -----------------

/// A server without `/api/show` (404) still runs a model its `/api/tags` lists: no window is
/// known, so `num_ctx` is the configured floor, and the model is taken to call tools.
#[tokio::test]
async fn ollama_without_show_falls_back_to_the_tags_entry() {
    let sim = Sim::start(KIND).await;
    sim.set_variants(|v| v.no_show = true);
    sim.push(Reply::stream([SimEvent::text("fine")]));
    let p = provider(config_for(&sim));
    let mut req = request("llama3.2:latest", "hi");
    req.tools = vec![weather_tool()];
    let out = run(p.as_ref(), req).await;
    assert_eq!(out.expect_ok().text(), "fine");
    let chat = &sim.chat_requests()[0];
    assert_eq!(chat.body["options"]["num_ctx"], 8192);
    assert!(chat.body.get("think").is_none());

    let models = p.list_models().await.unwrap();
    let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["qwen3:8b", "llama3.2:latest", "gemma3:4b"]);
    assert!(models.iter().all(|m| m.context_window.is_none()));
    assert!(models.iter().all(|m| m.capabilities.tools));
}

/// Without `/api/show`, a model the tags do not list is still "not found", with the fix.
#[tokio::test]
async fn ollama_without_show_still_reports_an_unknown_model() {
    let sim = Sim::start(KIND).await;
    sim.set_variants(|v| v.no_show = true);
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("llama9", "hi")).await;
    assert!(
        matches!(out.expect_err(), ProviderError::ModelNotFound { .. }),
        "{:?}",
        out.error
    );
    assert!(sim.chat_requests().is_empty());
}

/// An `{"error"}` line before any output is retried like any provider's error, announced.
#[tokio::test]
async fn ollama_error_line_before_output_is_retried() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::Error {
        message: "model runner has unexpectedly stopped".into(),
        code: None,
    }]));
    sim.push(Reply::stream([SimEvent::text("back")]));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("llama3.2:latest", "hi")).await;
    assert_eq!(out.expect_ok().text(), "back");
    assert_eq!(sim.chat_requests().len(), 2);
    let retries = out.retries();
    assert_eq!(retries.len(), 1);
    assert!(
        retries[0]
            .reason
            .contains("model runner has unexpectedly stopped"),
        "{}",
        retries[0]
    );
}

/// Listing asks `/api/show` about each installed model once: a second list (from a provider
/// built anew, as the daemon does) reuses the answers while the models' digests are the same.
#[tokio::test]
async fn ollama_show_answers_are_reused_while_digests_hold() {
    let sim = Sim::start(KIND).await;
    let first = provider(config_for(&sim)).list_models().await.unwrap();
    let second = provider(config_for(&sim)).list_models().await.unwrap();
    assert_eq!(first, second);
    let shows = |sim: &Sim| {
        sim.requests()
            .iter()
            .filter(|r| r.path == "/api/show")
            .count()
    };
    assert_eq!(shows(&sim), 3);
    // A model that changed (a new digest) is asked about again.
    sim.set_models(vec![
        SimModel::new("qwen3:8b", 32768).thinking(),
        SimModel::new("llama3.2:latest", 131072),
        SimModel {
            vision: true,
            ..SimModel::new("gemma3:4b", 131072).without_tools()
        },
    ]);
    let third = provider(config_for(&sim)).list_models().await.unwrap();
    assert_eq!(third[0].context_window, Some(32768));
    assert_eq!(shows(&sim), 4);
}
