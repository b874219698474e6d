//! Small local models through the real daemon: constrained steps (the server holds each answer
//! to one call of a real tool or the final answer), the fallback when a server refuses the
//! schema, the short prompt for small models, sampling defaults for local servers, and runs
//! that end loudly when the model cannot call a tool.

mod agent_common;

use agent_common::{Answer, Env, follow, last, notices, parts_text, results, text};
use serde_json::{Value, json};
use totem_protocol::{EventKind, SessionEvent};
use totem_tests::sim::{Recorded, Sim, SimKind};

/// The settings of the simulator's `llama3.2:latest`.
async fn set_model(env: &Env, settings: Value) {
    env.client
        .call_raw(
            "provider.add",
            json!({"name": "sim", "kind": "ollama", "url": env.sim.url(),
                   "defaultModel": "llama3.2:latest", "maxRetries": 0, "replace": true,
                   "models": {"llama3.2:latest": settings}}),
        )
        .await
        .expect("provider.add");
}

/// A project holding `files`, with the simulator's model set to small and tools in text.
async fn small_env(files: &[(&str, &str)]) -> Env {
    let env = Env::start().await;
    for (path, text) in files {
        agent_common::write_file(env.project.path(), path, text);
    }
    set_model(&env, json!({"tools": "text", "contextWindow": 8192})).await;
    env
}

/// A Total.js 5 project (package.json naming total5, index.js) holding `files` too, with the
/// simulator's model set to small and tools in text.
async fn small_totaljs_env(files: &[(&str, &str)]) -> Env {
    let mut all = vec![
        (
            "package.json",
            r#"{"name": "app", "dependencies": {"total5": "latest"}}"#,
        ),
        ("index.js", "require('total5');\nTotal.run();\n"),
    ];
    all.extend_from_slice(files);
    small_env(&all).await
}

/// Queues the model's answers, one step each (a call or the final answer, as a constrained server
/// sends it), then runs `prompt` to its end.
async fn scripted(env: &Env, steps: &[&str], prompt: &str, answer: Answer) -> Vec<SessionEvent> {
    for step in steps {
        env.push(vec![text(step)]);
    }
    env.run_done(prompt, json!({}), answer).await
}

/// Per request, whether its schema offers the final answer.
fn answer_offers(requests: &[Recorded]) -> Vec<bool> {
    requests
        .iter()
        .map(|r| schema_names(&r.body["format"]).1)
        .collect()
}

/// Per request, the tools its schema offers (sorted).
fn tool_offers(requests: &[Recorded]) -> Vec<Vec<String>> {
    requests
        .iter()
        .map(|r| schema_names(&r.body["format"]).0)
        .collect()
}

/// The results of the calls that were not reads: (tool, output, is_error).
fn changes(events: &[SessionEvent]) -> Vec<(String, String, bool)> {
    results(events)
        .into_iter()
        .filter(|r| r.0 != "read")
        .collect()
}

/// A project file's text (empty when missing).
fn read(env: &Env, path: &str) -> String {
    std::fs::read_to_string(env.project.path().join(path)).unwrap_or_default()
}

