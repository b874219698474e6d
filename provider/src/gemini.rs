//! Google Gemini (Developer API, `v1beta`): `streamGenerateContent?alt=sse`, thought parts and
//! `thoughtSignature`s returned in place, tool schemas reduced to the subset Gemini accepts.

use std::borrow::Cow;
use std::sync::Arc;

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
use crate::http::{EventStream, Transport, run_stream};
use crate::model::{Capabilities, ModelCache, ModelInfo};
use crate::ollama::preview;
use crate::request::{AssistantPart, ChatRequest, Message, ReasoningLevel, ToolCall};
use crate::settings::ProviderConfig;
use crate::wire::{Few, Scanner, parse_event, parse_raw};

/// Ids Totem makes up for calls that came without one; they are not echoed back to Gemini.
const SYNTHETIC_ID_PREFIX: &str = "gemini_call_";

/// Google's Gemini API.
#[derive(Clone)]
pub struct GeminiProvider {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Arc<Transport>,
    models: ModelCache,
}

impl GeminiProvider {
    /// A provider calling the server `config` describes; fails only when its HTTP client cannot
    /// be built.
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderError> {
        Ok(GeminiProvider {
            inner: Arc::new(Inner {
                transport: Transport::new(config)?,
                models: ModelCache::default(),
            }),
        })
    }
}

impl Inner {
    /// The key travels in a header, never in the URL, so it cannot end up in a log line.
    fn authorized(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.transport.config.api_key {
            Some(key) => builder.header("x-goog-api-key", key),
            None => builder,
        }
    }

    async fn list(&self, retries: bool) -> Result<Vec<ModelInfo>, ProviderError> {
        let mut models = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..20 {
            let mut url = self.transport.url("/v1beta/models?pageSize=1000");
            if let Some(token) = &token {
                url.push_str("&pageToken=");
                url.push_str(token);
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
            if let Some(list) = body["models"].as_array() {
                models.extend(list.iter().filter_map(model_from_entry));
            }
            match body["nextPageToken"].as_str() {
                Some(next) if !next.is_empty() => token = Some(next.to_owned()),
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

    fn body(&self, request: &ChatRequest, thinks: bool) -> Value {
        let config = &self.transport.config;
        let mut body = Map::new();
        if let Some(system) = &request.system {
            body.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system}]}),
            );
        }
        body.insert("contents".into(), Value::Array(contents(request)));
        if !request.tools.is_empty() {
            let declarations: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description,
                        "parameters": gemini_schema(&t.parameters)})
                })
                .collect();
            body.insert(
                "tools".into(),
                json!([{"functionDeclarations": declarations}]),
            );
            body.insert(
                "toolConfig".into(),
                json!({"functionCallingConfig": {"mode": "AUTO"}}),
            );
        }
        let mut generation = Map::new();
        if let Some(t) = request.temperature.or(config.temperature) {
            generation.insert("temperature".into(), json!(t));
        }
        if let Some(max) = request.max_output_tokens {
            generation.insert("maxOutputTokens".into(), max.into());
        }
        if thinks {
            generation.insert(
                "thinkingConfig".into(),
                thinking_config(&request.model, request.reasoning),
            );
        }
        if !generation.is_empty() {
            body.insert("generationConfig".into(), Value::Object(generation));
        }
        Value::Object(body)
    }
}

/// DESIGN §4: Gemini 3 takes `thinkingLevel` (low/high; Flash also minimal/medium); 2.5 takes `thinkingBudget`
/// 1024/8192/24576, off = 0, or 128 on Pro, which cannot switch thinking off. Never both.
fn thinking_config(model: &str, level: ReasoningLevel) -> Value {
    let include = level != ReasoningLevel::Off;
    if is_gemini_3(model) {
        let thinking_level = match level {
            // 3 Pro cannot stop thinking; Flash can think minimally.
            ReasoningLevel::Off if model.contains("flash") => "minimal",
            ReasoningLevel::Off | ReasoningLevel::Low => "low",
            // Flash takes all four levels; Pro only low and high.
            ReasoningLevel::Medium if model.contains("flash") => "medium",
            ReasoningLevel::Medium | ReasoningLevel::High => "high",
        };
        json!({"thinkingLevel": thinking_level, "includeThoughts": include})
    } else {
        let budget = match level {
            ReasoningLevel::Off if model.contains("pro") => 128,
            ReasoningLevel::Off => 0,
            ReasoningLevel::Low => 1024,
            ReasoningLevel::Medium => 8192,
            ReasoningLevel::High => 24576,
        };
        json!({"thinkingBudget": budget, "includeThoughts": include})
    }
}

