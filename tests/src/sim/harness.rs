//! Test helpers around the simulators: a provider pointed at a simulator with fast retries, a
//! way to run a stream to its end, and the fault checks every provider must pass (shared so each
//! provider's test file runs the same assertions against its own wire format).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use totem_provider::{
    ChatRequest, Completion, FinishReason, Message, Provider, ProviderConfig, ProviderError,
    ProviderKind, RetryNotice, RetrySettings, StreamEvent, TimeoutPhase, ToolDefinition,
    TurnBuilder,
};

use super::{Reply, Script, Sim, SimEvent, SimKind};

/// The provider kind a simulator speaks.
pub fn provider_kind(kind: SimKind) -> ProviderKind {
    match kind {
        SimKind::Ollama => ProviderKind::Ollama,
        SimKind::Openai | SimKind::Openrouter => ProviderKind::Openai,
        SimKind::Anthropic => ProviderKind::Anthropic,
        SimKind::Gemini => ProviderKind::Gemini,
    }
}

/// A config for `sim` with fast retries (10 ms doubling, 2 retries) and short timeouts.
pub fn config_for(sim: &Sim) -> ProviderConfig {
    let mut config = ProviderConfig::new("sim", provider_kind(sim.kind()))
        .with_base_url(sim.url())
        .with_api_key("sk-sim-secret");
    config.retry = RetrySettings {
        max_retries: 2,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        max_retry_after: Duration::from_secs(5),
    };
    config.connect_timeout = Duration::from_secs(2);
    config.response_timeout = Duration::from_secs(10);
    config.idle_timeout = Duration::from_secs(5);
    config
}

pub fn provider(config: ProviderConfig) -> Arc<dyn Provider> {
    totem_provider::build(config).expect("provider builds")
}

/// A model the default simulator lists, without thinking.
pub fn plain_model(kind: SimKind) -> &'static str {
    match kind {
        SimKind::Ollama => "llama3.2:latest",
        SimKind::Openai => "gpt-4o-mini",
        SimKind::Openrouter => "openai/gpt-4o-mini",
        SimKind::Anthropic => "claude-3-5-haiku-20241022",
        SimKind::Gemini => "gemini-2.0-flash",
    }
}

pub fn request(model: &str, prompt: &str) -> ChatRequest {
    ChatRequest {
        model: model.to_owned(),
        system: Some("You are terse.".into()),
        messages: vec![Message::user(prompt)],
        ..ChatRequest::default()
    }
}

pub fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_weather".into(),
        description: "Current weather for a city.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]}),
    }
}

/// Everything a stream yielded, and the error it ended with.
#[derive(Debug)]
pub struct Outcome {
    pub events: Vec<StreamEvent>,
    pub error: Option<ProviderError>,
    pub elapsed: Duration,
}

impl Outcome {
    pub fn completion(&self) -> Completion {
        let mut turn = TurnBuilder::new();
        for event in &self.events {
            turn.push(event.clone());
        }
        turn.finish()
    }

    pub fn text(&self) -> String {
        self.completion().text()
    }

    pub fn expect_ok(&self) -> Completion {
        if let Some(error) = &self.error {
            panic!("stream failed: {error}");
        }
        self.completion()
    }

    pub fn expect_err(&self) -> &ProviderError {
        self.error.as_ref().expect("the stream should have failed")
    }

    /// The retry notices the stream gave, in order.
    pub fn retries(&self) -> Vec<&RetryNotice> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::Retry(notice) => Some(notice),
                _ => None,
            })
            .collect()
    }

    /// Whether anything of an answer streamed (not counting retry notices).
    pub fn has_output(&self) -> bool {
        self.events
            .iter()
            .any(|e| !matches!(e, StreamEvent::Retry(_)))
    }
}

