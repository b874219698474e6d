//! The OpenAI-compatible provider against the OpenAI and OpenRouter simulators.

use serde_json::json;
use totem_provider::{
    AssistantPart, FinishReason, Message, ModelSettings, ProviderError, ReasoningLevel,
    StreamEvent, ToolCall, ToolResult,
};
use totem_tests::sim::harness::{self, config_for, provider, request, run, weather_tool};
use totem_tests::sim::{Reply, Script, Sim, SimEvent, SimKind, SimModel};

const KIND: SimKind = SimKind::Openai;

#[tokio::test]
async fn openai_streams_text_and_usage() {
    harness::check_text_and_usage(KIND).await;
}

#[tokio::test]
async fn openai_request_shape_and_auth() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let mut config = config_for(&sim);
    config.temperature = Some(0.2);
    let p = provider(config);
    let mut req = request("gpt-4o-mini", "hi");
    req.max_output_tokens = Some(1024);
    run(p.as_ref(), req).await.expect_ok();
    let chat = &sim.chat_requests()[0];
    assert_eq!(chat.path, "/v1/chat/completions");
    assert_eq!(chat.header("authorization"), Some("Bearer sk-sim-secret"));
    assert_eq!(chat.body["stream"], json!(true));
    assert_eq!(chat.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(chat.body["max_tokens"], 1024);
    assert_eq!(
        chat.body["messages"],
        json!([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}])
    );
    assert!(chat.body.get("reasoning_effort").is_none());
}

#[tokio::test]
async fn openai_tool_call_fragments_are_joined_and_parsed_once() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([
        SimEvent::text("Let me check."),
        SimEvent::tool_call("call_abc", "get_weather", json!({"city": "Paris"})),
        SimEvent::usage(85, 18),
    ]));
    let p = provider(config_for(&sim));
    let mut req = request("gpt-4o-mini", "Weather in Paris?");
    req.tools = vec![weather_tool()];
    let out = run(p.as_ref(), req).await;
    let done = out.expect_ok();
    let calls: Vec<_> = done.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_abc");
    assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
    assert_eq!(done.finish, Some(FinishReason::ToolCalls));
    assert_eq!(done.text(), "Let me check.");
    let sent = &sim.chat_requests()[0].body;
    assert_eq!(sent["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(sent["tool_choice"], "auto");
}

#[tokio::test]
async fn openai_parallel_calls_with_interleaved_fragments() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([
        SimEvent::tool_call("call_1", "get_weather", json!({"city": "Paris"})),
        SimEvent::tool_call("call_2", "get_weather", json!({"city": "Oslo"})),
    ]));
    let p = provider(config_for(&sim));
    let mut req = request("gpt-4o-mini", "Paris and Oslo?");
    req.tools = vec![weather_tool()];
    let done = run(p.as_ref(), req).await.expect_ok();
    let calls: Vec<_> = done
        .tool_calls()
        .map(|c| (c.id.as_str(), c.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_1", json!({"city": "Paris"})),
            ("call_2", json!({"city": "Oslo"}))
        ]
    );
}

#[tokio::test]
async fn openai_tool_round_trip_sends_string_arguments_and_tool_messages() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("18C")]));
    let p = provider(config_for(&sim));
    let mut req = request("gpt-4o-mini", "Weather?");
    req.messages.push(Message::Assistant {
        parts: vec![AssistantPart::ToolCall(ToolCall {
            id: "call_abc".into(),
            name: "get_weather".into(),
            arguments: json!({"city": "Paris"}),
            signature: None,
        })],
    });
    req.messages.push(Message::ToolResult(ToolResult {
        call_id: "call_abc".into(),
        tool_name: "get_weather".into(),
        content: "18C sunny".into(),
        is_error: false,
    }));
    run(p.as_ref(), req).await.expect_ok();
    let messages = &sim.chat_requests()[0].body["messages"];
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": "", "tool_calls": [{"id": "call_abc",
            "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_abc", "content": "18C sunny"})
    );
}

#[tokio::test]
async fn openai_reasoning_field_is_read() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([
        SimEvent::thinking("thinking hard", None),
        SimEvent::text("42"),
    ]));
    let p = provider(config_for(&sim));
    let mut req = request("o3-mini", "answer?");
    req.reasoning = ReasoningLevel::Medium;
    let done = run(p.as_ref(), req).await.expect_ok();
    assert_eq!(done.reasoning(), "thinking hard");
    assert_eq!(done.text(), "42");
    assert_eq!(sim.chat_requests()[0].body["reasoning_effort"], "medium");
}

