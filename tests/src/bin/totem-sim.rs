//! Runs one provider simulator from a JSON script, for manual runs and for people writing
//! clients. The format is in tests/SIM.md.
//!
//! Usage: `totem-sim SCRIPT.json`

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;
use totem_tests::sim::{Reply, Sim, SimKind, SimModel};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScriptFile {
    kind: SimKind,
    #[serde(default)]
    port: u16,
    #[serde(default)]
    models: Option<Vec<SimModel>>,
    #[serde(default)]
    ollama_default_ctx: Option<u64>,
    #[serde(default = "yes")]
    log_requests: bool,
    /// Start over with the first reply once all were used.
    #[serde(default)]
    repeat: bool,
    replies: Vec<Reply>,
}

fn yes() -> bool {
    true
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .context("usage: totem-sim SCRIPT.json (format: tests/SIM.md)")?;
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    let script: ScriptFile =
        serde_json::from_str(&text).with_context(|| format!("{path} is not a valid script"))?;

    let sim = Sim::start_on(script.kind, script.port)
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{}", script.port))?;
    if let Some(models) = script.models {
        sim.set_models(models);
    }
    if let Some(ctx) = script.ollama_default_ctx {
        sim.set_ollama_default_ctx(ctx);
    }
    sim.set_log_requests(script.log_requests);
    for reply in &script.replies {
        sim.push(reply.clone());
    }
    println!("totem-sim: {:?} listening on {}", script.kind, sim.url());
    std::io::stdout().flush()?;

    let refill = async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if script.repeat && sim.pending() == 0 {
                for reply in &script.replies {
                    sim.push(reply.clone());
                }
            }
        }
    };
    tokio::select! {
        _ = refill => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}
