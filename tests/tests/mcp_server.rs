//! Totem as an MCP server. The methods other agents use (`session.ask`, `run.get`, `run.wait`,
//! `mcpToken.rotate`) over the socket, then an MCP client that is not ours — the official Python
//! SDK — listing and calling Totem's tools over stdio (`totem mcp`) and over totemd's streamable
//! HTTP listener, against the real daemon and an Ollama simulator, in both protocol eras (the
//! 2025-11-25 `initialize` handshake and the stateless 2026-07-28 `server/discover`).

mod agent_common;
mod cli_common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_common::{Env, MODEL, text, tool};
use serde_json::{Value, json};
use totem_client::Client;
use totem_tests::harness::{TestDaemon, binary};
use totem_tests::sim::{Reply, Sim, SimKind};

const ANSWER: &str = "Hello from the simulator.";

/// Every tool the server offers: the protocol's methods marked `mcp`, `.` written `_`, sorted.
fn tools() -> Vec<String> {
    let mut names: Vec<String> = totem_protocol::METHODS
        .iter()
        .filter(|m| m.mcp)
        .map(|m| m.name.replace('.', "_"))
        .collect();
    names.sort();
    names
}

/// The tools the issue asks for, whatever else the table marks.
const CORE_TOOLS: &[&str] = &[
    "project_list",
    "run_get",
    "run_wait",
    "session_abort",
    "session_ask",
    "session_create",
    "session_diff",
    "session_list",
    "session_messages",
];

fn python() -> PathBuf {
    totem_tests::external::python_venv("mcp", &["mcp==2.3.0"]).join("python")
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp")
        .join(name)
}

