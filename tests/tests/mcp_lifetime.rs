//! How long the MCP servers Totem starts live, against servers written with the official Python
//! SDK (`tests/mcp/slow_server.py`, `tests/mcp/session_server.py`): headless runs in one project
//! share one instance, which stops after the idle time; the sessions of a project share one
//! session of a remote (streamable HTTP) server, ended with a `DELETE` after the idle time;
//! servers start at the same time, not one after another; a daemon killed with `kill -9` while a
//! server is busy in a call leaves nothing behind once it starts again.

mod agent_common;
mod cli_common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_common::{Answer, Env, next_event, text, tool};
use cli_common::{Cli, assert_exit};
use serde_json::{Value, json};
use totem_protocol::EventKind;
use totem_tests::sim::{Reply, Script, SimEvent};

fn python() -> PathBuf {
    totem_tests::external::python_venv("mcp", &["mcp==2.3.0"]).join("python")
}

/// A marker no other test's processes carry.
fn marker(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("totem-{what}-{}-{nanos}", std::process::id())
}

/// `slow_server.py --marker MARKER EXTRA…` as an `mcpServers` entry.
fn slow_server(marker: &str, extra: &[&str]) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/slow_server.py");
    let mut args = vec![json!(script), json!("--marker"), json!(marker)];
    args.extend(extra.iter().map(|a| json!(a)));
    json!({"command": python(), "args": args})
}

/// Writes `settings` keys into the settings.json of `home`.
fn configure(home: &Path, settings: Value) {
    let path = home.join("settings.json");
    let mut current: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}));
    if let (Some(current), Some(new)) = (current.as_object_mut(), settings.as_object()) {
        current.extend(new.clone());
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&current).expect("encode")).expect("write");
}

/// The live (not zombie) processes whose command line holds `marker`.
fn processes(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_none_or(|(_, rest)| rest.starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            out.push(pid);
        }
    }
    out
}

