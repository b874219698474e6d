//! What the REPL leaves on screen, checked on the frames a terminal would show (every byte the
//! REPL wrote, fed to a `vt100` terminal of the pty's size), against the Ollama simulator
//! streaming slowly: the conversation's order kept while prompts are typed during a run, no
//! frozen spinner, a partial answer shown once after Ctrl-C, Esc that aborts and eats no key;
//! Markdown rendered while its line streams, tables that line up, 256 colours unless the terminal
//! says it takes 24-bit ones, `/model` that sees providers change, and the words around them.

mod cli_common;

use std::time::Duration;

use cli_common::{SimCli, expect_shown};
use expectrl::session::OsSession;
use expectrl::{Eof, Session};
use totem_tests::setup::MODEL;
use totem_tests::sim::{Reply, Script, SimEvent};

const COLS: u16 = 80;
const ROWS: u16 = 60;

/// The REPL in a pty of [`COLS`]×[`ROWS`] and every byte it wrote, to replay on a terminal.
struct Screen {
    pty: OsSession,
    bytes: Vec<u8>,
}

impl Screen {
    /// `totem attach --new` on the simulator's model; `env` sets more variables.
    fn start(cli: &SimCli, env: &[(&str, Option<&str>)]) -> Screen {
        Screen::attach(cli, &["attach", "--new"], env)
    }

    /// `totem ARGS` on the simulator's model.
    fn attach(cli: &SimCli, args: &[&str], env: &[(&str, Option<&str>)]) -> Screen {
        let mut command = cli.cli.command(args);
        command.env("TERM", "xterm").env_remove("COLORTERM");
        for (name, value) in env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        let mut pty = Session::spawn(command).expect("spawn totem in a pty");
        pty.get_process_mut()
            .set_window_size(COLS, ROWS)
            .expect("window size");
        pty.set_expect_timeout(Some(Duration::from_secs(20)));
        let mut screen = Screen {
            pty,
            bytes: Vec::new(),
        };
        screen.wait("Type a prompt", "the greeting");
        screen.send(&format!("/model {MODEL}\r"));
        screen.wait("The next prompts use", "the model chosen");
        screen
    }

    fn send(&mut self, text: &str) {
        use expectrl::Expect;
        self.pty.send(text).expect("type");
    }

    /// Waits for `needle` in the output, keeping what came.
    fn wait(&mut self, needle: &str, what: &str) {
        let found = expect_shown(&mut self.pty, needle, what);
        self.bytes.extend_from_slice(found.as_bytes());
    }

    /// The screen as a terminal of the pty's size shows it now.
    fn shown(&self) -> String {
        let side = |n| std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN);
        let mut parser = vt100::Parser::new(side(ROWS), side(COLS), 0);
        parser.process(&self.bytes);
        parser.screen().contents()
    }

    /// Leaves with Ctrl-U and Ctrl-D.
    fn leave(mut self) {
        self.send("\x15");
        cli_common::ctrl_d_until(&mut self.pty, Eof);
    }
}

/// Queues a streamed answer: nothing for `first_ms` (a model loading), then a chunk every
/// `delay_ms`.
fn push(env: &SimCli, events: Vec<SimEvent>, first_ms: u64, delay_ms: u64) {
    let _guard = env.runtime.enter();
    env.sim.push(Reply::Stream(Script {
        first_delay_ms: first_ms,
        delay_ms,
        ..Script::new(events)
    }));
}

/// `words` as one chunk each, a space after each, the last one ending the line.
fn words(words: &[&str]) -> Vec<SimEvent> {
    let last = words.len().saturating_sub(1);
    words
        .iter()
        .enumerate()
        .map(|(i, w)| match i == last {
            true => SimEvent::text(format!("{w}\n")),
            false => SimEvent::text(format!("{w} ")),
        })
        .collect()
}

/// The row of `text` on `screen` (its first), failing with the screen.
fn row(screen: &str, text: &str) -> usize {
    screen
        .lines()
        .position(|l| l.contains(text))
        .unwrap_or_else(|| panic!("{text:?} is not on screen:\n{screen}"))
}

