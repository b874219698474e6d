//! Soak: clients prompting their own sessions without pause against an echo model while totemd is
//! killed with SIGKILL at random moments and started again, for as long as asked.
//!
//! After every restart it checks what a user would: every prompt the daemon acknowledged and
//! every answer a client saw finished is stored word for word; every answer names its own prompt
//! (no cross-talk); every run acknowledged ends exactly once in the replay, with the status
//! `run.get` gives it; no session is left running; the store opens. It prints what it did and totemd's
//! memory (VmRSS) at the end of each life, and exits with status 1 on the first broken promise,
//! with the seed to replay it.
//!
//! Then one daemon lives for LONG_SECONDS without kills: the clients connect, prompt and leave
//! again and again (half the time in the middle of a run, subscription left open), and the
//! daemon's idle memory (VmRSS and its anonymous part) is printed at its fresh start, after the
//! first round and at the end: what a long life accumulates (issue 37 item 3: within 10 %). Last,
//! a fresh daemon on the store the long life left is measured idle, and again after one round:
//! what of the end state comes with the bigger store and longer histories rather than the life.
//! `SOAK_PRINT_PID=1` prints the long-lived daemon's pid and when its life is over (to sample its
//! `/proc/PID/smaps`); totemd's `TOTEM_MALLOC_REPORT=FILE` logs the allocator's view at each idle
//! sweep; `SOAK_LONG_IDLE_SECS=N` measures the long-lived daemon's idle memory once more after N s
//! without clients (what an idle daemon lets go of later, e.g. the providers' HTTP clients).
//!
//! `cargo run --release -p totem-tests --bin soak [-- SECONDS [CLIENTS [SEED [LONG_SECONDS]]]]`
//! (default 120 s, 4 clients, a seed from the clock, LONG_SECONDS = SECONDS)

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use totem_client::Client;
use totem_protocol::{ClientCapabilities, EventKind, Message, Part};
use totem_tests::harness::{self, TestDaemon};
use totem_tests::reliability::{
    ECHO_MODEL, Echo, Rng, add_echo_provider, all_messages, create_session, echo_answer, ended_run,
    open_project, plain_project, prompt_text, replay_to_marker, text_of,
};

/// Chunks per answer and the pause between them: an answer streams for about 100 ms.
const CHUNKS: usize = 10;
const DELAY_MS: u64 = 10;

/// What one client knows about its session.
#[derive(Default, Clone)]
struct Known {
    /// Prompts the daemon acknowledged: message id → text.
    acknowledged: BTreeMap<String, String>,
    /// Answers seen finished: message id → text.
    finished: BTreeMap<String, String>,
    last_seq: u64,
    runs_done: u64,
    /// Runs a kill caught, as the restarted daemon announced them.
    interrupted: u64,
    /// Runs acknowledged since the last check: each must end exactly once in the replay.
    unchecked: Vec<String>,
    /// The session's last event seen when the last check ended.
    checked_upto: u64,
}

