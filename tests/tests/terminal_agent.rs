//! The model's `terminal` tool, driven by a scripted model (the Ollama simulator) against the real
//! totemd and real programs: `python3 -i`, `npm init`, a `read -p` prompt, Ctrl-C; the permission
//! checks of starting a program and of lines typed to a shell; Plan mode without the tool; and a
//! person attached with `totem attach --terminal` typing into the program the model drives.

mod agent_common;

use std::time::Duration;

use agent_common::*;
use expectrl::{ControlCode, Expect, Session};
use serde_json::json;
use totem_protocol::EventKind;

/// `totem ARGS` in a pty, on the test's daemon, in the project folder.
fn totem(env: &Env, args: &[&str]) -> expectrl::session::OsSession {
    let mut command = std::process::Command::new(totem_tests::harness::binary("totem"));
    command
        .arg("--socket")
        .arg(&env.daemon.socket)
        .args(args)
        .current_dir(env.project.path())
        .env("TOTEM_HOME", &env.daemon.home)
        .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
        .env("TERM", "xterm")
        .env("NO_COLOR", "1");
    let mut session = Session::spawn(command).expect("totem in a pty");
    session.set_expect_timeout(Some(Duration::from_secs(20)));
    session
}

/// The tool results of a run that starts terminals and types into them.
async fn run(env: &Env, prompt: &str, extra: serde_json::Value) -> Vec<(String, String, bool)> {
    let events = env.run_done(prompt, extra, Answer::Once).await;
    results(&events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_uses_a_python_repl() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "terminal",
        json!({"action": "start", "command": "python3 -q -i", "pattern": ">>>$"}),
    )]);
    env.push(vec![tool(
        "c2",
        "terminal",
        json!({"action": "send", "id": "t1", "text": "1+1", "pattern": "(?m)^2$"}),
    )]);
    env.push(vec![tool(
        "c3",
        "terminal",
        json!({"action": "stop", "id": "t1"}),
    )]);
    env.push(vec![text("1+1 is 2.")]);
    let results = run(&env, "What is 1+1 in Python?", json!({"allow": ["bash"]})).await;
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results.iter().all(|r| r.0 == "terminal" && !r.2),
        "{results:?}"
    );
    assert!(results[0].1.contains(">>>"), "{}", results[0].1);
    // The model reads the rendered screen: the answer on its own line, no escape codes.
    let screen = &results[1].1;
    // (The pattern matched as soon as `2` showed; the next prompt may come a moment later.)
    assert!(screen.contains(">>> 1+1\n2"), "{screen}");
    assert!(!screen.contains('\u{1b}'), "{screen:?}");
    assert!(
        results[2].1.contains("stopped terminal t1"),
        "{}",
        results[2].1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_terminal_has_no_secret_looking_variables() {
    let daemon = totem_tests::harness::TestDaemon::start_with_env(&[
        ("TERMINAL_TEST_TOKEN", "tok-secret-7f3"),
        ("TERMINAL_TEST_PLAIN", "plain-visible-7f3"),
    ]);
    let project = tempfile::tempdir().expect("project folder");
    std::fs::write(project.path().join("README.md"), "# demo\n").expect("readme");
    let env = Env::start_on(daemon, project).await;
    env.push(vec![tool(
        "c1",
        "terminal",
        json!({"action": "start", "command": "env | grep TERMINAL_TEST_; echo env-listed",
               "pattern": "(?m)^env-listed$"}),
    )]);
    env.push(vec![text("Listed.")]);
    let results = run(&env, "Show the environment", json!({"allow": ["bash"]})).await;
    let screen = &results[0].1;
    assert!(screen.contains("plain-visible-7f3"), "{screen}");
    assert!(!screen.contains("tok-secret-7f3"), "{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_answers_npm_init_to_a_valid_package_json() {
    let env = Env::start().await;
    let step = |id: &str, args: serde_json::Value| tool(id, "terminal", args);
    env.push(vec![step(
        "c1",
        json!({"action": "start", "command": "npm init", "pattern": "package name:"}),
    )]);
    let answers = [
        ("demo-terminal", "version:"),
        ("2.1.0", "description:"),
        ("typed by a model", "entry point:"),
        ("", "test command:"),
        ("", "git repository:"),
        ("", "keywords:"),
        ("", "author:"),
        ("", "license:"),
        ("", "type:"),
        ("", "Is this OK"),
        ("yes", "$^"),
    ];
    for (i, (answer, next)) in answers.iter().enumerate() {
        let mut args = json!({"action": "send", "id": "t1", "pattern": next, "timeout": 15});
        if answer.is_empty() {
            args["keys"] = json!(["enter"]);
        } else {
            args["text"] = json!(answer);
        }
        env.push(vec![step(&format!("s{i}"), args)]);
    }
    env.push(vec![text("package.json written.")]);
    let results = run(&env, "Run npm init", json!({"allow": ["bash"]})).await;
    let last = &results.last().expect("results").1;
    assert!(last.contains("ended, exit code 0"), "{last}");
    let package: serde_json::Value =
        serde_json::from_str(&env.file("package.json")).expect("package.json is valid JSON");
    assert_eq!(package["name"], "demo-terminal");
    assert_eq!(package["version"], "2.1.0");
    assert_eq!(package["description"], "typed by a model");
    // The file the program wrote while the model typed is one of the run's changes (undo takes it back).
    let diff = env
        .client
        .call_raw("session.diff", json!({"sessionId": env.session}))
        .await
        .expect("session.diff");
    assert_eq!(diff["files"][0]["path"], "package.json", "{diff}");
    assert_eq!(diff["files"][0]["status"], "added", "{diff}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_prompt_and_ctrl_c_in_a_shell_each_line_checked_like_bash() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "terminal",
        json!({"action": "start", "command": "bash --norc --noprofile"}),
    )]);
    env.push(vec![tool(
        "c2",
        "terminal",
        json!({"action": "send", "id": "t1", "text": "read -p 'Your name? ' n; echo \"hi $n\"", "pattern": "Your name\\? $"}),
    )]);
    env.push(vec![tool(
        "c3",
        "terminal",
        json!({"action": "send", "id": "t1", "text": "Ada", "pattern": "hi Ada"}),
    )]);
    env.push(vec![tool(
        "c4",
        "terminal",
        json!({"action": "send", "id": "t1", "text": "sleep 100"}),
    )]);
    env.push(vec![tool(
        "c5",
        "terminal",
        json!({"action": "send", "id": "t1", "keys": ["ctrl-c"]}),
    )]);
    env.push(vec![tool(
        "c6",
        "terminal",
        json!({"action": "send", "id": "t1", "text": "touch made-by-model"}),
    )]);
    env.push(vec![text("Done.")]);
    let mut events = env.subscribe().await;
    let run_id = env
        .prompt(
            "Use a shell",
            json!({"allow": ["bash(bash *)", "bash(read *)", "bash(sleep *)"]}),
        )
        .await;
    // Answer every question but the one for `touch`, which is denied.
    let mut asked = Vec::new();
    let mut all = Vec::new();
    loop {
        let e = next_event(&mut events, 60).await;
        if let EventKind::PermissionAsked { question } = &e.kind {
            asked.push((question.tool.clone(), question.target.clone()));
            let reply = if question.target.starts_with("touch") {
                json!({"type": "deny", "note": "not now"})
            } else {
                json!({"type": "once"})
            };
            env.reply(&question.id, reply).await;
        }
        let end = matches!(&e.kind, EventKind::RunDone { run } | EventKind::RunFailed { run } if run.id == run_id);
        all.push(e);
        if end {
            break;
        }
    }
    let results = results(&all);
    assert_eq!(results.len(), 6, "{results:?}");
    // Every line entered at the shell is checked: `sleep` is allowed by a rule, `touch` asked
    // (and denied). `Ada` answers `read`, a builtin: the shell itself reads it, so it is
    // checked too. Starting the shell was allowed by its rule.
    let targets: Vec<&str> = asked.iter().map(|(_, target)| target.as_str()).collect();
    assert!(
        asked.iter().all(|(tool, _)| tool == "terminal"),
        "{asked:?}"
    );
    assert!(targets.contains(&"Ada"), "{asked:?}");
    assert!(targets.contains(&"touch made-by-model"), "{asked:?}");
    assert!(
        !targets
            .iter()
            .any(|t| t.starts_with("sleep") || t.starts_with("bash")),
        "{asked:?}"
    );
    assert!(results[2].1.contains("hi Ada"), "{}", results[2].1);
    // Ctrl-C ends `sleep` and the shell prompts again.
    let after_ctrl_c = &results[4].1;
    assert!(after_ctrl_c.contains("^C"), "{after_ctrl_c}");
    assert!(
        after_ctrl_c.trim_end().ends_with(['$', '#']),
        "{after_ctrl_c}"
    );
    assert!(results[5].2, "the denied line was typed: {:?}", results[5]);
    assert!(results[5].1.contains("denied"), "{}", results[5].1);
    assert!(!env.root().join("made-by-model").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_a_program_is_checked_and_plan_mode_has_no_terminal() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "terminal",
        json!({"action": "start", "command": "python3 -q -i"}),
    )]);
    env.push(vec![text("Could not.")]);
    let results = run(&env, "Look around", json!({"mode": "plan"})).await;
    assert!(results[0].2, "{results:?}");
    assert!(
        results[0].1.contains("not available in this mode"),
        "{}",
        results[0].1
    );
    let tools = env.sim.chat_requests()[0].body["tools"].to_string();
    assert!(!tools.contains("\"terminal\""), "{tools}");

    env.push(vec![tool(
        "c2",
        "terminal",
        json!({"action": "start", "command": "python3 -q -i"}),
    )]);
    env.push(vec![text("Asked.")]);
    let mut events = env.subscribe().await;
    let run_id = env.prompt("Start python", json!({})).await;
    let events = follow(&env, &mut events, &run_id, Answer::Once).await;
    let asked: Vec<(totem_protocol::QuestionKind, String)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PermissionAsked { question } => {
                Some((question.kind, question.target.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        asked,
        [(
            totem_protocol::QuestionKind::Execute,
            "python3 -q -i".to_string()
        )]
    );
    let requests = env.sim.chat_requests();
    let tools = requests[requests.len() - 2].body["tools"].to_string();
    assert!(tools.contains("\"terminal\""), "{tools}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_attached_with_totem_types_and_the_model_reads_it() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "terminal",
        json!({"action": "start", "command": "python3 -q -i", "pattern": ">>>$"}),
    )]);
    env.push(vec![text("Python is ready for you.")]);
    run(&env, "Start python", json!({"allow": ["bash"]})).await;
    let list = env
        .client
        .call_raw("terminal.list", json!({"sessionId": env.session}))
        .await
        .expect("terminal.list");
    let id = list["terminals"][0]["id"].as_str().expect("id").to_string();

    // One person watches from the REPL (`/terminals`, `/terminal 1`)...
    let mut watcher = totem(&env, &["attach", "--session", &env.session]);
    watcher.expect("Type a prompt").expect("the REPL is up");
    // Typed only once the line editor reads: earlier, the terminal would still be in cooked mode.
    watcher.expect("› ").expect("the prompt");
    watcher.send("/terminals\r").expect("type /terminals");
    watcher
        // (`[running, 1 watching]` while the model's last wait still lets go of its watch.)
        .expect(expectrl::Regex(r"1\. t1 \[running[^\]]*\] python3 -q -i"))
        .expect("the terminal is listed");
    watcher.expect("› ").expect("the prompt again");
    watcher.send("/terminal 1\r").expect("type /terminal 1");
    watcher
        .expect("Ctrl-] detaches")
        .expect("attached from the REPL");
    // ...another attaches with `totem attach --terminal`, types, and both see the answer.
    let mut person = totem(&env, &["attach", "--terminal", &id]);
    person.expect("Ctrl-] detaches").expect("attached");
    // The redraw may place the cursor instead of drawing the prompt's trailing space.
    person.expect(">>>").expect("the screen is drawn");
    person.send("print(6 * 7)\r").expect("type");
    person
        .expect("42")
        .expect("the program's answer reaches the person");
    watcher.expect("42").expect("and the other watcher");
    // The terminal follows the window of the person typing.
    person
        .get_process_mut()
        .set_window_size(132, 40)
        .expect("resize the window");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let list = env
            .client
            .call_raw("terminal.list", json!({"sessionId": env.session}))
            .await
            .expect("terminal.list");
        let t = &list["terminals"][0];
        if t["cols"] == 132 && t["rows"] == 40 {
            assert_eq!(t["watchers"], 2);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not resized: {t}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    person.send(ControlCode::GroupSeparator).expect("Ctrl-]");
    person.expect("keeps running").expect("detached");
    watcher.send(ControlCode::GroupSeparator).expect("Ctrl-]");
    watcher.expect("keeps running").expect("back in the REPL");

    env.push(vec![tool(
        "c2",
        "terminal",
        json!({"action": "read", "id": "t1"}),
    )]);
    env.push(vec![text("You printed 42.")]);
    let results = run(&env, "What did I type?", json!({})).await;
    // The replay holds the first run's results too: the read is the last one.
    let screen = &results.last().expect("the read").1;
    assert!(screen.contains(">>> print(6 * 7)\n42\n>>>"), "{screen}");
}

