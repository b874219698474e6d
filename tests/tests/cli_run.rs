//! `totem run`: the exit code and output of a run, `--json` events, the prompt from stdin,
//! `--continue` and `--session`.
//!
//! The daemon has no provider configured here, so every run fails at once with the reason in
//! `run.error`; that is the run these tests follow end to end.

mod cli_common;

use cli_common::{Cli, assert_exit, json_events, stderr, stdout};

#[test]
fn a_failed_run_exits_1_and_says_why() {
    let cli = Cli::new();
    let out = cli.run(["run", "say hi"]);
    assert_exit(&out, 1);
    let err = stderr(&out);
    assert!(err.starts_with("totem: run failed: "), "{err}");
    assert!(
        err.trim().len() > "totem: run failed: ".len(),
        "the reason is given: {err}"
    );
    // The implicit local Ollama is where OLLAMA_HOST says: the tests' closed port, never
    // whatever listens on 127.0.0.1:11434.
    assert!(
        err.contains(totem_tests::harness::closed_ollama_host()),
        "{err}"
    );
}

#[test]
fn json_prints_each_event_of_the_run_as_one_line() {
    let cli = Cli::new();
    let out = cli.run(["run", "--json", "say hi"]);
    assert_exit(&out, 1);
    let events = json_events(&out);
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect();
    // A run's life (protocol README): the prompt accepted, then it joins the conversation.
    assert_eq!(types.first(), Some(&"run.queued"), "{types:?}");
    let joined = types.iter().position(|t| *t == "message.created");
    let started = types.iter().position(|t| *t == "run.started");
    assert!(
        joined.is_some() && started.is_some() && joined < started,
        "{types:?}"
    );
    assert_eq!(types.last(), Some(&"run.failed"), "{types:?}");
    assert_eq!(events[0]["message"]["parts"][0]["text"], "say hi");
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "numbered in order: {seqs:?}"
    );
    let run_id = &events.last().expect("events")["run"]["id"];
    assert!(run_id.as_str().is_some_and(|id| id.starts_with("run_")));
}

#[test]
fn the_prompt_comes_from_stdin_with_a_dash() {
    let cli = Cli::new();
    let out = cli.run_with_input(&["run", "--json", "-"], "a prompt\nover two lines\n");
    assert_exit(&out, 1);
    let events = json_events(&out);
    assert_eq!(
        events[0]["message"]["parts"][0]["text"],
        "a prompt\nover two lines"
    );

    let out = cli.run_with_input(&["run", "-"], "   \n");
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("the prompt is empty"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn continue_and_session_reuse_a_session() {
    let cli = Cli::new();
    let out = cli.run(["run", "--continue", "hi"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("no session to continue"),
        "{}",
        stderr(&out)
    );

    let first = json_events(&cli.run(["run", "--json", "one"]));
    let session = first[0]["sessionId"]
        .as_str()
        .expect("session id")
        .to_string();
    let second = json_events(&cli.run(["run", "--json", "--continue", "two"]));
    assert_eq!(second[0]["sessionId"], session.as_str());
    assert_eq!(second[0]["message"]["parts"][0]["text"], "two");
    let third = json_events(&cli.run(["run", "--json", "--session", &session, "three"]));
    assert_eq!(third[0]["sessionId"], session.as_str());
    // Only this run's events: the earlier runs' are not replayed.
    assert!(
        third
            .iter()
            .all(|e| e["message"]["parts"][0]["text"] != "two")
    );

    let out = cli.run(["run", "--session", "ses_nope", "hi"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("totem sessions"), "{}", stderr(&out));
}

#[test]
fn an_option_the_daemon_does_not_take_is_named() {
    let cli = Cli::new();
    let out = cli.run(["run", "--allow", "bash:ls", "hi"]);
    let err = stderr(&out);
    if out.status.code() == Some(2) {
        assert!(err.contains("does not support --allow"), "{err}");
    } else {
        // A daemon that takes the rule runs the prompt.
        assert_exit(&out, 1);
    }
}

#[test]
fn a_refused_attachment_says_why_not_that_a_flag_is_unsupported() {
    let cli = Cli::new();
    std::fs::write(cli.project.path().join(".env"), "API_KEY=sk-live-1\n").expect(".env");
    let out = cli.run(["run", "--model", "ollama/llama3.2", "-f", ".env", "hi"]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("cannot attach") && err.contains("secret file"),
        "{err}"
    );
    assert!(!err.contains("does not support"), "{err}");
    assert!(!err.contains("sk-live-1"), "{err}");
}

#[test]
fn stdout_holds_only_the_answer_when_piped() {
    let cli = Cli::new();
    let out = cli.run(["run", "say hi"]);
    assert_exit(&out, 1);
    assert_eq!(
        stdout(&out),
        "",
        "a failed run without an answer prints nothing to stdout"
    );
}

#[test]
fn a_reader_that_goes_away_ends_commands_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let cli = Cli::new();
    assert_exit(&cli.run(["run", "one"]), 1);
    for args in [vec!["man"], vec!["sessions"], vec!["completions", "bash"]] {
        // `totem … | head -1`, with head already gone: every write meets a closed pipe.
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let out = cli
            .command(&args)
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("run totem");
        assert_eq!(stderr(&out), "", "{args:?} said nothing");
        assert!(
            out.status.success() || out.status.signal() == Some(13),
            "{args:?} ended quietly: {}",
            out.status
        );
    }
}
