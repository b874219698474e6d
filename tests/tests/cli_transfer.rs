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

#[test]
fn export_keeps_undone_and_compacted_turns_and_import_gives_the_model_the_same_conversation() {
    let cli = Cli::new();
    let (runtime, sim) = sim_settings(&cli);
    let run = |args: &[&str]| assert_exit(&cli.run(args), 0);

    // Two turns, compacted; a third kept; a fourth undone.
    reply(&sim, &runtime, vec![SimEvent::text("alpha answer")]);
    run(&["run", "--title", "Marks", "first ALPHA-TURN"]);
    let original = sessions(&cli, &[])[0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    reply(&sim, &runtime, vec![SimEvent::text("bravo answer")]);
    run(&["run", "--session", &original, "second BRAVO-TURN"]);
    let client = runtime.block_on(async {
        let (client, _) = totem_client::Client::connect(
            &cli.socket(),
            "cli-transfer-test",
            totem_protocol::ClientCapabilities::default(),
        )
        .await
        .expect("connect");
        client
    });
    reply(
        &sim,
        &runtime,
        vec![SimEvent::text("SUMMARY-OF-ALPHA-AND-BRAVO")],
    );
    let compacted = runtime
        .block_on(client.call_raw(
            "session.command",
            json!({"sessionId": original, "command": "/compact"}),
        ))
        .expect("/compact");
    assert!(
        compacted["text"]
            .as_str()
            .unwrap_or("")
            .contains("Compacted"),
        "{compacted}"
    );
    reply(&sim, &runtime, vec![SimEvent::text("charlie answer")]);
    run(&["run", "--session", &original, "third CHARLIE-TURN"]);
    reply(&sim, &runtime, vec![SimEvent::text("delta answer")]);
    run(&["run", "--session", &original, "fourth DELTA-TURN"]);
    let undone = runtime
        .block_on(client.call_raw("session.undo", json!({"sessionId": original})))
        .expect("undo");
    assert_eq!(undone["prompt"], "fourth DELTA-TURN", "{undone}");

    // The export carries the marks and the summary.
    let file = cli.home().join("marked.json");
    let path = file.to_str().expect("utf-8");
    run(&["export", &original, "--format", "json", "-o", path]);
    let exported: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("JSON");
    assert_eq!(exported["version"], 2);
    assert_eq!(
        exported["compaction"]["summary"], "SUMMARY-OF-ALPHA-AND-BRAVO",
        "{exported}"
    );
    // (text, undone, compacted) of each message.
    let marks = |messages: &Value| -> Vec<(String, bool, bool)> {
        messages
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| {
                (
                    m["parts"].to_string(),
                    m["undone"].as_bool().unwrap_or(false),
                    m["compacted"].as_bool().unwrap_or(false),
                )
            })
            .collect()
    };
    let expected: Vec<(&str, bool, bool)> = vec![
        ("ALPHA-TURN", false, true),
        ("alpha answer", false, true),
        ("BRAVO-TURN", false, true),
        ("bravo answer", false, true),
        ("CHARLIE-TURN", false, false),
        ("charlie answer", false, false),
        ("DELTA-TURN", true, false),
        ("delta answer", true, false),
    ];
    let check = |what: &str, found: Vec<(String, bool, bool)>| {
        assert_eq!(found.len(), expected.len(), "{what}: {found:?}");
        for ((text, undone, compacted), (word, want_undone, want_compacted)) in
            found.iter().zip(&expected)
        {
            assert!(
                text.contains(word) && *undone == *want_undone && *compacted == *want_compacted,
                "{what}: {word} should be undone={want_undone} compacted={want_compacted}: {found:?}"
            );
        }
    };
    check("export", marks(&exported["messages"]));
    let out = cli.run(["export", original.as_str()]);
    let md = stdout(&out);
    assert!(
        md.contains("· undone") && md.contains("· summarised") && md.contains("SUMMARY-OF-ALPHA"),
        "{md}"
    );

    // Imported elsewhere, then both sessions go on with the same prompt.
    let other = tempfile::tempdir().expect("second project");
    run(&["import", path, other.path().to_str().expect("utf-8")]);
    let imported = sessions(&cli, &[])
        .into_iter()
        .find(|s| s["id"] != original.as_str())
        .expect("the imported session")["id"]
        .as_str()
        .expect("id")
        .to_string();
    let page = runtime
        .block_on(client.call_raw("session.messages", json!({"sessionId": imported})))
        .expect("messages");
    check("session.messages", marks(&page["messages"]));
    assert_eq!(page["compaction"]["summary"], "SUMMARY-OF-ALPHA-AND-BRAVO");
    let replayed = runtime.block_on(async {
        let mut events = client.subscribe(&imported, 0).await.expect("subscribe");
        let mut messages = Vec::new();
        while messages.len() < expected.len() {
            let event = tokio::time::timeout(std::time::Duration::from_secs(10), events.next())
                .await
                .expect("replay in time")
                .expect("an event")
                .expect("an event");
            if let totem_protocol::EventKind::MessageCreated { message } = event.kind {
                messages.push(serde_json::to_value(message).expect("JSON"));
            }
        }
        Value::Array(messages)
    });
    check("replay", marks(&replayed));

    // What the model is sent next: the summary, the kept turn, none of the rest — the same in
    // both sessions.
    let next_request = |session: &str| -> Value {
        reply(&sim, &runtime, vec![SimEvent::text("echo answer")]);
        run(&["run", "--session", session, "fifth ECHO-TURN"]);
        sim.chat_requests().pop().expect("a request").body
    };
    let conversation = |body: &Value| -> Vec<Value> {
        body["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["role"] != "system")
            .cloned()
            .collect()
    };
    let from_original = next_request(&original);
    let from_imported = next_request(&imported);
    for body in [&from_original, &from_imported] {
        let all = body.to_string();
        assert!(
            all.contains("SUMMARY-OF-ALPHA-AND-BRAVO")
                && all.contains("CHARLIE-TURN")
                && all.contains("ECHO-TURN"),
            "{all}"
        );
        for gone in ["ALPHA-TURN", "BRAVO-TURN", "DELTA-TURN", "delta answer"] {
            assert!(!all.contains(gone), "{gone} is not sent: {all}");
        }
    }
    assert_eq!(conversation(&from_original), conversation(&from_imported));

    // Marked compacted without a summary: refused, since the model would lose those turns.
    let mut bad = exported.clone();
    bad.as_object_mut().expect("object").remove("compaction");
    let bad_file = cli.home().join("no-summary.json");
    std::fs::write(&bad_file, bad.to_string()).expect("w");
    let out = cli.run(["import", bad_file.to_str().expect("utf-8")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no summary"), "{}", stderr(&out));
}
