//! Provider faults of every class during runs, through the real daemon: refused connection, 429
//! with Retry-After, 5xx, 529, a stream cut mid-way, a malformed line, a slow stream. Each ends
//! the run as documented (retried while nothing has streamed and retries are left, otherwise a
//! failed run whose error names the fault), and the daemon is unharmed: it answers, the session is
//! idle, and the next run in the same session works.

use std::time::{Duration, Instant};

use serde_json::json;
use totem_client::{Client, EventStream};
use totem_protocol::{EventKind, SessionEvent};
use totem_tests::harness::TestDaemon;
use totem_tests::reliability::{answer_text, create_session, follow, open_project, plain_project};
use totem_tests::sim::{Reply, Script, Sim, SimEvent, SimKind};

const MODEL: &str = "flaky/claude-3-5-haiku-20241022";

struct Faults {
    sim: Sim,
    _daemon: TestDaemon,
    client: Client,
    session: String,
    events: EventStream,
    _project: tempfile::TempDir,
}

impl Faults {
    async fn start() -> Faults {
        let sim = Sim::start(SimKind::Anthropic).await;
        let daemon = TestDaemon::start();
        let client = daemon.client().await;
        // One retry, a short idle timeout: each fault class meets its documented end quickly.
        client
            .call_raw(
                "provider.add",
                json!({"name": "flaky", "kind": "anthropic", "url": sim.url(), "key": "k-test",
                       "maxRetries": 1, "timeouts": {"idleSecs": 1}}),
            )
            .await
            .expect("provider.add flaky");
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        client
            .call_raw(
                "provider.add",
                json!({"name": "down", "kind": "anthropic", "key": "k-test", "maxRetries": 0,
                       "url": format!("http://127.0.0.1:{closed}")}),
            )
            .await
            .expect("provider.add down");
        let project = plain_project();
        let project_id = open_project(&client, project.path()).await;
        let session = create_session(&client, &project_id).await;
        let events = client.subscribe(&session, 0).await.expect("subscribe");
        Faults {
            sim,
            _daemon: daemon,
            client,
            session,
            events,
            _project: project,
        }
    }

    /// Runs one prompt with `model` to its end.
    async fn run(&mut self, model: &str) -> Vec<SessionEvent> {
        let accepted = self
            .client
            .call_raw(
                "session.prompt",
                json!({"sessionId": self.session, "text": "go", "model": model}),
            )
            .await
            .expect("session.prompt");
        let run_id = accepted["runId"].as_str().expect("run id").to_string();
        follow(&mut self.events, &run_id, 60).await
    }

    /// The run failed with an error containing `words`; returns that error.
    fn assert_failed(events: &[SessionEvent], words: &str, case: &str) -> String {
        match events.last().map(|e| &e.kind) {
            Some(EventKind::RunFailed { run }) => {
                let error = run.error.clone().unwrap_or_default();
                assert!(
                    error.contains(words),
                    "{case}: the error should say `{words}`: {error}"
                );
                error
            }
            other => panic!("{case}: expected run.failed, got {other:?}"),
        }
    }

    fn assert_done(events: &[SessionEvent], text: &str, case: &str) {
        assert!(
            matches!(
                events.last().map(|e| &e.kind),
                Some(EventKind::RunDone { .. })
            ),
            "{case}: expected run.done, got {:?}",
            events.last()
        );
        assert_eq!(answer_text(events), text, "{case}");
    }

    /// The daemon answers, the session is idle, and a clean run in it succeeds.
    async fn assert_unharmed(&mut self, case: &str) {
        let status = self
            .client
            .call_raw("daemon.status", json!({}))
            .await
            .unwrap_or_else(|e| panic!("{case}: daemon.status failed: {e}"));
        assert!(status.is_object(), "{case}: {status}");
        let session = self
            .client
            .call_raw("session.get", json!({"sessionId": self.session}))
            .await
            .expect("session.get");
        assert_eq!(session["status"], "idle", "{case}: {session}");
        self.sim.push(ok("still fine"));
        let events = self.run(MODEL).await;
        Faults::assert_done(&events, "still fine", &format!("{case}, next run"));
    }
}

fn ok(text: &str) -> Reply {
    Reply::stream([SimEvent::text(text), SimEvent::usage(10, 2)])
}

fn error(status: u16, message: &str, retry_after: Option<&str>) -> Reply {
    Reply::Error {
        status,
        message: message.to_string(),
        code: None,
        retry_after: retry_after.map(str::to_owned),
    }
}

