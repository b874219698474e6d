//! Provider simulators: one HTTP server per provider on 127.0.0.1 (port 0) that speaks that
//! provider's wire format byte for byte (see shared/PROVIDERS.md), answers from a per-test queue
//! of scripted replies, records every request, and serves the model-list endpoints.
//!
//! ```ignore
//! let sim = Sim::start(SimKind::Anthropic).await;
//! sim.push(Reply::stream([SimEvent::text("Hello")]));
//! // point a provider at sim.url(), call it, then:
//! assert_eq!(sim.chat_requests()[0].body["max_tokens"], 8192);
//! ```

mod anthropic;
pub mod gemini;
pub mod harness;
mod ollama;
mod openai;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which provider a simulator speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SimKind {
    Ollama,
    /// OpenAI chat completions, OpenAI's own shapes (`/v1/models` without context lengths).
    Openai,
    /// OpenAI chat completions as OpenRouter speaks them: priced model list, keep-alive
    /// comments, `{"error":{"code":<int>,…}}` errors. Served under `/api/v1`.
    Openrouter,
    Anthropic,
    Gemini,
}

/// One scripted answer to the next chat request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Reply {
    /// A streamed answer.
    Stream(Script),
    /// An HTTP error with the provider's real error body.
    #[serde(rename_all = "camelCase")]
    Error {
        status: u16,
        message: String,
        /// Provider error code or type (`context_length_exceeded`, `overloaded_error`…);
        /// defaults to what the provider uses for `status`.
        #[serde(default)]
        code: Option<String>,
        /// Value of a `Retry-After` header, if any.
        #[serde(default)]
        retry_after: Option<String>,
    },
    /// `deltas` one-token text deltas, pre-rendered and sent as fast as the socket takes them.
    #[serde(rename_all = "camelCase")]
    Bench { deltas: usize },
    /// Exact bytes, for cases no script covers.
    #[serde(rename_all = "camelCase")]
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
}

impl Reply {
    /// A streamed answer made of these events, with no faults.
    pub fn stream(events: impl IntoIterator<Item = SimEvent>) -> Reply {
        Reply::Stream(Script::new(events))
    }

    /// An HTTP error with the provider's default code for the status.
    pub fn error(status: u16, message: impl Into<String>) -> Reply {
        Reply::Error {
            status,
            message: message.into(),
            code: None,
            retry_after: None,
        }
    }
}

/// A streamed answer and the faults to inject into it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Script {
    pub events: Vec<SimEvent>,
    /// Pause between two chunks (not before the first).
    #[serde(default)]
    pub delay_ms: u64,
    /// Pause before the first chunk, as a model still loading or reading a long prompt.
    #[serde(default)]
    pub first_delay_ms: u64,
    /// Send this many chunks, then drop the connection mid-body.
    #[serde(default)]
    pub cut_after: Option<usize>,
    /// Send a line of garbage just before chunk number N.
    #[serde(default)]
    pub malformed_at: Option<usize>,
    /// OpenAI-compatible only: put reasoning in `reasoning_content` instead of `reasoning`.
    #[serde(default)]
    pub reasoning_content: bool,
    /// OpenAI-compatible only: send an SSE keep-alive comment before every chunk.
    #[serde(default)]
    pub keepalive: bool,
    /// OpenAI-compatible only: send each call's `function.arguments` whole, as a JSON object
    /// (not a string), as some compatible servers do.
    #[serde(default)]
    pub object_arguments: bool,
    /// OpenAI-compatible only: put reasoning in `content` between `<think>` tags, each tag cut
    /// across two chunks (`<thi` + `nk>`), as llama.cpp does with reasoning format `none`.
    #[serde(default)]
    pub think_tags: bool,
    /// OpenAI-compatible only: `finish_reason` is `""` (not null) on every chunk before the last,
    /// as SGLang, older Ollama `/v1` and some gateways send it.
    #[serde(default)]
    pub empty_finish: bool,
    /// OpenAI-compatible only: each call's function name is streamed in two pieces.
    #[serde(default)]
    pub split_names: bool,
}

impl Script {
    pub fn new(events: impl IntoIterator<Item = SimEvent>) -> Script {
        Script {
            events: events.into_iter().collect(),
            ..Script::default()
        }
    }
}

