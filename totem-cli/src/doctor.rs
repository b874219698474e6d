//! `totem doctor`: checks what Totem needs — the daemon, the socket and folder permissions, the
//! store, the providers, `rg`, MCP servers, the systemd units — and prints one line per check
//! (ok / warn / fail) with what to do about it. Exit code 0 when nothing failed.
//!
//! Provider checks call only the methods the daemon announces in `initialize`, so that this client
//! works with daemons that have fewer of them.

use std::fmt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use totem_protocol::{Method, NoParams, ProviderTestParams, method};

use crate::daemon::{Connection, Endpoint};
use crate::exit::Exit;

/// How long one provider may take to answer `provider.test`.
const PROVIDER_WAIT: Duration = Duration::from_secs(30);
/// How long any other call may take.
const CALL_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, not `write_str`: the report aligns on `{:<4}`.
        f.pad(match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        })
    }
}

/// One line of the report: what was checked, how it went, and what to do when it did not.
#[derive(Debug, Clone)]
pub struct Check {
    pub status: Status,
    pub name: String,
    pub detail: String,
}

fn check(status: Status, name: impl Into<String>, detail: impl Into<String>) -> Check {
    Check {
        status,
        name: name.into(),
        detail: detail.into(),
    }
}

/// `totem doctor`.
pub async fn doctor_command(endpoint: &Endpoint) -> anyhow::Result<Exit> {
    let mut failed = false;
    for line in run_checks(endpoint).await {
        failed |= line.status == Status::Fail;
        println!("{:<4}  {:<10}  {}", line.status, line.name, line.detail);
    }
    Ok(if failed { Exit::Failed } else { Exit::Success })
}

/// Every check, in the order a person would fix things.
pub async fn run_checks(endpoint: &Endpoint) -> Vec<Check> {
    let mut checks = vec![check_home(&endpoint.home)];
    checks.extend(check_repairs(&endpoint.home));
    checks.extend(check_private_files(&endpoint.home));
    if let Some(dir) = endpoint.socket.parent() {
        checks.push(check_socket_folder(dir));
    }
    let connection = match crate::daemon::connect(endpoint).await {
        Ok(Some(connection)) => Some(connection),
        Ok(None) => {
            checks.push(check(
                Status::Fail,
                "daemon",
                format!(
                    "nothing answers on {}: start it with `totem daemon start` (or `totem daemon install` to have systemd start it)",
                    endpoint.socket.display()
                ),
            ));
            None
        }
        Err(e) => {
            checks.push(check(Status::Fail, "daemon", format!("{e:#}")));
            None
        }
    };
    checks.push(check_socket(&endpoint.socket, connection.is_some()));
    match &connection {
        Some(connection) => checks.extend(check_daemon(connection).await),
        None => {
            checks.push(check_settings_offline(&endpoint.home));
            checks.push(check(
                Status::Warn,
                "providers",
                "not checked: the daemon is not running",
            ));
        }
    }
    checks.push(check_logs(&endpoint.home.join("logs")));
    checks.extend(check_project());
    checks.push(check_rg());
    checks.extend(check_mcp(&endpoint.home).await);
    checks.extend(check_systemd());
    checks
}

/// settings.json read by totemd itself (`totemd --check-settings`), so the daemon's own rules
/// decide, even when no daemon runs.
fn check_settings_offline(home: &Path) -> Check {
    let totemd = match crate::daemon::find_totemd() {
        Ok(totemd) => totemd,
        Err(e) => return check(Status::Warn, "settings", format!("not checked: {e:#}")),
    };
    let output = std::process::Command::new(&totemd)
        .arg("--home")
        .arg(home)
        .arg("--check-settings")
        .output();
    match output {
        Ok(output) if output.status.success() => check(
            Status::Ok,
            "settings",
            String::from_utf8_lossy(&output.stdout).trim().to_string(),
        ),
        Ok(output) => {
            let text = String::from_utf8_lossy(&output.stderr);
            let error = text.trim().trim_start_matches("totemd: ");
            check(
                Status::Fail,
                "settings",
                format!("{error}. Fix the file; totemd starts no run until then"),
            )
        }
        Err(e) => check(
            Status::Warn,
            "settings",
            format!("not checked: cannot run {}: {e}", totemd.display()),
        ),
    }
}

