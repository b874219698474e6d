//! Prompt size: bytes (and estimated tokens, bytes / 4) of the fixed part of the first request —
//! system prompt plus tool definitions, plus the conventions reminder appended to each request in
//! Total.js 5 projects — in Build and Plan mode, for a plain project and a Total.js 5 project, with
//! a large window and with an 8k one (where the reduced tool set applies). Measured on the real request: totemd runs one prompt against the Ollama simulator,
//! which records the body it received.
//!
//! Targets for a plain project: Build ≤ 8,000 B, Plan ≤ 5,000 B. Reference: OpenCode 1.18 sends
//! 30,729 B (10 tools) before the user's first words.
//!
//! Run: `cargo run -p totem-tests --bin bench-prompt` (builds totemd first if it is missing).

use std::time::Duration;

use serde_json::{Value, json};
use totem_client::Client;
use totem_protocol::EventKind;
use totem_tests::harness::TestDaemon;
use totem_tests::sim::{Reply, Sim, SimEvent, SimKind};

const OPENCODE_BYTES: usize = 30_729;
/// The user's words of the measured request.
const PROMPT: &str = "hi";

struct Figure {
    project: &'static str,
    mode: &'static str,
    /// The model's window: the simulator's 128k, or 8k given in its settings (a small local
    /// model, offered the reduced tool set).
    window: &'static str,
    system: usize,
    tools: usize,
    tool_count: usize,
    /// Bytes added to the user's message of every request (the Total.js 5 reminder).
    reminder: usize,
}

async fn measure(
    client: &Client,
    sim: &Sim,
    project: &std::path::Path,
    mode: &str,
    model: &str,
) -> anyhow::Result<(usize, usize, usize, usize)> {
    let project_id = client
        .call_raw("project.open", json!({"path": project}))
        .await?["id"]
        .clone();
    let session = client
        .call_raw("session.create", json!({"projectId": project_id}))
        .await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    sim.push(Reply::stream([SimEvent::text("ok")]));
    let before = sim.chat_requests().len();
    let mut events = client.subscribe(&session, 0).await?;
    client
        .call_raw(
            "session.prompt",
            json!({"sessionId": session, "text": PROMPT, "mode": mode, "model": model}),
        )
        .await?;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("event stream ended"))??;
        match event.kind {
            EventKind::RunDone { .. } => break,
            EventKind::RunFailed { run } | EventKind::RunAborted { run } => {
                anyhow::bail!("the run did not finish: {:?}", run.error)
            }
            _ => {}
        }
    }
    let requests = sim.chat_requests();
    let body = &requests
        .get(before)
        .ok_or_else(|| anyhow::anyhow!("the simulator saw no request"))?
        .body;
    let system = body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "system"))
        .and_then(|m| m["content"].as_str())
        .map_or(0, str::len);
    let user = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .map_or(0, str::len);
    let tools = body.get("tools").cloned().unwrap_or(Value::Null);
    let tool_count = tools.as_array().map_or(0, Vec::len);
    Ok((
        system,
        serde_json::to_vec(&tools)?.len(),
        tool_count,
        user.saturating_sub(PROMPT.len()),
    ))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sim = Sim::start(SimKind::Ollama).await;
    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    client
        .call_raw(
            "provider.add",
            json!({"name": "sim", "kind": "ollama", "url": sim.url(), "maxRetries": 0}),
        )
        .await?;
    // The same simulator as a server whose model has an 8k window (given in its settings).
    client
        .call_raw(
            "provider.add",
            json!({"name": "small", "kind": "ollama", "url": sim.url(), "maxRetries": 0,
                   "models": {"llama3.2:latest": {"contextWindow": 8192}}}),
        )
        .await?;

    let plain = tempfile::tempdir()?;
    std::fs::write(plain.path().join("README.md"), "# demo\n")?;
    let totaljs = tempfile::tempdir()?;
    std::fs::write(
        totaljs.path().join("package.json"),
        r#"{"name": "app", "dependencies": {"total5": "latest"}}"#,
    )?;
    std::fs::write(
        totaljs.path().join("index.js"),
        "require('total5');\nTotal.run();\n",
    )?;

    let mut figures = Vec::new();
    for (window, model) in [
        ("128k", "sim/llama3.2:latest"),
        ("8k", "small/llama3.2:latest"),
    ] {
        for (project, path) in [("plain", plain.path()), ("Total.js 5", totaljs.path())] {
            for mode in ["build", "plan"] {
                let (system, tools, tool_count, reminder) =
                    measure(&client, &sim, path, mode, model).await?;
                figures.push(Figure {
                    project,
                    mode,
                    window,
                    system,
                    tools,
                    tool_count,
                    reminder,
                });
            }
        }
    }

    println!(
        "Fixed part of the first request (system prompt + tool definitions + the reminder added to each request), as sent to Ollama:\n"
    );
    println!(
        "{:<11} {:<6} {:>6} {:>9} {:>8} {:>6} {:>11} {:>9} {:>8}  target",
        "project",
        "mode",
        "window",
        "system B",
        "tools B",
        "tools",
        "reminder B",
        "total B",
        "≈tokens"
    );
    for f in &figures {
        let total = f.system + f.tools + f.reminder;
        let target = match (f.project, f.mode, f.window) {
            ("plain", "build", "128k") => format!("≤ 8,000 B {}", verdict(total <= 8000)),
            ("plain", "plan", "128k") => format!("≤ 5,000 B {}", verdict(total <= 5000)),
            _ => "-".to_string(),
        };
        println!(
            "{:<11} {:<6} {:>6} {:>9} {:>8} {:>6} {:>11} {:>9} {:>8}  {target}",
            f.project,
            f.mode,
            f.window,
            f.system,
            f.tools,
            f.tool_count,
            f.reminder,
            total,
            total.div_ceil(4)
        );
    }
    if let Some(build) = figures.first() {
        let total = build.system + build.tools + build.reminder;
        println!(
            "\nReference: OpenCode 1.18 sends {OPENCODE_BYTES} B before the user's first words; plain Build is {:.1} × smaller.",
            OPENCODE_BYTES as f64 / total.max(1) as f64
        );
    }
    let bpe = tiktoken_rs::cl100k_base()?;
    let primer = totem_totaljs::primer();
    let tokens = bpe.encode_ordinary(primer).len();
    println!(
        "Total.js 5 primer: {} B, {tokens} tokens (cl100k_base, a real BPE tokenizer); budget 1,200 {}.",
        primer.len(),
        verdict(tokens <= 1200)
    );
    let reminder = totem_totaljs::reminder();
    let tokens = bpe.encode_ordinary(reminder).len();
    println!(
        "Total.js 5 reminder after each prompt: {} B, {tokens} tokens (cl100k_base); budget 60 {}.",
        reminder.len(),
        verdict(tokens <= 60)
    );
    Ok(())
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "OVER" }
}
