//! Cost per delta of each provider's stream parser alone: the body a simulator streams for
//! `bench-providers` (N one-token text deltas and a usage event), drained once over HTTP, cut in
//! 64 KiB chunks and fed from memory through `totem_provider::parse_stream` — framing, decoding
//! and yielding, no socket. Prints time per delta (best and median of 5), or, with `--callgrind`,
//! the instructions per delta counted by valgrind, which the machine's load does not move.
//!
//! Run: `cargo run --release -p totem-tests --bin bench-parsers [-- [--callgrind] [DELTAS]]`
//! (DELTAS defaults to 100,000, or 20,000 under callgrind).

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use futures::StreamExt;
use totem_provider::{ProviderError, ProviderKind, StreamEvent, parse_stream};
use totem_tests::sim::harness::plain_model;
use totem_tests::sim::{Reply, Sim, SimKind};

const KINDS: [(&str, SimKind, ProviderKind); 4] = [
    ("ollama", SimKind::Ollama, ProviderKind::Ollama),
    ("openai", SimKind::Openai, ProviderKind::Openai),
    ("anthropic", SimKind::Anthropic, ProviderKind::Anthropic),
    ("gemini", SimKind::Gemini, ProviderKind::Gemini),
];

/// The simulator's bench body for `deltas` deltas, in 64 KiB chunks (the size it writes).
fn bench_body(kind: SimKind, deltas: usize) -> anyhow::Result<Vec<Bytes>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let body = runtime.block_on(async {
        let sim = Sim::start(kind).await;
        sim.push(Reply::Bench { deltas });
        let model = plain_model(kind);
        let url = match kind {
            SimKind::Ollama => format!("{}/api/chat", sim.url()),
            SimKind::Openai | SimKind::Openrouter => format!("{}/chat/completions", sim.url()),
            SimKind::Anthropic => format!("{}/v1/messages", sim.url()),
            SimKind::Gemini => format!(
                "{}/v1beta/models/{model}:streamGenerateContent?alt=sse",
                sim.url()
            ),
        };
        let request = serde_json::json!({"model": model, "max_tokens": 10,
            "messages": [{"role": "user", "content": "go"}]});
        let response = reqwest::Client::new()
            .post(url)
            .header("anthropic-version", "2023-06-01")
            .json(&request)
            .send()
            .await?
            .error_for_status()?;
        anyhow::Ok(response.bytes().await?)
    })?;
    Ok(body.chunks(64 * 1024).map(Bytes::copy_from_slice).collect())
}

/// The measured part: the whole body through the parser. Returns the text deltas it yielded.
/// Not inlined, so that callgrind can count this function alone (`--toggle-collect`).
#[inline(never)]
fn parse_body(kind: ProviderKind, chunks: &[Bytes]) -> anyhow::Result<usize> {
    // Owned (parse_stream takes a 'static stream); cloning a `Bytes` is a reference count.
    let body: Vec<Result<Bytes, ProviderError>> = chunks.iter().map(|c| Ok(c.clone())).collect();
    let body = futures::stream::iter(body);
    let mut stream = parse_stream(kind, "bench", body);
    futures::executor::block_on(async {
        let mut deltas = 0;
        while let Some(event) = stream.next().await {
            if let StreamEvent::TextDelta { .. } = event? {
                deltas += 1;
            }
        }
        Ok(deltas)
    })
}

fn checked_parse(
    name: &str,
    kind: ProviderKind,
    chunks: &[Bytes],
    deltas: usize,
) -> anyhow::Result<()> {
    let got = parse_body(kind, chunks)?;
    if got != deltas {
        bail!("{name}: the parser yielded {got} text deltas of {deltas}");
    }
    Ok(())
}

/// Runs one provider's parse under callgrind (this program again, with `--one`) and answers
/// the instructions counted inside [`parse_body`].
fn callgrind(name: &str, deltas: usize) -> anyhow::Result<u64> {
    let out = std::env::temp_dir().join(format!(
        "bench-parsers.{}.{name}.callgrind",
        std::process::id()
    ));
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--toggle-collect=*parse_body*")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(std::env::current_exe()?)
        .args(["--one", name, &deltas.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .context("could not start valgrind; install it (apt-get install valgrind)")?;
    if !status.success() {
        bail!("{name}: valgrind exited with {status}");
    }
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    text.lines()
        .find_map(|line| {
            line.strip_prefix("totals: ")
                .or_else(|| line.strip_prefix("summary: "))
        })
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .context("no totals line in callgrind's output")
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let count = |arg: Option<&String>, default: usize| -> anyhow::Result<usize> {
        Ok(arg.map(|a| a.parse()).transpose()?.unwrap_or(default))
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let [one, name, deltas] = args.as_slice()
        && one == "--one"
    {
        // The child callgrind runs: fetch the body uncounted, then parse it once.
        let (_, sim_kind, kind) = KINDS
            .into_iter()
            .find(|(n, ..)| n == name)
            .context("unknown provider")?;
        let deltas = deltas.parse()?;
        let chunks = bench_body(sim_kind, deltas)?;
        return checked_parse(name, kind, &chunks, deltas);
    }
    if args.first().map(String::as_str) == Some("--callgrind") {
        let deltas = count(args.get(1), 20_000)?;
        println!("bench-parsers: instructions per delta (callgrind), {deltas} deltas per provider");
        println!(
            "{:<10} {:>14} {:>12}",
            "provider", "instructions", "per delta"
        );
        for (name, ..) in KINDS {
            let total = callgrind(name, deltas)?;
            println!(
                "{name:<10} {total:>14} {:>12.0}",
                total as f64 / deltas as f64
            );
        }
        return Ok(());
    }
    let deltas = count(args.first(), 100_000)?;
    println!("bench-parsers: {deltas} one-token deltas per provider, parsed from memory, 5 runs");
    println!(
        "{:<10} {:>12} {:>12} {:>12}",
        "provider", "best ns/δ", "median ns/δ", "best tok/s"
    );
    for (name, sim_kind, kind) in KINDS {
        let chunks = bench_body(sim_kind, deltas)?;
        let mut times: Vec<Duration> = Vec::with_capacity(5);
        for _ in 0..5 {
            let started = Instant::now();
            checked_parse(name, kind, &chunks, deltas)?;
            times.push(started.elapsed());
        }
        times.sort();
        let per = |t: Duration| t.as_secs_f64() * 1e9 / deltas as f64;
        println!(
            "{name:<10} {:>12.0} {:>12.0} {:>12.0}",
            per(times[0]),
            per(times[2]),
            deltas as f64 / times[0].as_secs_f64()
        );
    }
    Ok(())
}
