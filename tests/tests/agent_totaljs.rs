//! Total.js 5 projects: the primer is in the system prompt (its essentials for a small model),
//! nothing is appended to the user's words, and files the model writes are checked against the conventions, the findings appended to the
//! tool result. Commands AGENTS.md names for after an edit run too.

mod agent_common;

use agent_common::{Answer, Env, follow, last, results, text, tool};
use serde_json::json;
use totem_protocol::EventKind;

fn totaljs_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("project");
    agent_common::write_file(
        dir.path(),
        "package.json",
        r#"{"name": "app", "dependencies": {"total5": "latest"}}"#,
    );
    agent_common::write_file(dir.path(), "index.js", "require('total5');\nTotal.run();\n");
    dir
}

/// The text of the request's last user message.
fn last_user_text(request: &serde_json::Value) -> &str {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn written_files_are_checked_against_the_conventions() {
    let env = Env::start_in(totaljs_project()).await;
    // Total.js 4 style: a handler that uses `this`, spaces for indentation.
    let v4 = "exports.install = function() {\n    ROUTE('GET /', index);\n};\n\nfunction index() {\n    this.plain('hello');\n}\n";
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "controllers/default.js", "content": v4}),
    )]);
    env.push(vec![text("Written.")]);
    let events = env
        .run_done("add a home route", json!({}), Answer::Once)
        .await;

    let results = results(&events);
    let output = &results[0].1;
    assert!(!results[0].2, "{output}");
    assert!(output.contains("controllers/default.js:"), "{output}");
    assert!(output.contains("handler-this"), "{output}");

    let request = &env.sim.chat_requests()[0].body;
    let system = request["messages"][0]["content"].as_str().unwrap_or("");
    assert!(
        system.contains("NEWACTION"),
        "the primer is missing: {system}"
    );
    // Nothing that looks like project content follows the user's words.
    assert_eq!(last_user_text(request), "add a home route");
}

/// The flow scenario: a one-line edit of a file with older findings. The result reports the
/// edit's own finding and only counts the others, with no "fix" for code the model did not touch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_is_told_only_about_its_own_lines() {
    let env = Env::start_in(totaljs_project()).await;
    let old = "NEWACTION('Settings|read', {\n\taction: function($) {\n\t\tvar t = TABLE('settings');\n\t\t$.success(t);\n\t}\n});\n\nNEWACTION('Settings|save', {\n\taction: function($) {\n\t\t$.success(1);\n\t}\n});\n";
    agent_common::write_file(env.project.path(), "actions/settings.js", old);
    env.push(vec![tool(
        "c1",
        "read",
        json!({"path": "actions/settings.js"}),
    )]);
    env.push(vec![tool(
        "c2",
        "edit",
        json!({"path": "actions/settings.js", "oldString": "$.success(1);", "newString": "$.success(2);"}),
    )]);
    env.push(vec![tool(
        "c3",
        "edit",
        json!({"path": "actions/settings.js", "oldString": "$.success(2);", "newString": "$.view('x');"}),
    )]);
    env.push(vec![text("Done.")]);
    let events = env
        .run_done(
            "change the save answer",
            json!({"allow": ["edit"]}),
            Answer::None,
        )
        .await;
    let results = results(&events);

    let clean_edit = &results[1].1;
    assert!(
        clean_edit.contains(
            "1 finding elsewhere in this file existed before your changes; leave it unless the user asks."
        ),
        "{clean_edit}"
    );
    assert!(!clean_edit.contains("Fix"), "{clean_edit}");
    assert!(!clean_edit.contains("TABLE"), "{clean_edit}");

    let bad_edit = &results[2].1;
    assert!(
        bad_edit.contains("actions/settings.js:10 error [action-controller-method]"),
        "{bad_edit}"
    );
    assert!(
        bad_edit.contains("Fix the errors in your change"),
        "{bad_edit}"
    );
    assert!(!bad_edit.contains("TABLE"), "{bad_edit}");
}

