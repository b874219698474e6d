//! Settings and the provider methods, through the real `totemd` binary: `provider.add|list|
//! remove|test` and `model.list` against the provider simulators, keys encrypted at rest and
//! never shown, and a broken settings.json reported without losing the settings in force.
//!
//! Needs `target/debug/totemd`: run `cargo build -p totemd` first.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use totem_client::Client;
use totem_tests::sim::{Reply, Sim, SimEvent, SimKind};

const NOT_FOUND: i32 = -32004;
const INVALID_PARAMS: i32 = -32602;
const CONFLICT: i32 = -32009;

/// A `totemd` child process with its own home, logging at trace level into that home.
struct Totemd {
    child: Child,
    home: PathBuf,
    socket: PathBuf,
}

fn totemd_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    for dir in exe.ancestors().skip(1) {
        let candidate = dir.join("totemd");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "no totemd binary beside {}; run `cargo build -p totemd` first",
        exe.display()
    );
}

impl Totemd {
    fn start(home: &Path) -> Totemd {
        Self::start_with_env(home, &[])
    }

    fn start_with_env(home: &Path, env: &[(&str, &str)]) -> Totemd {
        Self::spawn(home, env, Some("trace"))
    }

    /// Without `--log` (and without `TOTEM_LOG` or `RUST_LOG`): settings.json sets the level.
    fn start_with_settings_log_level(home: &Path) -> Totemd {
        Self::spawn(home, &[], None)
    }

    fn spawn(home: &Path, env: &[(&str, &str)], log: Option<&str>) -> Totemd {
        let socket = home.join("totemd.sock");
        let output = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(home.join("daemon-output.txt"))
            .expect("output file");
        let mut command = Command::new(totemd_binary());
        command
            .arg("--home")
            .arg(home)
            .arg("--socket")
            .arg(&socket)
            .env("TOTEM_HOME", home)
            .env_remove("TOTEM_LOG")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(output.try_clone().expect("output file"))
            .stderr(output);
        if let Some(log) = log {
            command.arg("--log").arg(log);
        }
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().expect("totemd starts");
        Totemd {
            child,
            home: home.to_path_buf(),
            socket,
        }
    }