fn faulty(configure: impl FnOnce(&mut Script)) -> Reply {
    let mut script = Script::new([
        SimEvent::text("partial "),
        SimEvent::text("answer "),
        SimEvent::text("never seen"),
        SimEvent::usage(10, 3),
    ]);
    configure(&mut script);
    Reply::Stream(script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_fault_ends_the_run_as_documented_and_harms_nothing() {
    let mut f = Faults::start().await;

    // Refused connection: nothing listens; no retries configured → failed, says where it went.
    let events = f.run("down/claude-3-5-haiku-20241022").await;
    Faults::assert_failed(&events, "cannot reach provider down", "refused connection");
    f.assert_unharmed("refused connection").await;

    // 429 with Retry-After: waited for as asked, then the retry answers.
    let before = f.sim.chat_requests().len();
    f.sim.push(error(
        429,
        "Number of request tokens has exceeded your rate limit",
        Some("1"),
    ));
    f.sim.push(ok("after the wait"));
    let started = Instant::now();
    let events = f.run(MODEL).await;
    Faults::assert_done(&events, "after the wait", "429 with Retry-After");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "Retry-After: 1 was not honoured ({:?})",
        started.elapsed()
    );
    assert_eq!(f.sim.chat_requests().len(), before + 2);
    f.assert_unharmed("429").await;
    // 429 again and again: the retries run out and the run fails saying so.
    f.sim.push(error(429, "rate limited", Some("0")));
    f.sim.push(error(429, "rate limited", Some("0")));
    let events = f.run(MODEL).await;
    Faults::assert_failed(&events, "rate limiting (HTTP 429)", "429 twice");
    f.assert_unharmed("429 twice").await;

    // 5xx: retried with backoff; twice in a row is one more than allowed.
    f.sim.push(error(500, "Internal server error", None));
    f.sim.push(ok("recovered"));
    let events = f.run(MODEL).await;
    Faults::assert_done(&events, "recovered", "500 once");
    f.sim.push(error(503, "Service unavailable", None));
    f.sim.push(error(502, "Bad gateway", None));
    let events = f.run(MODEL).await;
    Faults::assert_failed(&events, "server error (HTTP 502)", "5xx twice");
    f.assert_unharmed("5xx").await;

    // 529 overloaded: as 5xx, named as overload.
    f.sim.push(error(529, "Overloaded", None));
    f.sim.push(ok("less busy now"));
    let events = f.run(MODEL).await;
    Faults::assert_done(&events, "less busy now", "529 once");
    f.sim.push(error(529, "Overloaded", None));
    f.sim.push(error(529, "Overloaded", None));
    let events = f.run(MODEL).await;
    Faults::assert_failed(&events, "overloaded (HTTP 529)", "529 twice");
    f.assert_unharmed("529").await;

    // A stream cut before any output is retried; cut after output it fails and keeps the text.
    f.sim.push(faulty(|s| s.cut_after = Some(0)));
    f.sim.push(ok("second try"));
    let events = f.run(MODEL).await;
    Faults::assert_done(&events, "second try", "cut before output");
    f.sim.push(faulty(|s| s.cut_after = Some(4)));
    let events = f.run(MODEL).await;
    Faults::assert_failed(&events, "broke", "cut mid-way");
    assert!(
        answer_text(&events).starts_with("partial"),
        "what streamed before the cut is kept: {:?}",
        answer_text(&events)
    );
    f.assert_unharmed("cut stream").await;

    // A malformed line after output fails the run and names the fault.
    f.sim.push(faulty(|s| s.malformed_at = Some(4)));
    let events = f.run(MODEL).await;
    Faults::assert_failed(&events, "malformed", "malformed line");
    f.assert_unharmed("malformed line").await;

    // A slow stream: pauses under the idle timeout are waited for; a longer one ends the run.
    let mut slow = Script::new([SimEvent::text("slow "), SimEvent::text("but sure")]);
    slow.delay_ms = 300;
    f.sim.push(Reply::Stream(slow));
    let events = f.run(MODEL).await;
    Faults::assert_done(
        &events,
        "slow but sure",
        "slow stream within the idle timeout",
    );
    // The pause comes before any text, so the one retry is taken and stalls the same way.
    f.sim.push(faulty(|s| s.delay_ms = 1_600));
    f.sim.push(faulty(|s| s.delay_ms = 1_600));
    let started = Instant::now();
    let events = f.run(MODEL).await;
    Faults::assert_failed(&events, "timed out", "stalled stream");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the idle timeout (1 s, twice) ended it: {:?}",
        started.elapsed()
    );
    f.assert_unharmed("slow stream").await;
    assert_eq!(f.sim.pending(), 0, "every scripted reply was used");
}