fn is_gemini_3(model: &str) -> bool {
    model.starts_with("gemini-3") || model.contains("/gemini-3")
}

fn name_suggests_thinking(model: &str) -> bool {
    model.contains("gemini-2.5") || is_gemini_3(model)
}

fn contents(request: &ChatRequest) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(request.messages.len());
    let mut responses: Vec<Value> = Vec::new();
    for message in &request.messages {
        if let Message::ToolResult(result) = message {
            let key = if result.is_error { "error" } else { "result" };
            let mut response = json!({"name": result.tool_name, "response": {key: result.content}});
            if !result.call_id.starts_with(SYNTHETIC_ID_PREFIX) {
                response["id"] = result.call_id.clone().into();
            }
            responses.push(json!({"functionResponse": response}));
            continue;
        }
        if !responses.is_empty() {
            out.push(json!({"role": "user", "parts": std::mem::take(&mut responses)}));
        }
        match message {
            Message::User { text, images } => {
                let mut parts = vec![json!({"text": text})];
                for image in images {
                    parts.push(json!({"inlineData": {"mimeType": image.media_type,
                        "data": image.data_base64}}));
                }
                out.push(json!({"role": "user", "parts": parts}));
            }
            Message::Assistant { parts } => {
                let parts: Vec<Value> = parts.iter().filter_map(model_part).collect();
                if !parts.is_empty() {
                    out.push(json!({"role": "model", "parts": parts}));
                }
            }
            Message::ToolResult(_) => {}
        }
    }
    if !responses.is_empty() {
        out.push(json!({"role": "user", "parts": responses}));
    }
    out
}

/// One assistant part as Gemini streamed it, signature in place.
fn model_part(part: &AssistantPart) -> Option<Value> {
    let (mut value, signature) = match part {
        AssistantPart::Text { text, signature } => {
            if text.is_empty() && signature.is_none() {
                return None;
            }
            (json!({"text": text}), signature)
        }
        AssistantPart::Reasoning { text, signature } => {
            (json!({"text": text, "thought": true}), signature)
        }
        AssistantPart::RedactedReasoning { .. } => return None,
        AssistantPart::ToolCall(call) => {
            // `args` is a Struct: arguments no repair made an object go back empty (the tool's
            // result already said what was wrong with them).
            let args = if call.arguments.is_object() {
                call.arguments.clone()
            } else {
                json!({})
            };
            let mut function = json!({"name": call.name, "args": args});
            if !call.id.starts_with(SYNTHETIC_ID_PREFIX) {
                function["id"] = call.id.clone().into();
            }
            (json!({"functionCall": function}), &call.signature)
        }
    };
    if let Some(signature) = signature {
        value["thoughtSignature"] = signature.clone().into();
    }
    Some(value)
}

/// Keys of a schema that Gemini's `parameters` (an OpenAPI 3.0 subset) accepts.
const ALLOWED_SCHEMA_KEYS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "anyOf",
    "propertyOrdering",
    "default",
    "example",
];

/// Converts a JSON Schema to the subset Gemini accepts: `$ref`s inlined (from `$defs` or
/// `definitions`), `oneOf` read as `anyOf`, `allOf` merged, `const` as a one-value `enum`,
/// `["T","null"]` as `nullable`, non-string enums and every unknown key dropped.
pub fn gemini_schema(schema: &Value) -> Value {
    convert_schema(schema, schema, 0)
}

