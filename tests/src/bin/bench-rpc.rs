//! RPC latency, daemon start-up, memory and `totem --version`, against the real binaries.
//!
//! `cargo build --release -p totemd -p totem-cli && cargo run --release -p totem-tests --bin bench-rpc`
//!
//! Prints p50/p99 of 10,000 sequential `daemon.status` and `session.get` calls from one client and
//! from 8 concurrent clients (plain blocking sockets, so the client adds as little as possible),
//! RSS idle on an empty store and after 1,000 sessions, the time from spawning `totemd` to the
//! socket answering `initialize`, and the wall time of `totem --version`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CALLS: usize = 10_000;

fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("bench path");
    let dir = exe.parent().expect("bench folder");
    let path = dir.join(name);
    if !path.exists() {
        eprintln!(
            "{} is missing: build it first with `cargo build --release -p totemd -p totem-cli`",
            path.display()
        );
        std::process::exit(2);
    }
    path
}

struct Line {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    buf: String,
    next_id: u64,
}

impl Line {
    fn connect(socket: &Path) -> Line {
        let stream = UnixStream::connect(socket).expect("connect");
        let writer = stream.try_clone().expect("clone socket");
        let mut line = Line {
            reader: BufReader::new(stream),
            writer,
            buf: String::new(),
            next_id: 1,
        };
        line.call(
            "initialize",
            r#"{"protocolVersion":1,"client":{"name":"bench","version":"0"}}"#,
        );
        line
    }

    fn call(&mut self, method: &str, params: &str) -> String {
        let id = self.next_id;
        self.next_id += 1;
        let msg = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
        self.writer.write_all(msg.as_bytes()).expect("write");
        self.writer.write_all(b"\n").expect("write");
        self.buf.clear();
        self.reader.read_line(&mut self.buf).expect("read");
        assert!(
            !self.buf.contains("\"error\""),
            "{method} failed: {}",
            self.buf
        );
        self.buf.clone()
    }
}

// The child is handed to the caller, which stops and reaps it (`stop`).
#[allow(clippy::zombie_processes)]
fn spawn(home: &Path) -> (Child, PathBuf, Duration) {
    let socket = home.join("totemd.sock");
    let start = Instant::now();
    let mut child = Command::new(bin("totemd"))
        .arg("--home")
        .arg(home)
        .arg("--socket")
        .arg(&socket)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn totemd");
    loop {
        if let Ok(stream) = UnixStream::connect(&socket) {
            drop(stream);
            let mut l = Line::connect(&socket);
            l.call("daemon.status", "{}");
            return (child, socket, start.elapsed());
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("totemd did not start");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn stop(mut child: Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{label:<44} p50 {:>7.1} µs   p99 {:>7.1} µs   (n={})",
        percentile(&samples, 0.50).as_secs_f64() * 1e6,
        percentile(&samples, 0.99).as_secs_f64() * 1e6,
        samples.len()
    );
}

fn timed_calls(socket: &Path, method: &str, params: &str, n: usize) -> Vec<Duration> {
    let mut line = Line::connect(socket);
    for _ in 0..200 {
        line.call(method, params);
    }
    (0..n)
        .map(|_| {
            let t = Instant::now();
            line.call(method, params);
            t.elapsed()
        })
        .collect()
}

fn concurrent(socket: &Path, method: &str, params: &str, clients: usize) -> Vec<Duration> {
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let socket = socket.to_path_buf();
            let method = method.to_string();
            let params = params.to_string();
            std::thread::spawn(move || timed_calls(&socket, &method, &params, CALLS))
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().expect("client thread"))
        .collect()
}

fn main() {
    println!(
        "# bench-rpc ({} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // Ready time: fresh home, then an existing store.
    let mut fresh = Vec::new();
    let mut existing = Vec::new();
    for _ in 0..10 {
        let home = tempfile::tempdir().expect("temp");
        let (child, _, t) = spawn(home.path());
        fresh.push(t);
        stop(child);
        let (child, _, t) = spawn(home.path());
        existing.push(t);
        stop(child);
    }
    fresh.sort();
    existing.sort();
    println!(
        "ready (spawn → initialize answered), new store   median {:>6.1} ms",
        fresh[fresh.len() / 2].as_secs_f64() * 1e3
    );
    println!(
        "ready (spawn → initialize answered), existing    median {:>6.1} ms",
        existing[existing.len() / 2].as_secs_f64() * 1e3
    );

    let home = tempfile::tempdir().expect("temp");
    let (child, socket, _) = spawn(home.path());
    std::thread::sleep(Duration::from_millis(1500));
    let idle = totem_tests::harness::rss_kib(child.id());
    println!(
        "RSS idle, empty store                           {:>6.1} MiB",
        idle as f64 / 1024.0
    );

    let project_dir = tempfile::tempdir().expect("temp");
    let mut line = Line::connect(&socket);
    let project = line.call(
        "project.open",
        &format!(r#"{{"path":"{}"}}"#, project_dir.path().display()),
    );
    let project_id =
        serde_json::from_str::<serde_json::Value>(&project).expect("json")["result"]["id"]
            .as_str()
            .expect("project id")
            .to_string();
    let mut session_id = String::new();
    for _ in 0..1000 {
        let s = line.call(
            "session.create",
            &format!(r#"{{"projectId":"{project_id}"}}"#),
        );
        session_id = serde_json::from_str::<serde_json::Value>(&s).expect("json")["result"]["id"]
            .as_str()
            .expect("session id")
            .to_string();
    }
    let get = format!(r#"{{"sessionId":"{session_id}"}}"#);
    // Let the store finish flushing the 1,000 writes: the figures are steady-state latency.
    std::thread::sleep(Duration::from_secs(3));

    report(
        "daemon.status, 1 client",
        timed_calls(&socket, "daemon.status", "{}", CALLS),
    );
    report(
        "session.get, 1 client",
        timed_calls(&socket, "session.get", &get, CALLS),
    );
    report(
        "daemon.status, 8 concurrent clients",
        concurrent(&socket, "daemon.status", "{}", 8),
    );
    report(
        "session.get, 8 concurrent clients",
        concurrent(&socket, "session.get", &get, 8),
    );
    std::thread::sleep(Duration::from_millis(500));
    println!(
        "RSS after 1,000 sessions                        {:>6.1} MiB",
        totem_tests::harness::rss_kib(child.id()) as f64 / 1024.0
    );
    stop(child);

    let totem = bin("totem");
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let status = Command::new(&totem)
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .expect("totem");
        times.push(t.elapsed());
        assert!(status.success());
    }
    times.sort();
    println!(
        "totem --version wall time                       median {:>6.2} ms   p99 {:>6.2} ms",
        times[100].as_secs_f64() * 1e3,
        times[197].as_secs_f64() * 1e3
    );
}
