//! Wall time of the `totem` command line: `totem --version` (median of 200 runs) and
//! `totem run "say hi"` against a running daemon (median of 20), in a temporary TOTEM_HOME.
//!
//! `cargo build --release -p totemd -p totem-cli && cargo run --release -p totem-tests --bin bench-cli`
//!
//! The run goes to the Ollama simulator (configured as provider `sim`, answering "hi" at once),
//! so the figure is Totem's own share: start, connect, create the session, subscribe, prompt,
//! the model request, streaming, exit. A daemon without `provider.add` yet is measured with no
//! provider, where the run fails at once (said in the output).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use totem_client::Client;
use totem_protocol::ClientCapabilities;
use totem_tests::sim::{Reply, Sim, SimEvent, SimKind};

const RUNS: usize = 20;

fn main() -> anyhow::Result<()> {
    let bin = binaries_dir()?;
    let totem = bin.join("totem");
    for name in ["totem", "totemd"] {
        if !bin.join(name).exists() {
            bail!(
                "{} is missing: build it with `cargo build --release -p totemd -p totem-cli`",
                bin.join(name).display()
            );
        }
    }
    let home = tempfile::tempdir().context("temp home")?;
    let project = tempfile::tempdir().context("temp project")?;
    let totem_cmd = |args: &[&str]| {
        let mut c = Command::new(&totem);
        c.args(args)
            .current_dir(project.path())
            .env("TOTEM_HOME", home.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };

    let version = time_runs(200, || totem_cmd(&["--version"]).status().map(|_| ()))?;
    println!("binaries: {}", bin.display());
    println!(
        "totem --version            median {:>8.2} ms  (min {:.2}, p90 {:.2}; 200 runs)",
        ms(version.median),
        ms(version.min),
        ms(version.p90)
    );

    let start = Instant::now();
    let status = totem_cmd(&["daemon", "start"]).status()?;
    if !status.success() {
        bail!(
            "`totem daemon start` failed; see {}/logs",
            home.path().display()
        );
    }
    println!("totem daemon start (cold)  {:>8.2} ms", ms(start.elapsed()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let sim = runtime.block_on(Sim::start(SimKind::Ollama));
    let socket = home.path().join("run").join("totemd.sock");
    let with_sim = runtime.block_on(async {
        let (client, init) =
            Client::connect(&socket, "bench-cli", ClientCapabilities::default()).await?;
        if !init
            .capabilities
            .methods
            .iter()
            .any(|m| m == "provider.add")
        {
            return Ok::<_, anyhow::Error>(false);
        }
        client
            .call_raw(
                "provider.add",
                json!({"name": "sim", "kind": "ollama", "url": sim.url(),
                       "defaultModel": "llama3.2:latest", "maxRetries": 0}),
            )
            .await?;
        Ok(true)
    })?;
    let args: &[&str] = match with_sim {
        true => &["run", "--model", "sim/llama3.2:latest", "say hi"],
        false => &["run", "say hi"],
    };
    let queue_reply = || {
        if with_sim {
            let _guard = runtime.enter();
            sim.push(Reply::stream([
                SimEvent::text("hi"),
                SimEvent::usage(10, 1),
            ]));
        }
    };
    // One warm-up run creates the project.
    queue_reply();
    let warm = totem_cmd(args).status()?;
    if with_sim && !warm.success() {
        bail!(
            "`totem run` against the simulator failed ({warm}); see {}/logs",
            home.path().display()
        );
    }
    let run = time_runs(RUNS, || {
        queue_reply();
        totem_cmd(args).status().map(|_| ())
    })?;
    println!(
        "totem run \"say hi\"         median {:>8.2} ms  (min {:.2}, p90 {:.2}; {RUNS} runs, running daemon, {})",
        ms(run.median),
        ms(run.min),
        ms(run.p90),
        match with_sim {
            true => "Ollama simulator answering at once",
            false => "no provider: the run fails at once",
        }
    );
    totem_cmd(&["daemon", "stop"]).status()?;
    Ok(())
}

struct Timing {
    median: Duration,
    min: Duration,
    p90: Duration,
}

fn time_runs(n: usize, mut f: impl FnMut() -> std::io::Result<()>) -> anyhow::Result<Timing> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(Timing {
        median: times[n / 2],
        min: times[0],
        p90: times[n * 9 / 10],
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The folder of this executable (target/release or target/debug), where cargo put the others.
fn binaries_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    exe.parent()
        .map(Path::to_path_buf)
        .context("this executable has no folder")
}