fn convert_schema(schema: &Value, root: &Value, depth: usize) -> Value {
    // Recursive $refs cannot be inlined for ever.
    if depth > 16 {
        return json!({"type": "object"});
    }
    let Some(object) = schema.as_object() else {
        return json!({});
    };
    if let Some(target) = object.get("$ref").and_then(Value::as_str) {
        let resolved = resolve_ref(root, target).cloned().unwrap_or(json!({}));
        let mut merged = convert_schema(&resolved, root, depth + 1);
        // Siblings of $ref (a description, usually) still apply.
        if let (Some(out), Some(desc)) = (merged.as_object_mut(), object.get("description")) {
            out.insert("description".into(), desc.clone());
        }
        return merged;
    }
    let mut out = Map::new();
    if let Some(all) = object.get("allOf").and_then(Value::as_array) {
        for sub in all {
            if let Value::Object(sub) = convert_schema(sub, root, depth + 1) {
                merge_schema(&mut out, sub);
            }
        }
    }
    for (key, value) in object {
        match key.as_str() {
            "type" => match value {
                Value::Array(types) => {
                    let mut nullable = false;
                    let mut chosen = None;
                    for t in types.iter().filter_map(Value::as_str) {
                        if t == "null" {
                            nullable = true;
                        } else if chosen.is_none() {
                            chosen = Some(t);
                        }
                    }
                    if let Some(t) = chosen {
                        out.insert("type".into(), t.into());
                    }
                    if nullable {
                        out.insert("nullable".into(), true.into());
                    }
                }
                Value::String(t) if t == "null" => {
                    out.insert("nullable".into(), true.into());
                }
                other => {
                    out.insert("type".into(), other.clone());
                }
            },
            "properties" => {
                if let Some(props) = value.as_object() {
                    let converted: Map<String, Value> = props
                        .iter()
                        .map(|(name, sub)| (name.clone(), convert_schema(sub, root, depth + 1)))
                        .collect();
                    out.insert("properties".into(), Value::Object(converted));
                }
            }
            "items" if value.is_object() => {
                out.insert("items".into(), convert_schema(value, root, depth + 1));
            }
            "anyOf" | "oneOf" => {
                if let Some(subs) = value.as_array() {
                    let converted: Vec<Value> = subs
                        .iter()
                        .map(|sub| convert_schema(sub, root, depth + 1))
                        .collect();
                    out.insert("anyOf".into(), Value::Array(converted));
                }
            }
            "enum" => {
                if let Some(values) = value.as_array() {
                    if values.iter().all(Value::is_string) {
                        out.insert("enum".into(), value.clone());
                    } else if !object.contains_key("type") {
                        // Gemini takes string enums only; keep at least the values' type.
                        let kind = if values.iter().all(|v| v.is_i64() || v.is_u64()) {
                            "integer"
                        } else if values.iter().all(Value::is_number) {
                            "number"
                        } else {
                            "string"
                        };
                        out.insert("type".into(), kind.into());
                    }
                }
            }
            "const" if value.is_string() => {
                out.insert("enum".into(), json!([value]));
            }
            "allOf" | "items" | "const" => {}
            key if ALLOWED_SCHEMA_KEYS.contains(&key) => {
                out.insert(key.to_owned(), value.clone());
            }
            _ => {}
        }
    }
    // `required` may only name properties that exist.
    if let Some(required) = out.get("required").and_then(Value::as_array) {
        let props = out.get("properties").and_then(Value::as_object);
        let kept: Vec<Value> = required
            .iter()
            .filter(|name| {
                name.as_str()
                    .is_some_and(|n| props.is_some_and(|p| p.contains_key(n)))
            })
            .cloned()
            .collect();
        if kept.is_empty() {
            out.remove("required");
        } else {
            out.insert("required".into(), Value::Array(kept));
        }
    }
    if out.contains_key("enum") && !out.contains_key("type") {
        out.insert("type".into(), "string".into());
    }
    Value::Object(out)
}

