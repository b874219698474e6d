//! Faults of the machine under the real daemon: a full disk (a size-limited tmpfs in a private
//! mount namespace), a damaged journal (bytes flipped in its last batch and in an earlier one, and
//! the file cut inside a batch), a damaged table file (a data block, the index, the file cut),
//! running out of file descriptors (a low RLIMIT_NOFILE), backups,
//! and a home that cannot be written. Each asserts what the user sees and that nothing
//! acknowledged is lost beyond what the disk itself lost.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use totem_client::{Client, ClientError};
use totem_protocol::{ClientCapabilities, ErrorCode, EventKind, SessionEvent};
use totem_tests::harness::{TestDaemon, binary};
use totem_tests::reliability::{
    Echo, add_echo_provider, all_messages, create_session, echo_answer, follow, open_project,
    plain_project, prompt, text_of,
};

/// Whether this machine lets us make a private mount namespace (root, or user namespaces).
fn mount_namespaces() -> bool {
    Command::new("unshare")
        .args(["-m", "--propagation", "private", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A wrapper that runs totemd in a private mount namespace with a tmpfs (`options`) over `home`.
fn on_tmpfs(options: &str, home: &Path) -> Vec<String> {
    assert!(
        mount_namespaces(),
        "this test needs a private mount namespace (`unshare -m`, as root or with user namespaces)"
    );
    let mount = format!("mount -t tmpfs -o {options} totem-test \"$0\" && exec \"$@\"");
    [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        &mount,
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([home.display().to_string()])
    .collect()
}

/// A session in a new project whose provider is the echo server; the server and the project folder
/// live as long as the values returned.
async fn echo_session(daemon: &TestDaemon) -> (Echo, Client, tempfile::TempDir, String) {
    let echo = Echo::start(1, 0).await;
    let client = daemon.client().await;
    add_echo_provider(&client, &echo).await;
    let project = plain_project();
    let project_id = open_project(&client, project.path()).await;
    let session = create_session(&client, &project_id).await;
    (echo, client, project, session)
}

async fn status(client: &Client) -> Value {
    client
        .call_raw("daemon.status", json!({}))
        .await
        .expect("daemon.status")
}

/// Runs the echo prompt `tag` to its end; returns its events.
async fn run(client: &Client, session: &str, tag: &str) -> Vec<SessionEvent> {
    let mut events = client.subscribe(session, 0).await.expect("subscribe");
    let (run_id, _) = prompt(client, session, tag).await;
    follow(&mut events, &run_id, 30).await
}

fn texts(messages: &[totem_protocol::Message]) -> String {
    messages
        .iter()
        .map(|m| text_of(&m.parts))
        .collect::<Vec<_>>()
        .join("\n")
}

// ---- 1. a full disk ----

/// Writes into `path` until the disk is full; returns the file.
fn fill(path: &Path) -> PathBuf {
    use std::io::Write;
    let file = path.join("filler");
    let mut out = std::fs::File::create(&file).expect("create the filler");
    let chunk = vec![7u8; 64 * 1024];
    while out.write_all(&chunk).is_ok() {}
    // The last partial chunk: fill to the byte.
    while out.write_all(&chunk[..512]).is_ok() {}
    let _ = out.sync_all();
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_clearly_keeps_reads_and_writes_again_once_there_is_room() {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("home");
    let socket = dir.path().join("totemd.sock");
    // A 24 MB tmpfs over the home, seen only by totemd (it lives in its own mount namespace).
    let wrapper = on_tmpfs("size=24m", &home);
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let daemon = TestDaemon::start_wrapped(&home, &socket, &wrapper);
    // The home as totemd sees it, through its own root.
    let inside = PathBuf::from(format!("/proc/{}/root", daemon.pid()))
        .join(home.strip_prefix("/").expect("absolute"));
    let (_echo, client, _project, session) = echo_session(&daemon).await;
    let before = run(&client, &session, "one").await;
    assert!(matches!(
        before.last().map(|e| &e.kind),
        Some(EventKind::RunDone { .. })
    ));

    let filler = fill(&inside);
    let store = home.join("store");
    // The next prompt cannot be saved: the user reads why, where, and what to do.
    let attempt = client
        .call_raw(
            "session.prompt",
            json!({"sessionId": session, "text": "Please answer [[two]]", "model": totem_tests::reliability::ECHO_MODEL}),
        )
        .await;
    let said = match attempt {
        Err(ClientError::Rpc { message, .. }) => message,
        Ok(accepted) => {
            let run_id = accepted["runId"].as_str().expect("run id").to_string();
            let mut events = client.subscribe(&session, 0).await.expect("subscribe");
            let events = follow(&mut events, &run_id, 30).await;
            match events.last().map(|e| &e.kind) {
                Some(EventKind::RunFailed { run }) => run.error.clone().unwrap_or_default(),
                other => panic!("a run on a full disk should fail, got {other:?}"),
            }
        }
        Err(e) => panic!("unexpected error: {e}"),
    };
    assert!(
        said.contains("is full")
            && said.contains(store.to_str().expect("utf-8"))
            && said.contains("free"),
        "the error should name the folder, the free space and say the disk is full: {said}"
    );
    assert!(
        said.contains("Free some space"),
        "and say what to do: {said}"
    );

    // Reads keep working, and the status says what is wrong.
    let messages = all_messages(&client, &session)
        .await
        .expect("messages still read");
    assert!(texts(&messages).contains(&echo_answer("one", 1)));
    let full = status(&client).await;
    assert_eq!(full["store"]["state"], "full", "{full}");
    assert!(
        full["store"]["freeBytes"].as_u64().expect("free bytes") < 1024 * 1024,
        "{full}"
    );
    assert!(
        full["store"]["message"]
            .as_str()
            .expect("message")
            .contains("is full")
    );

    // Room again: writing resumes without a restart (the daemon is the same process).
    std::fs::remove_file(&filler).expect("free the space");
    let pid = status(&client).await["pid"].clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = status(&client).await;
        if now["store"]["state"] == "ok" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the store did not write again once there was room: {now}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = run(&client, &session, "three").await;
    assert!(
        matches!(
            after.last().map(|e| &e.kind),
            Some(EventKind::RunDone { .. })
        ),
        "{after:#?}"
    );
    assert_eq!(
        status(&client).await["pid"],
        pid,
        "the daemon was not restarted"
    );
    // Nothing acknowledged was lost.
    let messages = texts(&all_messages(&client, &session).await.expect("messages"));
    assert!(messages.contains(&echo_answer("one", 1)), "{messages}");
    assert!(messages.contains(&echo_answer("three", 1)), "{messages}");
}

/// A run streaming when the disk fills ends when its next write fails: `run.wait` and
/// `runningRuns` say so at once, its followers get the end; once there is room its end is stored
/// (a backup restored elsewhere replays it and `run.get` reads it), without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_when_the_disk_fills_ends_and_its_end_is_stored_once_there_is_room() {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("home");
    let socket = dir.path().join("totemd.sock");
    let wrapper = on_tmpfs("size=24m", &home);
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let daemon = TestDaemon::start_wrapped(&home, &socket, &wrapper);
    let inside = PathBuf::from(format!("/proc/{}/root", daemon.pid()))
        .join(home.strip_prefix("/").expect("absolute"));
    let (echo, client, _project, session) = echo_session(&daemon).await;
    run(&client, &session, "before").await;

    // A slow answer (about 3 s); the disk fills while it streams.
    echo.set(60, 50);
    let mut events = client.subscribe(&session, 0).await.expect("subscribe");
    let (run_id, _) = prompt(&client, &session, "caught").await;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("the run streams")
            .expect("open")
            .expect("decodes");
        if matches!(event.kind, EventKind::PartDelta { .. }) {
            break;
        }
    }
    let filler = fill(&inside);
    let ended = follow(&mut events, &run_id, 30).await;
    let end = ended.last().map(|e| e.kind.clone());
    assert!(
        matches!(&end, Some(EventKind::RunFailed { run }) if run.error.as_deref().unwrap_or("").contains("is full")),
        "the run ends, saying the disk is full: {end:?}"
    );
    // Everyone sees it ended, at once.
    let waited = client
        .call_raw("run.wait", json!({"runId": run_id, "timeoutMs": 2000}))
        .await
        .expect("run.wait");
    assert_eq!(waited["run"]["status"], "failed", "{waited}");
    let full = status(&client).await;
    assert_eq!(full["store"]["state"], "full", "{full}");
    assert_eq!(full["counts"]["runningRuns"], 0, "{full}");

    // Room again: the end is stored without a restart.
    std::fs::remove_file(&filler).expect("free the space");
    let deadline = Instant::now() + Duration::from_secs(10);
    while status(&client).await["store"]["state"] != "ok" {
        assert!(Instant::now() < deadline, "the store did not write again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The store's own copy, read by another daemon: a backup restored in another home.
    let backup = dir.path().join("after-full.backup");
    let totem = |home: &Path, socket: &Path, args: &[&str]| {
        Command::new(binary("totem"))
            .arg("--socket")
            .arg(socket)
            .args(args)
            .env("TOTEM_HOME", home)
            .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("run totem")
    };
    // The watcher stores the held ends within a second of the store writing again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let out = totem(
        &home,
        &socket,
        &["store", "backup", backup.to_str().expect("utf-8")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = dir.path().join("other");
    std::fs::create_dir(&other).expect("other home");
    let out = totem(
        &other,
        &other.join("totemd.sock"),
        &["store", "restore", backup.to_str().expect("utf-8")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let restored = TestDaemon::start_in(&other);
    let reader = restored.client().await;
    let stored = reader
        .call_raw("run.get", json!({"runId": run_id}))
        .await
        .expect("run.get");
    assert_eq!(stored["run"]["status"], "failed", "{stored}");
    let mut replay = reader.subscribe(&session, 0).await.expect("subscribe");
    let replayed = follow(&mut replay, &run_id, 10).await;
    let ends = replayed
        .iter()
        .filter(|e| totem_tests::reliability::ended_run(&e.kind) == Some(run_id.as_str()))
        .count();
    assert_eq!(ends, 1, "one end, stored: {replayed:#?}");
}

// ---- 2. a damaged journal ----

/// A home with one session of three answered prompts, stopped cleanly; returns the session id.
async fn home_with_history(home: &Path) -> String {
    let mut daemon = TestDaemon::start_in(home);
    let (_echo, client, _project, session) = echo_session(&daemon).await;
    for tag in ["alpha", "bravo", "charlie"] {
        run(&client, &session, tag).await;
    }
    drop(client);
    assert!(daemon.terminate(), "totemd stops cleanly");
    // The project folder may go: the store keeps its path only.
    session
}

/// The journal holding the history: the `N.jnl` of the store that holds the second prompt.
fn journal(home: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(home.join("store"))
        .expect("store folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jnl"))
        .find(|p| std::fs::read(p).is_ok_and(|d| d.windows(9).any(|w| w == b"[[bravo]]")))
        .unwrap_or_else(|| panic!("no journal holds the history: {files:?}"))
        .clone()
}

/// Offsets where batches end (just after each end marker's trailer).
fn batch_ends(data: &[u8]) -> Vec<usize> {
    data.windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"FJL\x03")
        .map(|(i, _)| i + 4)
        .collect()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy");
    for entry in std::fs::read_dir(from).expect("read folder") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// Starts totemd on a damaged home and checks what the user is told and what was kept.
async fn opens_and_tells(home: &Path, session: &str, kept: &[&str]) {
    let daemon = TestDaemon::start_in(home);
    let (first, init) = Client::connect(&daemon.socket, "first", ClientCapabilities::default())
        .await
        .expect("the damaged store opens");
    let notice = init.notices.join("\n");
    assert!(
        notice.contains(session),
        "the notice names the session touched: {notice}"
    );
    assert!(
        notice.contains("store.damaged-"),
        "and where the copy is: {notice}"
    );
    assert!(
        notice.contains("UTC"),
        "and when the lost part was written: {notice}"
    );
    let (_second, again) = Client::connect(&daemon.socket, "second", ClientCapabilities::default())
        .await
        .expect("second client");
    assert!(again.notices.is_empty(), "told once: {:?}", again.notices);
    let copies = damaged_copies(home);
    assert_eq!(
        copies.len(),
        1,
        "one copy of the damaged files beside the store"
    );
    let messages = texts(&all_messages(&first, session).await.expect("messages"));
    for tag in kept {
        assert!(
            messages.contains(&echo_answer(tag, 1)),
            "{tag} was kept: {messages}"
        );
    }
    // The store writes again, and `totem doctor` tells it too.
    let projects = first
        .call_raw("project.list", json!({}))
        .await
        .expect("project.list");
    let project_id = projects["items"][0]["id"].as_str().expect("a project");
    create_session(&first, project_id).await;
    let report = doctor(home, &daemon.socket);
    assert!(
        report
            .lines()
            .any(|l| l.contains("repair") && l.contains(session)),
        "doctor tells the repair: {report}"
    );
}

/// What `totem doctor` prints for `home`.
fn doctor(home: &Path, socket: &Path) -> String {
    let doctor = Command::new(binary("totem"))
        .arg("--socket")
        .arg(socket)
        .arg("doctor")
        .env("TOTEM_HOME", home)
        .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("totem doctor");
    String::from_utf8_lossy(&doctor.stdout).into_owned()
}

/// The copies of damaged files beside the store in `home`.
fn damaged_copies(home: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(home)
        .expect("home")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("store.damaged-"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_journal_opens_keeps_every_whole_batch_and_tells_the_user_once() {
    let template = tempfile::tempdir().expect("template home");
    let session = home_with_history(template.path()).await;
    let data = std::fs::read(journal(template.path())).expect("journal bytes");
    let ends = batch_ends(&data);
    assert!(
        ends.len() > 10,
        "the history wrote many batches ({})",
        ends.len()
    );

    // A byte flipped in an earlier batch: the one holding the second prompt's text.
    let case = tempfile::tempdir().expect("case home");
    copy_tree(template.path(), case.path());
    let file = journal(case.path());
    let mut bytes = std::fs::read(&file).expect("read");
    let at = bytes
        .windows(9)
        .position(|w| w == b"[[bravo]]")
        .expect("the second prompt is in the journal");
    bytes[at + 5] ^= 0x20;
    std::fs::write(&file, &bytes).expect("flip");
    opens_and_tells(case.path(), &session, &["alpha", "charlie"]).await;

    // A byte flipped in the last batch.
    let case = tempfile::tempdir().expect("case home");
    copy_tree(template.path(), case.path());
    let file = journal(case.path());
    let mut bytes = std::fs::read(&file).expect("read");
    let last = *ends.last().expect("last end");
    let before = ends[ends.len() - 2];
    bytes[(before + last) / 2] ^= 0xff;
    std::fs::write(&file, &bytes).expect("flip");
    opens_and_tells(case.path(), &session, &["alpha", "bravo", "charlie"]).await;

    // The journal cut in the middle of its last batch: what a crash in the middle of a write
    // leaves. That write was never acknowledged; the store opens without it and without a word,
    // everything before it kept.
    let case = tempfile::tempdir().expect("case home");
    copy_tree(template.path(), case.path());
    let file = journal(case.path());
    let cut = std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .expect("open");
    cut.set_len(((before + last) / 2) as u64).expect("truncate");
    drop(cut);
    let daemon = TestDaemon::start_in(case.path());
    let (client, init) = Client::connect(&daemon.socket, "first", ClientCapabilities::default())
        .await
        .expect("the cut store opens");
    assert!(init.notices.is_empty(), "{:?}", init.notices);
    let messages = texts(&all_messages(&client, &session).await.expect("messages"));
    for tag in ["alpha", "bravo", "charlie"] {
        assert!(messages.contains(&echo_answer(tag, 1)), "{tag}: {messages}");
    }
}

// ---- 2b. a damaged table file ----

/// A home whose store has flushed writes to a table file: one small session ("alpha", "bravo")
/// and one whose long prompts fill more than the store keeps in memory. Returns both session ids
/// and the table files.
async fn home_with_tables(home: &Path) -> (String, String, Vec<PathBuf>) {
    let mut daemon = TestDaemon::start_in(home);
    let (_echo, client, project, small) = echo_session(&daemon).await;
    for tag in ["alpha", "bravo"] {
        run(&client, &small, tag).await;
    }
    let project_id = open_project(&client, project.path()).await;
    let bulk = create_session(&client, &project_id).await;
    let tables = || -> Vec<PathBuf> {
        let keyspaces = home.join("store").join("keyspaces");
        std::fs::read_dir(&keyspaces)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            // Tree 0 is fjall's own (keyspace names and options).
            .filter(|tree| tree.file_name() != "0")
            .flat_map(|tree| {
                std::fs::read_dir(tree.path().join("tables"))
                    .into_iter()
                    .flatten()
            })
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect()
    };
    // The store flushes what it holds in memory to a table file past 4 MiB.
    let filler = "lorem ipsum dolor sit amet ".repeat(40_000);
    for n in 0..8 {
        if !tables().is_empty() {
            break;
        }
        let tag = format!("bulk{n} {filler}");
        run(&client, &bulk, &tag).await;
    }
    // The flush runs in the background.
    let started = Instant::now();
    while tables().is_empty() && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(client);
    assert!(daemon.terminate(), "totemd stops cleanly");
    let found = tables();
    assert!(!found.is_empty(), "the store wrote a table file");
    (small, bulk, found)
}

/// The table file holding the small session's second prompt.
fn table_with(tables: &[PathBuf], needle: &[u8]) -> PathBuf {
    tables
        .iter()
        .find(|p| std::fs::read(p).is_ok_and(|d| d.windows(needle.len()).any(|w| w == needle)))
        .unwrap_or_else(|| panic!("no table file holds {:?}", String::from_utf8_lossy(needle)))
        .clone()
}

/// Starts totemd on a home with a damaged table file: it opens, says so once (and in `totem
/// doctor`), keeps the old store whole beside the new one, reads every session back and writes.
async fn rebuilt_and_told(home: &Path, small: &str, bulk: &str) {
    let daemon = TestDaemon::start_in(home);
    let (first, init) = Client::connect(&daemon.socket, "first", ClientCapabilities::default())
        .await
        .expect("the store with a damaged table file opens");
    let notice = init.notices.join("\n");
    assert!(
        notice.contains("table file"),
        "the notice says what was damaged: {notice}"
    );
    assert!(
        notice.contains("nothing was lost"),
        "and that the journal still held it all: {notice}"
    );
    assert!(
        notice.contains("store.damaged-"),
        "and where the copy is: {notice}"
    );
    let (_second, again) = Client::connect(&daemon.socket, "second", ClientCapabilities::default())
        .await
        .expect("second client");
    assert!(again.notices.is_empty(), "told once: {:?}", again.notices);
    let copies = damaged_copies(home);
    assert_eq!(copies.len(), 1, "one copy beside the store");
    assert!(
        copies[0].join("store").join("keyspaces").is_dir(),
        "the old store is kept whole"
    );

    let messages = texts(&all_messages(&first, small).await.expect("messages"));
    for tag in ["alpha", "bravo"] {
        assert!(
            messages.contains(&echo_answer(tag, 1)),
            "{tag} was kept: {messages}"
        );
    }
    let bulk_messages = all_messages(&first, bulk).await.expect("bulk messages");
    assert!(!bulk_messages.is_empty(), "the long session reads back too");
    // It writes: a prompt in a new session runs to its end and reads back.
    let echo = Echo::start(1, 0).await;
    first
        .call_raw(
            "provider.add",
            json!({"name": "echo", "kind": "ollama", "url": echo.url(), "replace": true,
                   "defaultModel": "echo:latest", "maxRetries": 0}),
        )
        .await
        .expect("the echo provider at its new address");
    let project = plain_project();
    let project_id = open_project(&first, project.path()).await;
    let fresh = create_session(&first, &project_id).await;
    run(&first, &fresh, "charlie").await;
    let messages = texts(&all_messages(&first, &fresh).await.expect("messages"));
    assert!(messages.contains(&echo_answer("charlie", 1)), "{messages}");

    let report = doctor(home, &daemon.socket);
    assert!(
        report
            .lines()
            .any(|l| l.contains("repair") && l.contains("table file")),
        "doctor tells the rebuild: {report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_table_file_is_rebuilt_from_what_can_be_read_and_the_user_is_told_once() {
    let template = tempfile::tempdir().expect("template home");
    let (small, bulk, tables) = home_with_tables(template.path()).await;
    let table = table_with(&tables, b"[[bravo]]");
    let relative = table
        .strip_prefix(template.path())
        .expect("inside the home")
        .to_path_buf();
    let len = std::fs::metadata(&table).expect("table").len() as usize;

    // A byte flipped in a data block (the one holding the second prompt), one in the index and
    // meta blocks at the end of the file, and the file cut in half. Each time the journal still
    // holds what the lost blocks held (fjall keeps it until 64 MB more have been written), so
    // nothing is lost; the unit tests of the store cover blocks that only the table held.
    type Damage = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: [(&str, Damage); 3] = [
        (
            "data block",
            Box::new(|bytes: &mut Vec<u8>| {
                let at = bytes
                    .windows(9)
                    .position(|w| w == b"[[bravo]]")
                    .expect("bravo");
                bytes[at + 4] ^= 0x20;
            }),
        ),
        (
            "index and meta",
            Box::new(move |bytes: &mut Vec<u8>| bytes[len - 300] ^= 0xff),
        ),
        (
            "cut",
            Box::new(move |bytes: &mut Vec<u8>| bytes.truncate(len / 2)),
        ),
    ];
    for (what, damage) in cases {
        let case = tempfile::tempdir().expect("case home");
        copy_tree(template.path(), case.path());
        let file = case.path().join(&relative);
        let mut bytes = std::fs::read(&file).expect("read");
        damage(&mut bytes);
        std::fs::write(&file, &bytes).expect("damage");
        eprintln!("case: {what}");
        rebuilt_and_told(case.path(), &small, &bulk).await;
    }
}

/// A journal cut at a batch boundary, or zeroed from one on, reads as whole (a power cut, a disk
/// that loses writes): the marks of what was stored, kept outside the journal, find the sessions
/// that lost their last events, and the user is told once, at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_cut_or_zeroed_at_a_batch_boundary_is_reported_at_start() {
    for zeroed in [false, true] {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = dir.path().join("home");
        let session = home_with_history(&home).await;
        let file = journal(&home);
        let mut data = std::fs::read(&file).expect("journal");
        // Alpha's and bravo's batches stay whole; charlie's prompt and answer go.
        let charlie = data
            .windows(11)
            .position(|w| w == b"[[charlie]]")
            .expect("charlie's prompt in the journal");
        let cut = batch_ends(&data)
            .into_iter()
            .rev()
            .find(|&end| end <= charlie)
            .expect("a batch before charlie's");
        if zeroed {
            data[cut..].fill(0);
        } else {
            data.truncate(cut);
        }
        std::fs::write(&file, &data).expect("damage the journal");

        let daemon = TestDaemon::start_in(&home);
        let (first, init) = Client::connect(&daemon.socket, "first", ClientCapabilities::default())
            .await
            .expect("the store opens");
        let notice = init.notices.join("\n");
        assert!(
            notice.contains("lost the end") && notice.contains(&session),
            "zeroed={zeroed}: the first client is told which session lost its end: {notice}"
        );
        let (_second, again) =
            Client::connect(&daemon.socket, "second", ClientCapabilities::default())
                .await
                .expect("second client");
        assert!(again.notices.is_empty(), "told once: {:?}", again.notices);
        assert!(
            status(&first).await["store"]["repaired"]
                .as_str()
                .unwrap_or("")
                .contains(&session),
            "daemon.status says it too"
        );
        let report = doctor(&home, &daemon.socket);
        assert!(
            report
                .lines()
                .any(|l| l.contains("lost the end") && l.contains(&session)),
            "doctor tells it: {report}"
        );
        let messages = texts(&all_messages(&first, &session).await.expect("messages"));
        assert!(messages.contains(&echo_answer("bravo", 1)), "{messages}");
        assert!(!messages.contains(&echo_answer("charlie", 1)), "{messages}");
    }
}

// ---- 3. out of file descriptors ----

/// Connects to a daemon that cannot take the client: it must be told why at once, in one line.
async fn refused_at_once(socket: &Path) -> String {
    let started = Instant::now();
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        Client::connect(socket, "late", ClientCapabilities::default()),
    )
    .await
    .expect("a refused client is answered, not left hanging");
    assert!(started.elapsed() < Duration::from_secs(2));
    match refused {
        Err(ClientError::Rpc { code, message, .. }) => {
            assert_eq!(code, ErrorCode::TOO_MANY_CONNECTIONS.0);
            assert!(message.contains("close some Totem clients"), "{message}");
            message
        }
        Ok(_) => panic!("a client the daemon cannot take was served"),
        Err(e) => panic!("expected the one-line refusal, got {e}"),
    }
}

/// The daemon's log so far (after a moment for it to be written).
async fn daemon_log(home: &Path) -> String {
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::read_dir(home.join("logs"))
        .expect("logs")
        .filter_map(|e| e.ok())
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_new_clients_are_told_why_at_once_and_served_again_later() {
    let dir = tempfile::tempdir().expect("temp home");
    let socket = dir.path().join("totemd.sock");
    let daemon =
        TestDaemon::start_wrapped(dir.path(), &socket, &["prlimit", "--nofile=64:64", "--"]);
    let watcher = daemon.client().await;
    let max = status(&watcher).await["counts"]["maxConnections"]
        .as_u64()
        .expect("maxConnections");
    assert!(
        (8..64).contains(&max),
        "a limit of 64 leaves room for some clients: {max}"
    );
    let mut held = Vec::new();
    // The watcher holds one connection.
    for _ in 1..max {
        held.push(daemon.client().await);
    }
    let now = status(&watcher).await;
    assert_eq!(now["counts"]["connections"].as_u64(), Some(max), "{now}");
    // Over the limit: each newcomer is told why at once, never left hanging.
    for _ in 0..5 {
        let message = refused_at_once(&socket).await;
        assert!(message.contains(&format!("limit {max}")), "{message}");
    }
    // Logged once for the burst, not once per client.
    let log = daemon_log(dir.path()).await;
    assert_eq!(log.matches("refusing new connections").count(), 1, "{log}");
    // Clients leave: new ones are served again.
    held.truncate(held.len() - 3);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = daemon.client().await;
    assert!(
        status(&again).await["counts"]["connections"]
            .as_u64()
            .expect("count")
            < max
    );
}

/// The lowest descriptor number a process has free: a limit of that many leaves it none.
fn lowest_free_fd(pid: u32) -> usize {
    let open: std::collections::BTreeSet<usize> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the daemon's descriptors")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    (0..).find(|n| !open.contains(n)).unwrap_or(0)
}

/// Sets a running process's soft open-file limit (the hard one stays).
fn set_nofile(pid: u32, soft: usize) {
    let status = Command::new("prlimit")
        .arg("--pid")
        .arg(pid.to_string())
        .arg(format!("--nofile={soft}:"))
        .status()
        .expect("prlimit");
    assert!(status.success(), "prlimit --nofile={soft}:");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_descriptor_left_the_spare_one_tells_the_newest_client_why() {
    let dir = tempfile::tempdir().expect("temp home");
    let daemon = TestDaemon::start_in(dir.path());
    let watcher = daemon.client().await;
    let before = status(&watcher).await["counts"]["connections"]
        .as_u64()
        .expect("connections");
    // Far below the connection limit, the process itself runs out: every descriptor it may have
    // is in use, so accept fails (EMFILE) until the spare one is let go for the newcomer.
    let pid = daemon.pid();
    set_nofile(pid, lowest_free_fd(pid));
    for _ in 0..3 {
        let message = refused_at_once(&daemon.socket).await;
        assert!(message.contains("no file descriptors left"), "{message}");
        assert!(message.contains("LimitNOFILE"), "{message}");
    }
    // The clients already connected are still served.
    assert_eq!(
        status(&watcher).await["counts"]["connections"].as_u64(),
        Some(before)
    );
    // Room again: the spare was taken back and new clients are served.
    set_nofile(pid, 1024);
    let again = daemon.client().await;
    assert_eq!(
        status(&again).await["counts"]["connections"].as_u64(),
        Some(before + 1)
    );
    let log = daemon_log(dir.path()).await;
    assert_eq!(log.matches("no file descriptors left").count(), 1, "{log}");
}

// ---- 4. backups ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_running_restores_the_same_sessions_and_blobs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("home");
    let socket = home.join("totemd.sock");
    std::fs::create_dir(&home).expect("home");
    let mut daemon = TestDaemon::start_in(&home);
    let (_echo, client, _project, session) = echo_session(&daemon).await;
    run(&client, &session, "kept").await;
    // A blob as the snapshot code stores one: named by the SHA-256 of its bytes.
    let blob = b"the file as it was before the edit\n";
    let id = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(blob))
    };
    let blob_path = home.join("blobs").join(&id[..2]).join(&id[2..]);
    std::fs::create_dir_all(blob_path.parent().expect("folder")).expect("blob folder");
    std::fs::write(&blob_path, blob).expect("blob");

    let totem = |home: &Path, args: &[&str]| {
        Command::new(binary("totem"))
            .arg("--socket")
            .arg(home.join("totemd.sock"))
            .args(args)
            .env("TOTEM_HOME", home)
            .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("run totem")
    };
    let backup = dir.path().join("totem.backup");
    let out = totem(&home, &["store", "backup", backup.to_str().expect("utf-8")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("1 blobs") && said.contains("totem.backup"),
        "{said}"
    );
    let expected = texts(&all_messages(&client, &session).await.expect("messages"));

    // Restoring needs the daemon stopped, and says so.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).expect("other home");
    let mut running = TestDaemon::start_in(&other);
    let refused = totem(
        &other,
        &["store", "restore", backup.to_str().expect("utf-8")],
    );
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("totem daemon stop"));
    assert!(running.terminate());

    // A damaged backup is refused whole; the store is left as it was.
    let damaged = dir.path().join("damaged.backup");
    let mut bytes = std::fs::read(&backup).expect("backup bytes");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&damaged, &bytes).expect("damaged copy");
    let out = totem(
        &other,
        &["store", "restore", damaged.to_str().expect("utf-8")],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a whole Totem backup"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = totem(
        &other,
        &["store", "restore", backup.to_str().expect("utf-8")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(daemon.terminate());
    let restored = TestDaemon::start_in(&other);
    let client = restored.client().await;
    let got = texts(
        &all_messages(&client, &session)
            .await
            .expect("restored messages"),
    );
    assert_eq!(got, expected);
    assert!(got.contains(&echo_answer("kept", 1)));
    assert_eq!(
        std::fs::read(other.join("blobs").join(&id[..2]).join(&id[2..])).expect("restored blob"),
        blob
    );
    let _ = socket;
}

// ---- 5. a home that cannot be written ----

/// Runs totemd (through `wrapper`) until it exits; returns its stderr.
fn start_fails(wrapper: &[&str], home: &Path) -> String {
    let out = totem_tests::harness::spawn_wrapped(wrapper, home, &home.with_extension("sock"))
        .and_then(|child| child.wait_with_output())
        .expect("run totemd");
    assert!(!out.status.success(), "totemd must not start");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_home_that_cannot_be_written_fails_at_start_naming_the_folder_and_the_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A read-only mount.
    let home = dir.path().join("readonly");
    std::fs::create_dir(&home).expect("home");
    let wrapper = on_tmpfs("ro,size=1m", &home);
    let said = start_fails(
        &wrapper.iter().map(String::as_str).collect::<Vec<_>>(),
        &home,
    );
    assert!(
        said.contains(home.to_str().expect("utf-8")) && said.contains("read-only"),
        "{said}"
    );

    // Another owner: the home belongs to someone else and totemd runs as a user who is not root
    // there (a user namespace strips root's override of file permissions).
    let home = dir.path().join("theirs");
    std::fs::create_dir(&home).expect("home");
    std::os::unix::fs::chown(&home, Some(12345), Some(12345)).expect("chown");
    std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let said = start_fails(&["unshare", "-U"], &home);
    assert!(said.contains(home.to_str().expect("utf-8")), "{said}");
    // (Inside the user namespace both the owner and totemd show as the overflow user, so the
    // owner's id is not in the message here; on a real machine it is.)
    assert!(said.contains("permission denied"), "{said}");
}
