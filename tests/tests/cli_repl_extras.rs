//! The REPL's spinner, highlighted code, `@path`, `!command` and `/jobs`, and `totem init`,
//! driven through a pseudo-terminal as a person would, against the Ollama simulator.

mod cli_common;

use std::time::Duration;

use cli_common::{Cli, SimCli, assert_exit, stdout};
use expectrl::session::OsSession;
use expectrl::{ControlCode, Eof, Expect, Session};
use serde_json::json;
use totem_tests::sim::SimEvent;

use totem_tests::setup::MODEL;

type Env = SimCli;

fn start() -> Env {
    let env = SimCli::start();
    std::fs::write(env.cli.project.path().join("README.md"), "# demo\n").expect("readme");
    env
}

impl Env {
    /// The REPL in a pty; `color` leaves NO_COLOR unset.
    fn repl(&self, color: bool) -> OsSession {
        let mut command = self.cli.command(["attach", "--new"]);
        command.env("TERM", "xterm");
        if color {
            // A terminal that says it takes 24-bit colours (cli_repl_screen checks the others).
            command.env_remove("NO_COLOR").env("COLORTERM", "truecolor");
        }
        let mut session = Session::spawn(command).expect("spawn totem in a pty");
        session.set_expect_timeout(Some(Duration::from_secs(30)));
        session.expect("Type a prompt").expect("greeting");
        session
            .send(format!("/model {MODEL}\r"))
            .expect("choose the model");
        session
            .expect("The next prompts use")
            .expect("model chosen");
        session
    }

