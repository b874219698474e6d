//! Driving Totem from another agent with approvals, against the official MCP Python SDK as the
//! host: a question of a run the client started goes to the host's person as
//! `elicitation/create` (with the diff), whose answer the daemon takes (once, deny, decline); an
//! answer from another socket client first withdraws the form; over stdio and over HTTP. And the
//! user's pre-approval (`mcpServer.allow` in settings.json), which no tool argument can widen.

mod agent_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_common::{Env, MODEL, text, tool};
use serde_json::{Value, json};
use totem_protocol::{EventKind, PermissionReply};
use totem_tests::harness::{TestDaemon, binary};

fn python() -> PathBuf {
    totem_tests::external::python_venv("mcp", &["mcp==2.3.0"]).join("python")
}

/// How the host reaches Totem: `totem mcp` on stdio, or totemd's HTTP listener.
enum Transport {
    Stdio,
    Http { url: String, token: String },
}

/// `approval_client.py`: the host's person does `answer` with every form while the client calls
/// session_ask once with `extra` arguments.
fn approval_client(
    env: &Env,
    transport: &Transport,
    answer: &str,
    extra: Value,
    elicited: &Path,
) -> tokio::process::Command {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/approval_client.py");
    let mut command = tokio::process::Command::new(python());
    command
        .arg(script)
        .args([answer, &env.session, MODEL, &extra.to_string()])
        .env("TOTEM_HOME", &env.daemon.home)
        .env("TOTEM_ELICITED", elicited)
        .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
        .kill_on_drop(true);
    match transport {
        Transport::Stdio => {
            command.args(["stdio", "--"]).arg(binary("totem")).args([
                "--socket",
                &env.daemon.socket.display().to_string(),
                "mcp",
                "--project",
                &env.root().display().to_string(),
            ]);
        }
        Transport::Http { url, token } => {
            command.args(["http", url, token]);
        }
    }
    command
}

/// Waits for the client's report.
async fn report(command: &mut tokio::process::Command) -> Value {
    let output = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("the Python client finished in time")
        .expect("run the Python client");
    totem_tests::external::script_report("approval_client", &output)
}

/// Runs the client to its end with `answer`.
async fn ask(env: &Env, transport: &Transport, answer: &str, extra: Value) -> Value {
    let elicited = env.daemon.home.join("elicited");
    report(&mut approval_client(
        env, transport, answer, extra, &elicited,
    ))
    .await
}

/// The model writes `a.txt`, then says `after`.
fn write_then(env: &Env, after: &str) {
    env.push(vec![tool(
        "w1",
        "write",
        json!({"path": "a.txt", "content": "hello\n"}),
    )]);
    env.push(vec![text(after)]);
}

/// The answers the session's questions got so far, in order.
async fn resolutions(env: &Env) -> Vec<(String, Option<PermissionReply>)> {
    let mut stream = env.subscribe().await;
    let mut found = Vec::new();
    // Replay only: everything stored so far arrives at once.
    while let Ok(Some(Ok(event))) =
        tokio::time::timeout(Duration::from_millis(500), stream.next()).await
    {
        if let EventKind::PermissionResolved {
            question_id, reply, ..
        } = event.kind
        {
            found.push((question_id, reply));
        }
    }
    found
}

