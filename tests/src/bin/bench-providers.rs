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

/// Streams one scripted bench reply through the provider; returns (text deltas, wall time,
/// process CPU time).
async fn through_parser(sim: &Sim, deltas: usize) -> anyhow::Result<(usize, Duration, Duration)> {
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
    let cpu_before = cpu_time();
    let mut stream = p.stream(request);
    let mut count = 0;
    while let Some(event) = stream.next().await {
        if let StreamEvent::TextDelta { .. } = event? {
            count += 1;
        }
    }
    Ok((
        count,
        started.elapsed(),
        cpu_time().saturating_sub(cpu_before),
    ))
}

/// User + system CPU time of this process (all threads, the simulator's writer included).
fn cpu_time() -> Duration {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
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
        "{:<10} {:>8} {:>10} {:>12} {:>12} {:>14} {:>10}",
        "provider", "deltas", "best ms", "tokens/s", "median t/s", "t/CPU-second", "raw MB/s"
    );
    let mut worst = f64::MAX;
    // BENCH_KINDS=openai,gemini limits the run (for profiling one parser).
    let only = std::env::var("BENCH_KINDS").unwrap_or_default();
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
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
        // The machine is shared: several runs, best and median reported.
        let mut rates = Vec::with_capacity(runs);
        let mut best_cpu = f64::MAX;
        let mut best_wall = Duration::MAX;
        for _ in 0..runs.max(1) {
            let (count, wall, cpu) = through_parser(&sim, deltas).await?;
            anyhow::ensure!(
                count == deltas,
                "{kind:?}: received {count} deltas of {deltas}"
            );
            rates.push(count as f64 / wall.as_secs_f64());
            best_wall = best_wall.min(wall);
            best_cpu = best_cpu.min(cpu.as_secs_f64());
        }
        rates.sort_by(|a, b| a.total_cmp(b));
        let best = rates[rates.len() - 1];
        let median = rates[rates.len() / 2];
        worst = worst.min(best);
        println!(
            "{:<10} {:>8} {:>10.1} {:>12.0} {:>12.0} {:>14.0} {:>10.1}",
            name,
            deltas,
            best_wall.as_secs_f64() * 1e3,
            best,
            median,
            deltas as f64 / best_cpu,
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
