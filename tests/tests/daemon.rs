//! The daemon end to end: sessions through the socket, event fan-out and replay, many clients,
//! bad input, crashes and restarts, single instance, socket permissions.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use totem_client::{Client, EventStream};
use totem_protocol::{EventKind, SessionEvent};
use totem_tests::harness::TestDaemon;

async fn project(client: &Client, dir: &std::path::Path) -> String {
    let p = client
        .call_raw("project.open", json!({"path": dir}))
        .await
        .unwrap();
    p["id"].as_str().unwrap().to_string()
}

async fn new_session(client: &Client, project_id: &str) -> String {
    let s = client
        .call_raw("session.create", json!({"projectId": project_id}))
        .await
        .unwrap();
    s["id"].as_str().unwrap().to_string()
}

async fn next_event(stream: &mut EventStream) -> SessionEvent {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event within 10 s")
        .expect("stream open")
        .expect("event decodes")
}

/// Events until (and including) the end of a run.
async fn events_until_run_end(stream: &mut EventStream) -> Vec<SessionEvent> {
    let mut out = Vec::new();
    loop {
        let e = next_event(stream).await;
        let end = matches!(
            e.kind,
            EventKind::RunDone { .. } | EventKind::RunFailed { .. } | EventKind::RunAborted { .. }
        );
        out.push(e);
        if end {
            return out;
        }
    }
}

/// A raw line connection, for input no well-behaved client sends.
struct Raw {
    reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    writer: tokio::net::unix::OwnedWriteHalf,
}

impl Raw {
    async fn connect(daemon: &TestDaemon) -> Raw {
        let stream = UnixStream::connect(&daemon.socket).await.unwrap();
        let (r, w) = stream.into_split();
        Raw {
            reader: BufReader::new(r),
            writer: w,
        }
    }

    async fn send(&mut self, bytes: &[u8]) -> Value {
        self.writer.write_all(bytes).await.unwrap();
        self.writer.write_all(b"\n").await.unwrap();
        self.read().await
    }

    async fn read(&mut self) -> Value {
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(10), self.reader.read_line(&mut line))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {line}"))
    }

    async fn init(&mut self) {
        let r = self
            .send(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"client":{"name":"raw","version":"0"}}}"#)
            .await;
        assert_eq!(r["result"]["protocolVersion"], 1, "{r}");
    }
}

#[tokio::test]
async fn sessions_create_list_get_rename_delete() {
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    let dir = tempfile::tempdir().unwrap();
    let pid = project(&client, dir.path()).await;
    // Opening the same folder again, even spelled differently, finds the same project.
    let again = client
        .call_raw(
            "project.open",
            json!({"path": format!("{}/./", dir.path().display())}),
        )
        .await
        .unwrap();
    assert_eq!(again["id"], pid.as_str());

    let a = new_session(&client, &pid).await;
    let b = new_session(&client, &pid).await;
    let list = client
        .call_raw("session.list", json!({"projectId": pid}))
        .await
        .unwrap();
    let ids: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [b.as_str(), a.as_str()], "newest first");

    let renamed = client
        .call_raw(
            "session.rename",
            json!({"sessionId": a, "title": "Fix the router"}),
        )
        .await
        .unwrap();
    assert_eq!(renamed["title"], "Fix the router");
    let got = client
        .call_raw("session.get", json!({"sessionId": a}))
        .await
        .unwrap();
    assert_eq!(got["title"], "Fix the router");
    // A rename is activity: the renamed session is now the newest.
    let list = client
        .call_raw("session.list", json!({"projectId": pid, "limit": 1}))
        .await
        .unwrap();
    assert_eq!(list["items"][0]["id"], a.as_str());
    assert!(list["nextCursor"].is_string());
    let page2 = client
        .call_raw(
            "session.list",
            json!({"projectId": pid, "limit": 1, "cursor": list["nextCursor"]}),
        )
        .await
        .unwrap();
    assert_eq!(page2["items"][0]["id"], b.as_str());
    assert!(page2.get("nextCursor").is_none());

    client
        .call_raw("session.delete", json!({"sessionId": a}))
        .await
        .unwrap();
    let err = client
        .call_raw("session.get", json!({"sessionId": a}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(-32004), "{err}");
    let list = client.call_raw("session.list", json!({})).await.unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let status = client.call_raw("daemon.status", json!({})).await.unwrap();
    assert_eq!(status["counts"]["sessions"], 1);
    assert_eq!(status["counts"]["projects"], 1);
}

