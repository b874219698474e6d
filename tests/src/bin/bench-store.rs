//! The store: parts appended per second, opening a session of 10,000 messages, listing 1,000
//! sessions.
//!
//! Parts are appended with totemd's own `Store` (the code a run calls): each finished part is
//! stored with its `part.done` event in one batch, as a run stores it. The big session and the 1,000 sessions are
//! written the same way, then a real `totemd` is started on that home and timed over its socket:
//! - opening the session as the REPL does (`session.get`, then a subscription replaying its last
//!   200 events), on a daemon that has not loaded it yet (a new daemon each time) and again once
//!   loaded;
//! - reading all 10,000 messages with `session.messages` (pages of 1,000);
//! - `session.list` of 1,000 sessions (two pages of 500, the largest page it serves).
//!
//! `cargo run --release -p totem-tests --bin bench-store [-- PARTS]`

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use totem_protocol::{
    EventKind, Message, Part, Project, Role, Session, SessionEvent, SessionStatus,
};
use totem_tests::harness::TestDaemon;
use totemd::store::{SessionRecord, Store};

const MESSAGES: u64 = 10_000;
const SESSIONS: usize = 1_000;
/// What the REPL replays when it opens a session (`REPLAY_EVENTS` in totem-cli).
const REPLAY_EVENTS: u64 = 200;
const ROUNDS: usize = 7;

fn session(project_id: &str, id: String, created_at: u64) -> Session {
    Session {
        id,
        project_id: project_id.to_string(),
        title: "bench".to_string(),
        created_at,
        updated_at: created_at,
        last_seq: 0,
        status: SessionStatus::Idle,
        message_count: 0,
        parent_id: None,
        usage: None,
    }
}

fn text(i: u64) -> String {
    format!("Message {i}: the quick brown fox jumps over the lazy dog, and then it reads a file. ")
        .repeat(3)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Appends `parts` parts to one message, each with its `part.done` event (one write each).
fn append_parts(store: &Store, session_id: &str, parts: u32) -> f64 {
    let message_id = "msg_parts".to_string();
    let message = Message {
        id: message_id.clone(),
        session_id: session_id.to_string(),
        seq: 1,
        role: Role::Assistant,
        run_id: None,
        created_at: 1,
        undone: false,
        compacted: false,
        parts: Vec::new(),
    };
    store
        .append_event(&SessionEvent {
            session_id: session_id.to_string(),
            seq: 1,
            at: 1,
            kind: EventKind::MessageCreated { message },
        })
        .expect("message.created");
    let started = Instant::now();
    for index in 0..parts {
        let part = Part::Text {
            text: text(u64::from(index)),
        };
        let event = SessionEvent {
            session_id: session_id.to_string(),
            seq: u64::from(index) + 2,
            at: 1,
            kind: EventKind::PartDone {
                run_id: "run_bench".to_string(),
                message_id: message_id.clone(),
                index,
                part,
            },
        };
        store.append_event(&event).expect("part.done");
    }
    f64::from(parts) / started.elapsed().as_secs_f64()
}

/// A session of `MESSAGES` messages stored as runs store them: `message.created`, then one
/// `part.done` per part (each event writes what it announces to the message tables).
fn big_session(store: &Store, project_id: &str) -> String {
    let mut record = SessionRecord {
        session: session(project_id, "ses_big".to_string(), 2),
        seq_reserved: 0,
    };
    store.put_session(&record, None).expect("put_session");
    let mut seq = 0;
    for i in 0..MESSAGES {
        seq += 1;
        let message_seq = seq;
        let id = format!("msg_big_{i:05}");
        let part = Part::Text { text: text(i) };
        let message = Message {
            id: id.clone(),
            session_id: "ses_big".to_string(),
            seq: message_seq,
            role: if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            run_id: Some(format!("run_{}", i / 2)),
            created_at: 1_000 + i,
            undone: false,
            compacted: false,
            parts: Vec::new(),
        };
        store
            .append_event(&SessionEvent {
                session_id: "ses_big".to_string(),
                seq,
                at: 1_000 + i,
                kind: EventKind::MessageCreated {
                    message: message.clone(),
                },
            })
            .expect("message.created");
        seq += 1;
        store
            .append_event(&SessionEvent {
                session_id: "ses_big".to_string(),
                seq,
                at: 1_000 + i,
                kind: EventKind::PartDone {
                    run_id: format!("run_{}", i / 2),
                    message_id: id,
                    index: 0,
                    part,
                },
            })
            .expect("part.done");
    }
    let previous = record.clone();
    record.session.last_seq = seq;
    record.session.message_count = MESSAGES;
    record.seq_reserved = seq;
    record.session.updated_at = 3;
    store
        .put_session(&record, Some(&previous))
        .expect("put_session");
    "ses_big".to_string()
}

fn fill(home: &Path, parts: u32) -> (String, String) {
    let store = Store::open(&home.join("store")).expect("open the store");
    let project = Project {
        id: "prj_bench".to_string(),
        path: home.display().to_string(),
        name: "bench".to_string(),
        created_at: 1,
        kind: None,
    };
    store.put_project(&project).expect("put_project");
    let scratch = SessionRecord {
        session: session(&project.id, "ses_parts".to_string(), 1),
        seq_reserved: 0,
    };
    store.put_session(&scratch, None).expect("put_session");

    let rate = append_parts(&store, "ses_parts", parts);
    println!("parts appended with part.done (one batch) {rate:>10.0} parts/s  ({parts} parts)");

    let started = Instant::now();
    let big = big_session(&store, &project.id);
    println!(
        "writing the {MESSAGES}-message session     {:>10}",
        ms(started.elapsed())
    );
    // The two sessions above and 998 more make 1,000.
    for i in 0..SESSIONS - 2 {
        let record = SessionRecord {
            session: session(&project.id, format!("ses_{i:04}"), 10 + i as u64),
            seq_reserved: 0,
        };
        store.put_session(&record, None).expect("put_session");
    }
    store.persist().expect("persist");
    (project.id, big)
}

async fn open_as_the_repl(client: &totem_client::Client, session_id: &str) -> Duration {
    let started = Instant::now();
    let session = client
        .call_raw("session.get", json!({"sessionId": session_id}))
        .await
        .expect("session.get");
    let last_seq = session["lastSeq"].as_u64().expect("lastSeq");
    let mut events = client
        .subscribe(session_id, last_seq.saturating_sub(REPLAY_EVENTS))
        .await
        .expect("subscribe");
    let mut replayed = 0;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("replay within 30 s")
            .expect("subscription open")
            .expect("event decodes");
        replayed += 1;
        if event.seq >= last_seq {
            break;
        }
    }
    let took = started.elapsed();
    assert_eq!(replayed, REPLAY_EVENTS, "the replay has the last events");
    let _ = client.unsubscribe(&events.subscription).await;
    took
}

