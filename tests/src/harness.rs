//! Starting the real `totemd` for a test: a temporary home, its own socket, a client, and ways to
//! stop it gently (SIGTERM) or not (SIGKILL).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use totem_client::Client;
use totem_protocol::ClientCapabilities;

/// The workspace's target folder, found from this test executable (target/debug/deps/…).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let mut dir = exe.parent().expect("exe folder").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// Path of a workspace binary (`totemd`, `totem`), rebuilt once per test process so a stale one
/// is never tested. `cargo test` builds a package's own binaries only, and these belong to other
/// packages. The command is the one `.ci/run` runs first, so there it is a no-op (another package
/// selection could unify features differently and rebuild). `TOTEM_TESTS_NO_BUILD=1` skips it.
/// `TOTEM_TESTS_BIN_DIR=FOLDER` takes the binaries from that folder instead, unbuilt (an older
/// build, to measure the same program against the code before a change).
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    let folder = other_bin_dir();
    BUILT.get_or_init(|| {
        if folder.is_some() || std::env::var_os("TOTEM_TESTS_NO_BUILD").is_some() {
            return;
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-q", "--workspace", "--bins"]);
        if target_dir().ends_with("release") {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo build");
        assert!(status.success(), "building totemd and totem failed");
    });
    let path = folder.unwrap_or_else(target_dir).join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace`",
        path.display()
    );
    path
}

/// The folder `TOTEM_TESTS_BIN_DIR` names, when the binaries are to come from another build.
pub fn other_bin_dir() -> Option<PathBuf> {
    std::env::var_os("TOTEM_TESTS_BIN_DIR").map(PathBuf::from)
}

/// Resident memory of a process in KiB (VmRSS from /proc; 0 when it cannot be read).
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// A figure in KiB from `/proc/PID/status` (`VmRSS`, `RssAnon`, `RssFile`...), 0 when unknown.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `HOST:PORT` of a port on 127.0.0.1 that is bound for this test process's life but never
/// listens, so a connection to it is refused at once. Every daemon and `totem` a test starts gets
/// it as `OLLAMA_HOST`: the implicit local Ollama (no provider configured) is never whatever
/// happens to listen on 127.0.0.1:11434 on the machine running the tests.
pub fn closed_ollama_host() -> &'static str {
    static HOST: std::sync::OnceLock<(String, Option<std::os::fd::OwnedFd>)> =
        std::sync::OnceLock::new();
    &HOST
        .get_or_init(|| {
            use nix::sys::socket::{
                AddressFamily, SockFlag, SockType, SockaddrIn, bind, getsockname, socket,
            };
            let fd = socket(
                AddressFamily::Inet,
                SockType::Stream,
                SockFlag::SOCK_CLOEXEC,
                None,
            )
            .expect("a socket");
            bind(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                &SockaddrIn::new(127, 0, 0, 1, 0),
            )
            .expect("bind a free port");
            let address: SockaddrIn =
                getsockname(std::os::fd::AsRawFd::as_raw_fd(&fd)).expect("its port");
            (format!("127.0.0.1:{}", address.port()), Some(fd))
        })
        .0
}

/// A running daemon in its own temporary home.
pub struct TestDaemon {
    pub home: PathBuf,
    pub socket: PathBuf,
    child: Option<Child>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDaemon {
    /// Starts totemd in a new temporary home and waits until it answers.
    pub fn start() -> TestDaemon {
        let dir = tempfile::tempdir().expect("temp home");
        let mut daemon = TestDaemon::start_in(dir.path());
        daemon._dir = Some(dir);
        daemon
    }

    /// [`TestDaemon::start`] with variables added to the daemon's environment.
    pub fn start_with_env(env: &[(&str, &str)]) -> TestDaemon {
        let dir = tempfile::tempdir().expect("temp home");
        let socket = dir.path().join("totemd.sock");
        let mut command = spawn_command(dir.path(), &socket);
        command.envs(env.iter().copied());
        let child = command.spawn().expect("spawn totemd");
        let mut daemon = TestDaemon {
            home: dir.path().to_path_buf(),
            socket,
            child: Some(child),
            _dir: Some(dir),
        };
        daemon.wait_ready();
        daemon
    }

    /// Starts totemd on an existing home (for restarts); the caller keeps the folder alive.
    pub fn start_in(home: &Path) -> TestDaemon {
        TestDaemon::start_wrapped(home, &home.join("totemd.sock"), &[])
    }

    /// Starts totemd on `home` and `socket` through a wrapper command (`prlimit …`, `unshare …`;
    /// none when empty) that ends by running the command line appended to it; the wrapper must
    /// exec it, so the child is totemd itself.
    pub fn start_wrapped(home: &Path, socket: &Path, wrapper: &[&str]) -> TestDaemon {
        let child = spawn_wrapped(wrapper, home, socket).expect("spawn totemd");
        let mut daemon = TestDaemon {
            home: home.to_path_buf(),
            socket: socket.to_path_buf(),
            child: Some(child),
            _dir: None,
        };
        daemon.wait_ready();
        daemon
    }

    fn wait_ready(&mut self) {
        // 60 s, not 20: a restart after a kill puts every queued prompt into its conversation
        // before the socket answers (about 20 ms each); 395 of them took 8 s on an idle machine
        // and over 20 s beside the other daemon tests in CI.
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if std::os::unix::net::UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!(
                    "totemd exited before it was ready: {status}; logs in {}",
                    self.home.join("logs").display()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!(
            "totemd did not answer on {} within 60 s",
            self.socket.display()
        );
    }

    /// A connected, initialized client that can answer permission questions.
    pub async fn client(&self) -> Client {
        let (client, _) = Client::connect(
            &self.socket,
            "totem-tests",
            ClientCapabilities { permissions: true },
        )
        .await
        .expect("connect to totemd");
        client
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// SIGKILL, then reap.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait for a clean exit; returns whether it exited successfully.
    pub fn terminate(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Spawns totemd on `home` and `socket` without waiting.
pub fn spawn(home: &Path, socket: &Path) -> std::io::Result<Child> {
    spawn_wrapped(&[], home, socket)
}

/// Spawns totemd on `home` and `socket` through `wrapper` (see [`TestDaemon::start_wrapped`]).
pub fn spawn_wrapped(wrapper: &[&str], home: &Path, socket: &Path) -> std::io::Result<Child> {
    spawn_command_wrapped(wrapper, home, socket).spawn()
}

fn spawn_command(home: &Path, socket: &Path) -> Command {
    spawn_command_wrapped(&[], home, socket)
}

fn spawn_command_wrapped(wrapper: &[&str], home: &Path, socket: &Path) -> Command {
    let totemd = binary("totemd");
    let mut command = match wrapper.split_first() {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg(&totemd);
            command
        }
        None => Command::new(&totemd),
    };
    command
        .arg("--home")
        .arg(home)
        .arg("--socket")
        .arg(socket)
        .env_remove("TOTEM_HOME")
        .env("OLLAMA_HOST", closed_ollama_host())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Waits for the first streamed text of a `totem run --json` child (its stdout piped), sends it
/// `signal`, and returns its output (stdout: every line it wrote) and how long it took to exit
/// after the signal.
pub fn signal_after_first_delta(
    mut child: Child,
    signal: nix::sys::signal::Signal,
) -> (std::process::Output, Duration) {
    use std::io::{BufRead, Read};
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout piped"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let read = stdout.read_line(&mut line).expect("read totem's output");
        assert!(read > 0, "totem run ended before streaming: {seen}");
        seen.push_str(&line);
        if line.contains("\"part.delta\"") {
            break;
        }
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, signal).expect("signal totem");
    let sent = Instant::now();
    stdout.read_to_string(&mut seen).expect("read the rest");
    let mut out = child.wait_with_output().expect("wait totem");
    let took = sent.elapsed();
    out.stdout = seen.into_bytes();
    (out, took)
}
