//! Anthropic Messages over SSE, with extended and adaptive thinking. Signed thinking blocks are
//! sent back unchanged and in order with the tool results of the same turn.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::Provider;
use crate::body::Decoder;
use crate::error::{ProviderError, looks_like_context_overflow};
use crate::event::{FinishReason, StreamEvent, Usage};
use crate::frame::Framing;
use crate::http::{EventStream, Transport, run_stream_with};
use crate::model::{Capabilities, ModelCache, ModelInfo};
use crate::ollama::preview;
use crate::request::{
    AssistantPart, ChatRequest, DEFAULT_MAX_OUTPUT_TOKENS, Message, ReasoningLevel, ToolCall,
};
use crate::settings::ProviderConfig;
use crate::wire::{Scanner, parse_event, parse_raw};

/// The `anthropic-version` header every request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Thinking budget for a reasoning level (DESIGN §4): 2048 / 8192 / 16384 tokens, none when off.
pub fn anthropic_thinking_budget(level: ReasoningLevel) -> Option<u32> {
    match level {
        ReasoningLevel::Off => None,
        ReasoningLevel::Low => Some(2048),
        ReasoningLevel::Medium => Some(8192),
        ReasoningLevel::High => Some(16384),
    }
}

/// Anthropic's Messages API.
#[derive(Clone)]
pub struct AnthropicProvider {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Arc<Transport>,
    models: ModelCache,
    /// The thinking form each model was found to take (adaptive or not) after it refused the
    /// other with a 400; wins over the model list and the model family.
    learned: Mutex<HashMap<String, bool>>,
}

impl AnthropicProvider {
    /// A provider calling the server `config` describes; fails only when its HTTP client cannot
    /// be built.
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderError> {
        Ok(AnthropicProvider {
            inner: Arc::new(Inner {
                transport: Transport::new(config)?,
                models: ModelCache::default(),
                learned: Mutex::new(HashMap::new()),
            }),
        })
    }
}

impl Inner {
    fn authorized(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let builder = builder.header("anthropic-version", ANTHROPIC_VERSION);
        match &self.transport.config.api_key {
            Some(key) => builder.header("x-api-key", key),
            None => builder,
        }
    }

    async fn list(&self, retries: bool) -> Result<Vec<ModelInfo>, ProviderError> {
        let mut models = Vec::new();
        let mut after: Option<String> = None;
        // Pages of up to 1000; a bound keeps a looping server from holding us forever.
        for _ in 0..20 {
            let mut url = self.transport.url("/v1/models?limit=1000");
            if let Some(after) = &after {
                url.push_str("&after_id=");
                url.push_str(after);
            }
            let body = self
                .transport
                .fetch_json(
                    |client| self.authorized(client.get(&url)),
                    "",
                    parse_error,
                    retries,
                )
                .await?;
            if let Some(data) = body["data"].as_array() {
                models.extend(data.iter().filter_map(model_from_entry));
            }
            match (body["has_more"].as_bool(), body["last_id"].as_str()) {
                (Some(true), Some(last)) => after = Some(last.to_owned()),
                _ => break,
            }
        }
        self.models.put(models.clone());
        Ok(models)
    }

    async fn model_info(&self, id: &str) -> Option<ModelInfo> {
        if !self.models.is_fresh() && self.list(false).await.is_err() {
            self.models.put(Vec::new());
        }
        self.models.find(id)
    }

    fn learned_form(&self, model: &str) -> Option<bool> {
        self.learned.lock().ok()?.get(model).copied()
    }

    fn learn_form(&self, model: &str, adaptive: bool) {
        if let Ok(mut learned) = self.learned.lock() {
            learned.insert(model.to_owned(), adaptive);
        }
    }

    /// What the request may use: from the model list, else the model family, and the thinking
    /// form a 400 taught over both.
    async fn capabilities(&self, request: &ChatRequest) -> Capabilities {
        if request.reasoning == ReasoningLevel::Off {
            return Capabilities::default();
        }
        let mut capabilities = match self.model_info(&request.model).await {
            Some(info) => info.capabilities,
            None => Capabilities {
                thinking: name_suggests_thinking(&request.model),
                adaptive_thinking: family_takes_adaptive(&request.model),
                ..Capabilities::default()
            },
        };
        if let Some(adaptive) = self.learned_form(&request.model) {
            capabilities.adaptive_thinking = adaptive;
        }
        capabilities
    }

