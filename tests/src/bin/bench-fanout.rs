//! Event fan-out: three clients subscribed to one session while a run streams N one-token deltas
//! (default 100,000) from the Ollama simulator as fast as it can. The run coalesces the
//! provider's deltas into `part.delta` events (about every 50 ms or 256 bytes), so each client
//! reports both: the provider deltas (tokens) that reached it per second, checked by comparing
//! the text it got with the stored answer, and the `part.delta` events it got. Time runs from
//! the prompt to `run.done` on that client.
//!
//! `cargo run --release -p totem-tests --bin bench-fanout [-- DELTAS]`

use std::time::{Duration, Instant};

use serde_json::json;
use totem_protocol::EventKind;
use totem_tests::harness::TestDaemon;
use totem_tests::setup::{SimAgent, plain_project};
use totem_tests::sim::harness::plain_model;
use totem_tests::sim::{Reply, SimKind};

const CLIENTS: usize = 3;

#[tokio::main]
async fn main() {
    let deltas: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let project = plain_project();
    let SimAgent {
        sim,
        daemon,
        client,
        session,
        ..
    } = SimAgent::start(TestDaemon::start(), project.path()).await;
    let model = format!("sim/{}", plain_model(SimKind::Ollama));
    println!(
        "# bench-fanout: {CLIENTS} clients subscribed to one session, a run of {deltas} deltas"
    );

    // Each watcher has its own connection, subscribes, then counts until the run ends.
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(CLIENTS);
    let (go_tx, _) = tokio::sync::broadcast::channel::<Instant>(1);
    let mut watchers = Vec::new();
    for _ in 0..CLIENTS {
        let watcher = daemon.client().await;
        let mut events = watcher.subscribe(&session, 0).await.expect("subscribe");
        let ready = ready_tx.clone();
        let mut go = go_tx.subscribe();
        watchers.push(tokio::spawn(async move {
            let _ = ready.send(()).await;
            let started = go.recv().await.expect("start time");
            let mut delivered = 0usize;
            let mut text = String::new();
            let mut lagged = 0usize;
            loop {
                let event = tokio::time::timeout(Duration::from_secs(120), events.next())
                    .await
                    .expect("run ends within 120 s")
                    .expect("subscription open")
                    .expect("event decodes");
                match event.kind {
                    EventKind::PartDelta { text: piece, .. } => {
                        delivered += 1;
                        text.push_str(&piece);
                    }
                    EventKind::Lagged {} => lagged += 1,
                    EventKind::RunDone { .. } => break,
                    EventKind::RunFailed { .. }
                    | EventKind::RunAborted { .. }
                    | EventKind::RunInterrupted { .. } => panic!("the run did not finish"),
                    _ => {}
                }
            }
            drop(watcher);
            (delivered, text, lagged, started.elapsed())
        }));
    }
    for _ in 0..CLIENTS {
        ready_rx.recv().await.expect("watcher ready");
    }
    sim.push(Reply::Bench { deltas });
    let started = Instant::now();
    let _ = go_tx.send(started);
    client
        .call_raw(
            "session.prompt",
            json!({"sessionId": session, "text": "go", "model": model}),
        )
        .await
        .expect("session.prompt");
    let mut results = Vec::new();
    for watcher in watchers {
        results.push(watcher.await.expect("watcher"));
    }
    let messages = client
        .call_raw("session.messages", json!({"sessionId": session}))
        .await
        .expect("session.messages");
    let answer: String = messages["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["parts"].as_array())
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<String>()
        })
        .unwrap_or_default();
    let mut events = 0usize;
    let mut slowest = Duration::ZERO;
    for (i, (delivered, text, lagged, elapsed)) in results.into_iter().enumerate() {
        assert_eq!(text, answer, "client {} got the whole answer", i + 1);
        events += delivered;
        slowest = slowest.max(elapsed);
        println!(
            "client {}: {deltas} tokens in {:>5.3} s = {:>9.0} tokens/s, in {delivered} part.delta events{}",
            i + 1,
            elapsed.as_secs_f64(),
            deltas as f64 / elapsed.as_secs_f64(),
            if lagged > 0 {
                format!("  ({lagged} lag notices)")
            } else {
                String::new()
            }
        );
    }
    println!(
        "all {CLIENTS}: {} tokens delivered in {:>5.3} s = {:>9.0} tokens/s ({events} events, {:.0} events/s)",
        deltas * CLIENTS,
        slowest.as_secs_f64(),
        (deltas * CLIENTS) as f64 / slowest.as_secs_f64(),
        events as f64 / slowest.as_secs_f64()
    );
}
