//! The Gemini provider against the Gemini simulator: function calls, thought parts and
//! signatures returned in place, thinking settings by family, schema conversion, faults.

use serde_json::json;
use totem_provider::{
    AssistantPart, FinishReason, Message, ProviderError, ReasoningLevel, ToolDefinition, ToolResult,
};
use totem_tests::sim::harness::{self, config_for, provider, request, run, weather_tool};
use totem_tests::sim::{Reply, Sim, SimEvent, SimKind, SimModel, gemini};

const KIND: SimKind = SimKind::Gemini;

#[tokio::test]
async fn gemini_streams_text_and_usage() {
    harness::check_text_and_usage(KIND).await;
}

#[tokio::test]
async fn gemini_request_shape_and_key_header() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let mut config = config_for(&sim);
    config.temperature = Some(0.2);
    let p = provider(config);
    let mut req = request("gemini-2.0-flash", "hi");
    req.max_output_tokens = Some(2048);
    req.reasoning = ReasoningLevel::High;
    run(p.as_ref(), req).await.expect_ok();
    let chat = &sim.chat_requests()[0];
    assert_eq!(
        chat.path,
        "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(chat.header("x-goog-api-key"), Some("sk-sim-secret"));
    assert!(!chat.path.contains("key="));
    assert_eq!(
        chat.body["systemInstruction"],
        json!({"parts": [{"text": "You are terse."}]})
    );
    assert_eq!(
        chat.body["contents"],
        json!([{"role": "user", "parts": [{"text": "hi"}]}])
    );
    let generation = &chat.body["generationConfig"];
    assert_eq!(generation["maxOutputTokens"], 2048);
    assert!((generation["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    // gemini-2.0-flash is not a thinking model.
    assert!(generation.get("thinkingConfig").is_none());
}

#[tokio::test]
async fn gemini_25_thinking_budget_by_level() {
    let sim = Sim::start(KIND).await;
    for _ in 0..5 {
        sim.push(Reply::stream([SimEvent::text("ok")]));
    }
    let p = provider(config_for(&sim));
    let cases = [
        ("gemini-2.5-flash", ReasoningLevel::Off, 0),
        ("gemini-2.5-flash", ReasoningLevel::Low, 1024),
        ("gemini-2.5-flash", ReasoningLevel::Medium, 8192),
        ("gemini-2.5-flash", ReasoningLevel::High, 24576),
        ("gemini-2.5-pro", ReasoningLevel::Off, 128),
    ];
    for (model, level, _) in cases {
        let mut req = request(model, "hi");
        req.reasoning = level;
        run(p.as_ref(), req).await.expect_ok();
    }
    for (sent, (_, level, budget)) in sim.chat_requests().iter().zip(cases) {
        let config = &sent.body["generationConfig"]["thinkingConfig"];
        assert_eq!(config["thinkingBudget"], budget, "{level:?}");
        assert_eq!(config["includeThoughts"], level != ReasoningLevel::Off);
        assert!(config.get("thinkingLevel").is_none());
    }
}

#[tokio::test]
async fn gemini_3_uses_thinking_level_never_a_budget() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    for level in [ReasoningLevel::Low, ReasoningLevel::High] {
        let mut req = request("gemini-3-pro-preview", "hi");
        req.reasoning = level;
        run(p.as_ref(), req).await.expect_ok();
    }
    let sent = sim.chat_requests();
    let levels: Vec<_> = sent
        .iter()
        .map(|r| r.body["generationConfig"]["thinkingConfig"].clone())
        .collect();
    assert_eq!(
        levels,
        [
            json!({"thinkingLevel": "low", "includeThoughts": true}),
            json!({"thinkingLevel": "high", "includeThoughts": true})
        ]
    );
}

#[tokio::test]
async fn gemini_function_call_arrives_whole() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([
        SimEvent::text("Let me check."),
        SimEvent::tool_call("", "get_weather", json!({"city": "Paris"})),
        SimEvent::usage(42, 18),
    ]));
    let p = provider(config_for(&sim));
    let mut req = request("gemini-2.0-flash", "Weather?");
    req.tools = vec![weather_tool()];
    let done = run(p.as_ref(), req).await.expect_ok();
    let call = done.tool_calls().next().unwrap();
    assert_eq!(call.name, "get_weather");
    assert_eq!(call.arguments, json!({"city": "Paris"}));
    assert!(!call.id.is_empty());
    // Gemini says STOP after a call; the call makes it a tool-call finish.
    assert_eq!(done.finish, Some(FinishReason::ToolCalls));
    let sent = &sim.chat_requests()[0].body;
    assert_eq!(
        sent["tools"][0]["functionDeclarations"][0]["name"],
        "get_weather"
    );
    assert_eq!(
        sent["toolConfig"],
        json!({"functionCallingConfig": {"mode": "AUTO"}})
    );
}

