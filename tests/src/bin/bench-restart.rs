//! A daemon's start after a crash with prompts still queued: each queued prompt's run is ended
//! (`run.interrupted`) and its prompt joins the conversation before the daemon answers.
//!
//! A store is filled with totemd's own `Store` as a crash leaves it (sessions `running`, every
//! run `running` with its prompt queued), then a real `totemd` is started on it and timed until
//! its socket answers; a fresh store each round, median of 3. The row with no queued prompt is
//! the start's own cost.
//!
//! `cargo run --release -p totem-tests --bin bench-restart [-- PROMPTS]`

use std::path::Path;
use std::time::{Duration, Instant};

use totem_protocol::{
    EventKind, Message, Part, Project, Role, Run, RunStatus, Session, SessionEvent, SessionStatus,
};
use totem_tests::harness::TestDaemon;
use totemd::store::{SessionRecord, Store};

const ROUNDS: usize = 3;

/// A store with `sessions` sessions holding `prompts` queued prompts between them.
fn fill(home: &Path, sessions: usize, prompts: usize) {
    let store = Store::open(&home.join("store")).expect("open the store");
    let project = Project {
        id: "prj_bench".to_string(),
        path: home.display().to_string(),
        name: "bench".to_string(),
        created_at: 1,
        kind: None,
    };
    store.put_project(&project).expect("put_project");
    for s in 0..sessions {
        let id = format!("ses_{s:04}");
        let mut record = SessionRecord {
            session: Session {
                id: id.clone(),
                project_id: project.id.clone(),
                title: "bench".to_string(),
                created_at: 1,
                updated_at: 1,
                last_seq: 0,
                status: SessionStatus::Running,
                message_count: 0,
                parent_id: None,
                usage: None,
            },
            seq_reserved: 0,
        };
        store.put_session(&record, None).expect("put_session");
        let mine = prompts / sessions + usize::from(s < prompts % sessions);
        for i in 0..mine {
            let run = Run {
                id: format!("run_{s:04}_{i:05}"),
                session_id: id.clone(),
                status: RunStatus::Running,
                started_at: 2,
                ended_at: None,
                error: None,
                model: None,
                mode: Some("build".to_string()),
                usage: None,
                prompt_blocked: false,
            };
            let message = Message {
                id: format!("msg_{s:04}_{i:05}"),
                session_id: id.clone(),
                seq: 0,
                role: Role::User,
                run_id: Some(run.id.clone()),
                created_at: 2,
                undone: false,
                compacted: false,
                parts: vec![Part::Text {
                    text: format!("queued prompt {i}"),
                }],
            };
            store
                .append_event(&SessionEvent {
                    session_id: id.clone(),
                    seq: i as u64 + 1,
                    at: 2,
                    kind: EventKind::RunQueued { run, message },
                })
                .expect("run.queued");
        }
        let previous = record.clone();
        record.session.last_seq = mine as u64;
        record.seq_reserved = mine as u64;
        store
            .put_session(&record, Some(&previous))
            .expect("put_session");
    }
    store.persist().expect("persist");
}

fn start(sessions: usize, prompts: usize) -> Duration {
    let mut samples = Vec::new();
    for _ in 0..ROUNDS {
        let home = tempfile::tempdir().expect("temp home");
        fill(home.path(), sessions, prompts);
        let started = Instant::now();
        let mut daemon = TestDaemon::start_in(home.path());
        samples.push(started.elapsed());
        daemon.terminate();
    }
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let prompts: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300);
    println!("# bench-restart (start until the socket answers, median of {ROUNDS})");
    for (sessions, prompts) in [(1, 0), (1, prompts), (10, prompts)] {
        let took = start(sessions, prompts);
        println!(
            "{prompts:>5} queued prompts in {sessions:>2} session(s): {:>9.1} ms",
            took.as_secs_f64() * 1e3
        );
    }
}