/// A finding an earlier edit of the same run made is the run's own, not one that "existed
/// before": the 1.5B wrote `$.view()` into a new action, and its next edit of that file was told
/// the finding existed before and to leave it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finding_the_run_made_is_still_its_own_at_the_next_edit() {
    let env = Env::start_in(totaljs_project()).await;
    let bad = "NEWACTION('Contact|create', {\n\tname: 'Create contact',\n\taction: function($) {\n\t\t$.view('contact');\n\t}\n});\n";
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "actions/contact.js", "content": bad}),
    )]);
    env.push(vec![tool(
        "c2",
        "edit",
        json!({"path": "actions/contact.js", "oldString": "Create contact", "newString": "Create a contact"}),
    )]);
    env.push(vec![text("Done.")]);
    let events = env
        .run_done(
            "add a contact action",
            json!({"allow": ["edit"]}),
            Answer::None,
        )
        .await;
    let results = results(&events);
    let second = &results[1].1;
    assert!(
        second.contains("actions/contact.js:4 error [action-controller-method]")
            && second.contains("Fix the errors in your change"),
        "{second}"
    );
    assert!(!second.contains("existed before"), "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_commands_from_agents_md_run_after_an_edit() {
    let env = Env::start().await;
    agent_common::write_file(
        env.project.path(),
        "AGENTS.md",
        "# demo\n\n- check: `grep -q TODO {file} && echo \"TODO left in {file}\" && exit 1 || true`\n",
    );
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "a.txt", "content": "TODO: finish\n"}),
    )]);
    env.push(vec![text("ok")]);
    let events = env.run("write a", json!({}), Answer::Once).await;
    let output = &results(&events)[0].1;
    assert!(
        output.contains("failed") && output.contains("TODO left in"),
        "{output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn formatter_and_checks_from_settings_run_after_an_edit() {
    let env = Env::start().await;
    // Settings are re-read when the file changes; add the two sections next to the provider.
    let path = env.daemon.home.join("settings.json");
    let mut settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    settings["format"] = json!({"txt": "sed -i s/hello/HELLO/ {file}", "md": "false {file}"});
    settings["check"] = json!(["grep -q HELLO {file}"]);
    std::fs::write(&path, serde_json::to_string_pretty(&settings).unwrap()).unwrap();

    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "notes.txt", "content": "hello world\n"}),
    )]);
    env.push(vec![text("ok")]);
    let events = env.run("write notes", json!({}), Answer::Once).await;
    assert_eq!(
        env.file("notes.txt"),
        "HELLO world\n",
        "the txt formatter ran"
    );
    let output = &results(&events)[0].1;
    assert!(
        output.contains("passed"),
        "the check ran on the formatted file: {output}"
    );
    assert!(
        !output.contains("Formatter `false"),
        "a formatter for another extension never runs: {output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_total4_project_is_told_the_v5_primer_does_not_apply() {
    let dir = tempfile::tempdir().expect("project");
    agent_common::write_file(
        dir.path(),
        "package.json",
        r#"{"name": "old", "dependencies": {"total4": "^0.0.80"}}"#,
    );
    agent_common::write_file(dir.path(), "index.js", "require('total4/debug')({});\n");
    let env = Env::start_in(dir).await;
    let v4 = "exports.install = function() {\n    ROUTE('GET /', index);\n};\n\nfunction index() {\n    this.plain('hello');\n}\n";
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "controllers/default.js", "content": v4}),
    )]);
    env.push(vec![text("Written.")]);
    let events = env
        .run_done("add a home route", json!({"allow": ["edit"]}), Answer::None)
        .await;
    let notice = events.iter().find_map(|e| match &e.kind {
        EventKind::Notice { text, .. } if text.contains("Total.js 4") => Some(text.clone()),
        _ => None,
    });
    let notice = notice.expect("a notice about Total.js 4");
    assert!(notice.contains("do not apply"), "{notice}");

    let request = &env.sim.chat_requests()[0].body;
    let sent = request.to_string();
    assert!(!sent.contains("NEWACTION"), "the v5 primer was sent");
    assert!(
        !sent.contains("Total.js 5 rules"),
        "the v5 essentials were sent"
    );
    let output = &results(&events)[0].1;
    assert!(!output.contains("conventions check"), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_in_an_empty_folder_scaffolds_a_total5_project() {
    let env = Env::start_in(tempfile::tempdir().expect("empty folder")).await;
    // A new session in an empty folder already works in Total.js 5 mode.
    env.push(vec![text("Hello.")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("hello", json!({})).await;
    follow(&env, &mut events, &run, Answer::None).await;
    let system = env.sim.chat_requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        system.contains("NEWACTION"),
        "the primer is missing: {system}"
    );

    let result = env
        .client
        .call_raw(
            "session.command",
            json!({"sessionId": env.session, "command": "/init"}),
        )
        .await
        .expect("/init");
    let text = result["text"].as_str().unwrap_or("");
    assert!(text.contains("Total.js 5 project"), "{text}");
    for file in [
        "package.json",
        "index.js",
        "config",
        "controllers/default.js",
        ".gitignore",
        "AGENTS.md",
    ] {
        assert!(env.project.path().join(file).is_file(), "{file} missing");
    }
    assert!(env.project.path().join("definitions").is_dir());
    let package: serde_json::Value =
        serde_json::from_str(&env.file("package.json")).expect("package.json is JSON");
    assert!(package["dependencies"]["total5"].is_string(), "{package}");
    assert!(env.file("index.js").contains("require('total5')"));
    assert!(env.file("config").contains("name : App"));
    assert!(env.file(".gitignore").contains("node_modules/"));
    let agents = env.file("AGENTS.md");
    assert!(
        agents.contains("npm run start") && agents.contains("Total.js 5"),
        "{agents}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_switched_off_in_settings_is_not_reported_and_a_misspelt_one_is_an_error() {
    let env = Env::start_in(totaljs_project()).await;
    let path = env.daemon.home.join("settings.json");
    let mut settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("settings")).expect("json");
    settings["totaljs"] = json!({"check": {"disabled": ["handler-this"]}});
    std::fs::write(&path, settings.to_string()).expect("write settings");

    let v4 = "exports.install = function() {\n    ROUTE('GET /', index);\n};\n\nfunction index() {\n    this.plain('hello');\n}\n";
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "controllers/default.js", "content": v4}),
    )]);
    env.push(vec![text("Written.")]);
    let mut stream = env.subscribe().await;
    let run = env
        .prompt("add a home route", json!({"allow": ["edit"]}))
        .await;
    let events = follow(&env, &mut stream, &run, Answer::None).await;
    assert!(matches!(last(&events), EventKind::RunDone { .. }));
    let output = &results(&events)[0].1;
    assert!(!output.contains("[handler-this]"), "{output}");
    assert!(
        output.contains("[indent-tabs]"),
        "other rules still run: {output}"
    );
    // The project's own .totem/settings.json switches rules off too.
    agent_common::write_file(
        env.project.path(),
        ".totem/settings.json",
        r#"{"totaljs": {"check": {"disabled": ["indent-tabs"]}}}"#,
    );
    env.push(vec![tool(
        "c2",
        "write",
        json!({"path": "controllers/other.js", "content": v4}),
    )]);
    env.push(vec![text("Written.")]);
    let run = env.prompt("add another", json!({"allow": ["edit"]})).await;
    let events = follow(&env, &mut stream, &run, Answer::None).await;
    let output = &results(&events)[0].1;
    assert!(!output.contains("[indent-tabs]"), "{output}");

    settings["totaljs"] = json!({"check": {"disabled": ["handler-thiss"]}});
    std::fs::write(&path, settings.to_string()).expect("write settings");
    let run = env.prompt("again", json!({})).await;
    let events = follow(&env, &mut stream, &run, Answer::None).await;
    let EventKind::RunFailed { run } = last(&events) else {
        panic!("a misspelt rule id must fail the run: {:?}", last(&events));
    };
    let error = run.error.clone().unwrap_or_default();
    assert!(
        error.contains("totaljs.check")
            && error.contains("handler-thiss")
            && error.contains("handler-this,"),
        "{error}"
    );
}

