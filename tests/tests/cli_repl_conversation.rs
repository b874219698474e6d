//! The conversation as the person at the REPL sees it, driven through a pseudo-terminal against
//! the Ollama simulator: a prompt sent while a run goes shows as queued and takes its place after
//! the answer before it, on the screen and in what the model is sent.

mod cli_common;

use std::time::Duration;

use cli_common::{SimCli, expect_shown};
use expectrl::session::OsSession;
use expectrl::{Eof, Expect, Session};
use totem_tests::setup::MODEL;
use totem_tests::sim::SimEvent;

/// The REPL on a new session in a pty, on the simulator's model.
fn repl(env: &SimCli) -> OsSession {
    let mut command = env.cli.command(["attach", "--new"]);
    command.env("TERM", "xterm");
    let mut session = Session::spawn(command).expect("spawn totem in a pty");
    session.set_expect_timeout(Some(Duration::from_secs(30)));
    expect_shown(&mut session, "Type a prompt", "the greeting");
    session
        .send(format!("/model {MODEL}\r"))
        .expect("choose the model");
    expect_shown(&mut session, "The next prompts use", "the model chosen");
    session
}

/// The non-system messages of the simulator's request `i`, as `role text`.
fn sent(env: &SimCli, i: usize) -> Vec<String> {
    let _guard = env.runtime.enter();
    let requests = env.sim.chat_requests();
    let body = &requests
        .get(i)
        .unwrap_or_else(|| panic!("request {i}"))
        .body;
    body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            format!(
                "{} {}",
                m["role"].as_str().unwrap_or(""),
                m["content"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn a_prompt_sent_while_the_model_is_slow_shows_queued_then_follows_the_first_answer() {
    let env = SimCli::start();
    // A slow local model: nothing for 3 s, long enough to type the second prompt.
    env.push_late(vec![SimEvent::text("Answer one.\n")], 3000);
    env.push(vec![SimEvent::text("Answer two.\n")], 0);
    let mut repl = repl(&env);
    repl.send("prompt one\r").expect("type a prompt");
    expect_shown(&mut repl, "waiting for the model", "the spinner");
    repl.send("prompt two\r").expect("type a second prompt");
    expect_shown(
        &mut repl,
        "queued: prompt two",
        "the second prompt shown as queued",
    );
    expect_shown(&mut repl, "Answer one.", "the first answer");
    expect_shown(&mut repl, "✓ done", "the first run's end");
    expect_shown(
        &mut repl,
        "› prompt two",
        "the queued prompt, drawn after the first answer when its run starts",
    );
    expect_shown(&mut repl, "Answer two.", "the second answer");
    expect_shown(&mut repl, "✓ done", "the second run's end");
    // The second request carries the first exchange, then the second prompt (with the reminder
    // the daemon adds to a request's last prompt).
    let second = sent(&env, 1);
    assert_eq!(
        second[..2],
        ["user prompt one", "assistant Answer one.\n"],
        "{second:?}"
    );
    assert_eq!(second.len(), 3, "{second:?}");
    assert!(second[2].starts_with("user prompt two"), "{second:?}");
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn ctrl_c_while_a_question_waits_gives_back_the_prompt_and_a_late_answer_is_not_sent() {
    let env = SimCli::start();
    env.push(
        vec![SimEvent::tool_call(
            "c1",
            "write",
            serde_json::json!({"path": "a.txt", "content": "a\n"}),
        )],
        0,
    );
    env.push(vec![SimEvent::text("Fine.\n")], 0);
    let mut repl = repl(&env);
    repl.send("write a.txt\r").expect("a prompt");
    expect_shown(&mut repl, "Answer: o = once", "the question");
    // A draft typed while the question came is kept for after the answer.
    repl.send("half a thought\r")
        .expect("a line that is not an answer");
    expect_shown(&mut repl, "Your text is kept", "the draft kept");
    // Ctrl-C once the line editor reads again (its label drawn): sent sooner, it arrives as a
    // signal between two lines, and the label already drawn stays until the next line.
    expect_shown(&mut repl, "allow? o/s/p/d›", "the editor reading again");
    repl.send("\x03").expect("Ctrl-C");
    expect_shown(&mut repl, "Aborting the run", "the abort");
    expect_shown(&mut repl, "aborted", "the run's end");
    // The line is a prompt again (the kept draft in it), and a late `o` is no prompt.
    expect_shown(&mut repl, "› half a thought", "the draft is back");
    repl.send("\x15o\r").expect("a late answer");
    expect_shown(
        &mut repl,
        "That question is gone",
        "the late answer refused",
    );
    let requests = {
        let _guard = env.runtime.enter();
        env.sim.chat_requests()
    };
    assert_eq!(requests.len(), 1, "nothing more went to the model");
    assert!(!env.cli.project.path().join("a.txt").exists());
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn a_project_command_runs_from_the_repl_in_its_mode_never_a_wider_one() {
    let env = SimCli::start();
    let commands = env.cli.project.path().join(".totem/commands");
    std::fs::create_dir_all(&commands).expect("commands folder");
    std::fs::write(
        commands.join("review.md"),
        "---\nagent: build\n---\nReview $ARGUMENTS please.\n",
    )
    .expect("review.md");
    env.push(vec![SimEvent::text("Reviewed.")], 0);
    let mut repl = repl(&env);

    // Plan mode chosen in the REPL before any prompt: the command's `agent: build` is refused.
    repl.send("/mode plan\r").expect("type /mode plan");
    expect_shown(&mut repl, "plan", "the mode");
    repl.send("/review math.js\r").expect("type /review");
    expect_shown(&mut repl, "runs in `plan`", "the refusal of the wider mode");
    expect_shown(&mut repl, "Reviewed.", "the answer");
    let _guard = env.runtime.enter();
    let requests = env.sim.chat_requests();
    let body = &requests.last().expect("a request").body;
    assert!(
        body.to_string().contains("Review math.js please."),
        "the command's text went to the model: {body}"
    );
    let tools: Vec<String> = body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(!tools.is_empty(), "{body}");
    for writer in ["write", "edit", "bash"] {
        assert!(
            !tools.contains(&writer.to_string()),
            "{writer} in plan: {tools:?}"
        );
    }
    drop(_guard);

    // A name that is neither built in nor a file says where project commands live.
    repl.send("/nosuch\r").expect("type /nosuch");
    expect_shown(
        &mut repl,
        ".totem/commands/NAME.md",
        "the unknown command's message",
    );
}
