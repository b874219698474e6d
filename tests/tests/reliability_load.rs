//! Load through the real daemon: 20 clients × 10 sessions prompting at once against an echo
//! model, with no error and no cross-talk (each session's answer names its own prompt); and a
//! client that never reads its socket, which must not slow the clients that do: it is told it
//! lagged and resubscribes from the last event it got.

mod reliability_common;

use std::time::{Duration, Instant};

use reliability_common::{
    Echo, add_echo_provider, answer_text, create_session, echo_answer, follow, open_project,
    plain_project, prompt,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use totem_client::Client;
use totem_protocol::{EventKind, PROTOCOL_VERSION, SessionEvent};
use totem_tests::harness::TestDaemon;
use totem_tests::sim::{Reply, Sim, SimKind};

const CLIENTS: usize = 20;
const SESSIONS: usize = 10;
const CHUNKS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_clients_ten_sessions_each_get_their_own_answers() {
    let echo = Echo::start(CHUNKS, 5).await;
    let daemon = TestDaemon::start();
    let setup = daemon.client().await;
    add_echo_provider(&setup, &echo).await;
    let project = plain_project();
    let project_id = open_project(&setup, project.path()).await;

    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let client = daemon.client().await;
        let project_id = project_id.clone();
        clients.push(tokio::spawn(async move {
            let mut sessions = Vec::new();
            for s in 0..SESSIONS {
                let session = create_session(&client, &project_id).await;
                let events = client.subscribe(&session, 0).await.expect("subscribe");
                sessions.push((format!("c{c}-s{s}"), session, events));
            }
            // All ten prompts go out before any answer is read.
            let mut runs = Vec::new();
            for (tag, session, _) in &sessions {
                runs.push(prompt(&client, session, tag).await.0);
            }
            let followed = sessions.into_iter().zip(runs).map(
                |((tag, session, mut events), run)| async move {
                    let seen = follow(&mut events, &run, 120).await;
                    (tag, session, run, seen)
                },
            );
            futures::future::join_all(followed).await
        }));
    }
    let mut runs = 0;
    for client in clients {
        for (tag, session, run, events) in client.await.expect("client task") {
            runs += 1;
            check_own_answer(&tag, &session, &run, &events);
        }
    }
    eprintln!(
        "{runs} runs from {CLIENTS} clients in {:?}",
        started.elapsed()
    );
    assert_eq!(runs, CLIENTS * SESSIONS);
    assert_eq!(
        echo.shape
            .answered
            .load(std::sync::atomic::Ordering::Relaxed),
        CLIENTS * SESSIONS,
        "one model request per prompt"
    );
    let status = setup
        .call_raw("daemon.status", json!({}))
        .await
        .expect("daemon.status");
    assert!(status.is_object(), "{status}");
}

/// The run ended done, every event belongs to its session, and the answer names its prompt only.
fn check_own_answer(tag: &str, session: &str, run: &str, events: &[SessionEvent]) {
    match events.last().map(|e| &e.kind) {
        Some(EventKind::RunDone { .. }) => {}
        other => panic!("{tag}: run {run} ended with {other:?}"),
    }
    for event in events {
        assert_eq!(
            event.session_id, session,
            "{tag}: an event of another session"
        );
        let text = match &event.kind {
            EventKind::PartDelta { text, .. } => text.as_str(),
            _ => "",
        };
        if let Some(at) = text.find("answer to ") {
            assert!(
                text[at..].starts_with(&format!("answer to {tag} ")),
                "{tag}: got another session's text: {text}"
            );
        }
    }
    assert_eq!(answer_text(events), echo_answer(tag, CHUNKS), "{tag}");
}

/// Deltas received and the time from the prompt to `run.done` for one attached client.
async fn read_run(mut events: totem_client::EventStream, run: String) -> (usize, Duration) {
    let started = Instant::now();
    let mut bytes = 0;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(120), events.next())
            .await
            .expect("the run ends in time")
            .expect("subscription open")
            .expect("event decodes");
        match event.kind {
            EventKind::PartDelta { text, .. } => bytes += text.len(),
            EventKind::RunDone { run: r } if r.id == run => return (bytes, started.elapsed()),
            EventKind::RunFailed { run: r } if r.id == run => panic!("run failed: {:?}", r.error),
            EventKind::Lagged {} => panic!("a reading client lagged"),
            _ => {}
        }
    }
}

/// Three reading clients follow one run; returns each one's (delta bytes, time to run.done).
async fn run_with_readers(
    readers: &[Client],
    session: &str,
    after_seq: u64,
) -> Vec<(usize, Duration)> {
    let mut streams = Vec::new();
    for reader in readers {
        streams.push(
            reader
                .subscribe(session, after_seq)
                .await
                .expect("subscribe"),
        );
    }
    let accepted = readers[0]
        .call_raw(
            "session.prompt",
            json!({"sessionId": session, "text": "stream a lot", "model": "sim/llama3.2:latest"}),
        )
        .await
        .expect("session.prompt");
    let run = accepted["runId"].as_str().expect("run id").to_string();
    let reads = streams.into_iter().map(|s| read_run(s, run.clone()));
    futures::future::join_all(reads).await
}

/// A raw connection: initialize and subscribe, then (for now) read nothing.
async fn stalled_client(socket: &std::path::Path, session: &str) -> tokio::net::UnixStream {
    let mut stream = tokio::net::UnixStream::connect(socket)
        .await
        .expect("connect");
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "client": {"name": "stalled", "version": "0"}, "capabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session.subscribe",
            "params": {"sessionId": session, "afterSeq": 0}}),
    ];
    for line in lines {
        stream
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write");
    }
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_does_not_slow_the_others() {
    stalled_client_scenario(false).await;
}