fn merge_schema(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (key, value) in from {
        match (key.as_str(), into.get_mut(&key), value) {
            ("properties", Some(Value::Object(existing)), Value::Object(more)) => {
                existing.extend(more);
            }
            ("required", Some(Value::Array(existing)), Value::Array(more)) => {
                existing.extend(more);
            }
            (_, _, value) => {
                into.insert(key, value);
            }
        }
    }
}

fn resolve_ref<'a>(root: &'a Value, target: &str) -> Option<&'a Value> {
    let path = target.strip_prefix('#')?;
    root.pointer(path)
}

fn model_from_entry(entry: &Value) -> Option<ModelInfo> {
    let name = entry["name"].as_str()?;
    let id = name
        .strip_prefix("models/")
        .unwrap_or(name)
        .trim()
        .to_owned();
    // An entry without a name cannot be asked for: not listed as an empty one.
    if id.is_empty() {
        return None;
    }
    let chat = entry["supportedGenerationMethods"]
        .as_array()
        .is_some_and(|m| m.iter().any(|v| v.as_str() == Some("generateContent")));
    if !chat {
        return None;
    }
    Some(ModelInfo {
        display_name: entry["displayName"].as_str().map(str::to_owned),
        context_window: entry["inputTokenLimit"].as_u64(),
        max_output_tokens: entry["outputTokenLimit"].as_u64(),
        capabilities: Capabilities {
            tools: true,
            thinking: entry["thinking"].as_bool().unwrap_or(false),
            vision: true,
            adaptive_thinking: false,
        },
        prices: None,
        id,
    })
}

/// `{"error":{"code":400,"message":"…","status":"INVALID_ARGUMENT"}}`.
fn parse_error(body: &[u8]) -> Option<(Option<String>, String)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    // Some proxies wrap it in an array.
    let value = value.as_array().and_then(|a| a.first()).unwrap_or(&value);
    error_fields(value.get("error")?)
}

fn error_fields(error: &Value) -> Option<(Option<String>, String)> {
    let message = error["message"].as_str()?.to_owned();
    Some((error["status"].as_str().map(str::to_owned), message))
}

impl Provider for GeminiProvider {
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
                    let thinks = match inner.model_info(&request.model).await {
                        Some(info) => info.capabilities.thinking,
                        None => name_suggests_thinking(&request.model),
                    };
                    let body = inner.body(&request, thinks);
                    let url = inner.transport.url(&format!(
                        "/v1beta/models/{}:streamGenerateContent?alt=sse",
                        request.model
                    ));
                    let http = inner
                        .authorized(inner.transport.client()?.post(url))
                        .json(&body);
                    Ok((http, GeminiDecoder::new(inner.transport.name().to_owned())))
                }
                .boxed()
            }),
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

/// Decodes `GenerateContentResponse` events.
pub(crate) struct GeminiDecoder {
    provider: String,
    calls: usize,
    finish: Option<String>,
    /// The prompt was blocked: Gemini's reason and its own words, if any.
    blocked: Option<String>,
}

/// One `GenerateContentResponse`, decoded only as far as the hot path needs: rare parts
/// (`functionCall`, `promptFeedback`, `error`) stay raw until they are there.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    #[serde(borrow, default)]
    candidates: Few<Candidate<'a>>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(borrow, default)]
    prompt_feedback: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(borrow, default)]
    content: Option<Content<'a>>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    finish_reason: Option<Cow<'a, str>>,
    /// Gemini's words on the finish (the malformed call, for `MALFORMED_FUNCTION_CALL`).
    #[serde(default)]
    finish_message: Option<String>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    parts: Few<Part<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    thought_signature: Option<String>,
    #[serde(borrow, default)]
    function_call: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct FunctionCall {
    name: String,
    #[serde(default)]
    args: Value,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    thoughts_token_count: u64,
    #[serde(default)]
    cached_content_token_count: u64,
}

