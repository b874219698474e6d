//! The MCP server handler: lists the generated tools and calls each one's protocol method on
//! totemd through a socket client, as every other client does. `session_ask` also follows the
//! session's events and passes them on as MCP progress notifications while it waits, and puts
//! the questions of the runs it started to the client's person ([`crate::elicit`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use totem_client::{Client, ClientError, EventStream};
use totem_protocol::{
    DEFAULT_WAIT_MS, EventKind, MAX_WAIT_MS, Method, Part, RunOutcome, RunStatus, method,
};

use crate::{elicit, tools};

/// Opens a new, initialized connection to totemd.
pub type Connect = Arc<dyn Fn() -> BoxFuture<'static, anyhow::Result<Client>> + Send + Sync>;

/// One connection to totemd shared by every MCP session of a server, opened on first use and
/// again after totemd closed it.
pub struct Connector {
    connect: Connect,
    client: tokio::sync::Mutex<Option<Client>>,
}

impl Connector {
    /// A connector that has not connected yet; it connects at the first call.
    pub fn new(connect: Connect) -> Arc<Connector> {
        Arc::new(Connector {
            connect,
            client: tokio::sync::Mutex::new(None),
        })
    }

    /// Starts with a connection already open.
    pub fn with_client(connect: Connect, client: Client) -> Arc<Connector> {
        Arc::new(Connector {
            connect,
            client: tokio::sync::Mutex::new(Some(client)),
        })
    }

    async fn client(&self) -> anyhow::Result<Client> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref() {
            return Ok(client.clone());
        }
        let client = (self.connect)().await?;
        *slot = Some(client.clone());
        Ok(client)
    }

    /// Forgets a connection totemd closed, so the next call opens a new one.
    async fn closed(&self) {
        *self.client.lock().await = None;
    }

    async fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        let client = self
            .client()
            .await
            .map_err(|e| format!("cannot reach totemd: {e:#}"))?;
        match client.call_raw(method, params).await {
            Ok(value) => Ok(value),
            Err(ClientError::Rpc { message, .. }) => Err(tools::in_tool_words(&message)),
            Err(e) => {
                self.closed().await;
                Err(format!("{e}; call the tool again"))
            }
        }
    }
}

/// Totem's MCP server. Cheap to clone: the streamable HTTP transport makes one per session
/// ([`TotemMcp::for_new_session`]).
#[derive(Clone)]
pub struct TotemMcp {
    connector: Arc<Connector>,
    instructions: String,
    /// The runs this client's `session_ask` started: their questions are its to put to its person.
    started: Arc<Mutex<HashSet<String>>>,
    /// Said with every tool error and every empty list when this server had to start a new,
    /// empty totemd (the host may have dropped TOTEM_HOME): where its data is and what to do.
    fresh_daemon: Option<Arc<str>>,
}

const INSTRUCTIONS: &str = "Totem is a coding agent. Find a project with project_list, open a \
session with session_create (or reuse one from session_list), then give the agent work with \
session_ask: it answers with the run's status and final text. A run still going when the wait \
ends keeps going; follow it with run_wait. Permission questions go to the person at your host when \
your client supports elicitation; otherwise session_ask returns with them and a person answers \
them in `totem attach`.";

impl TotemMcp {
    /// The server, calling totemd through `connector`.
    pub fn new(connector: Arc<Connector>) -> TotemMcp {
        TotemMcp {
            connector,
            instructions: INSTRUCTIONS.to_string(),
            started: Arc::default(),
            fresh_daemon: None,
        }
    }

    /// The same server for another MCP session: same connection, none of this one's runs.
    pub fn for_new_session(&self) -> TotemMcp {
        TotemMcp {
            started: Arc::default(),
            ..self.clone()
        }
    }

    /// Adds a sentence to the instructions clients show the model (e.g. the current project).
    pub fn with_note(mut self, note: &str) -> TotemMcp {
        self.instructions.push(' ');
        self.instructions.push_str(note);
        self
    }

    /// Says `note` (about the new totemd this server started) in the instructions, in every tool
    /// error and before every empty `session_list` or `project_list`, where a host's model looking
    /// for the user's sessions reads it.
    pub fn with_fresh_daemon_note(mut self, note: &str) -> TotemMcp {
        self = self.with_note(note);
        self.fresh_daemon = Some(note.into());
        self
    }

