//! Load through the real daemon: 20 clients × 10 sessions prompting at once against an echo
//! model, with no error and no cross-talk (each session's answer names its own prompt); and a
//! client that never reads its socket, which must not slow the clients that do: it is told it
//! lagged and resubscribes from the last event it got.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use totem_client::Client;
use totem_protocol::{DaemonEventKind, EventKind, PROTOCOL_VERSION, SessionActivity, SessionEvent};
use totem_tests::harness::TestDaemon;
use totem_tests::reliability::{
    Echo, add_echo_provider, answer_text, create_session, echo_answer, follow, open_project,
    plain_project, prompt, replay_to_marker,
};
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
    let mut text = String::new();
    for event in events {
        assert_eq!(
            event.session_id, session,
            "{tag}: an event of another session"
        );
        if let EventKind::PartDelta { text: delta, .. } = &event.kind {
            text.push_str(delta);
        }
    }
    // Over the whole streamed text: a delta may end anywhere, even inside "answer to c0-s1".
    for (at, _) in text.match_indices("answer to ") {
        assert!(
            text[at..].starts_with(&format!("answer to {tag} ")),
            "{tag}: got another session's text: {}",
            &text[at..]
        );
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

/// A raw connection: initialize and subscribe after `after_seq`, then (for now) read nothing.
async fn stalled_client(
    socket: &std::path::Path,
    session: &str,
    after_seq: u64,
) -> tokio::net::UnixStream {
    let mut stream = tokio::net::UnixStream::connect(socket)
        .await
        .expect("connect");
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "client": {"name": "stalled", "version": "0"}, "capabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session.subscribe",
            "params": {"sessionId": session, "afterSeq": after_seq}}),
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

/// The stalled client, once it reads, finds its backlog and then a `lagged` notice naming the last
/// event it was given; resubscribing from that seq, on the same connection and on a new one,
/// replays every later event (no gap, no duplicate) up to the run's end and then continues live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    let stalled = stalled_client(&daemon.socket, &session, 0).await;
    sim.push(Reply::Bench { deltas: DELTAS });
    let with_stalled = run_with_readers(&readers, &session, 0).await;
    let text_bytes = DELTAS * totem_tests::sim::BENCH_TOKEN_BYTES;
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
    // Now it reads: its backlog, events 1, 2, … in order, then a `lagged` notice naming the
    // last of them.
    let (read, mut write) = stalled.into_split();
    let mut same = RawEvents::new(read);
    let mut before = Vec::new();
    let lagged_seq = loop {
        let event = same.next_event().await;
        if event["type"] == "lagged" {
            break event["seq"].as_u64().expect("lagged seq");
        }
        assert!(
            event["type"] != "run.done",
            "the stalled client got the end of the run without lagging"
        );
        before.push(event);
    };
    eprintln!(
        "the stalled client was told it lagged at seq {lagged_seq} after {} events",
        before.len()
    );
    assert_consecutive(&before, 1, "the backlog before the lag notice");
    assert_eq!(
        before.last().and_then(|e| e["seq"].as_u64()),
        Some(lagged_seq),
        "the lag notice names the last event the client was given"
    );

    // It resubscribes from that seq on the same connection, and a new connection does too.
    let request = json!({"jsonrpc": "2.0", "id": 3, "method": "session.subscribe",
        "params": {"sessionId": session, "afterSeq": lagged_seq}});
    write
        .write_all(format!("{request}\n").as_bytes())
        .await
        .expect("resubscribe");
    let fresh = stalled_client(&daemon.socket, &session, lagged_seq).await;
    let (fresh_read, _fresh_write) = fresh.into_split();
    let mut fresh = RawEvents::new(fresh_read);
    let mut tails = Vec::new();
    for (name, events) in [
        ("same connection", &mut same),
        ("new connection", &mut fresh),
    ] {
        let mut tail = Vec::new();
        loop {
            let event = events.next_event().await;
            assert!(
                event["type"] != "lagged",
                "{name}: lagged again while replaying: {event}"
            );
            let end = event["type"] == "run.done";
            tail.push(event);
            if end {
                break;
            }
        }
        assert_consecutive(&tail, lagged_seq + 1, name);
        let answer: String = tail
            .iter()
            .filter(|e| e["type"] == "part.done")
            .filter_map(|e| e["part"]["text"].as_str())
            .collect();
        assert_eq!(answer.len(), text_bytes, "{name}: the whole answer");
        tails.push(tail);
    }
    // The backlog and the replay together are the whole stream: every delta, once.
    let deltas: String = before
        .iter()
        .chain(&tails[0])
        .filter(|e| e["type"] == "part.delta")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(
        deltas,
        totem_tests::sim::bench_text(DELTAS),
        "backlog + replay deltas"
    );
    let end_seq = tails[0]
        .last()
        .and_then(|e| e["seq"].as_u64())
        .expect("seq");
    eprintln!(
        "resubscribed from {lagged_seq}: {} events replayed up to the run's end at seq {end_seq}",
        tails[0].len()
    );

    // Both resubscriptions continue live: the next event of the session reaches them, next in line.
    setup
        .call_raw(
            "session.rename",
            json!({"sessionId": session, "title": "caught up"}),
        )
        .await
        .expect("session.rename");
    for (name, events) in [
        ("same connection", &mut same),
        ("new connection", &mut fresh),
    ] {
        let mut seq = end_seq;
        loop {
            let event = events.next_event().await;
            seq += 1;
            assert_eq!(
                event["seq"].as_u64(),
                Some(seq),
                "{name}: live after the replay: {event}"
            );
            if event["type"] == "session.updated" && event["session"]["title"] == "caught up" {
                break;
            }
        }
    }
}

