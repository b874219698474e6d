//! The Anthropic provider against the Anthropic simulator: every stream event, thinking budgets
//! and adaptive thinking, signed thinking round-trips, and every fault class.

use serde_json::json;
use totem_provider::{
    AssistantPart, FinishReason, Message, ProviderError, ReasoningLevel, ToolResult,
};
use totem_tests::sim::harness::{self, config_for, provider, request, run, weather_tool};
use totem_tests::sim::{Reply, Sim, SimEvent, SimKind, SimModel};

const KIND: SimKind = SimKind::Anthropic;

#[tokio::test]
async fn anthropic_streams_text_and_usage() {
    harness::check_text_and_usage(KIND).await;
}

#[tokio::test]
async fn anthropic_request_shape_and_headers() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let mut config = config_for(&sim);
    config.temperature = Some(0.3);
    let p = provider(config);
    let mut req = request("claude-3-5-haiku-20241022", "hi");
    // Not a thinking model: reasoning is ignored and temperature may be sent.
    req.reasoning = ReasoningLevel::High;
    req.tools = vec![weather_tool()];
    run(p.as_ref(), req).await.expect_ok();
    let chat = &sim.chat_requests()[0];
    assert_eq!(chat.path, "/v1/messages");
    assert_eq!(chat.header("x-api-key"), Some("sk-sim-secret"));
    assert_eq!(chat.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(chat.body["max_tokens"], 8192);
    assert_eq!(chat.body["system"], "You are terse.");
    assert_eq!(chat.body["stream"], json!(true));
    assert!(chat.body.get("thinking").is_none());
    assert!((chat.body["temperature"].as_f64().unwrap() - 0.3).abs() < 1e-6);
    assert_eq!(
        chat.body["tools"][0],
        json!({"name": "get_weather", "description": "Current weather for a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}})
    );
    assert_eq!(
        chat.body["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
}

#[tokio::test]
async fn anthropic_thinking_budgets_grow_max_tokens() {
    let sim = Sim::start(KIND).await;
    for _ in 0..3 {
        sim.push(Reply::stream([SimEvent::text("ok")]));
    }
    let mut config = config_for(&sim);
    config.temperature = Some(0.3);
    let p = provider(config);
    for level in [
        ReasoningLevel::Low,
        ReasoningLevel::Medium,
        ReasoningLevel::High,
    ] {
        let mut req = request("claude-sonnet-4-5", "hi");
        req.reasoning = level;
        req.max_output_tokens = Some(4000);
        run(p.as_ref(), req).await.expect_ok();
    }
    let sent = sim.chat_requests();
    for (r, budget) in sent.iter().zip([2048, 8192, 16384]) {
        assert_eq!(
            r.body["thinking"],
            json!({"type": "enabled", "budget_tokens": budget})
        );
        assert_eq!(r.body["max_tokens"], 4000 + budget);
        // Thinking fixes the temperature: none is sent.
        assert!(r.body.get("temperature").is_none());
    }
}

#[tokio::test]
async fn anthropic_adaptive_thinking_where_the_model_list_says_so() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    let mut req = request("claude-opus-4-6", "hi");
    req.reasoning = ReasoningLevel::Medium;
    run(p.as_ref(), req).await.expect_ok();
    let body = &sim.chat_requests()[0].body;
    assert_eq!(body["thinking"], json!({"type": "adaptive"}));
    assert_eq!(body["output_config"], json!({"effort": "medium"}));
}

#[tokio::test]
async fn anthropic_reasoning_off_sends_no_thinking() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    run(p.as_ref(), request("claude-sonnet-4-5", "hi"))
        .await
        .expect_ok();
    let body = &sim.chat_requests()[0].body;
    assert!(body.get("thinking").is_none());
    assert_eq!(body["max_tokens"], 8192);
}

#[tokio::test]
async fn anthropic_signed_thinking_round_trips_unchanged_with_tool_results() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([
        SimEvent::thinking(
            "User wants weather; call the tool.",
            Some("EqQBCkgIARABGAIiQL"),
        ),
        SimEvent::RedactedThinking {
            data: "EmwKAhgBEgy3va3pzix".into(),
        },
        SimEvent::text("Let me check."),
        SimEvent::tool_call("toolu_01A", "get_weather", json!({"city": "Paris"})),
        SimEvent::tool_call("toolu_01B", "get_weather", json!({"city": "Oslo"})),
        SimEvent::usage(377, 65),
    ]));
    sim.push(Reply::stream([SimEvent::text("18C and 9C.")]));
    let p = provider(config_for(&sim));
    let mut req = request("claude-sonnet-4-5", "Weather in Paris and Oslo?");
    req.reasoning = ReasoningLevel::Medium;
    req.tools = vec![weather_tool()];
    let first = run(p.as_ref(), req.clone()).await.expect_ok();
    assert_eq!(first.finish, Some(FinishReason::ToolCalls));
    assert_eq!(
        first.parts[0],
        AssistantPart::Reasoning {
            text: "User wants weather; call the tool.".into(),
            signature: Some("EqQBCkgIARABGAIiQL".into())
        }
    );
    assert_eq!(
        first.parts[1],
        AssistantPart::RedactedReasoning {
            data: "EmwKAhgBEgy3va3pzix".into()
        }
    );
    let calls: Vec<_> = first.tool_calls().map(|c| c.id.clone()).collect();
    assert_eq!(calls, ["toolu_01A", "toolu_01B"]);
    assert_eq!(first.usage.unwrap().input_tokens, 377);
    assert_eq!(first.usage.unwrap().output_tokens, 65);

    req.messages.push(Message::Assistant {
        parts: first.parts.clone(),
    });
    for (id, content) in [("toolu_01A", "18C"), ("toolu_01B", "9C")] {
        req.messages.push(Message::ToolResult(ToolResult {
            call_id: id.into(),
            tool_name: "get_weather".into(),
            content: content.into(),
            is_error: false,
        }));
    }
    run(p.as_ref(), req).await.expect_ok();
    let messages = &sim.chat_requests()[1].body["messages"];
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "User wants weather; call the tool.", "signature": "EqQBCkgIARABGAIiQL"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {"city": "Oslo"}}]})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18C"},
            {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "9C"}]})
    );
    assert_eq!(messages.as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn anthropic_tool_input_split_mid_token_is_parsed() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::tool_call(
        "toolu_1",
        "edit",
        json!({"path": "src/main.rs", "text": "fn main() { println!(\"héllo\"); }"}),
    )]));
    let p = provider(config_for(&sim));
    let done = run(p.as_ref(), request("claude-sonnet-4-5", "edit"))
        .await
        .expect_ok();
    let call = done.tool_calls().next().unwrap();
    assert_eq!(call.arguments["text"], "fn main() { println!(\"héllo\"); }");
}