/// The names the schema's call branches allow, sorted; and whether it has the answer branch.
fn schema_names(schema: &Value) -> (Vec<String>, bool) {
    let branches = schema["oneOf"].as_array().cloned().unwrap_or_default();
    let mut names: Vec<String> = branches
        .iter()
        .filter_map(|b| b["properties"]["name"]["const"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    let answer = branches.iter().any(|b| b["required"] == json!(["answer"]));
    (names, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_tools_model_gets_constrained_steps_and_only_its_answer_is_shown() {
    let env = small_env(&[("notes.txt", "alpha\n")]).await;
    // What a constrained server sends: one call, then the final answer (cut across chunks, with
    // escapes), never prose around the JSON.
    env.push(vec![text(
        r#"{"name": "read", "arguments": {"path": "notes.txt"}}"#,
    )]);
    env.push(vec![
        text(r#"{"ans"#),
        text(r#"wer": "It says \"alpha\".\nDone."#),
        text(r#""}"#),
    ]);
    let events = env
        .run_done("what is in the notes?", json!({}), Answer::None)
        .await;

    let requests = env.sim.chat_requests();
    let body = &requests[0].body;
    // Ollama's `format` holds the answer to one call of an offered tool; the first step offers
    // no final answer (a small model answered before looking: "What you did"), later ones do.
    let (names, answer) = schema_names(&body["format"]);
    assert_eq!(names, ["bash", "edit", "list", "read", "write"], "{body}");
    assert!(!answer, "{}", body["format"]);
    let (later, answer) = schema_names(&requests[1].body["format"]);
    assert!(answer && later == names, "{}", requests[1].body["format"]);
    let read = body["format"]["oneOf"]
        .as_array()
        .and_then(|b| {
            b.iter()
                .find(|b| b["properties"]["name"]["const"] == "read")
        })
        .cloned()
        .unwrap_or_default();
    assert_eq!(read["properties"]["arguments"]["required"], json!(["path"]));
    assert!(body.get("tools").is_none());
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(
        system.contains(r#"{"name": "list", "arguments": {"path": "."}}"#)
            && system.contains(r#"the one key "answer""#)
            && !system.contains("what you did"),
        "{system}"
    );
    // A local server gets a temperature for tool use.
    let sent = body["options"]["temperature"].as_f64().unwrap_or_default();
    assert!((sent - 0.2).abs() < 1e-6, "{body}");

    let ran = results(&events);
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert!(!ran[0].2 && ran[0].1.contains("alpha"), "{ran:?}");
    // The answer's text, unescaped, without its JSON; the call shows as its part only.
    assert_eq!(parts_text(&events), "It says \"alpha\".\nDone.");
    let deltas: String = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PartDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(!deltas.contains('{'), "no JSON streamed: {deltas:?}");
    // The second step sees the call it made and its result.
    let second = requests[1].body["messages"].to_string();
    assert!(
        second.contains(r#"\"name\":\"read\""#) || second.contains(r#"\"name\": \"read\""#),
        "{second}"
    );
    assert!(second.contains("Result of read"), "{second}");
}

/// What bench-tasks saw Qwen2.5-Coder 0.5B do: list `/` (refused as outside the project), then
/// answer "The path is outside the project" and end the task. `/` is the project root now, and a
/// constrained step offers no final answer until a call of the run that saw more than names
/// worked (or three failed). The 1.5B listed the project and said its one route was "GET /default".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_constrained_run_answers_only_after_a_call_worked() {
    let env = small_env(&[("notes.txt", "alpha\n")]).await;
    let events = scripted(
        &env,
        &[
            r#"{"name": "read", "arguments": {"path": "missing.txt"}}"#,
            r#"{"name": "list", "arguments": {"path": "/"}}"#,
            r#"{"name": "read", "arguments": {"path": "notes.txt"}}"#,
            r#"{"answer": "notes.txt is there."}"#,
        ],
        "what is in this project?",
        Answer::None,
    )
    .await;
    let ran = results(&events);
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert!(ran[0].2, "missing.txt fails: {ran:?}");
    assert!(
        !ran[1].2 && ran[1].1.contains("notes.txt"),
        "/ lists the project: {ran:?}"
    );
    let offers = answer_offers(&env.sim.chat_requests());
    assert_eq!(
        offers,
        [false, false, false, true],
        "answer offered per step: not after a failure, nor after names alone (a list), but after a read"
    );
    assert_eq!(parts_text(&events), "notes.txt is there.");
}

/// What bench-tasks saw Qwen2.5-Coder 1.5B do: asked to add a route, it read the controller and
/// answered "Added a route…" with nothing changed. A prompt that asks for a change is offered the
/// answer once a change worked; a question is offered it after any call that worked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_constrained_run_asked_for_a_change_answers_only_after_one() {
    let env = small_env(&[("notes.txt", "alpha\n")]).await;
    let events = scripted(
        &env,
        &[
            r#"{"name": "read", "arguments": {"path": "notes.txt"}}"#,
            r#"{"name": "edit", "arguments": {"path": "notes.txt", "oldString": "alpha", "newString": "beta"}}"#,
            r#"{"answer": "notes.txt says beta now."}"#,
        ],
        "Change alpha to beta in the notes.",
        Answer::Once,
    )
    .await;
    let offers = answer_offers(&env.sim.chat_requests());
    assert_eq!(
        offers,
        [false, false, true],
        "no answer after the read, one after the edit"
    );
    assert_eq!(parts_text(&events), "notes.txt says beta now.");
    let notes = read(&env, "notes.txt");
    assert_eq!(notes, "beta\n");

    // A question is answered after its first look.
    scripted(
        &env,
        &[
            r#"{"name": "read", "arguments": {"path": "notes.txt"}}"#,
            r#"{"answer": "It says beta."}"#,
        ],
        "What do the notes say?",
        Answer::None,
    )
    .await;
    let offers = answer_offers(&env.sim.chat_requests()[3..]);
    assert_eq!(
        offers,
        [false, true],
        "a question: the answer after the read"
    );
}

/// Qwen2.5-Coder 1.5B changed a heading with `sed -i`, was told "[no output]", and ran it again
/// after every read. A command's result now says which files it changed and shows the changed
/// lines; the change counts, so the answer is offered after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commands_result_shows_what_it_changed_and_the_change_counts() {
    let env = small_env(&[("notes.txt", "alpha\nsecond\n")]).await;
    let events = scripted(
        &env,
        &[
            r#"{"name": "bash", "arguments": {"command": "sed -i 's/alpha/beta/' notes.txt && printf 'x\\n' > made.txt"}}"#,
            r#"{"answer": "notes.txt says beta now."}"#,
        ],
        "Change alpha to beta in the notes.",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert!(
        ran[0]
            .1
            .contains("This command changed notes.txt, line 1. Now:\n    1\tbeta\n    2\tsecond")
            && ran[0]
                .1
                .contains("This command created made.txt (1 lines)."),
        "the result shows the change: {:?}",
        ran[0].1
    );
    let offers = answer_offers(&env.sim.chat_requests());
    assert_eq!(
        offers,
        [false, true],
        "the answer is offered after the change"
    );
    assert_eq!(parts_text(&events), "notes.txt says beta now.");
}

/// The same edit sent again after it worked is told it was made and what its line reads now,
/// not only "oldString not found", and `edit` is left out until something changes (the 1.5B
/// turned `about;` into `about`, then sent that edit four more times).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_sent_again_after_it_worked_is_told_it_was_made() {
    let env = small_env(&[("a.txt", "first\ncall(about;\nlast\n")]).await;
    let edit = r#"{"name": "edit", "arguments": {"path": "a.txt", "oldString": "about;", "newString": "about"}}"#;
    let events = scripted(
        &env,
        &[edit, edit, r#"{"answer": "Fixed."}"#],
        "Fix line 2 of a.txt.",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    let last = ran.last().expect("results");
    assert!(last.2, "{ran:?}");
    assert!(
        last.1.starts_with(
            "This edit was already made by your earlier call, so its oldString is gone; do not make it again. Line 2 of a.txt now reads: call(about"
        ),
        "{ran:?}"
    );
    // The step after it is not offered `edit` (the 1.5B alternated it with reads until the
    // cycle guard); the one before was.
    let offers = tool_offers(&env.sim.chat_requests());
    assert_eq!(offers.len(), 3, "{offers:?}");
    assert!(offers[1].contains(&"edit".to_string()), "{offers:?}");
    assert!(
        !offers[2].contains(&"edit".to_string()) && offers[2].contains(&"write".to_string()),
        "{offers:?}"
    );
}

/// A task that names two files: the change of the first is not called the last while the
/// other is unchanged (the 1.5B changed actions/products.js of a two-file task, was told it
/// could answer now, and did); the change of the second is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_not_the_last_while_a_file_the_task_names_is_unchanged() {
    let env = small_env(&[("a.txt", "alpha\n"), ("b.txt", "beta\n")]).await;
    let events = scripted(
        &env,
        &[
            r#"{"name": "edit", "arguments": {"path": "a.txt", "oldString": "alpha", "newString": "one"}}"#,
            r#"{"name": "edit", "arguments": {"path": "b.txt", "oldString": "beta", "newString": "two"}}"#,
            r#"{"answer": "Both changed."}"#,
        ],
        "Change alpha to one in a.txt and beta to two in b.txt.",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    assert_eq!(ran.len(), 4, "two reads, two edits: {ran:?}");
    assert!(
        ran[2].1.ends_with(
            "The task also names b.txt, which you have not changed yet: change it next if the task needs it."
        ) && !ran[2].1.contains("answer now"),
        "{ran:?}"
    );
    assert!(ran[3].1.contains("answer now"), "{ran:?}");
    assert_eq!(read(&env, "a.txt"), "one\n");
    assert_eq!(read(&env, "b.txt"), "two\n");
}

/// A small model's run starts from the files the prompt names: Totem reads them as the run's
/// first step (stored as its own calls, so the conversation replays the same), and the model's
/// first request already holds their content. The 1.5B spent its first steps reading the file
/// the prompt named, or listing folders the project does not have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_models_run_starts_with_the_files_the_prompt_names() {
    let env = small_env(&[("notes.txt", "alpha\n"), (".env", "TOKEN=hush\n")]).await;
    let events = scripted(
        &env,
        &[
            r#"{"name": "edit", "arguments": {"path": "notes.txt", "oldString": "alpha", "newString": "beta"}}"#,
            r#"{"answer": "notes.txt says beta now."}"#,
        ],
        "Change alpha to beta in notes.txt (not in .env or missing.txt).",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert!(
        ran[0].0 == "read" && !ran[0].2 && ran[0].1.contains("1\talpha"),
        "notes.txt read first, .env and a missing file not: {ran:?}"
    );
    assert!(!ran[1].2, "the edit works on the file read for it: {ran:?}");
    assert!(
        ran[1].1.ends_with(
            r#"If this was the last change the task needs, answer now with {"answer": "what you changed"}; otherwise make the next change."#
        ),
        "a change that worked says the answer may come now: {ran:?}"
    );
    let first = env.sim.chat_requests()[0].body["messages"].to_string();
    assert!(
        first.contains("Result of read") && first.contains("alpha") && !first.contains("hush"),
        "the first request holds the file: {first}"
    );
    // Stored as a call of the run's own assistant message, before the model's.
    let messages = env
        .client
        .call_raw("session.messages", json!({"sessionId": env.session}))
        .await
        .expect("session.messages");
    let calls: Vec<String> = messages["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["type"] == "toolCall")
        .map(|p| {
            format!(
                "{} {}",
                p["tool"].as_str().unwrap_or(""),
                p["input"]["path"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(calls, ["read notes.txt", "edit notes.txt"]);
    assert_eq!(read(&env, "notes.txt"), "beta\n");
}

/// Asked which routes an app defines ("Do not change any file."), the 0.5B edited and created
/// files. A prompt that forbids changes is offered only the tools that look; a look repeated
/// leaves the other look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_that_forbids_changes_is_offered_only_looks() {
    let env = small_env(&[("notes.txt", "alpha\n")]).await;
    let look = r#"{"name": "read", "arguments": {"path": "notes.txt"}}"#;
    let events = scripted(
        &env,
        &[
            r#"{"name": "list", "arguments": {"path": "."}}"#,
            look,
            look,
            r#"{"answer": "They say alpha."}"#,
        ],
        "What do the notes say? Do not change any file.",
        Answer::None,
    )
    .await;
    // A list before any read names the file to read, as a call to copy (the 1.5B listed
    // folder after folder and answered with the file names).
    let ran = results(&events);
    assert!(
        ran[0].1.ends_with(
            r#"To see what a file holds, read it, e.g. {"name":"read","arguments":{"path":"README.md"}}"#
        ),
        "{ran:?}"
    );
    assert!(
        ran[2]
            .1
            .contains("Do not call it again: look at another file, or answer.")
            && ran[1].1.ends_with(
                r#"If this answers the question, answer now with {"answer": "your answer"}."#
            ),
        "a question's repeated look is not told to edit: {ran:?}"
    );
    let offers = tool_offers(&env.sim.chat_requests());
    assert_eq!(
        offers,
        [
            vec!["list", "read"],
            vec!["list", "read"],
            vec!["list", "read"],
            vec!["list"]
        ]
    );
}

/// The 0.5B read a two-line view and wrote "Welcome to Acme Shop" over it whole. A write that
/// would delete most of a file's lines is refused with the lines it would delete, unless the
/// prompt asks for the file to be replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_would_delete_most_of_a_file_is_refused() {
    let env = small_env(&[("notes.txt", "alpha\nsecond line\n")]).await;
    let events = scripted(
        &env,
        &[
            r#"{"name": "read", "arguments": {"path": "notes.txt"}}"#,
            r#"{"name": "write", "arguments": {"path": "notes.txt", "content": "beta"}}"#,
            r#"{"name": "write", "arguments": {"path": "notes.txt", "content": "beta\nsecond line\n"}}"#,
            r#"{"answer": "Done."}"#,
        ],
        "Change alpha to beta in the notes.",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert!(
        ran[1].2
            && ran[1]
                .1
                .starts_with("Not written: this would delete 2 of the 2 lines of notes.txt"),
        "{ran:?}"
    );
    assert!(
        !ran[2].2,
        "the whole file with the change is written: {ran:?}"
    );
    assert_eq!(read(&env, "notes.txt"), "beta\nsecond line\n");
}

/// The 1.5B read the two files of a task in turn, over and over, until the cycle guard ended the
/// run. A file read again with the same content counts as a repeated look, with other calls
/// between too: its result says so and the next step is offered no look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_read_again_unchanged_is_a_repeated_look() {
    let env = small_env(&[("a.txt", "alpha\n"), ("b.txt", "bravo\n")]).await;
    let read_a = r#"{"name": "read", "arguments": {"path": "a.txt"}}"#;
    let events = scripted(
        &env,
        &[
            read_a,
            r#"{"name": "read", "arguments": {"path": "b.txt"}}"#,
            read_a,
            r#"{"name": "edit", "arguments": {"path": "a.txt", "oldString": "alpha", "newString": "beta"}}"#,
            r#"{"answer": "Done."}"#,
        ],
        "Change alpha to beta in the letters.",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    assert!(
        !ran[1].1.contains("same call") && ran[2].1.contains("You made this same call"),
        "{ran:?}"
    );
    let offers = tool_offers(&env.sim.chat_requests());
    assert!(offers[2].contains(&"read".to_string()), "{offers:?}");
    assert_eq!(
        offers[3],
        ["bash", "edit", "write"],
        "no look after the read again"
    );
}

/// Told the app crashed with a SyntaxError, the 1.5B edited line 4 of a controller whose line 3
/// missed a `)`. A JavaScript file read or changed in constrained steps gets `node --check`'s
/// finding, with its line, and is not told the task may be done while it does not parse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_file_with_a_syntax_error_is_said_to_have_one_at_its_line() {
    let env = small_env(&[("app.js", "var a = 1;\nvar b = [1, 2;\n")]).await;
    let events = scripted(
        &env,
        &[
            r#"{"name": "edit", "arguments": {"path": "app.js", "oldString": "var a = 1;", "newString": "var a = 2;"}}"#,
            r#"{"name": "edit", "arguments": {"path": "app.js", "oldString": "[1, 2;", "newString": "[1, 2];"}}"#,
            r#"{"answer": "Fixed."}"#,
        ],
        "The app crashes with a SyntaxError in app.js. Fix it.",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    assert_eq!(ran.len(), 3, "{ran:?}");
    let said = "node --check finds a syntax error in app.js at line 2: SyntaxError:";
    assert!(
        ran[0].1.contains(said),
        "the first read says where: {ran:?}"
    );
    assert!(
        ran[1].1.contains(said) && !ran[1].1.contains("answer now"),
        "an edit that leaves it broken is not told it may be done: {ran:?}"
    );
    assert!(
        !ran[2].1.contains("node --check") && ran[2].1.contains("answer now"),
        "the fix parses: {ran:?}"
    );
}

/// Qwen2.5-Coder 1.5B overwrote actions/products.js, which it had never read, with three lines of
/// its own. A constrained step's `write` over an existing file works once the run has read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_constrained_write_over_an_unread_file_is_refused_until_it_is_read() {
    let env = small_env(&[("app.js", "keep me\n")]).await;
    let overwrite = r#"{"name": "write", "arguments": {"path": "./app.js", "content": "new\n"}}"#;
    let events = scripted(
        &env,
        &[
            overwrite,
            r#"{"name": "write", "arguments": {"path": "fresh.js", "content": "made\n"}}"#,
            r#"{"name": "read", "arguments": {"path": "app.js"}}"#,
            overwrite,
            r#"{"answer": "Rewrote app.js."}"#,
        ],
        "Rewrite the app file to say new.",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    assert_eq!(ran.len(), 4, "{ran:?}");
    assert!(
        ran[0].2
            && ran[0].1.starts_with("app.js already exists")
            && ran[0].1.contains("Read app.js first"),
        "the unread overwrite is refused: {ran:?}"
    );
    assert!(!ran[1].2, "a new file is written: {ran:?}");
    assert!(!ran[3].2, "after the read, the overwrite works: {ran:?}");
    assert_eq!(read(&env, "app.js"), "new\n");
    assert_eq!(read(&env, "fresh.js"), "made\n");
}

/// At a low temperature a small model given the same conversation writes the same call again
/// (bench-tasks: the 1.5B read a missing file four times in a row). The step after a repeated call
/// is sampled at 0.8 and is not offered that tool (a look repeated: no look at all); the one
/// after is back to the model's temperature and every tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_after_a_repeated_call_is_sampled_hotter_without_that_tool() {
    let env = Env::start().await;
    set_model(&env, json!({"tools": "text", "contextWindow": 8192})).await;
    let missing = r#"{"name": "read", "arguments": {"path": "contact.js"}}"#;
    scripted(
        &env,
        &[
            missing,
            missing,
            r#"{"name": "write", "arguments": {"path": "contact.js", "content": "x\n"}}"#,
            r#"{"answer": "Wrote contact.js."}"#,
        ],
        "Create contact.js.",
        Answer::Once,
    )
    .await;
    let temperatures: Vec<f64> = env
        .sim
        .chat_requests()
        .iter()
        .map(|r| {
            r.body["options"]["temperature"]
                .as_f64()
                .unwrap_or_default()
        })
        .collect();
    let near = |a: f64, b: f64| (a - b).abs() < 1e-3;
    assert_eq!(temperatures.len(), 4, "{temperatures:?}");
    assert!(
        near(temperatures[0], 0.2) && near(temperatures[1], 0.2),
        "{temperatures:?}"
    );
    assert!(
        near(temperatures[2], 0.8),
        "hotter after the repeat: {temperatures:?}"
    );
    assert!(near(temperatures[3], 0.2), "and back: {temperatures:?}");
    let looks: Vec<(bool, bool, bool)> = tool_offers(&env.sim.chat_requests())
        .iter()
        .map(|names| {
            let has = |n: &str| names.contains(&n.to_string());
            (has("read"), has("list"), has("write"))
        })
        .collect();
    assert_eq!(
        looks,
        [
            (true, true, true),
            (true, true, true),
            (false, false, true),
            (true, true, true)
        ],
        "a look made twice in a row leaves every look out of the next step, which must act"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_the_schema_gets_text_tools_and_it_is_remembered() {
    let env = Env::start().await;
    let llama = Sim::start(SimKind::Openai).await;
    // A llama.cpp server from before JSON-schema answers: `json_schema` is a 400.
    llama.set_variants(|v| {
        v.llamacpp_n_ctx = Some(4096);
        v.no_json_schema = true;
    });
    env.client
        .call_raw(
            "provider.add",
            json!({"name": "llama", "kind": "openai", "url": llama.url(), "maxRetries": 0,
                   "models": {"gpt-4o-mini": {"tools": "text", "temperature": 0.5, "topP": 0.9,
                                               "repeatPenalty": 1.1}}}),
        )
        .await
        .expect("provider.add");
    agent_common::write_file(env.project.path(), "notes.txt", "alpha\n");
    llama.push(totem_tests::sim::Reply::stream([
        totem_tests::sim::SimEvent::text(
            "I will read it. {\"name\": \"read\", \"arguments\": {\"path\": \"notes.txt\"}}",
        ),
    ]));
    llama.push(totem_tests::sim::Reply::stream([
        totem_tests::sim::SimEvent::text("It says alpha."),
    ]));
    let events = env
        .run_done(
            "read the notes",
            json!({"model": "llama/gpt-4o-mini"}),
            Answer::None,
        )
        .await;
    let asked = llama.chat_requests();
    assert_eq!(asked.len(), 3, "refused, asked again, next step");
    let schema = &asked[0].body["response_format"];
    assert_eq!(schema["type"], "json_schema");
    let (names, answer) = schema_names(&schema["json_schema"]["schema"]);
    assert!(names.contains(&"read".to_string()) && !answer, "{schema}");
    assert!(
        asked[1].body.get("response_format").is_none(),
        "{}",
        asked[1].body
    );
    assert!(asked[2].body.get("response_format").is_none(), "remembered");
    // The prompt asked again is the plain text-tools one.
    let system = asked[1].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(system.contains("answer in plain words"), "{system}");
    // Sampling from the model's settings; repeat_penalty to a local server.
    let close = |v: &Value, want: f64| v.as_f64().is_some_and(|v| (v - want).abs() < 1e-6);
    assert!(
        close(&asked[0].body["temperature"], 0.5),
        "{}",
        asked[0].body
    );
    assert!(close(&asked[0].body["top_p"], 0.9), "{}", asked[0].body);
    assert!(
        close(&asked[0].body["repeat_penalty"], 1.1),
        "{}",
        asked[0].body
    );
    assert!(
        notices(&events)
            .iter()
            .any(|n| n.contains("does not take a JSON schema")),
        "{:?}",
        notices(&events)
    );
    let ran = results(&events);
    assert!(ran.len() == 1 && !ran[0].2, "{ran:?}");

    // The next run remembers: no schema is sent at all.
    llama.push(totem_tests::sim::Reply::stream([
        totem_tests::sim::SimEvent::text("Hi."),
    ]));
    env.run_done("hi", json!({"model": "llama/gpt-4o-mini"}), Answer::None)
        .await;
    let asked = llama.chat_requests();
    assert!(asked[3].body.get("response_format").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provider_sends_the_schema_and_a_schema_llamacpp_cannot_convert_is_a_400() {
    use totem_tests::sim::harness::{config_for, provider, request, run};
    let llama = Sim::start(SimKind::Openai).await;
    let p = provider(config_for(&llama));
    // The simulator holds Totem to llama.cpp's rules: an unknown type is a 400.
    let mut bad = request("gpt-4o-mini", "hi");
    bad.answer_schema = Some(json!({"oneOf": [{"type": "obj"}]}));
    let out = run(p.as_ref(), bad).await;
    match out.expect_err() {
        totem_provider::ProviderError::InvalidRequest {
            status, message, ..
        } => {
            assert_eq!(*status, 400);
            assert!(message.contains("unrecognized type obj"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Totem's own schema for its tools converts, and the answer matching it comes back.
    let read = json!({"type": "object", "properties": {"path": {"type": "string",
        "description": "The file."}}, "required": ["path"], "additionalProperties": false});
    let schema = totem_tools::recover::answer_schema([("read", &read)], true, false);
    llama.push(totem_tests::sim::Reply::stream([
        totem_tests::sim::SimEvent::text(r#"{"name": "read", "arguments": {"path": "a.js"}}"#),
    ]));
    let mut good = request("gpt-4o-mini", "hi");
    good.answer_schema = Some(schema.clone());
    let done = run(p.as_ref(), good).await.expect_ok();
    assert_eq!(
        done.text(),
        r#"{"name": "read", "arguments": {"path": "a.js"}}"#
    );
    let sent = &llama.chat_requests()[1].body["response_format"];
    assert_eq!(
        *sent,
        json!({"type": "json_schema", "json_schema": {"name": "step", "schema": schema}})
    );
    // Documentation keys are left out of the schema sent (they only cost grammar states).
    assert!(!sent.to_string().contains("The file."), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tool_names_written_as_text_get_the_list_and_end_the_run_loudly() {
    let env = Env::start().await;
    set_model(&env, json!({"tools": "text", "constrained": false})).await;
    env.push(vec![text(
        r#"{"name": "fixOrderList", "arguments": {"order": 1}}"#,
    )]);
    // JSON with a comment in it: the parse error goes back.
    env.push(vec![text(
        "{\"name\": \"read\", \"arguments\": {\"path\": \"a.txt\" // the file\n}}",
    )]);
    env.push(vec![text(r#"{"name": "ROUTE", "arguments": {}}"#)]);
    env.push(vec![text("never asked")]);
    let mut stream = env.subscribe().await;
    let run = env.prompt("fix the orders", json!({})).await;
    let events = follow(&env, &mut stream, &run, Answer::None).await;
    let ran = results(&events);
    assert!(
        ran[0].2 && ran[0].1.contains("unknown tool \"fixOrderList\"") && ran[0].1.contains("read"),
        "the error lists the tools: {ran:?}"
    );
    let asked = env.sim.chat_requests();
    let after_comment = asked[2].body["messages"].to_string();
    assert!(
        after_comment.contains("could not be read"),
        "the parse error goes back: {after_comment}"
    );
    match last(&events) {
        EventKind::RunFailed { run } => assert!(
            run.error
                .as_deref()
                .is_some_and(|e| e.contains("could not call a tool") && e.contains("ROUTE")),
            "{:?}",
            run.error
        ),
        other => panic!("the run must fail: {other:?}"),
    }
    assert!(
        notices(&events)
            .iter()
            .any(|n| n.contains("could not call a tool 3 times")),
        "{:?}",
        notices(&events)
    );
    assert_eq!(asked.len(), 3, "no request after the third unusable step");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_model_gets_the_short_prompt_whatever_its_window() {
    let project = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        project.path().join("package.json"),
        r#"{"name": "app", "dependencies": {"total5": "latest"}}"#,
    )
    .expect("package.json");
    std::fs::write(
        project.path().join("index.js"),
        "require('total5');\nTotal.run();\n",
    )
    .expect("index.js");
    let env = Env::start_in(project).await;
    let mut models = vec![totem_tests::sim::SimModel::new("qwen2.5-coder:1.5b", 32768)];
    models.push(totem_tests::sim::SimModel::new("llama3.2:latest", 131072));
    env.sim.set_models(models);
    env.push(vec![text("ok")]);
    env.run_done(
        "which routes does this app define?",
        json!({"model": "sim/qwen2.5-coder:1.5b"}),
        Answer::None,
    )
    .await;
    let body = &env.sim.chat_requests()[0].body;
    let mut names: Vec<&str> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["bash", "edit", "list", "read", "write"]);
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(!system.contains("## Example"), "no full primer: {system}");
    assert!(
        system.contains("Total.js 5 rules"),
        "the essentials: {system}"
    );
    // A small project's files are named up front: a small model listed folders it does not have.
    assert!(
        system.contains("\n- Project files: index.js, package.json\n"),
        "the project's files: {system}"
    );
    // Nothing is appended to the user's words.
    let user = body["messages"][1]["content"].as_str().unwrap_or_default();
    assert_eq!(user, "which routes does this app define?");

    // `small: false` gives it the full prompt.
    set_model_named(&env, "qwen2.5-coder:1.5b", json!({"small": false})).await;
    env.push(vec![text("ok")]);
    env.run_done(
        "hi",
        json!({"model": "sim/qwen2.5-coder:1.5b"}),
        Answer::None,
    )
    .await;
    let body = &env
        .sim
        .chat_requests()
        .last()
        .expect("a request")
        .body
        .clone();
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(system.contains("## Example"), "the primer: {system}");
}

async fn set_model_named(env: &Env, model: &str, settings: Value) {
    env.client
        .call_raw(
            "provider.add",
            json!({"name": "sim", "kind": "ollama", "url": env.sim.url(),
                   "defaultModel": model, "maxRetries": 0, "replace": true,
                   "models": {model: settings}}),
        )
        .await
        .expect("provider.add");
}

/// What the first request of a run costs before the user's words: the system prompt and the
/// `tools` JSON as sent, the whole body, and the tools offered (sorted). The project's path,
/// which depends on where the test runs, is counted as `/project`.
struct FirstRequest {
    fixed: usize,
    body: usize,
    tools: Vec<String>,
}

async fn first_request(env: &Env, model: &str, answers: &[&str]) -> FirstRequest {
    let before = env.sim.chat_requests().len();
    let session = totem_tests::setup::create_session(
        &env.client,
        &totem_tests::setup::open_project(&env.client, env.project.path()).await,
    )
    .await;
    let mut events = env.client.subscribe(&session, 0).await.expect("subscribe");
    for answer in answers {
        env.push(vec![text(answer)]);
    }
    let accepted = env
        .client
        .call_raw(
            "session.prompt",
            json!({"sessionId": session, "text": "hi", "model": model, "mode": "build"}),
        )
        .await
        .expect("session.prompt");
    let run = accepted["runId"].as_str().expect("run id").to_string();
    loop {
        let e = agent_common::next_event(&mut events, 60).await;
        if let Some(ended) = e.kind.ended_run()
            && ended.id == run
        {
            assert!(matches!(e.kind, EventKind::RunDone { .. }), "{e:?}");
            break;
        }
    }
    let recorded = env.sim.chat_requests()[before].clone();
    let body = &recorded.body;
    let root = env.root().display().to_string();
    let system = body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .replace(&root, "/project");
    let tools = match &body["tools"] {
        Value::Null => String::new(),
        t => t.to_string(),
    };
    let mut names: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    names.sort_unstable();
    // The path sits in the body once per place it is named (the system prompt).
    let paths = body.to_string().matches(root.as_str()).count();
    FirstRequest {
        fixed: system.len() + tools.len(),
        body: recorded.body_bytes - paths * root.len() + paths * "/project".len(),
        tools: names,
    }
}

/// The first request's bytes are a budget (issue 37 item 4): a new tool, a longer description or
/// a longer system prompt fails here, so growing the prompt is a decision (raise the budget, and
/// say why in BENCHMARKS.md's "Prompt size") rather than a drift. The bytes are deterministic:
/// the date has a fixed length and the project's path is counted as `/project`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_request_stays_within_its_byte_budget() {
    let env = Env::start().await;
    // What the small model's first step reads (the prompt lists no files, so no bytes change).
    agent_common::write_file(env.project.path(), "notes.txt", "alpha\n");
    env.sim.set_models(vec![
        totem_tests::sim::SimModel::new("qwen2.5-coder:1.5b", 32768),
        totem_tests::sim::SimModel::new("llama3.2:latest", 131072),
    ]);
    env.client
        .call_raw(
            "provider.add",
            json!({"name": "tiny", "kind": "ollama", "url": env.sim.url(), "maxRetries": 0,
                   "models": {"qwen2.5-coder:1.5b": {"tools": "text"}}}),
        )
        .await
        .expect("provider.add");

    // (what, model, answers, tools offered, budget of system + tools, budget of the whole body)
    type Case<'a> = (&'a str, &'a str, &'a [&'a str], &'a [&'a str], usize, usize);
    let cases: [Case; 2] = [
        (
            "plain Build, 128k window",
            "sim/llama3.2:latest",
            &["ok"],
            &[
                "bash", "edit", "glob", "grep", "job", "list", "patch", "read", "terminal", "todo",
                "write",
            ],
            BUILD_FIXED,
            BUILD_BODY,
        ),
        (
            "small model (1.5B, tools in text), Build",
            "tiny/qwen2.5-coder:1.5b",
            // A constrained first step is a tool call that sees more than names, then the answer.
            &[
                r#"{"name": "read", "arguments": {"path": "notes.txt"}}"#,
                r#"{"answer": "ok"}"#,
            ],
            &[],
            SMALL_FIXED,
            SMALL_BODY,
        ),
    ];
    let mut report = String::new();
    let mut over = Vec::new();
    for (what, model, answers, tools, fixed_budget, body_budget) in cases {
        let got = first_request(&env, model, answers).await;
        assert_eq!(
            got.tools, tools,
            "{what}: the tools offered changed; a new tool is a decision: update this list and the budgets"
        );
        report.push_str(&format!(
            "{what}: system + tools {} B (budget {fixed_budget}), whole body {} B (budget {body_budget})\n",
            got.fixed, got.body
        ));
        if got.fixed > fixed_budget || got.body > body_budget {
            over.push(what);
        }
    }
    eprint!("{report}");
    assert!(
        over.is_empty(),
        "over budget: {over:?}\n{report}If the growth is meant, raise the budget here and record the new figures in BENCHMARKS.md (Prompt size)"
    );
}

/// Budgets, about 100 B above what was measured when they were set (2026-12-05, totemd at
/// e391c05): plain Build 6,901 B of system + tools and a body of 7,105 B (BENCHMARKS.md's target
/// for it is 8,000 B; OpenCode 1.18 sends 30,729 B); the small model 1,988 B and 3,568 B (the
/// body holds the schema that constrains its answer; e391c05's words on the answer took it from
/// 1,862 B). One more tool or a paragraph more of rules does not fit.
const BUILD_FIXED: usize = 7_000;
const BUILD_BODY: usize = 7_200;
const SMALL_FIXED: usize = 2_080;
const SMALL_BODY: usize = 3_660;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_model_writes_content_as_a_code_block_and_answers_in_plain_words() {
    let env = small_env(&[("notes.txt", "alpha\n")]).await;
    set_model(
        &env,
        json!({"tools": "text", "contextWindow": 8192, "codeBlocks": true}),
    )
    .await;
    // Totem reads the named file first; the model names the file it writes, then writes its
    // content as a code block in an answer of its own, then says it is done, then answers.
    let events = scripted(
        &env,
        &[
            r#"{"name": "write", "arguments": {"path": "notes.txt"}}"#,
            // The server continues the answer Totem starts with a fence.
            "beta\n```\nThat is all.",
            r#"{"done": true}"#,
            // A call written in the plain answer is text, not run (the 0.5B's held a read).
            r#"I changed notes.txt to say beta. {"name": "read", "arguments": {"path": "notes.txt"}}"#,
        ],
        "Change notes.txt to say beta.",
        Answer::Once,
    )
    .await;
    assert_eq!(read(&env, "notes.txt"), "beta\n");
    let requests = env.sim.chat_requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    // The call step: write takes only the path, and no partial change is offered.
    let body = &requests[0].body;
    assert_eq!(tool_offers(&requests)[0], ["bash", "list", "read", "write"]);
    let write = body["format"]["oneOf"]
        .as_array()
        .and_then(|b| {
            b.iter()
                .find(|b| b["properties"]["name"]["const"] == "write")
        })
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        write["properties"]["arguments"]["required"],
        json!(["path"])
    );
    assert!(write["properties"]["arguments"]["properties"]["content"].is_null());
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(
        system.contains(r#"write {"done": true}"#) && system.contains("give only its path"),
        "{system}"
    );
    // The content is asked for without the constraint, after the call.
    let last_text = |r: &Recorded| {
        r.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    assert!(
        requests[1].body.get("format").is_none(),
        "{}",
        requests[1].body
    );
    let asked = requests[1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let n = asked.len();
    assert!(n > 3, "{asked:?}");
    assert_eq!(
        asked[n - 2]["content"],
        "Write the whole new content of notes.txt in one code block: every line of it that stays, and the change the task asks for.\nThe task: Change notes.txt to say beta."
    );
    assert_eq!(
        asked[n - 1],
        json!({"role": "assistant", "content": "```\n"})
    );
    // The change's result says to write done; the done step is offered instead of an answer.
    let done = requests[2].body["format"]["oneOf"]
        .as_array()
        .is_some_and(|b| b.iter().any(|b| b["required"] == json!(["done"])));
    assert!(
        done && !answer_offers(&requests)[2],
        "{}",
        requests[2].body["format"]
    );
    assert!(last_text(&requests[2]).contains(r#"The change is made: write {"done": true}."#));
    // Once the change asked for is made, only the end is offered (the 0.5B wrote the right
    // heading, then the file again and again).
    assert!(
        tool_offers(&requests)[2].is_empty(),
        "{:?}",
        tool_offers(&requests)
    );
    // The answer comes in plain words, into the same message, and is what the user sees.
    assert!(requests[3].body.get("format").is_none());
    // Greedy (Totem's own 0.2 elsewhere): at 0.2 the 0.5B's plain answers varied run to run.
    assert_eq!(requests[3].body["options"]["temperature"], json!(0.0));
    assert!(
        (requests[2].body["options"]["temperature"]
            .as_f64()
            .unwrap_or_default()
            - 0.2)
            .abs()
            < 1e-6
    );
    assert_eq!(
        last_text(&requests[3]),
        "Now say in plain words what you changed."
    );
    assert_eq!(
        parts_text(&events),
        r#"I changed notes.txt to say beta. {"name": "read", "arguments": {"path": "notes.txt"}}"#
    );
    // Totem's first read and the write: nothing ran after the answer.
    assert_eq!(results(&events).len(), 2, "{:?}", results(&events));
    // The stored call holds the content, so the conversation replays as it ran.
    let calls: Vec<Value> = agent_common::parts(&events)
        .into_iter()
        .filter_map(|p| match p {
            totem_protocol::Part::ToolCall { tool, input, .. } if tool == "write" => Some(input),
            _ => None,
        })
        .collect();
    assert_eq!(calls, [json!({"path": "notes.txt", "content": "beta\n"})]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_of_the_same_content_is_no_change() {
    let env = small_env(&[("notes.txt", "alpha\n")]).await;
    let events = scripted(
        &env,
        &[
            r#"{"name": "write", "arguments": {"path": "notes.txt", "content": "alpha\n"}}"#,
            r#"{"name": "write", "arguments": {"path": "notes.txt", "content": "beta\n"}}"#,
            r#"{"answer": "notes.txt says beta."}"#,
        ],
        "Change notes.txt to say beta.",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    // Totem's first read, the write that changed nothing, the write that changed the file.
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert!(
        ran[1].2
            && ran[1]
                .1
                .contains("already holds this content (spacing aside)"),
        "{ran:?}"
    );
    assert!(!ran[1].1.contains("answer now"), "{ran:?}");
    assert!(!ran[2].2 && ran[2].1.contains("answer now"), "{ran:?}");
    // The unchanged write did not open the answer: only the real change did.
    assert_eq!(
        answer_offers(&env.sim.chat_requests()),
        [false, false, true]
    );
    assert_eq!(read(&env, "notes.txt"), "beta\n");
}

/// A small model that reads a Total.js controller gets its routes in one plain line after the
/// file: asked which routes an app defines, the 1.5B read the controller and called
/// `ROUTE('GET /api/products/ --> Products|list')` "a route for the API products/" (issue 34).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_read_by_a_small_model_lists_its_routes() {
    let controller = "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /api/products/ --> Products|list');\n};\n\nfunction index($) {\n\t$.view('index');\n}\n";
    let env = small_totaljs_env(&[
        ("controllers/default.js", controller),
        ("notes.js", "var a = 1;\n"),
    ])
    .await;
    let events = scripted(
        &env,
        &[
            r#"{"name": "read", "arguments": {"path": "notes.js"}}"#,
            r#"{"answer": "GET / and GET /api/products/."}"#,
        ],
        "Which routes does this app define? Do not change any file.",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    let line = "Routes this file declares: GET / (function index), GET /api/products/ (action Products|list).";
    assert!(
        ran[0].0 == "read" && ran[0].1.contains("1\texports.install") && ran[0].1.contains(line),
        "Totem's first read of the controller ends with its routes: {ran:?}"
    );
    let notes = ran
        .iter()
        .find(|r| r.1.contains("var a = 1"))
        .expect("notes.js read");
    // A file without routes after the controller recalls the routes read: the 1.5B read the
    // controller, then the action, and answered that the app had "a single route", the
    // action's (c32).
    assert!(
        !notes.1.contains("Routes this file")
            && notes.1.ends_with("\n\nRoutes read so far: GET / (function index), GET /api/products/ (action Products|list) (in controllers/default.js).\n\nIf this answers the question, answer now with {\"answer\": \"your answer\"}."),
        "a file without routes recalls the routes read before: {ran:?}"
    );
    // Asked for a change, the 1.5B copied the line's form into a route of a missing action.
    let events = scripted(
        &env,
        &[
            r#"{"name": "edit", "arguments": {"path": "controllers/default.js", "oldString": "ROUTE('GET /', index);", "newString": "ROUTE('GET /', index);\n\tROUTE('GET /api/ping/', index);"}}"#,
            r#"{"answer": "Added."}"#,
        ],
        "Add a route GET /api/ping/ in controllers/default.js.",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    let read = ran.iter().rev().find(|r| r.0 == "read").expect("a read");
    assert!(
        read.1.contains("1\texports.install") && !read.1.contains("Routes this file"),
        "no routes line when the task asks for a change: {ran:?}"
    );
}

/// A change is not the last while the task's new file is missing, while a route it names is not
/// declared, or while an earlier change's removal is not put back: told to add Contact|create in the new file actions/contact.js, the
/// 1.5B renamed Products|list in actions/products.js, pointed the controller's route at it, was
/// told it could answer, and did (issue 34, c27).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_not_the_last_while_the_new_file_is_missing_or_a_removal_stands() {
    let products =
        "NEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback([]);\n\t}\n});\n";
    let controller =
        "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n};\n";
    let contact = "NEWACTION('Contact|create', {\n\troute: 'POST /api/contact/',\n\taction: function($) {\n\t\t$.success();\n\t}\n});\n";
    let env = small_totaljs_env(&[
        ("controllers/default.js", controller),
        ("actions/products.js", products),
    ])
    .await;
    let call =
        |name: &str, args: serde_json::Value| json!({"name": name, "arguments": args}).to_string();
    let steps = [
        call(
            "edit",
            json!({"path": "actions/products.js", "oldString": "Products|list", "newString": "Contact|create"}),
        ),
        call(
            "edit",
            json!({"path": "controllers/default.js", "oldString": "Products|list", "newString": "Contact|create"}),
        ),
        // Put back first: a second Contact|create beside the renamed one would be refused.
        call(
            "write",
            json!({"path": "actions/products.js", "content": products}),
        ),
        call(
            "write",
            json!({"path": "actions/contact.js", "content": contact}),
        ),
        call(
            "write",
            json!({"path": "controllers/default.js", "content": controller}),
        ),
        r#"{"answer": "Added Contact|create."}"#.to_string(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let events = scripted(
        &env,
        &steps,
        // "Change": a task that may take code out, so the removal is not refused up front.
        "Change the app: add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/.",
        Answer::Once,
    )
    .await;
    let changes = changes(&events);
    assert_eq!(changes.len(), 5, "{changes:?}");
    assert!(
        changes[0]
            .1
            .contains("The task's action, as Total.js 5 declares it: NEWACTION('Contact|create', { route: 'POST /api/contact/', action: function($) { … $.success(value); } });")
            && !changes[2].1.contains("The task's action"),
        "the first change of an action file is told the task's action whole, once: {changes:?}"
    );
    let second = &changes[1].1;
    assert!(
        second.contains("The task also names actions/contact.js, which does not exist yet: create it next if the task needs it.")
            && second.contains("Your changes removed the action Products|list, which the project had before. Put it back unless the task is to remove it.")
            && second.contains("The task names the route POST /api/contact/, which no file declares yet: declare it next, with ROUTE('POST /api/contact/ --> Contact|create'); inside exports.install in controllers/default.js, or route: 'POST /api/contact/' in the NEWACTION('Contact|create', { … }).")
            && !second.contains("answer now"),
        "{second}"
    );
    let (_, restore) = second
        .split_once("To put Products|list back as it was, beside your changes, copy this call: ")
        .expect("the call that puts the action back");
    let restore: serde_json::Value =
        serde_json::from_str(restore.lines().next().unwrap_or("")).expect("a JSON call");
    assert_eq!(restore["arguments"]["path"], "actions/products.js");
    assert_eq!(
        restore["arguments"]["content"],
        format!(
            "{}\n\n{}",
            products
                .replace("Products|list", "Contact|create")
                .trim_end(),
            products
        )
    );
    let third = &changes[2].1;
    assert!(
        third.contains("The task also names actions/contact.js, which does not exist yet")
            && third.contains("The task names the route POST /api/contact/")
            && !third.contains("Your changes removed")
            && !third.contains("answer now"),
        "put back, the new file and its route still missing: {third}"
    );
    assert!(
        changes[3].1.contains("answer now") && !changes[3].1.contains("removed"),
        "all done: {:?}",
        changes[3]
    );
}

/// A refused write over another file names the new file the task asks for: the 0.5B, told to
/// add an action in the new file actions/contact.js, wrote over actions/products.js again and
/// again (issue 34, c29).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_names_the_new_file_the_task_asks_for() {
    let products = "var PRODUCTS = [\n\t{ id: 1 },\n\t{ id: 2 }\n];\n\nNEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS);\n\t}\n});\n";
    let env = small_totaljs_env(&[("actions/products.js", products)]).await;
    let over = json!({"name": "write", "arguments": {"path": "actions/products.js", "content": "var A = 1;\n"}}).to_string();
    let create = json!({"name": "write", "arguments": {"path": "actions/contact.js", "content": "NEWACTION('Contact|create', {\n\taction: function($) {\n\t\t$.success();\n\t}\n});\n"}}).to_string();
    let events = scripted(
        &env,
        &[&over, &create, r#"{"answer": "Added."}"#],
        "Add an action Contact|create in a new file actions/contact.js.",
        Answer::Once,
    )
    .await;
    let ran = results(&events);
    let refused = ran
        .iter()
        .find(|r| r.0 == "write" && r.2)
        .expect("the write over actions/products.js is refused");
    assert!(
        refused.1.ends_with(
            "\n\nThe task names actions/contact.js, which does not exist yet: to create it, write to that path."
        ),
        "{refused:?}"
    );
    assert_eq!(read(&env, "actions/products.js"), products);
    assert!(read(&env, "actions/contact.js").contains("Contact|create"));
}

/// A file the run created may be written over whole: it holds nothing of the project's (the
/// 0.5B copied the controller into its new actions/contact.js, then wrote its action over it
/// and was refused until stopped, issue 34, c30).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_the_run_created_may_be_written_over_whole() {
    let env = small_totaljs_env(&[]).await;
    let first = json!({"name": "write", "arguments": {"path": "actions/contact.js", "content": "var a = 1;\nvar b = 2;\nvar c = 3;\nvar d = 4;\n"}}).to_string();
    let second = json!({"name": "write", "arguments": {"path": "actions/contact.js", "content": "NEWACTION('Contact|create', {\n\taction: function($) {\n\t\t$.success();\n\t}\n});\n"}}).to_string();
    let events = scripted(
        &env,
        &[&first, &second, r#"{"answer": "Added."}"#],
        "Add an action Contact|create in a new file actions/contact.js.",
        Answer::Once,
    )
    .await;
    let writes: Vec<_> = results(&events)
        .into_iter()
        .filter(|r| r.0 == "write")
        .collect();
    assert!(
        writes.len() == 2 && writes.iter().all(|w| !w.2),
        "{writes:?}"
    );
    assert!(read(&env, "actions/contact.js").starts_with("NEWACTION('Contact|create'"));
}

/// New code written over a whole file the run read is added to it: a route inside
/// `exports.install`, the rest at the end; the result says so (the 1.5B wrote only the new
/// route, then only the new action, over their files and was refused 18 times, issue 34, c32).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_code_written_over_a_file_is_added_to_it() {
    let controller = "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /about/', about);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n\nfunction about($) {\n\t$.plain('Since 1999.');\n}\n";
    let env = small_totaljs_env(&[("controllers/default.js", controller)]).await;
    let look = json!({"name": "read", "arguments": {"path": "controllers/default.js"}}).to_string();
    let add = json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": "ROUTE('GET /api/ping/', ping);\n\nfunction ping($) {\n\t$.json({ pong: true });\n}\n"}}).to_string();
    let events = scripted(
        &env,
        &[&look, &add, r#"{"answer": "Added."}"#],
        "Add a route GET /api/ping/ in controllers/default.js that answers the JSON {\"pong\": true}.",
        Answer::Once,
    )
    .await;
    let write = results(&events)
        .into_iter()
        .find(|r| r.0 == "write")
        .expect("the write ran");
    assert!(!write.2, "{write:?}");
    assert!(
        write.1.starts_with("Your lines are new code, so Totem added them to controllers/default.js and kept all of its lines: the route inside exports.install, after line 3, the rest at the end."),
        "{write:?}"
    );
    assert_eq!(
        read(&env, "controllers/default.js"),
        "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /about/', about);\n\tROUTE('GET /api/ping/', ping);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n\nfunction about($) {\n\t$.plain('Since 1999.');\n}\n\nfunction ping($) {\n\t$.json({ pong: true });\n}\n"
    );
}

/// New code that does not parse once added is refused as before, and the file is left as it
/// was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_code_that_does_not_parse_is_not_added() {
    let controller = "exports.install = function() {\n\tROUTE('GET /', index);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n";
    let env = small_totaljs_env(&[("controllers/default.js", controller)]).await;
    let look = json!({"name": "read", "arguments": {"path": "controllers/default.js"}}).to_string();
    let add = json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": "function Products|count($) {\n\t$.callback(PRODUCTS.length);\n}\n"}}).to_string();
    // Something else after the refusal, so that the run may end.
    let other = json!({"name": "write", "arguments": {"path": "controllers/other.js", "content": "exports.install = function() {\n};\n"}}).to_string();
    let events = scripted(
        &env,
        &[&look, &add, &other, r#"{"answer": "Added."}"#],
        "Add a route GET /api/products/count/ in controllers/default.js.",
        Answer::Once,
    )
    .await;
    let write = results(&events)
        .into_iter()
        .find(|r| r.0 == "write")
        .expect("the write ran");
    assert!(write.2 && write.1.starts_with("Not written"), "{write:?}");
    assert_eq!(read(&env, "controllers/default.js"), controller);
}

/// A write that changes nothing is told what is still to do: the task, the errors of the file
/// as it is, the route the task names that no file declares (the 1.5B was told of `$.view()` in
/// its new action, then wrote the same content back five times, told only that nothing changed,
/// issue 34, c32).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_changes_nothing_is_told_what_is_still_wrong() {
    let env = small_totaljs_env(&[]).await;
    let action = "NEWACTION('Contact|create', {\n\tname: 'Create contact',\n\taction: function($) {\n\t\t$.view('contact');\n\t}\n});\n";
    let write =
        json!({"name": "write", "arguments": {"path": "actions/contact.js", "content": action}})
            .to_string();
    let read_it = json!({"name": "read", "arguments": {"path": "actions/contact.js"}}).to_string();
    let prompt = "Add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/.";
    let events = scripted(
        &env,
        &[&write, &read_it, &write, r#"{"answer": "Added."}"#],
        prompt,
        Answer::Once,
    )
    .await;
    let again = results(&events)
        .into_iter()
        .filter(|r| r.0 == "write")
        .nth(1)
        .expect("the second write");
    assert!(again.2, "{again:?}");
    for said in [
        "Not written: actions/contact.js already holds this content",
        &format!("\nThe task: {prompt}"),
        "\n\nStill wrong in actions/contact.js (fix it in your write):\nactions/contact.js:4 error [action-controller-method]",
        "The task names the route POST /api/contact/, which no file declares yet",
    ] {
        assert!(again.1.contains(said), "{said:?} not in {again:?}");
    }
}

/// A change that would remove an action or a route the task does not ask to remove is refused,
/// with the new file the task names (the 1.5B renamed Products|list to the Contact|create it was
/// asked to add in a new file, then wrote its action over the products, issue 34, c33). A whole
/// file written without such a route is written with it kept, and says so (given that write to
/// copy, the 1.5B sent its own back until stopped, c45).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_removes_an_action_the_task_keeps_is_refused() {
    let products =
        "NEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback([]);\n\t}\n});\n";
    let controller =
        "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n};\n";
    let env = small_totaljs_env(&[
        ("controllers/default.js", controller),
        ("actions/products.js", products),
    ])
    .await;
    let rename = json!({"name": "edit", "arguments": {"path": "actions/products.js", "oldString": "Products|list", "newString": "Contact|create"}}).to_string();
    let route = json!({"name": "edit", "arguments": {"path": "controllers/default.js", "oldString": "ROUTE('GET /api/products/ --> Products|list');", "newString": "ROUTE('POST /api/contact/ --> Contact|create');"}}).to_string();
    // The whole controller, its route left out for the new one.
    let whole = json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": "exports.install = function() {\n\tROUTE('POST /api/contact/ --> Contact|create');\n};\n"}}).to_string();
    let create = json!({"name": "write", "arguments": {"path": "actions/contact.js", "content": "NEWACTION('Contact|create', {\n\troute: 'POST /api/contact/',\n\taction: function($) {\n\t\t$.success();\n\t}\n});\n"}}).to_string();
    let events = scripted(
        &env,
        &[&rename, &route, &whole, &create, r#"{"answer": "Added."}"#],
        "Add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/.",
        Answer::Once,
    )
    .await;
    let changes = changes(&events);
    assert_eq!(changes.len(), 4, "{changes:?}");
    assert!(changes[0].2 && changes[1].2 && !changes[2].2, "{changes:?}");
    assert!(
        changes[2].1.starts_with("Your write left out the route GET /api/products/ of controllers/default.js, which the task does not ask to remove, so Totem kept it."),
        "{changes:?}"
    );
    assert_eq!(
        changes[0].1,
        "Not changed: this would remove the action Products|list from actions/products.js, and the task does not ask to remove it. Keep it, and add your code beside it.\n\nThe task names actions/contact.js, which does not exist yet: to create it, write to that path."
    );
    assert!(
        changes[1]
            .1
            .starts_with("Not changed: this would remove the route GET /api/products/ from controllers/default.js"),
        "{changes:?}"
    );
    assert!(!changes[3].2, "{changes:?}");
    assert_eq!(read(&env, "actions/products.js"), products);
    assert_eq!(
        read(&env, "controllers/default.js"),
        "exports.install = function() {\n\tROUTE('POST /api/contact/ --> Contact|create');\n\tROUTE('GET /api/products/ --> Products|list');\n};\n"
    );
}

/// An action the task describes with typed fields is not done without its `input`: the result
/// says which input to add (the 1.5B wrote Contact|create without one, and a request without an
/// email got 200 where the task wanted 400, issue 34, c29 and c34). Nor, when the task says it
/// answers success, without `$.success()` (the 0.5B ended it with `$.callback(model)`, c39).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_without_the_input_or_answer_the_task_describes_is_not_done() {
    let env = small_totaljs_env(&[]).await;
    let action = |input: &str, answer: &str| {
        json!({"name": "write", "arguments": {"path": "actions/contact.js", "content": format!("NEWACTION('Contact|create', {{\n\troute: 'POST /api/contact/',{input}\n\taction: function($, model) {{\n\t\t{answer};\n\t}}\n}});\n")}}).to_string()
    };
    let input = "\n\tinput: '*name:String, *email:Email',";
    let events = scripted(
        &env,
        &[
            &action("", "$.success()"),
            &action(input, "$.callback(model)"),
            &action(input, "$.success()"),
            r#"{"answer": "Added."}"#,
        ],
        "Add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/. It takes a required name (String) and a required email (Email), and answers success.",
        Answer::Once,
    )
    .await;
    let writes: Vec<_> = results(&events)
        .into_iter()
        .filter(|r| r.0 == "write")
        .collect();
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(
        writes[0].1.contains(
            "NEWACTION('Contact|create') has no input yet: add input: '*name:String, *email:Email'"
        ) && !writes[0].1.contains("answer now"),
        "{:?}",
        writes[0]
    );
    assert!(
        !writes[1].1.contains("has no input")
            && writes[1].1.contains("The task says NEWACTION('Contact|create') answers success (the client gets {\"success\":true}), and its action does not call $.success() yet. End its action with: $.success();")
            && !writes[1].1.contains("answer now"),
        "{:?}",
        writes[1]
    );
    assert!(
        !writes[2].1.contains("has no input")
            && !writes[2].1.contains("answers success")
            && writes[2].1.contains("answer now"),
        "{:?}",
        writes[2]
    );
}

/// A new action file written otherwise than the task describes it completely (its action answers
/// success, at a named route, with typed fields) gets the whole file to copy in the result, and
/// the copy is the change that ends the task (the 1.5B wrote Contact|create with `$.view()` and
/// no route, then copied a finding's words into it as code, issue 34, c39).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_action_file_unlike_the_task_gets_the_file_to_copy() {
    let env = small_totaljs_env(&[]).await;
    let wrong = json!({"name": "write", "arguments": {"path": "actions/contact.js", "content": "NEWACTION('Contact|create', {\n\tname: 'Create contact',\n\taction: function($) {\n\t\t$.view('contact/create');\n\t}\n});"}}).to_string();
    let file = "NEWACTION('Contact|create', {\n\troute: 'POST /api/contact/',\n\tinput: '*name:String, *email:Email',\n\taction: function($, model) {\n\t\t$.success();\n\t}\n});\n";
    let copy =
        json!({"name": "write", "arguments": {"path": "actions/contact.js", "content": file}})
            .to_string();
    // Shown the file, the 1.5B took its route and input and kept its `$.view()` (c43): the
    // file is shown again while the action is still wrong.
    let half = json!({"name": "write", "arguments": {"path": "actions/contact.js", "content": file.replace("$.success();", "$.view('contact');")}}).to_string();
    let events = scripted(
        &env,
        &[&wrong, &half, &copy, r#"{"answer": "Added."}"#],
        "Add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/. It takes a required name (String) and a required email (Email), and answers success.",
        Answer::Once,
    )
    .await;
    let writes: Vec<_> = results(&events)
        .into_iter()
        .filter(|r| r.0 == "write")
        .collect();
    assert_eq!(writes.len(), 3, "{writes:?}");
    for offered in &writes[..2] {
        assert!(
            offered.1.contains(&format!(
                "The task's action as a whole file, to copy (put any other work the task asks for in its action function): {copy}"
            )),
            "{offered:?}"
        );
    }
    assert!(
        !writes[2].1.contains("to copy") && writes[2].1.contains("answer now"),
        "{:?}",
        writes[2]
    );
    assert_eq!(
        std::fs::read_to_string(env.root().join("actions/contact.js")).expect("the action"),
        file
    );

    // Written as the task describes it on one line (the 0.5B, c40): shown with its own route,
    // and nothing to copy.
    let env = small_totaljs_env(&[]).await;
    let one_line = json!({"name": "write", "arguments": {"path": "actions/contact.js", "content": "NEWACTION('Contact|create', { route: 'POST /api/contact/', input: '*name:String, *email:Email', action: function($, model) { $.success(); } });\n"}}).to_string();
    let events = scripted(
        &env,
        &[&one_line, r#"{"answer": "Added."}"#],
        "Add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/. It takes a required name (String) and a required email (Email), and answers success.",
        Answer::Once,
    )
    .await;
    let written = &results(&events)[0].1;
    assert!(
        written.contains("NEWACTION('Contact|create', { route: 'POST /api/contact/', input: '*name:String, *email:Email', action: function($, model) { $.success(); } });")
            && !written.contains("to copy")
            && written.contains("answer now"),
        "{written}"
    );
}

/// A write of code the file holds already, over the whole file, is not written: the result says
/// there is nothing to add and what the task still needs (the 1.5B's new action had been added
/// to actions/products.js, and it wrote the action alone over the file again and again, c38).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_of_code_the_file_holds_already_is_not_written() {
    let products = "var PRODUCTS = [1, 2, 3];\n\nNEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS);\n\t}\n});\n\nNEWACTION('Products|count', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS.length);\n\t}\n});\n";
    let controller =
        "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n};\n";
    let env = small_totaljs_env(&[
        ("actions/products.js", products),
        ("controllers/default.js", controller),
    ])
    .await;
    let again = json!({"name": "write", "arguments": {"path": "actions/products.js", "content": "NEWACTION('Products|count', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS.length);\n\t}\n});"}}).to_string();
    let route = json!({"name": "edit", "arguments": {"path": "controllers/default.js", "oldString": "Products|list');", "newString": "Products|list');\n\tROUTE('GET /api/products/count/ --> Products|count');"}}).to_string();
    let events = scripted(
        &env,
        &[&again, &route, r#"{"answer": "Added."}"#],
        "Add an action Products|count in actions/products.js that answers the number of products, and a route GET /api/products/count/ for it in controllers/default.js.",
        Answer::Once,
    )
    .await;
    let write = results(&events)
        .into_iter()
        .find(|r| r.0 == "write")
        .expect("the write's result");
    assert!(
        write.1.starts_with("Not written: actions/products.js has every line of this already; there is nothing to add to it.")
            && write.1.contains("The task: Add an action Products|count")
            && write.1.contains("GET /api/products/count/, which no file declares yet"),
        "{write:?}"
    );
    assert_eq!(
        std::fs::read_to_string(env.root().join("actions/products.js")).expect("products"),
        products
    );

    // A script that does not parse may lose a line: that is how a stray brace is fixed.
    let fixed = "exports.install = function() {\n\tROUTE('GET /', index);\n};\n\nfunction index($) {\n\t$.plain('home');\n}\n";
    let broken = fixed.replace("};\n", "};\n}\n");
    let env = small_totaljs_env(&[("controllers/default.js", broken.as_str())]).await;
    let fix =
        json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": fixed}})
            .to_string();
    scripted(
        &env,
        &[&fix, r#"{"answer": "Fixed."}"#],
        "Fix the SyntaxError in controllers/default.js.",
        Answer::Once,
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.root().join("controllers/default.js")).expect("controller"),
        fixed
    );
}

/// Code that holds the `…` of an example is not written, and the result says what `…` is (the
/// 0.5B copied `$.json(…)` from the route's line into the controller until stopped, issue 34,
/// c41). `…` inside a string is code like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_with_an_examples_placeholder_is_not_written() {
    let controller = "exports.install = function() {\n\tROUTE('GET /', index);\n};\n\nfunction index($) {\n\t$.plain('home');\n}\n";
    let env = small_totaljs_env(&[("controllers/default.js", controller)]).await;
    let with = |answer: &str| {
        json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": controller.replace("\t$.plain('home');", &format!("\t{answer};"))}}).to_string()
    };
    let events = scripted(
        &env,
        &[
            &with("$.json(…)"),
            &with("$.plain('Loading…')"),
            r#"{"answer": "Changed."}"#,
        ],
        "Make the home page in controllers/default.js answer Loading… instead.",
        Answer::Once,
    )
    .await;
    let writes = changes(&events);
    assert!(
        writes[0].2
            && writes[0].1.starts_with(
                "Not written: `…` in your code stands for code an example left out, and JavaScript cannot run it. Write the real code in its place.\n\nnode --check finds a syntax error in controllers/default.js at line 6:"
            ),
        "{writes:?}"
    );
    assert!(!writes[1].2, "{writes:?}");
    assert!(read(&env, "controllers/default.js").contains("$.plain('Loading…');"));
}

/// A route written with an action's id as its handler is written with the action in its route
/// string, and the result says so (the 1.5B wrote `ROUTE('GET /api/products/count/',
/// Products|count);`, a ReferenceError at start, and could not fix it when told, issue 34, c42).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_written_as_a_routes_handler_goes_into_its_route_string() {
    let controller =
        "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n};\n";
    let products =
        "NEWACTION('Products|count', {\n\taction: function($) {\n\t\t$.callback(3);\n\t}\n});\n";
    let env = small_totaljs_env(&[
        ("controllers/default.js", controller),
        ("actions/products.js", products),
    ])
    .await;
    let write = json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n\tROUTE('GET /api/products/count/', Products|count);\n};\n"}}).to_string();
    let events = scripted(
        &env,
        &[&write, r#"{"answer": "Added."}"#],
        "Add a route GET /api/products/count/ for the action Products|count in controllers/default.js.",
        Answer::Once,
    )
    .await;
    let writes = changes(&events);
    assert!(
        !writes[0].2
            && writes[0].1.starts_with("An action is named in its route string, not as a handler, so Totem wrote ROUTE('GET /api/products/count/ --> Products|count');")
            && !writes[0].1.contains("route-action-handler"),
        "{writes:?}"
    );
    assert_eq!(
        read(&env, "controllers/default.js"),
        "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n\tROUTE('GET /api/products/count/ --> Products|count');\n};\n"
    );
}

/// A change that adds an error the conventions check finds to a script it finds none in is
/// refused, and the file stays right (the 1.5B had the task's action right, then edited
/// `$.success()` into `$.view()` until stopped, issue 34, c44).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_adds_a_conventions_error_to_a_clean_script_is_refused() {
    let action = "NEWACTION('Contact|create', {\n\taction: function($, model) {\n\t\t$.success();\n\t}\n});\n";
    let env = small_totaljs_env(&[("actions/contact.js", action)]).await;
    let look = json!({"name": "read", "arguments": {"path": "actions/contact.js"}}).to_string();
    let worse = json!({"name": "edit", "arguments": {"path": "actions/contact.js", "oldString": "$.success();", "newString": "$.view('contact');"}}).to_string();
    let better = json!({"name": "edit", "arguments": {"path": "actions/contact.js", "oldString": "$.success();", "newString": "$.success(model.name);"}}).to_string();
    let events = scripted(
        &env,
        &[&look, &worse, &better, r#"{"answer": "Changed."}"#],
        "Make Contact|create in actions/contact.js answer the name it was given.",
        Answer::Once,
    )
    .await;
    let edits = changes(&events);
    assert!(
        edits[0].2
            && edits[0].1.starts_with("Not changed: the conventions check finds no error in actions/contact.js now, and this change would add one that breaks the app at run time:\nactions/contact.js:3")
            && edits[0].1.contains("[action-controller-method]"),
        "{edits:?}"
    );
    assert!(!edits[1].2, "{edits:?}");
    assert!(read(&env, "actions/contact.js").contains("$.success(model.name);"));
}

/// A write or an edit that would turn a script that parses into one that does not is refused
/// with node's error, and a write that drops a function the file still uses is written with it
/// kept (the 1.5B wrote the controller's install block alone over it, without `};`, index and
/// about, issue 34, c35).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_breaks_a_script_that_parses_is_refused() {
    let controller = "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /about/', about);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n\nfunction about($) {\n\t$.plain('Since 1999.');\n}\n";
    let env = small_totaljs_env(&[("controllers/default.js", controller)]).await;
    let look = json!({"name": "read", "arguments": {"path": "controllers/default.js"}}).to_string();
    let unclosed = json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": controller.replace("\t$.plain('Since 1999.');\n}\n", "\t$.plain('Since 1999.');\n\tROUTE('GET /x/', index);\n")}}).to_string();
    let dropped = json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /about/', about);\n\tROUTE('GET /x/', index);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n"}}).to_string();
    let broken_edit = json!({"name": "edit", "arguments": {"path": "controllers/default.js", "oldString": "\tROUTE('GET /about/', about);\n};", "newString": "\tROUTE('GET /about/', about);\n\tROUTE('GET /x/', index);\n}}"}}).to_string();
    let events = scripted(
        &env,
        &[
            &look,
            &unclosed,
            &broken_edit,
            &dropped,
            r#"{"answer": "Added."}"#,
        ],
        "Add a route GET /x/ in controllers/default.js that shows the home page.",
        Answer::Once,
    )
    .await;
    let writes = changes(&events);
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(
        writes[0].2
            && writes[0].1.starts_with(
                "Not written: controllers/default.js parses now, and this change would make it fail to parse.\n\nnode --check finds a syntax error in controllers/default.js at line"
            ),
        "{:?}",
        writes[0]
    );
    assert!(
        writes[1].2
            && writes[1].1.starts_with(
                "Not edited: controllers/default.js parses now, and this change would make it fail to parse."
            )
            && writes[1].1.contains("Send the edit again with that line fixed."),
        "{:?}",
        writes[1]
    );
    assert!(
        !writes[2].2
            && writes[2].1.starts_with(
                "Your write left out the declaration of about of controllers/default.js, which the task does not ask to remove, so Totem kept it."
            ),
        "{:?}",
        writes[2]
    );
    let now = read(&env, "controllers/default.js");
    assert!(
        now.contains("ROUTE('GET /x/', index);\n};\n\nfunction index")
            && now.ends_with("function about($) {\n\t$.plain('Since 1999.');\n}\n"),
        "{now}"
    );

    // The refusal names the new file the task asks for (the 1.5B edited actions/products.js
    // into a syntax error six times instead, c41).
    let env = small_totaljs_env(&[("controllers/default.js", controller)]).await;
    let create = json!({"name": "write", "arguments": {"path": "actions/contact.js", "content": "NEWACTION('Contact|create', {\n\taction: function($) {\n\t\t$.success();\n\t}\n});\n"}}).to_string();
    // And so does the refusal to write over a file the run has not read (the 0.5B wrote its
    // action over views/layout.html 40 times instead, c41).
    let unread = json!({"name": "write", "arguments": {"path": "index.js", "content": "NEWACTION('Contact|create', {\n\taction: function($) {\n\t\t$.success();\n\t}\n});\n"}}).to_string();
    let events = scripted(
        &env,
        &[
            &look,
            &broken_edit,
            &unread,
            &create,
            r#"{"answer": "Added."}"#,
        ],
        "Add an action Contact|create in a new file actions/contact.js that answers success.",
        Answer::Once,
    )
    .await;
    let refusals = changes(&events);
    for refused in &refusals[..2] {
        assert!(
            refused.2
                && refused.1.ends_with(
                    "The task names actions/contact.js, which does not exist yet: to create it, write to that path."
                ),
            "{refused:?}"
        );
    }
    assert!(
        refusals[1]
            .1
            .starts_with("index.js already exists and has not been read"),
        "{refusals:?}"
    );
}

/// An action another file declares is not added to the file written over: the 1.5B wrote the
/// Contact|create of its new actions/contact.js over the controller too, and it was added there
/// (issue 34, c36).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_declared_elsewhere_is_not_added_to_another_file() {
    let controller = "exports.install = function() {\n\tROUTE('GET /', index);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n";
    let action =
        "NEWACTION('Contact|create', {\n\taction: function($) {\n\t\t$.success();\n\t}\n});\n";
    let env = small_totaljs_env(&[
        ("controllers/default.js", controller),
        ("actions/contact.js", action),
    ])
    .await;
    let look = json!({"name": "read", "arguments": {"path": "controllers/default.js"}}).to_string();
    let again = json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": action}}).to_string();
    let route = json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": "ROUTE('POST /api/contact/ --> Contact|create');"}}).to_string();
    let events = scripted(
        &env,
        &[&look, &again, &route, r#"{"answer": "Added."}"#],
        "Add a route POST /api/contact/ for the action Contact|create.",
        Answer::Once,
    )
    .await;
    let writes = changes(&events);
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert!(
        writes[0].2 && writes[0].1.starts_with("Not written"),
        "{:?}",
        writes[0]
    );
    assert!(!writes[1].2, "{:?}", writes[1]);
    let now = read(&env, "controllers/default.js");
    assert!(
        !now.contains("NEWACTION")
            && now.contains("\tROUTE('POST /api/contact/ --> Contact|create');\n};"),
        "{now}"
    );
}

/// A change that declares an action another file declares otherwise is refused, and a JSON write
/// comes back without the copy (the 1.5B wrote the controller with its new route and a copy of
/// the Products|count it had added to actions/products.js, issue 34, c36). A copy with the same
/// code is left out and the rest written (it sent such a write back until stopped, c38, c41).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_newaction_of_an_id_another_file_declares_is_refused() {
    let controller =
        "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n};\n";
    let products = "NEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback([]);\n\t}\n});\n\nNEWACTION('Products|count', {\n\taction: function($) {\n\t\t$.callback(3);\n\t}\n});\n";
    let env = small_totaljs_env(&[
        ("controllers/default.js", controller),
        ("actions/products.js", products),
    ])
    .await;
    let look = json!({"name": "read", "arguments": {"path": "controllers/default.js"}}).to_string();
    let copied = "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n\tROUTE('GET /api/products/count/ --> Products|count');\n};\n\nNEWACTION('Products|count', {\n\taction: function($) {\n\t\t$.callback(4);\n\t}\n});\n";
    let write = json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": copied}}).to_string();
    let fixed = json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n\tROUTE('GET /api/products/count/ --> Products|count');\n};\n"}}).to_string();
    let events = scripted(
        &env,
        &[&look, &write, &fixed, r#"{"answer": "Added."}"#],
        "Add a route GET /api/products/count/ for the action Products|count in controllers/default.js.",
        Answer::Once,
    )
    .await;
    let writes = changes(&events);
    assert!(
        writes[0].2
            && writes[0].1.starts_with("Not changed: actions/products.js declares Products|count already, and a second NEWACTION('Products|count') in controllers/default.js would replace it."),
        "{writes:?}"
    );
    let (_, copy) = writes[0]
        .1
        .split_once("Your write without it, to copy: ")
        .expect("the write without the copy");
    let copy: serde_json::Value =
        serde_json::from_str(copy.lines().next().unwrap_or("")).expect("a JSON call");
    assert_eq!(
        copy["arguments"]["content"],
        "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n\tROUTE('GET /api/products/count/ --> Products|count');\n};\n"
    );
    assert!(!writes[1].2, "{writes:?}");
    assert!(!read(&env, "controllers/default.js").contains("NEWACTION"));

    let env = small_totaljs_env(&[
        ("controllers/default.js", controller),
        ("actions/products.js", products),
    ])
    .await;
    let same = json!({"name": "write", "arguments": {"path": "controllers/default.js", "content": copied.replace("callback(4)", "callback(3)")}}).to_string();
    let events = scripted(
        &env,
        &[&look, &same, r#"{"answer": "Added."}"#],
        "Add a route GET /api/products/count/ for the action Products|count in controllers/default.js.",
        Answer::Once,
    )
    .await;
    let writes = changes(&events);
    assert!(
        !writes[0].2
            && writes[0].1.starts_with("Totem left out of controllers/default.js your copy of NEWACTION('Products|count') (actions/products.js declares it, the same): one declaration is enough."),
        "{writes:?}"
    );
    assert_eq!(
        read(&env, "controllers/default.js"),
        "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n\tROUTE('GET /api/products/count/ --> Products|count');\n};\n"
    );
}
