//! Running Totem for real: socket activation and readiness as systemd does them, `totem doctor`
//! against a real daemon, and trace-level logs that never contain a provider key.
//!
//! Calls go by method name with JSON (`call_raw`), as any client would.

use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use totem_client::Client;
use totem_protocol::ClientCapabilities;
use totem_tests::harness::{TestDaemon, binary};
use totem_tests::sim::{Reply, Sim, SimEvent, SimKind};

/// Connects and initializes, retrying until totemd answers (or 20 s pass).
async fn connect(socket: &Path) -> Client {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let attempt = tokio::time::timeout(
            Duration::from_secs(5),
            Client::connect(socket, "packaging-tests", ClientCapabilities::default()),
        )
        .await;
        match attempt {
            Ok(Ok((client, _))) => return client,
            _ if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(Err(e)) => panic!("totemd never answered on {}: {e}", socket.display()),
            Err(_) => panic!("totemd never answered on {}", socket.display()),
        }
    }
}

/// SIGTERM, then wait for the exit status (up to 10 s).
fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait for totemd") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("totemd did not stop within 10 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A private folder for a test's sockets and homes (0700, as totemd wants its socket folder).
fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp folder");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    dir
}

fn log_file(dir: &Path) -> std::fs::File {
    std::fs::File::create(dir.join("totemd-output.txt")).expect("output file")
}

#[tokio::test]
async fn totemd_serves_a_socket_inherited_from_systemd() {
    let dir = private_dir();
    let home = dir.path().join("home");
    let socket = dir.path().join("activated.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    // std hands a child descriptors through stdio only: the listener goes in as stdin, and the
    // shell moves it to fd 3 and sets LISTEN_PID to its own pid, which `exec` gives to totemd —
    // what systemd does.
    let script = r#"exec 3<&0 0</dev/null; LISTEN_PID=$$; LISTEN_FDS=1; export LISTEN_PID LISTEN_FDS; exec "$0" --home "$1""#;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(binary("totemd"))
        .arg(&home)
        .env_remove("TOTEM_HOME")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::from(OwnedFd::from(listener)))
        .stdout(Stdio::null())
        .stderr(log_file(dir.path()))
        .spawn()
        .expect("spawn totemd through sh");

    let client = connect(&socket).await;
    let status = client
        .call_raw("daemon.status", json!({}))
        .await
        .expect("daemon.status");
    assert_eq!(status["pid"], json!(child.id()), "{status}");
    assert_eq!(status["socket"], json!(socket), "{status}");
    assert!(
        !home.join("run").join("totemd.sock").exists(),
        "totemd bound a socket of its own besides the inherited one"
    );
    // Sessions work over it like over any socket.
    let project = tempfile::tempdir().expect("project");
    let opened = client
        .call_raw("project.open", json!({"path": project.path()}))
        .await
        .expect("project.open");
    assert!(opened["id"].is_string(), "{opened}");
    drop(client);

    assert!(
        terminate(&mut child).success(),
        "totemd exited with an error"
    );
    assert!(
        socket.exists(),
        "totemd removed the socket systemd owns; the next connection could not start it again"
    );
}

#[tokio::test]
async fn totemd_binds_its_own_socket_when_activation_names_another_process() {
    let dir = private_dir();
    let home = dir.path().join("home");
    let socket = dir.path().join("own.sock");
    // Variables inherited from a parent that was itself socket-activated: not for us.
    let mut child = Command::new(binary("totemd"))
        .arg("--home")
        .arg(&home)
        .arg("--socket")
        .arg(&socket)
        .env("LISTEN_PID", "1")
        .env("LISTEN_FDS", "1")
        .env_remove("TOTEM_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file(dir.path()))
        .spawn()
        .expect("spawn totemd");
    let client = connect(&socket).await;
    let status = client
        .call_raw("daemon.status", json!({}))
        .await
        .expect("daemon.status");
    assert_eq!(status["socket"], json!(socket), "{status}");
    let mode = std::fs::metadata(&socket)
        .expect("socket")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "its own socket is private");
    drop(client);
    assert!(terminate(&mut child).success());
    assert!(!socket.exists(), "its own socket is removed at exit");
}

