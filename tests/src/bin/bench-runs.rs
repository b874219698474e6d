//! Memory over many runs: 100 short runs against the Ollama simulator, RSS of `totemd` (VmRSS from
//! /proc/PID/status) at start, after run 50 and after run 100, and the growth between 50 and 100
//! (target ≤ 5 %).
//!
//! `cargo run --release -p totem-tests --bin bench-runs [-- RUNS [one-session]]`
//!
//! With `one-session` every run goes to the same session, which separates what a run leaves
//! behind (store, caches) from what a session that ran keeps in memory.

use std::time::{Duration, Instant};

use serde_json::json;
use totem_protocol::EventKind;
use totem_tests::harness::{self, TestDaemon};
use totem_tests::setup::{SimAgent, plain_project};
use totem_tests::sim::harness::plain_model;
use totem_tests::sim::{Reply, SimEvent, SimKind};

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let one_session = std::env::args().nth(2).as_deref() == Some("one-session");
    let half = runs / 2;
    let project = plain_project();
    let agent = SimAgent::start(TestDaemon::start(), project.path()).await;
    let (sim, daemon, client) = (&agent.sim, &agent.daemon, &agent.client);
    let model = format!("sim/{}", plain_model(SimKind::Ollama));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let start = harness::rss_kib(daemon.pid());
    println!(
        "# bench-runs: {runs} runs, {}, 40 streamed deltas each",
        if one_session {
            "all in one session"
        } else {
            "each in a new session"
        }
    );
    println!("RSS at start                 {:>6.1} MiB", mib(start));
    let mut at_half = 0;
    let started = Instant::now();
    let mut session = agent.session.clone();
    for i in 1..=runs {
        if !one_session && i > 1 {
            session = agent.new_session().await;
        }
        let after = client
            .call_raw("session.get", json!({"sessionId": session}))
            .await
            .expect("session.get")["lastSeq"]
            .as_u64()
            .unwrap_or(0);
        let mut events = client.subscribe(&session, after).await.expect("subscribe");
        let words: Vec<SimEvent> = (0..40)
            .map(|w| SimEvent::text(format!("word{w} ")))
            .collect();
        sim.push(Reply::stream(words));
        let accepted = client
            .call_raw(
                "session.prompt",
                json!({"sessionId": session, "text": format!("run {i}"), "model": model}),
            )
            .await
            .expect("session.prompt");
        let run_id = accepted["runId"].as_str().expect("run id").to_string();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(30), events.next())
                .await
                .expect("run ends within 30 s")
                .expect("subscription open")
                .expect("event decodes");
            match &event.kind {
                EventKind::RunDone { run } if run.id == run_id => break,
                EventKind::RunFailed { run }
                | EventKind::RunAborted { run }
                | EventKind::RunInterrupted { run }
                    if run.id == run_id =>
                {
                    panic!("run {i} did not finish: {event:?}")
                }
                _ => {}
            }
        }
        let _ = client.unsubscribe(&events.subscription).await;
        if i == half {
            tokio::time::sleep(Duration::from_millis(500)).await;
            at_half = harness::rss_kib(daemon.pid());
            println!(
                "RSS after run {half:<4}           {:>6.1} MiB",
                mib(at_half)
            );
        }
    }
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let end = harness::rss_kib(daemon.pid());
    println!("RSS after run {runs:<4}           {:>6.1} MiB", mib(end));
    let growth = (end as f64 - at_half as f64) / at_half.max(1) as f64 * 100.0;
    println!(
        "growth run {half} → {runs}         {growth:>+6.1} %   (target ≤ 5 %: {})",
        if growth <= 5.0 { "met" } else { "missed" }
    );
    println!(
        "runs took                    {:>6.1} ms each (mean, session.create → run.done)",
        elapsed.as_secs_f64() * 1e3 / runs as f64
    );
}