    async fn call_method(
        &self,
        method: &'static str,
        arguments: Value,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let call = async {
            match method {
                method::SessionAsk::NAME | method::RunWait::NAME => {
                    self.follow_run(method, arguments, context).await
                }
                _ => self.connector.call(method, arguments).await,
            }
        };
        let answer = tokio::select! {
            answer = call => answer,
            _ = context.ct.cancelled() => Err("cancelled".to_string()),
        };
        match answer {
            Ok(value) => {
                let said = match method {
                    method::SessionAsk::NAME | method::RunWait::NAME => run_words(&value),
                    _ => None,
                };
                let empty_list = matches!(
                    method,
                    method::SessionList::NAME | method::ProjectList::NAME
                ) && value
                    .get("items")
                    .and_then(Value::as_array)
                    .is_some_and(Vec::is_empty);
                let mut result = CallToolResult::structured(value);
                if let Some((sentence, failed)) = said {
                    result.content.insert(0, ContentBlock::text(sentence));
                    result.is_error = Some(failed);
                }
                if let Some(note) = self.fresh_daemon.as_deref().filter(|_| empty_list) {
                    result.content.insert(0, ContentBlock::text(note));
                }
                result
            }
            Err(message) => {
                let mut content = vec![ContentBlock::text(message)];
                if let Some(note) = self.fresh_daemon.as_deref() {
                    content.push(ContentBlock::text(note));
                }
                CallToolResult::error(content)
            }
        }
    }

    /// `session.ask` or `run.wait`; when the client can ask its person, the questions of a run
    /// it started are put to them and the wait goes on after each answer, until the run ends,
    /// `timeoutMs` passes (an open form is then taken back), or a question stays unanswered.
    async fn follow_run(
        &self,
        method: &'static str,
        arguments: Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, String> {
        let session_id = arguments
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_string);
        // The whole call, forms included, ends by `timeoutMs` (the daemon's default and cap).
        let wait_ms = arguments
            .get("timeoutMs")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_WAIT_MS)
            .min(MAX_WAIT_MS);
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        let mut outcome = self
            .wait(method, arguments, session_id.as_deref(), context)
            .await?;
        let Ok(first) = serde_json::from_value::<RunOutcome>(outcome.clone()) else {
            return Ok(outcome);
        };
        if method == method::SessionAsk::NAME {
            lock(&self.started).insert(first.run.id.clone());
        }
        if !elicit::supported(&context.peer) || !lock(&self.started).contains(&first.run.id) {
            return Ok(outcome);
        }
        let mut asked = HashSet::new();
        loop {
            let Ok(now) = serde_json::from_value::<RunOutcome>(outcome.clone()) else {
                return Ok(outcome);
            };
            let fresh: Vec<_> = now
                .questions
                .iter()
                .filter(|q| asked.insert(q.id.clone()))
                .collect();
            if now.run.status != RunStatus::Running || fresh.is_empty() {
                return Ok(outcome);
            }
            let client = self
                .connector
                .client()
                .await
                .map_err(|e| format!("cannot reach totemd: {e:#}"))?;
            for question in fresh {
                let mut form =
                    elicit::Form::open(client.clone(), question.clone(), context.peer.clone());
                // However this call ends (the host may give up on it), the form goes with it.
                let _withdraw = form.withdraw_on_drop();
                if tokio::time::timeout_at(deadline, form.answered())
                    .await
                    .is_err()
                {
                    // `timeoutMs` passed with the form open: it is taken back, and the call
                    // answers with the run as it is now, its question waiting.
                    return self
                        .connector
                        .call(method::RunGet::NAME, json!({ "runId": now.run.id }))
                        .await;
                }
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let wait = json!({
                "runId": now.run.id,
                "timeoutMs": u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
            });
            outcome = self
                .wait(
                    method::RunWait::NAME,
                    wait,
                    Some(&now.run.session_id),
                    context,
                )
                .await?;
        }
    }