    fn body(&self, request: &ChatRequest, info: &Capabilities) -> Value {
        let config = &self.transport.config;
        let mut max_tokens = request
            .max_output_tokens
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
        let mut body = Map::new();
        body.insert("model".into(), request.model.clone().into());
        let budget = anthropic_thinking_budget(request.reasoning).filter(|_| info.thinking);
        if let Some(budget) = budget {
            // The answer keeps its own room: max_tokens grows by the thinking budget.
            max_tokens = max_tokens.saturating_add(budget);
        }
        body.insert("max_tokens".into(), max_tokens.into());
        body.insert("stream".into(), Value::Bool(true));
        if let Some(system) = &request.system {
            body.insert("system".into(), system.clone().into());
        }
        match budget {
            Some(_) if info.adaptive_thinking => {
                body.insert("thinking".into(), json!({"type": "adaptive"}));
                body.insert(
                    "output_config".into(),
                    json!({"effort": request.reasoning.as_str()}),
                );
            }
            Some(budget) => {
                body.insert(
                    "thinking".into(),
                    json!({"type": "enabled", "budget_tokens": budget}),
                );
            }
            // Thinking fixes the temperature; only without it may one be sent.
            None => {
                if let Some(t) = request.temperature.or(config.temperature) {
                    body.insert("temperature".into(), json!(t));
                }
            }
        }
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            body.insert("tool_choice".into(), json!({"type": "auto"}));
        }
        body.insert("messages".into(), Value::Array(messages(request)));
        Value::Object(body)
    }
}

fn messages(request: &ChatRequest) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(request.messages.len());
    // Tool results of one assistant turn go together in a single user message.
    let mut results: Vec<Value> = Vec::new();
    for message in &request.messages {
        if let Message::ToolResult(result) = message {
            let mut block = json!({"type": "tool_result", "tool_use_id": wire_id(&result.call_id),
                "content": result.content});
            if result.is_error {
                block["is_error"] = Value::Bool(true);
            }
            results.push(block);
            continue;
        }
        if !results.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
        }
        match message {
            Message::User { text, images } if images.is_empty() => {
                out.push(json!({"role": "user", "content": text}));
            }
            Message::User { text, images } => {
                let mut content: Vec<Value> = images
                    .iter()
                    .map(|i| {
                        json!({"type": "image", "source": {"type": "base64",
                        "media_type": i.media_type, "data": i.data_base64}})
                    })
                    .collect();
                content.push(json!({"type": "text", "text": text}));
                out.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant { parts } => {
                let content: Vec<Value> = parts.iter().filter_map(assistant_block).collect();
                if !content.is_empty() {
                    out.push(json!({"role": "assistant", "content": content}));
                }
            }
            Message::ToolResult(_) => {}
        }
    }
    if !results.is_empty() {
        out.push(json!({"role": "user", "content": results}));
    }
    out
}

/// A call id as Anthropic takes it (`^[a-zA-Z0-9_-]+$`): ids other servers made (`functions.read:0`)
/// have every other character replaced, the same way for a call and its result.
fn wire_id(id: &str) -> Cow<'_, str> {
    let fine = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !id.is_empty() && id.chars().all(fine) {
        return Cow::Borrowed(id);
    }
    let mut out: String = id.chars().map(|c| if fine(c) { c } else { '_' }).collect();
    if out.is_empty() {
        out.push_str("call");
    }
    Cow::Owned(out)
}

/// One assistant part as a content block, exactly as it streamed. Reasoning without a signature
/// (from another provider) cannot be replayed and is left out.
fn assistant_block(part: &AssistantPart) -> Option<Value> {
    match part {
        AssistantPart::Text { text, .. } if text.is_empty() => None,
        AssistantPart::Text { text, .. } => Some(json!({"type": "text", "text": text})),
        AssistantPart::Reasoning {
            text,
            signature: Some(signature),
        } => Some(json!({"type": "thinking", "thinking": text, "signature": signature})),
        AssistantPart::Reasoning {
            signature: None, ..
        } => None,
        AssistantPart::RedactedReasoning { data } => {
            Some(json!({"type": "redacted_thinking", "data": data}))
        }
        AssistantPart::ToolCall(call) => {
            let input = if call.arguments.is_object() {
                call.arguments.clone()
            } else {
                json!({})
            };
            Some(
                json!({"type": "tool_use", "id": wire_id(&call.id), "name": call.name, "input": input}),
            )
        }
    }
}