pub async fn run(provider: &dyn Provider, request: ChatRequest) -> Outcome {
    let started = Instant::now();
    let mut stream = provider.stream(request);
    let mut events = Vec::new();
    let mut error = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    // Nothing may follow an error.
    if error.is_some() {
        assert!(
            stream.next().await.is_none(),
            "the stream went on after its error"
        );
    }
    Outcome {
        events,
        error,
        elapsed: started.elapsed(),
    }
}

/// Text deltas arrive in order, usage and finish are reported.
pub async fn check_text_and_usage(kind: SimKind) {
    let sim = Sim::start(kind).await;
    sim.push(Reply::stream([
        SimEvent::text("Hel"),
        SimEvent::text("lo, "),
        SimEvent::text("world"),
        SimEvent::usage(26, 3),
    ]));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    let done = out.expect_ok();
    assert_eq!(done.text(), "Hello, world");
    let deltas: Vec<&str> = out
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["Hel", "lo, ", "world"]);
    let usage = done.usage.expect("usage reported");
    assert_eq!(usage.total_input(), 26);
    assert_eq!(usage.output_tokens, 3);
    assert_eq!(done.finish, Some(FinishReason::Stop));
    assert_eq!(sim.chat_requests().len(), 1);
}

/// A 5xx before any output is retried, and the retry's answer is the only one delivered.
pub async fn check_server_error_is_retried(kind: SimKind, status: u16) {
    let sim = Sim::start(kind).await;
    sim.push(Reply::error(status, "simulated server trouble"));
    sim.push(Reply::stream([SimEvent::text("recovered")]));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    assert_eq!(out.expect_ok().text(), "recovered");
    assert_eq!(sim.chat_requests().len(), 2);
    // The retry was announced, with the status and the wait, before the answer.
    let retries = out.retries();
    assert_eq!(retries.len(), 1, "{:?}", out.events);
    assert!(matches!(out.events[0], StreamEvent::Retry(_)));
    let notice = retries[0];
    assert_eq!(notice.provider, "sim");
    assert_eq!(notice.status, Some(status));
    assert_eq!((notice.retry, notice.max_retries), (1, 2));
    assert_eq!(notice.wait_ms, 10);
    let said = notice.to_string();
    assert!(said.contains(&format!("HTTP {status}")), "{said}");
    assert!(
        said.contains("trying again in 10 ms (retry 1 of 2)"),
        "{said}"
    );
}

/// When retries run out the caller gets the typed error with the provider's own message.
pub async fn check_retries_give_up_with_provider_message(kind: SimKind, status: u16) {
    let sim = Sim::start(kind).await;
    for _ in 0..3 {
        sim.push(Reply::error(status, "simulated overload"));
    }
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    let error = out.expect_err();
    match (status, error) {
        (
            529 | 503,
            ProviderError::Overloaded {
                message, status: s, ..
            },
        )
        | (
            _,
            ProviderError::Server {
                message, status: s, ..
            },
        ) => {
            assert!(message.contains("simulated overload"), "{message}");
            assert_eq!(*s, status);
        }
        (_, other) => panic!("unexpected error {other:?}"),
    }
    // One try and two retries, each announced.
    assert_eq!(sim.chat_requests().len(), 3);
    assert!(!out.has_output());
    let waits: Vec<u64> = out.retries().iter().map(|n| n.wait_ms).collect();
    assert_eq!(waits, [10, 20]);
}

/// A 429 waits as long as `Retry-After` says, then succeeds.
pub async fn check_retry_after_is_honoured(kind: SimKind) {
    let sim = Sim::start(kind).await;
    sim.push(Reply::Error {
        status: 429,
        message: "slow down".into(),
        code: None,
        retry_after: Some("1".into()),
    });
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    assert_eq!(out.expect_ok().text(), "ok");
    assert!(
        out.elapsed >= Duration::from_millis(950),
        "waited only {:?}",
        out.elapsed
    );
    assert_eq!(sim.chat_requests().len(), 2);
    let retries = out.retries();
    assert_eq!(retries.len(), 1);
    assert_eq!((retries[0].status, retries[0].wait_ms), (Some(429), 1000));
}

