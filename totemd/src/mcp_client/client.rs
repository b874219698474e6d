//! One connected MCP server: started (a child process in its own process group, or a streamable
//! HTTP session), its tools, prompts and resources kept current through `list_changed`
//! notifications, and calls bounded by the server's timeout.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, GetPromptRequestParams, JsonObject, ReadResourceRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::server_config::ServerConfig;
use crate::util::lock;

/// How much of a server's stderr is kept to explain why it stopped.
const STDERR_KEEP: usize = 2000;

/// What one call returned, as the model will read it.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// The result's content blocks, as JSON.
    pub content: Value,
    /// The structured result, when the tool returns one.
    pub structured: Option<Value>,
    /// The tool reported a failure; the content says what.
    pub is_error: bool,
}

/// Why a call produced no result.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The server did not answer within its timeout.
    #[error("MCP server `{server}` did not answer within {secs} s")]
    Timeout {
        /// The server's name in settings.
        server: String,
        /// The timeout that ran out, seconds.
        secs: u64,
    },
    /// The server exited or its connection closed.
    #[error("MCP server `{server}` stopped{detail}")]
    Stopped {
        /// The server's name in settings.
        server: String,
        /// Why, as a suffix of the message (` (…)`); may be empty.
        detail: String,
    },
    /// The server answered with an error.
    #[error("MCP server `{server}` refused the request: {message}")]
    Refused {
        /// The server's name in settings.
        server: String,
        /// The server's error message.
        message: String,
    },
}

/// A tool, prompt or resource as the server lists it (kept as JSON: only a few fields matter here).
pub type Listed = Vec<Value>;

#[derive(Default)]
struct Lists {
    tools: Listed,
    prompts: Listed,
    resources: Listed,
    resource_templates: Listed,
    /// The server said its tools changed and the new list has not arrived yet.
    tools_stale: bool,
}

/// Receives the server's notifications; a changed list is fetched again in the background.
#[derive(Clone)]
struct Handler {
    lists: Arc<Mutex<Lists>>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let lists = self.lists.clone();
        lock(&lists).tools_stale = true;
        tokio::spawn(async move {
            match context.peer.list_all_tools().await {
                Ok(tools) => {
                    let mut lists = lock(&lists);
                    lists.tools = to_values(tools);
                    lists.tools_stale = false;
                }
                Err(e) => tracing::warn!(error = %e, "cannot list an MCP server's changed tools"),
            }
        });
        std::future::ready(())
    }

    fn on_prompt_list_changed(
        &self,
        context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let lists = self.lists.clone();
        tokio::spawn(async move {
            match context.peer.list_all_prompts().await {
                Ok(prompts) => lock(&lists).prompts = to_values(prompts),
                Err(e) => tracing::warn!(error = %e, "cannot list an MCP server's changed prompts"),
            }
        });
        std::future::ready(())
    }

    fn on_resource_list_changed(
        &self,
        context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let lists = self.lists.clone();
        tokio::spawn(async move {
            match context.peer.list_all_resources().await {
                Ok(resources) => lock(&lists).resources = to_values(resources),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list an MCP server's changed resources")
                }
            }
        });
        std::future::ready(())
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::default(),
            rmcp::model::Implementation::new("totem", env!("CARGO_PKG_VERSION")),
        )
    }
}

fn to_values<T: serde::Serialize>(items: Vec<T>) -> Listed {
    items
        .into_iter()
        .filter_map(|i| serde_json::to_value(i).ok())
        .collect()
}

/// A server Totem started (or connected to) for a session.
pub struct Connection {
    /// How the server was configured and where that came from.
    pub config: ServerConfig,
    service: RunningService<RoleClient, Handler>,
    peer: Peer<RoleClient>,
    lists: Arc<Mutex<Lists>>,
    /// The process group of a stdio server, killed when the connection goes.
    pgid: Option<i32>,
    /// Set once the stdio server's process ended and was reaped (its group killed then).
    gone: Option<Arc<AtomicBool>>,
    stderr: Arc<Mutex<String>>,
    stopped: AtomicBool,
    /// Runs using the server now, and when the last one ended (see `super::pool`).
    pub(super) usage: Mutex<super::pool::Usage>,
}