/// A Claude model's family and version from its id, however a gateway spells it:
/// `claude-opus-4-7`, `claude-sonnet-4-6-20260201`, `anthropic/claude-opus-4.7`,
/// `us.anthropic.claude-opus-4-7-v1:0`, `claude-3-7-sonnet-latest`.
fn claude_version(id: &str) -> Option<(&str, u32, u32)> {
    let id = &id[id.rfind("claude-")? + "claude-".len()..];
    let mut words = id.split(['-', '.', ':', '@']);
    let number = |word: Option<&str>| word.and_then(|w| w.parse::<u32>().ok());
    let first = words.next()?;
    if let Ok(major) = first.parse::<u32>() {
        // The old order: claude-3-7-sonnet.
        let next = words.next();
        return match number(next) {
            Some(minor) => Some((words.next().unwrap_or(""), major, minor)),
            None => Some((next.unwrap_or(""), major, 0)),
        };
    }
    let major = number(words.next())?;
    // A date (20250514) after the major version is not a minor one.
    let minor = number(words.next()).filter(|m| *m < 100).unwrap_or(0);
    Some((first, major, minor))
}

fn name_suggests_thinking(id: &str) -> bool {
    claude_version(id).is_some_and(|(_, major, minor)| (major, minor) >= (3, 7))
}

/// Claude 4.6 and later take adaptive thinking (4.7 and later take nothing else), by family
/// when no model list says.
fn family_takes_adaptive(id: &str) -> bool {
    claude_version(id).is_some_and(|(family, major, minor)| {
        matches!(family, "opus" | "sonnet" | "haiku") && (major, minor) >= (4, 6)
    })
}

/// A 400 about the thinking form: the other form may be the one this model takes.
fn refuses_thinking_form(error: &ProviderError) -> bool {
    let ProviderError::InvalidRequest {
        status: 400,
        message,
        ..
    } = error
    else {
        return false;
    };
    let message = message.to_ascii_lowercase();
    ["thinking", "adaptive", "budget_tokens", "output_config"]
        .iter()
        .any(|word| message.contains(word))
}

fn model_from_entry(entry: &Value) -> Option<ModelInfo> {
    let id = entry["id"].as_str()?.to_owned();
    let caps = &entry["capabilities"];
    let capabilities = if caps.is_object() {
        Capabilities {
            tools: true,
            thinking: caps["thinking"]["supported"]
                .as_bool()
                .unwrap_or_else(|| name_suggests_thinking(&id)),
            vision: caps["image_input"]["supported"].as_bool().unwrap_or(false),
            // A list that does not say (a gateway's) leaves it to the family.
            adaptive_thinking: caps["thinking"]["types"]["adaptive"]["supported"]
                .as_bool()
                .unwrap_or_else(|| family_takes_adaptive(&id)),
        }
    } else {
        // Older lists say nothing: every current Claude takes tools and images.
        Capabilities {
            tools: true,
            thinking: name_suggests_thinking(&id),
            vision: true,
            adaptive_thinking: family_takes_adaptive(&id),
        }
    };
    Some(ModelInfo {
        display_name: entry["display_name"].as_str().map(str::to_owned),
        context_window: entry["max_input_tokens"].as_u64(),
        max_output_tokens: entry["max_tokens"].as_u64(),
        capabilities,
        prices: None,
        id,
    })
}

/// `{"type":"error","error":{"type":"…","message":"…"}}`.
fn parse_error(body: &[u8]) -> Option<(Option<String>, String)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error")?;
    let message = error["message"].as_str()?.to_owned();
    Some((error["type"].as_str().map(str::to_owned), message))
}

