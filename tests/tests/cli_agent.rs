//! The command line against a model: the Ollama simulator configured as provider `sim`, and
//! `totem run` / the REPL streaming its answers, aborting with Ctrl-C and answering permission
//! questions.

mod cli_common;

use std::time::Duration;

use cli_common::{SimCli, assert_exit, stderr, stdout};
use expectrl::session::OsSession;
use expectrl::{ControlCode, Eof, Expect, Regex, Session};
use serde_json::json;
use totem_tests::sim::SimEvent;

use totem_tests::setup::MODEL;

type Env = SimCli;

impl Env {
    fn repl(&self, args: &[&str]) -> OsSession {
        let mut command = self.cli.command(args);
        command.env("TERM", "xterm");
        let mut session = Session::spawn(command).expect("spawn totem in a pty");
        session.set_expect_timeout(Some(Duration::from_secs(30)));
        session
    }
}

#[test]
fn run_streams_the_answer_to_stdout_and_exits_0() {
    let env = SimCli::start();
    env.push(
        vec![
            SimEvent::text("Hello from "),
            SimEvent::text("the **simulator**.\n\nSecond paragraph."),
            SimEvent::usage(12, 7),
        ],
        0,
    );
    let out = env.cli.run(["run", "--model", MODEL, "say hi"]);
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out),
        "Hello from the **simulator**.\n\nSecond paragraph.\n",
        "stderr: {}",
        stderr(&out)
    );
}

#[test]
fn the_repl_streams_text_and_ctrl_c_aborts_the_run() {
    let env = SimCli::start();
    let lines: Vec<SimEvent> = (1..=60)
        .map(|i| SimEvent::text(format!("line {i}\n")))
        .collect();
    env.push(lines, 100);
    let mut repl = env.repl(&[]);
    repl.expect("Type a prompt").expect("greeting");
    repl.send(format!("/model {MODEL}\r"))
        .expect("choose the model");
    repl.expect("The next prompts use").expect("model chosen");
    repl.send("count slowly\r").expect("type a prompt");
    repl.expect("line 2").expect("text streams as it arrives");
    repl.send(ControlCode::EndOfText).expect("Ctrl-C");
    repl.expect("Aborting the run").expect("abort sent");
    repl.expect("run aborted").expect("the run ends aborted");
    let seen = repl.expect(Regex("› ")).expect("the prompt is back");
    assert!(!String::from_utf8_lossy(seen.before()).contains("line 60"));
    let found =
        cli_common::ctrl_d_until(&mut repl, Regex(r"totem attach --session (ses_[0-9a-z]+)"));
    let session = String::from_utf8_lossy(found.get(1).expect("id")).into_owned();
    repl.expect(Eof).expect("leaves");

    let mut again = env.repl(&["attach", "--session", &session]);
    again.expect("› count slowly").expect("replayed prompt");
    again.expect("run aborted").expect("replayed end");
    cli_common::ctrl_d_until(&mut again, Eof);
}

#[test]
fn the_repl_shows_tool_calls_and_answers_permission_questions() {
    let env = SimCli::start();
    // A secret file is asked for even to read; the question is answered here.
    std::fs::write(env.cli.project.path().join(".env"), "TOKEN=totem-secret\n").expect(".env");
    env.push(
        vec![SimEvent::tool_call(
            "call_1",
            "read",
            json!({"path": ".env"}),
        )],
        0,
    );
    env.push(vec![SimEvent::text("The file was read.\n")], 0);
    let mut repl = env.repl(&[]);
    repl.expect("Type a prompt").expect("greeting");
    repl.send(format!("/model {MODEL}\r"))
        .expect("choose the model");
    repl.expect("The next prompts use").expect("model chosen");
    repl.send("read the env file\r").expect("type a prompt");
    repl.expect("⚙ read .env")
        .expect("the tool call, on one line");
    repl.expect("? read wants to")
        .expect("the permission question");
    repl.expect("Answer: o = once").expect("how to answer");
    repl.send("o\r").expect("answer once");
    repl.expect("permission granted").expect("resolved");
    repl.expect("↳ ").expect("the tool's result");
    repl.expect("The file was read.")
        .expect("the answer after the tool");
    repl.expect("✓ done").expect("run done");
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn a_question_answered_in_one_terminal_disappears_from_the_other() {
    let env = SimCli::start();
    std::fs::write(env.cli.project.path().join(".env"), "TOKEN=x\n").expect(".env");
    env.push(
        vec![SimEvent::tool_call(
            "call_1",
            "read",
            json!({"path": ".env"}),
        )],
        0,
    );
    env.push(vec![SimEvent::text("Read.\n")], 0);
    let mut first = env.repl(&[]);
    first.expect("Type a prompt").expect("greeting");
    let mut second = env.repl(&[]);
    second.expect("Type a prompt").expect("greeting");
    first
        .send(format!("/model {MODEL}\r"))
        .expect("choose the model");
    first.expect("The next prompts use").expect("model chosen");
    first.send("read it\r").expect("type a prompt");
    first
        .expect("Answer: o = once")
        .expect("asked in the first");
    second
        .expect("Answer: o = once")
        .expect("asked in the second");
    second.send("d not now\r").expect("deny in the second");
    second
        .expect("permission denied")
        .expect("resolved in the second");
    first
        .expect("(answered in another terminal)")
        .expect("withdrawn in the first");
    first
        .expect(Regex("✓ done|run failed"))
        .expect("the run ends");
    for mut repl in [first, second] {
        cli_common::ctrl_d_until(&mut repl, Eof);
    }
}