impl GeminiDecoder {
    pub(crate) fn new(provider: String) -> Self {
        GeminiDecoder {
            provider,
            calls: 0,
            finish: None,
            blocked: None,
        }
    }
}

impl Decoder for GeminiDecoder {
    const FRAMING: Framing = Framing::Sse;
    const ARRAY_BODY: bool = true;

    fn feed(
        &mut self,
        _event: &str,
        data: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        whole_event(out, |out| self.feed_response(data, out))
    }

    fn is_done(&self) -> bool {
        false
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        if let Some(reason) = &self.blocked {
            return Err(ProviderError::Blocked {
                provider: self.provider.clone(),
                reason: reason.clone(),
            });
        }
        let reason = match self.finish.as_deref() {
            None => {
                return Err(ProviderError::StreamBroken {
                    provider: self.provider.clone(),
                    message: "the body ended before a finishReason".into(),
                });
            }
            Some(_) if self.calls > 0 => FinishReason::ToolCalls,
            Some("STOP") => FinishReason::Stop,
            Some("MAX_TOKENS") => FinishReason::Length,
            Some(
                "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
                | "IMAGE_SAFETY",
            ) => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_owned()),
        };
        out.push(StreamEvent::Finish(reason));
        Ok(())
    }
}

/// Runs `decode`, taking back what it pushed if it fails: a malformed part later in the event
/// voids the whole event, as if it had been decoded in one go before anything was emitted.
fn whole_event(
    out: &mut Vec<StreamEvent>,
    decode: impl FnOnce(&mut Vec<StreamEvent>) -> Result<(), ProviderError>,
) -> Result<(), ProviderError> {
    let before = out.len();
    let fed = decode(out);
    if fed.is_err() {
        out.truncate(before);
    }
    fed
}

/// The event Gemini streams for nearly every delta: one candidate with one plain text part,
/// maybe a finish reason, maybe usage, and the ids the decoder ignores.
struct Hot<'a> {
    text: &'a str,
    finish: Option<&'a str>,
    usage: Option<UsageMetadata>,
}

/// Reads `data` as the hot event shape, or answers `None` for anything else (escapes, thought
/// parts, signatures, calls, errors, several parts or candidates, unknown keys, duplicate keys,
/// other value types): those go to serde, which decides the way it always did.
fn hot(data: &str) -> Option<Hot<'_>> {
    let mut s = Scanner::new(data);
    let (mut candidates, mut content, mut parts) = (false, false, false);
    let mut text = None;
    let mut finish = None;
    let mut usage = None;
    s.object(|s, key| match key {
        "candidates" if !candidates => {
            candidates = true;
            s.single(|s| {
                s.object(|s, key| match key {
                    "content" if !content => {
                        content = true;
                        s.object(|s, key| match key {
                            "parts" if !parts => {
                                parts = true;
                                s.single(|s| {
                                    s.object(|s, key| match key {
                                        "text" if text.is_none() => {
                                            text = Some(s.string()?);
                                            Some(())
                                        }
                                        _ => None,
                                    })
                                })
                            }
                            "role" => s.string().map(drop),
                            _ => None,
                        })
                    }
                    "finishReason" if finish.is_none() => {
                        finish = Some(s.string()?);
                        Some(())
                    }
                    "index" => s.uint().map(drop),
                    _ => None,
                })
            })
        }
        "usageMetadata" if usage.is_none() => {
            let mut counts = [None; 4];
            s.object(|s, key| {
                let slot = match key {
                    "promptTokenCount" => 0,
                    "candidatesTokenCount" => 1,
                    "thoughtsTokenCount" => 2,
                    "cachedContentTokenCount" => 3,
                    _ => return s.uint().map(drop),
                };
                match counts[slot] {
                    Some(_) => None,
                    None => {
                        counts[slot] = Some(s.uint()?);
                        Some(())
                    }
                }
            })?;
            let [prompt, candidates, thoughts, cached] = counts.map(Option::unwrap_or_default);
            usage = Some(UsageMetadata {
                prompt_token_count: prompt,
                candidates_token_count: candidates,
                thoughts_token_count: thoughts,
                cached_content_token_count: cached,
            });
            Some(())
        }
        "modelVersion" | "responseId" => s.string().map(drop),
        _ => None,
    })?;
    s.end()?;
    Some(Hot {
        text: text?,
        finish,
        usage,
    })
}