/// One client's life between two kills: prompt, follow the run to its end, again, until the
/// daemon goes away or `stop` is set. Connection errors end the life quietly; a wrong answer is
/// an error.
async fn client_life(
    socket: std::path::PathBuf,
    session: String,
    index: usize,
    mut known: Known,
    stop: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
) -> Result<Known, String> {
    let Ok((client, _)) = Client::connect(
        &socket,
        "totem-soak",
        ClientCapabilities { permissions: true },
    )
    .await
    else {
        return Ok(known);
    };
    let Ok(mut events) = client.subscribe(&session, known.last_seq).await else {
        return Ok(known);
    };
    let mut turn = known.acknowledged.len();
    while !stop.load(Ordering::Relaxed) {
        let tag = format!("c{index}-t{turn}");
        turn += 1;
        let accepted = client
            .call_raw(
                "session.prompt",
                json!({"sessionId": session, "text": prompt_text(&tag),
                       "model": ECHO_MODEL}),
            )
            .await;
        let Ok(accepted) = accepted else {
            return Ok(known);
        };
        let (Some(run_id), Some(message_id)) =
            (accepted["runId"].as_str(), accepted["messageId"].as_str())
        else {
            return Err(format!("session.prompt answered without ids: {accepted}"));
        };
        known
            .acknowledged
            .insert(message_id.to_string(), prompt_text(&tag));
        known.unchecked.push(run_id.to_string());
        let mut answer: Option<(String, String)> = None;
        loop {
            let next = tokio::time::timeout(Duration::from_secs(30), events.next()).await;
            let event = match next {
                Ok(Some(Ok(event))) => event,
                Ok(Some(Err(e))) => return Err(format!("an event did not decode: {e}")),
                Ok(None) => return Ok(known),
                Err(_) => return Err(format!("run {run_id} of session {session} hung for 30 s")),
            };
            known.last_seq = known.last_seq.max(event.seq);
            if cut.load(Ordering::Relaxed) {
                // Gone in the middle of a run, subscription and all: the run goes on without us.
                return Ok(known);
            }
            match &event.kind {
                EventKind::PartDone {
                    run_id: r,
                    message_id,
                    part: Part::Text { text },
                    ..
                } if r == run_id => {
                    let said = text
                        .strip_prefix("answer to ")
                        .and_then(|t| t.split(' ').next());
                    if said != Some(tag.as_str()) {
                        return Err(format!(
                            "session {session} asked [[{tag}]] and got {text:?}: cross-talk"
                        ));
                    }
                    answer = Some((message_id.clone(), text.clone()));
                }
                EventKind::RunInterrupted { .. } => known.interrupted += 1,
                kind if ended_run(kind) == Some(run_id) => {
                    if let EventKind::RunDone { .. } = kind {
                        let Some((id, text)) = answer.take() else {
                            return Err(format!("run {run_id} ended done without an answer"));
                        };
                        if text != echo_answer(&tag, CHUNKS) {
                            return Err(format!("run {run_id} answered {text:?}"));
                        }
                        known.finished.insert(id, text);
                        known.runs_done += 1;
                    } else {
                        return Err(format!("run {run_id} ended as {kind:?}"));
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    Ok(known)
}

/// Every run acknowledged since the last check ends exactly once in the replay, with the status
/// `run.get` gives it (a run stored as ended always has its end event).
async fn check_ends(client: &Client, session: &str, known: &mut Known) -> Result<(), String> {
    let marker = format!("checked {}", known.acknowledged.len());
    let events = replay_to_marker(client, session, known.checked_upto, &marker, 30).await?;
    let mut ends: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in events {
        known.checked_upto = known.checked_upto.max(event.seq);
        if let Some(run) = event.kind.ended_run() {
            ends.entry(run.id.clone())
                .or_default()
                .push(format!("{:?}", run.status));
        }
    }
    for run_id in std::mem::take(&mut known.unchecked) {
        let stored: Value = client
            .call_raw("run.get", json!({"runId": run_id}))
            .await
            .map_err(|e| format!("run.get {run_id}: {e}"))?;
        let status = stored["run"]["status"].as_str().unwrap_or("?").to_string();
        match ends.get(&run_id).map(Vec::as_slice) {
            Some([end]) if end.to_lowercase() == status => {}
            found => {
                return Err(format!(
                    "session {session}: run {run_id} is {status} in run.get, and its ends in the replay are {found:?}"
                ));
            }
        }
    }
    Ok(())
}

/// After a restart: nothing acknowledged or seen finished is lost, every run ended once, and no
/// session is running once the daemon has marked what the kill interrupted.
async fn check(client: &Client, sessions: &[String], known: &mut [Known]) -> Result<(), String> {
    for (session, known) in sessions.iter().zip(known.iter_mut()) {
        check_ends(client, session, known).await?;
        let stored = all_messages(client, session).await?;
        let by_id: BTreeMap<&str, &Message> = stored.iter().map(|m| (m.id.as_str(), m)).collect();
        for (id, text) in known.acknowledged.iter().chain(&known.finished) {
            let Some(message) = by_id.get(id.as_str()) else {
                return Err(format!("session {session}: message {id} was lost"));
            };
            if &text_of(&message.parts) != text {
                return Err(format!(
                    "session {session}: message {id} holds {:?}, not {text:?}",
                    text_of(&message.parts)
                ));
            }
        }
        let status: Value = client
            .call_raw("session.get", json!({"sessionId": session}))
            .await
            .map_err(|e| format!("session.get: {e}"))?;
        if status["status"] != "idle" {
            return Err(format!(
                "session {session} is {} after a restart",
                status["status"]
            ));
        }
    }
    Ok(())
}

/// Every session idle (the runs a disconnect left behind have ended), within 30 s.
async fn wait_idle(client: &Client, sessions: &[String]) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    for session in sessions {
        loop {
            let status: Value = client
                .call_raw("session.get", json!({"sessionId": session}))
                .await
                .map_err(|e| format!("session.get: {e}"))?;
            if status["status"] == "idle" {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "session {session} still runs 30 s after its client left"
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// totemd's memory when idle: VmRSS and its anonymous part (heap, stacks) in KiB, after
/// `SETTLE` without clients (idle sessions are let go, idle blocking threads end after 10 s).
const SETTLE: Duration = Duration::from_secs(12);

async fn idle_rss(daemon: &TestDaemon) -> (u64, u64) {
    tokio::time::sleep(SETTLE).await;
    (
        harness::rss_kib(daemon.pid()),
        harness::status_kib(daemon.pid(), "RssAnon"),
    )
}

/// One life of the clients against `daemon`: they prompt for `life`, then either stop after
/// their current run or (`cut`) leave in the middle of it.
async fn clients_life(
    daemon: &TestDaemon,
    sessions: &[String],
    known: &mut [Known],
    life: Duration,
    cut: bool,
) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let cut_flag = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..sessions.len())
        .map(|i| {
            tokio::spawn(client_life(
                daemon.socket.clone(),
                sessions[i].clone(),
                i,
                known[i].clone(),
                stop.clone(),
                cut_flag.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(life).await;
    stop.store(true, Ordering::Relaxed);
    cut_flag.store(cut, Ordering::Relaxed);
    let mut failure = None;
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await {
            Ok(Ok(k)) => known[i] = k,
            Ok(Err(e)) => failure = Some(e),
            Err(e) => failure = Some(format!("client {i} panicked: {e}")),
        }
    }
    failure.map_or(Ok(()), Err)
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(120);
    let clients: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let mut rng = match args.next().and_then(|a| a.parse().ok()) {
        Some(seed) => Rng(seed),
        None => Rng::from_time(),
    };
    let long_seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(seconds);
    let seed = rng.0;
    println!(
        "# soak: {seconds} s of kills, then {long_seconds} s of one daemon's life, {clients} clients, seed {seed}"
    );

    let home = tempfile::tempdir().expect("temp home");
    let project = plain_project();
    let echo = Echo::start(CHUNKS, DELAY_MS).await;
    let mut daemon = TestDaemon::start_in(home.path());
    let setup = daemon.client().await;
    add_echo_provider(&setup, &echo).await;
    let project_id = open_project(&setup, project.path()).await;
    let mut sessions = Vec::new();
    for _ in 0..clients {
        sessions.push(create_session(&setup, &project_id).await);
    }
    drop(setup);

    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut known = vec![Known::default(); clients];
    let mut kills = 0;
    let mut rss_kib = Vec::new();
    let mut failure = None;
    while Instant::now() < deadline && failure.is_none() {
        let stop = Arc::new(AtomicBool::new(false));
        let never_cut = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..clients)
            .map(|i| {
                tokio::spawn(client_life(
                    daemon.socket.clone(),
                    sessions[i].clone(),
                    i,
                    known[i].clone(),
                    stop.clone(),
                    never_cut.clone(),
                ))
            })
            .collect();
        // A life of 0.2–2 s, then SIGKILL, most likely in the middle of some runs (short lives:
        // hundreds of kills in a few minutes, so a window of 1 in 50 kills is found).
        let life = Duration::from_millis(200 + rng.below(1_800));
        tokio::time::sleep(life.min(deadline.saturating_duration_since(Instant::now()))).await;
        rss_kib.push(harness::rss_kib(daemon.pid()));
        let last_life = Instant::now() >= deadline;
        if last_life {
            stop.store(true, Ordering::Relaxed);
        } else {
            daemon.kill9();
            kills += 1;
        }
        for (i, task) in tasks.into_iter().enumerate() {
            match task.await {
                Ok(Ok(k)) => known[i] = k,
                Ok(Err(e)) => failure = Some(e),
                Err(e) => failure = Some(format!("client {i} panicked: {e}")),
            }
        }
        if failure.is_some() {
            break;
        }
        if !last_life {
            daemon = TestDaemon::start_in(home.path());
        }
        let client = daemon.client().await;
        if let Err(e) = check(&client, &sessions, &mut known).await {
            failure = Some(e);
        }
    }
    let mut stopped = failure.is_none() && daemon.terminate();

    // One long life without kills: clients come and go (half the time in the middle of a run,
    // leaving their subscription behind) against the same daemon. Its idle memory at the end is
    // compared with a fresh start's, and with the same daemon's after one round of runs (by then
    // the code a run needs is paged in, so what differs later is what its life accumulated).
    let mut memory = None;
    let mut end_long_idle = None;
    let mut end_store_fresh = None;
    if stopped && long_seconds > 0 {
        daemon = TestDaemon::start_in(home.path());
        if std::env::var_os("SOAK_PRINT_PID").is_some() {
            println!("long-lived totemd pid {}", daemon.pid());
        }
        let fresh = idle_rss(&daemon).await;
        let result = async {
            clients_life(
                &daemon,
                &sessions,
                &mut known,
                Duration::from_secs(1),
                false,
            )
            .await?;
            let client = daemon.client().await;
            check(&client, &sessions, &mut known).await?;
            drop(client);
            let warm = idle_rss(&daemon).await;
            let long_deadline = Instant::now() + Duration::from_secs(long_seconds);
            let mut rounds = 0u64;
            while Instant::now() < long_deadline {
                let life = Duration::from_millis(200 + rng.below(1_800));
                let cut = rng.below(2) == 0;
                clients_life(&daemon, &sessions, &mut known, life, cut).await?;
                let client = daemon.client().await;
                wait_idle(&client, &sessions).await?;
                check(&client, &sessions, &mut known).await?;
                rounds += 1;
            }
            if std::env::var_os("SOAK_PRINT_PID").is_some() {
                println!("long life over, settling");
            }
            let end = idle_rss(&daemon).await;
            // `SOAK_LONG_IDLE_SECS`: the same daemon's idle memory again after that long without
            // clients (what is let go of only after a longer idle, e.g. the providers' HTTP
            // clients after 90 s).
            let long_idle = match std::env::var("SOAK_LONG_IDLE_SECS")
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
            {
                Some(secs) => {
                    tokio::time::sleep(Duration::from_secs(secs).saturating_sub(SETTLE)).await;
                    Some((
                        secs,
                        harness::rss_kib(daemon.pid()),
                        harness::status_kib(daemon.pid(), "RssAnon"),
                    ))
                }
                None => None,
            };
            Ok::<_, String>((warm, end, rounds, long_idle))
        }
        .await;
        match result {
            Ok((warm, end, rounds, long_idle)) => {
                memory = Some((fresh, warm, end, rounds));
                end_long_idle = long_idle;
            }
            Err(e) => failure = Some(e),
        }
        stopped = failure.is_none() && daemon.terminate();
        // A fresh daemon on the store the long life left: what of the end state comes with the
        // data (a bigger store, longer histories), not with the life.
        if stopped {
            daemon = TestDaemon::start_in(home.path());
            let again = idle_rss(&daemon).await;
            // One round on it: what a run costs with histories this long.
            let round = clients_life(
                &daemon,
                &sessions,
                &mut known,
                Duration::from_secs(1),
                false,
            )
            .await;
            let client = daemon.client().await;
            let round = match round {
                Ok(()) => check(&client, &sessions, &mut known).await,
                Err(e) => Err(e),
            };
            drop(client);
            match round {
                Ok(()) => end_store_fresh = Some((again, idle_rss(&daemon).await)),
                Err(e) => failure = Some(e),
            }
            stopped = failure.is_none() && daemon.terminate();
        }
    }

    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "runs finished {}, interrupted by a kill {}, kills {kills}",
        known.iter().map(|k| k.runs_done).sum::<u64>(),
        known.iter().map(|k| k.interrupted).sum::<u64>(),
    );
    println!(
        "messages checked after every restart: {}",
        known
            .iter()
            .map(|k| k.acknowledged.len() + k.finished.len())
            .sum::<usize>()
    );
    if let (Some(first), Some(max)) = (rss_kib.first(), rss_kib.iter().max()) {
        println!(
            "totemd RSS at the end of each killed life: first {:.1} MiB, last {:.1} MiB, max {:.1} MiB",
            mib(*first),
            mib(*rss_kib.last().unwrap_or(first)),
            mib(*max)
        );
    }
    if let Some(((fresh, fresh_anon), (warm, warm_anon), (end, end_anon), rounds)) = memory {
        println!("one daemon's life: {rounds} rounds of clients connecting, prompting and leaving");
        println!(
            "idle RSS, fresh start        {:>6.1} MiB (anonymous {:.1})",
            mib(fresh),
            mib(fresh_anon)
        );
        println!(
            "idle RSS, after one round    {:>6.1} MiB (anonymous {:.1})",
            mib(warm),
            mib(warm_anon)
        );
        println!(
            "idle RSS, at the end         {:>6.1} MiB (anonymous {:.1})",
            mib(end),
            mib(end_anon)
        );
        let ratio = |a: u64, b: u64| (a as f64 / b.max(1) as f64 - 1.0) * 100.0;
        // Issue 37 item 3 names the fresh start; after one round is what the life itself added.
        println!(
            "end vs fresh start           {:>+6.1} %  (anonymous {:+.1} %; target within 10 %: {})",
            ratio(end, fresh),
            ratio(end_anon, fresh_anon),
            if ratio(end, fresh) <= 10.0 {
                "met"
            } else {
                "missed"
            }
        );
        println!(
            "end vs after one round       {:>+6.1} %  (anonymous {:+.1} %)",
            ratio(end, warm),
            ratio(end_anon, warm_anon)
        );
        if let Some((secs, long, long_anon)) = end_long_idle {
            println!(
                "idle RSS, at the end after {secs} s {:>6.1} MiB (anonymous {:.1}); vs fresh start {:+.1} %",
                mib(long),
                mib(long_anon),
                ratio(long, fresh)
            );
        }
        if let Some(((again, again_anon), (round, round_anon))) = end_store_fresh {
            println!(
                "idle RSS, a fresh daemon on the end's store {:>6.1} MiB (anonymous {:.1}); end vs it {:+.1} %",
                mib(again),
                mib(again_anon),
                ratio(end, again)
            );
            println!(
                "  the same after one round  {:>6.1} MiB (anonymous {:.1}); end vs it {:+.1} %",
                mib(round),
                mib(round_anon),
                ratio(end, round)
            );
        }
    }
    match failure {
        Some(e) => {
            println!("FAILED (seed {seed}): {e}");
            ExitCode::FAILURE
        }
        None if !stopped => {
            println!("FAILED (seed {seed}): totemd did not stop cleanly at the end");
            ExitCode::FAILURE
        }
        None => {
            println!("ok: nothing lost, no cross-talk, no session left running");
            ExitCode::SUCCESS
        }
    }
}
