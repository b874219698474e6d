//! The run's side of MCP (the client is `crate::mcp_client`): before the first step, the configured
//! servers start once the user allowed it, and in Total.js projects the docs server is searched
//! with the prompt; during the run, calls of MCP tools, of `mcp_prompt` and of `mcp_resource` go
//! through the permission rules and come back as text, a timeout or a stopped server as a clear error.

use serde_json::{Map, Value};
use totem_permission::{Access, AccessKind, AlwaysRule, Decision, Policy, Reason};
use totem_protocol::EventKind;
use totem_provider::{Message as ModelMessage, ToolCall};

use super::lock;
use super::run::Runner;
use crate::mcp_client::client::CallError;
use crate::mcp_client::pool::{self, RunLease};
use crate::mcp_client::server_config::{Origin, ServerConfig};
use crate::mcp_client::tools::{
    PROMPT_TOOL, RESOURCE_TOOL, ServerResources, prompt_text, resource_list, resource_text,
    result_text,
};
use crate::mcp_client::{START_PERMISSION, docs};

/// What the rules say about starting a server.
enum Start {
    Yes,
    No,
    /// Nothing allows or refuses it: the user decides (the access and the verdict to ask with).
    Ask(Access, totem_permission::Verdict),
}

impl Runner {
    /// Starts the configured servers the user allows (asking where needed; all at once, or gets
    /// the project's running instances), then, in a Total.js project, gives the model the docs
    /// server's pages for `prompt`. Returns the servers the run uses, held until it ends.
    ///
    /// The run waits for a starting server only a short while (see [`pool::START_WAIT`]); one
    /// that answers later joins the run then, one that fails is reported once per session.
    pub(super) async fn start_mcp(&mut self, prompt: &str, may_ask: bool) -> RunLease {
        // The servers the session uses are held from now on: none stops as idle while this run
        // starts (asks, waits for the others).
        let lease = RunLease::new();
        self.agent.mcp.hold_all(&lease);
        let settings = self.daemon.settings.current();
        let (user, secret_problems) = self.daemon.settings.mcp_servers_with_secrets(&settings);
        let (servers, problems) =
            crate::mcp_client::server_config::servers(&user, &self.agent.root);
        for problem in secret_problems.into_iter().chain(problems) {
            self.mcp_notice(totem_protocol::NoticeLevel::Warning, problem);
        }
        let idle = settings
            .mcp_server_idle_secs
            .map_or(pool::DEFAULT_IDLE, std::time::Duration::from_secs);
        let wait = settings
            .mcp_server_start_wait_secs
            .map_or(pool::START_WAIT, std::time::Duration::from_secs);
        self.agent.mcp.drop_stopped();
        let mut not_allowed = Vec::new();
        let mut wanted = Vec::new();
        for server in servers {
            // The docs server serves Total.js projects only.
            if server.is_docs() && !self.setup.totaljs {
                continue;
            }
            if self.agent.mcp.is_declined(&server.name) || self.cancel.is_cancelled() {
                continue;
            }
            if !self.agent.mcp.is_allowed(&server.name) {
                match self.may_start(&server).await {
                    Start::Yes => {}
                    Start::No => continue,
                    Start::Ask(access, verdict) => {
                        if !may_ask {
                            not_allowed.push(format!("`{}`", server.name));
                            continue;
                        }
                        if !self.ask_to_start(&server, &access, verdict).await {
                            continue;
                        }
                    }
                }
                self.agent.mcp.allow(&server.name);
            }
            wanted.push(server);
        }
        let mut pending = Vec::new();
        for server in wanted {
            let request = self.daemon.agents.mcp_pool.request(
                &self.agent.project_id,
                &server,
                &self.agent.root,
                (idle, wait),
                &lease,
            );
            match request {
                pool::Request::Ready(connection) => self.agent.mcp.insert(connection),
                pool::Request::Failed(failure) => self.start_failed(&server, &failure),
                pool::Request::Starting(starting) => pending.push((server, starting)),
            }
        }
        // Each server is held as soon as it answers, not once the slowest one did.
        let waits = pending.iter().map(|(_, starting)| async {
            let outcome = match starting.deadline {
                Some(deadline) => {
                    tokio::time::timeout_at(deadline.into(), starting.clone().outcome()).await
                }
                None => Ok(starting.clone().outcome().await),
            };
            if let Ok(Some(Ok(connection))) = &outcome
                && !lease.hold(connection)
            {
                return Ok(None);
            }
            outcome
        });
        let outcomes = tokio::select! {
            _ = self.cancel.cancelled() => return lease,
            outcomes = futures::future::join_all(waits) => outcomes,
        };
        for ((server, starting), outcome) in pending.into_iter().zip(outcomes) {
            match outcome {
                Ok(Some(Ok(connection))) => self.agent.mcp.insert(connection),
                Ok(Some(Err(failure))) => self.start_failed(&server, &failure),
                // Given up because its settings changed meanwhile, or stopped already: the next
                // run starts it anew.
                Ok(None) => {}
                Err(_) => {
                    if !server.is_docs() {
                        self.mcp_notice(
                            totem_protocol::NoticeLevel::Info,
                            format!(
                                "MCP server `{}` has not answered yet; the run goes on without it, and its tools join when it answers (it has {} s).",
                                server.name,
                                server.timeout().as_secs()
                            ),
                        );
                    }
                    self.join_later(server, starting, &lease);
                }
            }
        }
        if !not_allowed.is_empty() {
            self.mcp_notice(
                totem_protocol::NoticeLevel::Info,
                format!(
                    "MCP servers not started, because they are not allowed yet and a run another agent started does not stop to ask: {}. Allow one with the rule `mcp_server(NAME)` in settings.json, or start it once from `totem`.",
                    not_allowed.join(", ")
                ),
            );
        }
        self.agent.mcp.hold_all(&lease);
        if self.setup.totaljs {
            self.docs_search(prompt).await;
        }
        lease
    }

