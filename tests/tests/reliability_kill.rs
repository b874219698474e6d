//! `kill -9` of totemd at random moments during streaming runs, then a restart: every message
//! acknowledged or seen finished before the kill is still there, word for word; the run the kill
//! caught is marked interrupted (or done, when it finished unseen); `session.messages` and the
//! replay of the stored events tell the same conversation; the store opens every time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use totem_client::Client;
use totem_protocol::{EventKind, Message, Part};
use totem_tests::harness::TestDaemon;
use totem_tests::reliability;
use totem_tests::reliability::{Echo, Rng, echo_answer, prompt, prompt_text, text_of};

const RUNS: usize = 50;
/// Chunks per answer and the pause between them: a run streams for about 240 ms.
const CHUNKS: usize = 12;
const DELAY_MS: u64 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_streaming_runs_loses_no_finished_message() {
    let home = tempfile::tempdir().expect("home");
    let project = reliability::plain_project();
    let echo = Echo::start(CHUNKS, DELAY_MS).await;
    let mut rng = Rng::from_time();
    let seed = rng.0;

    let mut daemon = TestDaemon::start_in(home.path());
    let client = daemon.client().await;
    reliability::add_echo_provider(&client, &echo).await;
    let project_id = reliability::open_project(&client, project.path()).await;
    let session = reliability::create_session(&client, &project_id).await;
    drop(client);

    // What a client knew before each kill: acknowledged prompts, answers seen finished.
    let mut acknowledged: BTreeMap<String, String> = BTreeMap::new();
    let mut seen_done: BTreeMap<String, String> = BTreeMap::new();
    let (mut done, mut interrupted) = (0, 0);
    let mut last_seq = 0u64;
    for i in 0..RUNS {
        let client = daemon.client().await;
        let mut events = client
            .subscribe(&session, last_seq)
            .await
            .expect("subscribe");
        let tag = format!("run-{i}");
        let (run_id, message_id) = prompt(&client, &session, &tag).await;
        acknowledged.insert(message_id, prompt_text(&tag));
        // Anywhere from right after the acknowledgement to a while after the answer ends.
        let kill_at =
            Instant::now() + Duration::from_millis(rng.below(CHUNKS as u64 * DELAY_MS + 500));
        let mut run_seen_done = false;
        let mut answer_id = None;
        while let Ok(Some(Ok(event))) = tokio::time::timeout_at(kill_at.into(), events.next()).await
        {
            last_seq = last_seq.max(event.seq);
            match &event.kind {
                EventKind::PartDone {
                    run_id: r,
                    message_id,
                    ..
                } if *r == run_id => {
                    answer_id = Some(message_id.clone());
                }
                EventKind::RunDone { run } if run.id == run_id => run_seen_done = true,
                _ => {}
            }
        }
        if run_seen_done {
            let id = answer_id.unwrap_or_else(|| panic!("run {i} ended without an answer"));
            seen_done.insert(id, echo_answer(&tag, CHUNKS));
        }
        daemon.kill9();
        daemon = TestDaemon::start_in(home.path());
        let client = daemon.client().await;
        let stored = reliability::all_messages(&client, &session)
            .await
            .expect("session.messages");
        let by_id: BTreeMap<&str, &totem_protocol::Message> =
            stored.iter().map(|m| (m.id.as_str(), m)).collect();
        for (id, text) in &acknowledged {
            let message = by_id
                .get(id.as_str())
                .unwrap_or_else(|| panic!("seed {seed}, run {i}: acknowledged prompt {id} lost"));
            assert_eq!(&text_of(&message.parts), text, "seed {seed}, run {i}");
        }
        for (id, text) in &seen_done {
            let message = by_id
                .get(id.as_str())
                .unwrap_or_else(|| panic!("seed {seed}, run {i}: finished answer {id} lost"));
            assert_eq!(&text_of(&message.parts), text, "seed {seed}, run {i}");
        }

        // The run ends as done or interrupted, and the session is free again.
        let mut replay = client
            .subscribe(&session, last_seq)
            .await
            .expect("subscribe");
        let end = if run_seen_done {
            "done"
        } else {
            loop {
                let event = tokio::time::timeout(Duration::from_secs(5), replay.next())
                    .await
                    .unwrap_or_else(|_| {
                        panic!("seed {seed}, run {i}: no end recorded for run {run_id}")
                    })
                    .expect("subscription open")
                    .expect("event decodes");
                last_seq = last_seq.max(event.seq);
                match event.kind {
                    EventKind::RunDone { run } if run.id == run_id => break "done",
                    EventKind::RunInterrupted { run } if run.id == run_id => break "interrupted",
                    EventKind::RunFailed { run } | EventKind::RunAborted { run }
                        if run.id == run_id =>
                    {
                        panic!(
                            "seed {seed}, run {i}: ended as {:?}: {:?}",
                            run.status, run.error
                        )
                    }
                    _ => {}
                }
            }
        };
        if end == "done" {
            done += 1;
        } else {
            interrupted += 1;
        }
        let status: Value = client
            .call_raw("session.get", json!({"sessionId": session}))
            .await
            .expect("session.get");
        assert_eq!(status["status"], "idle", "seed {seed}, run {i}: {status}");
        assert_replay_agrees(&client, &session, &format!("seed {seed}, run {i}")).await;
    }
    eprintln!(
        "{RUNS} kills (seed {seed}): {done} runs had finished, {interrupted} were interrupted"
    );
    assert!(
        interrupted > 0,
        "no kill landed during a run: the test proved nothing"
    );
    assert!(
        daemon.terminate(),
        "totemd stops cleanly after {RUNS} crashes"
    );
}

/// The messages the replay of every stored event builds (`message.created`, then each
/// `part.done`) are the ones `session.messages` returns, part for part.
async fn assert_replay_agrees(client: &Client, session: &str, context: &str) {
    let stored = reliability::all_messages(client, session)
        .await
        .expect("session.messages");
    // A rename after the subscription: its `session.updated` comes after the whole replay.
    let events =
        reliability::replay_to_marker(client, session, 0, &format!("replayed {context}"), 5)
            .await
            .unwrap_or_else(|e| panic!("{context}: {e}"));
    let mut order: Vec<String> = Vec::new();
    let mut replayed: BTreeMap<String, (Message, BTreeMap<u32, Part>)> = BTreeMap::new();
    for event in events {
        match event.kind {
            EventKind::MessageCreated { message } => {
                let parts = message.parts.iter().cloned().enumerate();
                let parts = parts.map(|(i, p)| (i as u32, p)).collect();
                order.push(message.id.clone());
                replayed.insert(message.id.clone(), (message, parts));
            }
            EventKind::PartDone {
                message_id,
                index,
                part,
                ..
            } => {
                let (_, parts) = replayed.get_mut(&message_id).unwrap_or_else(|| {
                    panic!("{context}: part.done of {message_id} before its message.created")
                });
                parts.insert(index, part);
            }
            _ => {}
        }
    }
    let ids: Vec<&str> = stored.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, order, "{context}: the same messages in the same order");
    for message in &stored {
        let (created, parts) = &replayed[&message.id];
        assert_eq!(
            (created.seq, created.role),
            (message.seq, message.role),
            "{context}"
        );
        let parts: Vec<Part> = parts.values().cloned().collect();
        assert_eq!(
            parts, message.parts,
            "{context}: message {} has other parts in session.messages than in the replay",
            message.id
        );
    }
}