#[tokio::test]
async fn prompt_stores_the_message_and_ends_the_run_with_a_clear_event() {
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    let dir = tempfile::tempdir().unwrap();
    let pid = project(&client, dir.path()).await;
    let sid = new_session(&client, &pid).await;
    let mut events = client.subscribe(&sid, 0).await.unwrap();
    let accepted = client
        .call_raw("session.prompt", json!({"sessionId": sid, "text": "hello"}))
        .await
        .unwrap();
    let got = events_until_run_end(&mut events).await;
    // The prompt is stored as queued, then joins the conversation as its run starts.
    match &got[0].kind {
        EventKind::RunQueued { run, message } => {
            assert_eq!(run.id, accepted["runId"].as_str().unwrap());
            assert_eq!(message.id, accepted["messageId"].as_str().unwrap());
        }
        other => panic!("first event should be the queued run, got {other:?}"),
    }
    let created = got
        .iter()
        .find(|e| matches!(e.kind, EventKind::MessageCreated { .. }))
        .expect("message.created");
    match &created.kind {
        EventKind::MessageCreated { message } => {
            assert_eq!(message.id, accepted["messageId"].as_str().unwrap());
            assert_eq!(message.seq, created.seq);
        }
        _ => unreachable!(),
    }
    let last = got.last().unwrap();
    assert!(
        matches!(&last.kind, EventKind::RunFailed { run } | EventKind::RunDone { run } if run.id == accepted["runId"].as_str().unwrap())
    );
    let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "increasing: {seqs:?}");

    let messages = client
        .call_raw("session.messages", json!({"sessionId": sid}))
        .await
        .unwrap();
    assert_eq!(messages["messages"][0]["parts"][0]["text"], "hello");
}

#[tokio::test]
async fn two_connections_see_the_same_events_in_the_same_order() {
    let daemon = TestDaemon::start();
    let a = daemon.client().await;
    let b = daemon.client().await;
    let dir = tempfile::tempdir().unwrap();
    let pid = project(&a, dir.path()).await;
    let sid = new_session(&a, &pid).await;
    let mut ea = a.subscribe(&sid, 0).await.unwrap();
    let mut eb = b.subscribe(&sid, 0).await.unwrap();
    for i in 0..5 {
        let who = if i % 2 == 0 { &a } else { &b };
        who.call_raw(
            "session.prompt",
            json!({"sessionId": sid, "text": format!("p{i}")}),
        )
        .await
        .unwrap();
    }
    let mut got_a = Vec::new();
    let mut got_b = Vec::new();
    for _ in 0..5 {
        got_a.extend(events_until_run_end(&mut ea).await);
        got_b.extend(events_until_run_end(&mut eb).await);
    }
    assert_eq!(got_a, got_b);
    assert!(got_a.len() >= 15);
}

#[tokio::test]
async fn resubscribing_after_seq_delivers_exactly_the_missed_events() {
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    let dir = tempfile::tempdir().unwrap();
    let pid = project(&client, dir.path()).await;
    let sid = new_session(&client, &pid).await;
    let mut live = client.subscribe(&sid, 0).await.unwrap();
    client
        .call_raw("session.prompt", json!({"sessionId": sid, "text": "one"}))
        .await
        .unwrap();
    let first = events_until_run_end(&mut live).await;
    let seen = first.last().unwrap().seq;
    client.unsubscribe(&live.subscription).await.unwrap();

    // While "away": two more prompts, watched by nobody.
    for text in ["two", "three"] {
        client
            .call_raw("session.prompt", json!({"sessionId": sid, "text": text}))
            .await
            .unwrap();
    }
    // A second client watching all along, to know what was missed.
    let all = {
        let other = daemon.client().await;
        let mut s = other.subscribe(&sid, 0).await.unwrap();
        let mut v = Vec::new();
        for _ in 0..3 {
            v.extend(events_until_run_end(&mut s).await);
        }
        v
    };
    let missed: Vec<_> = all.iter().filter(|e| e.seq > seen).cloned().collect();
    assert!(!missed.is_empty());

    let mut back = client.subscribe(&sid, seen).await.unwrap();
    let mut replayed = Vec::new();
    for _ in 0..2 {
        replayed.extend(events_until_run_end(&mut back).await);
    }
    assert_eq!(replayed, missed);
    // Nothing more is pending: the next event comes only with the next prompt.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), back.next())
            .await
            .is_err()
    );

    // And after a restart, replay comes from the store.
    drop(back);
    drop(client);
}