#[tokio::test]
async fn anthropic_error_result_is_flagged() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("sorry")]));
    let p = provider(config_for(&sim));
    let mut req = request("claude-3-5-haiku-20241022", "go");
    req.messages.push(Message::Assistant {
        parts: vec![AssistantPart::ToolCall(totem_provider::ToolCall {
            id: "toolu_9".into(),
            name: "get_weather".into(),
            arguments: json!({}),
            signature: None,
        })],
    });
    req.messages.push(Message::ToolResult(ToolResult {
        call_id: "toolu_9".into(),
        tool_name: "get_weather".into(),
        content: "city is required".into(),
        is_error: true,
    }));
    run(p.as_ref(), req).await.expect_ok();
    assert_eq!(
        sim.chat_requests()[0].body["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_9", "content": "city is required", "is_error": true})
    );
}

#[tokio::test]
async fn anthropic_model_list_reads_capabilities() {
    let sim = Sim::start(KIND).await;
    let p = provider(config_for(&sim));
    let models = p.list_models().await.unwrap();
    let opus = models.iter().find(|m| m.id == "claude-opus-4-6").unwrap();
    assert!(opus.capabilities.thinking && opus.capabilities.adaptive_thinking);
    assert_eq!(opus.context_window, Some(1000000));
    let sonnet = models.iter().find(|m| m.id == "claude-sonnet-4-5").unwrap();
    assert!(sonnet.capabilities.thinking && !sonnet.capabilities.adaptive_thinking);
    let haiku = models
        .iter()
        .find(|m| m.id == "claude-3-5-haiku-20241022")
        .unwrap();
    assert!(!haiku.capabilities.thinking);
    assert!(sim.requests()[0].path.starts_with("/v1/models"));
    assert_eq!(
        sim.requests()[0].header("anthropic-version"),
        Some("2023-06-01")
    );
}

#[tokio::test]
async fn anthropic_prompt_too_long_is_context_overflow() {
    harness::check_context_overflow(
        KIND,
        400,
        "prompt is too long: 210000 tokens > 200000 maximum",
        None,
    )
    .await;
}

#[tokio::test]
async fn anthropic_529_is_retried() {
    harness::check_server_error_is_retried(KIND, 529).await;
}

#[tokio::test]
async fn anthropic_529_retries_give_up_with_message() {
    harness::check_retries_give_up_with_provider_message(KIND, 529).await;
}

#[tokio::test]
async fn anthropic_500_is_retried() {
    harness::check_server_error_is_retried(KIND, 500).await;
}

#[tokio::test]
async fn anthropic_429_honours_retry_after() {
    harness::check_retry_after_is_honoured(KIND).await;
}

#[tokio::test]
async fn anthropic_long_retry_after_goes_to_caller() {
    harness::check_long_retry_after_goes_to_caller(KIND).await;
}

#[tokio::test]
async fn anthropic_auth_error_is_not_retried() {
    harness::check_auth_error(KIND).await;
}

#[tokio::test]
async fn anthropic_refused_connection_is_connect_error() {
    harness::check_refused_connection(KIND).await;
}

