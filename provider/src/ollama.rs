//! Ollama through its native API: `/api/chat` (NDJSON), `/api/tags` and `/api/show`. Never `/v1`,
//! which cannot set `num_ctx` and silently cuts long prompts.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::Provider;
use crate::body::Decoder;
use crate::error::{ProviderError, looks_like_context_overflow};
use crate::event::{FinishReason, StreamEvent, Usage};
use crate::frame::Framing;
use crate::http::{EventStream, Transport, run_stream};
use crate::model::{Capabilities, MODEL_CACHE_TTL, ModelInfo};
use crate::request::{
    AssistantPart, ChatRequest, Message, ReasoningLevel, ToolCall, estimate_tokens,
};
use crate::settings::ProviderConfig;

/// `num_ctx` grows in steps of this many tokens (DESIGN §4).
pub const CTX_STEP: u32 = 4096;

/// Room kept for the answer when the request sets no output limit.
const OUTPUT_RESERVE: u32 = 2048;

/// The request cannot fit the largest `num_ctx` allowed: compact first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtxDoesNotFit {
    /// Tokens the request needs (prompt estimate plus room for the answer).
    pub needed: u32,
    /// The largest context allowed: the smaller of the model's window and the configured ceiling.
    pub limit: u32,
}

/// Chooses `options.num_ctx`: at least `floor`, grown in steps of [`CTX_STEP`] until `needed`
/// fits, never above the model's `window` or the configured `ceiling`. When `needed` exceeds that
/// limit the request does not fit and must be compacted; it is never silently truncated.
pub fn size_num_ctx(
    needed: u32,
    floor: u32,
    ceiling: Option<u32>,
    window: Option<u32>,
) -> Result<u32, CtxDoesNotFit> {
    let limit = match (window, ceiling) {
        (Some(window), Some(ceiling)) => Some(window.min(ceiling)),
        (window, ceiling) => window.or(ceiling),
    };
    let mut ctx = floor.max(1);
    if needed > ctx {
        let steps = (needed - ctx).div_ceil(CTX_STEP);
        ctx = ctx.saturating_add(steps.saturating_mul(CTX_STEP));
    }
    match limit {
        Some(limit) if needed > limit => Err(CtxDoesNotFit { needed, limit }),
        Some(limit) => Ok(ctx.min(limit)),
        None => Ok(ctx),
    }
}

/// An Ollama server.
#[derive(Clone)]
pub struct OllamaProvider {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Arc<Transport>,
    /// `/api/show` answers by model, kept for [`MODEL_CACHE_TTL`].
    shown: Mutex<HashMap<String, (Instant, ModelInfo)>>,
}

impl OllamaProvider {
    /// A provider calling the server `config` describes; fails only when its HTTP client cannot
    /// be built.
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderError> {
        Ok(OllamaProvider {
            inner: Arc::new(Inner {
                transport: Transport::new(config)?,
                shown: Mutex::new(HashMap::new()),
            }),
        })
    }
}

impl Inner {
    /// The model's window and capabilities, from `/api/show` (cached).
    async fn show(&self, model: &str, retries: bool) -> Result<ModelInfo, ProviderError> {
        if let Ok(cache) = self.shown.lock()
            && let Some((at, info)) = cache.get(model)
            && at.elapsed() < MODEL_CACHE_TTL
        {
            return Ok(info.clone());
        }
        let url = self.transport.url("/api/show");
        let body = self
            .transport
            .fetch_json(
                |client| client.post(&url).json(&json!({"model": model})),
                model,
                parse_error,
                retries,
            )
            .await?;
        let info = model_info_from_show(model, &body);
        self.remember(model, &info);
        Ok(info)
    }