#[tokio::test]
async fn replay_survives_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (sid, before) = {
        let mut daemon = TestDaemon::start_in(home.path());
        let client = daemon.client().await;
        let pid = project(&client, dir.path()).await;
        let sid = new_session(&client, &pid).await;
        let mut s = client.subscribe(&sid, 0).await.unwrap();
        client
            .call_raw("session.prompt", json!({"sessionId": sid, "text": "x"}))
            .await
            .unwrap();
        let before = events_until_run_end(&mut s).await;
        assert!(daemon.terminate(), "clean exit on SIGTERM");
        (sid, before)
    };
    let daemon = TestDaemon::start_in(home.path());
    let client = daemon.client().await;
    let mut s = client.subscribe(&sid, 0).await.unwrap();
    let after = events_until_run_end(&mut s).await;
    let stored: Vec<_> = before
        .into_iter()
        .filter(|e| !e.kind.is_transient())
        .collect();
    assert_eq!(after, stored);
    // Numbering continues above every number handed out before.
    client
        .call_raw("session.prompt", json!({"sessionId": sid, "text": "y"}))
        .await
        .unwrap();
    let next = events_until_run_end(&mut s).await;
    assert!(next[0].seq > after.last().unwrap().seq);
}

/// A replay from 0 carries the stored events only: no `part.delta` of a finished answer while
/// the daemon that streamed it is up, none after a restart, so both replays read the same. A
/// client that follows a part and catches up mid-stream still gets the deltas it missed (the
/// load tests check that).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_from_0_is_the_stored_events_before_and_after_a_restart() {
    use totem_tests::reliability::{self, Echo};
    let home = tempfile::tempdir().unwrap();
    let project_dir = reliability::plain_project();
    let echo = Echo::start(6, 5).await;
    let mut daemon = TestDaemon::start_in(home.path());
    let client = daemon.client().await;
    reliability::add_echo_provider(&client, &echo).await;
    let pid = project(&client, project_dir.path()).await;
    let sid = new_session(&client, &pid).await;
    let mut live = client.subscribe(&sid, 0).await.unwrap();
    let (run, _) = reliability::prompt(&client, &sid, "streamed").await;
    let streamed = reliability::follow(&mut live, &run, 30).await;
    assert!(
        streamed
            .iter()
            .any(|e| matches!(e.kind, EventKind::PartDelta { .. })),
        "the answer streamed in deltas: {streamed:#?}"
    );
    let stored: Vec<_> = streamed
        .into_iter()
        .filter(|e| !e.kind.is_transient())
        .collect();

    let mut replay = client.subscribe(&sid, 0).await.unwrap();
    let before = reliability::follow(&mut replay, &run, 10).await;
    assert_eq!(before, stored, "the replay while up holds no delta");
    drop(client);
    assert!(daemon.terminate(), "clean exit on SIGTERM");

    let daemon = TestDaemon::start_in(home.path());
    let client = daemon.client().await;
    let mut replay = client.subscribe(&sid, 0).await.unwrap();
    let after = reliability::follow(&mut replay, &run, 10).await;
    assert_eq!(after, before, "the same replay after a restart");
}

