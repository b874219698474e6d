//! The Neovim plugin (`editors/nvim`) as a person uses it: a real Neovim with its own terminal
//! interface on a pseudo-terminal, installed from the repository path like any plugin, against the
//! real totemd and the Ollama simulator, with the REPL attached to the same session in a second
//! pseudo-terminal. The test types keys and reads the screen (drawn by `vt100` from Neovim's
//! output): the plugin starts the daemon, the answer streams into the chat window, the question's
//! diff pops up in a float and `o` answers it, the changed buffer reloads, `:TotemDiff` and
//! `:TotemUndo` work, the REPL answers the next question and the float closes, attachments reach
//! the model, the session picker and `:checkhealth totem` show what they should.

mod cli_common;

use std::time::Duration;

use cli_common::Cli;
use expectrl::{Eof, Expect, Session};
use serde_json::json;
use totem_tests::nvim::{Nvim, NvimSetup};
use totem_tests::sim::{Reply, Script, SimEvent};

fn edit(id: &str, from: &str, to: &str) -> SimEvent {
    SimEvent::tool_call(
        id,
        "edit",
        json!({"path": "math.js", "oldString": from, "newString": to}),
    )
}

/// The screen shows `text` and, after it, the end of its run.
fn ended_after(screen: &str, text: &str) -> bool {
    screen
        .split_once(text)
        .is_some_and(|(_, after)| after.contains("✓ done"))
}