/// A store repaired at open leaves the damaged files beside it, with a note of what was lost.
fn check_repairs(home: &Path) -> Vec<Check> {
    let Ok(entries) = std::fs::read_dir(home) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("store.damaged-"))
        })
        .collect();
    found.sort();
    found
        .into_iter()
        .map(|dir| {
            let note = std::fs::read_to_string(dir.join("NOTE.txt")).unwrap_or_else(|_| {
                format!(
                    "the store was repaired; the damaged files are in {}",
                    dir.display()
                )
            });
            check(Status::Warn, "repair", note.trim().to_string())
        })
        .collect()
}

fn mode_of(meta: &std::fs::Metadata) -> u32 {
    meta.permissions().mode() & 0o777
}

fn own_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

fn check_home(home: &Path) -> Check {
    match std::fs::metadata(home) {
        Err(_) => check(
            Status::Warn,
            "home",
            format!(
                "{} does not exist yet: totemd creates it when it first starts",
                home.display()
            ),
        ),
        Ok(meta) if !meta.is_dir() => check(
            Status::Fail,
            "home",
            format!(
                "{} is not a folder: move it away, or point TOTEM_HOME elsewhere",
                home.display()
            ),
        ),
        Ok(meta) if meta.uid() != own_uid() => check(
            Status::Fail,
            "home",
            format!(
                "{} belongs to uid {}, not to you: `chown -R $(id -u) {}`",
                home.display(),
                meta.uid(),
                home.display()
            ),
        ),
        Ok(meta) if mode_of(&meta) & 0o077 != 0 => check(
            Status::Warn,
            "home",
            format!(
                "{} is open to other users (mode {:o}): `chmod 700 {}`",
                home.display(),
                mode_of(&meta),
                home.display()
            ),
        ),
        Ok(_) => check(Status::Ok, "home", format!("{} (mode 700)", home.display())),
    }
}

/// Settings, sealed keys and the key that seals them must be readable by the user only.
fn check_private_files(home: &Path) -> Vec<Check> {
    let mut checks = Vec::new();
    for path in [
        home.join("settings.json"),
        home.join("secrets.json"),
        home.join("keys"),
        home.join("keys").join("master.key"),
    ] {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if mode_of(&meta) & 0o077 != 0 {
            let wanted = if meta.is_dir() { "700" } else { "600" };
            checks.push(check(
                Status::Fail,
                "secrets",
                format!(
                    "{} is readable by other users (mode {:o}): `chmod {wanted} {}`",
                    path.display(),
                    mode_of(&meta),
                    path.display()
                ),
            ));
        }
    }
    if checks.is_empty() {
        checks.push(check(
            Status::Ok,
            "secrets",
            "settings and keys are readable by you only",
        ));
    }
    checks
}

fn check_socket_folder(dir: &Path) -> Check {
    match std::fs::metadata(dir) {
        Err(_) => check(
            Status::Warn,
            "socket dir",
            format!("{} does not exist (totemd creates it)", dir.display()),
        ),
        Ok(meta) if meta.uid() != own_uid() => check(
            Status::Fail,
            "socket dir",
            format!(
                "{} belongs to uid {}: remove it and start totemd again",
                dir.display(),
                meta.uid()
            ),
        ),
        Ok(meta) if mode_of(&meta) & 0o077 != 0 => check(
            Status::Warn,
            "socket dir",
            format!(
                "{} is open to other users (mode {:o}): `chmod 700 {}`",
                dir.display(),
                mode_of(&meta),
                dir.display()
            ),
        ),
        Ok(_) => check(
            Status::Ok,
            "socket dir",
            format!("{} (mode 700)", dir.display()),
        ),
    }
}

fn check_socket(socket: &Path, answered: bool) -> Check {
    let meta = match std::fs::metadata(socket) {
        Ok(meta) => meta,
        Err(_) if answered => {
            return check(Status::Ok, "socket", format!("{}", socket.display()));
        }
        Err(_) => {
            return check(
                Status::Fail,
                "socket",
                format!("{} does not exist: totemd is not running", socket.display()),
            );
        }
    };
    if !meta.file_type().is_socket() {
        return check(
            Status::Fail,
            "socket",
            format!(
                "{} is not a socket: remove it and start totemd again",
                socket.display()
            ),
        );
    }
    if meta.uid() != own_uid() {
        return check(
            Status::Fail,
            "socket",
            format!(
                "{} belongs to uid {}: totemd refuses other users; use your own TOTEM_HOME",
                socket.display(),
                meta.uid()
            ),
        );
    }
    if mode_of(&meta) & 0o077 != 0 {
        return check(
            Status::Warn,
            "socket",
            format!(
                "{} has mode {:o} (totemd still refuses other users): `chmod 600 {}`",
                socket.display(),
                mode_of(&meta),
                socket.display()
            ),
        );
    }
    if !answered {
        return check(
            Status::Fail,
            "socket",
            format!(
                "{} is stale (nobody listens): `totem daemon start` replaces it",
                socket.display()
            ),
        );
    }
    check(
        Status::Ok,
        "socket",
        format!("{} (mode 600)", socket.display()),
    )
}