impl Connection {
    /// Starts the server and lists its tools and prompts. `root` is the project folder, where a
    /// command runs.
    pub async fn start(config: ServerConfig, root: &Path) -> Result<Connection, String> {
        let lists = Arc::new(Mutex::new(Lists::default()));
        let handler = Handler {
            lists: lists.clone(),
        };
        let stderr = Arc::new(Mutex::new(String::new()));
        // The server's own timeout bounds its start: a run does not wait for it meanwhile (see
        // `super::pool`), and a server that never answers is reported when it runs out.
        let wait = config.timeout();
        let (service, pgid, gone) = if let Some(command) = &config.settings.command {
            let mut cmd = tokio::process::Command::new(command);
            // The daemon's secret-looking variables (API keys, tokens, a DATABASE_URL with a
            // password) stay with it; the server gets what its own `env` names.
            let defaults = totem_permission::EnvSettings::default();
            for (name, value) in std::env::vars_os() {
                if defaults.removes(&name.to_string_lossy(), &value.to_string_lossy()) {
                    cmd.env_remove(name);
                }
            }
            cmd.args(&config.settings.args)
                .envs(&config.settings.env)
                .current_dir(root)
                .process_group(0)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            // The child is ours (not the transport's), so that a server that dies before the
            // handshake can be asked how it ended.
            let mut child = cmd
                .spawn()
                .map_err(|e| format!("cannot run `{}`: {e}", config.describe()))?;
            let pgid = child.id().and_then(|p| i32::try_from(p).ok());
            if let Some(pgid) = pgid {
                super::leftovers::record(pgid);
            }
            // A start given up half-way (the daemon stops, the settings changed) kills the group.
            let mut guard = GroupGuard(pgid);
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                kill_group(guard.0.take());
                return Err("its standard input and output could not be connected".into());
            };
            let reader = child.stderr.take().map(|mut err| {
                let keep = stderr.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = err.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let mut kept = lock(&keep);
                        kept.push_str(&String::from_utf8_lossy(&buf[..n]));
                        if kept.len() > STDERR_KEEP * 2 {
                            let cut = kept.floor_char_boundary(kept.len() - STDERR_KEEP);
                            kept.replace_range(..cut, "");
                        }
                    }
                })
            });
            let started = tokio::time::timeout(wait, handler.serve((stdout, stdin))).await;
            let service = match started {
                Ok(Ok(service)) => service,
                Ok(Err(e)) => {
                    let ended = exit_status(&mut child).await;
                    kill_group(guard.0.take());
                    reap(child, None);
                    last_words(reader).await;
                    return Err(with_stderr(
                        format!("it did not start{ended} ({})", plain_error(&e.to_string())),
                        &stderr,
                    ));
                }
                Err(_) => {
                    kill_group(guard.0.take());
                    reap(child, None);
                    last_words(reader).await;
                    return Err(with_stderr(
                        format!("it did not answer within {} s", wait.as_secs()),
                        &stderr,
                    ));
                }
            };
            guard.0 = None;
            let gone = Arc::new(AtomicBool::new(false));
            reap(child, Some((pgid, gone.clone())));
            (service, pgid, Some(gone))
        } else if let Some(url) = &config.settings.url {
            let mut headers = HashMap::new();
            for (name, value) in &config.settings.headers {
                let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|e| format!("header `{name}`: {e}"))?;
                let value = reqwest::header::HeaderValue::from_str(value)
                    .map_err(|e| format!("the value of header `{name}`: {e}"))?;
                headers.insert(name, value);
            }
            // reqwest is built without a default TLS crypto provider; https URLs need one.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let http =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers);
            // A server the user logged in to gets its access token, refreshed when it expired
            // or was refused; the others get the configured headers only.
            let started = match &config.settings.oauth {
                Some(tokens) => {
                    let client = super::oauth::client(url, tokens.clone()).await?;
                    let transport = StreamableHttpClientTransport::with_client(client, http);
                    tokio::time::timeout(wait, handler.serve(transport)).await
                }
                None => {
                    let transport = StreamableHttpClientTransport::from_config(http);
                    tokio::time::timeout(wait, handler.serve(transport)).await
                }
            };
            match started {
                Ok(Ok(service)) => (service, None, None),
                Ok(Err(e)) => {
                    let raw = e.to_string();
                    let why = plain_error(&raw);
                    let hint = refusal_hint(&config, url, &raw).await;
                    return Err(format!("{url} did not accept the connection: {why}{hint}"));
                }
                Err(_) => {
                    return Err(format!("{url} did not answer within {} s", wait.as_secs()));
                }
            }
        } else {
            return Err("it has neither a command nor a url".into());
        };
        let peer = service.peer().clone();
        let connection = Connection {
            config,
            service,
            peer,
            lists,
            pgid,
            gone,
            stderr,
            stopped: AtomicBool::new(false),
            usage: Mutex::new(super::pool::Usage::default()),
        };
        let tools = tokio::time::timeout(wait, connection.peer.list_all_tools())
            .await
            .map_err(|_| "it did not list its tools in time".to_string())?
            .map_err(|e| format!("it did not list its tools: {e}"))?;
        lock(&connection.lists).tools = to_values(tools);
        let offers_prompts = connection
            .peer
            .peer_info()
            .is_some_and(|i| i.capabilities.prompts.is_some());
        if offers_prompts
            && let Ok(Ok(prompts)) =
                tokio::time::timeout(wait, connection.peer.list_all_prompts()).await
        {
            lock(&connection.lists).prompts = to_values(prompts);
        }
        if connection
            .peer
            .peer_info()
            .is_some_and(|i| i.capabilities.resources.is_some())
        {
            connection.list_resources(wait).await;
        }
        Ok(connection)
    }

    /// The server's name in settings.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Whether the server went away (its process ended, the HTTP session broke, or a call found it
    /// gone).
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed) || self.service.is_closed()
    }

    /// The tools the server lists now (before the whitelist).
    pub fn tools(&self) -> Listed {
        lock(&self.lists).tools.clone()
    }

    /// Lists the tools again after a call, so the model's next request offers what the server
    /// offers now. Not only when a `list_changed` notification came: the notification of a change
    /// the call made may reach us after the call's answer (and servers send it without declaring
    /// `tools.listChanged`, as the Python SDK's FastMCP does), and the next request must not go out
    /// with the old list. One `tools/list` per call is cheap next to the call.
    pub async fn refresh_stale_tools(&self) {
        if let Ok(Ok(tools)) =
            tokio::time::timeout(self.config.timeout(), self.peer.list_all_tools()).await
        {
            let mut lists = lock(&self.lists);
            lists.tools = to_values(tools);
            lists.tools_stale = false;
        }
    }

    /// The prompts the server listed last.
    pub fn prompts(&self) -> Listed {
        lock(&self.lists).prompts.clone()
    }

    /// The resources and resource templates the server lists now.
    pub fn resources(&self) -> (Listed, Listed) {
        let lists = lock(&self.lists);
        (lists.resources.clone(), lists.resource_templates.clone())
    }

    /// Lists the resources and templates; a server that fails to list either offers none of it.
    async fn list_resources(&self, wait: Duration) {
        if let Ok(Ok(resources)) = tokio::time::timeout(wait, self.peer.list_all_resources()).await
        {
            lock(&self.lists).resources = to_values(resources);
        }
        if let Ok(Ok(templates)) =
            tokio::time::timeout(wait, self.peer.list_all_resource_templates()).await
        {
            lock(&self.lists).resource_templates = to_values(templates);
        }
    }

    /// Reads the resource at `uri`; returns its `contents` as JSON.
    pub async fn read_resource(&self, uri: &str) -> Result<Value, CallError> {
        let result = self
            .bounded(self.peer.read_resource(ReadResourceRequestParams::new(uri)))
            .await?;
        Ok(serde_json::to_value(&result).unwrap_or(Value::Null))
    }

    /// Calls `tool` with `arguments` (a JSON object), bounded by the server's timeout.
    pub async fn call_tool(&self, tool: &str, arguments: Value) -> Result<CallOutcome, CallError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        let result = self.bounded(self.peer.call_tool(params)).await?;
        let value = serde_json::to_value(&result).unwrap_or(Value::Null);
        Ok(CallOutcome {
            content: value.get("content").cloned().unwrap_or(Value::Null),
            structured: value.get("structuredContent").cloned(),
            is_error: value
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// Gets prompt `name` filled with `arguments`; returns its messages as JSON.
    pub async fn get_prompt(&self, name: &str, arguments: JsonObject) -> Result<Value, CallError> {
        let mut params = GetPromptRequestParams::new(name);
        if !arguments.is_empty() {
            params = params.with_arguments(arguments);
        }
        let result = self.bounded(self.peer.get_prompt(params)).await?;
        Ok(serde_json::to_value(&result).unwrap_or(Value::Null))
    }

    async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, rmcp::ServiceError>>,
    ) -> Result<T, CallError> {
        let timeout = self.config.timeout();
        match tokio::time::timeout(timeout, call).await {
            Err(_) => Err(CallError::Timeout {
                server: self.name().to_string(),
                secs: timeout.as_secs(),
            }),
            Ok(Ok(result)) => Ok(result),
            Ok(Err(rmcp::ServiceError::McpError(e))) => Err(CallError::Refused {
                server: self.name().to_string(),
                message: e.message.to_string(),
            }),
            Ok(Err(e)) => {
                // Anything but an MCP error means the connection is unusable.
                tracing::warn!(server = %self.name(), error = %e, "MCP server connection failed");
                self.stopped.store(true, Ordering::Relaxed);
                let detail = match &self.config.settings.oauth {
                    Some(tokens) if is_refusal(&e.to_string()) => {
                        format!(" ({})", super::oauth::relogin_hint(tokens, &e.to_string()))
                    }
                    _ => self.why_stopped(),
                };
                Err(CallError::Stopped {
                    server: self.name().to_string(),
                    detail,
                })
            }
        }
    }

    /// The end of the server's stderr, for messages (empty when it wrote nothing).
    fn why_stopped(&self) -> String {
        let err = lock(&self.stderr);
        let tail = err.trim();
        if tail.is_empty() {
            String::new()
        } else {
            let start = tail.floor_char_boundary(tail.len().saturating_sub(300));
            format!(" (its last output: {})", &tail[start..])
        }
    }

    /// Marks the connection stopped (it is about to be killed): no run takes it from now on.
    pub(super) fn mark_stopped(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Kills a stdio server's whole process group at once (it may have started helpers).
    pub fn kill(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.service.cancellation_token().cancel();
        self.kill_group();
    }

    /// Kills the server's process group, unless its process already ended (then the group was
    /// killed as it was reaped, and the number may belong to another group by now).
    fn kill_group(&self) {
        if !self
            .gone
            .as_ref()
            .is_some_and(|g| g.load(Ordering::Acquire))
        {
            kill_group(self.pgid);
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// Kills a process group when dropped, unless disarmed (its `0` taken).
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0.take());
    }
}

fn kill_group(pgid: Option<i32>) {
    if let Some(pgid) = pgid.filter(|p| *p > 0) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
        super::leftovers::forget(pgid);
    }
}

