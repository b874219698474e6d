//! The attach REPL driven through a pseudo-terminal as a person would: type a prompt and see the
//! run end, /help, tab completion, Ctrl-C twice, Ctrl-D with the reattach command, and
//! reattaching to see the run again.

mod cli_common;

use std::time::Duration;

use cli_common::Cli;
use expectrl::session::OsSession;
use expectrl::{ControlCode, Eof, Expect, Regex, Session};

fn spawn(cli: &Cli, args: &[&str]) -> OsSession {
    let mut command = cli.command(args);
    command
        .env("TERM", "xterm")
        .env_remove("TOTEM_NOTIFY_AFTER");
    let mut session = Session::spawn(command).expect("spawn totem in a pty");
    session.set_expect_timeout(Some(Duration::from_secs(20)));
    session
}

fn text(captures: &expectrl::Captures) -> String {
    String::from_utf8_lossy(captures.as_bytes()).into_owned()
}

#[test]
fn a_prompt_runs_help_lists_commands_and_ctrl_d_prints_the_reattach_command() {
    let cli = Cli::new();
    let mut repl = spawn(&cli, &[]);
    repl.expect("Type a prompt").expect("greeting");
    repl.send("hello there\r").expect("type a prompt");
    repl.expect("run failed").expect("the run's end is shown");

    repl.send("/help\r").expect("type /help");
    repl.expect("/sessions").expect("help lists /sessions");
    repl.expect("/quit").expect("help lists /quit");

    let found =
        cli_common::ctrl_d_until(&mut repl, Regex(r"totem attach --session (ses_[0-9a-z]+)"));
    let session = String::from_utf8_lossy(found.get(1).expect("id")).into_owned();
    repl.expect(Eof).expect("totem leaves");

    // Reattaching replays what happened: the prompt and the run's end.
    let mut again = spawn(&cli, &["attach", "--session", &session]);
    again
        .expect(session.as_str())
        .expect("the header names the session");
    again
        .expect("› hello there")
        .expect("the prompt is replayed");
    again
        .expect("run failed")
        .expect("the run's end is replayed");
    again.send("/quit\r").expect("type /quit");
    again
        .expect(format!("totem attach --session {session}"))
        .expect("reattach command");
    again.expect(Eof).expect("totem leaves");
}

#[test]
fn tab_completes_slash_commands() {
    let cli = Cli::new();
    let mut repl = spawn(&cli, &["attach", "--new"]);
    repl.expect("Type a prompt").expect("greeting");
    repl.send("/hel\t").expect("type /hel and Tab");
    repl.send("\r").expect("Enter");
    repl.expect("list these commands").expect("/help ran");
    repl.send("/nope\r").expect("unknown command");
    repl.expect("unknown command /nope. /help lists them")
        .expect("said so");
    repl.send("/undo\r").expect("a command the daemon may lack");
    let seen = repl
        .expect(Regex("not available in this daemon yet|undo"))
        .expect("/undo answered");
    assert!(!text(&seen).is_empty());
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn ctrl_c_twice_within_a_second_leaves() {
    let cli = Cli::new();
    let mut repl = spawn(&cli, &[]);
    repl.expect("Type a prompt").expect("greeting");
    repl.send(ControlCode::EndOfText).expect("Ctrl-C");
    repl.expect("Ctrl-C again within a second")
        .expect("the hint");
    repl.send(ControlCode::EndOfText).expect("Ctrl-C again");
    repl.expect("totem attach --session ses_")
        .expect("reattach command");
    repl.expect(Eof).expect("totem leaves");
}

#[test]
fn a_second_terminal_sees_the_prompt_typed_in_the_first() {
    let cli = Cli::new();
    let mut first = spawn(&cli, &[]);
    first.expect("Type a prompt").expect("greeting");
    let mut second = spawn(&cli, &[]);
    second.expect("Type a prompt").expect("greeting");
    first.send("from the first terminal\r").expect("type");
    second
        .expect("› from the first terminal")
        .expect("the other terminal shows the prompt");
    second.expect("run failed").expect("and the run's end");
    cli_common::ctrl_d_until(&mut first, Eof);
    cli_common::ctrl_d_until(&mut second, Eof);
}

#[test]
fn delete_asks_then_deletes_the_session_and_starts_a_new_one() {
    let cli = Cli::new();
    let mut repl = spawn(&cli, &[]);
    repl.expect("Type a prompt").expect("greeting");
    repl.send("doomed words\r").expect("type a prompt");
    repl.expect("run failed").expect("the run's end is shown");
    let before = cli_common::session_ids(&cli);
    assert_eq!(before.len(), 1);

    // "n" (or anything but y) keeps it; the prompt label says what is asked.
    repl.send("/delete\r").expect("type /delete");
    repl.expect("Delete the session “doomed words”")
        .expect("the question names the session");
    repl.expect("delete? y/N").expect("the prompt asks");
    repl.send("n\r").expect("answer no");
    repl.expect("Kept the session.").expect("kept");
    assert_eq!(cli_common::session_ids(&cli), before);

    repl.send("/delete\r").expect("type /delete");
    repl.expect("delete? y/N").expect("the prompt asks");
    repl.send("y\r").expect("answer yes");
    repl.expect("Deleted the session “doomed words”")
        .expect("deleted");
    repl.expect("New session").expect("a new session is open");
    assert!(
        !cli_common::session_ids(&cli).contains(&before[0]),
        "the session is gone"
    );
    // The next line is a prompt again, not an answer.
    repl.send("/help\r").expect("type /help");
    repl.expect("/delete").expect("help lists /delete");
}
