//! Sessions in and out of Totem from the command line: `totem run -f FILE --title`, `totem export`
//! (Markdown and JSON), `totem import` (a round trip the model can continue) and `totem sessions
//! --search`. Each drives the real `totem` and the daemon it starts, against the simulator.

mod cli_common;

use cli_common::{Cli, assert_exit, sim_settings, stderr, stdout};
use serde_json::{Value, json};
use totem_tests::sim::{Reply, Script, Sim, SimEvent};

fn reply(sim: &Sim, runtime: &tokio::runtime::Runtime, events: Vec<SimEvent>) {
    let _guard = runtime.enter();
    sim.push(Reply::Stream(Script::new(events)));
}

/// The sessions `totem sessions --json [extra]` lists.
fn sessions(cli: &Cli, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["sessions", "--json"];
    args.extend_from_slice(extra);
    let out = cli.run(&args);
    assert_exit(&out, 0);
    let page: Value = serde_json::from_str(&stdout(&out)).expect("sessions JSON");
    page["items"].as_array().cloned().unwrap_or_default()
}

/// The text of every message the last chat request carried, joined.
fn last_request_text(sim: &Sim) -> String {
    let requests = sim.chat_requests();
    let last = requests.last().expect("a chat request");
    last.body["messages"].to_string()
}

