//! `totem run` and permission questions without a person: with no terminal to ask on, a question
//! is refused (exit code 4) and nothing happens; `--allow RULE` grants exactly what it names.

mod cli_common;

use cli_common::{Cli, assert_exit, json_events, stderr, stdout};
use serde_json::json;
use totem_tests::sim::{Reply, Script, Sim, SimEvent, SimKind};

const MODEL: &str = "sim/llama3.2:latest";

struct Env {
    cli: Cli,
    sim: Sim,
    runtime: tokio::runtime::Runtime,
}

fn start() -> Env {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let sim = runtime.block_on(Sim::start(SimKind::Ollama));
    let cli = Cli::new();
    let out = cli.run([
        "provider",
        "add",
        "sim",
        "--kind",
        "ollama",
        "--url",
        &sim.url(),
    ]);
    assert_exit(&out, 0);
    Env { cli, sim, runtime }
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
