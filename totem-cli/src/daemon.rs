//! Finding, starting, stopping and connecting to `totemd`. Every command but `--version`,
//! `completions` and `daemon stop|status` starts the daemon when nothing answers on the socket.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use totem_client::{Client, ClientError};
use totem_protocol::{ClientCapabilities, NoParams, method};

use crate::exit::{Exit, Unreachable, UsageError};

/// How long `daemon start` waits for the socket to answer, and `daemon stop` for it to go away.
const WAIT: Duration = Duration::from_secs(10);
/// The file that catches totemd's own stderr (what it says before its log is open).
const STDERR_FILE: &str = "totemd.stderr.log";

/// Where the daemon lives: Totem's home and the socket, from `--socket` and the environment.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub home: PathBuf,
    pub socket: PathBuf,
    /// The socket came from `--socket`: pass it on to `totemd` and to reattach commands.
    pub socket_flag: bool,
}

/// The socket of the daemon running for `home`, when it is not the one this environment names:
/// its lock file says where it listens (started, say, with `XDG_RUNTIME_DIR` set, while this
/// command was started by an MCP host without it). Only a socket that answers counts.
fn running_socket(home: &Path, default_socket: &Path) -> Option<PathBuf> {
    let note = std::fs::read_to_string(home.join(totem_protocol::socket::LOCK_FILE)).ok()?;
    let socket = totem_protocol::socket::socket_in_lock_note(&note)?;
    (socket != default_socket && std::os::unix::net::UnixStream::connect(&socket).is_ok())
        .then_some(socket)
}

impl Endpoint {
    pub fn resolve(socket_flag: Option<PathBuf>) -> anyhow::Result<Endpoint> {
        let (home, default_socket) = totem_protocol::socket::from_env().ok_or_else(|| {
            UsageError("cannot find Totem's home: set TOTEM_HOME (or HOME) and try again".into())
        })?;
        Ok(match socket_flag {
            Some(socket) => Endpoint {
                home,
                socket,
                socket_flag: true,
            },
            None => Endpoint {
                socket: running_socket(&home, &default_socket).unwrap_or(default_socket),
                home,
                socket_flag: false,
            },
        })
    }

    pub fn logs(&self) -> PathBuf {
        self.home.join("logs")
    }

    /// The command that attaches to `session_id` again from another shell.
    pub fn reattach_command(&self, session_id: &str) -> String {
        match self.socket_flag {
            true => format!(
                "totem --socket {} attach --session {session_id}",
                self.socket.display()
            ),
            false => format!("totem attach --session {session_id}"),
        }
    }
}

/// An initialized connection and what the daemon offers on it.
#[derive(Clone)]
pub struct Connection {
    pub client: Client,
    methods: HashSet<String>,
}

impl Connection {
    /// The daemon serves this method (from `initialize`'s `capabilities.methods`).
    pub fn has(&self, method: &str) -> bool {
        self.methods.contains(method)
    }
}

/// Connects when something answers on the socket; `None` when nothing does (no socket, or a stale
/// one nobody listens on).
pub async fn connect(endpoint: &Endpoint) -> anyhow::Result<Option<Connection>> {
    connect_as(endpoint, false).await
}

/// Connects, telling the daemon whether this client shows permission questions to a person.
async fn connect_as(endpoint: &Endpoint, permissions: bool) -> anyhow::Result<Option<Connection>> {
    let capabilities = ClientCapabilities { permissions };
    match Client::connect(&endpoint.socket, "totem", capabilities).await {
        Ok((client, init)) => {
            // Told once, to the first client after the daemon started.
            for notice in &init.notices {
                eprintln!("totem: {notice}");
            }
            let methods = init.capabilities.methods.iter().cloned().collect();
            Ok(Some(Connection { client, methods }))
        }
        Err(ClientError::Connect { .. }) | Err(ClientError::Closed) => Ok(None),
        Err(e @ ClientError::Untrusted { .. }) => Err(Unreachable(e.to_string()).into()),
        Err(ClientError::Rpc { code, message, .. })
            if code == totem_protocol::ErrorCode::TOO_MANY_CONNECTIONS.0 =>
        {
            Err(Unreachable(message).into())
        }
        Err(ClientError::Rpc { message, .. }) => Err(Unreachable(format!(
            "totemd at {} refused this totem ({message}). Update totem and totemd together, then run `totem daemon stop` and try again",
            endpoint.socket.display()
        ))
        .into()),
        Err(e) => Err(Unreachable(format!(
            "cannot talk to totemd at {}: {e}. Check `totem daemon status`",
            endpoint.socket.display()
        ))
        .into()),
    }
}