/// Waits until `count` processes carry `marker`; panics with `what` after `secs`.
fn wait_for_processes(marker: &str, count: usize, secs: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let found = processes(marker);
        if found.len() == count {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {found:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the run's MCP call to start (its tool-result part opens).
async fn wait_for_call(stream: &mut totem_client::EventStream) {
    loop {
        let e = next_event(stream, 60).await;
        if let EventKind::PartStarted { part_type, .. } = &e.kind
            && *part_type == totem_protocol::PartType::ToolResult
        {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_daemon_mid_call_leaves_no_server_once_it_starts_again() {
    let mut env = Env::start().await;
    let marker = marker("kill9");
    configure(
        &env.daemon.home,
        json!({"mcpServers": {"slow": slow_server(&marker, &[])}}),
    );
    env.push(vec![tool("c1", "slow_wait", json!({"seconds": 120}))]);
    env.push(vec![text("Waited.")]);
    let mut stream = env.subscribe().await;
    env.prompt(
        "wait a while",
        json!({"allow": ["mcp_server(slow)", "mcp(slow/*)"]}),
    )
    .await;
    wait_for_call(&mut stream).await;
    wait_for_processes(&marker, 1, 30, "the server runs");
    tokio::time::sleep(Duration::from_millis(500)).await;
    env.daemon.kill9();
    // Busy in its call, the server does not notice its stdin closing: it outlives the daemon.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        processes(&marker).len(),
        1,
        "the server outlives a killed daemon by itself"
    );
    let home = env.daemon.home.clone();
    let _daemon = totem_tests::harness::TestDaemon::start_in(&home);
    wait_for_processes(&marker, 0, 10, "the restarted daemon ended the server");
}

/// The `start MARKER T0 T1` lines the servers wrote to `log`: (marker, start, end).
fn starts(log: &Path) -> Vec<(String, f64, f64)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let parts: Vec<&str> = line.split_whitespace().collect();
            match parts.as_slice() {
                ["start", marker, t0, t1] => {
                    Some((marker.to_string(), t0.parse().ok()?, t1.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

#[test]
fn three_headless_runs_in_a_project_share_one_server_which_stops_when_idle() {
    let cli = Cli::new();
    std::fs::write(cli.project.path().join("README.md"), "# demo\n").expect("readme");
    let (runtime, sim) = cli_common::sim_settings(&cli);
    let marker = marker("shared");
    let log = cli.home().join("starts.log");
    let mut server = slow_server(&marker, &["--log", &log.to_string_lossy()]);
    server["allowAllProjects"] = json!(true);
    configure(
        cli.home(),
        json!({"mcpServerIdleSecs": 5, "mcpServers": {"slow": server}}),
    );
    for _ in 0..3 {
        {
            let _guard = runtime.enter();
            sim.push(Reply::Stream(Script::new(vec![SimEvent::text("Hello.")])));
        }
        let out = cli.run(["run", "--model", "sim/llama3.2:latest", "say hello"]);
        assert_exit(&out, 0);
    }
    let offered = sim.chat_requests();
    assert_eq!(offered.len(), 3);
    assert!(
        offered
            .iter()
            .all(|r| r.body.to_string().contains("slow_wait")),
        "every run was offered the server's tool"
    );
    assert_eq!(processes(&marker).len(), 1, "one server for three runs");
    assert_eq!(starts(&log).len(), 1, "started once: {:?}", starts(&log));
    wait_for_processes(&marker, 0, 30, "the idle server stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_slow_servers_start_at_the_same_time() {
    let env = Env::start().await;
    let log = env.daemon.home.join("starts.log");
    let log = log.to_string_lossy();
    let (one, two) = (marker("one"), marker("two"));
    configure(
        &env.daemon.home,
        json!({"mcpServers": {
            "one": slow_server(&one, &["--start-delay", "2", "--log", &log]),
            "two": slow_server(&two, &["--start-delay", "2", "--log", &log]),
        }}),
    );
    env.push(vec![text("Started.")]);
    let mut stream = env.subscribe().await;
    let run = env
        .prompt(
            "hello",
            json!({"allow": ["mcp_server(one)", "mcp_server(two)"]}),
        )
        .await;
    agent_common::follow(&env, &mut stream, &run, agent_common::Answer::None).await;
    let tools = env.sim.chat_requests()[0].body.to_string();
    assert!(
        tools.contains("one_wait") && tools.contains("two_wait"),
        "both servers started"
    );
    let windows = starts(Path::new(log.as_ref()));
    assert_eq!(windows.len(), 2, "{windows:?}");
    // Each server slept 2 s before serving: one after another, the second's sleep would begin
    // after the first's ended.
    let latest_begin = windows.iter().map(|w| w.1).fold(f64::MIN, f64::max);
    let earliest_end = windows.iter().map(|w| w.2).fold(f64::MAX, f64::min);
    assert!(
        latest_begin < earliest_end,
        "the start windows overlap: {windows:?}"
    );
}

/// The `open ID` and `close ID` lines `session_server.py` wrote to `log`.
fn http_sessions(log: &Path) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let ids = |what: &str| {
        text.lines()
            .filter_map(|l| l.strip_prefix(what))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    (ids("open "), ids("close "))
}

/// Kills the server process when the test ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projects_sessions_share_one_remote_server_session_ended_when_idle() {
    use std::io::BufRead;
    let mut env = Env::start().await;
    let log = env.daemon.home.join("sessions.log");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/session_server.py");
    let mut child = std::process::Command::new(python())
        .arg(script)
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start session_server.py");
    let stdout = child.stdout.take().expect("its stdout");
    let server = Killed(child);
    let mut port = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut port)
        .expect("the server's port");
    let url = format!("http://127.0.0.1:{}/mcp", port.trim());
    configure(
        &env.daemon.home,
        json!({"mcpServerIdleSecs": 5,
               "mcpServers": {"web": {"url": url, "allowAllProjects": true}}}),
    );

    // Two sessions of the project, a run in each: one session on the server.
    env.push(vec![text("First.")]);
    env.run_done("hello", json!({}), Answer::None).await;
    let project = totem_tests::setup::open_project(&env.client, env.project.path()).await;
    env.session = totem_tests::setup::create_session(&env.client, &project).await;
    env.push(vec![text("Second.")]);
    env.run_done("hello again", json!({}), Answer::None).await;
    let requests = env.sim.chat_requests();
    assert!(
        requests
            .iter()
            .all(|r| r.body.to_string().contains("web_ping")),
        "both runs were offered the server's tool"
    );
    let (opened, closed) = http_sessions(&log);
    assert_eq!(opened.len(), 1, "one server session for two: {opened:?}");
    assert!(closed.is_empty(), "closed while in use: {closed:?}");

    // Idle for 5 s: Totem ends the session on the server.
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_sessions(&log).1.is_empty() {
        assert!(Instant::now() < deadline, "the idle session was not ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(http_sessions(&log).1, opened, "the one session was ended");

    // The next run opens a new one.
    env.push(vec![text("Third.")]);
    env.run_done("and again", json!({}), Answer::None).await;
    assert!(
        env.sim.chat_requests()[2]
            .body
            .to_string()
            .contains("web_ping"),
        "offered again after the idle stop"
    );
    assert_eq!(http_sessions(&log).0.len(), 2, "a new session");
    drop(server);
}

/// The daemon's children that have ended and not been waited for (`<defunct>`).
fn zombies_of(parent: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") && fields.get(1) == Some(&parent.to_string().as_str()) {
            out.push(pid);
        }
    }
    out
}

/// Waits until the daemon has no `<defunct>` child; panics with `what` after `secs`.
fn wait_for_no_zombies(parent: u32, secs: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let found = zombies_of(parent);
        if found.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {found:?} are <defunct>");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 35 item 3: a stdio server that crashed, and one stopped as idle, are reaped at once:
/// no `<defunct>` child of totemd is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_and_idle_stopped_servers_are_reaped() {
    let env = Env::start().await;
    let daemon = env.daemon.pid();
    let crashing = marker("reap-crash");
    let idle = marker("reap-idle");
    configure(
        &env.daemon.home,
        json!({"mcpServerIdleSecs": 5, "mcpServers": {
            "crashing": slow_server(&crashing, &[]),
            "idle": slow_server(&idle, &[]),
        }}),
    );
    env.push(vec![text("Hello.")]);
    let mut stream = env.subscribe().await;
    let run = env
        .prompt(
            "say hello",
            json!({"allow": ["mcp_server(crashing)", "mcp_server(idle)"]}),
        )
        .await;
    agent_common::follow(&env, &mut stream, &run, Answer::Once).await;
    wait_for_processes(&crashing, 1, 30, "the first server runs");
    // A crash: the server dies by itself, the daemon did not stop it.
    for pid in processes(&crashing) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    wait_for_processes(&crashing, 0, 10, "the crashed server ended");
    wait_for_no_zombies(daemon, 5, "the crashed server was reaped");
    // The other one is stopped after 5 s idle.
    wait_for_processes(&idle, 0, 30, "the idle server stopped");
    wait_for_no_zombies(daemon, 5, "the idle-stopped server was reaped");
}

/// A stdio server that reads requests and never answers one (not even `initialize`), as an
/// `mcpServers` entry; each start appends a line to `log`.
fn stuck_server(marker: &str, log: &Path, timeout_secs: u64) -> Value {
    json!({
        "command": "sh",
        "args": ["-c", "echo start >> \"$1\"; while read line; do :; done", marker, log],
        "timeoutSecs": timeout_secs,
    })
}

/// The notices of the run `events` ends with that name MCP server `name`.
fn notices_about(events: &[totem_protocol::SessionEvent], name: &str) -> Vec<String> {
    let run = events
        .last()
        .and_then(|e| e.kind.ended_run())
        .map(|r| r.id.clone());
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Notice { run_id, text, .. }
                if *run_id == run && text.contains(&format!("`{name}`")) =>
            {
                Some(text.clone())
            }
            _ => None,
        })
        .collect()
}

/// Issue 35 item 1: a server that never answers `initialize` holds up nobody but itself. The run
/// gets the healthy server's tools and uses them (which the 1 s idle time did not stop while the
/// run waited); the stuck one is reported once, when its own `timeoutSecs` ran out, and is not
/// started (nor waited for) again by the next runs, until its settings change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_holds_up_only_itself() {
    let mut env = Env::start().await;
    let (healthy, stuck) = (marker("healthy"), marker("stuck"));
    let log = env.daemon.home.join("stuck.log");
    let starts = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count()
    };
    configure(
        &env.daemon.home,
        json!({"mcpServerIdleSecs": 1, "mcpServers": {
            "healthy": slow_server(&healthy, &[]),
            "stuck": stuck_server(&stuck, &log, 2),
        }}),
    );
    let allow = json!({"allow": ["mcp_server(healthy)", "mcp_server(stuck)", "mcp(healthy/*)"]});
    env.push(vec![tool("c1", "healthy_wait", json!({"seconds": 0}))]);
    env.push(vec![text("Waited.")]);
    let started = Instant::now();
    let events = env.run_done("wait", allow.clone(), Answer::None).await;
    let took = started.elapsed();
    let got = agent_common::results(&events);
    assert!(!got[0].2 && got[0].1.contains("waited 0"), "{got:?}");
    assert!(
        env.sim.chat_requests()[0]
            .body
            .to_string()
            .contains("healthy_wait"),
        "the first request offers the healthy server's tool"
    );
    let warned = notices_about(&events, "stuck");
    assert_eq!(warned.len(), 1, "reported once: {warned:?}");
    assert!(
        warned[0].contains("did not answer within 2 s"),
        "{warned:?}"
    );
    assert!(took < Duration::from_secs(20), "the run took {took:?}");
    wait_for_processes(&stuck, 0, 10, "the stuck server was stopped");
    assert_eq!(starts(), 1);

    // A new session: told once, without waiting for it or starting it again.
    let project = totem_tests::setup::open_project(&env.client, env.project.path()).await;
    env.session = totem_tests::setup::create_session(&env.client, &project).await;
    for round in 0..2 {
        env.push(vec![text("Hello.")]);
        let events = env.run_done("hello", allow.clone(), Answer::None).await;
        let warned = notices_about(&events, "stuck");
        match round {
            0 => assert!(
                warned.len() == 1 && warned[0].contains("totem mcp test stuck"),
                "{warned:?}"
            ),
            _ => assert!(warned.is_empty(), "told again: {warned:?}"),
        }
        let requests = env.sim.chat_requests();
        assert!(
            requests
                .last()
                .is_some_and(|r| r.body.to_string().contains("healthy_wait")),
            "the healthy server's tool is offered"
        );
    }
    assert_eq!(starts(), 1, "the failed server was not started again");

    // Its settings change: it is tried again.
    configure(
        &env.daemon.home,
        json!({"mcpServerIdleSecs": 1, "mcpServers": {
            "healthy": slow_server(&healthy, &[]),
            "stuck": stuck_server(&stuck, &log, 1),
        }}),
    );
    env.push(vec![text("Again.")]);
    let events = env.run_done("again", allow, Answer::None).await;
    assert_eq!(starts(), 2, "started again after its settings changed");
    let warned = notices_about(&events, "stuck");
    assert!(
        warned.len() == 1 && warned[0].contains("within 1 s"),
        "{warned:?}"
    );
}

/// Issue 35 item 1: a server that answers after the run stopped waiting for it joins the run:
/// the first request goes out without its tools, the one after it answered offers them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_slow_to_answer_joins_the_run_when_it_answers() {
    let env = Env::start().await;
    let late = marker("late");
    let log = env.daemon.home.join("late.log");
    let server = slow_server(
        &late,
        &["--start-delay", "3", "--log", &log.to_string_lossy()],
    );
    configure(
        &env.daemon.home,
        json!({"mcpServerStartWaitSecs": 1, "mcpServers": {"late": server}}),
    );
    // The first step waits until the server wrote that it serves, and a little more.
    let command = format!(
        "while [ ! -s '{}' ]; do sleep 0.1; done; sleep 2",
        log.display()
    );
    env.push(vec![tool("c1", "bash", json!({"command": command}))]);
    env.push(vec![tool("c2", "late_wait", json!({"seconds": 0}))]);
    env.push(vec![text("Done.")]);
    let events = env
        .run_done(
            "wait for it",
            json!({"allow": ["bash", "mcp_server(late)", "mcp(late/*)"]}),
            Answer::None,
        )
        .await;
    let requests = env.sim.chat_requests();
    assert!(
        !requests[0].body.to_string().contains("late_wait"),
        "the run did not wait for the server"
    );
    assert!(
        requests[1].body.to_string().contains("late_wait"),
        "its tools joined once it answered"
    );
    let got = agent_common::results(&events);
    assert!(!got[1].2 && got[1].1.contains("waited 0"), "{got:?}");
    let notices = notices_about(&events, "late");
    assert!(
        notices.len() == 2
            && notices[0].contains("has not answered yet")
            && notices[1].contains("answered; its tools are available"),
        "{notices:?}"
    );
}