#[test]
fn the_plugin_and_the_repl_share_a_session_in_a_real_neovim() {
    let nvim_bin = totem_tests::external::neovim();
    let cli = Cli::new();
    let (runtime, sim) = cli_common::sim_settings(&cli);
    std::fs::write(
        cli.project.path().join("math.js"),
        "const a = 1;\nconst b = 2;\n",
    )
    .expect("math.js");
    {
        let _guard = runtime.enter();
        let push = |events: Vec<SimEvent>, delay_ms: u64| {
            sim.push(Reply::Stream(Script {
                delay_ms,
                ..Script::new(events)
            }))
        };
        push(vec![edit("c1", "const b = 2;", "const b = 3;")], 0);
        push(
            vec![
                SimEvent::text("First words. "),
                SimEvent::text("Middle words. "),
                SimEvent::text("Last words."),
            ],
            400,
        );
        push(vec![edit("c2", "const b = 2;", "const b = 4;")], 0);
        push(vec![SimEvent::text("Done again.")], 0);
        push(vec![edit("c3", "const b = 4;", "const b = 5;")], 0);
        push(vec![SimEvent::text("Understood.")], 0);
        push(vec![SimEvent::text("a is one.")], 0);
        push(vec![SimEvent::text("Still one.")], 0);
    }
    let config = tempfile::tempdir().expect("nvim's folders");
    let mut nvim = Nvim::start(&NvimSetup {
        nvim: &nvim_bin,
        totem: &cli_common::binary("totem"),
        home: cli.home(),
        project: cli.project.path(),
        config: config.path(),
        file: "math.js",
        options: "",
    })
    .expect("start nvim in a pty");
    nvim.wait_for("const a = 1;");

    // :Totem starts the daemon (none answers yet) and opens the chat on a new session.
    nvim.command("Totem");
    nvim.wait_for("totem://prompt");
    let session = nvim.lua("require('totem.chat').session_id() or ''");
    assert!(
        session.starts_with("ses_"),
        "no session in the chat: {session:?}"
    );
    let mut command = cli.command(["attach", "--session", &session]);
    command.env("TERM", "xterm");
    let mut repl = Session::spawn(command).expect("spawn totem in a pty");
    repl.set_expect_timeout(Some(Duration::from_secs(30)));
    repl.expect(session.as_str())
        .expect("the REPL follows the session");

    // 1. A prompt typed in the prompt window and sent with <C-s>; the edit's question pops up in
    // a float with its diff, the status line says Totem waits; `o` answers it.
    nvim.keys("imake b three\x13");
    let screen = nvim.wait_for("Totem asks");
    for want in [
        "edit wants to write math.js",
        "-const b = 2;",
        "+const b = 3;",
        "o once · s this session · p this project",
    ] {
        assert!(screen.contains(want), "the float lacks {want:?}:\n{screen}");
    }
    nvim.wait_for("Totem: waiting for you");
    nvim.wait_for("A question waits for you: edit math.js");
    repl.expect("? edit wants to write math.js")
        .expect("the REPL shows the question");
    repl.expect("+const b = 3;").expect("with its diff");
    nvim.keys("o");
    nvim.wait("the float to close", |s| !s.contains("Totem asks"));
    repl.expect("(answered in another terminal)")
        .expect("the REPL sees Neovim's answer");

    // The file's window reloads with the change; the answer streams in, part by part.
    nvim.wait("math.js to reload", |s| s.contains("const b = 3;"));
    let screen = nvim.wait_for("First words.");
    assert!(
        !screen.contains("Last words."),
        "the answer was drawn at once, not as it streamed:\n{screen}"
    );
    assert!(
        screen.contains("llama3.2:latest · running"),
        "the status line while running:\n{screen}"
    );
    nvim.wait_for("Last words.");
    nvim.wait_for("✓ done");
    nvim.wait_for("Run done");
    repl.expect("Last words.")
        .expect("the REPL sees the answer");

    // :TotemDiff: before on the left, now on the right, in diff mode, in a new tab.
    nvim.command("TotemDiff");
    nvim.wait("the diff's two sides", |s| {
        s.lines()
            .any(|l| l.contains("const b = 2;") && l.contains("const b = 3;"))
    });
    assert_eq!(
        nvim.lua(
            "#vim.api.nvim_tabpage_list_wins(0) == 2 and vim.iter(vim.api.nvim_tabpage_list_wins(0)):all(function(w) return vim.wo[w].diff end) and 'diff' or 'no'"
        ),
        "diff"
    );
    nvim.keys("q");
    nvim.wait("the diff tab to close", |s| {
        !s.lines()
            .any(|l| l.contains("const b = 2;") && l.contains("const b = 3;"))
    });

    // :TotemUndo puts the file back, :TotemRedo applies the change again; its window reloads.
    let undone = |s: &str| s.contains("const b = 2;") && !s.contains("const b = 3;");
    nvim.command("TotemUndo");
    nvim.wait("math.js to reload after undo", undone);
    nvim.command("TotemRedo");
    nvim.wait("math.js to reload after redo", |s| {
        s.contains("const b = 3;") && s.contains("redid the changes of")
    });
    nvim.command("TotemUndo");
    nvim.wait("math.js to reload after the second undo", undone);

    // 2. The REPL answers the next question: the float in Neovim closes by itself.
    nvim.command("Totem");
    nvim.keys("imake b four\x13");
    nvim.wait_for("Totem asks");
    repl.expect("+const b = 4;").expect("the second diff");
    repl.send("o\r").expect("answer once");
    nvim.wait("the REPL's answer to close the float", |s| {
        !s.contains("Totem asks")
    });
    nvim.wait("math.js to reload", |s| s.contains("const b = 4;"));
    nvim.wait("the second run's end", |s| ended_after(s, "Done again."));

    // `d` denies with a note for the model, asked for on the command line; the file stays.
    nvim.command("Totem");
    nvim.keys("imake b five\x13");
    nvim.wait_for("Totem asks");
    nvim.keys("d");
    nvim.wait_for("Deny; note for the model (optional):");
    nvim.keys("keep it at four\r");
    nvim.wait("the run's end", |s| ended_after(s, "Understood."));
    nvim.wait("the float to close", |s| !s.contains("Totem asks"));
    assert!(nvim.text().contains("const b = 4;"));
    repl.expect("Understood.")
        .expect("the REPL sees the run go on");
    let denied = {
        let _guard = runtime.enter();
        sim.chat_requests()
    };
    let denied = denied.last().expect("requests").body.to_string();
    assert!(denied.contains("keep it at four"), "{denied}");

    // 3. :TotemAsk with a range sends those lines; the REPL shows the prompt and its attachment.
    nvim.keys("\x1b\x17t");
    nvim.command("1TotemAsk what is a");
    nvim.wait_for("📎 math.js (lines 1–1)");
    nvim.wait("the run's end", |s| ended_after(s, "a is one."));
    repl.expect("› what is a").expect("the prompt from Neovim");
    repl.expect("📎 math.js (lines 1–1)")
        .expect("its attachment");

    // :TotemAdd attaches the buffer as it is, unsaved edit included, to the next prompt.
    nvim.keys("\x17tggccconst a = 10; // unsaved\x1b");
    nvim.command("TotemAdd");
    nvim.wait_for("Attached math.js to the next prompt");
    nvim.command("Totem");
    nvim.keys("iand now?\x13");
    nvim.wait_for("📎 math.js, unsaved");
    nvim.wait("the run's end", |s| ended_after(s, "Still one."));
    let requests = {
        let _guard = runtime.enter();
        sim.chat_requests()
    };
    let last = requests.last().expect("requests").body.to_string();
    assert!(
        last.contains("Attached file `math.js`, unsaved editor text")
            && last.contains("const a = 10; // unsaved"),
        "{last}"
    );

    // Sessions: a new one, then the first again through the picker.
    nvim.command("Totem new");
    nvim.wait("an empty chat", |s| !s.contains("Still one."));
    nvim.command("TotemSessions");
    let screen = nvim.wait_for("Type number and <Enter>");
    let first = screen
        .lines()
        .filter_map(|l| l.split_once(": New session"))
        .find(|(_, rest)| !rest.contains(", 0 messages"))
        .map(|(number, _)| number)
        .unwrap_or_else(|| panic!("the first session in the picker:\n{screen}"))
        .trim()
        .to_string();
    nvim.keys(&format!("{first}\r"));
    // The chat shows the end of the first session's history again.
    nvim.wait_for("Still one.");
    assert_eq!(
        nvim.lua("require('totem.chat').session_id()"),
        session,
        "the picker opened another session"
    );

    // The float layout: the chat and its prompt in floats over the editor.
    nvim.command("lua require('totem').config.layout = 'float'; require('totem.chat').close()");
    nvim.wait("the chat to close", |s| !s.contains("totem://prompt"));
    nvim.command("Totem");
    let screen = nvim.wait_for("╭");
    assert!(
        screen.contains(" Totem ")
            && screen.contains("Still one.")
            && screen.contains("Prompt · <C-s> sends"),
        "the float chat:\n{screen}"
    );
    assert_eq!(
        nvim.lua("vim.api.nvim_win_get_config(0).relative"),
        "editor",
        "the prompt is a float"
    );

    // :checkhealth totem names the daemon, the protocol and the provider.
    nvim.command("checkhealth totem");
    let screen = nvim.wait_for("protocol version 1");
    for want in ["provider sim (ollama)", "totemd "] {
        assert!(
            screen.contains(want),
            "checkhealth lacks {want:?}:\n{screen}"
        );
    }
    nvim.command("qall!");
    assert_eq!(
        std::fs::read_to_string(cli.project.path().join("math.js")).expect("math.js"),
        "const a = 1;\nconst b = 4;\n"
    );
    cli_common::ctrl_d_until(&mut repl, Eof);
}