#[tokio::test]
async fn totemd_tells_systemd_it_is_ready_once_the_socket_answers() {
    let dir = private_dir();
    let home = dir.path().join("home");
    let socket = dir.path().join("notify-test.sock");
    let notify_path = dir.path().join("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).expect("bind notify");
    notify
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut child = Command::new(binary("totemd"))
        .arg("--home")
        .arg(&home)
        .arg("--socket")
        .arg(&socket)
        .env("NOTIFY_SOCKET", &notify_path)
        .env_remove("TOTEM_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file(dir.path()))
        .spawn()
        .expect("spawn totemd");
    let mut buffer = [0u8; 512];
    let n = notify
        .recv(&mut buffer)
        .expect("a notification within 20 s");
    let message = String::from_utf8_lossy(&buffer[..n]).to_string();
    assert!(
        message.lines().any(|l| l == "READY=1"),
        "notification: {message:?}"
    );
    assert!(
        message
            .lines()
            .any(|l| l == format!("MAINPID={}", child.id())),
        "notification: {message:?}"
    );
    // Ready means ready: the socket answers at once.
    assert!(
        std::os::unix::net::UnixStream::connect(&socket).is_ok(),
        "READY=1 came before the socket was bound"
    );
    assert!(terminate(&mut child).success());
}

/// Runs `totem doctor` against `socket` and `home`, with no systemd units in sight, off the
/// test's runtime (which serves the provider simulators meanwhile).
async fn doctor(home: &Path, socket: &Path) -> (Output, String) {
    let mut command = Command::new(binary("totem"));
    command
        .arg("--socket")
        .arg(socket)
        .arg("doctor")
        .env("TOTEM_HOME", home)
        .env("HOME", home)
        .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
        .env_remove("XDG_CONFIG_HOME")
        .stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("run totem doctor");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    (output, text)
}

/// The report line of check `name`.
fn line<'a>(report: &'a str, name: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{report}"))
}

#[tokio::test]
async fn doctor_passes_against_a_healthy_daemon_and_tests_each_provider() {
    let sim = Sim::start(SimKind::Openai).await;
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    client
        .call_raw(
            "provider.add",
            json!({"name": "work", "kind": "openai", "url": sim.url(), "key": "sk-doctor"}),
        )
        .await
        .expect("provider.add");

    let (output, report) = doctor(&daemon.home, &daemon.socket).await;
    assert_eq!(output.status.code(), Some(0), "{report}");
    for name in [
        "home", "secrets", "socket", "daemon", "store", "logs", "rg", "mcp",
    ] {
        let line = line(&report, name);
        assert!(!line.starts_with("fail"), "{line}\n{report}");
    }
    assert!(line(&report, "daemon").starts_with("ok"), "{report}");
    assert!(line(&report, "daemon").contains(&format!("pid {}", daemon.pid())));
    assert!(line(&report, "store").starts_with("ok"), "{report}");
    // These kernels have Landlock: doctor says commands run without asking are confined.
    let sandbox = line(&report, "sandbox");
    assert!(
        sandbox.starts_with("ok") && sandbox.contains("Landlock (ABI"),
        "{report}"
    );
    assert!(line(&report, "socket").starts_with("ok"), "{report}");
    let provider = line(&report, "provider");
    assert!(
        provider.starts_with("ok") && provider.contains("work") && provider.contains("models"),
        "{report}"
    );
    assert!(!report.contains("sk-doctor"), "the key is shown: {report}");
}

#[tokio::test]
async fn doctor_fails_and_says_what_to_fix() {
    // A provider nobody answers for, and settings other users can read.
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    client
        .call_raw(
            "provider.add",
            json!({"name": "gone", "kind": "ollama", "url": "http://127.0.0.1:9", "maxRetries": 0}),
        )
        .await
        .expect("provider.add");
    let settings = daemon.home.join("settings.json");
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o644)).expect("chmod");

    let (output, report) = doctor(&daemon.home, &daemon.socket).await;
    assert_eq!(output.status.code(), Some(1), "{report}");
    let provider = line(&report, "provider");
    assert!(
        provider.starts_with("fail") && provider.contains("gone"),
        "{report}"
    );
    let secrets = line(&report, "secrets");
    assert!(
        secrets.starts_with("fail") && secrets.contains("chmod 600"),
        "{report}"
    );
    assert!(line(&report, "daemon").starts_with("ok"), "{report}");
}