/// One thing the simulated model does. Consecutive `ToolCall`s are parallel calls of one turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum SimEvent {
    Text {
        text: String,
    },
    /// Reasoning; `signature` is Anthropic's block signature or Gemini's `thoughtSignature`.
    Thinking {
        text: String,
        #[serde(default)]
        signature: Option<String>,
    },
    /// Anthropic `redacted_thinking`.
    RedactedThinking {
        data: String,
    },
    ToolCall {
        id: String,
        name: String,
        arguments: Value,
        /// Gemini `thoughtSignature` on the `functionCall` part.
        #[serde(default)]
        signature: Option<String>,
    },
    /// Gemini: an empty text part carrying only a `thoughtSignature`.
    Signature {
        signature: String,
    },
    #[serde(rename_all = "camelCase")]
    Usage {
        input: u64,
        output: u64,
        #[serde(default)]
        cached: u64,
        #[serde(default)]
        reasoning: u64,
    },
    /// The provider's own finish reason, overriding the derived one.
    Finish {
        reason: String,
    },
    /// A mid-stream error in the provider's form; the stream ends after it.
    Error {
        message: String,
        #[serde(default)]
        code: Option<String>,
    },
}

impl SimEvent {
    pub fn text(text: impl Into<String>) -> SimEvent {
        SimEvent::Text { text: text.into() }
    }

    pub fn thinking(text: impl Into<String>, signature: Option<&str>) -> SimEvent {
        SimEvent::Thinking {
            text: text.into(),
            signature: signature.map(str::to_owned),
        }
    }

    pub fn tool_call(id: &str, name: &str, arguments: Value) -> SimEvent {
        SimEvent::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments,
            signature: None,
        }
    }

    pub fn usage(input: u64, output: u64) -> SimEvent {
        SimEvent::Usage {
            input,
            output,
            cached: 0,
            reasoning: 0,
        }
    }
}

/// A model the simulator lists, rendered in each provider's catalogue shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimModel {
    pub id: String,
    pub context_window: u64,
    #[serde(default)]
    pub tools: bool,
    #[serde(default)]
    pub thinking: bool,
    #[serde(default)]
    pub vision: bool,
    /// Anthropic: adaptive thinking supported.
    #[serde(default)]
    pub adaptive: bool,
    /// Anthropic: only adaptive thinking is accepted (Opus 4.7 and later): `enabled` is a 400.
    #[serde(default)]
    pub adaptive_only: bool,
    /// An embedding model (LM Studio lists its type; Ollama its `embedding` capability).
    #[serde(default)]
    pub embedding: bool,
    /// USD per million tokens (OpenRouter lists them).
    #[serde(default)]
    pub input_price: Option<f64>,
    #[serde(default)]
    pub output_price: Option<f64>,
}

impl SimModel {
    pub fn new(id: &str, context_window: u64) -> SimModel {
        SimModel {
            id: id.to_owned(),
            context_window,
            tools: true,
            thinking: false,
            vision: false,
            adaptive: false,
            adaptive_only: false,
            embedding: false,
            input_price: None,
            output_price: None,
        }
    }

    pub fn thinking(mut self) -> SimModel {
        self.thinking = true;
        self
    }

    pub fn adaptive(mut self) -> SimModel {
        self.thinking = true;
        self.adaptive = true;
        self
    }

    /// Opus 4.7 and later: adaptive thinking only.
    pub fn adaptive_only(mut self) -> SimModel {
        self.thinking = true;
        self.adaptive = true;
        self.adaptive_only = true;
        self
    }

    /// An embedding model: no tools, no chat.
    pub fn embedding(mut self) -> SimModel {
        self.tools = false;
        self.embedding = true;
        self
    }

    pub fn without_tools(mut self) -> SimModel {
        self.tools = false;
        self
    }
}