    /// Tells the user, once per session, that `server` did not start. Without its docs server
    /// Totem falls back to the primer, silently.
    fn start_failed(&self, server: &ServerConfig, failure: &pool::Failure) {
        if server.is_docs() {
            return;
        }
        if self.agent.mcp.first_report(failure.id) {
            self.mcp_notice(
                totem_protocol::NoticeLevel::Warning,
                failed_text(server, &failure.error),
            );
        }
    }

    /// Lets `server`, still starting when the run went on, join the run when it answers (its
    /// tools are offered from the next step), or reports it when it fails.
    fn join_later(&self, server: ServerConfig, starting: pool::Pending, lease: &RunLease) {
        let held = lease.downgrade();
        let agent = self.agent.clone();
        let live = self.live.clone();
        let daemon = self.daemon.clone();
        let run_id = self.run_id.clone();
        tokio::spawn(async move {
            let outcome = starting.outcome().await;
            let running = held.upgrade();
            let (level, text) = match outcome {
                Some(Ok(connection)) => {
                    // The run ended: the next one finds the server running.
                    let Some(held) = &running else {
                        return;
                    };
                    if !held.hold(&connection) {
                        return;
                    }
                    agent.mcp.insert(connection);
                    if server.is_docs() {
                        return;
                    }
                    (
                        totem_protocol::NoticeLevel::Info,
                        format!(
                            "MCP server `{}` answered; its tools are available from the next step.",
                            server.name
                        ),
                    )
                }
                // Told when it happens, to the run if it still goes, else to the session.
                Some(Err(failure)) => {
                    if server.is_docs() || !agent.mcp.first_report(failure.id) {
                        return;
                    }
                    (
                        totem_protocol::NoticeLevel::Warning,
                        failed_text(&server, &failure.error),
                    )
                }
                None => return,
            };
            let _ = live.emit(
                daemon.store(),
                EventKind::Notice {
                    run_id: running.map(|_| run_id),
                    level,
                    text,
                },
            );
        });
    }