#[test]
fn a_prompt_typed_during_a_run_waits_queued_under_the_answer_then_takes_its_place() {
    let env = SimCli::start();
    // A slow model: the spinner turns for a second, then a line, then words a chunk at a time.
    let mut first = vec![SimEvent::text("The first line of the answer.\n")];
    first.extend(words(&["Alpha", "beta", "gamma", "delta", "epsilon."]));
    push(&env, first, 1000, 250);
    push(&env, vec![SimEvent::text("Answer two.\n")], 0, 0);
    push(&env, vec![SimEvent::text("Answer three.\n")], 0, 0);
    let mut screen = Screen::start(&env, &[]);

    screen.send("prompt one\r");
    screen.wait("waiting for the model", "the spinner");
    // Sent while the spinner turns, and while the answer's line is half written.
    screen.send("prompt two\r");
    screen.wait("queued: prompt two", "the second prompt shown as queued");
    screen.wait("beta", "the answer's unfinished line");
    screen.send("prompt three\r");
    screen.wait("queued: prompt three", "the third prompt shown as queued");
    let during = screen.shown();
    assert!(
        row(&during, "queued: prompt two") > row(&during, "The first line of the answer."),
        "the queued prompts wait under the answer going on:\n{during}"
    );
    assert!(
        !during.contains("› prompt two"),
        "a prompt typed during the run is not printed inside its answer:\n{during}"
    );
    screen.wait("Answer three.", "the third answer");
    screen.wait("✓ done", "the third run's end");
    let end = screen.shown();
    let order = [
        "› prompt one",
        "The first line of the answer.",
        "Alpha beta gamma delta epsilon.",
        "› prompt two",
        "Answer two.",
        "› prompt three",
        "Answer three.",
    ];
    let rows: Vec<usize> = order.iter().map(|t| row(&end, t)).collect();
    assert!(
        rows.windows(2).all(|w| w[0] < w[1]),
        "the screen keeps the conversation's order {order:?}:\n{end}"
    );
    for once in ["prompt two", "prompt three", "Alpha beta"] {
        assert_eq!(end.matches(once).count(), 1, "{once:?} once:\n{end}");
    }
    assert!(
        !end.contains("waiting for the model") && !end.contains("queued:"),
        "no frozen spinner nor queued line stays:\n{end}"
    );
    screen.leave();
}

#[test]
fn ctrl_c_shows_the_partial_answer_once_and_esc_aborts_without_eating_a_key() {
    let env = SimCli::start();
    let many = [
        "Alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
        "lambda", "mu", "nu", "xi", "omicron", "pi",
    ];
    push(&env, words(&many), 0, 200);
    push(&env, words(&many), 0, 200);
    let mut screen = Screen::start(&env, &[]);

    screen.send("first\r");
    screen.wait("gamma", "the answer streaming");
    screen.send("\x03");
    screen.wait("run aborted", "the run aborted by Ctrl-C");
    screen.wait("◆ build", "the line after the run");
    let shown = screen.shown();
    assert_eq!(
        shown.matches("Alpha beta gamma").count(),
        1,
        "the partial answer shows once:\n{shown}"
    );
    assert!(
        row(&shown, "Alpha beta gamma") < row(&shown, "run aborted"),
        "{shown}"
    );

    // Esc aborts the run and leaves the line being typed as it is; the key after it is typed.
    screen.send("second\r");
    screen.wait("Alpha", "the second answer starting");
    screen.send("draft");
    screen.wait("gamma", "the second answer streaming");
    screen.send("\x1b");
    screen.wait("Aborting the run", "Esc aborts");
    std::thread::sleep(Duration::from_millis(200));
    screen.send("X");
    screen.wait("run aborted", "the run aborted by Esc");
    screen.wait("X", "the key after Esc");
    let shown = screen.shown();
    assert!(
        shown.contains("› draftX"),
        "the line kept, and the key after Esc typed into it:\n{shown}"
    );
    assert_eq!(shown.matches("Alpha beta gamma").count(), 2, "{shown}");
    assert!(!shown.contains("Aborting the run"), "{shown}");
    // Esc with no run does nothing: the next key is typed.
    screen.send("\x1b");
    std::thread::sleep(Duration::from_millis(200));
    screen.send("Y");
    screen.wait("Y", "the key after Esc");
    let shown = screen.shown();
    assert!(
        shown.contains("› draftXY"),
        "Esc without a run ate nothing:\n{shown}"
    );
    screen.leave();
}

/// The column of `mark` in the screen's first line that starts with `text` and holds `mark`
/// (the session's header line holds a random id, which may hold a table cell's text too).
fn column(screen: &str, text: &str, mark: char) -> usize {
    let line = screen
        .lines()
        .find(|l| l.starts_with(text) && l.contains(mark))
        .unwrap_or_else(|| panic!("no line starts with {text:?} and holds {mark:?}:\n{screen}"));
    line.chars()
        .position(|c| c == mark)
        .unwrap_or_else(|| panic!("no {mark:?} in {line:?}:\n{screen}"))
}