#[test]
fn run_attaches_files_and_titles_the_session() {
    let cli = Cli::new();
    let (runtime, sim) = sim_settings(&cli);
    std::fs::create_dir_all(cli.project.path().join("src")).expect("src");
    std::fs::write(
        cli.project.path().join("src/price.js"),
        "exports.price = () => 42; // the-attached-file\n",
    )
    .expect("write");
    reply(&sim, &runtime, vec![SimEvent::text("It returns 42.")]);

    let out = cli.run([
        "run",
        "-f",
        "src/price.js",
        "--title",
        "Price check",
        "What does it return?",
    ]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("It returns 42."), "{}", stdout(&out));
    assert!(
        last_request_text(&sim).contains("the-attached-file"),
        "the model sees the file: {}",
        last_request_text(&sim)
    );
    let listed = sessions(&cli, &[]);
    assert_eq!(listed[0]["title"], "Price check", "{listed:?}");

    // A file that does not exist is refused before anything is sent.
    let out = cli.run(["run", "-f", "missing.js", "hello"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("cannot attach missing.js"),
        "{}",
        stderr(&out)
    );

    // A file outside the project is refused by the daemon, as `@path` is.
    let outside = tempfile::NamedTempFile::new().expect("outside file");
    let out = cli.run([
        "run",
        "-f",
        outside.path().to_str().expect("utf-8"),
        "hello",
    ]);
    assert!(!out.status.success(), "an outside file is not attached");
    assert!(stderr(&out).contains("outside"), "{}", stderr(&out));
    assert_eq!(
        sim.chat_requests().len(),
        1,
        "neither refused run reached the model"
    );
}

#[test]
fn export_and_import_round_trip_and_the_model_continues_the_imported_history() {
    let cli = Cli::new();
    let (runtime, sim) = sim_settings(&cli);
    std::fs::write(
        cli.project.path().join("notes.txt"),
        "kiwi ```fenced``` text\n",
    )
    .expect("w");
    reply(
        &sim,
        &runtime,
        vec![SimEvent::tool_call(
            "call_1",
            "read",
            json!({"path": "notes.txt"}),
        )],
    );
    reply(
        &sim,
        &runtime,
        vec![SimEvent::text("The notes mention a kiwi.")],
    );
    let out = cli.run(["run", "--allow", "read", "What do the notes say?"]);
    assert_exit(&out, 0);
    let listed = sessions(&cli, &[]);
    let original = listed[0]["id"].as_str().expect("id").to_string();
    let count = listed[0]["messageCount"].as_u64().expect("messageCount");
    assert!(
        count >= 3,
        "a prompt, a tool call with its result, an answer: {listed:?}"
    );

    // Markdown: the title, who said what, the tool call and its result in fences long enough.
    let out = cli.run(["export", original.as_str()]);
    assert_exit(&out, 0);
    let md = stdout(&out);
    for needed in [
        "# What do the notes say?",
        "## User",
        "## Assistant",
        "Tool call `read`",
        "kiwi ```fenced``` text\n````",
        "The notes mention a kiwi.",
    ] {
        assert!(md.contains(needed), "{needed:?} missing from:\n{md}");
    }

    // JSON to a file, then back as a new session in another project.
    let file = cli.home().join("session.json");
    let out = cli
        .run(["export", original.as_str(), "--format", "json", "-o"])
        .status;
    assert!(!out.success(), "-o needs a file");
    let out = cli.run([
        "export",
        original.as_str(),
        "--format",
        "json",
        "-o",
        file.to_str().expect("utf-8"),
    ]);
    assert_exit(&out, 0);
    let other = tempfile::tempdir().expect("second project");
    let out = cli.run([
        "import",
        file.to_str().expect("utf-8"),
        other.path().to_str().expect("utf-8"),
    ]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains(&format!("Imported {count} messages")),
        "{}",
        stdout(&out)
    );
    let imported = sessions(&cli, &[])
        .into_iter()
        .find(|s| s["id"] != original.as_str())
        .expect("the imported session");
    assert_eq!(imported["title"], "What do the notes say?");
    let imported_id = imported["id"].as_str().expect("id").to_string();

    // The same roles and parts, in the same order.
    let export = |id: &str| -> Value {
        let out = cli.run(["export", id, "--format", "json"]);
        assert_exit(&out, 0);
        serde_json::from_str(&stdout(&out)).expect("export JSON")
    };
    let strip = |v: &Value| -> Vec<Value> {
        v["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| json!({"role": m["role"], "parts": m["parts"], "createdAt": m["createdAt"]}))
            .collect()
    };
    assert_eq!(strip(&export(&original)), strip(&export(&imported_id)));

    // The model gets the imported history when the session goes on.
    reply(&sim, &runtime, vec![SimEvent::text("Still a kiwi.")]);
    let out = cli.run(["run", "--session", imported_id.as_str(), "And now?"]);
    assert_exit(&out, 0);
    let sent = last_request_text(&sim);
    assert!(
        sent.contains("What do the notes say?") && sent.contains("kiwi ```fenced```"),
        "the imported turns reach the model: {sent}"
    );

    // Files that are not exported sessions are refused with a sentence.
    let bad = cli.home().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"format": "something-else", "version": 1, "session": {}, "messages": []}"#,
    )
    .expect("w");
    let out = cli.run(["import", bad.to_str().expect("utf-8")]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("not a Totem session"),
        "{}",
        stderr(&out)
    );
    std::fs::write(&bad, "not json").expect("w");
    let out = cli.run(["import", bad.to_str().expect("utf-8")]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("totem export --format json"),
        "{}",
        stderr(&out)
    );
    // A result without its call would break the model's history: the daemon refuses it.
    let orphan = json!({"format": "totem-session", "version": 1, "session": {"title": "x"},
        "messages": [{"role": "assistant", "parts": [
            {"type": "toolResult", "callId": "c9", "tool": "read", "output": "x", "isError": false}]}]});
    std::fs::write(&bad, orphan.to_string()).expect("w");
    let out = cli.run(["import", bad.to_str().expect("utf-8")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("tool call c9"), "{}", stderr(&out));
    assert_eq!(
        sessions(&cli, &[]).len(),
        2,
        "refused imports create nothing"
    );
}

#[test]
fn sessions_search_matches_titles_and_message_text() {
    let cli = Cli::new();
    let (runtime, sim) = sim_settings(&cli);
    reply(&sim, &runtime, vec![SimEvent::text("Bananas are yellow.")]);
    assert_exit(&cli.run(["run", "--title", "Fruit", "What colour?"]), 0);
    reply(&sim, &runtime, vec![SimEvent::text("Use a loop.")]);
    assert_exit(&cli.run(["run", "Refactor the PARSER"]), 0);

    let titles = |found: Vec<Value>| -> Vec<String> {
        found
            .iter()
            .map(|s| s["title"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    // By the model's words, by the title, and by the user's words, in any case.
    assert_eq!(titles(sessions(&cli, &["--search", "BANANA"])), ["Fruit"]);
    assert_eq!(titles(sessions(&cli, &["--search", "fruit"])), ["Fruit"]);
    assert_eq!(
        titles(sessions(&cli, &["--search", "parser"])),
        ["Refactor the PARSER"]
    );
    assert!(sessions(&cli, &["--search", "durian"]).is_empty());
    let out = cli.run(["sessions", "--search", "durian"]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("No sessions match"),
        "{}",
        stdout(&out)
    );
}