    /// `/api/tags`: the installed models, each as `(name, entry)`.
    async fn tags(&self) -> Result<Vec<(String, Value)>, ProviderError> {
        let url = self.transport.url("/api/tags");
        let tags = self
            .transport
            .fetch_json(|client| client.get(&url), "", parse_error, true)
            .await?;
        Ok(tags["models"]
            .as_array()
            .map(|models| {
                models
                    .iter()
                    .filter_map(|m| {
                        let name = m["name"].as_str().or(m["model"].as_str())?;
                        Some((name.to_owned(), m.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// [`Inner::show`], or, from a server that speaks Ollama's API without `/api/show`, the
    /// model's `/api/tags` entry and defaults.
    async fn describe(&self, model: &str, retries: bool) -> Result<ModelInfo, ProviderError> {
        let error = match self.show(model, retries).await {
            Ok(info) => return Ok(info),
            Err(error) if lacks_show(&error) => error,
            Err(error) => return Err(error),
        };
        let tags = self.tags().await?;
        let entry = tags
            .iter()
            .find(|(name, _)| name == model || *name == format!("{model}:latest"))
            .ok_or(error)?;
        let info = model_info_from_tags(model, &entry.1);
        self.remember(model, &info);
        Ok(info)
    }

    fn remember(&self, model: &str, info: &ModelInfo) {
        if let Ok(mut cache) = self.shown.lock() {
            cache.insert(model.to_owned(), (Instant::now(), info.clone()));
        }
    }

    async fn list(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        let tags = self.tags().await?;
        let mut models = Vec::with_capacity(tags.len());
        for (name, entry) in tags {
            // A model's digest names its exact files: what `/api/show` said about them holds
            // for as long as the daemon runs.
            let key = entry["digest"].as_str().map(|digest| {
                (
                    self.transport.config.base().to_owned(),
                    name.clone(),
                    digest.to_owned(),
                )
            });
            if let Some(info) = key.as_ref().and_then(shown_by_digest) {
                self.remember(&name, &info);
                models.push(info);
                continue;
            }
            let info = match self.show(&name, true).await {
                Ok(info) => {
                    if let Some(key) = key {
                        keep_shown_by_digest(key, &info);
                    }
                    info
                }
                Err(error) if lacks_show(&error) => {
                    let info = model_info_from_tags(&name, &entry);
                    self.remember(&name, &info);
                    info
                }
                Err(error) => return Err(error),
            };
            models.push(info);
        }
        Ok(models)
    }

    /// The `/api/chat` body.
    fn body(&self, request: &ChatRequest, info: &ModelInfo) -> Result<Value, ProviderError> {
        let config = &self.transport.config;
        let output = request.max_output_tokens.unwrap_or(OUTPUT_RESERVE);
        let needed = estimate_tokens(request).saturating_add(output);
        let window = info
            .context_window
            .map(|w| u32::try_from(w).unwrap_or(u32::MAX));
        let num_ctx = size_num_ctx(needed, config.ollama.ctx, config.ollama.ctx_max, window)
            .map_err(|e| ProviderError::ContextOverflow {
                provider: config.name.clone(),
                message: format!(
                    "the request needs about {} tokens but model {} may use at most {}",
                    e.needed, request.model, e.limit
                ),
                needed: Some(u64::from(e.needed)),
                limit: Some(u64::from(e.limit)),
            })?;

        let mut options = Map::new();
        options.insert("num_ctx".into(), num_ctx.into());
        if let Some(t) = request.temperature.or(config.temperature) {
            options.insert("temperature".into(), json!(t));
        }
        if let Some(p) = request.top_p {
            options.insert("top_p".into(), json!(p));
        }
        if let Some(p) = request.repeat_penalty {
            options.insert("repeat_penalty".into(), json!(p));
        }
        if let Some(max) = request.max_output_tokens {
            options.insert("num_predict".into(), max.into());
        }

        let mut body = Map::new();
        body.insert("model".into(), request.model.clone().into());
        body.insert("messages".into(), Value::Array(messages(request)));
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(schema) = &request.answer_schema {
            // Ollama holds the answer to this JSON schema.
            body.insert("format".into(), schema.clone());
        }
        if info.capabilities.thinking {
            // Omitting `think` means "on" for a thinking model, so "off" is said explicitly.
            let think = match request.reasoning {
                ReasoningLevel::Off => Value::Bool(false),
                level if request.model.starts_with("gpt-oss") => level.as_str().into(),
                _ => Value::Bool(true),
            };
            body.insert("think".into(), think);
        }
        body.insert("stream".into(), Value::Bool(true));
        if let Some(keep_alive) = &config.ollama.keep_alive {
            // A bare number is seconds to Ollama; anything else is a duration string.
            let value = keep_alive
                .parse::<i64>()
                .map_or_else(|_| Value::from(keep_alive.clone()), Value::from);
            body.insert("keep_alive".into(), value);
        }
        body.insert("options".into(), Value::Object(options));
        Ok(Value::Object(body))
    }
}

fn messages(request: &ChatRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        match message {
            Message::User { text, images } => {
                let mut m = json!({"role": "user", "content": text});
                if !images.is_empty() {
                    m["images"] = images.iter().map(|i| i.data_base64.clone()).collect();
                }
                out.push(m);
            }
            Message::Assistant { parts } => {
                let mut content = String::new();
                let mut thinking = String::new();
                let mut calls = Vec::new();
                for part in parts {
                    match part {
                        AssistantPart::Text { text, .. } => content.push_str(text),
                        AssistantPart::Reasoning { text, .. } => thinking.push_str(text),
                        AssistantPart::RedactedReasoning { .. } => {}
                        // Ollama takes only an object: arguments no repair made one go back
                        // empty (the tool's result already said what was wrong with them).
                        AssistantPart::ToolCall(call) => calls.push(json!({
                            "id": call.id,
                            "function": {"index": calls.len(), "name": call.name,
                                "arguments": if call.arguments.is_object() { call.arguments.clone() } else { json!({}) }}
                        })),
                    }
                }
                let mut m = json!({"role": "assistant", "content": content});
                if !thinking.is_empty() {
                    m["thinking"] = thinking.into();
                }
                if !calls.is_empty() {
                    m["tool_calls"] = calls.into();
                }
                out.push(m);
            }
            Message::ToolResult(result) => {
                let content = if result.is_error {
                    format!("error: {}", result.content)
                } else {
                    result.content.clone()
                };
                out.push(json!({"role": "tool", "content": content,
                    "tool_name": result.tool_name, "tool_call_id": result.call_id}));
            }
        }
    }
    out
}

/// Reads `/api/show`: the trained window is `model_info["<arch>.context_length"]`.
fn model_info_from_show(model: &str, show: &Value) -> ModelInfo {
    let info = &show["model_info"];
    let context_window = info["general.architecture"]
        .as_str()
        .and_then(|arch| info[format!("{arch}.context_length")].as_u64())
        .or_else(|| show["details"]["context_length"].as_u64());
    let has = |cap: &str| {
        show["capabilities"]
            .as_array()
            .is_some_and(|caps| caps.iter().any(|c| c.as_str() == Some(cap)))
    };
    ModelInfo {
        id: model.to_owned(),
        display_name: None,
        context_window,
        max_output_tokens: None,
        capabilities: Capabilities {
            tools: has("tools"),
            thinking: has("thinking"),
            vision: has("vision") || has("image"),
            adaptive_thinking: false,
        },
        prices: None,
    }
}

/// `/api/show` answers by server, model and digest, shared by every provider built for that
/// server in this process.
type DigestKey = (String, String, String);

fn digest_cache() -> &'static Mutex<HashMap<DigestKey, ModelInfo>> {
    static SHOWN: std::sync::OnceLock<Mutex<HashMap<DigestKey, ModelInfo>>> =
        std::sync::OnceLock::new();
    SHOWN.get_or_init(Mutex::default)
}

fn shown_by_digest(key: &DigestKey) -> Option<ModelInfo> {
    digest_cache().lock().ok()?.get(key).cloned()
}

fn keep_shown_by_digest(key: DigestKey, info: &ModelInfo) {
    if let Ok(mut cache) = digest_cache().lock() {
        // Models come and go; a bound keeps a long-lived daemon from keeping them all.
        if cache.len() >= 1024 {
            cache.clear();
        }
        cache.insert(key, info.clone());
    }
}

/// `/api/show` is not there (404, 405 or 501 from a server that speaks only part of Ollama's
/// API). A real Ollama's 404 for an unknown model lands here too; the tags then say it is not
/// installed.
fn lacks_show(error: &ProviderError) -> bool {
    matches!(
        error,
        ProviderError::ModelNotFound { .. }
            | ProviderError::InvalidRequest {
                status: 404 | 405,
                ..
            }
            | ProviderError::Server { status: 501, .. }
    )
}

/// What a `/api/tags` entry tells when `/api/show` cannot: no window (the configured `num_ctx`
/// range applies), tools assumed as for any chat model, thinking and vision not known.
fn model_info_from_tags(model: &str, entry: &Value) -> ModelInfo {
    let families = entry["details"]["families"]
        .as_array()
        .into_iter()
        .flatten()
        .chain([&entry["details"]["family"]])
        .filter_map(Value::as_str);
    let embedding = families
        .chain([model])
        .any(|name| name.to_ascii_lowercase().contains("bert") || name.contains("embed"));
    ModelInfo {
        id: model.to_owned(),
        display_name: None,
        context_window: None,
        max_output_tokens: None,
        capabilities: Capabilities {
            tools: !embedding,
            ..Capabilities::default()
        },
        prices: None,
    }
}

/// `{"error": "…"}`, a plain string on Ollama.
fn parse_error(body: &[u8]) -> Option<(Option<String>, String)> {
    #[derive(Deserialize)]
    struct Body {
        error: String,
    }
    let body: Body = serde_json::from_slice(body).ok()?;
    Some((None, body.error))
}

impl Provider for OllamaProvider {
    fn config(&self) -> &ProviderConfig {
        &self.inner.transport.config
    }

    fn release_idle_client(&self, unused: std::time::Duration) -> bool {
        self.inner.transport.release_idle(unused)
    }

    fn stream(&self, request: ChatRequest) -> EventStream {
        let inner = self.inner.clone();
        let model = request.model.clone();
        let request = Arc::new(request);
        run_stream(
            self.inner.transport.clone(),
            model,
            parse_error,
            Box::new(move || {
                let inner = inner.clone();
                let request = request.clone();
                async move {
                    let info = inner.describe(&request.model, false).await?;
                    let body = inner.body(&request, &info)?;
                    let http = inner
                        .transport
                        .client()?
                        .post(inner.transport.url("/api/chat"))
                        .json(&body);
                    Ok((http, OllamaDecoder::new(inner.transport.name().to_owned())))
                }
                .boxed()
            }),
        )
    }

    fn list_models(&self) -> BoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>> {
        let inner = self.inner.clone();
        async move { inner.list().await }.boxed()
    }

    fn remember_models(&self, models: &[ModelInfo]) {
        for info in models {
            self.inner.remember(&info.id, info);
        }
    }
}

/// Decodes `/api/chat` NDJSON lines.
pub(crate) struct OllamaDecoder {
    provider: String,
    calls: usize,
    done: bool,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow, default)]
    message: Option<LineMessage<'a>>,
    #[serde(default)]
    done: bool,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    done_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    prompt_eval_count: Option<u64>,
    #[serde(default)]
    eval_count: Option<u64>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    error: Option<Cow<'a, str>>,
    #[serde(default)]
    status: Option<u16>,
}

#[derive(Deserialize)]
struct LineMessage<'a> {
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    thinking: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<WireCall>>,
}

#[derive(Deserialize)]
struct WireCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Value,
}

impl OllamaDecoder {
    pub(crate) fn new(provider: String) -> Self {
        OllamaDecoder {
            provider,
            calls: 0,
            done: false,
        }
    }
}

impl Decoder for OllamaDecoder {
    const FRAMING: Framing = Framing::Ndjson;

    fn feed(
        &mut self,
        _event: &str,
        data: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        let line: Line<'_> =
            crate::wire::parse_event(data).map_err(|e| ProviderError::Malformed {
                provider: self.provider.clone(),
                message: format!("invalid NDJSON line ({e}): {}", preview(data)),
            })?;
        if let Some(error) = line.error {
            let message = error.into_owned();
            return Err(if looks_like_context_overflow(None, &message) {
                ProviderError::ContextOverflow {
                    provider: self.provider.clone(),
                    message,
                    needed: None,
                    limit: None,
                }
            } else {
                ProviderError::Stream {
                    provider: self.provider.clone(),
                    // Ollama's error lines are server-side failures (a runner that stopped, an
                    // unexpected EOF): retried before any output, like other providers' errors.
                    code: Some(
                        line.status
                            .map_or_else(|| "server_error".to_owned(), |s| s.to_string()),
                    ),
                    message,
                }
            });
        }
        if let Some(message) = line.message {
            if let Some(thinking) = message.thinking
                && !thinking.is_empty()
            {
                out.push(StreamEvent::ReasoningDelta {
                    text: thinking.into_owned(),
                });
            }
            if let Some(content) = message.content
                && !content.is_empty()
            {
                out.push(StreamEvent::TextDelta {
                    text: content.into_owned(),
                });
            }
            for call in message.tool_calls.unwrap_or_default() {
                let id = call
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{}", self.calls));
                self.calls += 1;
                let arguments = match call.function.arguments {
                    Value::Null => Value::Object(Map::new()),
                    // Some models put a JSON string here; a value is what callers expect.
                    Value::String(text) => {
                        serde_json::from_str(&text).unwrap_or(Value::String(text))
                    }
                    other => other,
                };
                out.push(StreamEvent::ToolCall(ToolCall {
                    id,
                    name: call.function.name,
                    arguments,
                    signature: None,
                }));
            }
        }
        if line.done {
            self.done = true;
            out.push(StreamEvent::Usage(Usage {
                input_tokens: line.prompt_eval_count.unwrap_or(0),
                output_tokens: line.eval_count.unwrap_or(0),
                ..Usage::default()
            }));
            let reason = match line.done_reason.as_deref() {
                _ if self.calls > 0 => FinishReason::ToolCalls,
                Some("length") => FinishReason::Length,
                None | Some("stop") => FinishReason::Stop,
                Some(other) => FinishReason::Other(other.to_owned()),
            };
            out.push(StreamEvent::Finish(reason));
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(&mut self, _out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        if self.done {
            Ok(())
        } else {
            Err(ProviderError::StreamBroken {
                provider: self.provider.clone(),
                message: "the body ended before the final `done` line".into(),
            })
        }
    }
}

/// The start of a bad chunk, for the error message.
pub(crate) fn preview(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(&data[..data.len().min(120)]);
    text.into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_is_used_when_the_request_is_small() {
        assert_eq!(size_num_ctx(1000, 8192, None, Some(131072)), Ok(8192));
    }

    #[test]
    fn grows_in_steps_of_4096_to_fit() {
        assert_eq!(size_num_ctx(8193, 8192, None, Some(131072)), Ok(12288));
        assert_eq!(size_num_ctx(20000, 8192, None, None), Ok(20480));
        assert_eq!(size_num_ctx(12288, 8192, None, None), Ok(12288));
    }

    #[test]
    fn never_above_the_model_window() {
        // 30000 needs 32768 by steps, but the window is 30000: the window is used.
        assert_eq!(size_num_ctx(30000, 8192, None, Some(30000)), Ok(30000));
        // A floor above a small window is clamped to the window.
        assert_eq!(size_num_ctx(1000, 8192, None, Some(4096)), Ok(4096));
    }

    #[test]
    fn never_above_the_configured_ceiling() {
        assert_eq!(
            size_num_ctx(15000, 8192, Some(16000), Some(131072)),
            Ok(16000)
        );
        assert_eq!(size_num_ctx(15000, 8192, Some(16000), None), Ok(16000));
    }

    #[test]
    fn reports_when_the_request_cannot_fit() {
        assert_eq!(
            size_num_ctx(40000, 8192, Some(32768), Some(131072)),
            Err(CtxDoesNotFit {
                needed: 40000,
                limit: 32768
            })
        );
        assert_eq!(
            size_num_ctx(5000, 2048, None, Some(4096)),
            Err(CtxDoesNotFit {
                needed: 5000,
                limit: 4096
            })
        );
    }

    #[test]
    fn decoder_reads_thinking_text_calls_and_usage() {
        let mut d = OllamaDecoder::new("ollama".into());
        let mut out = Vec::new();
        for line in [
            r#"{"model":"m","message":{"role":"assistant","content":"","thinking":"hm"},"done":false}"#,
            r#"{"model":"m","message":{"role":"assistant","content":"Hi"},"done":false}"#,
            r#"{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},"done":false}"#,
            r#"{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","eval_count":7}"#,
        ] {
            d.feed("", line.as_bytes(), &mut out).unwrap();
        }
        assert!(d.is_done());
        assert_eq!(
            out,
            vec![
                StreamEvent::ReasoningDelta { text: "hm".into() },
                StreamEvent::TextDelta { text: "Hi".into() },
                StreamEvent::ToolCall(ToolCall {
                    id: "call_0".into(),
                    name: "f".into(),
                    arguments: json!({"a": 1}),
                    signature: None
                }),
                StreamEvent::Usage(Usage {
                    input_tokens: 0,
                    output_tokens: 7,
                    ..Usage::default()
                }),
                StreamEvent::Finish(FinishReason::ToolCalls),
            ]
        );
    }
}
