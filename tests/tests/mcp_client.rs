//! Totem's MCP client against a server that is not ours: the reference server
//! `@modelcontextprotocol/server-everything` from npm, over stdio and over streamable HTTP, driven
//! by real runs with a scripted model. The server starts only after the user allowed it; its tools
//! reach the model as `everything_<tool>`, its prompts through `mcp_prompt`, its resources through
//! `mcp_resource` (listed freely, read after the permission rules); a failing tool, a
//! timeout and a server killed mid-call give the model an error and the run goes on.

mod agent_common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agent_common::{Env, follow, is_run_end, last, next_event, results, text, tool};
use serde_json::{Value, json};
use totem_protocol::{EventKind, QuestionKind};
use totem_tests::setup::configure_servers;

/// The reference server's version this test was written against.
const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

/// The server's entry point, installed once from npm.
fn everything_js() -> PathBuf {
    let dir = totem_tests::external::npm_install("mcp-everything", &[EVERYTHING]);
    dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

fn stdio_server(extra: Value) -> Value {
    let mut server = json!({
        "command": "node",
        "args": [everything_js(), "stdio"],
        "tools": ["echo", "get-sum", "trigger-long-running-operation", "get-tiny-image"]
    });
    if let (Some(s), Some(e)) = (server.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    server
}

/// The tool names offered in a recorded Ollama request.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// The description of tool `name` in a recorded Ollama request; panics when it is not offered.
fn description(request: &Value, name: &str) -> String {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t.pointer("/function/name") == Some(&json!(name)))
        .and_then(|t| t.pointer("/function/description"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{name} is not offered"))
        .to_string()
}

/// The text of every message of a recorded request.
fn conversation(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_tool_result_reaches_the_model_after_the_user_allowed_the_server() {
    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({"everything": stdio_server(json!({}))}),
    );
    env.push(vec![tool(
        "c1",
        "everything_echo",
        json!({"message": "hello from totem"}),
    )]);
    env.push(vec![text("It echoed.")]);
    let mut stream = env.subscribe().await;
    env.prompt("echo something", json!({})).await;

    // First the question to start the server, answered "always for this project"; then the
    // tool call's own question, answered once.
    let mut kinds = Vec::new();
    let events = loop {
        let e = next_event(&mut stream, 60).await;
        if let EventKind::PermissionAsked { question } = &e.kind {
            kinds.push((question.kind, question.target.clone()));
            let answer = if question.kind == QuestionKind::McpServer {
                json!({"type": "alwaysProject"})
            } else {
                json!({"type": "once"})
            };
            env.reply(&question.id, answer).await;
        }
        if is_run_end(&e.kind) {
            break vec![e];
        }
    };
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{events:?}"
    );
    assert_eq!(
        kinds,
        vec![
            (QuestionKind::McpServer, "everything".to_string()),
            (QuestionKind::Mcp, "everything/echo".to_string())
        ]
    );
    let requests = env.sim.chat_requests();
    assert_eq!(requests.len(), 2);
    let tools = offered(&requests[0].body);
    assert!(tools.contains(&"everything_echo".to_string()), "{tools:?}");
    assert!(tools.contains(&"mcp_prompt".to_string()), "{tools:?}");
    // The whitelist keeps the other tools away from the model.
    assert!(
        !tools.contains(&"everything_get-env".to_string()),
        "{tools:?}"
    );
    assert!(conversation(&requests[1].body).contains("Echo: hello from totem"));

    // A new session of the same project: the server starts without asking again.
    let project_id = env
        .client
        .call_raw("session.get", json!({"sessionId": env.session}))
        .await
        .expect("session.get")["projectId"]
        .clone();
    let other = env
        .client
        .call_raw("session.create", json!({"projectId": project_id}))
        .await
        .expect("session.create")["id"]
        .as_str()
        .expect("id")
        .to_string();
    env.push(vec![text("Nothing to do.")]);
    let mut stream = env.client.subscribe(&other, 0).await.expect("subscribe");
    env.client
        .call_raw(
            "session.prompt",
            json!({"sessionId": other, "text": "hi", "model": agent_common::MODEL}),
        )
        .await
        .expect("prompt");
    loop {
        let e = next_event(&mut stream, 60).await;
        assert!(
            !matches!(&e.kind, EventKind::PermissionAsked { .. }),
            "asked again: {e:?}"
        );
        if is_run_end(&e.kind) {
            assert!(matches!(e.kind, EventKind::RunDone { .. }), "{e:?}");
            break;
        }
    }
    let requests = env.sim.chat_requests();
    assert!(offered(&requests[2].body).contains(&"everything_echo".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_comes_through_mcp_prompt() {
    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({"everything": stdio_server(json!({}))}),
    );
    env.push(vec![tool(
        "c1",
        "mcp_prompt",
        json!({"server": "everything", "name": "args-prompt", "arguments": {"city": "Lyon"}}),
    )]);
    env.push(vec![text("Got the prompt.")]);
    // Rules granted for the run answer both questions: starting the server and getting prompts.
    let events = env
        .run_done(
            "use the prompt",
            json!({"allow": ["mcp_server(everything)", "mcp_prompt"]}),
            agent_common::Answer::None,
        )
        .await;
    let got = results(&events);
    assert_eq!(got.len(), 1);
    assert!(!got[0].2, "{got:?}");
    assert!(got[0].1.contains("What's weather in Lyon?"), "{got:?}");
    let requests = env.sim.chat_requests();
    let description = description(&requests[0].body, "mcp_prompt");
    assert!(
        description.contains("everything/args-prompt(city*, state)"),
        "{description}"
    );
    assert!(conversation(&requests[1].body).contains("What's weather in Lyon?"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_are_listed_and_read_through_mcp_resource_after_asking() {
    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({"everything": stdio_server(json!({}))}),
    );
    let doc = "demo://resource/static/document/architecture.md";
    env.push(vec![tool("c1", "mcp_resource", json!({}))]);
    env.push(vec![tool(
        "c2",
        "mcp_resource",
        json!({"server": "everything", "uri": doc}),
    )]);
    // Without `server`: the only server with resources has it.
    env.push(vec![tool(
        "c3",
        "mcp_resource",
        json!({"uri": "demo://resource/dynamic/blob/7"}),
    )]);
    env.push(vec![tool(
        "c4",
        "mcp_resource",
        json!({"server": "everything", "uri": "demo://resource/dynamic/text/3"}),
    )]);
    env.push(vec![text("Read them.")]);
    let mut stream = env.subscribe().await;
    env.prompt(
        "read the docs",
        json!({"allow": ["mcp_server(everything)"]}),
    )
    .await;
    // Listing asks nothing; each read asks (the blob once, the text resource denied).
    let mut asked = Vec::new();
    let mut events = Vec::new();
    loop {
        let e = next_event(&mut stream, 60).await;
        if let EventKind::PermissionAsked { question } = &e.kind {
            asked.push((question.kind, question.target.clone()));
            let answer = match question.target.contains("/text/") {
                true => json!({"type": "deny"}),
                false => json!({"type": "once"}),
            };
            env.reply(&question.id, answer).await;
        }
        let end = is_run_end(&e.kind);
        events.push(e);
        if end {
            break;
        }
    }
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{events:?}"
    );
    assert_eq!(
        asked,
        vec![
            (QuestionKind::Mcp, format!("everything/{doc}")),
            (
                QuestionKind::Mcp,
                "everything/demo://resource/dynamic/blob/7".to_string()
            ),
            (
                QuestionKind::Mcp,
                "everything/demo://resource/dynamic/text/3".to_string()
            ),
        ]
    );
    let requests = env.sim.chat_requests();
    let definition = description(&requests[0].body, "mcp_resource");
    assert!(
        definition.contains("Servers with resources: everything ("),
        "{definition}"
    );
    let got = results(&events);
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(!got[0].2, "{got:?}");
    assert!(
        got[0].1.contains(doc),
        "the list names the document: {got:?}"
    );
    assert!(
        got[0]
            .1
            .contains("demo://resource/dynamic/text/{resourceId}"),
        "the list names the templates: {got:?}"
    );
    assert!(
        !got[1].2 && got[1].1.contains("# Everything Server – Architecture"),
        "{got:?}"
    );
    assert!(
        !got[2].2
            && got[2]
                .1
                .starts_with("[binary resource demo://resource/dynamic/blob/7 (text/plain, ")
            && got[2].1.ends_with(" bytes) not shown]"),
        "a blob is a note: {got:?}"
    );
    assert!(got[3].2, "the denied read is an error: {got:?}");
    assert!(!got[3].1.contains("plaintext resource"), "{got:?}");
    assert!(conversation(&requests[2].body).contains("# Everything Server – Architecture"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_tool_is_an_error_for_the_model_and_the_run_goes_on() {
    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({"everything": stdio_server(json!({}))}),
    );
    env.push(vec![tool("c0", "sum_numbers", json!({"a": 1, "b": 2}))]);
    env.push(vec![tool(
        "c1",
        "everything_get-sum",
        json!({"a": "not a number", "b": 2}),
    )]);
    env.push(vec![tool(
        "c2",
        "everything_get-sum",
        json!({"a": 40, "b": 2}),
    )]);
    env.push(vec![text("The sum is 42.")]);
    let events = env
        .run_done(
            "add",
            json!({"allow": ["mcp_server(everything)", "everything_get-sum"]}),
            agent_common::Answer::None,
        )
        .await;
    let got = results(&events);
    assert_eq!(got.len(), 3, "{got:?}");
    // A name no tool has: the answer lists the MCP tools beside the built-in ones.
    assert!(got[0].2, "{got:?}");
    assert!(got[0].1.contains("unknown tool"), "{got:?}");
    assert!(got[0].1.contains("from MCP servers: "), "{got:?}");
    assert!(got[0].1.contains("everything_get-sum"), "{got:?}");
    assert!(got[1].2, "the bad call is an error: {got:?}");
    assert!(!got[2].2, "{got:?}");
    assert!(got[2].1.contains("42"), "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_is_a_clear_error_and_a_notice() {
    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({"everything": stdio_server(json!({}))}),
    );
    env.push(vec![tool(
        "c1",
        "everything_trigger-long-running-operation",
        json!({"duration": 30, "steps": 30}),
    )]);
    env.push(vec![text("The server is gone; going on without it.")]);
    let mut stream = env.subscribe().await;
    let run = env
        .prompt(
            "run the long thing",
            json!({"allow": ["mcp_server(everything)", "mcp(everything/*)"]}),
        )
        .await;
    // Wait for the call to start, then kill the server's process.
    loop {
        let e = next_event(&mut stream, 60).await;
        if let EventKind::PartStarted { part_type, .. } = &e.kind
            && *part_type == totem_protocol::PartType::ToolResult
        {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = server_pid(env.daemon.pid()).expect("the server runs under totemd");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the server");
    let started = Instant::now();
    let events = follow(&env, &mut stream, &run, agent_common::Answer::None).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the call waited for its timeout"
    );
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{events:?}"
    );
    let got = results(&events);
    assert!(got[0].2, "{got:?}");
    assert!(
        got[0].1.contains("MCP server `everything` stopped"),
        "{got:?}"
    );
    assert!(events.iter().any(|e| matches!(&e.kind,
        EventKind::Notice { level, text, .. } if *level == totem_protocol::NoticeLevel::Error && text.contains("`everything` stopped"))));
    // The model's next request no longer offers the dead server's tools.
    let requests = env.sim.chat_requests();
    assert!(
        !offered(&requests[1].body)
            .iter()
            .any(|t| t.starts_with("everything_"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tool_times_out_with_an_error_and_a_notice() {
    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        // The timeout bounds the server's start too: room for a loaded machine's.
        json!({"everything": stdio_server(json!({"timeoutSecs": 5}))}),
    );
    env.push(vec![tool(
        "c1",
        "everything_trigger-long-running-operation",
        json!({"duration": 20, "steps": 2}),
    )]);
    env.push(vec![text("Too slow.")]);
    let events = env
        .run_done(
            "slow",
            json!({"allow": ["mcp_server(everything)", "mcp(everything/*)"]}),
            agent_common::Answer::None,
        )
        .await;
    let got = results(&events);
    assert!(
        got[0].2 && got[0].1.contains("did not answer within 5 s"),
        "{got:?}"
    );
    assert!(events.iter().any(|e| matches!(&e.kind,
        EventKind::Notice { level, text, .. } if *level == totem_protocol::NoticeLevel::Warning && text.contains("within 5 s"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_server_does_not_start_and_the_run_goes_on() {
    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({"everything": stdio_server(json!({}))}),
    );
    env.push(vec![text("Fine without it.")]);
    let mut stream = env.subscribe().await;
    let run = env.prompt("hello", json!({})).await;
    let events = loop {
        let e = next_event(&mut stream, 60).await;
        if let EventKind::PermissionAsked { question } = &e.kind {
            assert_eq!(question.kind, QuestionKind::McpServer);
            assert_eq!(question.call_id, "");
            assert_eq!(
                question.always,
                json!({"mcp_server": {"everything": "allow"}})
            );
            env.reply(&question.id, json!({"type": "deny"})).await;
        }
        if is_run_end(&e.kind) {
            break vec![e];
        }
    };
    assert!(matches!(last(&events), EventKind::RunDone { .. }), "{run}");
    let requests = env.sim.chat_requests();
    assert!(
        !offered(&requests[0].body)
            .iter()
            .any(|t| t.starts_with("everything_"))
    );
    assert!(server_pid(env.daemon.pid()).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_tool_result_reaches_the_model() {
    let port = free_port();
    let mut server = std::process::Command::new("node")
        .arg(everything_js())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the HTTP server");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the HTTP server did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }

    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({"web": {"url": format!("http://127.0.0.1:{port}/mcp"),
                       "headers": {"X-Totem-Test": "1"}, "tools": ["echo"]}}),
    );
    env.push(vec![tool(
        "c1",
        "web_echo",
        json!({"message": "over http"}),
    )]);
    env.push(vec![text("Done.")]);
    let events = env
        .run(
            "echo over http",
            json!({"allow": ["mcp_server(web)", "web_echo"]}),
            agent_common::Answer::None,
        )
        .await;
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{events:?}"
    );
    let requests = env.sim.chat_requests();
    assert_eq!(
        offered(&requests[0].body)
            .iter()
            .filter(|t| t.starts_with("web_"))
            .count(),
        1
    );
    assert!(conversation(&requests[1].body).contains("Echo: over http"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_session_stops_its_server() {
    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({"everything": stdio_server(json!({}))}),
    );
    env.push(vec![text("Started.")]);
    let mut stream = env.subscribe().await;
    let run = env
        .prompt("hello", json!({"allow": ["mcp_server(everything)"]}))
        .await;
    follow(&env, &mut stream, &run, agent_common::Answer::None).await;
    let pid = server_pid(env.daemon.pid()).expect("the server runs under totemd");
    env.client
        .call_raw("session.delete", json!({"sessionId": env.session}))
        .await
        .expect("session.delete");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid) {
        assert!(Instant::now() < deadline, "the server outlived its session");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pid of a `server-everything` child of `parent`.
fn server_pid(parent: u32) -> Option<i32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split(' ').nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(parent) && cmdline.contains("server-everything") && !is_zombie(pid) {
            return Some(pid);
        }
    }
    None
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
        .unwrap_or(true)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_lists_the_servers_and_checks_commands_and_urls() {
    let listening = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let live = listening.local_addr().expect("addr").port();
    let dead = free_port();
    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({
            "everything": stdio_server(json!({})),
            "missing": {"command": "no-such-mcp-server-here"},
            "live": {"url": format!("http://127.0.0.1:{live}/mcp")},
            "dead": {"url": format!("http://127.0.0.1:{dead}/mcp")}
        }),
    );
    let mut command = std::process::Command::new(totem_tests::harness::binary("totem"));
    command
        .arg("--socket")
        .arg(&env.daemon.socket)
        .arg("doctor")
        .env("TOTEM_HOME", &env.daemon.home)
        .env("HOME", &env.daemon.home)
        .current_dir(env.project.path())
        .stdin(std::process::Stdio::null());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("run totem doctor");
    let report = String::from_utf8_lossy(&output.stdout).to_string();
    let line = |name: &str| {
        report
            .lines()
            .find(|l| l.contains(&format!("mcp {name} ")))
            .unwrap_or_else(|| panic!("no `mcp {name}` line in:\n{report}"))
            .trim_start()
            .to_string()
    };
    assert!(line("everything").starts_with("ok"), "{report}");
    assert!(
        line("live").starts_with("ok") && line("live").contains("answers"),
        "{report}"
    );
    assert!(
        line("missing").starts_with("fail") && line("missing").contains("not found"),
        "{report}"
    );
    assert!(
        line("dead").starts_with("fail") && line("dead").contains("does not answer"),
        "{report}"
    );
    assert_eq!(output.status.code(), Some(1), "{report}");
    drop(listening);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_reaches_the_next_request() {
    let bin = totem_tests::external::python_venv("mcp", &["mcp==2.3.0"]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/docs_server.py");
    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({"py": {"command": bin.join("python"), "args": [script]}}),
    );
    env.push(vec![tool("c1", "py_add_page_tool", json!({}))]);
    env.push(vec![tool(
        "c2",
        "py_read_page",
        json!({"title": "The config file"}),
    )]);
    env.push(vec![text("Read it.")]);
    let events = env
        .run_done(
            "add the tool",
            json!({"allow": ["mcp_server(py)", "mcp(py/*)"]}),
            agent_common::Answer::None,
        )
        .await;
    let requests = env.sim.chat_requests();
    assert!(!offered(&requests[0].body).contains(&"py_read_page".to_string()));
    // Its SDK declares resources but it lists none: no `mcp_resource`.
    assert!(!offered(&requests[0].body).contains(&"mcp_resource".to_string()));
    assert!(offered(&requests[1].body).contains(&"py_read_page".to_string()));
    let got = results(&events);
    assert!(
        !got[1].2 && got[1].1.contains("docs-marker-config"),
        "{got:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_offers_only_tools_the_server_marks_read_only() {
    let env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({"everything": stdio_server(json!({"tools": ["echo", "toggle-simulated-logging"]}))}),
    );
    env.push(vec![tool(
        "c1",
        "everything_toggle-simulated-logging",
        json!({}),
    )]);
    env.push(vec![text("Planned.")]);
    let events = env
        .run_done(
            "plan it",
            json!({"mode": "plan", "allow": ["mcp_server(everything)", "mcp(everything/*)"]}),
            agent_common::Answer::None,
        )
        .await;
    let tools = offered(&env.sim.chat_requests()[0].body);
    assert!(tools.contains(&"everything_echo".to_string()), "{tools:?}");
    assert!(
        !tools.contains(&"everything_toggle-simulated-logging".to_string()),
        "{tools:?}"
    );
    let got = results(&events);
    assert!(got[0].2 && got[0].1.contains("read-only mode"), "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_is_killed_when_the_daemon_stops() {
    let mut env = Env::start().await;
    configure_servers(
        &env.daemon.home,
        json!({"everything": stdio_server(json!({}))}),
    );
    env.push(vec![text("Started.")]);
    let mut stream = env.subscribe().await;
    let run = env
        .prompt("hello", json!({"allow": ["mcp_server(everything)"]}))
        .await;
    follow(&env, &mut stream, &run, agent_common::Answer::None).await;
    let pid = server_pid(env.daemon.pid()).expect("the server runs under totemd");
    assert!(env.daemon.terminate(), "totemd stops cleanly");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid) {
        assert!(Instant::now() < deadline, "the server outlived the daemon");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 30, item 11: a command server does not inherit the daemon's secret-looking variables
/// (`*KEY*`, a `DATABASE_URL` with a password); what its own `env` names it gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_server_does_not_inherit_secret_variables() {
    let daemon = totem_tests::harness::TestDaemon::start_with_env(&[
        ("HOSTILE_MCP_API_KEY", "MCP-KEY-SECRET-71ab"),
        ("DATABASE_URL", "postgres://app:MCP-DB-SECRET-2f0c@db/x"),
        ("HARMLESS_SETTING", "kept-3d9a"),
    ]);
    let env = Env::start_on(daemon, totem_tests::setup::plain_project()).await;
    configure_servers(
        &env.daemon.home,
        json!({"everything": stdio_server(json!({"env": {"GIVEN_TOKEN": "given-8e21"}}))}),
    );
    env.push(vec![text("Started.")]);
    let mut stream = env.subscribe().await;
    let run = env
        .prompt("hello", json!({"allow": ["mcp_server(everything)"]}))
        .await;
    follow(&env, &mut stream, &run, agent_common::Answer::None).await;
    let pid = server_pid(env.daemon.pid()).expect("the server runs under totemd");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    let environ = String::from_utf8_lossy(&environ);
    assert!(!environ.contains("MCP-KEY-SECRET-71ab"), "{environ}");
    assert!(!environ.contains("MCP-DB-SECRET-2f0c"), "{environ}");
    assert!(environ.contains("kept-3d9a"), "{environ}");
    assert!(environ.contains("GIVEN_TOKEN=given-8e21"), "{environ}");
}