async fn read_all_messages(client: &totem_client::Client, session_id: &str) -> Duration {
    let started = Instant::now();
    let mut after = 0;
    let mut count = 0;
    loop {
        let page: Value = client
            .call_raw(
                "session.messages",
                json!({"sessionId": session_id, "afterSeq": after, "limit": 1000}),
            )
            .await
            .expect("session.messages");
        let messages = page["messages"].as_array().expect("messages");
        count += messages.len() as u64;
        match page["nextAfterSeq"].as_u64() {
            Some(next) => after = next,
            None => break,
        }
    }
    let took = started.elapsed();
    assert_eq!(count, MESSAGES, "every message is read");
    took
}

async fn list_sessions(client: &totem_client::Client, project_id: &str) -> Duration {
    let started = Instant::now();
    let mut cursor = Value::Null;
    let mut listed = 0;
    loop {
        let page = client
            .call_raw(
                "session.list",
                json!({"projectId": project_id, "limit": 500, "cursor": cursor}),
            )
            .await
            .expect("session.list");
        listed += page["items"].as_array().map_or(0, Vec::len);
        cursor = page["nextCursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    let took = started.elapsed();
    assert_eq!(listed, SESSIONS, "every session is listed");
    took
}

#[tokio::main]
async fn main() {
    let parts: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let home = tempfile::tempdir().expect("temp home");
    println!("# bench-store (medians of {ROUNDS} where timed over the socket)");
    let (project_id, big) = fill(home.path(), parts);

    let mut cold = Vec::new();
    let mut warm = Vec::new();
    let mut messages = Vec::new();
    let mut lists = Vec::new();
    for _ in 0..ROUNDS {
        let mut daemon = TestDaemon::start_in(home.path());
        let client = daemon.client().await;
        cold.push(open_as_the_repl(&client, &big).await);
        warm.push(open_as_the_repl(&client, &big).await);
        messages.push(read_all_messages(&client, &big).await);
        lists.push(list_sessions(&client, &project_id).await);
        drop(client);
        daemon.terminate();
    }
    println!(
        "open the {MESSAGES}-message session, new daemon {:>10}  (session.get + {REPLAY_EVENTS}-event replay)",
        ms(median(cold))
    );
    println!(
        "open it again, loaded                 {:>10}",
        ms(median(warm))
    );
    println!(
        "read all {MESSAGES} messages                 {:>10}  (session.messages, pages of 1,000)",
        ms(median(messages))
    );
    println!(
        "list {SESSIONS} sessions                      {:>10}  (session.list, 2 pages of 500)",
        ms(median(lists))
    );
}