/// Runs a Python client script and returns the JSON report it printed.
async fn run_script(name: &str, args: &[String], home: &Path) -> Value {
    let output = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::process::Command::new(python())
            .arg(script(name))
            .args(args)
            .env("TOTEM_HOME", home)
            .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client finished in time")
    .expect("run the Python client");
    totem_tests::external::script_report(name, &output)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A plain HTTP client (no TLS is used, but reqwest wants a crypto provider all the same).
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

async fn call(client: &Client, method: &str, params: Value) -> Value {
    client
        .call_raw(method, params)
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"))
}

// ---- the new protocol methods, over the socket ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_ask_returns_at_a_question_and_waits_for_the_answer() {
    let env = Env::start().await;
    // First a command that needs permission, which nobody answers: the caller hears of the
    // question at once, not after the whole wait (45 s by default).
    env.push(vec![tool(
        "c1",
        "bash",
        json!({"command": "echo hi > hi.txt"}),
    )]);
    let asked = Instant::now();
    let waiting = call(
        &env.client,
        "session.ask",
        json!({"sessionId": env.session, "text": "write hi.txt", "model": MODEL}),
    )
    .await;
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "session.ask returned at the question, took {:?}",
        asked.elapsed()
    );
    assert_eq!(waiting["run"]["status"], "running", "{waiting}");
    assert!(waiting.get("text").is_none(), "{waiting}");
    assert_eq!(waiting["questions"][0]["tool"], "bash", "{waiting}");
    let run_id = waiting["run"]["id"].as_str().expect("run id").to_string();

    // run.wait answers at once with timeoutMs 0, still running; and at once while the question
    // waits, with the question.
    let now = call(
        &env.client,
        "run.wait",
        json!({"runId": run_id, "timeoutMs": 0}),
    )
    .await;
    assert_eq!(now["run"]["status"], "running");
    let asked = Instant::now();
    let still = call(
        &env.client,
        "run.wait",
        json!({"runId": run_id, "timeoutMs": 30000}),
    )
    .await;
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(still["questions"][0]["tool"], "bash", "{still}");
    let aborted = call(
        &env.client,
        "session.abort",
        json!({"sessionId": env.session}),
    )
    .await;
    assert_eq!(aborted["runId"], run_id.as_str());
    // The abort withdraws the question as the run ends; until then run.wait rightly still
    // answers with the question, so wait for the end.
    let mut ended = Value::Null;
    for _ in 0..100 {
        ended = call(
            &env.client,
            "run.wait",
            json!({"runId": run_id, "timeoutMs": 10000}),
        )
        .await;
        if ended["run"]["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ended["run"]["status"], "aborted", "{ended}");
    assert!(ended.get("questions").is_none(), "{ended}");

    // Then a plain answer: session.ask returns the run done with its text.
    env.push(vec![text("Hello"), text(" there.")]);
    let done = call(
        &env.client,
        "session.ask",
        json!({"sessionId": env.session, "text": "say hello", "model": MODEL}),
    )
    .await;
    assert_eq!(done["run"]["status"], "done", "{done}");
    assert_eq!(done["text"], "Hello there.");
    let got = call(&env.client, "run.get", json!({"runId": done["run"]["id"]})).await;
    assert_eq!(got, done);

    let missing = env
        .client
        .call_raw("run.get", json!({"runId": "run_missing"}))
        .await
        .expect_err("an unknown run");
    assert_eq!(missing.code(), Some(-32004));
    let empty = env
        .client
        .call_raw(
            "session.ask",
            json!({"sessionId": env.session, "text": "  "}),
        )
        .await
        .expect_err("an empty prompt");
    assert_eq!(empty.code(), Some(-32602));
    // session.ask never takes run-scoped permission rules: the session's own apply.
    let allow = env
        .client
        .call_raw(
            "session.ask",
            json!({"sessionId": env.session, "text": "x", "allow": ["bash"]}),
        )
        .await
        .expect_err("allow is not a param of session.ask");
    assert_eq!(allow.code(), Some(-32602));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_token_rotate_replaces_the_token_and_stores_it_encrypted() {
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    let first = call(&client, "mcpToken.rotate", json!({})).await;
    let second = call(&client, "mcpToken.rotate", json!({})).await;
    let token = second["token"].as_str().expect("token");
    assert!(token.starts_with("totem_") && token.len() > 40, "{token}");
    assert_ne!(first["token"], second["token"]);
    assert_eq!(second["url"], "http://127.0.0.1:7311/mcp");
    assert_eq!(second["enabled"], false);
    let secrets = std::fs::read_to_string(daemon.home.join("secrets.json")).expect("secrets.json");
    assert!(secrets.contains("mcp-server:http"), "{secrets}");
    assert!(!secrets.contains(token) && !secrets.contains(&token[6..20]));
}

// ---- the official MCP Python SDK ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_lists_and_calls_tools_over_stdio() {
    let env = Env::start().await;
    let project = env.root().display().to_string();
    for mode in ["legacy", "auto"] {
        env.push(vec![text(ANSWER)]);
        let args: Vec<String> = [
            "stdio",
            mode,
            &project,
            MODEL,
            "--",
            &binary("totem").display().to_string(),
            "--socket",
            &env.daemon.socket.display().to_string(),
            "mcp",
            "--project",
            &project,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let report = run_script("server_client.py", &args, &env.daemon.home).await;
        check_report(&report, mode);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn totem_mcp_starts_the_daemon_and_offers_its_folder_as_a_project() {
    let cli = cli_common::Cli::new();
    assert!(!cli.socket().exists());
    let project = std::fs::canonicalize(cli.project.path()).expect("project");
    let args: Vec<String> = vec![
        project.display().to_string(),
        binary("totem").display().to_string(),
        "mcp".into(),
    ];
    let report = run_script("server_list.py", &args, cli.home()).await;
    assert!(cli.socket().exists(), "totem mcp started totemd");
    assert_eq!(report["tools"], json!(tools()));
    assert_eq!(report["projects"], json!([project.display().to_string()]));
    let instructions = report["instructions"].as_str().unwrap_or("");
    assert!(instructions.contains("session_ask"), "{instructions}");
    assert!(
        instructions.contains(&project.display().to_string()),
        "{instructions}"
    );

    // `totem mcp token` prints the token alone on stdout and says the listener is off.
    let out = cli.run(["mcp", "token"]);
    cli_common::assert_exit(&out, 0);
    let stdout = cli_common::stdout(&out);
    assert!(
        stdout.starts_with("totem_") && stdout.lines().count() == 1,
        "{stdout}"
    );
    let stderr = cli_common::stderr(&out);
    assert!(stderr.contains("shown once"), "{stderr}");
    assert!(stderr.contains("\"enabled\": true"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_http_needs_the_token() {
    let port = free_port();
    let HttpEnv {
        sim,
        daemon,
        client,
        project,
        _home,
    } = http_env(port, "127.0.0.1").await;
    let token = call(&client, "mcpToken.rotate", json!({})).await["token"]
        .as_str()
        .expect("token")
        .to_string();
    let url = format!("http://127.0.0.1:{port}/mcp");

    let auth = run_script(
        "server_http_auth.py",
        &[url.clone(), token.clone()],
        &daemon.home,
    )
    .await;
    for refused in ["none", "wrong"] {
        let r = &auth[refused];
        assert_eq!(r["status"], 401, "{refused}: {r}");
        let challenge = r["wwwAuthenticate"].as_str().unwrap_or("");
        assert!(challenge.starts_with("Bearer"), "{refused}: {r}");
        assert!(!challenge.contains("resource_metadata"), "{refused}: {r}");
        assert!(
            r["body"].as_str().unwrap_or("").contains("totem mcp token"),
            "{r}"
        );
    }
    assert_eq!(auth["badOrigin"]["status"], 403, "{auth}");
    assert_eq!(auth["localOrigin"]["status"], 200, "{auth}");
    assert_eq!(auth["right"]["status"], 200, "{auth}");
    let deleted = auth["delete"]["status"].as_u64().expect("a DELETE answer");
    assert!([200, 204, 405].contains(&deleted), "{auth}");
    assert_eq!(auth["sdkNone"]["ok"], false, "{auth}");
    assert_eq!(auth["sdkWrong"]["ok"], false, "{auth}");
    assert_eq!(auth["sdkRight"]["ok"], true, "{auth}");
    assert_eq!(auth["sdkRight"]["tools"], tools().len(), "{auth}");

    let root = std::fs::canonicalize(project.path()).expect("project");
    for mode in ["legacy", "auto"] {
        sim.push(Reply::stream(vec![text(ANSWER)]));
        let args: Vec<String> = [
            "http",
            mode,
            &root.display().to_string(),
            MODEL,
            &url,
            &token,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let report = run_script("server_client.py", &args, &daemon.home).await;
        check_report(&report, mode);
    }

    // A new token replaces the old one at once.
    call(&client, "mcpToken.rotate", json!({})).await;
    let stale = http()
        .post(&url)
        .bearer_auth(&token)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .expect("POST");
    assert_eq!(stale.status().as_u16(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_bind_waits_for_a_token() {
    let port = free_port();
    let env = http_env(port, "0.0.0.0").await;
    let (mut daemon, client) = (env.daemon, env.client);
    call(&client, "daemon.status", json!({})).await;
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "listening on 0.0.0.0 without a token"
    );
    call(&client, "mcpToken.rotate", json!({})).await;
    drop(client);
    assert!(daemon.terminate(), "totemd stopped cleanly");
    let home = daemon.home.clone();
    let restarted = TestDaemon::start_in(&home);
    restarted.client().await;
    let answer = http()
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .expect("the listener is up once a token exists");
    assert_eq!(answer.status().as_u16(), 401);
    drop(restarted);
    drop(env._home);
}

/// totemd with the MCP HTTP listener enabled in settings.json, an Ollama simulator as provider
/// `sim` and an opened project. The home outlives the daemon (the caller may restart it).
async fn http_env(port: u16, bind: &str) -> HttpEnv {
    let home_dir = tempfile::tempdir().expect("home");
    let home = home_dir.path().to_path_buf();
    std::fs::write(
        home.join("settings.json"),
        json!({"version": 1, "mcpServer": {"http": {"enabled": true, "port": port, "bind": bind}}})
            .to_string(),
    )
    .expect("settings.json");
    let sim = Sim::start(SimKind::Ollama).await;
    let daemon = TestDaemon::start_in(&home);
    let client = daemon.client().await;
    call(
        &client,
        "provider.add",
        json!({"name": "sim", "kind": "ollama", "url": sim.url(),
               "defaultModel": "llama3.2:latest", "maxRetries": 0}),
    )
    .await;
    let project = tempfile::tempdir().expect("project");
    std::fs::write(project.path().join("README.md"), "# demo\n").expect("readme");
    call(&client, "project.open", json!({"path": project.path()})).await;
    HttpEnv {
        sim,
        daemon,
        client,
        project,
        _home: home_dir,
    }
}

struct HttpEnv {
    sim: Sim,
    daemon: TestDaemon,
    client: Client,
    project: tempfile::TempDir,
    _home: tempfile::TempDir,
}

/// What every full client run must have seen.
fn check_report(report: &Value, mode: &str) {
    let era = if mode == "legacy" {
        "2025-11-25"
    } else {
        "2026-07-28"
    };
    assert_eq!(report["protocolVersion"], era, "{mode}: {report}");
    assert_eq!(report["serverName"], "totem", "{mode}");
    assert_eq!(report["tools"], json!(tools()), "{mode}");
    assert_eq!(report["toolsWithOutputSchema"], json!(tools()), "{mode}");
    for core in CORE_TOOLS {
        assert!(
            report["tools"]
                .as_array()
                .is_some_and(|t| t.contains(&json!(core))),
            "{core}"
        );
    }
    assert_eq!(report["session"]["title"], "from mcp");
    let ask = &report["ask"];
    assert_eq!(ask["run"]["status"], "done", "{mode}: {ask}");
    assert_eq!(ask["text"], ANSWER, "{mode}: {ask}");
    assert!(
        report["askText"].as_str().unwrap_or("").contains(ANSWER),
        "{mode}: the text content carries the result too"
    );
    let progress: Vec<&str> = report["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(|p| p["message"].as_str())
        .collect();
    assert!(progress.contains(&"run started"), "{mode}: {progress:?}");
    assert!(progress.contains(&ANSWER), "{mode}: {progress:?}");
    assert_eq!(report["runGet"], *ask, "{mode}");
    assert_eq!(report["runWait"], *ask, "{mode}");
    let messages = report["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2, "{mode}: {messages:?}");
    assert_eq!(messages[1]["parts"][0]["text"], ANSWER);
    assert_eq!(report["diff"]["files"], json!([]));
    assert!(
        report["sessionIds"]
            .as_array()
            .expect("sessions")
            .contains(&report["session"]["id"])
    );
    assert_eq!(report["missingIsError"], true, "{mode}");
    assert!(
        report["missingText"]
            .as_str()
            .unwrap_or("")
            .contains("ses_missing"),
        "{mode}: {report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refuses_bad_json_with_400_and_an_endless_body_at_once() {
    let port = free_port();
    let env = http_env(port, "127.0.0.1").await;
    let token = call(&env.client, "mcpToken.rotate", json!({})).await["token"]
        .as_str()
        .expect("token")
        .to_string();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let post = |body: &'static str| {
        http()
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
    };
    let bad = post("{not json").send().await.expect("an answer");
    assert_eq!(bad.status().as_u16(), 400);
    assert!(
        bad.text()
            .await
            .unwrap_or_default()
            .contains("not valid JSON")
    );

    // A body announced as 1 TB is refused before anything is read.
    let started = std::time::Instant::now();
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).await.expect("send");
    let mut answer = vec![0u8; 512];
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut answer))
        .await
        .expect("an answer within 10 s")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