    /// Whether `server` may start: allowed for every project in the user's settings, allowed by a
    /// rule naming `mcp_server` or by a remembered answer, refused by a rule, or to be asked.
    async fn may_start(&self, server: &ServerConfig) -> Start {
        if server.origin == Origin::User && server.settings.allow_all_projects {
            return Start::Yes;
        }
        let access = Access::new(AccessKind::Mcp, START_PERMISSION, server.name.clone());
        let (configured, mut verdict) = {
            let state = lock(&self.agent.permissions);
            // Broad rules (`mcp: *`, `*`) allow tool calls, not starting programs: only rules that
            // name `mcp_server` count, else the built-in "ask" with the remembered answers.
            (
                self.tools.policy.evaluate(&access, &state),
                Policy::new().evaluate(&access, &state),
            )
        };
        let names_start = configured.parts.iter().all(|p| {
            matches!(&p.reason, Reason::Rule { rule } | Reason::Remembered { rule } if rule.key == START_PERMISSION)
        });
        match configured.decision {
            Decision::Deny => {
                self.mcp_notice(
                    totem_protocol::NoticeLevel::Info,
                    format!(
                        "MCP server `{}` is not started: {}.",
                        server.name,
                        configured.explain()
                    ),
                );
                return Start::No;
            }
            Decision::Allow if names_start => return Start::Yes,
            _ => {}
        }
        for part in &mut verdict.parts {
            part.always = Some(AlwaysRule {
                key: START_PERMISSION.into(),
                pattern: server.name.clone(),
            });
        }
        Start::Ask(access, verdict)
    }

    /// Asks the user whether `server` may start; a refusal holds for the rest of the session.
    async fn ask_to_start(
        &self,
        server: &ServerConfig,
        access: &Access,
        verdict: totem_permission::Verdict,
    ) -> bool {
        let source = match server.origin {
            Origin::User => "your settings",
            Origin::Project => "the project's .totem/mcp.json",
        };
        let explanation = format!(
            "Start MCP server `{}` (`{}`, from {source})? Its tools become available to the model.",
            server.name,
            server.describe()
        );
        match self
            .settle(
                access,
                "",
                totem_protocol::QuestionKind::McpServer,
                Some(explanation),
                verdict,
                None,
            )
            .await
        {
            Ok(()) => true,
            Err(_) if self.cancel.is_cancelled() => false,
            Err(_) => {
                self.agent.mcp.decline(&server.name);
                self.mcp_notice(
                    totem_protocol::NoticeLevel::Info,
                    format!(
                        "MCP server `{}` is not started in this session; its tools are not available.",
                        server.name
                    ),
                );
                false
            }
        }
    }

    /// Searches the docs servers with the prompt; the first that finds pages gives them to the
    /// model (added to the prompt it reads) and their titles to the user (`docs.found`).
    async fn docs_search(&mut self, prompt: &str) {
        for connection in self.agent.mcp.docs() {
            let found = tokio::select! {
                _ = self.cancel.cancelled() => return,
                found = docs::search(&connection, prompt) => found,
            };
            let pages = match found {
                Ok(pages) if !pages.is_empty() => pages,
                Ok(_) => continue,
                Err(e) => {
                    tracing::info!(server = %connection.name(), error = %e, "docs search failed; the primer stands alone");
                    continue;
                }
            };
            let context = docs::context(connection.name(), &pages);
            if let Some(ModelMessage::User { text, .. }) = self.turns.current.first_mut() {
                text.push_str("\n\n");
                text.push_str(&context);
            }
            let _ = self.emit(EventKind::DocsFound {
                run_id: self.run_id.clone(),
                server: connection.name().to_string(),
                titles: pages.into_iter().map(|p| p.title).collect(),
            });
            return;
        }
    }

    /// An "unknown tool" message with the MCP tools this run offers added to the built-in ones
    /// it lists, so that the model sees every name it may call.
    pub(super) fn with_mcp_tools(&self, message: String) -> String {
        let mut names: Vec<String> = self
            .agent
            .mcp
            .definitions(self.setup.read_only)
            .into_iter()
            .map(|d| d.name)
            .collect();
        if names.is_empty() {
            return message;
        }
        names.sort();
        format!("{message}; from MCP servers: {}", names.join(", "))
    }