#[tokio::test]
async fn openai_reasoning_content_field_is_read() {
    let sim = Sim::start(KIND).await;
    let mut script = Script::new([
        SimEvent::thinking("deep thought", None),
        SimEvent::text("ok"),
    ]);
    script.reasoning_content = true;
    sim.push(Reply::Stream(script));
    let p = provider(config_for(&sim));
    let done = run(p.as_ref(), request("gpt-4o-mini", "hi"))
        .await
        .expect_ok();
    assert_eq!(done.reasoning(), "deep thought");
}

#[tokio::test]
async fn openai_reasoning_effort_only_for_models_known_to_think() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    let mut req = request("gpt-4o-mini", "hi");
    req.reasoning = ReasoningLevel::High;
    run(p.as_ref(), req).await.expect_ok();
    assert!(
        sim.chat_requests()[0]
            .body
            .get("reasoning_effort")
            .is_none()
    );
}

#[tokio::test]
async fn openai_cached_tokens_are_reported_separately() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([
        SimEvent::text("ok"),
        SimEvent::Usage {
            input: 100,
            output: 5,
            cached: 60,
            reasoning: 2,
        },
    ]));
    let p = provider(config_for(&sim));
    let usage = run(p.as_ref(), request("gpt-4o-mini", "hi"))
        .await
        .expect_ok()
        .usage
        .unwrap();
    assert_eq!(usage.input_tokens, 40);
    assert_eq!(usage.cache_read_tokens, 60);
    assert_eq!(usage.total_input(), 100);
    assert_eq!(usage.reasoning_tokens, 2);
}

#[tokio::test]
async fn openai_model_list_in_openai_shape() {
    let sim = Sim::start(KIND).await;
    let p = provider(config_for(&sim));
    let models = p.list_models().await.unwrap();
    let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["gpt-4o-mini", "o3-mini"]);
    // OpenAI's list has no windows: its own models' are known, nothing is made up for others.
    assert_eq!(models[0].context_window, Some(128000));
    assert_eq!(models[1].context_window, Some(200000));
    assert!(models[0].capabilities.tools);
    assert!(!models[0].capabilities.thinking && models[1].capabilities.thinking);
    assert_eq!(sim.requests()[0].path, "/v1/models");
}

#[tokio::test]
async fn openai_shaped_list_of_unknown_models_has_no_window_and_embeddings_have_no_tools() {
    let sim = Sim::start(KIND).await;
    sim.set_models(vec![
        SimModel::new("my-finetune", 32768),
        SimModel::new("text-embedding-nomic-embed-text-v1.5", 2048).embedding(),
    ]);
    let p = provider(config_for(&sim));
    let models = p.list_models().await.unwrap();
    assert_eq!(models[0].context_window, None);
    assert!(models[0].capabilities.tools);
    assert!(!models[1].capabilities.tools);
    // A server without LM Studio's endpoint was asked once, and that was all.
    let paths: Vec<String> = sim.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/v1/models", "/api/v0/models"]);
}

/// llama.cpp lists the window the model was trained with; the server runs with the smaller one
/// `/props` tells, and that is the window.
#[tokio::test]
async fn llamacpp_window_is_the_running_n_ctx_from_props() {
    let sim = Sim::start(KIND).await;
    sim.set_models(vec![SimModel::new("qwen3-8b-q4_k_m.gguf", 32768)]);
    sim.set_variants(|v| v.llamacpp_n_ctx = Some(8192));
    let p = provider(config_for(&sim));
    let models = p.list_models().await.unwrap();
    assert_eq!(models[0].context_window, Some(8192));
    let paths: Vec<String> = sim.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/v1/models", "/props"]);
}

/// LM Studio: windows and model types from its own `/api/v0/models`; the loaded model's window
/// is the one it was loaded with.
#[tokio::test]
async fn lmstudio_windows_and_types_come_from_its_own_endpoint() {
    let sim = Sim::start(KIND).await;
    sim.set_models(vec![
        SimModel::new("qwen/qwen3-8b", 40960),
        SimModel {
            vision: true,
            ..SimModel::new("google/gemma-3-4b", 131072)
        },
        SimModel::new("text-embedding-nomic-embed-text-v1.5", 2048).embedding(),
    ]);
    sim.set_variants(|v| v.lmstudio_loaded_ctx = Some(8192));
    let p = provider(config_for(&sim));
    let models = p.list_models().await.unwrap();
    let windows: Vec<Option<u64>> = models.iter().map(|m| m.context_window).collect();
    assert_eq!(windows, [Some(8192), Some(131072), Some(2048)]);
    assert!(models[1].capabilities.vision && models[1].capabilities.tools);
    assert!(!models[2].capabilities.tools);
}