#[tokio::test]
async fn fifty_concurrent_connections_make_mixed_calls_without_error() {
    let daemon = TestDaemon::start();
    let dir = tempfile::tempdir().unwrap();
    let mut tasks = Vec::new();
    for i in 0..50 {
        let client = daemon.client().await;
        let path = dir.path().to_path_buf();
        tasks.push(tokio::spawn(async move {
            let pid = project(&client, &path).await;
            let sid = new_session(&client, &pid).await;
            let mut events = client.subscribe(&sid, 0).await.unwrap();
            for j in 0..5 {
                client.call_raw("daemon.status", json!({})).await.unwrap();
                client
                    .call_raw("session.get", json!({"sessionId": sid}))
                    .await
                    .unwrap();
                client
                    .call_raw(
                        "session.prompt",
                        json!({"sessionId": sid, "text": format!("{i}-{j}")}),
                    )
                    .await
                    .unwrap();
                client
                    .call_raw("session.list", json!({"projectId": pid, "limit": 5}))
                    .await
                    .unwrap();
            }
            for _ in 0..5 {
                let got = events_until_run_end(&mut events).await;
                assert!(got.iter().all(|e| e.session_id == sid), "no cross-talk");
            }
            sid
        }));
    }
    let mut sids = std::collections::HashSet::new();
    for t in tasks {
        sids.insert(t.await.unwrap());
    }
    assert_eq!(sids.len(), 50);
}