    /// Runs `call` when it names an MCP tool, `mcp_prompt` or `mcp_resource`; `None` when it is
    /// not one.
    pub(super) async fn call_mcp(&mut self, call: &ToolCall) -> Option<(String, bool)> {
        if call.name == PROMPT_TOOL && self.agent.mcp.has_prompts() {
            return Some(self.call_prompt(call).await);
        }
        if call.name == RESOURCE_TOOL && self.agent.mcp.has_resources() {
            return Some(self.call_resource(call).await);
        }
        let (connection, tool) = self.agent.mcp.find(&call.name)?;
        if self.setup.read_only && !tool.read_only {
            return Some((
                format!(
                    "`{}` is not available in this read-only mode: its server does not mark it read-only. Switch to build mode to use it.",
                    call.name
                ),
                true,
            ));
        }
        let arguments = match object_arguments(&call.arguments) {
            Ok(a) => a,
            Err(e) => return Some((e, true)),
        };
        let access = Access::new(AccessKind::Mcp, tool.exposed.clone(), tool.target());
        if let Err(text) = self.permit(&access, &call.id).await {
            return Some((text, true));
        }
        let result = tokio::select! {
            _ = self.cancel.cancelled() => return Some(("cancelled: the run was aborted".into(), true)),
            result = connection.call_tool(&tool.tool, arguments) => result,
        };
        // A server that failed or timed out is not asked for its list as well.
        if result.is_ok() {
            connection.refresh_stale_tools().await;
        }
        Some(match result {
            Ok(outcome) => (result_text(&outcome), outcome.is_error),
            Err(e) => self.call_failed(e),
        })
    }

    async fn call_prompt(&mut self, call: &ToolCall) -> (String, bool) {
        let arguments = match object_arguments(&call.arguments) {
            Ok(a) => a,
            Err(e) => return (e, true),
        };
        let field = |name: &str| text_field(&arguments, name);
        let (Some(server), Some(name)) = (field("server"), field("name")) else {
            return (
                "mcp_prompt needs `server` and `name` (strings), and `arguments` when the prompt has any".into(),
                true,
            );
        };
        let Some(connection) = self.agent.mcp.get(&server) else {
            let offering = self.agent.mcp.prompts().into_iter().map(|(s, _)| s);
            return (not_offered(&server, "prompts", offering), true);
        };
        let mut prompt_arguments = Map::new();
        if let Some(Value::Object(given)) = arguments.get("arguments") {
            for (key, value) in given {
                let text = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                prompt_arguments.insert(key.clone(), Value::String(text));
            }
        }
        let access = Access::new(AccessKind::Mcp, PROMPT_TOOL, format!("{server}/{name}"));
        if let Err(text) = self.permit(&access, &call.id).await {
            return (text, true);
        }
        let result = tokio::select! {
            _ = self.cancel.cancelled() => return ("cancelled: the run was aborted".into(), true),
            result = connection.get_prompt(&name, prompt_arguments) => result,
        };
        match result {
            Ok(value) => (prompt_text(&value), false),
            Err(e) => self.call_failed(e),
        }
    }

