//! Interactive terminals, against the real totemd:
//!
//! 1. keystroke → echo: a client subscribed to a terminal running `cat` types one key at a time
//!    (`terminal.write`) and times until the echo arrives as an output event; p50/p99 of 300 keys,
//!    50 ms apart (a fast typist);
//! 2. a program printing 50 MB (`yes … | head -c 50000000`) watched by two clients — one reading
//!    at once, one that stops reading for 300 ms every 100 ms: the daemon's peak RSS, the events
//!    each client got, and whether each client's screen (its own vt100 fed with the events) ends
//!    the same as the daemon's `terminal.screen`.
//!
//! `cargo build --release -p totemd -p totem-cli && cargo run --release -p totem-tests --bin bench-terminal`

use std::time::{Duration, Instant};

use serde_json::json;
use totem_client::Client;
use totem_protocol::TerminalEventKind;
use totem_tests::harness::{TestDaemon, rss_kib};
use totem_tests::reliability::{create_session, open_project};

const KEYS: usize = 300;
const BYTES: u64 = 50_000_000;

async fn open(client: &Client, session: &str, command: &str) -> String {
    client
        .call_raw(
            "terminal.open",
            json!({"sessionId": session, "command": command, "cols": 120, "rows": 40}),
        )
        .await
        .expect("terminal.open")["id"]
        .as_str()
        .expect("id")
        .to_string()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// The screen a client draws from the events it got.
fn screen_of(events: &[TerminalEventKind]) -> String {
    let mut parser = vt100::Parser::new(
        std::num::NonZeroU16::new(40).expect("rows"),
        std::num::NonZeroU16::new(120).expect("cols"),
        0,
    );
    for kind in events {
        match kind {
            TerminalEventKind::Output { data } | TerminalEventKind::Redraw { data, .. } => {
                parser.process(data.as_bytes())
            }
            _ => {}
        }
    }
    parser
        .screen()
        .rows(0, 120)
        .map(|r| r.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_string()
}

#[tokio::main]
async fn main() {
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    let project = tempfile::tempdir().expect("project");
    let project_id = open_project(&client, project.path()).await;
    let session = create_session(&client, &project_id).await;
    println!("# bench-terminal");

    // 1. Keystroke to echo.
    let id = open(&client, &session, "cat").await;
    let mut stream = client.subscribe_terminal(&id, 0).await.expect("subscribe");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut latencies = Vec::with_capacity(KEYS);
    for i in 0..KEYS {
        let key = char::from(b'a' + (i % 26) as u8).to_string();
        let sent = Instant::now();
        client
            .call_raw("terminal.write", json!({"id": id, "data": key}))
            .await
            .expect("write");
        loop {
            let event = tokio::time::timeout(Duration::from_secs(5), stream.next())
                .await
                .expect("echo within 5 s")
                .expect("open")
                .expect("decodes");
            if let TerminalEventKind::Output { data } = event.kind
                && data.contains(key.as_str())
            {
                break;
            }
        }
        latencies.push(sent.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    latencies.sort();
    println!(
        "keystroke -> echo ({KEYS} keys, 50 ms apart): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
        percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1000.0
    );

    // 2. 50 MB of output, two watchers.
    let idle_rss = rss_kib(daemon.pid());
    let command = format!(
        "yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c {BYTES}; echo; echo THE END"
    );
    let id = open(&client, &session, &format!("sleep 0.5; {command}")).await;
    let mut watchers = Vec::new();
    for slow in [false, true] {
        let watcher = daemon.client().await;
        let mut stream = watcher.subscribe_terminal(&id, 0).await.expect("subscribe");
        watchers.push(tokio::spawn(async move {
            let _keep = watcher;
            let mut events = Vec::new();
            let mut last_pause = Instant::now();
            loop {
                if slow && last_pause.elapsed() > Duration::from_millis(100) {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    last_pause = Instant::now();
                }
                let event = tokio::time::timeout(Duration::from_secs(120), stream.next())
                    .await
                    .expect("events within 120 s")
                    .expect("open")
                    .expect("decodes");
                let exited = matches!(event.kind, TerminalEventKind::Exited { .. });
                events.push(event.kind);
                if exited {
                    return events;
                }
            }
        }));
    }
    let started = Instant::now();
    let mut peak = 0;
    while watchers.iter().any(|w| !w.is_finished()) {
        peak = peak.max(rss_kib(daemon.pid()));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    let screen = client
        .call_raw("terminal.screen", json!({"id": id}))
        .await
        .expect("screen")["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    println!(
        "50 MB of output: {:.1} s until both watchers saw the end; daemon RSS {:.1} MiB idle, peak {:.1} MiB",
        elapsed.as_secs_f64(),
        idle_rss as f64 / 1024.0,
        peak as f64 / 1024.0
    );
    for (i, watcher) in watchers.into_iter().enumerate() {
        let events = watcher.await.expect("watcher");
        let redraws = events
            .iter()
            .filter(|e| matches!(e, TerminalEventKind::Redraw { .. }))
            .count();
        let drawn = screen_of(&events);
        println!(
            "watcher {} ({}): {} events, {} redraws, screen {}",
            i + 1,
            if i == 0 {
                "reads at once"
            } else {
                "pauses 300 ms every 100 ms"
            },
            events.len(),
            redraws,
            if drawn == screen {
                "matches the daemon's"
            } else {
                "DIFFERS from the daemon's"
            }
        );
        if drawn != screen {
            println!("--- daemon\n{screen}\n--- watcher\n{drawn}");
        }
    }
}