#[tokio::test]
async fn openrouter_model_list_has_context_and_prices() {
    let sim = Sim::start(SimKind::Openrouter).await;
    let p = provider(config_for(&sim));
    let models = p.list_models().await.unwrap();
    let sonnet = models
        .iter()
        .find(|m| m.id == "anthropic/claude-sonnet-4")
        .unwrap();
    assert_eq!(sonnet.context_window, Some(200000));
    let prices = sonnet.prices.unwrap();
    assert_eq!(prices.input_per_million, 3.0);
    assert_eq!(prices.output_per_million, 15.0);
    assert!(
        sonnet.capabilities.thinking && sonnet.capabilities.tools && sonnet.capabilities.vision
    );
    let mini = models
        .iter()
        .find(|m| m.id == "openai/gpt-4o-mini")
        .unwrap();
    assert_eq!(mini.prices.unwrap().input_per_million, 0.15);
    assert!(!mini.capabilities.thinking);
    assert_eq!(sim.requests()[0].path, "/api/v1/models");
}

#[tokio::test]
async fn openrouter_keepalive_comments_are_skipped_and_reasoning_is_gated_by_catalogue() {
    let sim = Sim::start(SimKind::Openrouter).await;
    sim.push(Reply::stream([
        SimEvent::thinking("hm", None),
        SimEvent::text("fine"),
    ]));
    let p = provider(config_for(&sim));
    let mut req = request("anthropic/claude-sonnet-4", "hi");
    req.reasoning = ReasoningLevel::Low;
    let done = run(p.as_ref(), req).await.expect_ok();
    assert_eq!(done.text(), "fine");
    assert_eq!(done.reasoning(), "hm");
    let chat = &sim.chat_requests()[0];
    assert_eq!(chat.path, "/api/v1/chat/completions");
    assert_eq!(chat.body["reasoning_effort"], "low");
}

#[tokio::test]
async fn openrouter_402_is_billing_error() {
    let sim = Sim::start(SimKind::Openrouter).await;
    sim.push(Reply::error(402, "Insufficient credits"));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("openai/gpt-4o-mini", "hi")).await;
    match out.expect_err() {
        ProviderError::Billing {
            message, status, ..
        } => {
            assert_eq!(message, "Insufficient credits");
            assert_eq!(*status, 402);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn openrouter_mid_stream_error_ends_the_stream() {
    harness::check_mid_stream_error(SimKind::Openrouter, None).await;
}

#[tokio::test]
async fn openai_context_length_exceeded_is_context_overflow() {
    harness::check_context_overflow(
        KIND,
        400,
        "This model's maximum context length is 128000 tokens.",
        Some("context_length_exceeded"),
    )
    .await;
}

#[tokio::test]
async fn llamacpp_exceed_context_size_is_context_overflow() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::Raw {
        status: 400,
        content_type: "application/json".into(),
        body: r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}"#.into(),
    });
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("gpt-4o-mini", "hi")).await;
    assert!(out.expect_err().is_context_overflow(), "{:?}", out.error);
}

#[tokio::test]
async fn an_empty_200_stream_is_asked_again_without_streaming_and_remembered() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::Raw {
        status: 200,
        content_type: "text/event-stream".into(),
        body: String::new(),
    });
    sim.push(Reply::stream([SimEvent::tool_call(
        "call_1",
        "get_weather",
        json!({"city": "Oslo"}),
    )]));
    sim.push(Reply::stream([SimEvent::text("Sunny.")]));
    let p = provider(config_for(&sim));
    let mut req = request("gpt-4o-mini", "Weather?");
    req.tools = vec![weather_tool()];
    let done = run(p.as_ref(), req.clone()).await.expect_ok();
    let calls: Vec<_> = done.tool_calls().collect();
    assert_eq!(calls.len(), 1, "{done:?}");
    assert_eq!(calls[0].arguments, json!({"city": "Oslo"}));
    assert_eq!(done.finish, Some(FinishReason::ToolCalls));
    // The next request of that model is not streamed at all.
    let done = run(p.as_ref(), req).await.expect_ok();
    assert_eq!(done.text(), "Sunny.");
    let streamed: Vec<_> = sim
        .chat_requests()
        .iter()
        .map(|r| r.body["stream"].clone())
        .collect();
    assert_eq!(streamed, [json!(true), json!(false), json!(false)]);
}