    /// `mcp_resource`: without `uri`, the resources and templates of `server` (or of every
    /// server); with it, that resource's contents after the permission rules allow reading it.
    async fn call_resource(&mut self, call: &ToolCall) -> (String, bool) {
        let arguments = match object_arguments(&call.arguments) {
            Ok(a) => a,
            Err(e) => return (e, true),
        };
        let field = |name: &str| text_field(&arguments, name);
        let offering: Vec<ServerResources> = self
            .agent
            .mcp
            .resources()
            .into_iter()
            .filter(|s| !s.resources.is_empty() || !s.templates.is_empty())
            .collect();
        let names = || offering.iter().map(|s| s.server.clone());
        let server = field("server");
        if let Some(server) = &server
            && !offering.iter().any(|s| s.server == *server)
        {
            return (not_offered(server, "resources", names()), true);
        }
        let Some(uri) = field("uri") else {
            let listed: Vec<ServerResources> = offering
                .into_iter()
                .filter(|s| server.as_ref().is_none_or(|name| s.server == *name))
                .collect();
            return (resource_list(&listed), false);
        };
        // Without `server`: the one that lists the URI, or the only one with resources.
        let server = server.or_else(|| {
            let listing = offering.iter().find(|s| {
                s.resources
                    .iter()
                    .any(|r| r.get("uri").and_then(Value::as_str) == Some(uri.as_str()))
            });
            match (listing, offering.as_slice()) {
                (Some(s), _) | (None, [s]) => Some(s.server.clone()),
                _ => None,
            }
        });
        let Some(server) = server else {
            return (
                format!(
                    "say which `server` has `{uri}`; servers with resources: {}",
                    names().collect::<Vec<_>>().join(", ")
                ),
                true,
            );
        };
        let Some(connection) = self.agent.mcp.get(&server) else {
            return (not_offered(&server, "resources", names()), true);
        };
        let access = Access::new(AccessKind::Mcp, RESOURCE_TOOL, format!("{server}/{uri}"));
        if let Err(text) = self.permit(&access, &call.id).await {
            return (text, true);
        }
        let result = tokio::select! {
            _ = self.cancel.cancelled() => return ("cancelled: the run was aborted".into(), true),
            result = connection.read_resource(&uri) => result,
        };
        match result {
            Ok(value) => (resource_text(&value), false),
            Err(e) => self.call_failed(e),
        }
    }

    /// The model's text for a call without a result, and the user's notice where it matters.
    fn call_failed(&self, error: CallError) -> (String, bool) {
        match &error {
            CallError::Timeout { .. } => {
                self.mcp_notice(
                    totem_protocol::NoticeLevel::Warning,
                    format!("{error}; the call was given up."),
                );
                (
                    format!(
                        "{error}; the call was given up. Try again later or another way, or go on without it."
                    ),
                    true,
                )
            }
            CallError::Stopped { server, .. } => {
                self.mcp_notice(
                    totem_protocol::NoticeLevel::Error,
                    format!(
                        "{error}. Its tools are gone for this run; the next run starts it again."
                    ),
                );
                (
                    format!(
                        "{error}. Its tools are no longer available; go on without `{server}`."
                    ),
                    true,
                )
            }
            CallError::Refused { .. } => (error.to_string(), true),
        }
    }

    fn mcp_notice(&self, level: totem_protocol::NoticeLevel, text: String) {
        let _ = self.emit(EventKind::Notice {
            run_id: Some(self.run_id.clone()),
            level,
            text,
        });
    }
}

/// The notice for a server that did not start: why, and when Totem tries it again.
fn failed_text(server: &ServerConfig, error: &str) -> String {
    let again = match server.origin {
        Origin::User => format!(
            "Totem tries it again once its settings change, `totem mcp test {}` passes, or totemd restarts",
            server.name
        ),
        Origin::Project => {
            "Totem tries it again once its entry in .totem/mcp.json changes or totemd restarts"
                .to_string()
        }
    };
    format!(
        "MCP server `{}` did not start: {error}. Its tools are not available; {again}.",
        server.name
    )
}

/// The answer to a call naming `server`, which is not among the running servers `offering` what
/// was asked for (`prompts`, `resources`).
fn not_offered(server: &str, what: &str, offering: impl Iterator<Item = String>) -> String {
    let names: std::collections::BTreeSet<String> = offering.collect();
    let names: Vec<String> = names.into_iter().collect();
    format!(
        "no running MCP server `{server}` has {what}; servers with {what}: {}",
        names.join(", ")
    )
}

/// The string argument `name` of a call, when it is given and not blank.
fn text_field(arguments: &Value, name: &str) -> Option<String> {
    arguments
        .get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// A call's arguments as a JSON object: models sometimes send the object as a string, or nothing.
fn object_arguments(arguments: &Value) -> Result<Value, String> {
    match arguments {
        Value::Object(_) => Ok(arguments.clone()),
        Value::Null => Ok(Value::Object(Map::new())),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err("the arguments must be a JSON object".into()),
        },
        _ => Err("the arguments must be a JSON object".into()),
    }
}
