//! Untrusted text on the user's screen: a model (or a project file) that writes terminal control
//! sequences (CSI, OSC titles, OSC 52 clipboard writes, clear screen, BEL, CR) or bidi controls
//! sees them shown as visible escapes by the REPL and by `totem run`, through the real daemon with
//! a scripted model; a question shows exactly the command that runs.

mod cli_common;

use std::time::Duration;

use cli_common::{SimCli, assert_exit, stderr, stdout};
use expectrl::session::OsSession;
use expectrl::{Expect, Session};
use serde_json::json;
use totem_tests::sim::SimEvent;

use totem_tests::setup::MODEL;

/// The model's answer: every sequence a terminal would obey.
const HOSTILE: &str = "A \x1b[35;5mblink\x1b[0m \x1b]0;TITLE\x07 \x1b]52;c;cHduZWQ=\x07 \x1b[2J\x1b[H bell\x07 cr\rover \u{202e}txt.exe \u{9b}31m end\n";

/// What each sequence of [`HOSTILE`] must not reach the terminal as, and what it shows as.
const SHAPES: &[(&str, &str)] = &[
    ("\x1b[35;5m", "\\x1b[35;5mblink"),
    ("\x1b]0;TITLE", "\\x1b]0;TITLE\\x07"),
    ("\x1b]52;", "\\x1b]52;c;cHduZWQ=\\x07"),
    ("\x1b[2J", "\\x1b[2J\\x1b[H"),
    ("bell\x07", "bell\\x07"),
    ("cr\rover", "cr\\rover"),
    ("\u{202e}", "<U+202E>txt.exe"),
    ("\u{9b}", "<U+009B>31m"),
];

fn assert_all_escaped(shown: &str, what: &str) {
    for (raw, escaped) in SHAPES {
        assert!(
            !shown.contains(raw),
            "{what} let {raw:?} through: {shown:?}"
        );
        assert!(
            shown.contains(escaped),
            "{what} lacks {escaped:?}: {shown:?}"
        );
    }
}

/// The command of the issue: a CR and an erase-line would paint a harmless command over `touch`.
const FAKE_COMMAND: &str = "touch PWN '\r\x1b[2K  asks for: echo hello'";
const FAKE_SHOWN: &str = "touch PWN '\\r\\x1b[2K  asks for: echo hello'";

fn repl(env: &SimCli) -> OsSession {
    let mut command = env.cli.command(["attach", "--new"]);
    command.env("TERM", "xterm").env_remove("NO_COLOR");
    let mut session = Session::spawn(command).expect("spawn totem in a pty");
    session.set_expect_timeout(Some(Duration::from_secs(30)));
    cli_common::expect_shown(&mut session, "Type a prompt", "greeting");
    session
        .send(format!("/model {MODEL}\r"))
        .expect("choose the model");
    cli_common::expect_shown(&mut session, "The next prompts use", "model chosen");
    session
}

fn text(captures: &expectrl::Captures) -> String {
    String::from_utf8_lossy(captures.as_bytes()).into_owned()
}

/// In the REPL (colours and Markdown on): the question shows the command as it runs, escapes and
/// all; the write question's diff cannot paint over itself; the answer's sequences are escaped
/// before Totem adds its own styling.
#[test]
fn the_repl_shows_hostile_text_as_escapes_and_the_command_as_it_runs() {
    let env = SimCli::start();
    std::fs::write(env.cli.project.path().join("notes.txt"), "keep\n").expect("notes.txt");
    env.push(
        vec![SimEvent::tool_call(
            "c1",
            "bash",
            json!({"command": FAKE_COMMAND}),
        )],
        0,
    );
    env.push(
        vec![SimEvent::tool_call(
            "c2",
            "write",
            json!({"path": "notes.txt", "content": "keep\nrm -rf ~ \r\x1b[2K\x1b[32m+ a harmless line\x1b]0;T\x07\n"}),
        )],
        0,
    );
    env.push(vec![SimEvent::text(HOSTILE)], 0);
    let mut repl = repl(&env);

    repl.send("go\r").expect("a prompt");
    let asked = text(&cli_common::expect_shown(
        &mut repl,
        "Answer: o = once",
        "the command's question",
    ));
    assert!(
        asked.contains(&format!("? bash wants to execute {FAKE_SHOWN}")),
        "{asked:?}"
    );
    repl.send("d\r").expect("deny");

    let asked = text(&cli_common::expect_shown(
        &mut repl,
        "Answer: o = once",
        "the write's question",
    ));
    assert!(asked.contains("wants to write notes.txt"), "{asked:?}");
    assert!(
        asked.contains("+rm -rf ~ \\r")
            && asked.contains("\\x1b[2K\\x1b[32m+ a harmless line\\x1b]0;T\\x07"),
        "{asked:?}"
    );
    assert!(!asked.contains("\x1b]0;T"), "{asked:?}");
    repl.send("d\r").expect("deny");

    let answer = text(&cli_common::expect_shown(&mut repl, " end", "the answer"));
    assert_all_escaped(&answer, "the REPL's answer");
    assert!(!env.cli.project.path().join("PWN").exists());
    assert_eq!(
        std::fs::read_to_string(env.cli.project.path().join("notes.txt")).expect("notes"),
        "keep\n"
    );
    cli_common::ctrl_d_until(&mut repl, expectrl::Eof);
}