#[tokio::test]
async fn doctor_says_whether_the_ollama_it_falls_back_to_answers_now() {
    // No provider configured: totemd falls back to the Ollama at OLLAMA_HOST.
    let sim = Sim::start(SimKind::Ollama).await;
    let daemon = TestDaemon::start_with_env(&[("OLLAMA_HOST", sim.url().as_str())]);
    let (output, report) = doctor(&daemon.home, &daemon.socket).await;
    assert_eq!(output.status.code(), Some(0), "{report}");
    let providers = line(&report, "providers");
    assert!(
        providers.starts_with("ok")
            && providers.contains("answers at")
            && providers.contains("models"),
        "{report}"
    );
    drop(daemon);

    let daemon =
        TestDaemon::start_with_env(&[("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())]);
    let (_, report) = doctor(&daemon.home, &daemon.socket).await;
    let providers = line(&report, "providers");
    assert!(
        providers.starts_with("warn")
            && providers.contains("no Ollama answers at")
            && providers.contains("totem provider add"),
        "{report}"
    );
    assert!(!report.contains("if there is one"), "{report}");
}

#[tokio::test]
async fn doctor_fails_when_no_daemon_answers() {
    let dir = private_dir();
    let socket = dir.path().join("nobody.sock");
    let (output, report) = doctor(dir.path(), &socket).await;
    assert_eq!(output.status.code(), Some(1), "{report}");
    let daemon = line(&report, "daemon");
    assert!(
        daemon.starts_with("fail") && daemon.contains("totem daemon start"),
        "{report}"
    );
    assert!(line(&report, "settings").starts_with("ok"), "{report}");

    // Without a daemon, settings.json is still read the way totemd reads it.
    let settings = dir.path().join("settings.json");
    std::fs::write(&settings, "{\n  \"compaction\": {\"treshold\": 0.5}\n}\n").expect("write");
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (_, report) = doctor(dir.path(), &socket).await;
    let settings = line(&report, "settings");
    assert!(
        settings.starts_with("fail")
            && settings.contains("treshold")
            && settings.contains("`threshold`")
            && settings.contains("line 2"),
        "{report}"
    );
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// Follows session events until run `run_id` ends; returns the event type that ended it.
async fn run_end(events: &mut totem_client::EventStream, run_id: &str) -> String {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), events.next_value())
            .await
            .expect("an event within 60 s")
            .expect("subscription open");
        let kind = event["type"].as_str().unwrap_or_default().to_string();
        if matches!(kind.as_str(), "run.done" | "run.failed" | "run.aborted")
            && event["run"]["id"] == json!(run_id)
        {
            return kind;
        }
    }
}

#[tokio::test]
async fn no_provider_key_is_logged_even_at_trace_level() {
    let first_key = "sk-totem-log-probe-5c1e7a9f0b3d";
    let second_key = "sk-totem-log-probe-replaced-84d2";
    let sim = Sim::start(SimKind::Openai).await;
    let dir = private_dir();
    let home = dir.path().join("home");
    let socket = dir.path().join("trace.sock");
    let output = log_file(dir.path());
    let mut child = Command::new(binary("totemd"))
        .arg("--home")
        .arg(&home)
        .arg("--socket")
        .arg(&socket)
        .env("TOTEM_LOG", "trace")
        .env_remove("TOTEM_HOME")
        .stdin(Stdio::null())
        .stdout(output.try_clone().expect("output file"))
        .stderr(output)
        .spawn()
        .expect("spawn totemd");
    let client = connect(&socket).await;

    // The key goes in, is used for every kind of call, fails once, and is replaced.
    client
        .call_raw(
            "provider.add",
            json!({"name": "work", "kind": "openai", "url": sim.url(), "key": first_key,
                   "defaultModel": "gpt-4o-mini", "maxRetries": 0}),
        )
        .await
        .expect("provider.add");
    client
        .call_raw("provider.list", json!({}))
        .await
        .expect("provider.list");
    let tested = client
        .call_raw("provider.test", json!({"name": "work"}))
        .await
        .expect("provider.test");
    assert_eq!(tested["reachable"], json!(true), "{tested}");
    client
        .call_raw("model.list", json!({}))
        .await
        .expect("model.list");

    let project = tempfile::tempdir().expect("project");
    std::fs::write(project.path().join("README.md"), "# demo\n").expect("readme");
    let project_id = client
        .call_raw("project.open", json!({"path": project.path()}))
        .await
        .expect("project.open")["id"]
        .clone();
    let session = client
        .call_raw("session.create", json!({"projectId": project_id}))
        .await
        .expect("session.create")["id"]
        .as_str()
        .expect("session id")
        .to_string();
    let mut events = client.subscribe(&session, 0).await.expect("subscribe");
    let mut prompt = async |reply: Reply| {
        sim.push(reply);
        let accepted = client
            .call_raw(
                "session.prompt",
                json!({"sessionId": session, "text": "say hello", "model": "work/gpt-4o-mini"}),
            )
            .await
            .expect("session.prompt");
        let run_id = accepted["runId"].as_str().expect("run id").to_string();
        run_end(&mut events, &run_id).await
    };
    let ended = prompt(Reply::stream([SimEvent::text("hello")])).await;
    assert_eq!(ended, "run.done");
    let ended = prompt(Reply::error(401, "invalid api key")).await;
    assert_eq!(ended, "run.failed");
    client
        .call_raw(
            "provider.add",
            json!({"name": "work", "kind": "openai", "url": sim.url(), "key": second_key,
                   "replace": true}),
        )
        .await
        .expect("provider.add replace");
    client
        .call_raw("provider.test", json!({"name": "work"}))
        .await
        .expect("provider.test");
    // The keys did reach the provider: the check below is about logs, not about unused keys.
    let sent: Vec<String> = sim
        .requests()
        .iter()
        .filter_map(|r| r.header("authorization").map(str::to_string))
        .collect();
    assert!(
        sent.iter().any(|h| h.contains(first_key)) && sent.iter().any(|h| h.contains(second_key)),
        "authorization headers seen: {sent:?}"
    );
    drop(events);
    drop(client);
    assert!(
        terminate(&mut child).success(),
        "totemd exited with an error"
    );

    let logs = files_under(&home.join("logs"));
    let mut text = String::new();
    for file in logs.iter().chain([&dir.path().join("totemd-output.txt")]) {
        let bytes = std::fs::read(file).expect("read log");
        let content = String::from_utf8_lossy(&bytes);
        for key in [first_key, second_key] {
            assert!(
                !content.contains(key),
                "{} contains a provider key",
                file.display()
            );
            // Nor a recognisable part of it.
            assert!(
                !content.contains(&key[8..]),
                "{} contains part of a provider key",
                file.display()
            );
        }
        text.push_str(&content);
    }
    // Trace logging really was on and saw the calls, so the absence above means something.
    assert!(
        text.contains("TRACE"),
        "no trace line logged: the check proves nothing"
    );
    assert!(
        text.lines().count() > 100,
        "only {} log lines",
        text.lines().count()
    );
}

#[test]
fn daemon_install_writes_units_that_systemd_accepts() {
    let dir = private_dir();
    let home = dir.path().join("user");
    let no_tools = dir.path().join("bin");
    std::fs::create_dir_all(&no_tools).expect("bin folder");
    // No systemctl on PATH: the units are written and the commands to enable them printed.
    let output = Command::new(binary("totem"))
        .args(["daemon", "install"])
        .env("HOME", &home)
        .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
        .env("PATH", &no_tools)
        .env("XDG_RUNTIME_DIR", dir.path().join("runtime"))
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("TOTEM_HOME")
        .stdin(Stdio::null())
        .output()
        .expect("run totem daemon install");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        said.contains("systemctl --user enable --now totemd.socket"),
        "{said}"
    );

    let units = home.join(".config/systemd/user");
    let service = std::fs::read_to_string(units.join("totemd.service")).expect("service unit");
    let socket = std::fs::read_to_string(units.join("totemd.socket")).expect("socket unit");
    let totemd = binary("totemd").canonicalize().expect("totemd path");
    assert!(
        service.contains(&format!("\nExecStart={}\n", totemd.display())),
        "{service}"
    );
    assert!(service.contains("\nType=notify\n"), "{service}");
    assert!(!service.contains("TOTEM_HOME"), "{service}");
    assert!(
        socket.contains("\nListenStream=%t/totem/totemd.sock\n"),
        "{socket}"
    );
    assert!(socket.contains("\nSocketMode=0600\n"), "{socket}");

    // systemd's own checker, where it is installed.
    let verified = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(units.join("totemd.socket"))
        .arg(units.join("totemd.service"))
        .output();
    if let Ok(verified) = verified {
        assert!(
            verified.status.success(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&verified.stderr)
        );
    }
}