#[test]
fn the_line_being_streamed_shows_rendered_and_tables_line_up_in_256_colours() {
    let env = SimCli::start();
    let chunks = [
        "## Ro",
        "ute\n\nThe **wh",
        "ole** thing uses `GET /",
        "api` here.\n\n| name | n |\n|---|---|\n| a long name | 1 |\n| b | 22 |\n\n",
        "```rust\nfn main() { let x = 1; }\n```\n\nEnd.\n",
    ];
    push(&env, chunks.map(SimEvent::text).to_vec(), 0, 600);
    let mut screen = Screen::start(&env, &[("NO_COLOR", None), ("COLORTERM", None)]);
    screen.send("render\r");
    // Each unfinished line is on screen as it will be once done, its markup hidden.
    for (needle, shown, raw) in [
        ("Ro", "Ro", "## Ro"),
        ("wh", "The wh", "**wh"),
        ("GET /", "uses GET /", "`GET /"),
    ] {
        screen.wait(needle, "the line being streamed");
        let now = screen.shown();
        assert!(
            now.contains(shown) && !now.contains(raw),
            "{shown:?} shown, not {raw:?}:\n{now}"
        );
    }
    screen.wait("End.", "the answer's end");
    let end = screen.shown();
    assert!(end.contains("The whole thing uses GET /api here."), "{end}");
    let bar = column(&end, "name", '│');
    for row_text in ["a long name", "b ", "─"] {
        let mark = if row_text == "─" { '┼' } else { '│' };
        assert_eq!(
            column(&end, row_text, mark),
            bar,
            "the columns line up ({row_text:?}):\n{end}"
        );
    }
    let bytes = String::from_utf8_lossy(&screen.bytes);
    assert!(
        bytes.contains("\x1b[38;5;") && !bytes.contains("\x1b[38;2;"),
        "256 colours when COLORTERM does not say truecolor: {bytes:?}"
    );
    screen.leave();
}

#[test]
fn model_sees_providers_added_and_removed_elsewhere() {
    let env = SimCli::start();
    let mut screen = Screen::start(&env, &[]);
    let provider = |call: &str, params: serde_json::Value| {
        env.runtime.block_on(async {
            env.client()
                .await
                .call_raw(call, params)
                .await
                .unwrap_or_else(|e| panic!("{call}: {e}"))
        });
    };
    provider(
        "provider.add",
        serde_json::json!({"name": "other", "kind": "ollama", "url": env.sim.url(),
                           "defaultModel": "llama3.2:latest", "maxRetries": 0}),
    );
    screen.send("/model other/llama3.2:latest\r");
    screen.wait(
        "The next prompts use other/llama3.2:latest.",
        "a provider added by another client is seen",
    );
    provider("provider.remove", serde_json::json!({"name": "other"}));
    screen.send("/model other/llama3.2:latest\r");
    screen.wait(
        "no model other/llama3.2:latest",
        "a provider removed by another client is gone",
    );
    screen.leave();
}

#[test]
fn a_deny_note_is_its_own_sentence_and_a_replay_does_not_say_answered_elsewhere() {
    let env = SimCli::start();
    push(
        &env,
        vec![SimEvent::tool_call(
            "c1",
            "write",
            serde_json::json!({"path": "a.txt", "content": "a\n"}),
        )],
        0,
        0,
    );
    push(&env, vec![SimEvent::text("Understood.\n")], 0, 0);
    let mut screen = Screen::start(&env, &[]);
    screen.send("write a.txt\r");
    screen.wait("Answer: o = once", "the question");
    screen.send("d use tabs\r");
    screen.wait("Understood.", "the answer after the denial");
    screen.wait("✓ done", "the run's end");
    let shown = screen.shown();
    let said = "The user says: use tabs. Do not retry the same call.";
    assert!(shown.contains(said), "{said:?}:\n{shown}");
    let sent = {
        let _guard = env.runtime.enter();
        env.sim.chat_requests()[1].body.to_string()
    };
    assert!(sent.contains(said), "the model is told {said:?}: {sent}");
    assert!(!shown.contains("another terminal"), "{shown}");
    screen.leave();

    // Attached again, the replay shows the question and its answer, and does not claim another
    // terminal answered it.
    let session = cli_common::session_ids(&env.cli)[0].clone();
    let mut again = Screen::attach(&env, &["attach", "--session", &session], &[]);
    // The replay may be drawn after the greeting and the model's choice; its last line is the
    // answer.
    if !again.shown().contains("Understood.") {
        again.wait("Understood.", "the replayed answer");
    }
    let replayed = again.shown();
    assert!(
        replayed.contains("wants to write a.txt") && replayed.contains("Understood."),
        "{replayed}"
    );
    assert!(!replayed.contains("another terminal"), "{replayed}");
    again.leave();
}