fn check_form(report: &Value) {
    let forms = report["elicitations"].as_array().expect("elicitations");
    assert_eq!(forms.len(), 1, "one question, one form: {report}");
    let message = forms[0]["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("Totem wants to change a.txt:\n\n") && message.contains("+hello"),
        "a sentence, then the diff: {message}"
    );
    assert!(!message.contains("built-in"), "no rule trace: {message}");
    let choices: Vec<&str> = forms[0]["schema"]["properties"]["answer"]["oneOf"]
        .as_array()
        .expect("choices")
        .iter()
        .filter_map(|c| c["const"].as_str())
        .collect();
    assert_eq!(choices, ["once", "alwaysSession", "deny"], "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_allowed_once_at_the_host_is_written() {
    let env = Env::start().await;
    write_then(&env, "Wrote a.txt.");
    let report = ask(&env, &Transport::Stdio, "once", json!({})).await;
    check_form(&report);
    assert_eq!(report["isError"], false, "{report}");
    assert_eq!(report["ask"]["run"]["status"], "done", "{report}");
    assert_eq!(report["ask"]["text"], "Wrote a.txt.", "{report}");
    assert!(report["ask"].get("questions").is_none(), "{report}");
    assert_eq!(env.file("a.txt"), "hello\n");
    let answers = resolutions(&env).await;
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].1, Some(PermissionReply::Once));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_denied_or_declined_at_the_host_is_not_written_and_the_run_goes_on() {
    let env = Env::start().await;
    for answer in ["deny", "decline"] {
        write_then(&env, "Left a.txt alone.");
        let report = ask(&env, &Transport::Stdio, answer, json!({})).await;
        check_form(&report);
        assert_eq!(report["ask"]["run"]["status"], "done", "{answer}: {report}");
        assert_eq!(report["ask"]["text"], "Left a.txt alone.", "{answer}");
        assert!(
            !env.root().join("a.txt").exists(),
            "{answer}: a.txt was written"
        );
    }
    let answers = resolutions(&env).await;
    assert_eq!(answers.len(), 2, "{answers:?}");
    for (_, reply) in answers {
        assert!(
            matches!(reply, Some(PermissionReply::Deny { .. })),
            "{reply:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_dismissed_at_the_host_leaves_the_question_to_others() {
    let env = Env::start().await;
    write_then(&env, "Wrote a.txt.");
    let report = ask(&env, &Transport::Stdio, "cancel", json!({})).await;
    assert_eq!(report["elicitations"].as_array().map(Vec::len), Some(1));
    assert_eq!(report["ask"]["run"]["status"], "running", "{report}");
    let question = &report["ask"]["questions"][0];
    assert_eq!(question["target"], "a.txt", "{report}");
    // Someone in `totem attach` answers it later.
    env.client
        .call_raw(
            "permission.reply",
            json!({"sessionId": env.session, "questionId": question["id"],
                   "reply": {"type": "once"}}),
        )
        .await
        .expect("the question still waits");
    let done = env
        .client
        .call_raw(
            "run.wait",
            json!({"runId": report["ask"]["run"]["id"], "timeoutMs": 30000}),
        )
        .await
        .expect("run.wait");
    assert_eq!(done["run"]["status"], "done", "{done}");
    assert_eq!(env.file("a.txt"), "hello\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_from_another_client_first_withdraws_the_form() {
    let env = Env::start().await;
    write_then(&env, "Wrote a.txt.");
    let elicited = env.daemon.home.join("elicited");
    let mut command = approval_client(&env, &Transport::Stdio, "late", json!({}), &elicited);
    let host = tokio::spawn(async move { report(&mut command).await });
    // The form is on the host's screen; then a person in `totem attach` answers first.
    let mut shown = false;
    for _ in 0..600 {
        if elicited.exists() {
            shown = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(shown, "the host was asked");
    let waiting = env
        .client
        .call_raw("permission.list", json!({"sessionId": env.session}))
        .await
        .expect("permission.list");
    let question_id = waiting["questions"][0]["id"].clone();
    env.client
        .call_raw(
            "permission.reply",
            json!({"sessionId": env.session, "questionId": question_id,
                   "reply": {"type": "once"}}),
        )
        .await
        .expect("the first answer");
    let report = host.await.expect("the host's report");
    assert_eq!(
        report["withdrawn"], true,
        "the form was taken back: {report}"
    );
    assert_eq!(report["lateAnswer"], false, "{report}");
    assert_eq!(report["ask"]["run"]["status"], "done", "{report}");
    assert_eq!(env.file("a.txt"), "hello\n", "the first answer (once) held");
    let answers = resolutions(&env).await;
    assert_eq!(
        answers,
        vec![(
            question_id.as_str().unwrap_or("").to_string(),
            Some(PermissionReply::Once)
        )],
        "answered once, by the first"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_is_asked_over_http_too() {
    let home = tempfile::tempdir().expect("home");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    std::fs::write(
        home.path().join("settings.json"),
        json!({"version": 1, "mcpServer": {"http": {"enabled": true, "port": port}}}).to_string(),
    )
    .expect("settings.json");
    let project = tempfile::tempdir().expect("project");
    std::fs::write(project.path().join("README.md"), "# demo\n").expect("readme");
    let env = Env::start_on(TestDaemon::start_in(home.path()), project).await;
    let token = env
        .client
        .call_raw("mcpToken.rotate", json!({}))
        .await
        .expect("token")["token"]
        .as_str()
        .expect("token")
        .to_string();
    let http = Transport::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        token,
    };
    write_then(&env, "Wrote a.txt.");
    let report = ask(&env, &http, "once", json!({})).await;
    check_form(&report);
    assert_eq!(report["ask"]["run"]["status"], "done", "{report}");
    assert_eq!(env.file("a.txt"), "hello\n");
}

/// Sets `mcpServer.allow` in the daemon's settings.json, keeping the rest.
fn pre_approve(home: &Path, rules: &[&str]) {
    let path = home.join("settings.json");
    let mut settings: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({"version": 1}));
    settings["mcpServer"]["allow"] = json!(rules);
    std::fs::write(&path, serde_json::to_vec_pretty(&settings).expect("encode")).expect("write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_user_pre_approves_what_mcp_runs_may_do() {
    let env = Env::start().await;
    // The calling model cannot grant itself anything: an `allow` argument is refused.
    let report = ask(&env, &Transport::Stdio, "none", json!({"allow": ["edit"]})).await;
    assert_eq!(report["isError"], true, "{report}");
    assert!(
        report["text"].as_str().unwrap_or("").contains("allow"),
        "{report}"
    );
    // Nor does naming the default mode lift the question; a host that cannot ask gets it back.
    env.push(vec![tool(
        "w0",
        "write",
        json!({"path": "a.txt", "content": "hello\n"}),
    )]);
    let report = ask(&env, &Transport::Stdio, "none", json!({"mode": "build"})).await;
    assert_eq!(report["ask"]["run"]["status"], "running", "{report}");
    assert_eq!(report["ask"]["questions"][0]["target"], "a.txt", "{report}");
    assert!(!env.root().join("a.txt").exists(), "written without a yes");
    // Its model is told in words that a person answers in `totem attach` (issue 35 item 6).
    let said = report["text"].as_str().unwrap_or("");
    assert!(
        said.starts_with(
            "The run is waiting for a person to answer a permission question in `totem attach`"
        ),
        "{report}"
    );
    assert_eq!(report["isError"], false, "{report}");
    env.client
        .call_raw("session.abort", json!({"sessionId": env.session}))
        .await
        .expect("abort");
    let run_id = report["ask"]["run"]["id"].clone();
    for _ in 0..100 {
        let now = env
            .client
            .call_raw("run.get", json!({"runId": run_id}))
            .await
            .expect("run.get");
        if now["run"]["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The user pre-approves edits for runs other agents start: no question, the file is written.
    pre_approve(&env.daemon.home, &["edit"]);
    write_then(&env, "Wrote a.txt.");
    let report = ask(&env, &Transport::Stdio, "none", json!({})).await;
    assert_eq!(report["ask"]["run"]["status"], "done", "{report}");
    assert!(report["ask"].get("questions").is_none(), "{report}");
    assert_eq!(env.file("a.txt"), "hello\n");
    // A run the user starts in the same session still asks: the rule is for MCP runs only.
    env.push(vec![tool(
        "w2",
        "write",
        json!({"path": "b.txt", "content": "b\n"}),
    )]);
    let run = env.prompt("write b.txt", json!({})).await;
    let mut stream = env.subscribe().await;
    let asked = loop {
        let event = agent_common::next_event(&mut stream, 20).await;
        if let EventKind::PermissionAsked { question } = &event.kind
            && question.run_id == run
        {
            break question.clone();
        }
        let ended = event.kind.ended_run().is_some_and(|r| r.id == run);
        assert!(!ended, "the user's run ended without asking");
    };
    assert_eq!(asked.target, "b.txt");
}

/// A host speaking MCP's JSON-RPC lines to `totem mcp` itself, so that it can do what the SDKs
/// do not let a test do: answer a form after the server took it back.
struct RawHost {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl RawHost {
    /// `totem mcp` for `env`'s project, initialized with form elicitation.
    async fn start(env: &Env) -> RawHost {
        let mut child = tokio::process::Command::new(binary("totem"))
            .args(["--socket", &env.daemon.socket.display().to_string()])
            .args(["mcp", "--project", &env.root().display().to_string()])
            .env("TOTEM_HOME", &env.daemon.home)
            .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start totem mcp");
        let stdin = child.stdin.take().expect("its stdin");
        let stdout = child.stdout.take().expect("its stdout");
        let mut host = RawHost {
            child,
            stdin,
            stdout: tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout)),
        };
        host.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "raw-host", "version": "1"}
            }}),
        )
        .await;
        let answer = host.next().await;
        assert_eq!(answer["id"], 1, "{answer}");
        host.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        host
    }

    async fn send(&mut self, message: Value) {
        use tokio::io::AsyncWriteExt;
        let mut line = message.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to totem mcp");
    }

    /// The next message from the server.
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), self.stdout.next_line())
            .await
            .expect("a message in time")
            .expect("read")
            .expect("totem mcp still talks");
        serde_json::from_str(&line).expect("a JSON-RPC message")
    }

    /// Calls `tool` with `arguments` as request `id`.
    async fn call(&mut self, id: u64, tool: &str, arguments: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}}))
            .await;
    }
}