impl Provider for AnthropicProvider {
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
        // The thinking form the last attempt sent (None: no thinking), for a 400 to flip.
        let sent: Arc<Mutex<Option<bool>>> = Arc::default();
        let prepare = {
            let (inner, sent) = (inner.clone(), sent.clone());
            Box::new(move || {
                let inner = inner.clone();
                let request = request.clone();
                let sent = sent.clone();
                async move {
                    let capabilities = inner.capabilities(&request).await;
                    let body = inner.body(&request, &capabilities);
                    if let Ok(mut sent) = sent.lock() {
                        *sent = body.get("thinking").map(|_| capabilities.adaptive_thinking);
                    }
                    let http = inner
                        .authorized(
                            inner
                                .transport
                                .client()?
                                .post(inner.transport.url("/v1/messages")),
                        )
                        .json(&body);
                    Ok((
                        http,
                        AnthropicDecoder::new(inner.transport.name().to_owned()),
                    ))
                }
                .boxed()
            })
        };
        // A 400 to one thinking form: the other, once, and remembered for the model.
        let mut flipped = false;
        let rephrase = {
            let model = model.clone();
            Box::new(move |error: &ProviderError| {
                let Some(adaptive) = sent.lock().ok().and_then(|sent| *sent) else {
                    return false;
                };
                if flipped || !refuses_thinking_form(error) {
                    return false;
                }
                flipped = true;
                inner.learn_form(&model, !adaptive);
                true
            })
        };
        run_stream_with(
            self.inner.transport.clone(),
            model,
            parse_error,
            prepare,
            rephrase,
        )
    }

    fn list_models(&self) -> BoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>> {
        let inner = self.inner.clone();
        async move { inner.list(true).await }.boxed()
    }

    fn remember_models(&self, models: &[ModelInfo]) {
        self.inner.models.put(models.to_vec());
    }
}

/// Decodes Messages stream events.
pub(crate) struct AnthropicDecoder {
    provider: String,
    blocks: Vec<Block>,
    usage: Usage,
    stop_reason: Option<String>,
    done: bool,
}

#[cfg_attr(test, derive(Clone, Debug, PartialEq))]
pub(crate) enum Block {
    Text,
    Thinking {
        signature: Option<String>,
    },
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    /// Server tools and block types Totem does not use.
    Other,
}

/// One stream event, decoded only as far as the hot path needs: the rare objects
/// (`content_block`, `message`, `error`) stay raw until their event type asks for them.
#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: Option<usize>,
    #[serde(borrow, default)]
    delta: Option<WireDelta<'a>>,
    #[serde(borrow, default)]
    content_block: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WireDelta<'a> {
    #[serde(
        rename = "type",
        borrow,
        default,
        deserialize_with = "crate::wire::option_cow"
    )]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    signature: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    partial_json: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    stop_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl AnthropicDecoder {
    pub(crate) fn new(provider: String) -> Self {
        AnthropicDecoder {
            provider,
            blocks: Vec::new(),
            usage: Usage::default(),
            stop_reason: None,
            done: false,
        }
    }

    fn merge_usage(&mut self, usage: WireUsage) {
        // message_delta counts are cumulative: each one replaces what came before.
        if let Some(n) = usage.input_tokens {
            self.usage.input_tokens = n;
        }
        if let Some(n) = usage.output_tokens {
            self.usage.output_tokens = n;
        }
        if let Some(n) = usage.cache_creation_input_tokens {
            self.usage.cache_write_tokens = n;
        }
        if let Some(n) = usage.cache_read_input_tokens {
            self.usage.cache_read_tokens = n;
        }
    }

    fn invalid(&self, error: serde_json::Error, data: &[u8]) -> ProviderError {
        ProviderError::Malformed {
            provider: self.provider.clone(),
            message: format!("invalid event ({error}): {}", preview(data)),
        }
    }

    fn block(&mut self, index: Option<usize>) -> Option<&mut Block> {
        self.blocks.get_mut(index?)
    }
}

impl Decoder for AnthropicDecoder {
    const FRAMING: Framing = Framing::Sse;

    fn feed(
        &mut self,
        _event: &str,
        data: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        if let Some(text) = std::str::from_utf8(data).ok().and_then(hot) {
            if let Some(text) = text
                && !text.is_empty()
            {
                out.push(StreamEvent::TextDelta {
                    text: text.to_owned(),
                });
            }
            return Ok(());
        }
        self.feed_with_serde(data, out)
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
                message: "the body ended before message_stop".into(),
            })
        }
    }
}