/// Wire variants of real servers a simulator can take on besides its provider's own shapes.
#[derive(Debug, Clone, Default)]
pub struct Variants {
    /// Anthropic: a model list without `capabilities` (gateways, older lists).
    pub bare_model_list: bool,
    /// Ollama: no `/api/show` (a server that speaks only part of Ollama's API): 404.
    pub no_show: bool,
    /// OpenAI-compatible as llama.cpp: `/v1/models` entries carry `meta.n_ctx_train` (the
    /// trained window, the model's `context_window`) and `GET /props` says the server runs with
    /// this `n_ctx`.
    pub llamacpp_n_ctx: Option<u64>,
    /// OpenAI-compatible as LM Studio: `GET /api/v0/models` lists each model's type and
    /// `max_context_length`; the first model is loaded with this `loaded_context_length`.
    pub lmstudio_loaded_ctx: Option<u64>,
    /// OpenAI-compatible as a server without JSON-schema answers (llama.cpp builds before
    /// `json_schema` in `response_format`): such a request is a 400.
    pub no_json_schema: bool,
    /// OpenAI-compatible as DeepSeek's API: reasoning streams as `reasoning_content`, and an
    /// assistant message with `tool_calls` but no `reasoning_content` is a 400.
    pub deepseek: bool,
    /// OpenAI-compatible as Gemini's OpenAI endpoint: calls carry
    /// `extra_content.google.thought_signature`; a `gemini-3` model answers 400 (in an array, as
    /// Google does) when the current turn's first call in an assistant message lacks it.
    pub gemini_openai: bool,
    /// OpenAI-compatible as Azure OpenAI (or a gateway) in front of reasoning models: a
    /// thinking model answers 400 "Unsupported parameter: 'max_tokens'" to `max_tokens`.
    pub reasoning_wants_completion_tokens: bool,
    /// Gemini behind a proxy that drops `?alt=sse`: the answer comes as one JSON array of the
    /// responses (`application/json`), as the real API sends `streamGenerateContent` without it.
    pub gemini_array: bool,
    /// OpenAI-compatible as vLLM started without `--enable-auto-tool-choice`: a request with
    /// tools and `tool_choice` "auto" (or none, which vLLM takes as "auto") is a 400.
    pub vllm_no_auto_tools: bool,
    /// Which simulator this is in the process: another simulator is another server, whose
    /// models have other digests even where it lists the same ones.
    instance: u64,
}

static NEXT_INSTANCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Variants {
    pub(crate) fn instance(&self) -> u64 {
        self.instance
    }
}

/// One request the simulator received.
#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    /// Header names lowercased.
    pub headers: BTreeMap<String, String>,
    /// The JSON body, or `Null` when there was none (or it was not JSON).
    pub body: Value,
    /// The body's length in bytes, as sent.
    pub body_bytes: usize,
    /// Ollama: the prompt exceeded `num_ctx` and was silently truncated.
    pub truncated: bool,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// A reply ready to send.
#[derive(Clone)]
struct Prepared {
    status: u16,
    content_type: String,
    headers: Vec<(String, String)>,
    frames: Vec<Bytes>,
    delay: Duration,
    first_delay: Duration,
    cut_after: Option<usize>,
    malformed_at: Option<usize>,
}

enum Queued {
    /// Rendered when the request arrives (it may depend on the request, e.g. `num_ctx`).
    Reply(Reply),
    /// Rendered when queued, so a benchmark times the client, not the simulator.
    Ready(Prepared),
}

struct SimState {
    kind: SimKind,
    queue: VecDeque<Queued>,
    requests: Vec<Recorded>,
    models: Vec<SimModel>,
    /// Ollama's `num_ctx` when the request sets none.
    ollama_default_ctx: u64,
    log_requests: bool,
    variants: Variants,
}