#[tokio::test]
async fn a_server_that_says_it_cannot_stream_tools_is_asked_without_streaming_once() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::error(500, "Cannot use tools with stream"));
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    let done = run(p.as_ref(), request("gpt-4o-mini", "hi"))
        .await
        .expect_ok();
    assert_eq!(done.text(), "ok");
    assert_eq!(sim.chat_requests().len(), 2, "one refusal, one answer");
    assert_eq!(sim.chat_requests()[1].body["stream"], json!(false));
}

#[tokio::test]
async fn stream_false_in_the_model_settings_never_streams() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("whole")]));
    let mut config = config_for(&sim);
    config.models.insert(
        "gpt-4o-mini".into(),
        ModelSettings {
            stream: Some(false),
            ..ModelSettings::default()
        },
    );
    let p = provider(config);
    let done = run(p.as_ref(), request("gpt-4o-mini", "hi"))
        .await
        .expect_ok();
    assert_eq!(done.text(), "whole");
    let body = &sim.chat_requests()[0].body;
    assert_eq!(body["stream"], json!(false));
    assert!(body.get("stream_options").is_none());
}

#[tokio::test]
async fn a_validation_error_is_not_retried() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::error(
        500,
        "1 validation error for CreateChatCompletionRequest messages.1.content Input should be a valid string",
    ));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("gpt-4o-mini", "hi")).await;
    assert!(
        matches!(
            out.expect_err(),
            ProviderError::InvalidRequest { status: 500, .. }
        ),
        "{:?}",
        out.error
    );
    assert_eq!(sim.chat_requests().len(), 1, "asked once");
}

#[tokio::test]
async fn the_output_cap_is_a_quarter_of_the_window_at_most_4096_unless_set() {
    let sim = Sim::start(SimKind::Openrouter).await;
    sim.set_models(vec![SimModel::new("small/model", 8192)]);
    for _ in 0..4 {
        sim.push(Reply::stream([SimEvent::text("ok")]));
    }
    let mut config = config_for(&sim);
    config.models.insert(
        "set/model".into(),
        ModelSettings {
            max_output_tokens: Some(300),
            ..ModelSettings::default()
        },
    );
    config.models.insert(
        "windowed/model".into(),
        ModelSettings {
            context_window: Some(2048),
            ..ModelSettings::default()
        },
    );
    let p = provider(config);
    for model in [
        "small/model",
        "unlisted/model",
        "set/model",
        "windowed/model",
    ] {
        run(p.as_ref(), request(model, "hi")).await.expect_ok();
    }
    let caps: Vec<_> = sim
        .chat_requests()
        .iter()
        .map(|r| r.body["max_tokens"].clone())
        .collect();
    // OpenRouter lists max_completion_tokens for its models; a model it does not list gets the
    // default, settings win over both.
    assert_eq!(caps, [json!(64000), json!(4096), json!(300), json!(512)]);
}

#[tokio::test]
async fn openai_auth_error_is_not_retried() {
    harness::check_auth_error(KIND).await;
}

#[tokio::test]
async fn openai_500_is_retried() {
    harness::check_server_error_is_retried(KIND, 500).await;
}

#[tokio::test]
async fn openai_502_retries_give_up_with_message() {
    harness::check_retries_give_up_with_provider_message(KIND, 502).await;
}

#[tokio::test]
async fn openai_429_honours_retry_after() {
    harness::check_retry_after_is_honoured(KIND).await;
}

#[tokio::test]
async fn openai_long_retry_after_goes_to_caller() {
    harness::check_long_retry_after_goes_to_caller(KIND).await;
}

#[tokio::test]
async fn openai_refused_connection_is_connect_error() {
    harness::check_refused_connection(KIND).await;
}

#[tokio::test]
async fn openai_cut_stream_after_output_is_not_retried() {
    harness::check_cut_after_output(KIND).await;
}

#[tokio::test]
async fn openai_cut_stream_before_output_is_retried() {
    harness::check_cut_before_output_is_retried(KIND).await;
}

#[tokio::test]
async fn openai_malformed_chunk_is_malformed_error() {
    harness::check_malformed_chunk(KIND).await;
}