#[tokio::test]
async fn gemini_signatures_round_trip_in_place_with_parallel_calls() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([
        SimEvent::thinking("**Planning** I need the tool", None),
        SimEvent::text("Checking both."),
        SimEvent::ToolCall {
            id: String::new(),
            name: "get_weather".into(),
            arguments: json!({"city": "Paris"}),
            signature: Some("CiQBVKhcSIG1".into()),
        },
        SimEvent::tool_call("", "get_weather", json!({"city": "Oslo"})),
    ]));
    sim.push(Reply::stream([
        SimEvent::text("18C and 9C."),
        SimEvent::Signature {
            signature: "CiQBVKhcSIG2".into(),
        },
    ]));
    sim.push(Reply::stream([SimEvent::text("bye")]));
    let p = provider(config_for(&sim));
    let mut req = request("gemini-3-pro-preview", "Paris and Oslo?");
    req.reasoning = ReasoningLevel::High;
    req.tools = vec![weather_tool()];
    let first = run(p.as_ref(), req.clone()).await.expect_ok();
    let calls: Vec<_> = first.tool_calls().cloned().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].signature.as_deref(), Some("CiQBVKhcSIG1"));
    assert_eq!(calls[1].signature, None);
    assert_eq!(first.reasoning(), "**Planning** I need the tool");

    req.messages.push(Message::Assistant {
        parts: first.parts.clone(),
    });
    for (call, result) in calls.iter().zip(["18C", "9C"]) {
        req.messages.push(Message::ToolResult(ToolResult {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: result.into(),
            is_error: false,
        }));
    }
    // Gemini 3 refuses a replayed call without its signature (the simulator checks it).
    let second = run(p.as_ref(), req.clone()).await.expect_ok();
    let contents = &sim.chat_requests()[1].body["contents"];
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [
            {"text": "**Planning** I need the tool", "thought": true},
            {"text": "Checking both."},
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "CiQBVKhcSIG1"},
            {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}]})
    );
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"result": "18C"}}},
            {"functionResponse": {"name": "get_weather", "response": {"result": "9C"}}}]})
    );

    // A signature on an empty trailing part stays a part of its own, after the text.
    assert_eq!(
        second.parts,
        [
            AssistantPart::Text {
                text: "18C and 9C.".into(),
                signature: None
            },
            AssistantPart::Text {
                text: String::new(),
                signature: Some("CiQBVKhcSIG2".into())
            },
        ]
    );
    req.messages.push(Message::Assistant {
        parts: second.parts,
    });
    req.messages.push(Message::user("thanks"));
    run(p.as_ref(), req).await.expect_ok();
    let contents = &sim.chat_requests()[2].body["contents"];
    assert_eq!(
        contents[3],
        json!({"role": "model", "parts": [{"text": "18C and 9C."},
            {"text": "", "thoughtSignature": "CiQBVKhcSIG2"}]})
    );
}