    /// The text of every prompt the simulator received.
    fn prompts_seen(&self) -> String {
        let _guard = self.runtime.enter();
        self.sim
            .chat_requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn text(captures: &expectrl::Captures) -> String {
    String::from_utf8_lossy(captures.as_bytes()).into_owned()
}

#[test]
fn a_spinner_shows_until_the_first_token_and_is_erased() {
    let env = start();
    // The first token comes after 1.5 s; the spinner fills the wait.
    env.push_late(
        vec![
            SimEvent::text("First words.\n\n"),
            SimEvent::text("More.\n"),
        ],
        1500,
    );
    let mut repl = env.repl(false);
    repl.send("take your time\r").expect("type a prompt");
    // Everything drawn up to the answer: the spinner (however many frames a loaded machine
    // manages), then the answer written over the spinner's line, erased (up one line, cleared)
    // first.
    let before = repl.expect("First words.").expect("the answer");
    let drawn = text(&before);
    let last_frame = drawn
        .rfind("waiting for the model")
        .unwrap_or_else(|| panic!("the spinner showed while nothing came: {drawn:?}"));
    let tail = &drawn[last_frame..];
    assert!(tail.contains("\x1b[1A\r\x1b[2K"), "{tail:?}");
    repl.expect("✓ done").expect("run done");
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn code_blocks_are_highlighted_on_a_colour_terminal() {
    let env = start();
    env.push(
        vec![SimEvent::text(
            "Here:\n\n```rust\nfn main() { let x = 1; }\n```\n\nDone.\n",
        )],
        0,
    );
    let mut repl = env.repl(true);
    repl.send("show code\r").expect("type a prompt");
    let seen = repl.expect("Done.").expect("the answer");
    let drawn = text(&seen);
    assert!(drawn.contains("\x1b[38;2;"), "24-bit colours: {drawn:?}");
    assert!(drawn.contains("main"), "{drawn:?}");
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn at_path_completes_and_attaches_the_file() {
    let env = start();
    let project = env.cli.project.path();
    std::fs::create_dir_all(project.join("src")).expect("src");
    std::fs::write(project.join("src/widget.rs"), "pub fn widget_marker() {}\n").expect("file");
    std::fs::write(project.join(".gitignore"), "secret-build/\n").expect("gitignore");
    std::fs::create_dir_all(project.join("secret-build")).expect("ignored");
    env.push(vec![SimEvent::text("Seen it.\n")], 0);
    let mut repl = env.repl(false);
    // Tab completes the folder, then the file.
    repl.send("explain @sr\t").expect("Tab");
    repl.expect("@src/").expect("the folder completed");
    repl.send("wi\t").expect("Tab again");
    repl.expect("@src/widget.rs").expect("the file completed");
    repl.send(" and @missing.txt\r").expect("Enter");
    repl.expect("Attached src/widget.rs")
        .expect("attached note");
    repl.expect("@missing.txt is not attached: no such file")
        .expect("the missing file is named");
    repl.expect("Seen it.").expect("the answer");
    let prompts = env.prompts_seen();
    assert!(prompts.contains("widget_marker"), "{prompts}");
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn bang_runs_a_command_after_asking_and_its_output_goes_into_the_next_prompt() {
    let env = start();
    env.push(vec![SimEvent::text("Noted.\n")], 0);
    let mut repl = env.repl(false);
    // `ls` is read-only: it runs without a question.
    repl.send("!ls\r").expect("!ls");
    repl.expect("README.md").expect("its output");
    repl.expect("go with your next prompt").expect("the note");
    // `touch` asks as bash would; answered once here.
    repl.send("!touch made-here\r").expect("!touch");
    repl.expect("Answer: o = once").expect("asked");
    repl.send("o\r").expect("answer once");
    repl.expect("go with your next prompt").expect("ran");
    assert!(env.cli.project.path().join("made-here").exists());
    repl.send("what do you see?\r").expect("a prompt");
    repl.expect("Noted.").expect("the answer");
    let prompts = env.prompts_seen();
    assert!(
        prompts.contains("I ran `ls` in the project folder") && prompts.contains("README.md"),
        "{prompts}"
    );
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn jobs_lists_the_sessions_background_jobs() {
    let env = start();
    env.push(
        vec![SimEvent::tool_call(
            "c1",
            "job",
            json!({"action": "start", "command": "sleep 30"}),
        )],
        0,
    );
    env.push(vec![SimEvent::text("Started.\n")], 0);
    let mut repl = env.repl(false);
    repl.send("/jobs\r").expect("/jobs");
    repl.expect("No background jobs").expect("none yet");
    repl.send("start a job\r").expect("a prompt");
    repl.expect("Answer: o = once").expect("asked to start it");
    repl.send("o\r").expect("answer once");
    repl.expect("✓ done").expect("run done");
    repl.send("/jobs\r").expect("/jobs");
    let seen = repl.expect("sleep 30").expect("the job is listed");
    assert!(text(&seen).contains("j1"), "{}", text(&seen));
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn totem_init_writes_agents_md_and_scaffolds_an_empty_folder() {
    let env = start();
    let out = env.cli.run(["init"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("Wrote AGENTS.md"), "{}", stdout(&out));
    assert!(env.cli.project.path().join("AGENTS.md").exists());

    let fresh = env.cli.project.path().join("new-app");
    let out = env.cli.run(["init", fresh.to_str().expect("utf-8")]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("Created a Total.js 5 project"),
        "{}",
        stdout(&out)
    );
    assert!(fresh.join("index.js").exists() && fresh.join("AGENTS.md").exists());
}

/// A write question shows the proposed change as a coloured diff, folded after 20 lines, and `v`
/// shows the rest; a command line's question names the part of it that needed asking.
#[test]
fn questions_show_the_diff_coloured_and_folded_and_the_subcommand() {
    let env = start();
    let numbered = |word: &str| {
        (1..=30)
            .map(|i| format!("{word} {i}\n"))
            .collect::<String>()
    };
    std::fs::write(env.cli.project.path().join("long.txt"), numbered("line")).expect("long.txt");
    env.push(
        vec![SimEvent::tool_call(
            "c1",
            "write",
            json!({"path": "long.txt", "content": numbered("LINE")}),
        )],
        0,
    );
    env.push(vec![SimEvent::text("Rewritten.")], 0);
    env.push(
        vec![SimEvent::tool_call(
            "c2",
            "bash",
            json!({"command": "ls && touch made.txt"}),
        )],
        0,
    );
    env.push(vec![SimEvent::text("Made.")], 0);
    let mut repl = env.repl(true);

    repl.send("rewrite long.txt\r").expect("a prompt");
    repl.expect("wants to write long.txt")
        .expect("the question");
    let folded = text(
        &repl
            .expect("more lines: v shows them all")
            .expect("the diff folded after 20 lines"),
    );
    // 20 lines: the two file names, the hunk, then the first 17 removed lines, in red.
    assert!(
        folded.contains("\x1b[31m-line 1\x1b[0m") && folded.contains("\x1b[31m-line 17\x1b[0m"),
        "{folded:?}"
    );
    assert!(folded.contains("\x1b[36m@@ -1,30 +1,30 @@"), "{folded:?}");
    assert!(!folded.contains("-line 18"), "{folded:?}");
    assert!(!folded.contains("+LINE"), "{folded:?}");
    repl.send("v\r").expect("see the whole diff");
    let all = text(&repl.expect("+LINE 30").expect("the rest of the diff"));
    assert!(all.contains("\x1b[31m-line 18\x1b[0m"), "{all:?}");
    assert!(all.contains("\x1b[32m+LINE 1\x1b[0m"), "{all:?}");
    repl.send("o\r").expect("answer once");
    repl.expect("Rewritten.").expect("the run goes on");

    repl.send("make a file\r").expect("a prompt");
    let asked = text(
        &repl
            .expect("Answer: o = once")
            .expect("the command's question"),
    );
    assert!(
        asked.contains("? bash wants to execute ls && touch made.txt")
            && asked.contains("asks for: \x1b[1mtouch made.txt\x1b[0m"),
        "{asked:?}"
    );
    repl.send("o\r").expect("answer once");
    repl.expect("Made.").expect("the run goes on");
    assert!(env.cli.project.path().join("made.txt").exists());
    cli_common::ctrl_d_until(&mut repl, Eof);
}

/// `/model` lists what settings.json (or `totem models --probe`) says about each model's tools
/// and streaming.
#[test]
fn model_shows_the_tools_a_probe_or_the_settings_found() {
    let env = start();
    env.runtime.block_on(async {
        env.client()
            .await
            .call_raw(
                "provider.add",
                json!({"name": "sim", "kind": "ollama", "url": env.sim.url(),
                       "defaultModel": "llama3.2:latest", "maxRetries": 0, "replace": true,
                       "models": {"llama3.2:latest": {"tools": "text", "stream": false}}}),
            )
            .await
            .expect("provider.add");
    });
    let mut repl = env.repl(false);
    repl.send("/model\r").expect("/model");
    repl.expect("sim/llama3.2:latest  131k context  tools in text  not streamed")
        .expect("the model's tools and streaming");
    repl.expect("--probe").expect("the hint");
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn compact_and_init_say_what_they_did_in_words() {
    let env = start();
    env.push(vec![SimEvent::text("Hello.\n")], 0);
    // The summary the compaction asks for.
    env.push(vec![SimEvent::text("The user said hi.")], 0);
    let mut repl = env.repl(false);
    repl.send("hi\r").expect("a prompt");
    repl.expect("✓ done").expect("run done");
    repl.send("/compact\r").expect("/compact");
    let seen = repl
        .expect("Compacted the conversation")
        .expect("the compaction is told");
    repl.send("/init\r").expect("/init");
    let init = repl.expect("AGENTS.md").expect("init is told");
    let shown = format!("{}{}", text(&seen), text(&init));
    assert!(!shown.contains("\"text\""), "no raw JSON: {shown:?}");
    assert!(!shown.contains('{'), "no raw JSON: {shown:?}");
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn a_fork_shows_the_assistants_answers_not_only_the_prompts() {
    let env = start();
    env.push(vec![SimEvent::text("The answer is forty-two.\n")], 0);
    let mut repl = env.repl(false);
    repl.send("what is the answer?\r").expect("type a prompt");
    repl.expect("✓ done").expect("run done");
    repl.send("/fork\r").expect("fork");
    // The fork's header, then its copied history: the prompt and the model's answer.
    repl.expect("Fork of").expect("the fork's header");
    let replayed = repl.expect("forty-two").expect("the answer in the fork");
    assert!(
        text(&replayed).contains("what is the answer?"),
        "the prompt comes first: {:?}",
        text(&replayed)
    );
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn help_lists_bang_and_at_and_a_missing_model_is_said_before_typing() {
    let env = start();
    let mut repl = env.repl(false);
    repl.send("/help\r").expect("help");
    repl.expect("!command").expect("!command listed");
    repl.expect("@path").expect("@path listed");
    cli_common::ctrl_d_until(&mut repl, Eof);

    // No provider and no local Ollama (the tests point it at a closed port): one line says so
    // before the person types.
    let cli = Cli::new();
    let mut command = cli.command(["attach", "--new"]);
    command.env("TERM", "xterm");
    let mut session = Session::spawn(command).expect("spawn totem in a pty");
    session.set_expect_timeout(Some(Duration::from_secs(30)));
    session.expect("Type a prompt").expect("greeting");
    session
        .expect("No model answers yet: ollama cannot be reached")
        .expect("the missing model is named at start");
    session.expect("totem provider add").expect("what to do");
    cli_common::ctrl_d_until(&mut session, Eof);
}

#[test]
fn totem_run_on_a_terminal_puts_the_usage_line_on_its_own_line() {
    let env = start();
    env.push(vec![SimEvent::text("No newline at the end")], 0);
    let mut command = env.cli.command(["run", "--model", MODEL, "hi"]);
    command.env("TERM", "xterm");
    let mut session = Session::spawn(command).expect("spawn totem run in a pty");
    session.set_expect_timeout(Some(Duration::from_secs(30)));
    let seen = session.expect(" in · ").expect("the usage line");
    let drawn = text(&seen);
    let answer = drawn.find("No newline at the end").expect("the answer");
    let between = &drawn[answer + "No newline at the end".len()..];
    assert!(
        between.starts_with("\r\n") || between.starts_with('\n'),
        "the usage line starts a line of its own: {drawn:?}"
    );
    session.expect(Eof).expect("totem run ends");
}

/// The screen a pty's whole output leaves, as a terminal of that size would show it.
fn screen(bytes: &[u8]) -> String {
    let side = |n| std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN);
    let mut parser = vt100::Parser::new(side(24), side(80), 0);
    parser.process(bytes);
    parser.screen().contents()
}

/// A slow local model: a chunk every 400 ms, thinking first, then one line in pieces.
fn push_slow_answer(env: &Env) {
    env.push(
        vec![
            SimEvent::thinking("First I read the question.\n", None),
            SimEvent::thinking("Then I weigh it.", None),
            SimEvent::text("Alpha beta "),
            SimEvent::text("gamma delta "),
            SimEvent::text("epsilon zeta "),
            SimEvent::text("eta theta "),
            SimEvent::text("Omega.\n"),
        ],
        400,
    );
}

/// Watches the answer [`push_slow_answer`] scripted on `terminal`: the thinking and the first
/// words are on screen while the rest is still coming, the thinking then folds to `folded`, and
/// once `end` shows, the finished line stands once in place of the unfinished one. Returns the
/// screen then.
fn see_the_slow_answer_live(
    terminal: &mut OsSession,
    folded: &str,
    end: impl expectrl::Needle,
) -> String {
    let mut all = b"\r\n".repeat(8);
    let thinking = terminal
        .expect("thinking…")
        .expect("the thinking shows while it streams");
    all.extend_from_slice(thinking.as_bytes());
    // The unfinished line is on screen before the stream ends.
    let partial = terminal.expect("gamma delta").expect("partial text");
    all.extend_from_slice(partial.as_bytes());
    let shown = screen(&all);
    assert!(
        shown.contains("Alpha beta gamma delta") && !shown.contains("Omega."),
        "the first words show while the rest is still coming:\n{shown}"
    );
    assert!(
        shown.contains(folded) && !shown.contains("thinking…"),
        "the thinking folded to one line once done:\n{shown}"
    );
    let rest = terminal.expect(end).expect("the answer's end");
    all.extend_from_slice(rest.as_bytes());
    let shown = screen(&all);
    assert_eq!(
        shown
            .matches("Alpha beta gamma delta epsilon zeta eta theta Omega.")
            .count(),
        1,
        "the finished line replaces the unfinished one:\n{shown}"
    );
    shown
}

#[test]
fn leaving_during_a_run_leaves_no_spinner_and_ctrl_l_clears_the_screen() {
    let env = start();
    // The model is slow to start: the spinner still turns when Ctrl-D is pressed.
    env.push_late(vec![SimEvent::text("Too late.\n")], 20_000);
    let mut repl = env.repl(false);
    repl.send("old words\r").expect("type a prompt");
    // Everything from the prompt on, below a few blank lines (the test joins the stream there, so
    // moves up need room as on a real screen).
    let mut all = b"\r\n".repeat(8);
    let spinning = cli_common::expect_shown(&mut repl, "waiting for the model", "the spinner");
    all.extend_from_slice(spinning.as_bytes());
    repl.send(ControlCode::EndOfTransmission).expect("Ctrl-D");
    let rest = repl.expect(Eof).expect("totem leaves");
    all.extend_from_slice(rest.as_bytes());
    let shown = screen(&all);
    assert!(shown.contains("Left session"), "{shown}");
    assert!(
        !shown.contains("waiting for the model"),
        "no frozen spinner after leaving:\n{shown}\n{:?}",
        String::from_utf8_lossy(&all)
    );

    // Ctrl-L clears the screen and draws the prompt again at the top, with what was typed.
    let mut repl = env.repl(false);
    repl.send("typed\x0c").expect("Ctrl-L");
    repl.expect("\x1b[H\x1b[J").expect("the screen cleared");
    repl.expect("typed")
        .expect("the prompt drawn again with the typed text");
    repl.send("\x15").expect("Ctrl-U empties the line");
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn a_slow_answer_shows_word_by_word_and_thinking_folds_to_one_line() {
    let env = start();
    push_slow_answer(&env);
    let mut repl = env.repl(false);
    repl.send("go slowly\r").expect("type a prompt");
    see_the_slow_answer_live(
        &mut repl,
        "┊ thought · 43 chars · /thinking shows it",
        "✓ done",
    );
    repl.send("/thinking\r").expect("type /thinking");
    repl.expect("┊ Then I weigh it.")
        .expect("the whole thinking, expanded");
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn the_line_by_the_prompt_says_where_i_am_and_a_wrong_choice_loses_nothing() {
    let env = start();
    env.sim.set_models(vec![
        totem_tests::sim::SimModel::new("llama3.2:latest", 131072),
        totem_tests::sim::SimModel::new("qwen-sim:latest", 32768).thinking(),
    ]);
    env.push(
        vec![SimEvent::text("Counted.\n"), SimEvent::usage(1200, 30)],
        0,
    );
    let mut repl = env.repl(false);
    // Where am I: mode, model, reasoning, context use; after a run, the context it used.
    repl.expect("◆ build · sim/llama3.2:latest · reasoning default · context 0/131.1k")
        .expect("the line by the prompt");
    repl.send("count\r").expect("type a prompt");
    repl.expect("✓ done").expect("run done");
    repl.expect("◆ build · sim/llama3.2:latest · reasoning default · context ")
        .expect("the line after the run");

    // A bare model id resolves across providers; a wrong one is refused at once, nothing lost.
    repl.send("/mode plan\r").expect("/mode plan");
    repl.expect("◆ plan · sim/llama3.2:latest")
        .expect("plan shown");
    repl.send("/model qwen-sim:latest\r")
        .expect("bare model id");
    repl.expect("The next prompts use sim/qwen-sim:latest.")
        .expect("resolved to its provider");
    repl.send("/reasoning high\r").expect("a model that thinks");
    repl.expect("◆ plan · sim/qwen-sim:latest · reasoning high")
        .expect("reasoning shown");
    repl.send("/model qwen-sm\r").expect("a typo");
    repl.expect("no model qwen-sm; the closest: sim/qwen-sim:latest")
        .expect("refused at once with the closest names");
    repl.send("/mode\r").expect("/mode");
    repl.expect("Mode: plan; the default is build.")
        .expect("the mode is kept and both named");
    repl.send("/model\r").expect("/model");
    repl.expect("Model: sim/qwen-sim:latest; the default is sim/llama3.2:latest.")
        .expect("the model is kept and both named");

    // /reasoning on a model that cannot think says so and changes nothing.
    repl.send("/model sim/llama3.2:latest\r")
        .expect("back to llama");
    repl.expect("cannot think: the reasoning level has no effect")
        .expect("said when choosing it");
    repl.send("/reasoning low\r").expect("reasoning on llama");
    repl.expect("sim/llama3.2:latest cannot think")
        .expect("said so");

    // A prompt totemd refuses stays in the input line, and Enter sends it again.
    repl.send("/mode nosuchmode\r")
        .expect("a mode the daemon lacks");
    repl.expect("The next prompts run in nosuchmode mode.")
        .expect("mode set");
    repl.send("keep these words\r").expect("type a prompt");
    repl.expect("totemd refused the prompt").expect("refused");
    repl.expect("› keep these words")
        .expect("the prompt is back in the line");
    repl.send("\r").expect("Enter sends it again");
    repl.expect("totemd refused the prompt")
        .expect("refused again: it was there, and the mode was not cleared");
    repl.expect("› keep these words")
        .expect("back in the line again");
    // Empty the line and leave; a key typed while rustyline redraws can be lost, so again until
    // it leaves.
    repl.set_expect_timeout(Some(Duration::from_secs(3)));
    let left = (0..8).any(|_| {
        repl.send("\x15").expect("Ctrl-U empties the line");
        std::thread::sleep(Duration::from_millis(200));
        repl.send(ControlCode::EndOfTransmission).expect("Ctrl-D");
        repl.expect("totem attach --session").is_ok()
    });
    assert!(left, "Ctrl-U then Ctrl-D did not leave");
}

#[test]
fn sessions_are_titled_by_their_first_prompt_renamed_and_filtered_by_typing() {
    let env = start();
    env.push(vec![SimEvent::text("Tall and bright.\n")], 0);
    env.push(vec![SimEvent::text("One, two.\n")], 0);
    let mut repl = env.repl(false);
    repl.send("tell me about lighthouses\r")
        .expect("first prompt");
    repl.expect("✓ done").expect("run done");
    // The line by the prompt follows the run's end; typed before it shows, the next command's
    // output would come first and that line after it.
    repl.expect("◆ build").expect("the line after the run");
    repl.send("/new\r").expect("/new");
    repl.expect("New session ·")
        .expect("a new untitled session");
    repl.send("count sheep\r")
        .expect("a prompt in the second session");
    repl.expect("✓ done").expect("run done");
    repl.expect("◆ build").expect("the line after the run");
    repl.send("/sessions\r").expect("/sessions");
    repl.expect("count sheep")
        .expect("the newest titled by its prompt");
    repl.expect("tell me about lighthouses")
        .expect("the first titled by its prompt, not New session");
    repl.expect("type words to filter").expect("the picker");
    repl.send("lighthouse\r").expect("type to filter");
    let filtered = repl.expect("type words to filter").expect("the list again");
    let shown = text(&filtered);
    assert!(
        shown.contains("1. tell me about lighthouses") && !shown.contains("count sheep"),
        "only the matching session: {shown:?}"
    );
    repl.send("1\r").expect("pick it");
    repl.expect("· tell me about lighthouses · ses_")
        .expect("switched, the header names its title");
    repl.send("/rename Beacons\r").expect("/rename");
    repl.expect("Renamed to “Beacons”.").expect("renamed");
    cli_common::ctrl_d_until(&mut repl, Eof);
}

#[test]
fn totem_run_on_a_colour_terminal_shows_each_word_as_it_comes() {
    let env = start();
    push_slow_answer(&env);
    let mut command = env.cli.command(["run", "--model", MODEL, "go slowly"]);
    command.env("TERM", "xterm");
    command.env_remove("NO_COLOR");
    let mut run = Session::spawn(command).expect("spawn totem run in a pty");
    run.set_expect_timeout(Some(Duration::from_secs(30)));
    let shown = see_the_slow_answer_live(&mut run, "┊ thought · 43 chars", Eof);
    assert!(
        !shown.contains("/thinking"),
        "totem run has no /thinking to offer:\n{shown}"
    );
}
