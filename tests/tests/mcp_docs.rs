//! The Total.js docs server (`role: "docs"`), a small MCP server written with the official Python
//! SDK (tests/mcp/docs_server.py): in a Total.js 5 project, before the run's first step, Totem
//! searches it with the prompt, shows the titles (`docs.found`) and gives the pages to the model.
//! Its tools are reduced to the whitelist; when it fails or does not start, the run goes on with
//! the primer alone and nothing is said.

mod agent_common;

use std::path::PathBuf;

use agent_common::{Answer, Env, follow, last, text};
use serde_json::{Value, json};
use totem_protocol::{EventKind, SessionEvent};

fn docs_server(extra_args: &[&str]) -> Value {
    let bin = totem_tests::external::python_venv("mcp", &["mcp==2.3.0"]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/docs_server.py");
    let mut args = vec![json!(script)];
    args.extend(extra_args.iter().map(|a| json!(a)));
    json!({
        "command": bin.join("python"),
        "args": args,
        "role": "docs",
        "tools": ["search"],
        "allowAllProjects": true
    })
}

/// A Total.js 5 project with the docs server configured; runs one prompt and returns its events.
async fn run_with_docs(server: Value) -> (Env, Vec<SessionEvent>) {
    let project = tempfile::tempdir().expect("project folder");
    std::fs::write(
        project.path().join("package.json"),
        r#"{"name":"app","dependencies":{"total5":"^0.0.14"}}"#,
    )
    .expect("package.json");
    let env = Env::start_in(project).await;
    totem_tests::setup::configure_servers(&env.daemon.home, json!({ "docs": server }));

    env.push(vec![text("Here is the route.")]);
    let mut stream = env.subscribe().await;
    let run = env.prompt("add a route for users", json!({})).await;
    // Nothing to answer: a server allowed for every project starts without a question.
    let events = follow(&env, &mut stream, &run, Answer::None).await;
    assert!(
        matches!(last(&events), EventKind::RunDone { .. }),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::PermissionAsked { .. }))
    );
    (env, events)
}

fn first_request(env: &Env) -> Value {
    env.sim
        .chat_requests()
        .first()
        .expect("a model request")
        .body
        .clone()
}

fn docs_found(events: &[SessionEvent]) -> Vec<(String, Vec<String>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::DocsFound { server, titles, .. } => Some((server.clone(), titles.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_pages_reach_the_first_request_and_their_titles_the_user() {
    let (env, events) = run_with_docs(docs_server(&[])).await;
    assert_eq!(
        docs_found(&events),
        vec![(
            "docs".to_string(),
            vec![
                "Routing in Total.js 5".to_string(),
                "Actions with NEWACTION".to_string()
            ]
        )]
    );
    let request = first_request(&env);
    let prompt = request.to_string();
    assert!(prompt.contains("docs-marker-routing"), "{prompt}");
    assert!(prompt.contains("docs-marker-actions"), "{prompt}");
    assert!(
        !prompt.contains("docs-marker-config"),
        "a page that did not match"
    );
    // The whitelist: `search` reaches the model, `delete_pages` does not.
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
        .collect();
    assert!(tools.contains(&"docs_search"), "{tools:?}");
    assert!(!tools.iter().any(|t| t.contains("delete")), "{tools:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_search_falls_back_silently_to_the_primer() {
    let (env, events) = run_with_docs(docs_server(&["--broken"])).await;
    assert!(docs_found(&events).is_empty());
    assert!(
        !events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::Notice { level, .. } if *level != totem_protocol::NoticeLevel::Info)),
        "{events:?}"
    );
    let prompt = first_request(&env).to_string();
    assert!(!prompt.contains("docs-marker"), "{prompt}");
    assert!(!prompt.contains("documentation pages found"), "{prompt}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docs_server_that_does_not_start_is_not_mentioned() {
    let (env, events) = run_with_docs(docs_server(&["--crash"])).await;
    assert!(docs_found(&events).is_empty());
    assert!(
        !events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::Notice { text, .. } if text.contains("docs"))),
        "{events:?}"
    );
    let request = first_request(&env);
    assert!(!request.to_string().contains("docs-marker"));
}