/// Session events read from a raw connection; responses are skipped.
struct RawEvents {
    lines: tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
}

impl RawEvents {
    fn new(read: tokio::net::unix::OwnedReadHalf) -> RawEvents {
        RawEvents {
            lines: BufReader::new(read).lines(),
        }
    }

    async fn next_event(&mut self) -> Value {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
                .await
                .expect("a line in time")
                .expect("read")
                .expect("connection open");
            let mut line: Value = serde_json::from_str(&line).expect("JSON line");
            assert!(line.get("error").is_none(), "an error: {line}");
            if line["method"] == "session.event" {
                return line["params"]["result"].take();
            }
        }
    }
}

/// Events numbered `first`, `first + 1`, … with no gap and no duplicate.
fn assert_consecutive(events: &[Value], first: u64, what: &str) {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(
            event["seq"].as_u64(),
            Some(first + i as u64),
            "{what}: event {i} out of line: {event}"
        );
    }
}

/// Sessions prompting one run after the other, so that many runs end while a client watches.
const ENDING_SESSIONS: usize = 2;
const ENDING_RUNS: usize = 10;
/// A long title makes every write of the session slow (its record and each `session.updated`
/// carry it), so a reader acting on an idle session lands within the end of its run, were the
/// two not one write.
const LONG_TITLE: usize = 128 * 1024;

/// The moment the daemon says a session went idle, its run has ended for every reader: `run.get`
/// gives its end status, and a `session.rename` sent right then comes after the run's end in the
/// session's events (the soak's check). A session said idle before its run's end was stored let
/// a reader see the session free and the run still going, or its end after a later event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_idle_only_once_its_runs_end_is_stored() {
    let echo = Echo::start(1, 0).await;
    let daemon = TestDaemon::start();
    let setup = daemon.client().await;
    add_echo_provider(&setup, &echo).await;
    let project = plain_project();
    let project_id = open_project(&setup, project.path()).await;
    let padding = "x".repeat(LONG_TITLE);

    let mut tasks = Vec::new();
    for s in 0..ENDING_SESSIONS {
        let client = daemon.client().await;
        let session = create_session(&client, &project_id).await;
        let padding = padding.clone();
        tasks.push(tokio::spawn(async move {
            client
                .call_raw(
                    "session.rename",
                    json!({"sessionId": session, "title": format!("long {padding}")}),
                )
                .await
                .expect("session.rename");
            let mut status = client.subscribe_daemon().await.expect("daemon.subscribe");
            for r in 0..ENDING_RUNS {
                let tag = format!("s{s}-r{r}");
                let before: Value = client
                    .call_raw("session.get", json!({"sessionId": session}))
                    .await
                    .expect("session.get");
                let after_seq = before["lastSeq"].as_u64().expect("lastSeq");
                let (run, _) = prompt(&client, &session, &tag).await;
                // The run's own `session.status` running, then idle: act on idle at once.
                let mut running = false;
                loop {
                    let event = tokio::time::timeout(Duration::from_secs(30), status.next())
                        .await
                        .expect("the session goes idle in time")
                        .expect("daemon stream open")
                        .expect("daemon event decodes");
                    if let DaemonEventKind::SessionStatus {
                        session_id, status, ..
                    } = event.kind
                        && session_id == session
                    {
                        match status {
                            SessionActivity::Running => running = true,
                            SessionActivity::Idle if running => break,
                            _ => {}
                        }
                    }
                }
                let got: Value = client
                    .call_raw("run.get", json!({"runId": run}))
                    .await
                    .expect("run.get");
                assert_eq!(
                    got["run"]["status"], "done",
                    "{tag}: the session was said idle while its run was {}",
                    got["run"]["status"]
                );
                let marker = format!("checked {tag} {padding}");
                let ends = replay_to_marker(&client, &session, after_seq, &marker, 30)
                    .await
                    .expect("the replay reaches the rename")
                    .iter()
                    .filter(|e| e.kind.ended_run().is_some_and(|r| r.id == run))
                    .count();
                assert_eq!(
                    ends, 1,
                    "{tag}: the run's end before the rename sent once the session was idle"
                );
            }
        }));
    }
    for task in tasks {
        task.await.expect("session task");
    }
}
