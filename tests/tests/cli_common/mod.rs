//! Running the real `totem` binary for a test: its own temporary TOTEM_HOME and project folder,
//! and the daemon it starts stopped (or killed) when the test ends.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A workspace binary, built once per test process (see [`totem_tests::harness::binary`]).
pub fn binary(name: &str) -> PathBuf {
    totem_tests::harness::binary(name)
}

/// A temporary Totem home and project folder, and `totem` commands run in them.
pub struct Cli {
    pub home: tempfile::TempDir,
    pub project: tempfile::TempDir,
}

impl Cli {
    pub fn new() -> Cli {
        Cli {
            home: tempfile::tempdir().expect("temp home"),
            project: tempfile::tempdir().expect("temp project"),
        }
    }

    pub fn home(&self) -> &Path {
        self.home.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.home().join("run").join("totemd.sock")
    }

    /// `totem ARGS` in the project folder, with this home and no colours.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut command = Command::new(binary("totem"));
        command
            .args(args)
            .current_dir(self.project.path())
            .env("TOTEM_HOME", self.home())
            .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
            .env("NO_COLOR", "1")
            .env_remove("TOTEM_LOG");
        command
    }

    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run totem")
    }

    /// `totem ARGS` with `input` on stdin.
    pub fn run_with_input(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn totem");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("wait totem")
    }

    /// The pid the daemon wrote into the home's lock file.
    pub fn daemon_pid(&self) -> Option<i32> {
        let note = std::fs::read_to_string(self.home().join("totemd.lock")).ok()?;
        note.strip_prefix("pid ")?
            .split(',')
            .next()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for Cli {
    /// The daemon `totem` started is detached: stop it, and kill it if it does not go.
    fn drop(&mut self) {
        if !self.socket().exists() {
            return;
        }
        let pid = self.daemon_pid();
        let _ = self
            .command(["daemon", "stop"])
            .stdin(Stdio::null())
            .output();
        let deadline = Instant::now() + Duration::from_secs(5);
        while let Some(pid) = pid {
            let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
            if !alive {
                break;
            }
            if Instant::now() > deadline {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Fails with the command's output when its exit code is not `code`.
pub fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "exit status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout(output),
        stderr(output)
    );
}

/// Waits for `needle`; when it does not come, fails with what the terminal showed instead.
pub fn expect_shown(
    session: &mut expectrl::session::OsSession,
    needle: &str,
    what: &str,
) -> expectrl::Captures {
    use expectrl::Expect;
    match session.expect(needle) {
        Ok(found) => found,
        Err(e) => {
            let mut pending = vec![0u8; 1 << 16];
            let n = session.try_read(&mut pending).unwrap_or(0);
            panic!(
                "{what}: {e:?}; the terminal showed instead: {:?}",
                String::from_utf8_lossy(&pending[..n])
            );
        }
    }
}

/// Presses Ctrl-D until `needle` shows, as a person presses it again when the first one went
/// unnoticed: rustyline can swallow a key typed while it redraws its prompt (it asks the terminal
/// for the cursor position then), which a test that types immediately hits under load.
pub fn ctrl_d_until<N: expectrl::Needle>(
    session: &mut expectrl::session::OsSession,
    needle: N,
) -> expectrl::Captures {
    use expectrl::Expect;
    session.set_expect_timeout(Some(Duration::from_secs(5)));
    let mut last = None;
    for _ in 0..6 {
        session
            .send(expectrl::ControlCode::EndOfTransmission)
            .expect("Ctrl-D");
        match session.expect(&needle) {
            Ok(found) => {
                session.set_expect_timeout(Some(Duration::from_secs(20)));
                return found;
            }
            Err(e) => last = Some(e),
        }
    }
    panic!("Ctrl-D pressed 6 times without seeing what leaving prints: {last:?}");
}

/// A validator for one `SessionEvent`, built from the checked-in schema client authors use.
pub fn event_validator() -> jsonschema::Validator {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../protocol/schema/protocol.json"
    );
    let text = std::fs::read_to_string(path).expect("protocol/schema/protocol.json");
    let protocol: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
    let schema = serde_json::json!({
        "$schema": protocol["$schema"],
        "$defs": protocol["$defs"],
        "$ref": "#/$defs/SessionEvent",
    });
    jsonschema::validator_for(&schema).expect("the schema compiles")
}

/// The lines of `totem run --json`, each checked against the schema.
pub fn json_events(out: &std::process::Output) -> Vec<serde_json::Value> {
    let validator = event_validator();
    stdout(out)
        .lines()
        .map(|line| {
            // Every line is one event of the protocol: valid against the published schema, and
            // readable as the protocol crate's type.
            let event: serde_json::Value = serde_json::from_str(line).expect("JSON line");
            let errors: Vec<String> = validator
                .iter_errors(&event)
                .map(|e| e.to_string())
                .collect();
            assert!(
                errors.is_empty(),
                "not a schema-valid event ({errors:?}): {line}"
            );
            serde_json::from_str::<totem_protocol::SessionEvent>(line)
                .unwrap_or_else(|e| panic!("not a SessionEvent ({e}): {line}"));
            event
        })
        .collect()
}

/// A runtime with the Ollama simulator on it, and `cli`'s settings.json naming the simulator as
/// the only provider and its model as the default (for clients that start the daemon themselves).
pub fn sim_settings(cli: &Cli) -> (tokio::runtime::Runtime, totem_tests::sim::Sim) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let sim = runtime.block_on(totem_tests::sim::Sim::start(
        totem_tests::sim::SimKind::Ollama,
    ));
    let settings = serde_json::json!({
        "defaultModel": totem_tests::setup::MODEL,
        "providers": [totem_tests::setup::sim_provider(&sim)],
    });
    std::fs::write(cli.home().join("settings.json"), settings.to_string()).expect("settings.json");
    (runtime, sim)
}

/// An editor test's home and project: the simulator's settings and `math.js` holding `a` and `b`.
pub fn editor_project() -> (Cli, tokio::runtime::Runtime, totem_tests::sim::Sim) {
    let cli = Cli::new();
    let (runtime, sim) = sim_settings(&cli);
    std::fs::write(
        cli.project.path().join("math.js"),
        "const a = 1;\nconst b = 2;\n",
    )
    .expect("math.js");
    (cli, runtime, sim)
}

/// `totem` against a model: a home whose settings name the Ollama simulator as provider `sim`
/// (its model the default), the daemon started, and the runtime the simulator runs on.
pub struct SimCli {
    pub cli: Cli,
    pub sim: totem_tests::sim::Sim,
    pub runtime: tokio::runtime::Runtime,
}

impl SimCli {
    pub fn start() -> SimCli {
        let cli = Cli::new();
        let (runtime, sim) = sim_settings(&cli);
        assert_exit(&cli.run(["daemon", "start"]), 0);
        SimCli { cli, sim, runtime }
    }

    /// Queues a streamed answer, its events `delay_ms` apart.
    pub fn push(&self, events: Vec<totem_tests::sim::SimEvent>, delay_ms: u64) {
        self.push_script(totem_tests::sim::Script {
            delay_ms,
            ..totem_tests::sim::Script::new(events)
        });
    }

    /// Queues an answer whose first chunk comes only after `first_delay_ms`, as from a model
    /// still loading: what a terminal shows while it waits does not race the first token.
    pub fn push_late(&self, events: Vec<totem_tests::sim::SimEvent>, first_delay_ms: u64) {
        self.push_script(totem_tests::sim::Script {
            first_delay_ms,
            ..totem_tests::sim::Script::new(events)
        });
    }

    fn push_script(&self, script: totem_tests::sim::Script) {
        let _guard = self.runtime.enter();
        self.sim.push(totem_tests::sim::Reply::Stream(script));
    }

    /// A client of the daemon `totem` started.
    pub async fn client(&self) -> totem_client::Client {
        let (client, _) = totem_client::Client::connect(
            &self.cli.socket(),
            "cli-test",
            totem_protocol::ClientCapabilities::default(),
        )
        .await
        .expect("connect");
        client
    }
}

/// A TCP port on 127.0.0.1 free at the moment, for a server a test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// Waits (up to 60 s) until something listens on `port` of 127.0.0.1.
pub fn wait_until_listening(port: u16) {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "nothing listened on port {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The session ids `totem sessions --json` lists, newest first.
pub fn session_ids(cli: &Cli) -> Vec<String> {
    let out = cli.run(["sessions", "--json"]);
    assert_exit(&out, 0);
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).expect("page JSON");
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|s| s["id"].as_str().expect("id").to_string())
        .collect()
}
