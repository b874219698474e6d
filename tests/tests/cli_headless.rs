//! `totem run` and permission questions without a person: with no terminal to ask on, a question
//! is refused (exit code 4) and nothing happens; `--allow RULE` grants exactly what it names.

mod cli_common;

use cli_common::{SimCli, assert_exit, json_events, stderr, stdout};
use serde_json::json;
use totem_tests::sim::{Reply, Script, SimEvent};

use totem_tests::setup::MODEL;

type Env = SimCli;

fn start() -> Env {
    SimCli::start()
}

impl Env {
    /// The model writes a file through bash, then answers.
    fn script_a_bash_write(&self) {
        let _guard = self.runtime.enter();
        self.sim
            .push(Reply::Stream(Script::new(vec![SimEvent::tool_call(
                "call_1",
                "bash",
                json!({"command": "touch out.txt"}),
            )])));
        self.sim
            .push(Reply::Stream(Script::new(vec![SimEvent::text("Done.")])));
    }
}

#[test]
fn without_a_terminal_a_question_is_refused_and_exits_4() {
    let env = start();
    env.script_a_bash_write();
    let out = env.cli.run(["run", "--model", MODEL, "write out.txt"]);
    assert_exit(&out, 4);
    assert!(
        stderr(&out).contains("--allow 'bash(touch"),
        "the refusal says how to allow: {}",
        stderr(&out)
    );
    assert!(
        !env.cli.project.path().join("out.txt").exists(),
        "a refused command never runs"
    );
    // The model was told why.
    let requests = env.sim.chat_requests();
    let last = requests
        .last()
        .expect("a second request with the tool result");
    assert!(
        last.body.to_string().contains("cannot ask the user"),
        "{}",
        last.body
    );
}

#[test]
fn allow_grants_the_named_command_for_this_run() {
    let env = start();
    env.script_a_bash_write();
    let out = env.cli.run([
        "run",
        "--model",
        MODEL,
        "--allow",
        "bash(touch *)",
        "write out.txt",
    ]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out).trim(), "Done.", "stderr: {}", stderr(&out));
    assert!(
        env.cli.project.path().join("out.txt").exists(),
        "the allowed command ran"
    );
}

#[test]
fn json_events_of_a_tool_using_run_are_valid_against_the_schema() {
    let env = start();
    env.script_a_bash_write();
    let out = env.cli.run([
        "run",
        "--json",
        "--model",
        MODEL,
        "--allow",
        "bash(touch *)",
        "write out.txt",
    ]);
    assert_exit(&out, 0);
    let events = json_events(&out);
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect();
    for kind in [
        "part.started",
        "part.delta",
        "part.done",
        "usage",
        "run.done",
    ] {
        assert!(types.contains(&kind), "{kind} missing: {types:?}");
    }
    assert!(
        events
            .iter()
            .any(|e| e["part"]["type"] == "toolCall" && e["part"]["tool"] == "bash"),
        "the tool call is an event: {types:?}"
    );
}

#[test]
fn a_malformed_allow_rule_is_bad_usage() {
    let env = start();
    let out = env
        .cli
        .run(["run", "--model", MODEL, "--allow", "bash(", "hello"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("bash("), "{}", stderr(&out));
}

impl Env {
    /// A slow answer: `deltas` text deltas `delay_ms` apart.
    fn script_a_slow_answer(&self, deltas: usize, delay_ms: u64) {
        let _guard = self.runtime.enter();
        let mut script = Script::new((0..deltas).map(|i| SimEvent::text(format!("word{i} "))));
        script.delay_ms = delay_ms;
        self.sim.push(Reply::Stream(script));
    }

    /// `run.wait` on the daemon the CLI started: the run's status once it ended.
    fn wait_for_run(&self, run_id: &str) -> String {
        self.runtime.block_on(async {
            let client = self.client().await;
            let outcome = client
                .call_raw("run.wait", json!({"runId": run_id, "timeoutMs": 30000}))
                .await
                .expect("run.wait");
            outcome["run"]["status"].as_str().unwrap_or("").to_string()
        })
    }
}

/// Starts `totem run --json`, waits for its first streamed text, sends `signal`, and returns the
/// output and how long `totem` took to exit after the signal.
fn interrupt_run(
    env: &Env,
    signal: nix::sys::signal::Signal,
) -> (std::process::Output, std::time::Duration) {
    let child = env
        .cli
        .command(["run", "--json", "--model", MODEL, "talk slowly"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn totem run");
    totem_tests::harness::signal_after_first_delta(child, signal)
}

#[test]
fn ctrl_c_and_sigterm_abort_the_run_in_the_daemon() {
    let env = start();
    for signal in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
    ] {
        // 60 deltas 500 ms apart: half a minute of answer if nothing stopped it.
        env.script_a_slow_answer(60, 500);
        let (out, took) = interrupt_run(&env, signal);
        assert_exit(&out, 1);
        assert!(
            took < std::time::Duration::from_secs(5),
            "totem took {took:?} to stop"
        );
        assert!(
            stderr(&out).contains("stopping the run"),
            "{}",
            stderr(&out)
        );
        let events = json_events(&out);
        let end = events.last().expect("events");
        assert_eq!(end["type"], "run.aborted", "{signal}: {events:?}");
        let run_id = end["run"]["id"].as_str().expect("run id");
        assert_eq!(env.wait_for_run(run_id), "aborted", "{signal}");
    }
}

#[test]
fn detach_leaves_the_run_going_and_says_how_to_follow_it() {
    let env = start();
    env.script_a_slow_answer(4, 300);
    let started = std::time::Instant::now();
    let out = env
        .cli
        .run(["run", "--detach", "--model", MODEL, "talk slowly"]);
    assert_exit(&out, 0);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "--detach returns at once"
    );
    let text = stdout(&out);
    assert!(text.contains("totem attach --session ses_"), "{text}");
    let run_id = text
        .split_whitespace()
        .find(|w| w.starts_with("run_"))
        .expect("the run is named");
    assert_eq!(env.wait_for_run(run_id), "done");
}