/// Found by this suite and not fixed yet, so ignored: in some runs the stalled client, once it
/// reads, finds neither its backlog nor a `lagged` notice (nothing within 60 s after the two
/// responses); in others it finds `lagged`, but `session.subscribe` from that seq (on the same
/// connection or a new one) then delivers nothing, though `part.done` and `run.done` follow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "daemon bug: a lagged subscriber may get no lagged notice, and resubscribing from a lagged seq replays nothing"]
async fn a_lagged_client_catches_up_by_resubscribing() {
    stalled_client_scenario(true).await;
}

/// Three readers and a client that never reads, which must not slow them; with `catch_up`, the
/// stalled client then reads, finds its `lagged` notice and resubscribes until it has the end.
async fn stalled_client_scenario(catch_up: bool) {
    // 200,000 one-token deltas (800 KB of text): far more than a connection's queue and socket
    // buffer hold once the deltas are coalesced into events.
    const DELTAS: usize = 200_000;
    let sim = Sim::start(SimKind::Ollama).await;
    let daemon = TestDaemon::start();
    let setup = daemon.client().await;
    setup
        .call_raw(
            "provider.add",
            json!({"name": "sim", "kind": "ollama", "url": sim.url(), "maxRetries": 0}),
        )
        .await
        .expect("provider.add");
    let project = plain_project();
    let project_id = open_project(&setup, project.path()).await;
    let session = create_session(&setup, &project_id).await;
    let mut readers = Vec::new();
    for _ in 0..3 {
        readers.push(daemon.client().await);
    }

    sim.push(Reply::Bench { deltas: DELTAS });
    let baseline = run_with_readers(&readers, &session, 0).await;
    // A fresh session: the first answer would not fit the model's window a second time.
    let session = create_session(&setup, &project_id).await;
    let stalled = stalled_client(&daemon.socket, &session).await;
    sim.push(Reply::Bench { deltas: DELTAS });
    let with_stalled = run_with_readers(&readers, &session, 0).await;
    let text_bytes = DELTAS * " tok".len();
    for (bytes, _) in baseline.iter().chain(&with_stalled) {
        assert_eq!(*bytes, text_bytes, "a reading client missed deltas");
    }
    let slowest = |r: &[(usize, Duration)]| r.iter().map(|(_, t)| *t).max().unwrap_or_default();
    let (before, during) = (slowest(&baseline), slowest(&with_stalled));
    let rate = |t: Duration| text_bytes as f64 / 4.0 / t.as_secs_f64();
    eprintln!(
        "3 readers, {DELTAS} deltas: {before:?} alone ({:.0} deltas/s), {during:?} beside a client that never reads ({:.0} deltas/s)",
        rate(before),
        rate(during)
    );
    assert!(
        during <= before * 2 + Duration::from_secs(1),
        "the stalled client slowed the others: {before:?} → {during:?}"
    );

    if !catch_up {
        return;
    }
    // Now it reads: behind the backlog is a `lagged` notice; it resubscribes from that seq
    // and gets the rest, the finished answer and the run's end included.
    let (read, mut write) = stalled.into_split();
    let mut lines = BufReader::new(read).lines();
    let lagged_seq = loop {
        let line: Value = serde_json::from_str(&next_line(&mut lines).await).expect("JSON line");
        let event = &line["params"]["result"];
        if event["type"] == "lagged" {
            break event["seq"].as_u64().expect("lagged seq");
        }
        assert!(
            event["type"] != "run.done",
            "the stalled client got the end of the run without lagging: {line}"
        );
    };
    eprintln!("the stalled client was told it lagged at seq {lagged_seq}");
    // The replay itself may be more than the connection's queue holds: each `lagged` names a
    // later seq, and the client resubscribes from there until it reaches the run's end.
    let mut from = lagged_seq;
    let mut resubscribed = 0;
    let mut answer_len = 0;
    'resubscribe: loop {
        resubscribed += 1;
        assert!(
            resubscribed <= 50,
            "no progress after 50 resubscriptions (at {from})"
        );
        let request = json!({"jsonrpc": "2.0", "id": 2 + resubscribed, "method": "session.subscribe",
            "params": {"sessionId": session, "afterSeq": from}});
        write
            .write_all(format!("{request}\n").as_bytes())
            .await
            .expect("resubscribe");
        loop {
            let line: Value =
                serde_json::from_str(&next_line(&mut lines).await).expect("JSON line");
            let event = &line["params"]["result"];
            match event["type"].as_str() {
                Some("lagged") => {
                    let seq = event["seq"].as_u64().expect("lagged seq");
                    assert!(seq >= from, "lagged went back: {seq} < {from}");
                    from = seq;
                    continue 'resubscribe;
                }
                Some(_) => {
                    let seq = event["seq"].as_u64().expect("seq");
                    assert!(seq > from, "replayed from {from}: {line}");
                }
                None => continue,
            }
            if event["type"] == "part.done" {
                answer_len = event["part"]["text"].as_str().map_or(0, str::len);
            }
            if event["type"] == "run.done" {
                break 'resubscribe;
            }
        }
    }
    eprintln!(
        "the stalled client lagged at seq {lagged_seq} and caught up in {resubscribed} resubscription(s)"
    );
    assert_eq!(
        answer_len, text_bytes,
        "the resubscribed client got the whole answer"
    );
}

async fn next_line(
    lines: &mut tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
) -> String {
    tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("a line in time")
        .expect("read")
        .expect("connection open")
}