    /// One call of a method that waits on a run; with a progress token, the session's events
    /// are passed on as progress while it waits.
    async fn wait(
        &self,
        method: &'static str,
        arguments: Value,
        session_id: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, String> {
        match (context.meta.get_progress_token(), session_id) {
            (Some(token), Some(session_id)) => {
                self.wait_with_progress(method, arguments, session_id, token, context)
                    .await
            }
            _ => self.connector.call(method, arguments).await,
        }
    }

    /// [`TotemMcp::wait`] passing the session's events on as progress.
    async fn wait_with_progress(
        &self,
        method: &'static str,
        arguments: Value,
        session_id: &str,
        token: ProgressToken,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, String> {
        let events = self.follow(session_id).await;
        let ask = self.connector.call(method, arguments);
        tokio::pin!(ask);
        let Some((client, mut events)) = events else {
            return ask.await;
        };
        let mut step = 0.0;
        let mut tell = async |kind: &EventKind| {
            if let Some(message) = progress_message(kind) {
                step += 1.0;
                let note =
                    ProgressNotificationParam::new(token.clone(), step).with_message(message);
                let _ = context.peer.notify_progress(note).await;
            }
        };
        // Runs whose end already came by: the answer of one of them needs no further wait.
        let mut ended = Vec::new();
        let answer = loop {
            tokio::select! {
                biased;
                event = events.next() => match event {
                    Some(Ok(event)) => {
                        if let Some(run_id) = ended_run(&event.kind) {
                            ended.push(run_id.to_string());
                        }
                        tell(&event.kind).await
                    }
                    // The subscription ended; the answer still comes.
                    _ => break ask.await,
                },
                answer = &mut ask => break answer,
            }
        };
        // The answer can overtake the run's last events on the way here: pass them on too, up to
        // the run's end.
        if let Ok(outcome) = &answer
            && let Some(run_id) = outcome["run"]["id"].as_str()
            && outcome["run"]["status"] != "running"
            && !ended.iter().any(|id| id == run_id)
        {
            let rest = async {
                while let Some(Ok(event)) = events.next().await {
                    tell(&event.kind).await;
                    if ended_run(&event.kind) == Some(run_id) {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), rest).await;
        }
        let _ = client.unsubscribe(&events.subscription).await;
        answer
    }

    /// Subscribes to the session from its newest event on.
    async fn follow(&self, session_id: &str) -> Option<(Client, EventStream)> {
        let client = self.connector.client().await.ok()?;
        let session = client
            .call_raw(method::SessionGet::NAME, json!({ "sessionId": session_id }))
            .await
            .ok()?;
        let after = session.get("lastSeq")?.as_u64()?;
        let events = client.subscribe(session_id, after).await.ok()?;
        Some((client, events))
    }
}

/// A sentence for the host's model about a run outcome that needs one, and whether the call
/// failed: a run that failed (an unknown model, say) is an error; a run waiting on questions
/// waits for a person, whom only `totem attach` or the web page can reach once no form is open.
fn run_words(value: &Value) -> Option<(String, bool)> {
    let outcome = serde_json::from_value::<RunOutcome>(value.clone()).ok()?;
    match outcome.run.status {
        RunStatus::Failed => Some((
            format!(
                "The run failed: {}",
                outcome
                    .run
                    .error
                    .as_deref()
                    .unwrap_or("no reason was given")
            ),
            true,
        )),
        RunStatus::Running if !outcome.questions.is_empty() => {
            let n = outcome.questions.len();
            Some((
                format!(
                    "The run is waiting for a person to answer {} in `totem attach` (or Totem's web page, `totem web`): you cannot answer {}. Tell the user, then follow the run with run_wait.",
                    if n == 1 {
                        "a permission question".to_string()
                    } else {
                        format!("{n} permission questions")
                    },
                    if n == 1 { "it" } else { "them" },
                ),
                false,
            ))
        }
        _ => None,
    }
}

/// The set, even after a panic elsewhere poisoned its lock (it holds plain ids).
fn lock(started: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
    started
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The run an event ends, if it ends one.
fn ended_run(kind: &EventKind) -> Option<&str> {
    kind.ended_run().map(|run| run.id.as_str())
}

/// One line about an event worth telling the waiting client, if it is one.
fn progress_message(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::RunStarted { .. } => "run started".to_string(),
        EventKind::PartDone {
            part: Part::ToolCall { tool, .. },
            ..
        } => format!("calling {tool}"),
        EventKind::PartDone {
            part: Part::Text { text },
            ..
        } => shorten(text),
        EventKind::PermissionAsked { question } => {
            format!("waiting for permission: {}", question.explanation)
        }
        EventKind::Notice { text, .. } => shorten(text),
        _ => return None,
    })
}

fn shorten(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or("");
    match line.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

impl ServerHandler for TotemMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("totem", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            tools::tools().iter().map(|t| t.tool.clone()).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::find(name).map(|t| t.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = tools::find(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool `{}`; tools/list names them", request.name),
                None,
            ));
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        Ok(self
            .call_method(tool.method, arguments, &context)
            .await
            .into())
    }
}
