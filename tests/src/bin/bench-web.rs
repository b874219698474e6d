//! The web client in Debian's chromium (playwright-core), against the real totemd: first paint of
//! a small session, opening a 5,000-message session (imported with `session.import`) and
//! scrolling through it, the page's idle CPU and the bundle's size (`web/test/bench.mjs`).
//!
//! `cargo build --release -p totemd -p totem-cli && cargo run --release -p totem-tests --bin bench-web`

use serde_json::{Value, json};
use totem_tests::harness::TestDaemon;
use totem_tests::setup::open_project;

fn messages(pairs: usize, label: &str) -> Vec<Value> {
    (0..pairs)
        .flat_map(|i| {
            [
                json!({"role": "user", "parts": [{"type": "text", "text": format!("question {i}: how does part {i} work?")}]}),
                json!({"role": "assistant", "parts": [{"type": "text", "text": format!(
                    "{label} {i}\n\nIt works like this:\n\n- one\n- two\n\n```rust\nfn part_{i}() -> u32 {{ {i} }}\n```\n"
                )}]}),
            ]
        })
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[tokio::main]
async fn main() {
    let chromium = totem_tests::external::chromium();
    let tools = totem_tests::external::npm_install("playwright", &["playwright-core@1.65.1"]);
    let home = tempfile::tempdir().expect("home");
    std::fs::write(
        home.path().join("settings.json"),
        json!({"version": 1, "mcpServer": {"http": {"port": free_port()}}}).to_string(),
    )
    .expect("settings");
    let daemon = TestDaemon::start_in(home.path());
    let client = daemon.client().await;
    let project = tempfile::tempdir().expect("project");
    let project_id = open_project(&client, project.path()).await;
    let import = |title: &str, pairs: usize, label: &str| {
        client.call_raw(
            "session.import",
            json!({"projectId": project_id, "title": title, "messages": messages(pairs, label)}),
        )
    };
    let large = import("large", 2500, "answer").await.expect("import")["id"].clone();
    let small = import("small", 10, "small answer").await.expect("import")["id"].clone();
    let opened = client
        .call_raw("web.open", json!({}))
        .await
        .expect("web.open");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let status = std::process::Command::new("node")
        .arg(root.join("web/test/bench.mjs"))
        .env("TOTEM_E2E_URL", opened["url"].as_str().expect("url"))
        .env("TOTEM_E2E_TOOLS", &tools)
        .env("TOTEM_E2E_CHROMIUM", &chromium)
        .env("BENCH_SMALL", small.as_str().expect("id"))
        .env("BENCH_LARGE", large.as_str().expect("id"))
        .env("BENCH_DIST", root.join("web/dist"))
        .status()
        .expect("node");
    assert!(status.success(), "the benchmark page failed");
    drop(daemon);
}