/// Waits for the server's process on a task of its own, so that however it ends (crashed,
/// stopped as idle, killed with the daemon's sessions) it is reaped at once rather than left
/// `<defunct>` until the daemon exits; the connection keeps only its process group to stop it.
/// With `group`, the server's process group is killed once it ended (what it started dies with
/// it) and `gone` is set.
fn reap(mut child: tokio::process::Child, group: Option<(Option<i32>, Arc<AtomicBool>)>) {
    tokio::spawn(async move {
        let _ = child.wait().await;
        if let Some((pgid, gone)) = group {
            kill_group(pgid);
            gone.store(true, Ordering::Release);
        }
    });
}

/// How a server that did not start ended: ` (it exited with status 3)`, or nothing when it
/// still runs a moment later.
async fn exit_status(child: &mut tokio::process::Child) -> String {
    use std::os::unix::process::ExitStatusExt;
    match tokio::time::timeout(Duration::from_secs(1), child.wait()).await {
        Ok(Ok(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => format!(": it exited with status {code}"),
            (None, Some(signal)) => format!(": it was killed by signal {signal}"),
            (None, None) => String::new(),
        },
        _ => String::new(),
    }
}

/// Whether an rmcp error says the server wants credentials (401, 403, a refused token).
fn is_refusal(text: &str) -> bool {
    [
        "HTTP 401",
        "HTTP 403",
        "Auth required",
        "Auth error",
        "Insufficient scope",
    ]
    .iter()
    .any(|s| text.contains(s))
}

/// What to do when a remote server refused the connection for want of credentials (`error` is
/// rmcp's): log in (again) when it offers OAuth, else store a token; nothing for other failures.
async fn refusal_hint(config: &ServerConfig, url: &str, error: &str) -> String {
    if !is_refusal(error) {
        return String::new();
    }
    let name = &config.name;
    if let Some(tokens) = &config.settings.oauth {
        return format!("; {}", super::oauth::relogin_hint(tokens, error));
    }
    if super::oauth::offers_login(url, &config.settings).await {
        return format!(
            "; {}",
            super::oauth::login_hint(name, "it wants you to log in")
        );
    }
    format!(
        "; it wants a token: `totem mcp add {name} --url {url} --header Authorization --value-stdin --replace` stores one"
    )
}

/// An rmcp error as a sentence: the server's answer when it gave one, without the Rust type
/// names of the transport (`Transport [rmcp::transport::worker::WorkerTransport<…>]`).
fn plain_error(text: &str) -> String {
    if text.contains("Auth required") {
        return "it answered 401 (it wants credentials)".into();
    }
    if let Some((_, answer)) = text.split_once("unexpected server response: ") {
        let answer = answer.split(", when send").next().unwrap_or(answer);
        return format!("it answered {}", answer.trim());
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else {
            break;
        };
        out.push_str(&rest[..open]);
        if !rest[open..close].contains("::") {
            out.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Waits for a killed server's stderr reader to reach the pipe's end, so that its last words are
/// kept; at most a second, in case a process that left the group still holds the pipe.
async fn last_words(reader: Option<tokio::task::JoinHandle<()>>) {
    if let Some(reader) = reader {
        let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
    }
}

fn with_stderr(message: String, stderr: &Mutex<String>) -> String {
    let err = lock(stderr);
    let tail = err.trim();
    if tail.is_empty() {
        return message;
    }
    let start = tail.floor_char_boundary(tail.len().saturating_sub(300));
    format!("{message}; it said: {}", &tail[start..])
}