/// Reads `data` as the event nearly every delta comes in, a `content_block_delta` whose delta is a
/// `text_delta`, and answers its text (`Some(None)` when it has none); `None` for anything else
/// (other event or delta types, escapes, duplicate keys serde refuses, objects serde would read,
/// values that are not plain): those go to serde, which decides the way it always did. The SSE
/// `event:` line is not looked at, by either path: the data's `type` decides. Keys serde ignores
/// are skipped when their value is a scalar, as serde skips them.
fn hot(data: &str) -> Option<Option<&str>> {
    // Keys serde reads may come only once: it refuses a duplicate.
    fn once(seen: &mut u16, bit: u16) -> Option<()> {
        let first = *seen & bit == 0;
        *seen |= bit;
        first.then_some(())
    }
    let mut s = Scanner::new(data);
    let mut seen = 0u16;
    let (mut kind, mut text) = (None, None);
    s.object(|s, key| match key {
        "type" => {
            once(&mut seen, 1)?;
            (s.string()? == "content_block_delta").then_some(())
        }
        "index" => once(&mut seen, 2).and_then(|()| s.uint().map(drop)),
        "delta" => {
            once(&mut seen, 4)?;
            s.object(|s, key| match key {
                "type" => {
                    once(&mut seen, 8)?;
                    kind = s.string_or_null()?;
                    Some(())
                }
                "text" => {
                    once(&mut seen, 16)?;
                    text = s.string_or_null()?;
                    Some(())
                }
                "thinking" => once(&mut seen, 32).and_then(|()| s.string_or_null().map(drop)),
                "signature" => once(&mut seen, 64).and_then(|()| s.string_or_null().map(drop)),
                "partial_json" => once(&mut seen, 128).and_then(|()| s.string_or_null().map(drop)),
                "stop_reason" => once(&mut seen, 256).and_then(|()| s.string_or_null().map(drop)),
                _ => s.scalar(),
            })
        }
        // Read by serde even when this event type ignores them: left to it.
        "content_block" | "message" | "usage" | "error" => None,
        _ => s.scalar(),
    })?;
    s.end()?;
    (seen & 1 != 0 && kind == Some("text_delta")).then_some(text)
}

