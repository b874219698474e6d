//! Event fan-out: three clients subscribed to one session while a run streams N one-token deltas
//! (default 100,000) from the Ollama simulator as fast as it can. Prints, per client, the
//! `part.delta` events delivered and deltas per second (from the prompt to `run.done` on that
//! client), and the total delivered per second.
//!
//! `cargo run --release -p totem-tests --bin bench-fanout [-- DELTAS]`

use std::time::{Duration, Instant};

use serde_json::json;
use totem_protocol::EventKind;
use totem_tests::harness::TestDaemon;
use totem_tests::sim::harness::plain_model;
use totem_tests::sim::{Reply, Sim, SimKind};

const CLIENTS: usize = 3;

#[tokio::main]
async fn main() {
    let deltas: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let sim = Sim::start(SimKind::Ollama).await;
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    let model = format!("sim/{}", plain_model(SimKind::Ollama));
    client
        .call_raw(
            "provider.add",
            json!({"name": "sim", "kind": "ollama", "url": sim.url(), "maxRetries": 0}),
        )
        .await
        .expect("provider.add");
    let project = tempfile::tempdir().expect("project folder");
    std::fs::write(project.path().join("README.md"), "# demo\n").expect("readme");
    let project_id = client
        .call_raw("project.open", json!({"path": project.path()}))
        .await
        .expect("project.open")["id"]
        .as_str()
        .expect("project id")
        .to_string();
    let session = client
        .call_raw("session.create", json!({"projectId": project_id}))
        .await
        .expect("session.create")["id"]
        .as_str()
        .expect("session id")
        .to_string();
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
            let mut lagged = 0usize;
            loop {
                let event = tokio::time::timeout(Duration::from_secs(120), events.next())
                    .await
                    .expect("run ends within 120 s")
                    .expect("subscription open")
                    .expect("event decodes");
                match event.kind {
                    EventKind::PartDelta { .. } => delivered += 1,
                    EventKind::Lagged {} => lagged += 1,
                    EventKind::RunDone { .. } => break,
                    EventKind::RunFailed { .. }
                    | EventKind::RunAborted { .. }
                    | EventKind::RunInterrupted { .. } => panic!("the run did not finish"),
                    _ => {}
                }
            }
            drop(watcher);
            (delivered, lagged, started.elapsed())
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
    let mut total = 0usize;
    let mut slowest = Duration::ZERO;
    for (i, watcher) in watchers.into_iter().enumerate() {
        let (delivered, lagged, elapsed) = watcher.await.expect("watcher");
        total += delivered;
        slowest = slowest.max(elapsed);
        println!(
            "client {}: {delivered:>7} deltas in {:>6.2} s = {:>9.0} deltas/s{}",
            i + 1,
            elapsed.as_secs_f64(),
            delivered as f64 / elapsed.as_secs_f64(),
            if lagged > 0 {
                format!("  ({lagged} lag notices)")
            } else {
                String::new()
            }
        );
    }
    println!(
        "total:    {total:>7} deltas in {:>6.2} s = {:>9.0} deltas/s delivered",
        slowest.as_secs_f64(),
        total as f64 / slowest.as_secs_f64()
    );
    let message_text = client
        .call_raw("session.messages", json!({"sessionId": session}))
        .await
        .map(|v| v.to_string().len())
        .unwrap_or(0);
    println!("(session.messages afterwards: {message_text} bytes)");
}