/// Connects, starting the daemon first when nothing answers.
pub async fn connect_or_start(endpoint: &Endpoint) -> anyhow::Result<Connection> {
    match connect(endpoint).await? {
        Some(connection) => Ok(connection),
        None => start(endpoint).await,
    }
}

/// As [`connect_or_start`], for a client that answers permission questions (the REPL).
pub async fn connect_or_start_interactive(endpoint: &Endpoint) -> anyhow::Result<Connection> {
    if let Some(connection) = connect_as(endpoint, true).await? {
        return Ok(connection);
    }
    start(endpoint).await?;
    connect_as(endpoint, true).await?.ok_or_else(|| {
        Unreachable(format!(
            "totemd started but stopped answering on {}. Look at its log in {}",
            endpoint.socket.display(),
            endpoint.logs().display()
        ))
        .into()
    })
}

/// How long a totemd that `totem mcp` started stays without clients, runs or terminals before
/// it stops (`TOTEM_MCP_DAEMON_IDLE_SECS`; 0 keeps it running).
const HOST_DAEMON_IDLE: Duration = Duration::from_secs(300);

/// [`connect_or_start_interactive`] for `totem mcp`, and whether it had to start totemd (none
/// answered). A totemd it starts stops once unused for a while, so that it does not outlive the
/// host that started `totem mcp` (totemd `--exit-when-idle`).
pub async fn connect_or_start_noting(endpoint: &Endpoint) -> anyhow::Result<(Connection, bool)> {
    if let Some(connection) = connect_as(endpoint, true).await? {
        return Ok((connection, false));
    }
    let idle = std::env::var("TOTEM_MCP_DAEMON_IDLE_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(HOST_DAEMON_IDLE, Duration::from_secs);
    start_with(endpoint, Some(idle).filter(|d| !d.is_zero())).await?;
    let connection = connect_as(endpoint, true).await?.ok_or_else(|| {
        Unreachable(format!(
            "totemd started but stopped answering on {}. Look at its log in {}",
            endpoint.socket.display(),
            endpoint.logs().display()
        ))
    })?;
    Ok((connection, true))
}

/// Where `totemd` is: beside this executable, else on PATH.
pub fn find_totemd() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().ok();
    if let Some(beside) = exe
        .as_deref()
        .and_then(Path::parent)
        .map(|d| d.join("totemd"))
        && beside.is_file()
    {
        return Ok(beside);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("totemd");
            if is_executable(&candidate) {
                return Ok(candidate);
            }
        }
    }
    let beside = exe.as_deref().and_then(Path::parent).map_or_else(
        || "this executable".to_string(),
        |d| d.display().to_string(),
    );
    Err(Unreachable(format!(
        "cannot find totemd in {beside} or on PATH. Install it beside totem (with `cargo build -p totemd` in a checkout), or add its folder to PATH"
    ))
    .into())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Starts `totemd` detached (own session, stdio away from the terminal) and waits until it
/// answers `initialize`.
pub async fn start(endpoint: &Endpoint) -> anyhow::Result<Connection> {
    start_with(endpoint, None).await
}

/// [`start`], with totemd stopping once unused for `exit_when_idle`.
async fn start_with(
    endpoint: &Endpoint,
    exit_when_idle: Option<Duration>,
) -> anyhow::Result<Connection> {
    if let Some(connection) = connect(endpoint).await? {
        return Ok(connection);
    }
    let totemd = find_totemd()?;
    let logs = endpoint.logs();
    std::fs::create_dir_all(&logs)
        .with_context(|| format!("cannot create the log folder {}", logs.display()))?;
    let stderr_path = logs.join(STDERR_FILE);
    let stderr = std::fs::File::create(&stderr_path)
        .with_context(|| format!("cannot create {}", stderr_path.display()))?;
    let mut command = std::process::Command::new(&totemd);
    if endpoint.socket_flag {
        command.arg("--socket").arg(&endpoint.socket);
    }
    if let Some(idle) = exit_when_idle {
        command
            .arg("--exit-when-idle")
            .arg(idle.as_secs().max(1).to_string());
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr));
    detach(&mut command);
    let mut child = command.spawn().map_err(|e| {
        Unreachable(format!(
            "cannot start {}: {e}. Check that it is executable",
            totemd.display()
        ))
    })?;
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let said = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            let said = said.trim();
            return Err(Unreachable(format!(
                "totemd exited ({status}) before answering{}. Its log is in {}",
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                },
                logs.display()
            ))
            .into());
        }
        if let Some(connection) = connect(endpoint).await? {
            // Reap it when it stops, so a long REPL leaves no zombie behind.
            std::thread::spawn(move || child.wait());
            return Ok(connection);
        }
        if Instant::now() > deadline {
            return Err(Unreachable(format!(
                "totemd (pid {}) did not answer on {} within {} s. Look at its log in {} ({STDERR_FILE} holds what it printed), then try `totem daemon start` again",
                child.id(),
                endpoint.socket.display(),
                WAIT.as_secs(),
                logs.display()
            ))
            .into());
        }
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
}