#[tokio::test]
async fn bad_input_is_answered_and_the_daemon_keeps_serving() {
    let daemon = TestDaemon::start();
    let bystander = daemon.client().await;
    let mut raw = Raw::connect(&daemon).await;

    // Before initialize, only initialize is served.
    let r = raw
        .send(br#"{"jsonrpc":"2.0","id":1,"method":"daemon.status"}"#)
        .await;
    assert_eq!(r["error"]["code"], -32002, "{r}");
    let r = raw
        .send(br#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":99,"client":{"name":"x","version":"0"}}}"#)
        .await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    assert_eq!(r["error"]["data"]["supported"], json!([1]));
    assert!(r["error"]["message"].as_str().unwrap().contains("[1]"));
    raw.init().await;

    let cases: Vec<(&[u8], i64)> = vec![
        (b"{not json", -32700),
        (b"\xff\xfe\xfd", -32700),
        (br#"[{"jsonrpc":"2.0","id":3,"method":"daemon.status"}]"#, -32600),
        (br#"{"jsonrpc":"2.0","id":4,"method":"no.such"}"#, -32601),
        (br#"{"jsonrpc":"2.0","id":5,"method":"session.get","params":{"sessionId":5}}"#, -32602),
        (br#"{"jsonrpc":"2.0","id":6,"method":"session.get","params":{"sessionId":"x","extra":1}}"#, -32602),
        (br#"{"jsonrpc":"2.0","id":7,"method":"session.get","params":["x"]}"#, -32602),
        (br#"{"jsonrpc":"2.0","id":8,"method":"project.open","params":{"path":"relative/dir"}}"#, -32005),
        (br#"{"jsonrpc":"2.0","id":9,"method":"session.list","params":{"cursor":"zz"}}"#, -32602),
        (br#""just a string""#, -32600),
    ];
    for (line, code) in cases {
        let r = raw.send(line).await;
        assert_eq!(
            r["error"]["code"],
            code,
            "for {:?}: {r}",
            String::from_utf8_lossy(line)
        );
        assert!(!r["error"]["message"].as_str().unwrap().is_empty());
        // The same connection still works after each.
        let ok = raw
            .send(br#"{"jsonrpc":"2.0","id":100,"method":"daemon.status"}"#)
            .await;
        assert_eq!(ok["id"], 100, "{ok}");
        assert!(ok["result"]["pid"].is_number());
    }
    // And other connections were never disturbed.
    bystander
        .call_raw("daemon.status", json!({}))
        .await
        .unwrap();
}

#[tokio::test]
async fn initialize_ignores_capabilities_it_does_not_know_and_other_params_stay_strict() {
    let daemon = TestDaemon::start();
    // A newer client with a capability this daemon has never heard of is still served.
    let mut raw = Raw::connect(&daemon).await;
    let r = raw
        .send(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"client":{"name":"newer","version":"9"},"capabilities":{"approvals":true,"permissions":true}}}"#)
        .await;
    assert_eq!(r["result"]["protocolVersion"], 1, "{r}");
    let ok = raw
        .send(br#"{"jsonrpc":"2.0","id":2,"method":"daemon.status"}"#)
        .await;
    assert!(ok["result"]["pid"].is_number(), "{ok}");
    // Anywhere else an unknown field is still a mistake.
    let mut raw = Raw::connect(&daemon).await;
    let r = raw
        .send(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"client":{"name":"x","version":"0"},"capabilites":{}}}"#)
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("capabilites"),
        "{r}"
    );
}

#[tokio::test]
async fn a_line_over_16_mib_is_refused_and_the_connection_stays_usable() {
    let daemon = TestDaemon::start();
    let mut raw = Raw::connect(&daemon).await;
    raw.init().await;
    let mut huge = br#"{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{"x":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', 17 * 1024 * 1024));
    huge.extend(br#""}}"#);
    let r = raw.send(&huge).await;
    assert_eq!(r["error"]["code"], -32003, "{r}");
    let ok = raw
        .send(br#"{"jsonrpc":"2.0","id":2,"method":"daemon.status"}"#)
        .await;
    assert_eq!(ok["id"], 2);
    let other = daemon.client().await;
    other.call_raw("daemon.status", json!({})).await.unwrap();
}

#[tokio::test]
async fn kill_9_during_writes_loses_no_acknowledged_write() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = TestDaemon::start_in(home.path());
    let client = daemon.client().await;
    let pid = project(&client, dir.path()).await;
    let sid = new_session(&client, &pid).await;

    let writer = {
        let client = client.clone();
        let sid = sid.clone();
        tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for i in 0..100_000 {
                match client
                    .call_raw(
                        "session.prompt",
                        json!({"sessionId": sid, "text": format!("w{i}")}),
                    )
                    .await
                {
                    Ok(r) => acknowledged.push(r["messageId"].as_str().unwrap().to_string()),
                    Err(_) => break,
                }
            }
            acknowledged
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    daemon.kill9();
    let acknowledged = writer.await.unwrap();
    assert!(
        acknowledged.len() > 10,
        "writes were happening: {}",
        acknowledged.len()
    );

    let daemon = TestDaemon::start_in(home.path());
    let client = daemon.client().await;
    let mut stored = std::collections::HashSet::new();
    let mut after = 0;
    loop {
        let page = client
            .call_raw(
                "session.messages",
                json!({"sessionId": sid, "afterSeq": after, "limit": 1000}),
            )
            .await
            .unwrap();
        for m in page["messages"].as_array().unwrap() {
            stored.insert(m["id"].as_str().unwrap().to_string());
        }
        match page["nextAfterSeq"].as_u64() {
            Some(n) => after = n,
            None => break,
        }
    }
    for id in &acknowledged {
        assert!(stored.contains(id), "acknowledged message {id} lost");
    }
}

#[tokio::test]
async fn a_second_daemon_on_the_same_home_refuses_with_a_clear_message() {
    let daemon = TestDaemon::start();
    let other_socket = daemon.home.join("second.sock");
    let out = std::process::Command::new(totem_tests::harness::binary("totemd"))
        .arg("--home")
        .arg(&daemon.home)
        .arg("--socket")
        .arg(&other_socket)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another totemd already runs"), "{err}");
    assert!(err.contains(&format!("pid {}", daemon.pid())), "{err}");
    assert!(err.contains("totem daemon stop"), "{err}");
    // The first one is unharmed.
    daemon
        .client()
        .await
        .call_raw("daemon.status", json!({}))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_second_daemon_on_a_live_socket_refuses() {
    let daemon = TestDaemon::start();
    let home2 = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(totem_tests::harness::binary("totemd"))
        .arg("--home")
        .arg(home2.path())
        .arg("--socket")
        .arg(&daemon.socket)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already answers"), "{err}");
    daemon
        .client()
        .await
        .call_raw("daemon.status", json!({}))
        .await
        .unwrap();
}

#[tokio::test]
async fn socket_is_0600_in_a_0700_folder_and_a_stale_socket_is_replaced() {
    let home = tempfile::tempdir().unwrap();
    let socket_dir = home.path().join("run");
    std::fs::create_dir_all(&socket_dir).unwrap();
    std::fs::set_permissions(&socket_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = socket_dir.join("totemd.sock");
    // A stale socket: bound once, its owner gone.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());

    let mut child = totem_tests::harness::spawn(home.path(), &socket).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "daemon did not replace the stale socket"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(&socket_dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn daemon_shutdown_answers_then_stops_and_removes_its_socket() {
    let mut daemon = TestDaemon::start();
    let client = daemon.client().await;
    client.call_raw("daemon.shutdown", json!({})).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while daemon.socket.exists() {
        assert!(std::time::Instant::now() < deadline, "socket still there");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(daemon.terminate() || !daemon.socket.exists());
    let logs = std::fs::read_dir(daemon.home.join("logs")).unwrap().count();
    assert!(logs >= 1, "a log file is written under TOTEM_HOME/logs");
}

#[tokio::test]
async fn deleting_a_session_ends_its_subscriptions() {
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    let dir = tempfile::tempdir().unwrap();
    let pid = project(&client, dir.path()).await;
    let sid = new_session(&client, &pid).await;
    let mut events = client.subscribe(&sid, 0).await.unwrap();
    client
        .call_raw("session.delete", json!({"sessionId": sid}))
        .await
        .unwrap();
    let e = next_event(&mut events).await;
    assert!(matches!(e.kind, EventKind::SessionDeleted {}), "{e:?}");
    let err = client.subscribe(&sid, 0).await.err().unwrap();
    assert_eq!(err.code(), Some(-32004));
}

#[tokio::test]
async fn ids_too_long_or_of_the_wrong_type_get_an_answer() {
    let daemon = TestDaemon::start();
    let mut raw = Raw::connect(&daemon).await;
    raw.init().await;
    let long = "s".repeat(70_000);
    for method in ["session.get", "session.messages", "session.delete"] {
        let line =
            json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": {"sessionId": long}});
        let r = raw.send(line.to_string().as_bytes()).await;
        assert_eq!(r["error"]["code"], -32004, "{method}: {r}");
        assert_eq!(r["id"], 7);
    }
    for id in [
        "1.5",
        "true",
        "{}",
        "[1]",
        "123456789012345678901234567890",
        "1e400",
        "-1e400",
    ] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"daemon.status"}}"#);
        let r = raw.send(line.as_bytes()).await;
        assert_eq!(r["error"]["code"], -32600, "id {id}: {r}");
        assert!(r["id"].is_null(), "id {id}: {r}");
    }
    // Still serving.
    let r = raw
        .send(br#"{"jsonrpc":"2.0","id":8,"method":"daemon.status"}"#)
        .await;
    assert!(r["result"]["pid"].is_number(), "{r}");
}

#[test]
fn the_home_is_made_private_and_its_temp_folder_emptied_at_start() {
    let home = tempfile::tempdir().unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for dir in ["store", "blobs", "logs", "tmp"] {
        std::fs::create_dir_all(home.path().join(dir)).unwrap();
        std::fs::set_permissions(
            home.path().join(dir),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let blob = home.path().join("blobs/old-blob");
    std::fs::write(&blob, "transcript").unwrap();
    std::fs::set_permissions(&blob, std::fs::Permissions::from_mode(0o644)).unwrap();
    // What a write killed half-way left behind.
    std::fs::write(home.path().join("tmp/write-1-0.tmp"), vec![0u8; 2 << 20]).unwrap();

    let daemon = TestDaemon::start_in(home.path());
    assert_eq!(mode(home.path()), 0o700);
    for dir in ["store", "blobs", "logs", "tmp"] {
        assert_eq!(mode(&home.path().join(dir)), 0o700, "{dir}");
    }
    assert_eq!(mode(&blob), 0o600);
    assert!(!home.path().join("tmp/write-1-0.tmp").exists());
    drop(daemon);
}

/// The daemon's log files, joined.
fn daemon_log(daemon: &TestDaemon) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(daemon.home.join("logs")).unwrap() {
        all.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default());
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_is_dropped_at_a_few_mib_and_the_memory_comes_back() {
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    let dir = tempfile::tempdir().unwrap();
    let pid = project(&client, dir.path()).await;
    let sid = new_session(&client, &pid).await;
    // A session whose messages weigh 256 KB: each `session.messages` answer is that big.
    let text = "x".repeat(256 << 10);
    let mut events = client.subscribe(&sid, 0).await.unwrap();
    client
        .call_raw("session.prompt", json!({"sessionId": sid, "text": text}))
        .await
        .unwrap();
    events_until_run_end(&mut events).await;
    let messages = json!({"jsonrpc": "2.0", "id": 1, "method": "session.messages",
                          "params": {"sessionId": sid}})
    .to_string();
    // Warm: one reading client gets its answer (what the daemon keeps once it served one).
    let mut reader = Raw::connect(&daemon).await;
    reader.init().await;
    let r = reader.send(messages.as_bytes()).await;
    assert!(
        r["result"]["messages"].is_array(),
        "{}",
        &r.to_string()[..200]
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = totem_tests::harness::rss_kib(daemon.pid());

    // A client that asks for 400 answers (100 MB) and never reads.
    let mut silent = Raw::connect(&daemon).await;
    silent.init().await;
    let mut batch = String::new();
    for _ in 0..400 {
        batch.push_str(&messages);
        batch.push('\n');
    }
    let writer = tokio::spawn(async move {
        // The daemon stops reading it once its budget is full; the write may never finish.
        let _ = silent.writer.write_all(batch.as_bytes()).await;
        silent
    });
    // The daemon drops it and says why in its log.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut peak = 0;
    while !daemon_log(&daemon).contains("dropping a connection: its client does not read") {
        peak = peak.max(totem_tests::harness::rss_kib(daemon.pid()));
        assert!(
            std::time::Instant::now() < deadline,
            "the silent client was not dropped; log:\n{}",
            daemon_log(&daemon)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut silent = tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the dropped client's writes end")
        .unwrap();
    // Its socket holds what was written before the drop, then the reason, then the end (a
    // reset: the daemon closed it with requests unread).
    let mut rest = Vec::new();
    let end = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncReadExt::read_to_end(&mut silent.reader, &mut rest),
    )
    .await
    .expect("the connection closes");
    if let Err(e) = end {
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
    }
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        rest.len() < 16 << 20,
        "at most the budget and the socket's buffer went out: {} bytes",
        rest.len()
    );
    if let Some(last) = rest.lines().rfind(|l| l.contains("\"error\"")) {
        let error: Value = serde_json::from_str(last).unwrap();
        assert_eq!(error["error"]["code"], -32021, "{error}");
    }
    // The memory comes back, and the daemon serves the reading client as before.
    let r = reader.send(messages.as_bytes()).await;
    assert!(r["result"]["messages"].is_array());
    let mut after = 0;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = totem_tests::harness::rss_kib(daemon.pid());
        if after < before + (8 << 10) {
            break;
        }
    }
    eprintln!(
        "RSS before {} KiB, peak {} KiB, after the drop {} KiB",
        before, peak, after
    );
    assert!(
        peak < before + (48 << 10),
        "bounded while it waited: {before} -> {peak} KiB"
    );
    assert!(
        after < before + (8 << 10),
        "the memory came back: {before} -> {after} KiB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_past_the_limit_get_an_error_and_the_connection_keeps_serving() {
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    let dir = tempfile::tempdir().unwrap();
    let pid = project(&client, dir.path()).await;
    let sid = new_session(&client, &pid).await;
    let mut raw = Raw::connect(&daemon).await;
    raw.init().await;
    let limit = 256;
    let mut lines = String::new();
    for i in 0..limit + 10 {
        lines.push_str(
            &json!({"jsonrpc": "2.0", "id": i + 1, "method": "session.subscribe",
                    "params": {"sessionId": sid, "afterSeq": 0}})
            .to_string(),
        );
        lines.push('\n');
    }
    raw.writer.write_all(lines.as_bytes()).await.unwrap();
    let (mut accepted, mut refused) = (0, 0);
    while accepted + refused < limit + 10 {
        let r = raw.read().await;
        if r["id"].is_null() {
            continue; // a notification
        }
        if r["result"].is_string() {
            accepted += 1;
        } else {
            assert_eq!(r["error"]["code"], -32022, "{r}");
            assert!(
                r["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("unsubscribe")),
                "{r}"
            );
            refused += 1;
        }
    }
    assert_eq!((accepted, refused), (limit, 10));
    // Other calls are still answered on that connection.
    let mut r = raw
        .send(br#"{"jsonrpc":"2.0","id":"after","method":"daemon.status"}"#)
        .await;
    while r["id"] != "after" {
        r = raw.read().await;
    }
    assert!(r["result"]["pid"].is_number(), "{r}");
}
