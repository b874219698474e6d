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
    let (cli, runtime, sim) = cli_common::editor_project();
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
            // Apart enough for a loaded CI machine to see the first words alone.
            1000,
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
    // The file's window is the left one: its lines start the screen's (the chat on the right
    // shows the edit's result, "const b = 3;" included).
    let file_has = |s: &str, line: &str| s.lines().any(|l| l.starts_with(line));
    nvim.wait("math.js to reload", |s| file_has(s, "const b = 3;"));
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
    // The undo also puts the run's prompt back in the prompt window; the redo takes it out.
    let undone = |s: &str| file_has(s, "const b = 2;") && !file_has(s, "const b = 3;");
    let prompt_back =
        |nvim: &Nvim| nvim.lua("vim.fn.getbufline(vim.fn.bufnr('totem://prompt'), 1)[1] or ''");
    nvim.command("TotemUndo");
    nvim.wait("math.js to reload after undo", undone);
    assert_eq!(prompt_back(&nvim), "make b three");
    nvim.command("TotemRedo");
    nvim.wait("math.js to reload after redo", |s| {
        file_has(s, "const b = 3;") && s.contains("redid the changes of")
    });
    assert_eq!(prompt_back(&nvim), "");
    nvim.command("TotemUndo");
    nvim.wait("math.js to reload after the second undo", undone);
    assert_eq!(prompt_back(&nvim), "make b three");
    nvim.command(
        "lua vim.api.nvim_buf_set_lines(vim.fn.bufnr('totem://prompt'), 0, -1, false, {})",
    );

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
    // The notice, or the prompt's header naming the attachment: a redraw under load can clear
    // the notice before the screen is read (CI at load 5 showed the header only).
    nvim.wait("the attachment", |s| {
        s.contains("Attached math.js to the next prompt") || s.contains("sends · 📎 math.js")
    });
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
        .filter_map(|l| l.split_once(": make b three"))
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
    assert!(
        !screen.contains("no socket"),
        "one verdict on the daemon:\n{screen}"
    );
    for want in ["provider sim (ollama)", "totemd ", "the daemon answers at"] {
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

fn edit_in(id: &str, path: &str, from: &str, to: &str) -> SimEvent {
    SimEvent::tool_call(
        id,
        "edit",
        json!({"path": path, "oldString": from, "newString": to}),
    )
}

/// How often `needle` occurs in the chat buffer (the whole buffer, not only what the window shows).
fn in_chat(nvim: &Nvim, needle: &str) -> usize {
    nvim.lua("require('totem.chat').text()")
        .matches(needle)
        .count()
}

#[test]
fn answers_for_the_session_and_project_abort_layouts_and_a_daemon_restart() {
    let nvim_bin = totem_tests::external::neovim();
    let cli = Cli::new();
    let (runtime, sim) = cli_common::sim_settings(&cli);
    let project = cli.project.path();
    std::fs::write(project.join("math.js"), "const b = 2;\n").expect("math.js");
    std::fs::write(project.join("other.js"), "let c = 1;\n").expect("other.js");
    {
        let _guard = runtime.enter();
        let push = |events: Vec<SimEvent>, delay_ms: u64| {
            sim.push(Reply::Stream(Script {
                delay_ms,
                ..Script::new(events)
            }))
        };
        // Session 1: `s` for math.js, so its second edit does not ask; `p` for other.js.
        push(
            vec![edit_in("a1", "math.js", "const b = 2;", "const b = 3;")],
            0,
        );
        push(
            vec![edit_in("a2", "math.js", "const b = 3;", "const b = 4;")],
            0,
        );
        push(
            vec![edit_in("a3", "other.js", "let c = 1;", "let c = 2;")],
            0,
        );
        push(vec![SimEvent::text("Both edited.")], 0);
        // Session 2: other.js is allowed for the project; math.js asks again (put aside, then
        // shown again with :TotemAnswer).
        push(
            vec![edit_in("b1", "other.js", "let c = 2;", "let c = 3;")],
            0,
        );
        push(
            vec![edit_in("b2", "math.js", "const b = 4;", "const b = 5;")],
            0,
        );
        push(vec![SimEvent::text("Second session done.")], 0);
        // A slow answer, stopped with :TotemAbort.
        push(
            vec![
                SimEvent::text("Slow start. "),
                SimEvent::text("Slow middle. "),
                SimEvent::text("Slow end."),
            ],
            2000,
        );
        // A question open when the daemon stops; after the restart, a streamed answer.
        push(
            vec![edit_in("d1", "math.js", "const b = 5;", "const b = 6;")],
            0,
        );
        push(
            vec![
                SimEvent::text("Back after "),
                SimEvent::text("the restart."),
            ],
            300,
        );
        push(vec![SimEvent::text("Float answer.")], 0);
    }
    let config = tempfile::tempdir().expect("nvim's folders");
    let mut nvim = Nvim::start(&NvimSetup {
        nvim: &nvim_bin,
        totem: &cli_common::binary("totem"),
        home: cli.home(),
        project,
        config: config.path(),
        file: "math.js",
        options: "layout = \"below\"",
    })
    .expect("start nvim in a pty");
    nvim.wait_for("const b = 2;");

    // The "below" layout: the chat spans the editor's width under the file, the prompt under it.
    nvim.command("Totem");
    nvim.wait_for("totem://prompt");
    assert_eq!(
        nvim.lua(
            "(function() local c = require('totem.chat').state; \
             local cp, pp = vim.fn.win_screenpos(c.win), vim.fn.win_screenpos(c.pwin); \
             return (cp[1] > 1 and cp[2] == 1 and vim.api.nvim_win_get_width(c.win) == vim.o.columns \
             and pp[1] > cp[1]) and 'below' or vim.inspect({cp, pp}) end)()"
        ),
        "below"
    );

    // `s` allows math.js for this session: its second edit asks nothing; `p` allows other.js for
    // the project.
    // The chat names a question a moment before its float opens and takes the keys: wait for
    // the float itself (its left border, then the question).
    nvim.keys("iedit both\x13");
    nvim.wait_for("│edit wants to write math.js");
    nvim.keys("s");
    let screen = nvim.wait_for("│edit wants to write other.js");
    assert!(screen.contains("+let c = 2;"), "{screen}");
    nvim.keys("p");
    nvim.wait("the run's end", |s| ended_after(s, "Both edited."));
    assert_eq!(in_chat(&nvim, "? edit wants to"), 2, "{}", nvim.text());
    assert_eq!(
        std::fs::read_to_string(project.join("math.js")).expect("math.js"),
        "const b = 4;\n"
    );

    // `gd` in the chat shows the changes of the run under the cursor (:TotemDiff completes its
    // id); ]f and [f go from one file to the other, round the ends.
    let run = nvim.lua("require('totem.chat').state.runs[1].id");
    assert!(run.starts_with("run_"), "{run:?}");
    assert_eq!(
        nvim.lua("vim.fn.getcompletion('TotemDiff ', 'cmdline')[1]"),
        run
    );
    nvim.keys("\x1b\x17k");
    nvim.keys("gd");
    let first = nvim.wait_for("Totem diff 1/2: ");
    let name = |screen: &str, at: &str| {
        screen
            .split_once(at)
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no {at:?} on the screen:\n{screen}"))
    };
    let file1 = name(&first, "Totem diff 1/2: ");
    nvim.keys("]f");
    let file2 = name(&nvim.wait_for("Totem diff 2/2: "), "Totem diff 2/2: ");
    assert_ne!(file1, file2);
    let mut names = [file1.clone(), file2.clone()];
    names.sort();
    assert_eq!(names, ["math.js", "other.js"]);
    nvim.keys("]f");
    nvim.wait_for(&format!("Totem diff 1/2: {file1}"));
    nvim.keys("[f");
    let screen = nvim.wait_for(&format!("Totem diff 2/2: {file2}"));
    assert!(
        screen.contains("let c = 1;") && screen.contains("let c = 2;")
            || screen.contains("const b = 2;") && screen.contains("const b = 4;"),
        "both sides of {file2}:\n{screen}"
    );
    nvim.keys("q");
    nvim.wait("the diff tab to close", |s| !s.contains("Totem diff"));
    // The view's keys are gone from the user's own buffers: `q` records macros there again.
    assert_eq!(
        nvim.lua(
            "#vim.tbl_filter(function(m) return m.lhs == 'q' or m.lhs == ']f' end, \
             vim.api.nvim_buf_get_keymap(vim.fn.bufnr('math.js'), 'n'))"
        ),
        "0"
    );

    // :TotemModel picks the model of the next prompts from the providers' lists.
    nvim.command("TotemModel");
    let screen = nvim.wait_for("Type number and <Enter>");
    let qwen = screen
        .lines()
        .find_map(|l| l.split_once(": sim/qwen3:8b"))
        .map(|(number, _)| number.trim().to_string())
        .unwrap_or_else(|| panic!("qwen3:8b in the model picker:\n{screen}"));
    nvim.keys(&format!("{qwen}\r"));
    nvim.wait_for("Totem: qwen3:8b");

    // Session 2: other.js goes through (remembered for the project), math.js asks again; `q`
    // puts the question aside and :TotemAnswer brings it back.
    nvim.command("Totem new");
    nvim.wait("an empty chat", |s| !s.contains("Both edited."));
    nvim.command("TotemRename Second chat");
    nvim.wait_for("Totem · Second chat");
    nvim.keys("iedit again\x13");
    let screen = nvim.wait_for("Totem asks");
    assert!(
        screen.contains("edit wants to write math.js"),
        "only math.js asks:\n{screen}"
    );
    nvim.keys("q");
    let screen = nvim.wait("the float to be put aside", |s| !s.contains("Totem asks"));
    assert!(screen.contains("Totem: waiting for you"), "{screen}");
    nvim.command("TotemAnswer");
    // The float's title is drawn before its diff: wait for both (CI caught the screen between).
    let screen = nvim.wait("the question brought back with its diff", |s| {
        s.contains("Totem asks") && s.contains("+const b = 5;")
    });
    assert!(screen.contains("+const b = 5;"), "{screen}");
    nvim.keys("o");
    nvim.wait("the run's end", |s| ended_after(s, "Second session done."));
    assert!(nvim.text().contains("✓ done in "), "{}", nvim.text());
    assert_eq!(in_chat(&nvim, " s · qwen3:8b"), 1, "{}", nvim.text());
    let requests = {
        let _guard = runtime.enter();
        sim.chat_requests()
    };
    assert_eq!(requests.last().expect("requests").body["model"], "qwen3:8b");
    assert_eq!(in_chat(&nvim, "? edit wants to"), 1, "{}", nvim.text());
    assert_eq!(
        std::fs::read_to_string(project.join("other.js")).expect("other.js"),
        "let c = 3;\n"
    );

    // :TotemAbort stops a run while it streams (in plan mode, picked with :TotemMode).
    nvim.command("TotemMode plan");
    nvim.wait_for("Totem · Second chat [plan]");
    nvim.command("Totem");
    nvim.keys("iwrite slowly\x13");
    nvim.wait_for("## Totem (plan)");
    nvim.wait_for("Slow start.");
    nvim.command("TotemAbort");
    nvim.wait_for("■ run aborted");
    nvim.wait_for("Run aborted");
    std::thread::sleep(Duration::from_millis(4500));
    assert!(!nvim.text().contains("Slow end."), "{}", nvim.text());

    nvim.command("TotemMode build");
    nvim.wait("the mode off the bar", |s| !s.contains("[plan]"));

    // The daemon stops while a question waits: the float goes, the plugin starts the daemon
    // again, follows the session from where it was (the run was interrupted, its question
    // withdrawn: both shown once), says so once, and the next prompt streams.
    nvim.command("Totem");
    nvim.keys("ione more\x13");
    nvim.wait_for("Totem asks");
    let stopped = cli.run(["daemon", "stop"]);
    assert!(stopped.status.success(), "{stopped:?}");
    nvim.wait("the float to close", |s| !s.contains("Totem asks"));
    nvim.wait_for("reconnecting…");
    nvim.wait_for("■ run interrupted");
    nvim.wait_for("· question withdrawn");
    let messages = nvim.lua("vim.fn.execute('messages')");
    assert_eq!(
        messages.matches("Reconnected to totemd").count(),
        1,
        "{messages}"
    );
    for once in [
        "Second session done.",
        "Slow start.",
        "■ run aborted",
        "■ run interrupted",
    ] {
        assert_eq!(in_chat(&nvim, once), 1, "{once:?} in\n{}", nvim.text());
    }
    nvim.command("Totem");
    nvim.keys("iare you back\x13");
    let screen = nvim.wait_for("Back after");
    assert!(
        !screen.contains("the restart."),
        "the answer was drawn at once, not as it streamed:\n{screen}"
    );
    nvim.wait("the run's end", |s| {
        ended_after(s, "Back after the restart.")
    });
    assert!(nvim.text().contains("Totem: qwen3:8b"));

    // The "left" layout, then the float one: a prompt sent from the float streams into it, and
    // closing the prompt closes the chat too.
    nvim.command("lua require('totem').config.layout = 'left'; require('totem.chat').close()");
    nvim.wait("the chat to close", |s| !s.contains("totem://prompt"));
    nvim.command("Totem");
    nvim.wait_for("totem://prompt");
    assert_eq!(
        nvim.lua(
            "(function() local c = require('totem.chat').state; \
             local cp = vim.fn.win_screenpos(c.win); \
             local fp = vim.fn.win_screenpos(vim.fn.bufwinid('math.js')); \
             return (cp[2] == 1 and fp[2] > 1) and 'left' or vim.inspect({cp, fp}) end)()"
        ),
        "left"
    );
    nvim.command("lua require('totem').config.layout = 'float'; require('totem.chat').close()");
    nvim.wait("the chat to close", |s| !s.contains("totem://prompt"));
    nvim.command("Totem");
    nvim.wait_for("Prompt · <C-s> sends");
    nvim.keys("iin a float\x13");
    nvim.wait("the run's end", |s| ended_after(s, "Float answer."));
    assert_eq!(
        nvim.lua("vim.api.nvim_win_get_config(require('totem.chat').state.win).relative"),
        "editor"
    );
    nvim.keys("\x1b:q\r");
    nvim.wait("both floats to close", |s| !s.contains("Float answer."));
    assert_eq!(
        nvim.lua("#vim.tbl_filter(function(w) return vim.api.nvim_win_get_config(w).relative ~= '' end, vim.api.nvim_list_wins())"),
        "0"
    );
    nvim.command("qall!");
}

/// Debian's and Ubuntu's Neovim 0.7: every command and `:checkhealth totem` say the version
/// needed, and nothing else breaks (no Lua error, `setup{}` in a config is harmless).
#[test]
fn an_old_neovim_is_told_the_version_it_needs() {
    let home = tempfile::tempdir().expect("home");
    let plugin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../editors/nvim");
    let health = home.path().join("health.txt");
    let mut command = totem_tests::external::debian_neovim();
    command
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("XDG_STATE_HOME", home.path().join(".state"))
        .env("XDG_DATA_HOME", home.path().join(".data"))
        .arg("--headless")
        .arg("--clean")
        .arg("--cmd")
        .arg(format!("set rtp^={}", plugin.display()))
        .args(["-c", "lua require('totem').setup({ layout = 'float' })"])
        .args(["-c", "lua assert(require('totem').statusline() == '')"])
        .args(["-c", "Totem", "-c", "TotemSessions", "-c", "TotemAsk hi"])
        .args(["-c", "checkhealth totem"])
        .arg("-c")
        .arg(format!("w! {}", health.display()))
        .args(["-c", "qa!"])
        .current_dir(home.path())
        .stdin(std::process::Stdio::null());
    let out = command.output().expect("run Debian's nvim");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let version = String::from_utf8_lossy(
        &totem_tests::external::debian_neovim()
            .arg("--version")
            .output()
            .expect("nvim --version")
            .stdout,
    )
    .into_owned();
    assert!(version.starts_with("NVIM v0.7"), "{version}");
    assert_eq!(
        stderr.matches("Totem needs Neovim 0.10 or newer.").count(),
        3,
        "each command says so:\n{stderr}"
    );
    for broken in ["E5108", "attempt to", "stack traceback", "nil value"] {
        assert!(!stderr.contains(broken), "{broken}:\n{stderr}");
    }
    let report = std::fs::read_to_string(&health).expect("the health report");
    assert!(
        report.contains("ERROR")
            && report.contains("Totem needs Neovim 0.10 or newer; this is 0.7"),
        "{report}"
    );
    assert!(!report.contains("socket"), "{report}");
}