/// The model's list and read of terminal `t1`, in one run.
async fn model_list_and_read(env: &Env) -> (String, (String, bool)) {
    env.push(vec![tool("c1", "terminal", json!({"action": "list"}))]);
    env.push(vec![tool(
        "c2",
        "terminal",
        json!({"action": "read", "id": "t1"}),
    )]);
    env.push(vec![text("Looked.")]);
    let results = run(env, "What is in the terminals?", json!({})).await;
    // The session's events from its start: this run's two results are the last.
    let [list, read] = &results[results.len() - 2..] else {
        panic!("{results:?}")
    };
    (list.1.clone(), (read.1.clone(), read.2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_users_terminal_is_hidden_from_the_model_until_shared() {
    let env = Env::start().await;
    let opened = env
        .client
        .call_raw(
            "terminal.open",
            json!({"sessionId": env.session, "command": "bash --norc --noprofile"}),
        )
        .await
        .expect("terminal.open");
    assert_eq!(opened["name"], "t1");
    assert_eq!(opened["shared"], false);
    let id = opened["id"].as_str().expect("id").to_string();
    env.client
        .call_raw(
            "terminal.write",
            json!({"id": id, "data": "printf 'USER-%s\\n' PRIVATE-42\r"}),
        )
        .await
        .expect("terminal.write");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let screen = env
            .client
            .call_raw("terminal.screen", json!({"id": id}))
            .await
            .expect("terminal.screen");
        if screen["text"]
            .as_str()
            .unwrap_or("")
            .contains("USER-PRIVATE-42")
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{screen}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Not shared: the model's list does not show it, its read finds nothing, no question asked.
    let (list, (read, failed)) = model_list_and_read(&env).await;
    assert_eq!(list.trim(), "no terminals");
    assert!(failed && read.contains("no terminal \"t1\""), "{read}");
    assert!(!read.contains("USER-PRIVATE-42"), "{read}");

    // Shared: the model sees it.
    let shared = env
        .client
        .call_raw("terminal.share", json!({"id": id, "shared": true}))
        .await
        .expect("terminal.share");
    assert_eq!(shared["shared"], true);
    let (list, (read, failed)) = model_list_and_read(&env).await;
    assert!(list.contains("t1"), "{list}");
    assert!(!failed && read.contains("USER-PRIVATE-42"), "{read}");

    // Hidden again, and a terminal opened shared from the start is seen at once.
    env.client
        .call_raw("terminal.share", json!({"id": id, "shared": false}))
        .await
        .expect("terminal.share off");
    let (list, (read, failed)) = model_list_and_read(&env).await;
    assert_eq!(list.trim(), "no terminals");
    assert!(failed && !read.contains("USER-PRIVATE-42"), "{read}");
    let second = env
        .client
        .call_raw(
            "terminal.open",
            json!({"sessionId": env.session, "command": "bash --norc --noprofile", "shared": true}),
        )
        .await
        .expect("terminal.open shared");
    assert_eq!(second["name"], "t2");
    assert_eq!(second["shared"], true);
    env.push(vec![tool("c1", "terminal", json!({"action": "list"}))]);
    env.push(vec![text("Looked.")]);
    let results = run(&env, "Which terminals?", json!({})).await;
    assert!(
        results
            .last()
            .is_some_and(|r| r.1.contains("t2") && !r.1.contains("t1 ")),
        "{results:?}"
    );
}