#[tokio::test]
async fn anthropic_cut_stream_after_output_is_not_retried() {
    harness::check_cut_after_output(KIND).await;
}

#[tokio::test]
async fn anthropic_cut_stream_before_output_is_retried() {
    harness::check_cut_before_output_is_retried(KIND).await;
}

#[tokio::test]
async fn anthropic_malformed_event_is_malformed_error() {
    harness::check_malformed_chunk(KIND).await;
}

#[tokio::test]
async fn anthropic_slow_stream_hits_between_chunk_timeout() {
    harness::check_slow_stream_times_out(KIND).await;
}

#[tokio::test]
async fn anthropic_slow_stream_within_timeout_completes() {
    harness::check_slow_stream_within_timeout(KIND).await;
}

#[tokio::test]
async fn anthropic_error_event_mid_stream_ends_the_stream() {
    harness::check_mid_stream_error(KIND, Some("api_error")).await;
}

#[tokio::test]
async fn anthropic_overloaded_event_before_output_is_retried() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::Error {
        message: "Overloaded".into(),
        code: Some("overloaded_error".into()),
    }]));
    sim.push(Reply::stream([SimEvent::text("back")]));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("claude-sonnet-4-5", "hi")).await;
    assert_eq!(out.expect_ok().text(), "back");
    assert_eq!(sim.chat_requests().len(), 2);
}

#[tokio::test]
async fn anthropic_invalid_request_keeps_the_provider_message() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::error(
        400,
        "messages: at least one message is required",
    ));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("claude-sonnet-4-5", "hi")).await;
    match out.expect_err() {
        ProviderError::InvalidRequest {
            message, status, ..
        } => {
            assert_eq!(message, "messages: at least one message is required");
            assert_eq!(*status, 400);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(sim.chat_requests().len(), 1);
}

// ---- thinking forms in the field (issue 20) ---------------------------------------------

fn thinking_request(model: &str) -> totem_provider::ChatRequest {
    let mut req = request(model, "hi");
    req.reasoning = ReasoningLevel::Medium;
    req
}

/// Behind a gateway whose model list does not say which thinking forms a model takes, Opus 4.7
/// (which refuses budgets) gets adaptive thinking by its family, at the first try.
#[tokio::test]
async fn anthropic_adaptive_thinking_by_family_when_the_list_does_not_say() {
    let sim = Sim::start(KIND).await;
    sim.set_models(vec![
        SimModel::new("claude-opus-4-7", 1000000).adaptive_only(),
    ]);
    sim.set_variants(|v| v.bare_model_list = true);
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), thinking_request("claude-opus-4-7")).await;
    assert_eq!(out.expect_ok().text(), "ok");
    let chats = sim.chat_requests();
    assert_eq!(chats.len(), 1);
    assert_eq!(chats[0].body["thinking"], json!({"type": "adaptive"}));
    assert_eq!(chats[0].body["output_config"], json!({"effort": "medium"}));
}

/// A server that answers 400 to the form Totem chose gets the other form once, and the model
/// keeps that form for the next requests.
#[tokio::test]
async fn anthropic_refused_thinking_form_is_swapped_once_and_remembered() {
    let sim = Sim::start(KIND).await;
    // A 4.6 model behind a proxy that only passes budgets through.
    sim.set_models(vec![SimModel::new("claude-sonnet-4-6", 200000).thinking()]);
    sim.set_variants(|v| v.bare_model_list = true);
    sim.push(Reply::stream([SimEvent::text("first")]));
    sim.push(Reply::stream([SimEvent::text("second")]));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), thinking_request("claude-sonnet-4-6")).await;
    assert_eq!(out.expect_ok().text(), "first");
    // Not a retry of a failure: no notice, no wait.
    assert!(out.retries().is_empty());
    let out = run(p.as_ref(), thinking_request("claude-sonnet-4-6")).await;
    assert_eq!(out.expect_ok().text(), "second");
    let forms: Vec<_> = sim
        .chat_requests()
        .iter()
        .map(|r| r.body["thinking"]["type"].clone())
        .collect();
    assert_eq!(forms, ["adaptive", "enabled", "enabled"]);
    assert_eq!(
        sim.chat_requests()[1].body["thinking"]["budget_tokens"],
        8192
    );
}

/// When both forms are refused, the second refusal goes to the caller: one swap, not a loop.
#[tokio::test]
async fn anthropic_thinking_form_is_swapped_only_once() {
    let sim = Sim::start(KIND).await;
    let mut model = SimModel::new("claude-opus-4-7", 200000).adaptive_only();
    model.adaptive = false;
    sim.set_models(vec![model]);
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), thinking_request("claude-opus-4-7")).await;
    match out.expect_err() {
        ProviderError::InvalidRequest {
            status, message, ..
        } => {
            assert_eq!(*status, 400);
            assert!(message.contains("thinking"), "{message}");
        }
        other => panic!("unexpected error {other:?}"),
    }
    assert_eq!(sim.chat_requests().len(), 2);
}