fn usage_event(usage: UsageMetadata) -> StreamEvent {
    let cached = usage.cached_content_token_count;
    StreamEvent::Usage(Usage {
        input_tokens: usage.prompt_token_count.saturating_sub(cached),
        output_tokens: usage.candidates_token_count + usage.thoughts_token_count,
        cache_read_tokens: cached,
        reasoning_tokens: usage.thoughts_token_count,
        ..Usage::default()
    })
}

impl GeminiDecoder {
    fn feed_response(
        &mut self,
        data: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        if let Some(hot) = std::str::from_utf8(data).ok().and_then(hot) {
            if !hot.text.is_empty() {
                out.push(StreamEvent::TextDelta {
                    text: hot.text.to_owned(),
                });
            }
            if let Some(reason) = hot.finish {
                self.finish = Some(reason.to_owned());
            }
            if let Some(usage) = hot.usage {
                out.push(usage_event(usage));
            }
            return Ok(());
        }
        self.feed_with_serde(data, out)
    }

    /// The general decoder, for every event the hot path steps aside from.
    fn feed_with_serde(
        &mut self,
        data: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        let invalid = |e: serde_json::Error| ProviderError::Malformed {
            provider: self.provider.clone(),
            message: format!("invalid event ({e}): {}", preview(data)),
        };
        let response: Response<'_> = parse_event(data).map_err(invalid)?;
        if let Some(error) = parse_raw::<Value>(response.error).map_err(invalid)? {
            let (code, message) =
                error_fields(&error).unwrap_or((None, "unknown error".to_owned()));
            return Err(if looks_like_context_overflow(code.as_deref(), &message) {
                ProviderError::ContextOverflow {
                    provider: self.provider.clone(),
                    message,
                    needed: None,
                    limit: None,
                }
            } else {
                ProviderError::Stream {
                    provider: self.provider.clone(),
                    code,
                    message,
                }
            });
        }
        for candidate in response.candidates {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                if let Some(call) =
                    parse_raw::<FunctionCall>(part.function_call).map_err(invalid)?
                {
                    let id = call
                        .id
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(|| format!("{SYNTHETIC_ID_PREFIX}{}", self.calls));
                    self.calls += 1;
                    let arguments = match call.args {
                        Value::Null => Value::Object(Map::new()),
                        other => other,
                    };
                    out.push(StreamEvent::ToolCall(ToolCall {
                        id,
                        name: call.name,
                        arguments,
                        signature: part.thought_signature,
                    }));
                    continue;
                }
                let text = part.text.unwrap_or(Cow::Borrowed(""));
                let delta = |text: String| {
                    if part.thought {
                        StreamEvent::ReasoningDelta { text }
                    } else {
                        StreamEvent::TextDelta { text }
                    }
                };
                match part.thought_signature {
                    // A signed part stays a part of its own, in position.
                    Some(signature) => {
                        out.push(StreamEvent::PartEnd { signature: None });
                        out.push(delta(text.into_owned()));
                        out.push(StreamEvent::PartEnd {
                            signature: Some(signature),
                        });
                    }
                    None if !text.is_empty() => out.push(delta(text.into_owned())),
                    None => {}
                }
            }
            if let Some(reason) = candidate.finish_reason {
                self.finish = Some(match candidate.finish_message {
                    // The reason, then Gemini's words: `Other("MALFORMED_FUNCTION_CALL: …")`.
                    Some(words) if reason == "MALFORMED_FUNCTION_CALL" => {
                        let words: String = words.chars().take(500).collect();
                        format!("{reason}: {words}")
                    }
                    _ => reason.into_owned(),
                });
            }
        }
        if let Some(feedback) = parse_raw::<Value>(response.prompt_feedback).map_err(invalid)?
            && let Some(reason) = feedback.get("blockReason")
        {
            let reason = reason.as_str().unwrap_or("BLOCK_REASON_UNSPECIFIED");
            self.blocked = Some(match feedback["blockReasonMessage"].as_str() {
                Some(words) => format!("{reason}: {words}"),
                None => reason.to_owned(),
            });
        }
        if let Some(usage) = response.usage_metadata {
            out.push(usage_event(usage));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::{HotPath, agree, agree_on_all, combinations, mutations};

    impl HotPath for GeminiDecoder {
        type State = (usize, Option<String>, Option<String>);

        fn feed_serde_only(
            &mut self,
            data: &[u8],
            out: &mut Vec<StreamEvent>,
        ) -> Result<(), ProviderError> {
            whole_event(out, |out| self.feed_with_serde(data, out))
        }

        fn state(&self) -> Self::State {
            (self.calls, self.finish.clone(), self.blocked.clone())
        }

        fn is_hot(data: &str) -> bool {
            hot(data).is_some()
        }
    }

    fn decoder() -> GeminiDecoder {
        GeminiDecoder::new("g".into())
    }

    #[test]
    fn the_hot_path_gives_exactly_what_serde_gives() {
        let texts: &[&str] = &[
            r#""tok""#,
            r#""""#,
            r#""caf\u00e9""#,
            r#""a\nb""#,
            "\"日本\"",
            r#""say \"hi\"""#,
            "\"tab\there\"",
            "null",
            "3",
        ];
        let part_extras: &[&str] = &[
            "",
            r#","thought":true"#,
            r#","thoughtSignature":"c2ln""#,
            r#","x":1"#,
        ];
        let finishes: &[&str] = &[
            "",
            r#","finishReason":"STOP""#,
            r#","finishReason":"MAX_TOKENS""#,
            r#","finishReason":"SAFETY","finishReason":"STOP""#,
            r#","finishReason":null"#,
        ];
        let usages: &[&str] = &[
            "",
            r#","usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":3,"thoughtsTokenCount":2,"cachedContentTokenCount":5,"totalTokenCount":17}"#,
            r#","usageMetadata":{}"#,
            r#","usageMetadata":{"promptTokenCount":0}"#,
            r#","usageMetadata":{"promptTokenCount":1,"promptTokenCount":2}"#,
            r#","usageMetadata":{"promptTokenCount":07}"#,
            r#","usageMetadata":{"promptTokenCount":1.5}"#,
            r#","usageMetadata":{"promptTokenCount":-1}"#,
            r#","usageMetadata":{"promptTokenCount":1e3}"#,
            r#","usageMetadata":{"promptTokenCount":18446744073709551615}"#,
            r#","usageMetadata":{"promptTokenCount":18446744073709551616}"#,
            r#","usageMetadata":{"promptTokensDetails":[{"modality":"TEXT","tokenCount":4}]}"#,
            r#","usageMetadata":null"#,
        ];
        let tails: &[&str] = &[
            r#","modelVersion":"gemini-2.5-flash","responseId":"r1""#,
            "",
            r#","promptFeedback":{"blockReason":"SAFETY"}"#,
            r#","error":{"code":400,"message":"input token count exceeds the maximum"}"#,
            r#","candidates":[]"#,
        ];
        let mut events = combinations(
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":@@}]}@,"index":0}]@@}"#,
            &[texts, part_extras, finishes, usages, tails],
        );
        // Other shapes around the hot one: reordered keys, whitespace, several parts or
        // candidates, missing pieces, calls, trailing bytes.
        events.extend(
            [
                r#"{"usageMetadata":{"candidatesTokenCount":1},"candidates":[{"index":0,"finishReason":"STOP","content":{"parts":[{"text":"x"}],"role":"model"}}]}"#,
                " {\n \"candidates\" : [ { \"content\" : { \"parts\" : [ { \"text\" : \"x\" } ] } } ] }\r\n",
                r#"{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b"}]}}]}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}},{"content":{"parts":[{"text":"b"}]}}]}"#,
                r#"{"candidates":[{"content":{"parts":[]}}]}"#,
                r#"{"candidates":[{"content":{"parts":[{}]}}]}"#,
                r#"{"candidates":[{"content":{}}]}"#,
                r#"{"candidates":[{"finishReason":"STOP"}]}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"content":{"parts":[{"text":"b"}]}}]}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"candidates":[]}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"a","text":"b"}]}}]}"#,
                r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"read","args":{"path":"a"}}}]}}]}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}]} x"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}]}{}"#,
                r#"{"\u0063andidates":[{"content":{"parts":[{"text":"a"}]}}]}"#,
                r#"{"candidates":[{"content":{"role":1,"parts":[{"text":"a"}]}}]}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"index":-1}]}"#,
                r#"{"usageMetadata":{"promptTokenCount":4}}"#,
                r#"{}"#,
                "[]",
                "",
            ]
            .map(str::to_owned),
        );
        // Every hot event cut short and with a stray byte in every position.
        events.extend(mutations(
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"tok"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":3},"modelVersion":"m"}"#,
        ));
        let taken = agree_on_all(decoder, &events);
        // The hot path really is taken, for a good share of what was generated.
        assert!(
            taken > 400,
            "hot path taken {taken} of {} times",
            events.len()
        );
    }

    #[test]
    fn the_simulators_delta_takes_the_hot_path() {
        let event = r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"tok "}]},"index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":3,"thoughtsTokenCount":0,"cachedContentTokenCount":0,"totalTokenCount":15},"modelVersion":"gemini-sim","responseId":"sim123"}"#;
        assert!(agree(&decoder, event));
        let hot = hot(event).unwrap();
        assert_eq!(hot.text, "tok ");
        assert!(hot.finish.is_none());
    }

    #[test]
    fn schema_is_reduced_to_what_gemini_accepts() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "description": "file"},
                "offset": {"type": ["integer", "null"], "exclusiveMinimum": 0},
                "mode": {"oneOf": [{"const": "a"}, {"const": "b"}]},
                "item": {"$ref": "#/$defs/Item"},
                "n": {"enum": [1, 2]}
            },
            "required": ["path", "ghost"],
            "$defs": {"Item": {"type": "object", "properties": {"x": {"type": "string"}}}}
        });
        let out = gemini_schema(&schema);
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "file"},
                    "offset": {"type": "integer", "nullable": true},
                    "mode": {"anyOf": [{"enum": ["a"], "type": "string"}, {"enum": ["b"], "type": "string"}]},
                    "item": {"type": "object", "properties": {"x": {"type": "string"}}},
                    "n": {"type": "integer"}
                },
                "required": ["path"]
            })
        );
    }

    #[test]
    fn thinking_config_follows_the_family() {
        assert_eq!(
            thinking_config("gemini-2.5-flash", ReasoningLevel::Medium),
            json!({"thinkingBudget": 8192, "includeThoughts": true})
        );
        assert_eq!(
            thinking_config("gemini-2.5-flash", ReasoningLevel::Off),
            json!({"thinkingBudget": 0, "includeThoughts": false})
        );
        assert_eq!(
            thinking_config("gemini-2.5-pro", ReasoningLevel::Off),
            json!({"thinkingBudget": 128, "includeThoughts": false})
        );
        assert_eq!(
            thinking_config("gemini-2.5-pro", ReasoningLevel::High),
            json!({"thinkingBudget": 24576, "includeThoughts": true})
        );
        assert_eq!(
            thinking_config("gemini-3-pro-preview", ReasoningLevel::Low),
            json!({"thinkingLevel": "low", "includeThoughts": true})
        );
        assert_eq!(
            thinking_config("gemini-3-pro-preview", ReasoningLevel::High),
            json!({"thinkingLevel": "high", "includeThoughts": true})
        );
    }
}