    async fn client(&self) -> Client {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match Client::connect(&self.socket, "test", Default::default()).await {
                Ok((client, _)) => return client,
                Err(e) if Instant::now() > deadline => panic!(
                    "totemd did not answer on {}: {e}; its output: {}",
                    self.socket.display(),
                    std::fs::read_to_string(self.home.join("daemon-output.txt"))
                        .unwrap_or_default()
                ),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Asks the daemon to stop and waits for it, so its logs are flushed.
    async fn stop(mut self, client: &Client) {
        let _ = client.call_raw("daemon.shutdown", json!({})).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Totemd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

async fn call(client: &Client, method: &str, params: Value) -> Value {
    client
        .call_raw(method, params)
        .await
        .unwrap_or_else(|e| panic!("{method} failed: {e}"))
}

async fn call_err(client: &Client, method: &str, params: Value) -> (i32, String) {
    match client.call_raw(method, params).await {
        Ok(v) => panic!("{method} should have failed, answered {v}"),
        Err(e) => (e.code().unwrap_or(0), e.to_string()),
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Every regular file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push(path),
                Ok(t) if t.is_file() => found.push(path),
                _ => {}
            }
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[tokio::test]
async fn provider_add_list_remove_round_trip() {
    let home = tempfile::tempdir().unwrap();
    let daemon = Totemd::start(home.path());
    let client = daemon.client().await;

    let empty = call(&client, "provider.list", json!({})).await;
    assert_eq!(empty["providers"], json!([]));

    let local = call(
        &client,
        "provider.add",
        json!({"name": "local", "kind": "ollama",
        "defaultModel": "qwen3:8b", "ollama": {"ctx": 16384, "ctxMax": 65536, "keepAlive": "10m"},
        "temperature": 0.2}),
    )
    .await;
    assert_eq!(local["url"], "http://127.0.0.1:11434");
    assert_eq!(local["hasKey"], false);
    for (kind, url) in [
        ("openai", "https://api.openai.com/v1"),
        ("anthropic", "https://api.anthropic.com"),
        ("gemini", "https://generativelanguage.googleapis.com"),
    ] {
        let added = call(
            &client,
            "provider.add",
            json!({"name": kind, "kind": kind, "key": "k-123"}),
        )
        .await;
        assert_eq!(added["url"], url, "default URL of {kind}");
        assert_eq!(added["hasKey"], true);
    }
    let router = call(
        &client,
        "provider.add",
        json!({"name": "router", "kind": "openai",
        "url": "https://openrouter.ai/api/v1/", "timeouts": {"connectSecs": 3}, "maxRetries": 1}),
    )
    .await;
    assert_eq!(
        router["url"], "https://openrouter.ai/api/v1",
        "trailing slash trimmed"
    );

    let list = call(&client, "provider.list", json!({})).await;
    let names: Vec<&str> = list["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["local", "openai", "anthropic", "gemini", "router"]);
    assert_eq!(list["providers"][0]["ollama"]["ctxMax"], 65536);
    assert_eq!(list["providers"][0]["defaultModel"], "qwen3:8b");
    assert_eq!(list["providers"][4]["timeouts"]["connectSecs"], 3);
    assert!(list.get("settingsError").is_none(), "{list}");

    // Mistakes are refused with the right codes and nothing changes.
    let (code, msg) = call_err(
        &client,
        "provider.add",
        json!({"name": "local", "kind": "ollama"}),
    )
    .await;
    assert_eq!(code, CONFLICT, "{msg}");
    assert!(msg.contains("exists already"), "{msg}");
    let (code, _) = call_err(
        &client,
        "provider.add",
        json!({"name": "a/b", "kind": "ollama"}),
    )
    .await;
    assert_eq!(code, INVALID_PARAMS);
    let (code, _) = call_err(
        &client,
        "provider.add",
        json!({"name": "x", "kind": "ollama", "apiKey": "k"}),
    )
    .await;
    assert_eq!(code, INVALID_PARAMS, "unknown fields are refused");
    let (code, _) = call_err(
        &client,
        "provider.add",
        json!({"name": "x", "kind": "mistral"}),
    )
    .await;
    assert_eq!(code, INVALID_PARAMS);
    let (code, msg) = call_err(
        &client,
        "provider.add",
        json!({"name": "x", "kind": "openai", "url": "api.openai.com"}),
    )
    .await;
    assert_eq!(code, INVALID_PARAMS);
    assert!(msg.contains("http://"), "{msg}");
    let (code, _) = call_err(
        &client,
        "provider.add",
        json!({"name": "x", "kind": "openai", "ollama": {"ctx": 1}}),
    )
    .await;
    assert_eq!(code, INVALID_PARAMS, "ollama options on another kind");

    // Replace keeps the position and takes the new settings.
    let replaced = call(
        &client,
        "provider.add",
        json!({"name": "local", "kind": "ollama",
        "url": "http://10.0.0.5:11434", "replace": true}),
    )
    .await;
    assert_eq!(replaced["url"], "http://10.0.0.5:11434");

    let removed = call(&client, "provider.remove", json!({"name": "openai"})).await;
    assert_eq!(removed["name"], "openai");
    let (code, msg) = call_err(&client, "provider.remove", json!({"name": "openai"})).await;
    assert_eq!(code, NOT_FOUND, "{msg}");

    let list = call(&client, "provider.list", json!({})).await;
    let names: Vec<&str> = list["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["local", "anthropic", "gemini", "router"]);
    assert_eq!(list["providers"][0]["url"], "http://10.0.0.5:11434");
    assert!(
        list["providers"][0].get("ollama").is_none(),
        "replace dropped the old options"
    );

    // The file holds what the list shows, and survives a restart.
    let on_disk: Value =
        serde_json::from_slice(&std::fs::read(home.path().join("settings.json")).unwrap()).unwrap();
    assert_eq!(on_disk["version"], 1);
    assert_eq!(on_disk["providers"].as_array().unwrap().len(), 4);
    daemon.stop(&client).await;
    let daemon = Totemd::start(home.path());
    let client = daemon.client().await;
    let again = call(&client, "provider.list", json!({})).await;
    assert_eq!(again, list);
    let secrets = std::fs::read_to_string(home.path().join("secrets.json")).unwrap();
    assert!(
        !secrets.contains("\"openai\""),
        "removing a provider forgets its key: {secrets}"
    );
    daemon.stop(&client).await;
}

#[tokio::test]
async fn key_is_encrypted_at_rest_and_never_shown_or_logged() {
    let home = tempfile::tempdir().unwrap();
    let sim = Sim::start(SimKind::Openai).await;
    let secret = format!("sk-totem-test-{}-{}", std::process::id(), closed_port());
    let daemon = Totemd::start(home.path());
    let client = daemon.client().await;

    let mut outputs = Vec::new();
    outputs.push(
        call(
            &client,
            "provider.add",
            json!({"name": "work", "kind": "openai", "url": sim.url(),
            "key": format!("  {secret}\n"), "defaultModel": "gpt-4o-mini"}),
        )
        .await,
    );
    assert_eq!(outputs[0]["hasKey"], true);
    outputs.push(call(&client, "provider.list", json!({})).await);
    outputs.push(call(&client, "provider.test", json!({"name": "work"})).await);
    outputs.push(call(&client, "model.list", json!({})).await);
    outputs.push(call(&client, "model.list", json!({"provider": "work"})).await);
    outputs.push(call(&client, "daemon.status", json!({})).await);
    // Errors must not echo it either.
    let (_, dup) = call_err(
        &client,
        "provider.add",
        json!({"name": "work", "kind": "openai", "key": secret}),
    )
    .await;
    outputs.push(Value::String(dup));
    let (_, bad) = call_err(
        &client,
        "provider.add",
        json!({"name": "w/2", "kind": "openai", "key": secret}),
    )
    .await;
    outputs.push(Value::String(bad));
    for output in &outputs {
        assert!(
            !output.to_string().contains(&secret),
            "a method returned the key: {output}"
        );
    }
    assert_eq!(outputs[2]["reachable"], true, "{}", outputs[2]);

    // The key was decrypted and sent where it belongs: to the provider.
    let sent: Vec<String> = sim
        .requests()
        .iter()
        .filter_map(|r| r.header("authorization").map(str::to_owned))
        .collect();
    assert!(!sent.is_empty());
    assert!(
        sent.iter().all(|h| h == &format!("Bearer {secret}")),
        "{sent:?}"
    );

    // Anthropic and Gemini send theirs in their own headers; same rules.
    let mut secrets = vec![secret.clone()];
    let anthropic = Sim::start(SimKind::Anthropic).await;
    let gemini = Sim::start(SimKind::Gemini).await;
    for (name, kind, other, header) in [
        ("claude", "anthropic", &anthropic, "x-api-key"),
        ("gem", "gemini", &gemini, "x-goog-api-key"),
    ] {
        let key = format!("{secret}-{name}");
        let added = call(
            &client,
            "provider.add",
            json!({"name": name, "kind": kind, "url": other.url(), "key": key}),
        )
        .await;
        let tested = call(&client, "provider.test", json!({"name": name})).await;
        assert_eq!(tested["reachable"], true, "{tested}");
        let listed = call(&client, "model.list", json!({"provider": name})).await;
        for output in [&added, &tested, &listed] {
            assert!(!output.to_string().contains(&key), "{output}");
        }
        let requests = other.requests();
        assert!(!requests.is_empty());
        for request in requests {
            assert_eq!(request.header(header), Some(key.as_str()), "{name}");
            assert!(
                !request.path.contains(&key),
                "key in the URL: {}",
                request.path
            );
        }
        secrets.push(key);
    }

    // A run that works and one the provider refuses: the key goes out with both requests and
    // into no event, stored message, error or log line (checked below).
    let project = tempfile::tempdir().unwrap();
    let opened = call(&client, "project.open", json!({"path": project.path()})).await;
    let created = call(
        &client,
        "session.create",
        json!({"projectId": opened["id"]}),
    )
    .await;
    let session = created["id"].as_str().unwrap().to_string();
    sim.push(Reply::stream([
        SimEvent::text("All good."),
        SimEvent::usage(12, 3),
    ]));
    sim.push(Reply::error(401, "Incorrect API key provided"));
    let mut events = client.subscribe(&session, 0).await.unwrap();
    let before_runs = sim.chat_requests().len();
    for expected in ["run.done", "run.failed"] {
        let accepted = call(
            &client,
            "session.prompt",
            json!({"sessionId": session, "text": "hello", "model": "work/gpt-4o-mini"}),
        )
        .await;
        let ended = loop {
            let event = tokio::time::timeout(Duration::from_secs(30), events.next_value())
                .await
                .expect("the run ends in time")
                .expect("subscription open");
            assert!(
                !event.to_string().contains(&secret),
                "an event carries the key: {event}"
            );
            let kind = event["type"].as_str().unwrap_or_default();
            if kind.starts_with("run.")
                && kind != "run.started"
                && kind != "run.queued"
                && event["run"]["id"] == accepted["runId"]
            {
                break event;
            }
        };
        assert_eq!(ended["type"], expected, "{ended}");
    }
    let runs = sim.chat_requests();
    assert_eq!(
        runs.len(),
        before_runs + 2,
        "one request per run, no retry of a 401"
    );
    for request in &runs[before_runs..] {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {secret}").as_str())
        );
    }
    let messages = call(&client, "session.messages", json!({"sessionId": session})).await;
    assert!(!messages.to_string().contains(&secret), "{messages}");

    // A restarted daemon still has it (the master key persisted) and still does not show it.
    daemon.stop(&client).await;
    let daemon = Totemd::start(home.path());
    let client = daemon.client().await;
    let list = call(&client, "provider.list", json!({})).await;
    assert_eq!(list["providers"][0]["hasKey"], true);
    let before = sim.requests().len();
    let tested = call(&client, "provider.test", json!({"name": "work"})).await;
    assert_eq!(tested["reachable"], true);
    assert_eq!(
        sim.requests()[before].header("authorization"),
        Some(format!("Bearer {secret}").as_str())
    );
    daemon.stop(&client).await;

    // Not in plain text anywhere under the home: settings, secrets, store, logs, daemon output.
    let files = files_under(home.path());
    assert!(
        files
            .iter()
            .any(|f| f.starts_with(home.path().join("logs"))),
        "no log written"
    );
    let log_bytes: usize = files
        .iter()
        .filter(|f| f.starts_with(home.path().join("logs")))
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len() as usize))
        .sum();
    assert!(
        log_bytes > 0,
        "trace logging wrote nothing, so the check below proves nothing"
    );
    for file in &files {
        let bytes = std::fs::read(file).unwrap();
        for secret in &secrets {
            assert!(
                !contains(&bytes, secret.as_bytes()),
                "a key is in plain text in {}",
                file.display()
            );
        }
    }
    let settings = std::fs::read_to_string(home.path().join("settings.json")).unwrap();
    assert!(
        settings.contains("\"work\"") && !settings.to_lowercase().contains("key"),
        "{settings}"
    );

    // Private files in a private folder.
    assert_eq!(mode(&home.path().join("keys")), 0o700);
    assert_eq!(mode(&home.path().join("keys/master.key")), 0o600);
    assert_eq!(
        std::fs::metadata(home.path().join("keys/master.key"))
            .unwrap()
            .len(),
        32
    );
    assert_eq!(mode(&home.path().join("secrets.json")), 0o600);
    assert_eq!(mode(&home.path().join("settings.json")), 0o600);
}

#[tokio::test]
async fn keys_are_never_taken_from_the_environment() {
    let home = tempfile::tempdir().unwrap();
    let sim = Sim::start(SimKind::Openai).await;
    let daemon = Totemd::start_with_env(
        home.path(),
        &[
            ("OPENAI_API_KEY", "sk-from-env"),
            ("TOTEM_OPENAI_API_KEY", "sk-from-env"),
            ("TOTEM_KEY", "sk-from-env"),
        ],
    );
    let client = daemon.client().await;
    call(
        &client,
        "provider.add",
        json!({"name": "openai", "kind": "openai", "url": sim.url()}),
    )
    .await;
    let tested = call(&client, "provider.test", json!({"name": "openai"})).await;
    assert_eq!(tested["reachable"], true, "{tested}");
    assert!(!sim.requests().is_empty());
    for request in sim.requests() {
        let auth = request.header("authorization").unwrap_or("");
        assert!(
            !auth.contains("sk-from-env"),
            "a key came from the environment: {auth}"
        );
    }
    daemon.stop(&client).await;
}

#[tokio::test]
async fn malformed_settings_are_reported_and_the_previous_ones_kept() {
    let home = tempfile::tempdir().unwrap();
    let daemon = Totemd::start(home.path());
    let client = daemon.client().await;
    call(
        &client,
        "provider.add",
        json!({"name": "local", "kind": "ollama"}),
    )
    .await;

    let path = home.path().join("settings.json");
    let broken = "{\n  \"version\": 1,\n  \"providers\": [\n    {\"name\": \"x\" \"kind\": \"ollama\"}\n  ]\n}\n";
    std::fs::write(&path, broken).unwrap();
    let list = call(&client, "provider.list", json!({})).await;
    assert_eq!(
        list["providers"][0]["name"], "local",
        "previous settings stay: {list}"
    );
    let error = list["settingsError"]
        .as_str()
        .expect("settingsError is set");
    assert!(error.contains(&path.display().to_string()), "{error}");
    assert!(error.contains("line 4, column 18"), "{error}");

    // Changes are refused rather than overwriting the user's file.
    let (code, msg) = call_err(
        &client,
        "provider.add",
        json!({"name": "b", "kind": "ollama"}),
    )
    .await;
    assert_eq!(code, CONFLICT, "{msg}");
    assert!(
        msg.contains("line 4, column 18") && msg.contains("fix the file"),
        "{msg}"
    );
    let (code, _) = call_err(&client, "provider.remove", json!({"name": "local"})).await;
    assert_eq!(code, CONFLICT);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);

    // Unknown fields are named too.
    std::fs::write(
        &path,
        "{\"version\": 1, \"defaultModle\": \"ollama/qwen3\"}",
    )
    .unwrap();
    let list = call(&client, "provider.list", json!({})).await;
    let error = list["settingsError"].as_str().unwrap();
    assert!(
        error.contains("defaultModle") && error.contains("line 1"),
        "{error}"
    );

    // So are unknown fields inside a section, with the names it knows, at load.
    std::fs::write(
        &path,
        "{\"version\": 1,\n \"agents\": {\"review\": {\"readonly\": true}}}",
    )
    .unwrap();
    let list = call(&client, "provider.list", json!({})).await;
    let error = list["settingsError"].as_str().unwrap();
    assert!(
        error.contains("`readonly`") && error.contains("`readOnly`") && error.contains("line 2"),
        "{error}"
    );

    // Fixed by hand: picked up without a restart.
    std::fs::write(
        &path,
        "{\"version\": 1, \"providers\": [{\"name\": \"fixed\", \"kind\": \"ollama\", \"url\": \"http://127.0.0.1:1\"}]}",
    )
    .unwrap();
    let list = call(&client, "provider.list", json!({})).await;
    assert!(list.get("settingsError").is_none(), "{list}");
    assert_eq!(list["providers"][0]["name"], "fixed");
    daemon.stop(&client).await;

    // A daemon started on a broken file still starts, reports it and logs it.
    std::fs::write(&path, broken).unwrap();
    let daemon = Totemd::start(home.path());
    let client = daemon.client().await;
    let list = call(&client, "provider.list", json!({})).await;
    assert_eq!(list["providers"], json!([]));
    assert!(
        list["settingsError"]
            .as_str()
            .unwrap()
            .contains("line 4, column 18")
    );
    daemon.stop(&client).await;
    let logged = files_under(&home.path().join("logs")).iter().any(|f| {
        std::fs::read_to_string(f)
            .unwrap_or_default()
            .contains("line 4, column 18")
    });
    assert!(logged, "the broken file is named in the log");
}

#[tokio::test]
async fn provider_test_and_model_list_against_simulators() {
    let home = tempfile::tempdir().unwrap();
    let ollama = Sim::start(SimKind::Ollama).await;
    let router = Sim::start(SimKind::Openrouter).await;
    let anthropic = Sim::start(SimKind::Anthropic).await;
    let daemon = Totemd::start(home.path());
    let client = daemon.client().await;

    call(
        &client,
        "provider.add",
        json!({"name": "local", "kind": "ollama", "url": ollama.url()}),
    )
    .await;
    call(
        &client,
        "provider.add",
        json!({"name": "router", "kind": "openai", "url": router.url(), "key": "sk-or"}),
    )
    .await;
    call(
        &client,
        "provider.add",
        json!({"name": "claude", "kind": "anthropic", "url": anthropic.url(), "key": "sk-ant"}),
    )
    .await;
    let down = closed_port();
    call(
        &client,
        "provider.add",
        json!({"name": "down", "kind": "ollama", "url": format!("http://127.0.0.1:{down}")}),
    )
    .await;

    let tested = call(&client, "provider.test", json!({"name": "local"})).await;
    assert_eq!(tested["reachable"], true, "{tested}");
    assert_eq!(tested["models"], 3);
    assert!(
        tested["message"]
            .as_str()
            .unwrap()
            .contains("lists 3 models"),
        "{tested}"
    );
    let tested = call(&client, "provider.test", json!({"name": "claude"})).await;
    assert_eq!(tested["reachable"], true, "{tested}");
    let tested = call(&client, "provider.test", json!({"name": "down"})).await;
    assert_eq!(tested["reachable"], false);
    let message = tested["message"].as_str().unwrap();
    assert!(
        message.contains("cannot reach") && message.contains(&down.to_string()),
        "{message}"
    );
    let (code, _) = call_err(&client, "provider.test", json!({"name": "nobody"})).await;
    assert_eq!(code, NOT_FOUND);

    let list = call(&client, "model.list", json!({})).await;
    let models = list["models"].as_array().unwrap();
    let find = |name: &str| {
        models
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing from {list}"))
    };
    let qwen = find("local/qwen3:8b");
    assert_eq!(qwen["provider"], "local");
    assert_eq!(qwen["id"], "qwen3:8b");
    assert_eq!(qwen["contextWindow"], 40960);
    assert_eq!(qwen["capabilities"]["thinking"], true);
    assert_eq!(qwen["capabilities"]["tools"], true);
    let gemma = find("local/gemma3:4b");
    assert_eq!(gemma["capabilities"]["tools"], false);
    assert_eq!(gemma["capabilities"]["vision"], true);
    let sonnet = find("router/anthropic/claude-sonnet-4");
    assert_eq!(sonnet["prices"]["inputPerMillion"], 3.0);
    assert_eq!(sonnet["prices"]["outputPerMillion"], 15.0);
    assert_eq!(sonnet["contextWindow"], 200000);
    let opus = find("claude/claude-opus-4-6");
    assert_eq!(opus["capabilities"]["adaptiveThinking"], true);
    // Settings order, then each provider's own order.
    assert_eq!(models[0]["provider"], "local");
    assert_eq!(models.last().unwrap()["provider"], "claude");
    assert_eq!(list["errors"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["errors"][0]["provider"], "down");
    assert_eq!(
        list["defaultModel"], "local/qwen3:8b",
        "first model with tools"
    );

    // One provider only.
    let only = call(&client, "model.list", json!({"provider": "router"})).await;
    assert!(
        only["models"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["provider"] == "router")
    );
    assert_eq!(only["models"].as_array().unwrap().len(), 2);
    let (code, _) = call_err(&client, "model.list", json!({"provider": "nobody"})).await;
    assert_eq!(code, NOT_FOUND);

    // Lists are cached for a while: asking again does not ask the providers again...
    let tags = |sim: &Sim| {
        sim.requests()
            .iter()
            .filter(|r| r.path == "/api/tags")
            .count()
    };
    let before = tags(&ollama);
    call(&client, "model.list", json!({})).await;
    assert_eq!(tags(&ollama), before, "model list served from the cache");
    // ...until the settings change.
    call(
        &client,
        "provider.add",
        json!({"name": "local", "kind": "ollama", "url": ollama.url(), "replace": true}),
    )
    .await;
    call(&client, "model.list", json!({})).await;
    assert_eq!(
        tags(&ollama),
        before + 1,
        "a changed provider is asked again"
    );

    // A configured default wins over the first tool model.
    let path = home.path().join("settings.json");
    let mut settings: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    settings["defaultModel"] = json!("claude/claude-sonnet-4-5");
    std::fs::write(&path, serde_json::to_vec_pretty(&settings).unwrap()).unwrap();
    let list = call(&client, "model.list", json!({})).await;
    assert_eq!(list["defaultModel"], "claude/claude-sonnet-4-5");
    daemon.stop(&client).await;
}

#[tokio::test]
async fn without_providers_a_local_ollama_is_used() {
    let home = tempfile::tempdir().unwrap();
    // Only meaningful when the default Ollama port is ours to take.
    let sim = Sim::start_on(SimKind::Ollama, 11434).await.ok();
    let daemon = Totemd::start(home.path());
    let client = daemon.client().await;
    let list = call(&client, "model.list", json!({})).await;
    let providers = call(&client, "provider.list", json!({})).await;
    assert_eq!(
        providers["providers"],
        json!([]),
        "the implicit provider is not written down"
    );
    match sim {
        Some(_) => {
            assert!(
                list["models"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| m["name"] == "ollama/qwen3:8b"),
                "{list}"
            );
            assert_eq!(list["defaultModel"], "ollama/qwen3:8b");
            let tested = call(&client, "provider.test", json!({"name": "ollama"})).await;
            assert_eq!(tested["reachable"], true);
            assert_eq!(tested["url"], "http://127.0.0.1:11434");
        }
        None => {
            // Something else holds the port; at least the answer names the implicit provider.
            let named = list["models"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["provider"] == "ollama")
                || list["errors"][0]["provider"] == "ollama";
            assert!(named, "{list}");
        }
    }
    // Once a provider is configured, the implicit one is gone.
    call(&client, "provider.add", json!({"name": "mine", "kind": "ollama", "url": format!("http://127.0.0.1:{}", closed_port())})).await;
    let (code, _) = call_err(&client, "provider.test", json!({"name": "ollama"})).await;
    assert_eq!(code, NOT_FOUND);
    daemon.stop(&client).await;
}

#[tokio::test]
async fn log_level_comes_from_settings() {
    let log_text = |home: &Path| -> String {
        files_under(&home.join("logs"))
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap_or_default())
            .collect()
    };
    let home = tempfile::tempdir().unwrap();
    let settings = home.path().join("settings.json");
    std::fs::write(&settings, r#"{"version": 1, "logLevel": "debug"}"#).unwrap();
    let daemon = Totemd::start_with_settings_log_level(home.path());
    let client = daemon.client().await;
    daemon.stop(&client).await;
    let debug = log_text(home.path());
    assert!(
        debug.contains("filter=debug from=\"settings.json logLevel\""),
        "{debug}"
    );
    // `initialize` is logged at debug level only.
    assert!(
        debug.contains(" DEBUG ") && debug.contains("client initialized"),
        "{debug}"
    );

    std::fs::remove_dir_all(home.path().join("logs")).unwrap();
    std::fs::write(&settings, r#"{"version": 1, "logLevel": "warn"}"#).unwrap();
    let daemon = Totemd::start_with_settings_log_level(home.path());
    let client = daemon.client().await;
    daemon.stop(&client).await;
    let warn = log_text(home.path());
    assert!(
        !warn.contains(" INFO ") && !warn.contains(" DEBUG "),
        "at warn, info and debug lines are left out: {warn}"
    );
}