/// Version, store and providers, from a daemon that answers.
async fn check_daemon(connection: &Connection) -> Vec<Check> {
    let mut checks = Vec::new();
    let status = tokio::time::timeout(
        CALL_WAIT,
        connection.client.call::<method::DaemonStatus>(NoParams {}),
    )
    .await;
    match status {
        Ok(Ok(status)) => {
            let ours = env!("CARGO_PKG_VERSION");
            checks.push(if status.version == ours {
                check(
                    Status::Ok,
                    "daemon",
                    format!(
                        "totemd {} (protocol {}, pid {}) answers",
                        status.version, status.protocol_version, status.pid
                    ),
                )
            } else {
                check(
                    Status::Warn,
                    "daemon",
                    format!(
                        "totemd {} runs but this totem is {ours}: after upgrading, restart it with `totem daemon stop` and `totem daemon start`",
                        status.version
                    ),
                )
            });
            match &status.sandbox {
                Some(sandbox) if sandbox.mode == "landlock" => {
                    checks.push(check(Status::Ok, "sandbox", sandbox.detail.clone()));
                }
                Some(sandbox) => checks.push(check(
                    Status::Warn,
                    "sandbox",
                    format!(
                        "{}. Landlock needs Linux 5.13 or later with `landlock` in the kernel's lsm= list",
                        sandbox.detail
                    ),
                )),
                None => {}
            }
            let store = PathBuf::from(&status.store_path);
            let free = status
                .store
                .as_ref()
                .and_then(|s| s.free_bytes)
                .map(|f| format!(", {} free on its disk", totem_protocol::human_bytes(f)))
                .unwrap_or_default();
            let unwritable = status
                .store
                .as_ref()
                .filter(|s| s.state != "ok")
                .map(|s| s.message.clone().unwrap_or_else(|| s.state.clone()));
            checks.push(if let Some(message) = unwritable {
                check(Status::Fail, "store", message)
            } else if store.is_dir() {
                check(
                    Status::Ok,
                    "store",
                    format!(
                        "{} ({} projects, {} sessions{free})",
                        store.display(),
                        status.counts.projects,
                        status.counts.sessions
                    ),
                )
            } else {
                check(
                    Status::Fail,
                    "store",
                    format!(
                        "{} is missing: was it deleted while totemd ran? Restart totemd (`totem daemon stop`, `totem daemon start`); its log says more",
                        store.display()
                    ),
                )
            });
            if let Some(max) = status.counts.max_connections {
                let open = status.counts.connections;
                checks.push(check(
                    if open * 10 >= max * 9 {
                        Status::Warn
                    } else {
                        Status::Ok
                    },
                    "connections",
                    format!(
                        "{open} open of {max} at most{}",
                        if open * 10 >= max * 9 {
                            ": close some clients, or raise LimitNOFILE in totemd.service"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
        Ok(Err(e)) => checks.push(check(
            Status::Fail,
            "daemon",
            format!("daemon.status failed: {e}. Look at totemd's log"),
        )),
        Err(_) => checks.push(check(
            Status::Fail,
            "daemon",
            format!(
                "daemon.status got no answer within {} s: totemd is stuck; restart it",
                CALL_WAIT.as_secs()
            ),
        )),
    }
    checks.extend(check_providers(connection).await);
    checks
}

/// Calls a method with a deadline; the error is already in words.
async fn call<M: Method>(
    connection: &Connection,
    params: M::Params,
    wait: Duration,
) -> Result<M::Result, String> {
    match tokio::time::timeout(wait, connection.client.call::<M>(params)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(format!("{} failed: {e}", M::NAME)),
        Err(_) => Err(format!(
            "{} got no answer within {} s",
            M::NAME,
            wait.as_secs()
        )),
    }
}

async fn check_providers(connection: &Connection) -> Vec<Check> {
    if !connection.has(method::ProviderList::NAME) {
        return vec![check(
            Status::Warn,
            "providers",
            "not available in this daemon (it has no provider.list): upgrade totemd",
        )];
    }
    let list = match call::<method::ProviderList>(connection, NoParams {}, CALL_WAIT).await {
        Ok(list) => list,
        Err(e) => return vec![check(Status::Fail, "providers", e)],
    };
    let mut checks = Vec::new();
    if let Some(error) = &list.settings_error {
        checks.push(check(
            Status::Fail,
            "settings",
            format!(
                "{error}. Fix the file; until then totemd keeps the previous settings and starts no run"
            ),
        ));
    }
    if list.providers.is_empty() {
        checks.push(implicit_ollama(connection).await);
        return checks;
    }
    for provider in list.providers.into_iter().map(|info| info.settings) {
        let kind = crate::provider::kind_name(provider.kind);
        let url = &provider.url;
        let label = format!("provider {}", provider.name);
        if !connection.has(method::ProviderTest::NAME) {
            checks.push(check(
                Status::Warn,
                label,
                format!("{kind} at {url}: testing is not available in this daemon"),
            ));
            continue;
        }
        let params = ProviderTestParams {
            name: provider.name.clone(),
            ..ProviderTestParams::default()
        };
        let tested = call::<method::ProviderTest>(connection, params, PROVIDER_WAIT).await;
        checks.push(match tested {
            Ok(result) => {
                let message = result.message;
                match (result.reachable, result.models) {
                    (true, 0) => check(
                        Status::Warn,
                        label,
                        format!("{kind} at {url} answers but lists no model. {message}"),
                    ),
                    (true, n) => check(Status::Ok, label, format!("{kind} at {url}: {n} models")),
                    (false, _) => check(Status::Fail, label, format!("{kind} at {url}: {message}")),
                }
            }
            Err(e) => check(Status::Fail, label, e),
        });
    }
    checks
}

/// With no provider configured, Totem falls back to a local Ollama: whether it answers now.
async fn implicit_ollama(connection: &Connection) -> Check {
    let label = "providers";
    if !connection.has(method::ProviderTest::NAME) {
        return check(
            Status::Warn,
            label,
            "none configured, and this daemon cannot test the local Ollama it falls back to: add a provider with `totem provider add`",
        );
    }
    let params = ProviderTestParams {
        name: "ollama".to_string(),
        ..ProviderTestParams::default()
    };
    match call::<method::ProviderTest>(connection, params, PROVIDER_WAIT).await {
        Ok(result) if result.reachable && result.models > 0 => check(
            Status::Ok,
            label,
            format!(
                "none configured; the local Ollama Totem falls back to answers at {} with {} models",
                result.url, result.models
            ),
        ),
        Ok(result) if result.reachable => check(
            Status::Warn,
            label,
            format!(
                "none configured; the local Ollama at {} answers but has no model: pull one (`ollama pull qwen2.5-coder:1.5b`) or add a provider with `totem provider add`",
                result.url
            ),
        ),
        Ok(result) => check(
            Status::Warn,
            label,
            format!(
                "none configured, and no Ollama answers at {} now: start Ollama (or set OLLAMA_HOST for totemd), or add a provider with `totem provider add`",
                result.url
            ),
        ),
        Err(e) => check(Status::Warn, label, e),
    }
}

fn check_logs(logs: &Path) -> Check {
    let Ok(entries) = std::fs::read_dir(logs) else {
        return check(
            Status::Warn,
            "logs",
            format!("{} does not exist yet (totemd writes it)", logs.display()),
        );
    };
    let newest = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("totemd"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max();
    match newest {
        Some((_, path)) => check(Status::Ok, "logs", format!("{}", path.display())),
        None => check(
            Status::Ok,
            "logs",
            format!("{} (no log yet)", logs.display()),
        ),
    }
}

/// The first executable named `name` on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// What the current folder's project is detected as: what decides whether Totem's Total.js 5
/// primer, conventions check and boot check apply there.
fn check_project() -> Option<Check> {
    let cwd = std::env::current_dir().ok()?;
    let root = crate::check::project_root(&cwd);
    let project = totem_totaljs::detect(&root);
    let mut detail = format!(
        "{}: {} ({})",
        root.display(),
        project.describe(),
        project.kind()
    );
    if let Some(message) = project.message() {
        detail.push_str(". ");
        detail.push_str(&message);
    }
    Some(check(Status::Ok, "project", detail))
}

fn check_rg() -> Check {
    let Some(rg) = on_path("rg") else {
        return check(
            Status::Warn,
            "rg",
            "not on PATH: grep and glob use the built-in engine; install ripgrep (`apt install ripgrep`, `brew install ripgrep`) for faster searches in large trees",
        );
    };
    let version = std::process::Command::new(&rg)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_else(|| "version unknown".to_string());
    check(Status::Ok, "rg", format!("{version} ({})", rg.display()))
}

/// MCP servers, from settings.json, where a server's command can at least be looked for on PATH
/// (the daemon starts them inside runs and has no method that lists them).
async fn check_mcp(home: &Path) -> Vec<Check> {
    // The user's servers, then the current project's own (`.totem/mcp.json`) under other names.
    let read = |path: PathBuf| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|v| v.get("mcpServers").and_then(Value::as_object).cloned())
            .unwrap_or_default()
    };
    let mut servers: Vec<(String, Value, &str)> = read(home.join("settings.json"))
        .into_iter()
        .map(|(name, server)| (name, server, "settings.json"))
        .collect();
    for (name, server) in read(PathBuf::from(".totem/mcp.json")) {
        if !servers.iter().any(|(n, _, _)| *n == name) {
            servers.push((name, server, ".totem/mcp.json"));
        }
    }
    if servers.is_empty() {
        return vec![check(Status::Ok, "mcp", "no MCP server configured")];
    }
    let mut checks = Vec::new();
    for (name, server, source) in servers {
        let label = format!("mcp {name}");
        let role = match server.get("role").and_then(Value::as_str) {
            Some(role) => format!(", role {role}"),
            None => String::new(),
        };
        let found = |what: String| {
            format!("{what} (from {source}{role}; not started: servers start inside runs)")
        };
        let checked = match (
            server.get("command").and_then(Value::as_str),
            server.get("url").and_then(Value::as_str),
        ) {
            (Some(command), _) if command.contains('/') && Path::new(command).is_file() => check(
                Status::Ok,
                label,
                found(format!("command `{command}` exists")),
            ),
            (Some(command), _) if !command.contains('/') && on_path(command).is_some() => check(
                Status::Ok,
                label,
                found(format!("command `{command}` found")),
            ),
            (Some(command), _) => check(
                Status::Fail,
                label,
                format!(
                    "command `{command}` is not found: install it or give its full path in {source}"
                ),
            ),
            (None, Some(url)) => match url_answers(url).await {
                Ok(()) => check(Status::Ok, label, found(format!("{url} answers"))),
                Err(e) => check(
                    Status::Fail,
                    label,
                    format!(
                        "{url} does not answer ({e}): start the server or fix `url` in {source}"
                    ),
                ),
            },
            (None, None) => check(
                Status::Fail,
                label,
                format!("neither `command` nor `url` is set in {source}"),
            ),
        };
        checks.push(checked);
    }
    checks
}

/// Whether something accepts connections at the URL's host and port (within 3 s).
async fn url_answers(url: &str) -> Result<(), String> {
    let (default_port, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (443, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (80, rest)
    } else {
        return Err("the URL must start with http:// or https://".into());
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (
            host.to_string(),
            port.parse::<u16>()
                .map_err(|_| format!("bad port `{port}`"))?,
        ),
        _ => (authority.to_string(), default_port),
    };
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    match tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 3 s".into()),
    }
}

/// The systemd units, when `totem daemon install` wrote them.
fn check_systemd() -> Option<Check> {
    let home = std::env::var_os("HOME")?;
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(&home).join(".config"), PathBuf::from);
    let socket_unit = config.join("systemd/user/totemd.socket");
    if !socket_unit.exists() {
        return None;
    }
    let enabled = std::process::Command::new("systemctl")
        .args(["--user", "is-enabled", "totemd.socket"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    Some(match enabled.as_deref() {
        Some("enabled") => check(Status::Ok, "systemd", "totemd.socket is enabled"),
        Some(state) if !state.is_empty() => check(
            Status::Warn,
            "systemd",
            format!("totemd.socket is {state}: `systemctl --user enable --now totemd.socket`"),
        ),
        _ => check(
            Status::Warn,
            "systemd",
            format!(
                "{} is installed but systemctl --user does not answer here",
                socket_unit.display()
            ),
        ),
    })
}
