//! What runs change on disk, seen and taken back through the socket: `session.diff`,
//! `session.undo`, `session.redo`, and `session.fork`. The real totemd runs scripted models whose
//! tool calls (write, edit, bash) make the changes; permission questions are answered `once`.

mod agent_common;

use std::collections::BTreeMap;
use std::path::Path;

use agent_common::{Answer, Env, follow, last, next_event, text, tool};
use serde_json::{Value, json};
use totem_client::{ClientError, EventStream};
use totem_protocol::{EventKind, Message, Role, Session};
use totem_tests::sim::SimEvent;

const CONFLICT: i32 = -32009;
const NOT_FOUND: i32 = -32004;
const INVALID_PATH: i32 = -32005;

/// Every file under `root` (except git's own), by project-relative path, with its bytes.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read folder") {
            let path = entry.expect("entry").path();
            let rel = path
                .strip_prefix(root)
                .expect("inside root")
                .to_string_lossy()
                .replace('\\', "/");
            if rel == ".git" {
                continue;
            }
            if path.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                walk(root, &path, out);
            } else {
                out.insert(rel, std::fs::read(&path).expect("read file"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Runs one prompt whose model makes `steps` (each one turn of tool calls), then answers "done".
/// Returns the run id once the run ended well.
async fn run(env: &Env, stream: &mut EventStream, steps: Vec<Vec<SimEvent>>) -> String {
    for step in steps {
        env.push(step);
    }
    env.push(vec![text("Done.")]);
    let run_id = env.prompt("make the changes", json!({})).await;
    let events = follow(env, stream, &run_id, Answer::Once).await;
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{:?}",
        last(&events)
    );
    run_id
}

async fn call(env: &Env, method: &str, extra: Value) -> Result<Value, ClientError> {
    let mut params = json!({"sessionId": env.session});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    env.client.call_raw(method, params).await
}

/// The next `changes.undone`/`changes.redone` event: (undone?, run id, files).
async fn next_change_event(stream: &mut EventStream) -> (bool, String, Vec<String>) {
    loop {
        match next_event(stream, 30).await.kind {
            EventKind::ChangesUndone { run_id, files, .. } => return (true, run_id, files),
            EventKind::ChangesRedone { run_id, files, .. } => return (false, run_id, files),
            _ => {}
        }
    }
}

fn rpc_error(result: Result<Value, ClientError>) -> (i32, String, Option<Value>) {
    match result {
        Err(ClientError::Rpc {
            code,
            message,
            data,
        }) => (code, message, data),
        other => panic!("expected an error answer, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_and_redo_are_byte_exact_over_text_binary_created_deleted_and_renamed_files() {
    let env = Env::start().await;
    let root = env.root();
    agent_common::write_file(&root, "notes.txt", "line one\nline two\n");
    agent_common::write_file(&root, "before.txt", "rename me\n");
    agent_common::write_file(&root, "old.txt", "delete me\n");
    std::fs::write(root.join("logo.bin"), [0u8, 1, 2, 255, 254, 0, 10]).expect("binary");
    let original = tree(&root);

    let mut stream = env.subscribe().await;
    let run_id = run(
        &env,
        &mut stream,
        vec![
            vec![tool(
                "c1",
                "edit",
                json!({"path": "notes.txt", "oldString": "line two", "newString": "line 2"}),
            )],
            vec![tool(
                "c2",
                "write",
                json!({"path": "new/dir/created.txt", "content": "brand new\n"}),
            )],
            vec![tool(
                "c3",
                "bash",
                json!({"command": "printf '\\000\\377\\001bin' > logo.bin && rm old.txt && mv before.txt after.txt"}),
            )],
        ],
    )
    .await;
    let changed = tree(&root);
    assert_eq!(changed["notes.txt"], b"line one\nline 2\n");
    assert_eq!(changed["new/dir/created.txt"], b"brand new\n");
    assert_eq!(changed["logo.bin"], b"\x00\xff\x01bin");
    assert_eq!(changed["after.txt"], b"rename me\n");
    assert!(!changed.contains_key("old.txt") && !changed.contains_key("before.txt"));

    let undone = call(&env, "session.undo", json!({}))
        .await
        .expect("session.undo");
    assert_eq!(undone["runId"], run_id.as_str());
    assert_eq!(
        undone["files"],
        json!([
            "after.txt",
            "before.txt",
            "logo.bin",
            "new/dir/created.txt",
            "notes.txt",
            "old.txt"
        ])
    );
    assert_eq!(undone["canUndo"], false);
    assert_eq!(undone["canRedo"], true);
    // Byte for byte the tree before the run, created folders gone too.
    assert_eq!(tree(&root), original);
    let (was_undo, event_run, files) = next_change_event(&mut stream).await;
    assert!(was_undo);
    assert_eq!(event_run, run_id);
    assert_eq!(files.len(), 6, "{files:?}");

    let redone = call(&env, "session.redo", json!({}))
        .await
        .expect("session.redo");
    assert_eq!(redone["runId"], run_id.as_str());
    assert_eq!(redone["canRedo"], false);
    assert_eq!(tree(&root), changed);
    let (was_undo, event_run, _) = next_change_event(&mut stream).await;
    assert!(!was_undo);
    assert_eq!(event_run, run_id);

    // Redo is one level; undo can go again.
    let (code, _, _) = rpc_error(call(&env, "session.redo", json!({})).await);
    assert_eq!(code, NOT_FOUND);
    call(&env, "session.undo", json!({}))
        .await
        .expect("second undo");
    assert_eq!(tree(&root), original);
    let (code, message, _) = rpc_error(call(&env, "session.undo", json!({})).await);
    assert_eq!(code, NOT_FOUND);
    assert!(message.contains("nothing to undo"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_after_a_bash_command_restores_what_it_wrote() {
    let env = Env::start().await;
    let root = env.root();
    agent_common::write_file(&root, "data.txt", "alpha\nbeta\n");
    let original = tree(&root);
    let mut stream = env.subscribe().await;
    run(
        &env,
        &mut stream,
        vec![vec![tool(
            "c1",
            "bash",
            json!({"command": "mkdir -p build/out && echo built > build/out/app.txt && sed -i 's/beta/gamma/' data.txt && echo hi > hello.txt"}),
        )]],
    )
    .await;
    assert_eq!(env.file("data.txt"), "alpha\ngamma\n");
    assert_eq!(env.file("build/out/app.txt"), "built\n");

    let undone = call(&env, "session.undo", json!({}))
        .await
        .expect("session.undo");
    assert_eq!(
        undone["files"],
        json!(["build/out/app.txt", "data.txt", "hello.txt"])
    );
    assert_eq!(tree(&root), original);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_and_redo_walk_back_and_forward_run_by_run_and_a_new_run_clears_the_redos() {
    let env = Env::start().await;
    let root = env.root();
    let start = tree(&root);
    let mut stream = env.subscribe().await;
    let first = run(
        &env,
        &mut stream,
        vec![vec![tool(
            "c1",
            "write",
            json!({"path": "a.txt", "content": "one\n"}),
        )]],
    )
    .await;
    let after_first = tree(&root);
    // A run that changes nothing is undone too (its part of the conversation), touching no file.
    env.push(vec![text("Nothing to change.")]);
    let idle = env.prompt("look only", json!({})).await;
    follow(&env, &mut stream, &idle, Answer::Once).await;
    let second = run(
        &env,
        &mut stream,
        vec![vec![tool(
            "c2",
            "edit",
            json!({"path": "a.txt", "oldString": "one", "newString": "two"}),
        )]],
    )
    .await;
    assert_eq!(env.file("a.txt"), "two\n");

    let undone = call(&env, "session.undo", json!({})).await.expect("undo");
    assert_eq!(undone["runId"], second.as_str());
    assert_eq!(undone["canUndo"], true);
    assert_eq!(tree(&root), after_first);
    let undone = call(&env, "session.undo", json!({})).await.expect("undo");
    assert_eq!(undone["runId"], idle.as_str());
    assert_eq!(undone["files"], json!([]));
    assert_eq!(undone["prompt"], "look only");
    assert_eq!(tree(&root), after_first);
    let undone = call(&env, "session.undo", json!({})).await.expect("undo");
    assert_eq!(undone["runId"], first.as_str());
    assert_eq!(undone["canUndo"], false);
    assert_eq!(tree(&root), start);

    // Redo walks forward again over the three undos, newest undone first.
    let redone = call(&env, "session.redo", json!({})).await.expect("redo");
    assert_eq!(redone["runId"], first.as_str());
    assert_eq!(redone["canRedo"], true);
    assert_eq!(tree(&root), after_first);
    let redone = call(&env, "session.redo", json!({})).await.expect("redo");
    assert_eq!(redone["runId"], idle.as_str());
    let redone = call(&env, "session.redo", json!({})).await.expect("redo");
    assert_eq!(redone["runId"], second.as_str());
    assert_eq!(redone["canRedo"], false);
    assert_eq!(env.file("a.txt"), "two\n");
    let (code, message, _) = rpc_error(call(&env, "session.redo", json!({})).await);
    assert_eq!(code, NOT_FOUND);
    assert!(message.contains("redone already"), "{message}");
    // Undo and redo again in between: back two, forward one, back one.
    let undone = call(&env, "session.undo", json!({})).await.expect("undo");
    assert_eq!(undone["runId"], second.as_str());
    let undone = call(&env, "session.undo", json!({})).await.expect("undo");
    assert_eq!(undone["runId"], idle.as_str());
    let redone = call(&env, "session.redo", json!({})).await.expect("redo");
    assert_eq!(redone["runId"], idle.as_str());
    assert_eq!(redone["canRedo"], true);
    let undone = call(&env, "session.undo", json!({})).await.expect("undo");
    assert_eq!(undone["runId"], idle.as_str());
    let undone = call(&env, "session.undo", json!({})).await.expect("undo");
    assert_eq!(undone["runId"], first.as_str());
    assert_eq!(tree(&root), start);

    // Then a new run: the redos are gone, and the undone runs stay undone.
    let third = run(
        &env,
        &mut stream,
        vec![vec![tool(
            "c3",
            "write",
            json!({"path": "c.txt", "content": "three\n"}),
        )]],
    )
    .await;
    let (code, message, _) = rpc_error(call(&env, "session.redo", json!({})).await);
    assert_eq!(code, NOT_FOUND);
    assert!(message.contains("a run came after"), "{message}");
    let undone = call(&env, "session.undo", json!({})).await.expect("undo");
    assert_eq!(undone["runId"], third.as_str());
    assert_eq!(undone["canUndo"], false);
    assert_eq!(tree(&root), start);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_refuses_a_file_the_user_edited_afterwards_unless_forced() {
    let env = Env::start().await;
    let root = env.root();
    agent_common::write_file(&root, "y.txt", "mine\n");
    let original = tree(&root);
    let mut stream = env.subscribe().await;
    run(
        &env,
        &mut stream,
        vec![
            vec![tool(
                "c1",
                "write",
                json!({"path": "x.txt", "content": "agent\n"}),
            )],
            vec![tool(
                "c2",
                "edit",
                json!({"path": "y.txt", "oldString": "mine", "newString": "agent's"}),
            )],
        ],
    )
    .await;
    // The user edits a file the run created.
    std::fs::write(root.join("x.txt"), "edited by hand\n").expect("user edit");
    let edited = tree(&root);

    let (code, message, data) = rpc_error(call(&env, "session.undo", json!({})).await);
    assert_eq!(code, CONFLICT);
    assert!(
        message.contains("x.txt") && message.contains("force"),
        "{message}"
    );
    assert!(!message.contains("y.txt"), "{message}");
    assert_eq!(data.map(|d| d["files"].clone()), Some(json!(["x.txt"])));
    // All or nothing: y.txt was not touched either.
    assert_eq!(tree(&root), edited);

    let forced = call(&env, "session.undo", json!({"force": true}))
        .await
        .expect("forced undo");
    assert_eq!(forced["overwritten"], json!(["x.txt"]));
    assert_eq!(tree(&root), original);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_is_refused_while_a_run_is_going() {
    let env = Env::start().await;
    let mut stream = env.subscribe().await;
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "x.txt", "content": "x\n"}),
    )]);
    let run_id = env.prompt("write x", json!({})).await;
    // The run waits on its permission question: it is going.
    loop {
        if let EventKind::PermissionAsked { .. } = next_event(&mut stream, 30).await.kind {
            break;
        }
    }
    let (code, message, _) = rpc_error(call(&env, "session.undo", json!({})).await);
    assert_eq!(code, CONFLICT);
    assert!(message.contains("while a run"), "{message}");
    call(&env, "session.abort", json!({})).await.expect("abort");
    follow(&env, &mut stream, &run_id, Answer::None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_shows_one_run_the_whole_session_and_gits_view() {
    let env = Env::start().await;
    let root = env.root();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .expect("git runs");
        assert!(status.status.success(), "git {args:?}: {status:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "README.md"]);
    git(&["commit", "-q", "-m", "start"]);

    let mut stream = env.subscribe().await;
    let first = run(
        &env,
        &mut stream,
        vec![vec![tool(
            "c1",
            "write",
            json!({"path": "a.txt", "content": "one\n"}),
        )]],
    )
    .await;
    let second = run(
        &env,
        &mut stream,
        vec![
            vec![tool(
                "c2",
                "edit",
                json!({"path": "a.txt", "oldString": "one", "newString": "two"}),
            )],
            vec![tool(
                "c3",
                "edit",
                json!({"path": "README.md", "oldString": "# demo", "newString": "# demo app"}),
            )],
            vec![tool(
                "c4",
                "bash",
                json!({"command": "printf '\\000\\001' > data.bin"}),
            )],
        ],
    )
    .await;

    // One run.
    let one = call(&env, "session.diff", json!({"runId": first}))
        .await
        .expect("diff of a run");
    assert_eq!(one["runIds"], json!([first]));
    assert_eq!(one["files"].as_array().map(Vec::len), Some(1));
    assert_eq!(one["files"][0]["path"], "a.txt");
    assert_eq!(one["files"][0]["status"], "added");
    let a_diff = one["files"][0]["diff"].as_str().unwrap_or_default();
    assert!(
        a_diff.contains("--- /dev/null") && a_diff.contains("+one"),
        "{a_diff}"
    );

    let two = call(&env, "session.diff", json!({"runId": second}))
        .await
        .expect("diff of a run");
    let by_path = |v: &Value| -> BTreeMap<String, Value> {
        v["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| {
                (
                    f["path"].as_str().unwrap_or_default().to_string(),
                    f.clone(),
                )
            })
            .collect()
    };
    let files = by_path(&two);
    assert_eq!(
        files.keys().cloned().collect::<Vec<_>>(),
        ["README.md", "a.txt", "data.bin"]
    );
    assert_eq!(files["a.txt"]["status"], "modified");
    let a_diff = files["a.txt"]["diff"].as_str().unwrap_or_default();
    assert!(
        a_diff.contains("-one") && a_diff.contains("+two"),
        "{a_diff}"
    );
    assert_eq!(files["data.bin"]["status"], "added");
    assert_eq!(files["data.bin"]["binary"], true);
    assert!(files["data.bin"].get("diff").is_none());

    // The session: each file from before the first run to after the last.
    let session = call(&env, "session.diff", json!({}))
        .await
        .expect("session diff");
    assert_eq!(session["runIds"], json!([first, second]));
    let files = by_path(&session);
    assert_eq!(files["a.txt"]["status"], "added");
    let a_diff = files["a.txt"]["diff"].as_str().unwrap_or_default();
    assert!(
        a_diff.contains("+two") && !a_diff.contains("one"),
        "{a_diff}"
    );
    let all = session["diff"].as_str().unwrap_or_default();
    assert!(
        all.contains("+# demo app") && all.contains("Binary files /dev/null and b/data.bin differ"),
        "{all}"
    );

    // git's view: the tracked file against the last commit.
    let git_view = call(&env, "session.diff", json!({"git": true}))
        .await
        .expect("git diff");
    let files = by_path(&git_view);
    assert_eq!(
        files.keys().cloned().collect::<Vec<_>>(),
        ["README.md"],
        "{git_view}"
    );
    assert_eq!(files["README.md"]["status"], "modified");
    assert!(
        git_view["diff"].as_str().is_some_and(
            |d| d.contains("diff --git a/README.md b/README.md") && d.contains("+# demo app")
        ),
        "{git_view}"
    );

    // An undone run drops out of the session's diff.
    call(&env, "session.undo", json!({})).await.expect("undo");
    let session = call(&env, "session.diff", json!({}))
        .await
        .expect("session diff");
    assert_eq!(session["runIds"], json!([first]));
    let files = by_path(&session);
    assert_eq!(files.keys().cloned().collect::<Vec<_>>(), ["a.txt"]);
    assert!(
        files["a.txt"]["diff"]
            .as_str()
            .is_some_and(|d| d.contains("+one"))
    );

    let (code, _, _) = rpc_error(call(&env, "session.diff", json!({"runId": "run_nope"})).await);
    assert_eq!(code, NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_with_git_outside_a_repository_says_so() {
    let env = Env::start().await;
    let (code, message, _) = rpc_error(call(&env, "session.diff", json!({"git": true})).await);
    assert_eq!(code, -32602);
    assert!(message.contains("not in a git repository"), "{message}");
}

async fn messages(env: &Env, session_id: &str) -> Vec<Message> {
    let stored = env
        .client
        .call_raw("session.messages", json!({"sessionId": session_id}))
        .await
        .expect("session.messages");
    serde_json::from_value(stored["messages"].clone()).expect("messages decode")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_keeps_the_history_up_to_the_message_and_the_parent_id() {
    let env = Env::start().await;
    let mut stream = env.subscribe().await;
    for answer in ["First answer.", "Second answer."] {
        env.push(vec![text(answer)]);
        let run_id = env.prompt("question", json!({})).await;
        follow(&env, &mut stream, &run_id, Answer::None).await;
    }
    let parent: Session = serde_json::from_value(
        call(&env, "session.get", json!({}))
            .await
            .expect("session.get"),
    )
    .expect("session decodes");
    let history = messages(&env, &env.session).await;
    assert_eq!(history.len(), 4);

    let fork: Session = serde_json::from_value(
        call(
            &env,
            "session.fork",
            json!({"messageId": history[1].id.clone()}),
        )
        .await
        .expect("session.fork"),
    )
    .expect("fork decodes");
    assert_ne!(fork.id, env.session);
    assert_eq!(fork.parent_id.as_deref(), Some(env.session.as_str()));
    assert_eq!(fork.project_id, parent.project_id);
    assert_eq!(fork.title, format!("Fork of {}", parent.title));
    assert_eq!(fork.message_count, 2);

    let copied = messages(&env, &fork.id).await;
    assert_eq!(copied.len(), 2);
    for (copy, original) in copied.iter().zip(&history) {
        assert_ne!(copy.id, original.id);
        assert_eq!(copy.session_id, fork.id);
        assert_eq!(copy.role, original.role);
        assert_eq!(copy.parts, original.parts);
    }
    assert_eq!(copied[1].role, Role::Assistant);
    // The parent is untouched.
    assert_eq!(messages(&env, &env.session).await, history);

    // Without a message, the whole history; an unknown message is not found.
    let whole = call(&env, "session.fork", json!({}))
        .await
        .expect("fork all");
    let whole_id = whole["id"].as_str().expect("id").to_string();
    assert_eq!(messages(&env, &whole_id).await.len(), 4);
    let (code, _, _) =
        rpc_error(call(&env, "session.fork", json!({"messageId": "msg_nope"})).await);
    assert_eq!(code, NOT_FOUND);

    // The fork is a session of its own: it runs and its history grows from the copy.
    env.push(vec![text("Third answer.")]);
    let accepted = env
        .client
        .call_raw(
            "session.prompt",
            json!({"sessionId": fork.id, "text": "go on", "model": agent_common::MODEL}),
        )
        .await
        .expect("prompt the fork");
    let mut fork_stream = env
        .client
        .subscribe(&fork.id, 0)
        .await
        .expect("subscribe fork");
    let run_id = accepted["runId"].as_str().expect("run id").to_string();
    loop {
        let e = next_event(&mut fork_stream, 60).await;
        if matches!(&e.kind, EventKind::RunDone { run } if run.id == run_id) {
            break;
        }
    }
    assert_eq!(messages(&env, &fork.id).await.len(), 4);
}

/// The body of the newest request the model got.
fn last_request(env: &Env) -> String {
    env.sim
        .chat_requests()
        .last()
        .map(|r| r.body.to_string())
        .expect("a request")
}

/// The next `changes.undone`/`changes.redone` event's message ids.
async fn next_marks(stream: &mut EventStream) -> (bool, Vec<String>) {
    loop {
        match next_event(stream, 30).await.kind {
            EventKind::ChangesUndone { message_ids, .. } => return (true, message_ids),
            EventKind::ChangesRedone { message_ids, .. } => return (false, message_ids),
            _ => {}
        }
    }
}

/// The runs whose messages `session.messages` marks undone, each once, in order; every message
/// of a run is marked alike.
async fn undone_runs(client: &totem_client::Client, session: &str) -> Vec<String> {
    let page = client
        .call_raw(
            "session.messages",
            json!({"sessionId": session, "limit": 100}),
        )
        .await
        .expect("session.messages");
    page["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .fold(Vec::new(), |mut marked: Vec<(String, bool)>, m| {
            let run = m["runId"].as_str().expect("runId").to_string();
            let undone = m["undone"].as_bool().unwrap_or(false);
            match marked.last() {
                Some((last, was)) if *last == run => assert_eq!(*was, undone, "{m}"),
                _ => marked.push((run, undone)),
            }
            marked
        })
        .into_iter()
        .filter_map(|(run, undone)| undone.then_some(run))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_rewinds_the_conversation_the_model_sees_and_redo_restores_it() {
    let env = Env::start().await;
    let mut stream = env.subscribe().await;
    // A second client follows the session: it sees the same marks.
    let other = env.daemon.client().await;
    let mut watching = other.subscribe(&env.session, 0).await.expect("subscribe");

    env.push(vec![text("The answer is 42.")]);
    let chat = env.prompt("what is the answer", json!({})).await;
    follow(&env, &mut stream, &chat, Answer::Once).await;
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "math.js", "content": "exports.add = (a, b) => a + b;\n"}),
    )]);
    env.push(vec![text("Wrote math.js.")]);
    let edit = env.prompt("write math.js", json!({})).await;
    follow(&env, &mut stream, &edit, Answer::Once).await;
    assert!(env.file("math.js").contains("exports.add"));

    let undone = call(&env, "session.undo", json!({})).await.expect("undo");
    assert_eq!(undone["runId"], edit.as_str());
    assert_eq!(undone["prompt"], "write math.js");
    assert!(!env.project.path().join("math.js").exists());
    let (was_undo, ids) = next_marks(&mut watching).await;
    assert!(was_undo);
    assert_eq!(
        ids.len(),
        3,
        "the prompt, the call with its result, the answer: {ids:?}"
    );
    assert_eq!(undone_runs(&other, &env.session).await, vec![edit.clone()]);

    // Redo brings the run back: its file and its messages.
    call(&env, "session.redo", json!({})).await.expect("redo");
    assert!(env.file("math.js").contains("exports.add"));
    let (was_undo, redone) = next_marks(&mut watching).await;
    assert!(!was_undo);
    assert_eq!(redone, ids);
    assert!(undone_runs(&other, &env.session).await.is_empty());
    env.push(vec![text("Still here.")]);
    let after_redo = env.prompt("is it there", json!({})).await;
    follow(&env, &mut stream, &after_redo, Answer::Once).await;
    let request = last_request(&env);
    assert!(request.contains("write math.js"), "{request}");
    assert!(
        request.contains("exports.add"),
        "the call is back: {request}"
    );

    // Undo walks back run by run: the question just asked, then the edit. The next request
    // has neither the edit nor its result; the first exchange stays.
    let undone = call(&env, "session.undo", json!({})).await.expect("undo");
    assert_eq!(undone["runId"], after_redo.as_str());
    let undone = call(&env, "session.undo", json!({})).await.expect("undo");
    assert_eq!(undone["runId"], edit.as_str());
    env.push(vec![text("Nothing was written.")]);
    let next = env.prompt("what did you write", json!({})).await;
    follow(&env, &mut stream, &next, Answer::Once).await;
    let request = last_request(&env);
    assert!(request.contains("what is the answer"), "{request}");
    assert!(request.contains("The answer is 42."), "{request}");
    for gone in [
        "write math.js",
        "exports.add",
        "Wrote math.js",
        "is it there",
    ] {
        assert!(!request.contains(gone), "`{gone}` is undone: {request}");
    }
    // The undone runs stay undone after a new run; the store keeps their messages.
    assert_eq!(
        undone_runs(&other, &env.session).await,
        vec![edit, after_redo]
    );
}

/// The model's folder `src` swapped for a link to a folder outside the project.
fn swap_for_link(root: &Path, outside: &Path) {
    std::fs::rename(root.join("src"), root.join("src.moved")).expect("move src");
    std::os::unix::fs::symlink(outside, root.join("src")).expect("link src");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_and_redo_never_write_through_a_folder_swapped_for_a_link_outside_even_forced() {
    let env = Env::start().await;
    let root = env.root();
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("a.txt"), "OUTSIDE a\n").expect("outside a");
    std::fs::write(outside.path().join("b.txt"), "OUTSIDE b\n").expect("outside b");
    agent_common::write_file(&root, "src/b.txt", "inside b\n");
    agent_common::write_file(&root, "top.txt", "top\n");
    let mut stream = env.subscribe().await;
    run(
        &env,
        &mut stream,
        vec![
            vec![tool(
                "c1",
                "write",
                json!({"path": "src/a.txt", "content": "made by the run\n"}),
            )],
            vec![tool(
                "c2",
                "edit",
                json!({"path": "src/b.txt", "oldString": "inside", "newString": "edited"}),
            )],
            vec![tool(
                "c3",
                "edit",
                json!({"path": "top.txt", "oldString": "top", "newString": "top edited"}),
            )],
        ],
    )
    .await;
    swap_for_link(&root, outside.path());
    let outside_before = tree(outside.path());

    // Undo would delete src/a.txt and write src/b.txt: both through the link. Refused, forced or
    // not, naming the paths; nothing at all is written (top.txt stays edited).
    for force in [false, true] {
        let (code, message, _) =
            rpc_error(call(&env, "session.undo", json!({"force": force})).await);
        assert_eq!(
            code, INVALID_PATH,
            "force cannot help, so it is no conflict"
        );
        assert!(
            message.contains("src/a.txt")
                && message.contains("src/b.txt")
                && message.contains("outside the project")
                && message.contains("even with force"),
            "{message}"
        );
        assert_eq!(tree(outside.path()), outside_before, "force {force}");
        assert_eq!(env.file("top.txt"), "top edited\n");
    }

    // With the folder back, undo works; then the swap again, and redo is refused the same way.
    std::fs::remove_file(root.join("src")).expect("unlink");
    std::fs::rename(root.join("src.moved"), root.join("src")).expect("move back");
    call(&env, "session.undo", json!({}))
        .await
        .expect("undo with the folder back");
    assert!(!root.join("src/a.txt").exists());
    assert_eq!(env.file("src/b.txt"), "inside b\n");
    assert_eq!(env.file("top.txt"), "top\n");
    swap_for_link(&root, outside.path());
    let (_, message, _) = rpc_error(call(&env, "session.redo", json!({"force": true})).await);
    assert!(message.contains("outside the project"), "{message}");
    assert_eq!(tree(outside.path()), outside_before);
    assert_eq!(env.file("top.txt"), "top\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_shows_links_and_pipes_a_command_made_without_following_or_reading_them() {
    let env = Env::start().await;
    let root = env.root();
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret.txt"), "OUTSIDE-SECRET\n").expect("secret");
    agent_common::write_file(&root, "keep.txt", "keep\n");
    let target = outside.path().join("secret.txt");
    let mut stream = env.subscribe().await;
    run(
        &env,
        &mut stream,
        vec![vec![tool(
            "c1",
            "bash",
            json!({"command": format!("ln -s {} link.txt && mkfifo pipe && echo x > keep.txt", target.display())}),
        )]],
    )
    .await;
    let started = std::time::Instant::now();
    let diff = call(&env, "session.diff", json!({}))
        .await
        .expect("session.diff");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let text = diff["diff"].as_str().expect("diff text");
    assert!(
        text.contains(&format!("+symbolic link to {}", target.display())),
        "{text}"
    );
    assert!(text.contains("+named pipe (FIFO), not read"), "{text}");
    assert!(!text.contains("OUTSIDE-SECRET"), "{text}");
    let paths: Vec<&str> = diff["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert_eq!(paths, ["keep.txt", "link.txt", "pipe"]);

    // Undo removes the link and the pipe (never what the link points to); redo makes them again.
    call(&env, "session.undo", json!({})).await.expect("undo");
    assert!(std::fs::symlink_metadata(root.join("link.txt")).is_err());
    assert!(std::fs::symlink_metadata(root.join("pipe")).is_err());
    assert_eq!(
        std::fs::read_to_string(&target).expect("secret"),
        "OUTSIDE-SECRET\n"
    );
    call(&env, "session.redo", json!({})).await.expect("redo");
    assert_eq!(
        std::fs::read_link(root.join("link.txt")).expect("link"),
        target
    );
    use std::os::unix::fs::FileTypeExt as _;
    assert!(
        std::fs::symlink_metadata(root.join("pipe"))
            .expect("pipe")
            .file_type()
            .is_fifo()
    );
}