/// A running simulator. Stops when dropped.
pub struct Sim {
    kind: SimKind,
    addr: SocketAddr,
    state: Arc<Mutex<SimState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sim {
    /// Starts a simulator on 127.0.0.1, on a free port.
    pub async fn start(kind: SimKind) -> Sim {
        Sim::start_on(kind, 0)
            .await
            .unwrap_or_else(|e| panic!("cannot start the {kind:?} simulator: {e}"))
    }

    /// Starts a simulator on 127.0.0.1:`port` (0 for any free port).
    pub async fn start_on(kind: SimKind, port: u16) -> std::io::Result<Sim> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(SimState {
            kind,
            queue: VecDeque::new(),
            requests: Vec::new(),
            models: default_models(kind),
            ollama_default_ctx: 4096,
            log_requests: false,
            variants: Variants {
                instance: NEXT_INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                ..Variants::default()
            },
        }));
        let app = Router::new().fallback(handle).with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Sim {
            kind,
            addr,
            state,
            task,
        })
    }

    pub fn kind(&self) -> SimKind {
        self.kind
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL a provider config takes: the host root, plus `/v1` (`/api/v1` for
    /// OpenRouter) for OpenAI-compatible servers.
    pub fn url(&self) -> String {
        match self.kind {
            SimKind::Openai => format!("http://{}/v1", self.addr),
            SimKind::Openrouter => format!("http://{}/api/v1", self.addr),
            _ => format!("http://{}", self.addr),
        }
    }

    /// Queues the answer to the next chat request. With an empty queue the simulator answers
    /// HTTP 500 "totem-sim: no scripted reply left".
    pub fn push(&self, reply: Reply) {
        let queued = match reply {
            Reply::Bench { deltas } => Queued::Ready(render_bench(self.kind, deltas)),
            other => Queued::Reply(other),
        };
        self.lock().queue.push_back(queued);
    }

    /// Drops the answers still queued (a run that ended before asking for them).
    pub fn clear_replies(&self) {
        self.lock().queue.clear();
    }

    /// Replaces the model list.
    pub fn set_models(&self, models: Vec<SimModel>) {
        self.lock().models = models;
    }

    /// Ollama: the context used when a request sets no `num_ctx` (4096 by default, as on a
    /// small-VRAM server).
    pub fn set_ollama_default_ctx(&self, ctx: u64) {
        self.lock().ollama_default_ctx = ctx;
    }

    /// Takes on the wire variants `change` sets.
    pub fn set_variants(&self, change: impl FnOnce(&mut Variants)) {
        change(&mut self.lock().variants);
    }

    /// Print every request to stderr as one JSON line (for `totem-sim`).
    pub fn set_log_requests(&self, on: bool) {
        self.lock().log_requests = on;
    }

    /// Every request so far, model lists included.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// The chat (generation) requests so far.
    pub fn chat_requests(&self) -> Vec<Recorded> {
        let kind = self.kind;
        self.requests()
            .into_iter()
            .filter(|r| is_chat_path(kind, &r.path))
            .collect()
    }

    /// Replies still queued.
    pub fn pending(&self) -> usize {
        self.lock().queue.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn is_chat_path(kind: SimKind, path: &str) -> bool {
    match kind {
        SimKind::Ollama => path.starts_with("/api/chat"),
        SimKind::Openai | SimKind::Openrouter => path.ends_with("/chat/completions"),
        SimKind::Anthropic => path.starts_with("/v1/messages"),
        SimKind::Gemini => path.contains(":streamGenerateContent"),
    }
}

fn default_models(kind: SimKind) -> Vec<SimModel> {
    match kind {
        SimKind::Ollama => vec![
            SimModel::new("qwen3:8b", 40960).thinking(),
            SimModel::new("llama3.2:latest", 131072),
            SimModel {
                vision: true,
                ..SimModel::new("gemma3:4b", 131072).without_tools()
            },
        ],
        SimKind::Openai => vec![
            SimModel::new("gpt-4o-mini", 128000),
            SimModel::new("o3-mini", 200000).thinking(),
        ],
        SimKind::Openrouter => vec![
            SimModel {
                vision: true,
                input_price: Some(3.0),
                output_price: Some(15.0),
                ..SimModel::new("anthropic/claude-sonnet-4", 200000).thinking()
            },
            SimModel {
                input_price: Some(0.15),
                output_price: Some(0.6),
                ..SimModel::new("openai/gpt-4o-mini", 128000)
            },
        ],
        SimKind::Anthropic => vec![
            SimModel::new("claude-sonnet-4-5", 200000).thinking(),
            SimModel::new("claude-opus-4-6", 1000000).adaptive(),
            SimModel::new("claude-3-5-haiku-20241022", 200000),
        ],
        SimKind::Gemini => vec![
            SimModel::new("gemini-2.5-flash", 1048576).thinking(),
            SimModel::new("gemini-2.5-pro", 1048576).thinking(),
            SimModel::new("gemini-3-pro-preview", 1048576).thinking(),
            SimModel::new("gemini-2.0-flash", 1048576),
        ],
    }
}

async fn handle(
    State(state): State<Arc<Mutex<SimState>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut recorded = Recorded {
        method: method.to_string(),
        path: path.clone(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: json.clone(),
        body_bytes: body.len(),
        truncated: false,
    };

    let mut guard = state.lock().unwrap_or_else(|p| p.into_inner());
    let kind = guard.kind;
    let rejected = if is_chat_path(kind, &path) {
        match kind {
            SimKind::Ollama => ollama::reject(&json, &guard.models),
            SimKind::Anthropic => anthropic::reject(&json, &recorded.headers, &guard.models),
            SimKind::Gemini => gemini::reject(&path, &json, &guard.models),
            SimKind::Openai | SimKind::Openrouter => openai::reject_format(&json, &guard.variants)
                .or_else(|| openai::reject(kind, &json, &guard.models, &guard.variants)),
        }
        .or_else(|| constrained_mismatch(kind, &json, guard.queue.front()))
    } else {
        None
    };
    let prepared = if let Some(rejected) = rejected {
        rejected
    } else if is_chat_path(kind, &path) {
        let queued = guard.queue.pop_front().unwrap_or_else(|| {
            Queued::Reply(Reply::error(500, "totem-sim: no scripted reply left"))
        });
        match queued {
            Queued::Ready(prepared) => prepared,
            Queued::Reply(reply) => {
                let context = RenderContext {
                    request: &json,
                    ollama_default_ctx: guard.ollama_default_ctx,
                    variants: &guard.variants,
                };
                let (prepared, truncated) = render(kind, reply, &context);
                recorded.truncated = truncated;
                prepared
            }
        }
    } else {
        catalogue(
            kind,
            &method,
            uri.path(),
            &json,
            &guard.models,
            &guard.variants,
        )
    };
    if guard.log_requests
        && let Ok(line) = serde_json::to_string(&recorded)
    {
        eprintln!("{line}");
    }
    guard.requests.push(recorded);
    drop(guard);
    respond(prepared)
}

/// The JSON schema a request holds the answer to: `response_format.json_schema.schema`
/// (OpenAI-compatible) or `format` (Ollama, when an object).
pub fn answer_schema(kind: SimKind, request: &Value) -> Option<&Value> {
    match kind {
        SimKind::Ollama => request.get("format").filter(|f| f.is_object()),
        SimKind::Openai | SimKind::Openrouter => {
            let format = request.get("response_format")?;
            match format["type"].as_str() {
                Some("json_schema") => format["json_schema"].get("schema"),
                Some("json_object") => format.get("schema"),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A constrained server only ever answers JSON that matches the request's schema: a scripted
/// text answer that does not is a mistake in the test, answered 500 with what is wrong.
fn constrained_mismatch(kind: SimKind, request: &Value, next: Option<&Queued>) -> Option<Prepared> {
    let schema = answer_schema(kind, request)?;
    let Some(Queued::Reply(Reply::Stream(script))) = next else {
        return None;
    };
    let text: String = script
        .events
        .iter()
        .filter_map(|e| match e {
            SimEvent::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let problem = match serde_json::from_str::<Value>(&text) {
        Err(e) => Some(format!("not JSON ({e})")),
        Ok(answer) => match jsonschema::validator_for(schema) {
            Err(e) => Some(format!("the schema does not compile ({e})")),
            Ok(validator) => validator.iter_errors(&answer).next().map(|e| e.to_string()),
        },
    }?;
    let message = format!(
        "totem-sim: the scripted answer {text:?} cannot come from a server holding the answer to the request's JSON schema: {problem}"
    );
    Some(json_reply(
        500,
        serde_json::json!({"error": message}),
        Vec::new(),
    ))
}

/// What a renderer may look at.
pub(crate) struct RenderContext<'a> {
    pub request: &'a Value,
    pub ollama_default_ctx: u64,
    pub variants: &'a Variants,
}

fn render(kind: SimKind, reply: Reply, context: &RenderContext<'_>) -> (Prepared, bool) {
    match reply {
        Reply::Stream(script)
            if matches!(kind, SimKind::Openai | SimKind::Openrouter)
                && context.request["stream"] != Value::Bool(true) =>
        {
            // Asked without streaming: the whole answer as one chat completion.
            (
                json_reply(200, openai::render_whole(&script, context), Vec::new()),
                false,
            )
        }
        Reply::Stream(script) => {
            let (frames, truncated) = match kind {
                SimKind::Ollama => ollama::render(&script, context),
                SimKind::Openai | SimKind::Openrouter => {
                    (openai::render(&script, context, kind), false)
                }
                SimKind::Anthropic => (anthropic::render(&script, context), false),
                SimKind::Gemini => (gemini::render(&script, context), false),
            };
            let frames = if kind == SimKind::Openrouter || script.keepalive {
                openai::with_keepalives(frames)
            } else {
                frames
            };
            let array = kind == SimKind::Gemini && context.variants.gemini_array;
            let frames = if array {
                gemini::as_array(&frames)
            } else {
                frames
            };
            (
                Prepared {
                    status: 200,
                    content_type: if array {
                        "application/json; charset=UTF-8".to_owned()
                    } else {
                        stream_content_type(kind).to_owned()
                    },
                    headers: Vec::new(),
                    frames,
                    delay: Duration::from_millis(script.delay_ms),
                    first_delay: Duration::from_millis(script.first_delay_ms),
                    cut_after: script.cut_after,
                    malformed_at: script.malformed_at,
                },
                truncated,
            )
        }
        Reply::Error {
            status,
            message,
            code,
            retry_after,
        } => {
            let body = match kind {
                SimKind::Ollama => ollama::error_body(&message),
                SimKind::Openai | SimKind::Openrouter => {
                    openai::error_body(kind, status, &message, code.as_deref())
                }
                SimKind::Anthropic => anthropic::error_body(status, &message, code.as_deref()),
                SimKind::Gemini => {
                    gemini::error_body_with_delay(status, &message, code.as_deref(), &retry_after)
                }
            };
            let mut headers = Vec::new();
            // Gemini says how long to wait in the body's RetryInfo, not in a header.
            if let Some(retry_after) = retry_after.filter(|_| kind != SimKind::Gemini) {
                headers.push(("retry-after".to_owned(), retry_after));
            }
            (json_reply(status, body, headers), false)
        }
        Reply::Bench { deltas } => (render_bench(kind, deltas), false),
        Reply::Raw {
            status,
            content_type,
            body,
        } => (
            Prepared {
                status,
                content_type,
                headers: Vec::new(),
                frames: vec![Bytes::from(body)],
                delay: Duration::ZERO,
                first_delay: Duration::ZERO,
                cut_after: None,
                malformed_at: None,
            },
            false,
        ),
    }
}

fn stream_content_type(kind: SimKind) -> &'static str {
    match kind {
        SimKind::Ollama => "application/x-ndjson",
        _ => "text/event-stream",
    }
}

/// `deltas` text deltas of one token each, coalesced into 64 KiB writes. Rendered once per kind
/// and size: rendering 100,000 events costs more than parsing them, and the benchmark pushes the
/// same reply for every run (the chunks are `Bytes`, so a copy shares them).
fn render_bench(kind: SimKind, deltas: usize) -> Prepared {
    static RENDERED: std::sync::OnceLock<Mutex<HashMap<(SimKind, usize), Prepared>>> =
        std::sync::OnceLock::new();
    let cache = RENDERED.get_or_init(Mutex::default);
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    cache
        .entry((kind, deltas))
        .or_insert_with(|| render_bench_uncached(kind, deltas))
        .clone()
}

/// Bytes of every token of a [`Reply::Bench`] answer.
pub const BENCH_TOKEN_BYTES: usize = 4;

/// Token `i` of a [`Reply::Bench`] answer: a space and three letters that do not repeat with any
/// period shorter than 17,576 tokens, so the daemon's loop guard (which cuts a model that streams
/// one span over and over) never takes a benchmark answer for a looping model.
pub fn bench_token(i: usize) -> String {
    let mut n = (i * 7919 + 13) % 17_576;
    let mut token = String::from(" ");
    for _ in 0..3 {
        token.push(char::from(b'a' + (n % 26) as u8));
        n /= 26;
    }
    token
}

/// The whole text of a [`Reply::Bench`] answer of `deltas` tokens.
pub fn bench_text(deltas: usize) -> String {
    (0..deltas).map(bench_token).collect()
}

fn render_bench_uncached(kind: SimKind, deltas: usize) -> Prepared {
    let script = Script::new(
        (0..deltas)
            .map(|i| SimEvent::text(bench_token(i)))
            .chain([SimEvent::usage(10, deltas as u64)]),
    );
    let request = serde_json::json!({"stream_options": {"include_usage": true}});
    let variants = Variants::default();
    let context = RenderContext {
        request: &request,
        ollama_default_ctx: u64::MAX,
        variants: &variants,
    };
    let (mut prepared, _) = render(kind, Reply::Stream(script), &context);
    let mut chunks = Vec::new();
    let mut current = Vec::with_capacity(64 * 1024);
    for frame in prepared.frames.drain(..) {
        current.extend_from_slice(&frame);
        if current.len() >= 64 * 1024 {
            chunks.push(Bytes::from(std::mem::replace(
                &mut current,
                Vec::with_capacity(64 * 1024),
            )));
        }
    }
    if !current.is_empty() {
        chunks.push(Bytes::from(current));
    }
    prepared.frames = chunks;
    prepared
}

fn json_reply(status: u16, body: Value, headers: Vec<(String, String)>) -> Prepared {
    Prepared {
        status,
        content_type: "application/json".to_owned(),
        headers,
        frames: vec![Bytes::from(body.to_string())],
        delay: Duration::ZERO,
        first_delay: Duration::ZERO,
        cut_after: None,
        malformed_at: None,
    }
}

fn catalogue(
    kind: SimKind,
    method: &Method,
    path: &str,
    request: &Value,
    models: &[SimModel],
    variants: &Variants,
) -> Prepared {
    let found = match kind {
        SimKind::Ollama => ollama::catalogue(method, path, request, models, variants),
        SimKind::Openai | SimKind::Openrouter => {
            openai::catalogue(kind, method, path, models, variants)
        }
        SimKind::Anthropic => anthropic::catalogue(method, path, models, variants),
        SimKind::Gemini => gemini::catalogue(method, path, models),
    };
    found.unwrap_or_else(|| {
        let message = format!("totem-sim: no route for {method} {path}");
        let body = match kind {
            SimKind::Ollama => ollama::error_body(&message),
            SimKind::Openai | SimKind::Openrouter => openai::error_body(kind, 404, &message, None),
            SimKind::Anthropic => anthropic::error_body(404, &message, None),
            SimKind::Gemini => gemini::error_body(404, &message, None),
        };
        json_reply(404, body, Vec::new())
    })
}

fn respond(prepared: Prepared) -> Response {
    let Prepared {
        status,
        content_type,
        headers,
        frames,
        delay,
        first_delay,
        cut_after,
        malformed_at,
    } = prepared;
    let body = async_stream::stream! {
        for (index, frame) in frames.into_iter().enumerate() {
            if cut_after == Some(index) {
                // Let what was written reach the client before the connection drops.
                tokio::time::sleep(Duration::from_millis(50)).await;
                yield Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "totem-sim: cut"));
                return;
            }
            let pause = match index {
                0 => first_delay,
                _ => delay,
            };
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            if malformed_at == Some(index) {
                yield Ok(Bytes::from_static(b"data: {\"this is\": not json\n\n"));
            }
            yield Ok::<Bytes, std::io::Error>(frame);
        }
        if cut_after.is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            yield Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "totem-sim: cut"));
        }
    };
    let mut builder = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", content_type);
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    builder
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// Splits text roughly in half on a char boundary (to stream one value in two fragments).
pub(crate) fn halves(text: &str) -> (&str, &str) {
    let mut mid = text.len() / 2;
    while !text.is_char_boundary(mid) {
        mid += 1;
    }
    text.split_at(mid)
}

/// The last usage event of a script.
pub(crate) fn script_usage(script: &Script) -> Option<(u64, u64, u64, u64)> {
    script.events.iter().rev().find_map(|e| match e {
        SimEvent::Usage {
            input,
            output,
            cached,
            reasoning,
        } => Some((*input, *output, *cached, *reasoning)),
        _ => None,
    })
}

/// The finish reason a script overrides, if any.
pub(crate) fn script_finish(script: &Script) -> Option<&str> {
    script.events.iter().rev().find_map(|e| match e {
        SimEvent::Finish { reason } => Some(reason.as_str()),
        _ => None,
    })
}