#[tokio::test]
async fn openai_slow_stream_hits_between_chunk_timeout() {
    harness::check_slow_stream_times_out(KIND).await;
}

#[tokio::test]
async fn openai_slow_stream_within_timeout_completes() {
    harness::check_slow_stream_within_timeout(KIND).await;
}

#[tokio::test]
async fn openai_error_event_mid_stream_ends_the_stream() {
    harness::check_mid_stream_error(KIND, Some("server_error")).await;
}

#[tokio::test]
async fn openai_keepalive_comments_do_not_disturb_the_stream() {
    let sim = Sim::start(KIND).await;
    let mut script = Script::new([SimEvent::text("a"), SimEvent::text("b")]);
    script.keepalive = true;
    sim.push(Reply::Stream(script));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("gpt-4o-mini", "hi")).await;
    assert_eq!(out.expect_ok().text(), "ab");
    assert!(
        out.events
            .iter()
            .all(|e| !matches!(e, StreamEvent::TextDelta { text } if text.contains("OPENROUTER")))
    );
}

// ---- wire variants of compatible servers (issue 20) -------------------------------------

/// Some servers send `function.arguments` as an object: taken as it is, no retry.
#[tokio::test]
async fn openai_arguments_sent_as_an_object_are_accepted() {
    let sim = Sim::start(KIND).await;
    let mut script = Script::new([
        SimEvent::tool_call("call_1", "get_weather", json!({"city": "Paris"})),
        SimEvent::tool_call("call_2", "get_weather", json!({"city": "Oslo"})),
    ]);
    script.object_arguments = true;
    sim.push(Reply::Stream(script));
    let p = provider(config_for(&sim));
    let mut req = request("gpt-4o-mini", "Paris and Oslo?");
    req.tools = vec![weather_tool()];
    let out = run(p.as_ref(), req).await;
    let done = out.expect_ok();
    let calls: Vec<_> = done.tool_calls().map(|c| c.arguments.clone()).collect();
    assert_eq!(calls, [json!({"city": "Paris"}), json!({"city": "Oslo"})]);
    assert_eq!(done.finish, Some(FinishReason::ToolCalls));
    assert!(out.retries().is_empty());
    assert_eq!(sim.chat_requests().len(), 1);
}

/// Arguments that are not valid JSON come through as the text the model wrote, for the tool
/// layer to repair or explain; the stream itself is fine.
#[tokio::test]
async fn openai_invalid_json_arguments_arrive_as_the_raw_text() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::tool_call(
        "call_1",
        "read",
        json!("{\"path\": \"hello.txt\""),
    )]));
    let p = provider(config_for(&sim));
    let done = run(p.as_ref(), request("gpt-4o-mini", "read it"))
        .await
        .expect_ok();
    let calls: Vec<_> = done.tool_calls().collect();
    assert_eq!(calls[0].arguments, json!("{\"path\": \"hello.txt\""));
}

/// `<think>` and `</think>` cut across chunks (`<thi` + `nk>`) are still tags: the reasoning is
/// reasoning and none of the tag reaches the visible text.
#[tokio::test]
async fn openai_think_tags_split_across_chunks_become_reasoning() {
    let sim = Sim::start(KIND).await;
    let mut script = Script::new([
        SimEvent::thinking("The user wants a greeting.", None),
        SimEvent::text("Hello!"),
    ]);
    script.think_tags = true;
    sim.push(Reply::Stream(script));
    let p = provider(config_for(&sim));
    let done = run(p.as_ref(), request("gpt-4o-mini", "hi"))
        .await
        .expect_ok();
    assert_eq!(done.reasoning(), "The user wants a greeting.");
    assert_eq!(done.text(), "Hello!");
}

/// A 503 whose Retry-After is longer than Totem waits goes to the caller saying how long the
/// server asked to wait.
#[tokio::test]
async fn openai_503_with_a_long_retry_after_says_how_long() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::Error {
        status: 503,
        message: "The server is overloaded".into(),
        code: None,
        retry_after: Some("600".into()),
    });
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("gpt-4o-mini", "hi")).await;
    let error = out.expect_err();
    assert!(
        matches!(error, ProviderError::Overloaded { status: 503, .. }),
        "{error:?}"
    );
    let said = error.to_string();
    assert!(
        said.contains(
            "The server is overloaded; the server asked to wait 10 min before trying again"
        ),
        "{said}"
    );
    assert_eq!(sim.chat_requests().len(), 1);
}