impl Drop for RawHost {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Issue 35 item 2: `session_ask` honours `timeoutMs` while a form is open: the call answers
/// then with the run still waiting on its question, the form is taken back
/// (`notifications/cancelled`), and an answer the host sends after that is applied. A host that
/// gives up on the call itself gets the form taken back too, and its answer still counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_open_at_timeout_ms_is_taken_back_and_a_late_answer_still_counts() {
    let env = Env::start().await;
    write_then(&env, "Wrote a.txt.");
    let mut host = RawHost::start(&env).await;
    let asked_at = std::time::Instant::now();
    host.call(
        2,
        "session_ask",
        json!({"sessionId": env.session, "text": "write a.txt", "model": MODEL, "timeoutMs": 3000}),
    )
    .await;
    let mut form = None;
    let mut withdrawn = false;
    let mut result = None;
    while result.is_none() || !withdrawn {
        let message = host.next().await;
        match message["method"].as_str() {
            Some("elicitation/create") => form = Some(message["id"].clone()),
            Some("notifications/cancelled") => {
                assert_eq!(
                    Some(&message["params"]["requestId"]),
                    form.as_ref(),
                    "{message}"
                );
                withdrawn = true;
            }
            _ if message["id"] == 2 => result = Some(message["result"].clone()),
            _ => {}
        }
    }
    let took = asked_at.elapsed();
    let result = result.unwrap_or_default();
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(20),
        "answered at timeoutMs: {took:?}"
    );
    let ask = &result["structuredContent"];
    assert_eq!(ask["run"]["status"], "running", "{result}");
    assert_eq!(ask["questions"][0]["target"], "a.txt", "{result}");
    // The person clicked "Allow once" as the form went: the answer is applied.
    host.send(
        json!({"jsonrpc": "2.0", "id": form.clone().unwrap_or_default(),
                     "result": {"action": "accept", "content": {"answer": "once"}}}),
    )
    .await;
    host.call(
        3,
        "run_wait",
        json!({"runId": ask["run"]["id"], "timeoutMs": 30000}),
    )
    .await;
    let done = loop {
        let message = host.next().await;
        if message["id"] == 3 {
            break message["result"]["structuredContent"].clone();
        }
    };
    assert_eq!(done["run"]["status"], "done", "{done}");
    assert_eq!(env.file("a.txt"), "hello\n");

    // The host gives up on the call itself (its own timeout): the form goes with it.
    env.push(vec![tool(
        "w2",
        "write",
        json!({"path": "b.txt", "content": "bye\n"}),
    )]);
    env.push(vec![text("Wrote b.txt.")]);
    host.call(
        4,
        "session_ask",
        json!({"sessionId": env.session, "text": "write b.txt", "model": MODEL}),
    )
    .await;
    let form = loop {
        let message = host.next().await;
        if message["method"] == "elicitation/create" {
            break message["id"].clone();
        }
    };
    host.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 4, "reason": "the host's timeout"}}),
    )
    .await;
    loop {
        let message = host.next().await;
        if message["method"] == "notifications/cancelled" {
            assert_eq!(message["params"]["requestId"], form, "{message}");
            break;
        }
    }
    host.send(json!({"jsonrpc": "2.0", "id": form,
                     "result": {"action": "accept", "content": {"answer": "once"}}}))
        .await;
    // The run takes the answer and writes b.txt.
    for _ in 0..300 {
        if env.file("b.txt") == "bye\n" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(env.file("b.txt"), "bye\n", "the late answer was applied");
}

/// Issue 35 item 6: a run that fails (here for a model no provider has) is an error for the host,
/// with the reason in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_fails_is_an_error_for_the_host() {
    let env = Env::start().await;
    let report = ask(
        &env,
        &Transport::Stdio,
        "none",
        json!({"model": "sim/no-such-model"}),
    )
    .await;
    assert_eq!(report["ask"]["run"]["status"], "failed", "{report}");
    assert_eq!(report["isError"], true, "{report}");
    assert!(
        report["text"]
            .as_str()
            .unwrap_or("")
            .starts_with("The run failed: "),
        "{report}"
    );
}