/// Puts the child in a session of its own, so the terminal's signals and hang-up never reach it.
#[allow(unsafe_code)]
fn detach(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent; nothing else runs
    // between fork and exec.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
}

/// `totem daemon start`.
pub async fn start_command(endpoint: &Endpoint) -> anyhow::Result<Exit> {
    if let Some(connection) = connect(endpoint).await? {
        let status = connection
            .client
            .call::<method::DaemonStatus>(NoParams {})
            .await?;
        println!(
            "totemd is already running (pid {}, socket {})",
            status.pid,
            endpoint.socket.display()
        );
        return Ok(Exit::Success);
    }
    let connection = start(endpoint).await?;
    let status = connection
        .client
        .call::<method::DaemonStatus>(NoParams {})
        .await?;
    println!(
        "started totemd {} (pid {}, socket {})",
        status.version,
        status.pid,
        endpoint.socket.display()
    );
    Ok(Exit::Success)
}

/// `totem daemon stop`.
pub async fn stop_command(endpoint: &Endpoint) -> anyhow::Result<Exit> {
    let Some(connection) = connect(endpoint).await? else {
        println!(
            "totemd is not running (nothing answers on {})",
            endpoint.socket.display()
        );
        return Ok(Exit::Success);
    };
    let pid = connection
        .client
        .call::<method::DaemonStatus>(NoParams {})
        .await
        .map(|s| s.pid)
        .ok();
    match connection
        .client
        .call::<method::DaemonShutdown>(NoParams {})
        .await
    {
        Ok(_) | Err(ClientError::Closed) => {}
        Err(e) => {
            return Err(anyhow::anyhow!(
                "totemd refused to stop: {e}. Try again, or send it SIGTERM"
            ));
        }
    }
    let deadline = Instant::now() + WAIT;
    // A daemon started by systemd's totemd.socket leaves the socket to systemd: its exit is enough.
    while endpoint.socket.exists() && pid.is_none_or(running) {
        if Instant::now() > deadline {
            return Err(Unreachable(format!(
                "totemd{} still holds {} after {} s. Look at its log in {}, or send it SIGTERM",
                pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
                endpoint.socket.display(),
                WAIT.as_secs(),
                endpoint.logs().display()
            ))
            .into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    match pid {
        Some(pid) => println!("stopped totemd (pid {pid})"),
        None => println!("stopped totemd"),
    }
    Ok(Exit::Success)
}

/// Whether process `pid` still runs (an exited one not yet reaped counts as gone).
fn running(pid: u32) -> bool {
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (name) S …`: the state follows the last parenthesis.
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.trim().chars().next());
        return !matches!(state, Some('Z' | 'X'));
    }
    i32::try_from(pid)
        .is_ok_and(|pid| nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok())
}

/// `totem daemon status`.
pub async fn status_command(endpoint: &Endpoint, json: bool) -> anyhow::Result<Exit> {
    let Some(connection) = connect(endpoint).await? else {
        return Err(Unreachable(format!(
            "totemd is not running (nothing answers on {}). Start it with `totem daemon start`",
            endpoint.socket.display()
        ))
        .into());
    };
    let status = connection
        .client
        .call::<method::DaemonStatus>(NoParams {})
        .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(Exit::Success);
    }
    let c = &status.counts;
    println!(
        "totemd {} (protocol {})",
        status.version, status.protocol_version
    );
    println!("pid          {}", status.pid);
    println!(
        "uptime       {}",
        crate::format::duration_ms(status.uptime_ms)
    );
    println!("socket       {}", status.socket);
    println!("home         {}", status.home);
    println!("store        {}", status.store_path);
    println!(
        "counts       {} projects, {} sessions, {} connections{}, {} running runs",
        c.projects,
        c.sessions,
        c.connections,
        c.max_connections
            .map(|m| format!(" (of {m} at most)"))
            .unwrap_or_default(),
        c.running_runs
    );
    if let Some(store) = &status.store {
        let free = store
            .free_bytes
            .map(|f| format!(", {} free", totem_protocol::human_bytes(f)))
            .unwrap_or_default();
        println!("store state  {}{free}", store.state);
        if let Some(message) = &store.message {
            println!("             {message}");
        }
    }
    Ok(Exit::Success)
}
