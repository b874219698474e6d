//! Wall time of the `totem` command line: `totem --version` (median of 200 runs) and
//! `totem run "say hi"` against a running daemon (median of 20), in a temporary TOTEM_HOME.
//!
//! `cargo build --release -p totemd -p totem-cli && cargo run --release -p totem-tests --bin bench-cli`
//!
//! Until a provider is configured the run ends at once (failed: no model), so the second figure
//! is Totem's own share: start, connect, create the session, subscribe, prompt, follow, exit.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

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
    // One warm-up run creates the project.
    totem_cmd(&["run", "say hi"]).status()?;
    let run = time_runs(20, || totem_cmd(&["run", "say hi"]).status().map(|_| ()))?;
    println!(
        "totem run \"say hi\"         median {:>8.2} ms  (min {:.2}, p90 {:.2}; 20 runs, running daemon)",
        ms(run.median),
        ms(run.min),
        ms(run.p90)
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
