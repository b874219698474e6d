//! Tokens per second through each provider's stream parser. A simulator streams N one-token text
//! deltas (default 100,000) as fast as the socket takes them; the figure is deltas received by the
//! caller divided by wall time. A raw drain of the same body over the same HTTP client is the
//! reference: the difference is what parsing costs.
//!
//! Run: `cargo run --release -p totem-tests --bin bench-providers [-- DELTAS]`

use std::time::{Duration, Instant};

use futures::StreamExt;
use totem_provider::{ChatRequest, Message, StreamEvent};
use totem_tests::sim::harness::{config_for, plain_model, provider};
use totem_tests::sim::{Reply, Sim, SimKind};

fn chat_path(sim: &Sim, model: &str) -> (reqwest::Method, String) {
    let url = sim.url();
    let path = match sim.kind() {
        SimKind::Ollama => format!("{url}/api/chat"),
        SimKind::Openai | SimKind::Openrouter => format!("{url}/chat/completions"),
        SimKind::Anthropic => format!("{url}/v1/messages"),
        SimKind::Gemini => format!("{url}/v1beta/models/{model}:streamGenerateContent?alt=sse"),
    };
    (reqwest::Method::POST, path)
}

/// Streams one scripted bench reply through the provider; returns (text deltas, elapsed).
async fn through_parser(sim: &Sim, deltas: usize) -> anyhow::Result<(usize, Duration)> {
    let model = plain_model(sim.kind());
    let p = provider(config_for(sim));
    let request = ChatRequest {
        model: model.to_owned(),
        messages: vec![Message::user("go")],
        ..ChatRequest::default()
    };
    // Warm the connection and the model cache outside the timed run.
    sim.push(Reply::Bench { deltas: 10 });
    let mut warm = p.stream(request.clone());
    while let Some(event) = warm.next().await {
        event?;
    }
    sim.push(Reply::Bench { deltas });
    let started = Instant::now();
    let mut stream = p.stream(request);
    let mut count = 0;
    while let Some(event) = stream.next().await {
        if let StreamEvent::TextDelta { .. } = event? {
            count += 1;
        }
    }
    Ok((count, started.elapsed()))
}

/// Drains the same body without parsing; returns (bytes, elapsed).
async fn raw_drain(sim: &Sim, deltas: usize) -> anyhow::Result<(usize, Duration)> {
    let model = plain_model(sim.kind());
    let client = reqwest::Client::new();
    let (method, url) = chat_path(sim, model);
    let body = serde_json::json!({"model": model, "max_tokens": 10,
        "messages": [{"role": "user", "content": "go"}]});
    sim.push(Reply::Bench { deltas });
    let started = Instant::now();
    let response = client
        .request(method, url)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await?;
    let mut bytes = 0;
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        bytes += chunk?.len();
    }
    Ok((bytes, started.elapsed()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let deltas: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(100_000);
    let _ = rustls::crypto::ring::default_provider().install_default();
    println!(
        "bench-providers: {deltas} one-token text deltas per provider, simulator on 127.0.0.1"
    );
    println!(
        "{:<10} {:>10} {:>12} {:>14} {:>12} {:>14}",
        "provider", "deltas", "parsed ms", "tokens/s", "raw ms", "raw MB/s"
    );
    let mut worst = f64::MAX;
    // BENCH_KINDS=openai,gemini limits the run (for profiling one parser).
    let only = std::env::var("BENCH_KINDS").unwrap_or_default();
    for kind in [
        SimKind::Ollama,
        SimKind::Openai,
        SimKind::Anthropic,
        SimKind::Gemini,
    ] {
        let name = format!("{kind:?}").to_lowercase();
        if !only.is_empty() && !only.split(',').any(|k| k == name) {
            continue;
        }
        let sim = Sim::start(kind).await;
        let (bytes, raw) = raw_drain(&sim, deltas).await?;
        let (count, parsed) = through_parser(&sim, deltas).await?;
        anyhow::ensure!(
            count == deltas,
            "{kind:?}: received {count} deltas of {deltas}"
        );
        let rate = count as f64 / parsed.as_secs_f64();
        worst = worst.min(rate);
        println!(
            "{:<10} {:>10} {:>12.1} {:>14.0} {:>12.1} {:>14.1}",
            name,
            count,
            parsed.as_secs_f64() * 1e3,
            rate,
            raw.as_secs_f64() * 1e3,
            bytes as f64 / raw.as_secs_f64() / 1e6,
        );
    }
    println!(
        "slowest parser: {:.0} tokens/s (target 1,000,000): {}",
        worst,
        if worst >= 1_000_000.0 {
            "met"
        } else {
            "NOT met"
        }
    );
    Ok(())
}
