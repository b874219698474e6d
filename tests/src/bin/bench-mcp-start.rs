//! What a run's MCP servers cost before the model is asked: the time from the prompt to the
//! model's first request with seven published stdio servers configured — filesystem, memory,
//! sequential-thinking and everything from npm, time, fetch and git from PyPI (the reference
//! servers, installed once into the test tools cache) — all allowed for every project, so no
//! question waits. Measured against each server alone and against none; the sum of the seven
//! alone is what starting them one after another costs.
//!
//! Each measurement is a fresh totemd and project (a project's servers are shared by its
//! sessions, so a second run in the same project would start nothing), stopped afterwards.
//!
//! Run: `cargo run -p totem-tests --bin bench-mcp-start [ROUNDS]` (3 rounds by default; the
//! median is printed).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use totem_tests::harness::TestDaemon;
use totem_tests::setup::{MODEL, SimAgent, configure_servers, plain_project};
use totem_tests::sim::{Reply, SimEvent};

const NPM: &[&str] = &[
    "@modelcontextprotocol/server-filesystem@2026.8.31",
    "@modelcontextprotocol/server-memory@2026.8.31",
    "@modelcontextprotocol/server-sequential-thinking@2026.8.31",
    "@modelcontextprotocol/server-everything@2026.8.31",
];
const PYPI: &[&str] = &[
    "mcp-server-time==2026.10.19",
    "mcp-server-fetch==2026.10.24",
    "mcp-server-git==2026.10.19",
];

/// The seven servers as `mcpServers` entries, by name; `project` is the folder filesystem serves.
fn servers(project: &Path, scratch: &Path) -> Vec<(&'static str, Value)> {
    let npm = totem_tests::external::npm_install("mcp-field", NPM).join("node_modules");
    let venv = totem_tests::external::python_venv("mcp-field", PYPI);
    let node = |package: &str, args: &[Value]| {
        let mut all = vec![json!(npm.join(package).join("dist/index.js"))];
        all.extend_from_slice(args);
        json!({"command": "node", "args": all, "allowAllProjects": true})
    };
    let python = |command: &str| json!({"command": venv.join(command), "allowAllProjects": true});
    let mut memory = node("@modelcontextprotocol/server-memory", &[]);
    memory["env"] = json!({"MEMORY_FILE_PATH": scratch.join("memory.jsonl")});
    vec![
        (
            "filesystem",
            node("@modelcontextprotocol/server-filesystem", &[json!(project)]),
        ),
        ("memory", memory),
        (
            "thinking",
            node("@modelcontextprotocol/server-sequential-thinking", &[]),
        ),
        (
            "everything",
            node("@modelcontextprotocol/server-everything", &[json!("stdio")]),
        ),
        ("time", python("mcp-server-time")),
        ("fetch", python("mcp-server-fetch")),
        ("git", python("mcp-server-git")),
    ]
}

/// Seconds from the prompt to the model's first request with `names` of the seven configured,
/// on a fresh totemd and project; fails unless every one of them offered its tools.
async fn measure(names: &[&str]) -> anyhow::Result<f64> {
    let project = plain_project();
    let daemon = TestDaemon::start();
    let all = servers(project.path(), &daemon.home);
    let chosen: serde_json::Map<String, Value> = all
        .into_iter()
        .filter(|(name, _)| names.contains(name))
        .map(|(name, entry)| (name.to_string(), entry))
        .collect();
    configure_servers(&daemon.home, Value::Object(chosen));
    let mut agent = SimAgent::start(daemon, project.path()).await;
    agent.sim.push(Reply::stream([SimEvent::text("Hello.")]));
    let started = Instant::now();
    agent
        .client
        .call_raw(
            "session.prompt",
            json!({"sessionId": agent.session, "text": "hello", "model": MODEL}),
        )
        .await?;
    let request = loop {
        if let Some(first) = agent.sim.chat_requests().into_iter().next() {
            break first;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(120),
            "no request within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let elapsed = started.elapsed().as_secs_f64();
    let tools = request.body["tools"].to_string();
    for name in names {
        anyhow::ensure!(
            tools.contains(&format!("\"{name}_")),
            "server `{name}` offered no tools (did it start?)"
        );
    }
    anyhow::ensure!(agent.daemon.terminate(), "totemd did not stop cleanly");
    Ok(elapsed)
}

/// The median of `rounds` measurements with `names`.
async fn median(names: &[&str], rounds: usize) -> anyhow::Result<f64> {
    let mut times = Vec::new();
    for _ in 0..rounds {
        times.push(measure(names).await?);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3)
        .max(1);
    let names: Vec<&str> = servers(Path::new("."), Path::new("."))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    // Installs, and warms the disk cache of every server once.
    measure(&names).await?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let none = median(&[], rounds).await?;
    println!("| servers | prompt → first request (s) | of which the servers (s) |");
    println!("|---|---:|---:|");
    println!("| none | {none:.2} | — |");
    let mut alone_sum = 0.0;
    for name in &names {
        let alone = median(&[name], rounds).await?;
        alone_sum += alone - none;
        println!("| {name} alone | {alone:.2} | {:.2} |", alone - none);
    }
    let together = median(&names, rounds).await?;
    println!(
        "| the seven one after another (sum of the above) | {:.2} | {alone_sum:.2} |",
        none + alone_sum
    );
    println!(
        "| the seven at once | {together:.2} | {:.2} |",
        together - none
    );
    let after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\nmedian of {rounds}; load average before {}, after {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        after
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(())
}