/// A `Retry-After` beyond the configured maximum is not waited for: the caller gets it.
pub async fn check_long_retry_after_goes_to_caller(kind: SimKind) {
    let sim = Sim::start(kind).await;
    sim.push(Reply::Error {
        status: 429,
        message: "quota exhausted".into(),
        code: None,
        retry_after: Some("3600".into()),
    });
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    match out.expect_err() {
        ProviderError::RateLimited {
            message,
            retry_after,
            status,
            ..
        } => {
            assert!(message.contains("quota exhausted"));
            assert_eq!(*retry_after, Some(Duration::from_secs(3600)));
            assert_eq!(*status, 429);
        }
        other => panic!("unexpected error {other:?}"),
    }
    // The user hears how long the server asked to wait.
    let said = out.expect_err().to_string();
    assert!(
        said.contains("the server asked to wait 1 h before trying again"),
        "{said}"
    );
    assert_eq!(sim.chat_requests().len(), 1);
    assert!(out.retries().is_empty());
}

/// A 401 is not retried and says to check the key.
pub async fn check_auth_error(kind: SimKind) {
    let sim = Sim::start(kind).await;
    sim.push(Reply::error(401, "invalid x-api-key"));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    match out.expect_err() {
        e @ ProviderError::Auth { message, .. } => {
            assert!(message.contains("invalid x-api-key"));
            assert!(e.to_string().contains("API key"));
            assert!(!e.to_string().contains("sk-sim-secret"));
        }
        other => panic!("unexpected error {other:?}"),
    }
    assert_eq!(sim.chat_requests().len(), 1);
}

/// A context overflow is its own error, so the caller can compact.
pub async fn check_context_overflow(kind: SimKind, status: u16, message: &str, code: Option<&str>) {
    let sim = Sim::start(kind).await;
    sim.push(Reply::Error {
        status,
        message: message.into(),
        code: code.map(str::to_owned),
        retry_after: None,
    });
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    match out.expect_err() {
        e @ ProviderError::ContextOverflow { message: m, .. } => {
            assert_eq!(m, message);
            assert!(e.is_context_overflow());
        }
        other => panic!("unexpected error {other:?}"),
    }
    assert_eq!(sim.chat_requests().len(), 1);
}

/// A stream cut after output ends with a clear error, keeps what streamed, and is not retried
/// (so nothing is duplicated).
pub async fn check_cut_after_output(kind: SimKind) {
    let sim = Sim::start(kind).await;
    let mut script = Script::new([
        SimEvent::text("partial "),
        SimEvent::text("answer"),
        SimEvent::text(" never sent"),
    ]);
    // Enough chunks for the first text delta, whatever the provider's preamble.
    script.cut_after = Some(match kind {
        SimKind::Anthropic => 4, // message_start, ping, block start, first delta
        SimKind::Openai | SimKind::Openrouter => 2, // role chunk, first delta
        _ => 1,
    });
    sim.push(Reply::Stream(script));
    sim.push(Reply::stream([SimEvent::text("SHOULD NOT BE USED")]));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    assert!(
        matches!(out.expect_err(), ProviderError::StreamBroken { .. }),
        "{:?}",
        out.error
    );
    assert_eq!(out.text(), "partial ");
    assert_eq!(sim.chat_requests().len(), 1);
}

/// A stream cut before any output is retried.
pub async fn check_cut_before_output_is_retried(kind: SimKind) {
    let sim = Sim::start(kind).await;
    let mut script = Script::new([SimEvent::text("lost")]);
    script.cut_after = Some(0);
    sim.push(Reply::Stream(script));
    sim.push(Reply::stream([SimEvent::text("second try")]));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    assert_eq!(out.expect_ok().text(), "second try");
    assert_eq!(sim.chat_requests().len(), 2);
    let retries = out.retries();
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0].status, None);
    assert!(
        retries[0].to_string().contains("broke the stream"),
        "{}",
        retries[0]
    );
}