/// `totem run` piped: the answer is printed with every sequence escaped; the refused question's
/// line on stderr shows the command's escapes too.
#[test]
fn totem_run_prints_hostile_text_as_escapes() {
    let env = SimCli::start();
    env.push(
        vec![SimEvent::tool_call(
            "c1",
            "bash",
            json!({"command": FAKE_COMMAND}),
        )],
        0,
    );
    env.push(vec![SimEvent::text(HOSTILE)], 0);
    let out = env.cli.run(["run", "go"]);
    assert_exit(&out, 4);
    let shown = stdout(&out);
    assert_all_escaped(&shown, "totem run's answer");
    assert!(!shown.contains('\x1b'), "{shown:?}");
    let err = stderr(&out);
    assert!(err.contains(FAKE_SHOWN), "{err:?}");
    assert!(!err.contains('\x1b') && !err.contains('\r'), "{err:?}");
    assert!(!env.cli.project.path().join("PWN").exists());
}

/// Issue 30 item 7: `--allow edit` does not let the model write a git hook or git's config; with
/// no terminal to ask on, the write is refused, and the line says why.
#[test]
fn allow_edit_does_not_cover_writes_under_git() {
    let env = SimCli::start();
    let hooks = env.cli.project.path().join(".git/hooks");
    std::fs::create_dir_all(&hooks).expect(".git/hooks");
    env.push(
        vec![SimEvent::tool_call(
            "c1",
            "write",
            json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch PWN\n"}),
        )],
        0,
    );
    env.push(vec![SimEvent::text("Done.")], 0);
    let out = env.cli.run(["run", "--allow", "edit", "add a hook"]);
    assert_exit(&out, 4);
    assert!(!hooks.join("pre-commit").exists());
    let err = stderr(&out);
    assert!(err.contains("under .git/"), "{err}");
}

/// The boot check's skip notice names where the project's `node_modules/total5` links to: a path
/// the project chose. A link to a folder whose name is an OSC title and a clear screen reaches
/// `totem run`'s output as visible escapes, with no raw ESC or BEL byte.
#[test]
fn a_hostile_link_target_in_the_boot_notice_is_shown_as_escapes() {
    let env = SimCli::start();
    let root = env.cli.project.path();
    std::fs::write(
        root.join("package.json"),
        r#"{"name": "app", "dependencies": {"total5": "latest"}}"#,
    )
    .expect("package.json");
    std::fs::write(root.join("index.js"), "require('total5');\nTotal.run();\n").expect("index.js");
    let outside = tempfile::tempdir().expect("a folder outside the project");
    let hostile = outside.path().join("\x1b]0;pwned\x07\x1b[2J");
    std::fs::create_dir_all(&hostile).expect("the hostile folder");
    std::fs::create_dir_all(root.join("node_modules")).expect("node_modules");
    std::os::unix::fs::symlink(&hostile, root.join("node_modules/total5")).expect("link");
    env.push(
        vec![SimEvent::tool_call(
            "c1",
            "write",
            json!({"path": "controllers/hello.js", "content": "exports.install = function() {};\n"}),
        )],
        0,
    );
    env.push(vec![SimEvent::text("Added the controller.")], 0);
    let out = env.cli.run(["run", "--allow", "edit", "add a controller"]);
    assert_exit(&out, 0);
    let shown = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        shown.contains("Boot check skipped: node_modules/total5 links to ")
            && shown.contains("\\x1b]0;pwned\\x07\\x1b[2J, outside the project"),
        "{shown:?}"
    );
    assert!(
        !shown.contains('\x1b') && !shown.contains('\x07'),
        "{shown:?}"
    );
}