#[tokio::test]
async fn gemini_missing_signature_is_refused_by_gemini_3() {
    // The simulator enforces the rule Totem's round-trip satisfies (see the test above).
    let sim = Sim::start(KIND).await;
    let p = provider(config_for(&sim));
    let mut req = request("gemini-3-pro-preview", "go");
    req.messages.push(Message::Assistant {
        parts: vec![AssistantPart::ToolCall(totem_provider::ToolCall {
            id: "gemini_call_0".into(),
            name: "get_weather".into(),
            arguments: json!({}),
            signature: None,
        })],
    });
    let out = run(p.as_ref(), req).await;
    match out.expect_err() {
        ProviderError::InvalidRequest { message, .. } => {
            assert!(message.contains("thought_signature"), "{message}")
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn gemini_tool_schemas_are_converted_to_the_accepted_subset() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    let mut req = request("gemini-2.5-flash", "hi");
    req.tools = vec![ToolDefinition {
        name: "read".into(),
        description: "Read a file.".into(),
        parameters: json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": ["integer", "null"], "minimum": 0},
                "range": {"$ref": "#/$defs/Range"}
            },
            "required": ["path"],
            "$defs": {"Range": {"type": "object", "additionalProperties": false,
                "properties": {"start": {"type": "integer"}}}}
        }),
    }];
    // The simulator answers 400 "Unknown name" for any key Gemini does not accept.
    run(p.as_ref(), req).await.expect_ok();
    let sent = &sim.chat_requests()[0].body["tools"][0]["functionDeclarations"][0]["parameters"];
    assert_eq!(
        *sent,
        json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "offset": {"type": "integer", "nullable": true, "minimum": 0},
            "range": {"type": "object", "properties": {"start": {"type": "integer"}}}},
            "required": ["path"]})
    );
}

#[tokio::test]
async fn gemini_model_list_strips_prefix_and_skips_embedding_models() {
    let sim = Sim::start(KIND).await;
    let p = provider(config_for(&sim));
    let models = p.list_models().await.unwrap();
    let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "gemini-2.5-flash",
            "gemini-2.5-pro",
            "gemini-3-pro-preview",
            "gemini-2.0-flash"
        ]
    );
    assert_eq!(models[0].context_window, Some(1048576));
    assert_eq!(models[0].max_output_tokens, Some(65536));
    assert!(models[0].capabilities.thinking);
    assert!(!models[3].capabilities.thinking);
    assert!(sim.requests()[0].path.starts_with("/v1beta/models"));
}

#[tokio::test]
async fn gemini_input_token_count_exceeded_is_context_overflow() {
    harness::check_context_overflow(
        KIND,
        400,
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        None,
    )
    .await;
}

#[tokio::test]
async fn gemini_forbidden_is_auth_error() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::error(
        403,
        "Method doesn't allow unregistered callers",
    ));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("gemini-2.0-flash", "hi")).await;
    assert!(
        matches!(out.expect_err(), ProviderError::Auth { message, .. } if message.contains("unregistered")),
        "{:?}",
        out.error
    );
}

#[tokio::test]
async fn gemini_503_is_retried() {
    harness::check_server_error_is_retried(KIND, 503).await;
}

#[tokio::test]
async fn gemini_500_retries_give_up_with_message() {
    harness::check_retries_give_up_with_provider_message(KIND, 500).await;
}

#[tokio::test]
async fn gemini_429_honours_retry_after() {
    harness::check_retry_after_is_honoured(KIND).await;
}

#[tokio::test]
async fn gemini_long_retry_after_goes_to_caller() {
    harness::check_long_retry_after_goes_to_caller(KIND).await;
}

#[tokio::test]
async fn gemini_refused_connection_is_connect_error() {
    harness::check_refused_connection(KIND).await;
}

#[tokio::test]
async fn gemini_cut_stream_after_output_is_not_retried() {
    harness::check_cut_after_output(KIND).await;
}

#[tokio::test]
async fn gemini_cut_stream_before_output_is_retried() {
    harness::check_cut_before_output_is_retried(KIND).await;
}

#[tokio::test]
async fn gemini_malformed_event_is_malformed_error() {
    harness::check_malformed_chunk(KIND).await;
}

#[tokio::test]
async fn gemini_slow_stream_hits_between_chunk_timeout() {
    harness::check_slow_stream_times_out(KIND).await;
}

#[tokio::test]
async fn gemini_slow_stream_within_timeout_completes() {
    harness::check_slow_stream_within_timeout(KIND).await;
}

#[tokio::test]
async fn gemini_error_event_mid_stream_ends_the_stream() {
    harness::check_mid_stream_error(KIND, None).await;
}

// ---- small gaps and retries (issue 20) ---------------------------------------------------