/// A malformed chunk after output ends the stream with a Malformed error.
pub async fn check_malformed_chunk(kind: SimKind) {
    let sim = Sim::start(kind).await;
    let mut script = Script::new([SimEvent::text("one"), SimEvent::text("two")]);
    script.malformed_at = Some(match kind {
        SimKind::Anthropic => 4,
        SimKind::Openai | SimKind::Openrouter => 2,
        _ => 1,
    });
    sim.push(Reply::Stream(script));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    assert!(
        matches!(out.expect_err(), ProviderError::Malformed { .. }),
        "{:?}",
        out.error
    );
    assert_eq!(out.text(), "one");
    assert_eq!(sim.chat_requests().len(), 1);
}

/// A stream that stalls longer than the between-chunk timeout fails with that timeout.
pub async fn check_slow_stream_times_out(kind: SimKind) {
    let sim = Sim::start(kind).await;
    let mut script = Script::new([SimEvent::text("first"), SimEvent::text("late")]);
    script.delay_ms = 600;
    // Where the stall comes before any text (after OpenAI's role chunk), the call is retried.
    for _ in 0..3 {
        sim.push(Reply::Stream(script.clone()));
    }
    let mut config = config_for(&sim);
    config.idle_timeout = Duration::from_millis(200);
    let p = provider(config);
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    match out.expect_err() {
        ProviderError::Timeout { phase, after, .. } => {
            assert_eq!(*phase, TimeoutPhase::BetweenChunks);
            assert_eq!(*after, Duration::from_millis(200));
        }
        other => panic!("unexpected error {other:?}"),
    }
    assert!(!out.text().contains("late"));
    let expected_requests = if out.text() == "first" { 1 } else { 3 };
    assert_eq!(sim.chat_requests().len(), expected_requests);
}

/// The same slow stream completes when the timeout is longer than its pauses.
pub async fn check_slow_stream_within_timeout(kind: SimKind) {
    let sim = Sim::start(kind).await;
    let mut script = Script::new([SimEvent::text("slow "), SimEvent::text("but fine")]);
    script.delay_ms = 100;
    sim.push(Reply::Stream(script));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    assert_eq!(out.expect_ok().text(), "slow but fine");
}

/// Nothing listening: a Connect error naming the URL, after the configured retries.
pub async fn check_refused_connection(kind: SimKind) {
    // Bind and drop to get a port nobody listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let sim = Sim::start(kind).await;
    let mut config = config_for(&sim);
    config.base_url = sim
        .url()
        .replace(&sim.addr().port().to_string(), &port.to_string());
    drop(sim);
    let p = provider(config);
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    match out.expect_err() {
        e @ ProviderError::Connect { url, .. } => {
            assert!(url.contains(&port.to_string()), "{url}");
            assert!(e.to_string().contains("cannot reach"));
        }
        other => panic!("unexpected error {other:?}"),
    }
}

/// A provider error inside a started stream ends it with the provider's message and code.
pub async fn check_mid_stream_error(kind: SimKind, code: Option<&str>) {
    let sim = Sim::start(kind).await;
    sim.push(Reply::stream([
        SimEvent::text("so far"),
        SimEvent::Error {
            message: "upstream exploded".into(),
            code: code.map(str::to_owned),
        },
    ]));
    let p = provider(config_for(&sim));
    let out = run(p.as_ref(), request(plain_model(kind), "hi")).await;
    match out.expect_err() {
        ProviderError::Stream { message, .. } => assert_eq!(message, "upstream exploded"),
        other => panic!("unexpected error {other:?}"),
    }
    assert_eq!(out.text(), "so far");
    assert_eq!(sim.chat_requests().len(), 1);
}