/// A window of 8k tokens or less: the first request stays small. The primer (~1,200 tokens) is
/// left out of the system prompt; its essentials, within 150 tokens, stand in there, and
/// nothing is appended to the user's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_window_gets_the_essentials_instead_of_the_primer() {
    let env = Env::start_in(totaljs_project()).await;
    env.client
        .call_raw(
            "provider.add",
            json!({"name": "sim", "kind": "ollama", "url": env.sim.url(),
                   "defaultModel": "llama3.2:latest", "maxRetries": 0, "replace": true,
                   "models": {"llama3.2:latest": {"contextWindow": 8192}}}),
        )
        .await
        .expect("provider.add");
    env.push(vec![text("ok")]);
    env.run_done("add a home route", json!({}), Answer::None)
        .await;

    let request = &env.sim.chat_requests()[0].body;
    let system = request["messages"][0]["content"].as_str().unwrap_or("");
    assert!(
        !system.contains(totem_totaljs::primer().trim()) && !system.contains("## Actions"),
        "the primer was sent: {system}"
    );
    assert_eq!(last_user_text(request), "add a home route");
    let essentials = totem_totaljs::reminder();
    assert!(system.contains(essentials), "{system}");
    let tokens = tiktoken_rs::cl100k_base()
        .expect("tokenizer")
        .encode_ordinary(essentials)
        .len();
    assert!(tokens <= 150, "the essentials are {tokens} tokens");
}