impl AnthropicDecoder {
    /// The general decoder, for every event the hot path steps aside from.
    fn feed_with_serde(
        &mut self,
        data: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        let event: WireEvent<'_> = parse_event(data).map_err(|e| self.invalid(e, data))?;
        match &*event.kind {
            "content_block_delta" => {
                let Some(delta) = event.delta else {
                    return Ok(());
                };
                match delta.kind.as_deref() {
                    Some("text_delta") => {
                        if let Some(text) = delta.text
                            && !text.is_empty()
                        {
                            out.push(StreamEvent::TextDelta {
                                text: text.into_owned(),
                            });
                        }
                    }
                    Some("thinking_delta") => {
                        if let Some(text) = delta.thinking
                            && !text.is_empty()
                        {
                            out.push(StreamEvent::ReasoningDelta {
                                text: text.into_owned(),
                            });
                        }
                    }
                    Some("signature_delta") => {
                        if let Some(Block::Thinking { signature }) = self.block(event.index) {
                            *signature = delta.signature.map(Cow::into_owned);
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some(Block::ToolUse { json, .. }) = self.block(event.index)
                            && let Some(partial) = delta.partial_json
                        {
                            json.push_str(&partial);
                        }
                    }
                    _ => {}
                }
            }
            "content_block_start" => {
                let block: Value = parse_raw(event.content_block)
                    .map_err(|e| self.invalid(e, data))?
                    .unwrap_or(Value::Null);
                let state = match block["type"].as_str() {
                    Some("text") => {
                        // A block may open with text already in it.
                        if let Some(text) = block["text"].as_str()
                            && !text.is_empty()
                        {
                            out.push(StreamEvent::TextDelta {
                                text: text.to_owned(),
                            });
                        }
                        Block::Text
                    }
                    Some("thinking") => {
                        if let Some(text) = block["thinking"].as_str()
                            && !text.is_empty()
                        {
                            out.push(StreamEvent::ReasoningDelta {
                                text: text.to_owned(),
                            });
                        } else {
                            // An empty thinking block (display "omitted") still needs its own part.
                            out.push(StreamEvent::ReasoningDelta {
                                text: String::new(),
                            });
                        }
                        Block::Thinking {
                            signature: block["signature"]
                                .as_str()
                                .filter(|s| !s.is_empty())
                                .map(str::to_owned),
                        }
                    }
                    Some("redacted_thinking") => {
                        out.push(StreamEvent::RedactedReasoning {
                            data: block["data"].as_str().unwrap_or_default().to_owned(),
                        });
                        Block::Other
                    }
                    Some("tool_use") => Block::ToolUse {
                        id: block["id"].as_str().unwrap_or_default().to_owned(),
                        name: block["name"].as_str().unwrap_or_default().to_owned(),
                        json: String::new(),
                    },
                    _ => Block::Other,
                };
                let index = event.index.unwrap_or(self.blocks.len());
                if index > 4096 {
                    return Err(ProviderError::Malformed {
                        provider: self.provider.clone(),
                        message: format!("content block index {index} is implausible"),
                    });
                }
                if self.blocks.len() <= index {
                    self.blocks.resize_with(index + 1, || Block::Other);
                }
                self.blocks[index] = state;
            }
            "content_block_stop" => {
                let Some(index) = event.index else {
                    return Ok(());
                };
                let block = self
                    .blocks
                    .get_mut(index)
                    .map(|b| std::mem::replace(b, Block::Other));
                match block {
                    Some(Block::Text) => out.push(StreamEvent::PartEnd { signature: None }),
                    Some(Block::Thinking { signature }) => {
                        out.push(StreamEvent::PartEnd { signature });
                    }
                    Some(Block::ToolUse { id, name, json }) => {
                        let arguments = if json.trim().is_empty() {
                            Value::Object(Map::new())
                        } else {
                            serde_json::from_str(&json).unwrap_or(Value::String(json))
                        };
                        out.push(StreamEvent::ToolCall(ToolCall {
                            id,
                            name,
                            arguments,
                            signature: None,
                        }));
                    }
                    Some(Block::Other) | None => {}
                }
            }
            "message_start" => {
                let message: Option<WireMessage> =
                    parse_raw(event.message).map_err(|e| self.invalid(e, data))?;
                if let Some(usage) = message.and_then(|m| m.usage) {
                    self.merge_usage(usage);
                    out.push(StreamEvent::Usage(self.usage));
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(reason.into_owned());
                }
                if let Some(usage) = event.usage {
                    self.merge_usage(usage);
                    out.push(StreamEvent::Usage(self.usage));
                }
            }
            "message_stop" => {
                self.done = true;
                let reason = match self.stop_reason.as_deref() {
                    Some("end_turn" | "stop_sequence") | None => FinishReason::Stop,
                    Some("tool_use") => FinishReason::ToolCalls,
                    Some("max_tokens") => FinishReason::Length,
                    Some("refusal") => FinishReason::ContentFilter,
                    Some("model_context_window_exceeded") => FinishReason::ContextWindow,
                    Some(other) => FinishReason::Other(other.to_owned()),
                };
                out.push(StreamEvent::Finish(reason));
            }
            "error" => {
                let error = parse_raw(event.error)
                    .map_err(|e| self.invalid(e, data))?
                    .unwrap_or(WireError {
                        kind: None,
                        message: None,
                    });
                let message = error.message.unwrap_or_else(|| "unknown error".into());
                return Err(
                    if looks_like_context_overflow(error.kind.as_deref(), &message) {
                        ProviderError::ContextOverflow {
                            provider: self.provider.clone(),
                            message,
                            needed: None,
                            limit: None,
                        }
                    } else {
                        ProviderError::Stream {
                            provider: self.provider.clone(),
                            code: error.kind,
                            message,
                        }
                    },
                );
            }
            // ping and anything newer.
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::{HotPath, agree, agree_on_all, combinations, mutations};

    #[test]
    fn thinking_forms_by_model_family_however_the_id_is_spelled() {
        for adaptive in [
            "claude-opus-4-6",
            "claude-opus-4-7",
            "claude-sonnet-4-6-20260201",
            "anthropic/claude-opus-4.7",
            "us.anthropic.claude-opus-4-7-v1:0",
            "claude-opus-5",
            "claude-opus-4-7@20260401",
        ] {
            assert!(family_takes_adaptive(adaptive), "{adaptive}");
            assert!(name_suggests_thinking(adaptive), "{adaptive}");
        }
        for budget in [
            "claude-sonnet-4-5",
            "claude-opus-4-20250514",
            "claude-3-7-sonnet-latest",
            "claude-haiku-4-5-20251001",
            "anthropic/claude-sonnet-4.5",
        ] {
            assert!(!family_takes_adaptive(budget), "{budget}");
            assert!(name_suggests_thinking(budget), "{budget}");
        }
        for none in [
            "claude-3-5-haiku-20241022",
            "claude-3-opus",
            "gpt-4o",
            "claude",
        ] {
            assert!(!family_takes_adaptive(none), "{none}");
            assert!(!name_suggests_thinking(none), "{none}");
        }
    }

    #[test]
    fn a_list_without_the_adaptive_field_leaves_it_to_the_family() {
        let bare = |id: &str| {
            model_from_entry(&json!({"id": id, "capabilities": {"thinking": {"supported": true}}}))
                .unwrap()
                .capabilities
        };
        assert!(bare("claude-opus-4-7").adaptive_thinking);
        assert!(!bare("claude-sonnet-4-5").adaptive_thinking);
        let said_no = model_from_entry(&json!({"id": "claude-opus-4-7", "capabilities": {
            "thinking": {"supported": true, "types": {"adaptive": {"supported": false}}}}}))
        .unwrap();
        assert!(!said_no.capabilities.adaptive_thinking);
        let old = model_from_entry(&json!({"id": "claude-opus-4-7"})).unwrap();
        assert!(old.capabilities.adaptive_thinking && old.capabilities.thinking);
    }

    impl HotPath for AnthropicDecoder {
        type State = (Vec<Block>, Usage, Option<String>, bool);

        fn feed_serde_only(
            &mut self,
            data: &[u8],
            out: &mut Vec<StreamEvent>,
        ) -> Result<(), ProviderError> {
            self.feed_with_serde(data, out)
        }

        fn state(&self) -> Self::State {
            (
                self.blocks.clone(),
                self.usage,
                self.stop_reason.clone(),
                self.done,
            )
        }

        fn is_hot(data: &str) -> bool {
            hot(data).is_some()
        }
    }

    fn decoder() -> AnthropicDecoder {
        AnthropicDecoder::new("a".into())
    }

    /// A text block, a signed thinking block and a half-streamed tool call open, usage counted.
    fn decoder_mid_answer() -> AnthropicDecoder {
        let mut d = decoder();
        d.blocks = vec![
            Block::Text,
            Block::Thinking {
                signature: Some("c2ln".into()),
            },
            Block::ToolUse {
                id: "t1".into(),
                name: "read".into(),
                json: r#"{"path":"#.into(),
            },
        ];
        d.usage.input_tokens = 12;
        d.stop_reason = Some("tool_use".into());
        d
    }

    /// The simulator's delta (keys sorted) and Anthropic's own (its key order).
    const SIM_DELTA: &str =
        r#"{"delta":{"text":" tok","type":"text_delta"},"index":0,"type":"content_block_delta"}"#;
    const ANTHROPIC_DELTA: &str =
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#;

    #[test]
    fn the_hot_path_gives_exactly_what_serde_gives() {
        let kinds: &[&str] = &[
            r#""content_block_delta""#,
            r#""message_delta""#,
            r#""content_block_delt\u0061""#,
            "null",
        ];
        let indexes: &[&str] = &["0", "2", "null", "-1", "1.5", "99999999999999999999"];
        let delta_starts: &[&str] = &[
            r#""type":"text_delta","#,
            r#""type":"thinking_delta","thinking":"hm","#,
            r#""type":"input_json_delta","partial_json":"\"a\"","#,
            r#""type":"signature_delta","signature":"c2ln","#,
            r#""type":null,"#,
            "",
            r#""type":"text_delta","type":"text_delta","#,
            r#""stop_reason":"end_turn","signature":null,"type":"text_delta","#,
        ];
        let texts: &[&str] = &[
            r#"" tok""#,
            r#""""#,
            "null",
            r#""a\nb""#,
            "\"日本\"",
            "3",
            r#""a","text":"b""#,
        ];
        let delta_tails: &[&str] = &[
            "",
            r#","x":true,"y":false,"z":null,"n":7"#,
            r#","thinking":"hm","thinking":"hm""#,
            r#","obj":{}"#,
        ];
        let tails: &[&str] = &[
            "",
            r#","usage":{"output_tokens":3}"#,
            r#","usage":null"#,
            r#","content_block":{"type":"text","text":""}"#,
            r#","error":{"type":"overloaded_error","message":"Overloaded"}"#,
            r#","extra":"x""#,
            r#","delta":{}"#,
        ];
        let mut events = combinations(
            r#"{"type":@,"index":@,"delta":{@"text":@@}@}"#,
            &[kinds, indexes, delta_starts, texts, delta_tails, tails],
        );
        // Other shapes around the hot one: whitespace, reordered or missing pieces, other event
        // types, trailing bytes.
        events.extend(
            [
                " {\n \"type\" : \"content_block_delta\" , \"index\" : 0 , \"delta\" : { \"type\" : \"text_delta\" , \"text\" : \"x\" } }\r\n",
                r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}"#,
                r#"{"index":0,"delta":{"type":"text_delta","text":"a"}}"#,
                r#"{"type":"content_block_delta","index":0}"#,
                r#"{"type":"content_block_delta","index":0,"delta":null}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{}}"#,
                r#"{"type":"content_block_delta","type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}"#,
                r#"{"type":"content_block_delta","index":0,"index":0,"delta":{"type":"text_delta","text":"a"}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"delta":{}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}} x"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}{}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"id":[1]}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"ok":nul}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"ok":truefalse}"#,
                r#"{"type":"content_block_delta","index":0,"delta":["text_delta"]}"#,
                r#"{"type":"content_block_start","index":3,"content_block":{"type":"text","text":"hi"}}"#,
                r#"{"type":"content_block_stop","index":0}"#,
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}"#,
                r#"{"type":"message_stop"}"#,
                r#"{"type":"ping"}"#,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                "{}",
                "[]",
                "",
            ]
            .map(str::to_owned),
        );
        // Each hot event cut short and with a stray byte in every position.
        events.extend(mutations(SIM_DELTA));
        events.extend(mutations(ANTHROPIC_DELTA));
        let taken = agree_on_all(decoder, &events);
        // The hot path really is taken, for a good share of what was generated.
        assert!(
            taken > 300,
            "hot path taken {taken} of {} times",
            events.len()
        );
        assert_eq!(agree_on_all(decoder_mid_answer, &events), taken);
    }

    #[test]
    fn the_simulators_and_anthropics_deltas_take_the_hot_path() {
        for event in [SIM_DELTA, ANTHROPIC_DELTA] {
            assert!(agree(&decoder, event), "{event}");
            assert!(agree(&decoder_mid_answer, event), "{event}");
        }
        assert_eq!(hot(SIM_DELTA), Some(Some(" tok")));
    }

    #[test]
    fn budgets_follow_the_design() {
        assert_eq!(anthropic_thinking_budget(ReasoningLevel::Off), None);
        assert_eq!(anthropic_thinking_budget(ReasoningLevel::Low), Some(2048));
        assert_eq!(
            anthropic_thinking_budget(ReasoningLevel::Medium),
            Some(8192)
        );
        assert_eq!(anthropic_thinking_budget(ReasoningLevel::High), Some(16384));
    }

    #[test]
    fn tool_results_of_one_turn_share_a_user_message() {
        let request = ChatRequest {
            messages: vec![
                Message::user("go"),
                Message::Assistant {
                    parts: vec![
                        AssistantPart::Reasoning {
                            text: "t".into(),
                            signature: Some("S".into()),
                        },
                        AssistantPart::ToolCall(ToolCall {
                            id: "a".into(),
                            name: "f".into(),
                            arguments: json!({}),
                            signature: None,
                        }),
                    ],
                },
                Message::ToolResult(crate::ToolResult {
                    call_id: "a".into(),
                    tool_name: "f".into(),
                    content: "1".into(),
                    is_error: false,
                }),
                Message::ToolResult(crate::ToolResult {
                    call_id: "b".into(),
                    tool_name: "f".into(),
                    content: "2".into(),
                    is_error: true,
                }),
            ],
            ..ChatRequest::default()
        };
        let m = messages(&request);
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[1]["content"][0],
            json!({"type":"thinking","thinking":"t","signature":"S"})
        );
        assert_eq!(m[2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(m[2]["content"][1]["is_error"], json!(true));
    }
}