/// Gemini 3 Flash takes all four thinking levels: medium is sent as medium (Pro: high).
#[tokio::test]
async fn gemini_3_flash_medium_is_medium() {
    let sim = Sim::start(KIND).await;
    sim.set_models(vec![
        SimModel::new("gemini-3-flash-preview", 1048576).thinking(),
        SimModel::new("gemini-3-pro-preview", 1048576).thinking(),
    ]);
    sim.push(Reply::stream([SimEvent::text("ok")]));
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    for model in ["gemini-3-flash-preview", "gemini-3-pro-preview"] {
        let mut req = request(model, "hi");
        req.reasoning = ReasoningLevel::Medium;
        run(p.as_ref(), req).await.expect_ok();
    }
    let levels: Vec<_> = sim
        .chat_requests()
        .iter()
        .map(|r| r.body["generationConfig"]["thinkingConfig"]["thinkingLevel"].clone())
        .collect();
    assert_eq!(levels, ["medium", "high"]);
}

/// A prompt blocked for safety says so, with Gemini's reason, instead of an empty answer.
#[tokio::test]
async fn gemini_blocked_prompt_says_why() {
    let sim = Sim::start(KIND).await;
    sim.push(gemini::blocked_prompt(
        "SAFETY",
        Some("The prompt was blocked for dangerous content."),
    ));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request("gemini-2.5-flash", "hi")).await;
    let error = out.expect_err();
    assert!(
        matches!(error, ProviderError::Blocked { reason, .. } if reason.starts_with("SAFETY")),
        "{error:?}"
    );
    let said = error.to_string();
    assert!(
        said.contains("blocked the prompt (SAFETY: The prompt was blocked for dangerous content.)"),
        "{said}"
    );
    assert!(said.contains("rephrase"), "{said}");
    assert_eq!(sim.chat_requests().len(), 1);
}

/// A 429 with Google's `RetryInfo` waits as long as `retryDelay` says (0.55 s), not the
/// backoff, and the notice says so.
#[tokio::test]
async fn gemini_retry_info_delay_is_honoured() {
    let sim = Sim::start(KIND).await;
    sim.push(Reply::Error {
        status: 429,
        message: "Resource has been exhausted (e.g. check quota).".into(),
        code: None,
        retry_after: Some("0.55".into()),
    });
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let mut config = config_for(&sim);
    // A backoff far longer than the delay asked: only RetryInfo can explain a short wait.
    config.retry.initial_backoff = std::time::Duration::from_secs(3);
    let p = provider(config);
    let out = run(p.as_ref(), request("gemini-2.5-flash", "hi")).await;
    assert_eq!(out.expect_ok().text(), "ok");
    assert!(
        out.elapsed >= std::time::Duration::from_millis(540)
            && out.elapsed < std::time::Duration::from_millis(2000),
        "waited {:?}",
        out.elapsed
    );
    let retries = out.retries();
    assert_eq!((retries[0].status, retries[0].wait_ms), (Some(429), 550));
    // The simulator sent no Retry-After header: the body said it.
    assert_eq!(sim.chat_requests().len(), 2);
}

/// Issue 31 item 8: behind a proxy that drops `?alt=sse`, Gemini answers one JSON array of the
/// responses (`application/json`); it is read as the stream would have been.
#[tokio::test]
async fn gemini_answer_as_one_json_array_is_read() {
    let sim = Sim::start(KIND).await;
    sim.set_variants(|v| v.gemini_array = true);
    sim.push(Reply::stream([
        SimEvent::text("Hello, "),
        SimEvent::text("world"),
        SimEvent::tool_call("c1", "get_weather", json!({"city": "Oslo"})),
        SimEvent::usage(12, 7),
    ]));
    let p = provider(config_for(&sim));
    let outcome = run(p.as_ref(), request("gemini-2.0-flash", "hi")).await;
    let completion = outcome.expect_ok();
    assert_eq!(completion.text(), "Hello, world");
    let calls: Vec<_> = completion.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].arguments, json!({"city": "Oslo"}));
    assert_eq!(completion.usage.map(|u| u.output_tokens), Some(7));
}