/// SGLang, older Ollama `/v1` and some gateways send `finish_reason: ""` on every chunk: that is
/// no end, so parallel calls whose names and arguments stream in pieces still come out whole.
#[tokio::test]
async fn an_empty_finish_reason_on_every_chunk_does_not_cut_tool_calls() {
    let sim = Sim::start(KIND).await;
    let mut script = Script::new([
        SimEvent::text("Checking."),
        SimEvent::tool_call("call_a", "get_weather", json!({"city": "Paris"})),
        SimEvent::tool_call("call_b", "get_weather", json!({"city": "Oslo"})),
    ]);
    script.empty_finish = true;
    script.split_names = true;
    sim.push(Reply::Stream(script));
    let p = provider(config_for(&sim));
    let mut req = request("gpt-4o-mini", "Paris and Oslo?");
    req.tools = vec![weather_tool()];
    let done = run(p.as_ref(), req).await.expect_ok();
    let calls: Vec<_> = done
        .tool_calls()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a", "get_weather", json!({"city": "Paris"})),
            ("call_b", "get_weather", json!({"city": "Oslo"}))
        ]
    );
    assert_eq!(done.text(), "Checking.");
    assert_eq!(done.finish, Some(FinishReason::ToolCalls));
}

/// Azure OpenAI and gateways in front of reasoning models refuse `max_tokens` ("Unsupported
/// parameter … Use 'max_completion_tokens' instead"): asked again once with the other field,
/// which is used for that model from then on; the model's settings can name it up front.
#[tokio::test]
async fn max_completion_tokens_is_learned_from_the_refusal_and_set_per_model() {
    let sim = Sim::start(KIND).await;
    sim.set_variants(|v| v.reasoning_wants_completion_tokens = true);
    let p = provider(config_for(&sim));
    for _ in 0..2 {
        sim.push(Reply::stream([SimEvent::text("ok")]));
        let mut req = request("o3-mini", "hi");
        req.max_output_tokens = Some(2000);
        run(p.as_ref(), req).await.expect_ok();
    }
    let sent: Vec<(bool, bool)> = sim
        .chat_requests()
        .iter()
        .map(|r| {
            (
                r.body.get("max_tokens").is_some(),
                r.body["max_completion_tokens"] == 2000,
            )
        })
        .collect();
    assert_eq!(sent, [(true, false), (false, true), (false, true)]);

    let sim = Sim::start(KIND).await;
    sim.set_variants(|v| v.reasoning_wants_completion_tokens = true);
    let mut config = config_for(&sim);
    config.models.insert(
        "o3-mini".into(),
        ModelSettings {
            output_limit_field: Some(totem_protocol::OutputLimitField::MaxCompletionTokens),
            max_output_tokens: Some(3000),
            ..ModelSettings::default()
        },
    );
    sim.push(Reply::stream([SimEvent::text("ok")]));
    run(provider(config).as_ref(), request("o3-mini", "hi"))
        .await
        .expect_ok();
    let requests = sim.chat_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["max_completion_tokens"], 3000);
}

/// OpenRouter says "Provider returned error" and keeps the upstream server's reason in
/// `error.metadata.raw`: the reason shown is the upstream one. Gemini's OpenAI endpoint answers
/// errors as an array: read too.
#[tokio::test]
async fn upstream_reasons_are_shown_for_openrouter_and_gemini_arrays() {
    let call = Message::Assistant {
        parts: vec![AssistantPart::ToolCall(ToolCall {
            id: "c1".into(),
            name: "get_weather".into(),
            arguments: json!({}),
            signature: None,
        })],
    };
    let result = Message::ToolResult(ToolResult {
        call_id: "c1".into(),
        tool_name: "get_weather".into(),
        content: "18C".into(),
        is_error: false,
    });
    for (kind, model) in [
        (SimKind::Openrouter, "google/gemini-3-pro-preview"),
        (SimKind::Openai, "gemini-3-pro-preview"),
    ] {
        let sim = Sim::start(kind).await;
        sim.set_models(vec![SimModel::new(model, 1048576).thinking()]);
        sim.set_variants(|v| v.gemini_openai = true);
        let p = provider(config_for(&sim));
        let mut req = request(model, "go");
        req.messages.push(call.clone());
        req.messages.push(result.clone());
        match run(p.as_ref(), req).await.expect_err() {
            ProviderError::InvalidRequest { message, .. } => {
                assert!(message.contains("missing a thought_signature"), "{message}")
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
