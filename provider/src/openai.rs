//! OpenAI-compatible chat completions over SSE: OpenAI, OpenRouter, LM Studio, llama.cpp, vLLM.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::Provider;
use crate::body::Decoder;
use crate::error::{ProviderError, looks_like_context_overflow};
use crate::event::{FinishReason, StreamEvent, Usage};
use crate::frame::Framing;
use crate::http::{EventStream, Transport, run_stream};
use crate::model::{Capabilities, ModelCache, ModelInfo, Prices, per_token_to_per_million};
use crate::ollama::preview;
use crate::request::{AssistantPart, ChatRequest, Message, ReasoningLevel, ToolCall};
use crate::settings::{ProviderConfig, default_output_cap};
use crate::wire::{Few, Scanner, parse_event, parse_raw};
use totem_protocol::OutputLimitField;

/// A server speaking OpenAI chat completions. The base URL includes the version path.
#[derive(Clone)]
pub struct OpenAiProvider {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Arc<Transport>,
    models: ModelCache,
    /// Models this server could not stream: a streamed request came back empty (or refused) and
    /// the same request without streaming was answered. Asked without streaming from then on.
    unstreamed: Mutex<HashSet<String>>,
    /// Models that want their reasoning back as `reasoning_content` on the assistant messages
    /// that called tools (DeepSeek thinking models): they streamed it, or refused a history
    /// without it.
    reasoning_back: Mutex<HashSet<String>>,
    /// Where each model took the output limit after the server refused the other field: `true`
    /// for `max_completion_tokens`.
    limit_field: Mutex<std::collections::HashMap<String, bool>>,
}

impl OpenAiProvider {
    /// A provider calling the server `config` describes; fails only when its HTTP client cannot
    /// be built.
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderError> {
        Ok(OpenAiProvider {
            inner: Arc::new(Inner {
                transport: Transport::new(config)?,
                models: ModelCache::default(),
                unstreamed: Mutex::new(HashSet::new()),
                reasoning_back: Mutex::new(HashSet::new()),
                limit_field: Mutex::new(std::collections::HashMap::new()),
            }),
        })
    }
}

impl Inner {
    fn authorized(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.transport.config.api_key {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }

    async fn list(&self, retries: bool) -> Result<Vec<ModelInfo>, ProviderError> {
        let url = self.transport.url("/models");
        let body = self
            .transport
            .fetch_json(
                |client| self.authorized(client.get(&url)),
                "",
                parse_error,
                retries,
            )
            .await?;
        let entries = body["data"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut models: Vec<ModelInfo> = entries.iter().filter_map(model_from_entry).collect();
        if entries.iter().any(|e| e["meta"].is_object()) {
            // llama.cpp lists the trained window; the one it runs with is in /props.
            if let Some(n_ctx) = self.llamacpp_n_ctx().await {
                for model in &mut models {
                    model.context_window = Some(n_ctx);
                }
            }
        } else if models.iter().all(|m| m.context_window.is_none())
            && !self.transport.config.base_url.contains("api.openai.com")
        {
            // LM Studio tells its windows on its own endpoint.
            self.lmstudio_details(&mut models).await;
        }
        for model in &mut models {
            if model.context_window.is_none() {
                model.context_window = known_window(&model.id);
            }
        }
        self.models.put(models.clone());
        Ok(models)
    }

    /// A side request for what the model list leaves out: answered or not, never retried, and
    /// a failure only means the list says less.
    async fn side_json(&self, path: &str) -> Option<Value> {
        let url = format!("{}{path}", server_root(self.transport.config.base()));
        self.transport
            .fetch_json(
                |client| self.authorized(client.get(&url)),
                "",
                parse_error,
                false,
            )
            .await
            .ok()
    }

    /// llama.cpp's `GET /props`: the context the server was started with.
    async fn llamacpp_n_ctx(&self) -> Option<u64> {
        let props = self.side_json("/props").await?;
        props["default_generation_settings"]["n_ctx"]
            .as_u64()
            .or_else(|| props["n_ctx"].as_u64())
            .filter(|n| *n > 0)
    }

    /// LM Studio's `GET /api/v0/models`: windows (the loaded one when the model is loaded) and
    /// which models are for embeddings or vision.
    async fn lmstudio_details(&self, models: &mut [ModelInfo]) {
        let Some(body) = self.side_json("/api/v0/models").await else {
            return;
        };
        for entry in body["data"].as_array().into_iter().flatten() {
            let Some(model) = models.iter_mut().find(|m| entry["id"] == m.id.as_str()) else {
                continue;
            };
            let loaded = entry["loaded_context_length"].as_u64().filter(|n| *n > 0);
            if let Some(window) = loaded.or_else(|| entry["max_context_length"].as_u64()) {
                model.context_window = Some(window);
            }
            match entry["type"].as_str() {
                Some("embeddings") => model.capabilities.tools = false,
                Some("vlm") => model.capabilities.vision = true,
                _ => {}
            }
        }
    }

    /// What the catalogue says about a model; listed once per cache lifetime.
    async fn model_info(&self, id: &str) -> Option<ModelInfo> {
        if !self.models.is_fresh() && self.list(false).await.is_err() {
            self.models.put(Vec::new());
        }
        self.models.find(id)
    }

    /// Whether to ask `model` for a streamed answer: not when its settings say `stream: false`
    /// or the server showed it cannot.
    fn streams(&self, model: &str) -> bool {
        self.transport.config.model(model).stream != Some(false)
            && self
                .unstreamed
                .lock()
                .map_or(true, |models| !models.contains(model))
    }

    fn wants_reasoning_back(&self, model: &str) -> bool {
        self.reasoning_back
            .lock()
            .is_ok_and(|models| models.contains(model))
    }

    /// Learns that `model` wants its reasoning back; answers whether that is news.
    fn remember_reasoning_back(&self, model: &str) -> bool {
        self.reasoning_back
            .lock()
            .is_ok_and(|mut models| models.insert(model.to_owned()))
    }

    /// Whether the output limit goes in `max_completion_tokens` for `model`: as its settings
    /// say, else as the server showed, else on OpenAI's own API only.
    fn completion_tokens_field(&self, model: &str) -> bool {
        if let Some(field) = self.transport.config.model(model).output_limit_field {
            return field == OutputLimitField::MaxCompletionTokens;
        }
        let learned = self
            .limit_field
            .lock()
            .ok()
            .and_then(|fields| fields.get(model).copied());
        learned.unwrap_or_else(|| self.transport.config.base_url.contains("api.openai.com"))
    }

    /// The server refused the output limit's field for `model`: the other one from now on
    /// (unless the settings name one). Answers whether that changed anything.
    fn switch_limit_field(&self, model: &str, completion_tokens: bool) -> bool {
        if self
            .transport
            .config
            .model(model)
            .output_limit_field
            .is_some()
            || self.completion_tokens_field(model) == completion_tokens
        {
            return false;
        }
        self.limit_field
            .lock()
            .is_ok_and(|mut fields| fields.insert(model.to_owned(), completion_tokens).is_none())
    }

    fn remember_unstreamed(&self, model: &str) {
        if let Ok(mut models) = self.unstreamed.lock() {
            models.insert(model.to_owned());
        }
    }

    fn body(
        &self,
        request: &ChatRequest,
        info: Option<&ModelInfo>,
        thinks: bool,
        stream: bool,
    ) -> Value {
        let config = &self.transport.config;
        let settings = config.model(&request.model);
        let mut body = Map::new();
        body.insert("model".into(), request.model.clone().into());
        body.insert("stream".into(), Value::Bool(stream));
        if stream {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        let reasoning_back = self.wants_reasoning_back(&request.model);
        body.insert(
            "messages".into(),
            Value::Array(messages(request, reasoning_back)),
        );
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
            body.insert("tool_choice".into(), "auto".into());
        }
        if let Some(t) = request
            .temperature
            .or(settings.temperature)
            .or(config.temperature)
        {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = request.top_p {
            body.insert("top_p".into(), json!(p));
        }
        let hosted =
            config.base_url.contains("api.openai.com") || config.base_url.contains("openrouter.ai");
        if let Some(p) = request.repeat_penalty.filter(|_| !hosted) {
            // llama.cpp, llama-cpp-python and LM Studio take it; OpenAI refuses unknown fields.
            body.insert("repeat_penalty".into(), json!(p));
        }
        if let Some(schema) = &request.answer_schema {
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {"name": "step", "schema": schema}}),
            );
        }
        let max = request
            .max_output_tokens
            .or(settings.max_output_tokens)
            .or_else(|| info.and_then(|i| u32::try_from(i.max_output_tokens?).ok()));
        if self.completion_tokens_field(&request.model) {
            // OpenAI's own API wants the newer name (its reasoning models refuse `max_tokens`,
            // and count their reasoning in it, so no default cap is set there); so do Azure
            // and gateways in front of them.
            if let Some(max) = max {
                body.insert("max_completion_tokens".into(), max.into());
            }
        } else {
            // A local server without a limit lets a model that repeats itself run until its
            // context is full: cap the answer when nothing better is known.
            let window = settings
                .context_window
                .or_else(|| info.and_then(|i| i.context_window));
            let max = max.unwrap_or_else(|| default_output_cap(window));
            body.insert("max_tokens".into(), max.into());
        }
        if thinks && request.reasoning != ReasoningLevel::Off {
            body.insert("reasoning_effort".into(), request.reasoning.as_str().into());
        }
        Value::Object(body)
    }
}

/// What an answer on this wire left to send back with it, kept in an
/// [`AssistantPart::RedactedReasoning`] part as `{"openaiCompat": {…}}`: which field the
/// reasoning came in (DeepSeek wants `reasoning_content` back on its tool calls) and
/// OpenRouter's `reasoning_details`, to send back unchanged.
const REPLAY_KEY: &str = "openaiCompat";

fn replay_state(data: &str) -> Option<Value> {
    let mut value: Value = serde_json::from_str(data).ok()?;
    value.get_mut(REPLAY_KEY).map(Value::take)
}

/// `messages` for a request. With `reasoning_back`, an assistant message that called tools
/// carries its reasoning as `reasoning_content`.
fn messages(request: &ChatRequest, reasoning_back: bool) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        match message {
            Message::User { text, images } if images.is_empty() => {
                out.push(json!({"role": "user", "content": text}));
            }
            Message::User { text, images } => {
                let mut content = vec![json!({"type": "text", "text": text})];
                for image in images {
                    content.push(json!({"type": "image_url", "image_url": {
                        "url": format!("data:{};base64,{}", image.media_type, image.data_base64)}}));
                }
                out.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant { parts } => {
                let mut text = String::new();
                let mut reasoning = String::new();
                let mut state = Value::Null;
                let mut calls = Vec::new();
                for part in parts {
                    match part {
                        AssistantPart::Text { text: t, .. } => text.push_str(t),
                        AssistantPart::ToolCall(call) => {
                            let mut wire = json!({
                                "id": call.id, "type": "function",
                                "function": {"name": call.name, "arguments": arguments_string(&call.arguments)}
                            });
                            // Gemini's `extra_content` (its thought signature), as it came.
                            if let Some(extra) = call
                                .signature
                                .as_deref()
                                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                                .filter(Value::is_object)
                            {
                                wire["extra_content"] = extra;
                            }
                            calls.push(wire);
                        }
                        AssistantPart::Reasoning { text: t, .. } => reasoning.push_str(t),
                        AssistantPart::RedactedReasoning { data } => {
                            if let Some(found) = replay_state(data) {
                                state = found;
                            }
                        }
                    }
                }
                // Never `null`: llama-cpp-python refuses it (HTTP 500), and an empty string is
                // what every server takes with tool calls.
                let mut m = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    m["tool_calls"] = Value::Array(calls);
                    // Reasoning goes back only where the server asked for it: OpenAI itself
                    // refuses fields it does not know.
                    let back = reasoning_back || state["field"] == "reasoning_content";
                    if back && !reasoning.is_empty() {
                        m["reasoning_content"] = reasoning.into();
                    }
                }
                if state["details"].as_array().is_some_and(|d| !d.is_empty()) {
                    m["reasoning_details"] = state["details"].take();
                }
                out.push(m);
            }
            Message::ToolResult(result) => {
                let content = if result.is_error {
                    format!("error: {}", result.content)
                } else {
                    result.content.clone()
                };
                out.push(
                    json!({"role": "tool", "tool_call_id": result.call_id, "content": content}),
                );
            }
        }
    }
    out
}

/// Arguments go over this wire as a JSON string; ones no repair made an object go back as
/// `{}` (the tool's result already said what was wrong with them): vLLM and llama.cpp parse
/// the history's arguments to render their chat templates and refuse what is not JSON.
fn arguments_string(arguments: &Value) -> String {
    match arguments {
        Value::Object(_) => arguments.to_string(),
        Value::String(raw) if serde_json::from_str::<Value>(raw).is_ok_and(|v| v.is_object()) => {
            raw.clone()
        }
        _ => "{}".to_owned(),
    }
}

/// Models known to reason when the catalogue does not say.
fn name_suggests_thinking(id: &str) -> bool {
    let id = id.rsplit('/').next().unwrap_or(id).to_ascii_lowercase();
    ["o1", "o3", "o4", "gpt-5"]
        .iter()
        .any(|p| id.starts_with(p))
        || ["-r1", "qwq", "qwen3", "thinking", "reasoner", "gpt-oss"]
            .iter()
            .any(|p| id.contains(p))
}

/// The server's root, where llama.cpp and LM Studio keep their own endpoints: the base URL
/// without its `/v1`.
fn server_root(base: &str) -> &str {
    base.strip_suffix("/v1").unwrap_or(base)
}

/// Models that embed text and cannot chat, let alone call tools.
fn is_embedding_model(id: &str) -> bool {
    let id = id.to_ascii_lowercase();
    id.contains("embed") || id.contains("bge-") || id.contains("rerank")
}

/// Windows of OpenAI's own models, which its model list does not give.
fn known_window(id: &str) -> Option<u64> {
    let id = id.rsplit('/').next().unwrap_or(id);
    let windows: &[(&str, u64)] = &[
        ("gpt-5", 400_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("o4-mini", 200_000),
        ("o3", 200_000),
        ("o1", 200_000),
        ("gpt-3.5-turbo", 16_385),
    ];
    windows
        .iter()
        .find(|(prefix, _)| id.starts_with(prefix))
        .map(|(_, window)| *window)
}

/// One `/models` entry, in OpenAI's shape or OpenRouter's (or a local server's additions).
fn model_from_entry(entry: &Value) -> Option<ModelInfo> {
    let id = entry["id"]
        .as_str()
        .map(str::trim)
        .filter(|id| !id.is_empty())?
        .to_owned();
    let context_window = entry["context_length"]
        .as_u64()
        .or_else(|| entry["top_provider"]["context_length"].as_u64())
        .or_else(|| entry["max_model_len"].as_u64())
        .or_else(|| entry["meta"]["n_ctx_train"].as_u64());
    let params = entry["supported_parameters"].as_array();
    let has_param = |name: &str| params.is_some_and(|p| p.iter().any(|v| v.as_str() == Some(name)));
    let (tools, thinking) = match params {
        Some(_) => (
            has_param("tools"),
            has_param("reasoning") || has_param("include_reasoning"),
        ),
        // OpenAI's shape says nothing: chat models take tools; reasoning goes by name.
        None => (!is_embedding_model(&id), name_suggests_thinking(&id)),
    };
    let vision = entry["architecture"]["input_modalities"]
        .as_array()
        .is_some_and(|m| m.iter().any(|v| v.as_str() == Some("image")));
    let pricing = &entry["pricing"];
    let price = |key: &str| pricing[key].as_str().and_then(per_token_to_per_million);
    let prices = match (price("prompt"), price("completion")) {
        (Some(input), Some(output)) => Some(Prices {
            input_per_million: input,
            output_per_million: output,
            cache_read_per_million: price("input_cache_read"),
            cache_write_per_million: price("input_cache_write"),
        }),
        _ => None,
    };
    Some(ModelInfo {
        display_name: entry["name"].as_str().map(str::to_owned),
        context_window,
        max_output_tokens: entry["top_provider"]["max_completion_tokens"].as_u64(),
        capabilities: Capabilities {
            tools,
            thinking,
            vision,
            adaptive_thinking: false,
        },
        prices,
        id,
    })
}

/// `{"error":{"message","type","code"}}`, OpenRouter's `{"error":{"code":402,"message"}}`,
/// vLLM's `{"object":"error","message","type"}`.
fn parse_error(body: &[u8]) -> Option<(Option<String>, String)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    // Gemini's OpenAI endpoint answers errors as a one-element array.
    match value {
        Value::Array(items) => items.first().and_then(error_fields),
        value => error_fields(&value),
    }
}

fn error_fields(value: &Value) -> Option<(Option<String>, String)> {
    let error = if value["error"].is_object() {
        &value["error"]
    } else if value["object"] == "error" {
        value
    } else if let Some(message) = value["error"].as_str() {
        return Some((None, message.to_owned()));
    } else {
        return None;
    };
    let mut message = error["message"].as_str().unwrap_or("no message").to_owned();
    // OpenRouter: "Provider returned error", with the upstream server's own answer in
    // `metadata.raw` (its JSON error, or text).
    if let Some(raw) = error["metadata"]["raw"].as_str() {
        let upstream = serde_json::from_str::<Value>(raw)
            .ok()
            .and_then(|v| match v {
                Value::Array(items) => items.first().and_then(error_fields),
                v => error_fields(&v),
            })
            .map_or_else(|| raw.trim().to_owned(), |(_, m)| m);
        let from = error["metadata"]["provider_name"].as_str();
        let upstream: String = upstream.chars().take(600).collect();
        message = match from {
            Some(from) => format!("{message} ({from}: {upstream})"),
            None => format!("{message} ({upstream})"),
        };
    }
    let code = match (&error["code"], error["type"].as_str()) {
        (Value::String(code), _) => Some(code.clone()),
        (_, Some(kind)) => Some(kind.to_owned()),
        (Value::Number(code), None) => Some(code.to_string()),
        _ => None,
    };
    Some((code, message))
}

impl Provider for OpenAiProvider {
    fn config(&self) -> &ProviderConfig {
        &self.inner.transport.config
    }

    fn release_idle_client(&self, unused: std::time::Duration) -> bool {
        self.inner.transport.release_idle(unused)
    }

    fn stream(&self, request: ChatRequest) -> EventStream {
        let inner = self.inner.clone();
        async_stream::stream! {
            let model = request.model.clone();
            let mut request = request;
            let mut flattened = false;
            loop {
                let mut events = answer(inner.clone(), Arc::new(request.clone()));
                let first = events.next().await;
                if let Some(Err(ProviderError::InvalidRequest { status: 400, message, .. })) = &first {
                    // Azure and gateways in front of reasoning models: "Unsupported parameter:
                    // 'max_tokens' … Use 'max_completion_tokens' instead" (or the reverse).
                    if let Some(completion_tokens) = refused_limit_field(message)
                        && inner.switch_limit_field(&model, completion_tokens)
                    {
                        tracing::info!(provider = inner.transport.name(), model = %model,
                            "the server refused the output limit's field; using the other one for this model");
                        continue;
                    }
                    // DeepSeek thinking models refuse a history whose tool calls lack their
                    // reasoning: send it back from now on, and ask again.
                    if message.contains("reasoning_content") && inner.remember_reasoning_back(&model) {
                        continue;
                    }
                    // A history this server cannot take (reasoning or signatures another
                    // model made, or none at all): the turns before the current prompt go as
                    // plain text, once, and the user is told.
                    if !flattened && refuses_history(message) && has_prior_tool_turns(&request) {
                        flattened = true;
                        request.messages = flatten_prior(std::mem::take(&mut request.messages));
                        let reason: String = message.chars().take(200).collect();
                        yield Ok(StreamEvent::Notice {
                            text: format!(
                                "{} refused the earlier tool calls of this session ({reason}); they were sent as plain text instead.",
                                inner.transport.name()
                            ),
                        });
                        continue;
                    }
                }
                let Some(first) = first else { return };
                learn_from(&inner, &model, &first);
                yield first;
                while let Some(item) = events.next().await {
                    learn_from(&inner, &model, &item);
                    yield item;
                }
                return;
            }
        }
        .boxed()
    }

    fn list_models(&self) -> BoxFuture<'static, Result<Vec<ModelInfo>, ProviderError>> {
        let inner = self.inner.clone();
        async move { inner.list(true).await }.boxed()
    }

    fn remember_models(&self, models: &[ModelInfo]) {
        self.inner.models.put(models.to_vec());
    }
}

/// What an answer tells about the model: that it sends its reasoning as `reasoning_content`.
fn learn_from(inner: &Inner, model: &str, item: &Result<StreamEvent, ProviderError>) {
    if let Ok(StreamEvent::RedactedReasoning { data }) = item
        && replay_state(data).is_some_and(|state| state["field"] == "reasoning_content")
    {
        inner.remember_reasoning_back(model);
    }
}

/// Which field a 400 about the output limit asks for: `Some(true)` for
/// `max_completion_tokens`, `Some(false)` for `max_tokens`.
fn refused_limit_field(message: &str) -> Option<bool> {
    let unsupported = |field: &str| {
        message.contains(&format!("'{field}'"))
            && message
                .to_ascii_lowercase()
                .contains("unsupported parameter")
    };
    if unsupported("max_tokens") && message.contains("max_completion_tokens") {
        // The message names both; the unsupported one comes first.
        let first_max_tokens = message.find("'max_tokens'");
        let first_completion = message.find("'max_completion_tokens'");
        return Some(first_max_tokens < first_completion || first_completion.is_none());
    }
    if unsupported("max_completion_tokens") {
        return Some(false);
    }
    None
}

/// A 400 about what the history carries with its tool calls (reasoning, thought signatures).
fn refuses_history(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "reasoning_content",
        "thought_signature",
        "thought signature",
        "reasoning_details",
    ]
    .iter()
    .any(|word| message.contains(word))
}

/// The index of the last user message: what comes before it is earlier prompts' turns.
fn last_prompt(request: &ChatRequest) -> usize {
    request
        .messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
        .unwrap_or(0)
}

fn has_prior_tool_turns(request: &ChatRequest) -> bool {
    request.messages[..last_prompt(request)]
        .iter()
        .any(|m| matches!(m, Message::ToolResult(_)))
}

/// The turns before the last prompt with their tool calls as text and results as user
/// messages, reasoning and signatures left out; the current prompt's turns as they are.
fn flatten_prior(messages: Vec<Message>) -> Vec<Message> {
    let last = messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
        .unwrap_or(0);
    let mut out = Vec::with_capacity(messages.len());
    for (n, message) in messages.into_iter().enumerate() {
        if n >= last {
            out.push(message);
            continue;
        }
        match message {
            Message::Assistant { parts } => {
                let mut text = String::new();
                for part in parts {
                    match part {
                        AssistantPart::Text { text: t, .. } => text.push_str(&t),
                        AssistantPart::ToolCall(call) => {
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(&format!(
                                "(called {} with {})",
                                call.name, call.arguments
                            ));
                        }
                        AssistantPart::Reasoning { .. }
                        | AssistantPart::RedactedReasoning { .. } => {}
                    }
                }
                if !text.is_empty() {
                    out.push(Message::Assistant {
                        parts: vec![AssistantPart::Text {
                            text,
                            signature: None,
                        }],
                    });
                }
            }
            Message::ToolResult(result) => out.push(Message::user(format!(
                "Result of {}{}:\n{}",
                result.tool_name,
                if result.is_error { " (error)" } else { "" },
                result.content
            ))),
            user => out.push(user),
        }
    }
    out
}

/// One answer: streamed, or asked again without streaming where the server cannot stream.
fn answer(inner: Arc<Inner>, request: Arc<ChatRequest>) -> EventStream {
    async_stream::stream! {
            if inner.streams(&request.model) {
                let mut events = streamed(inner.clone(), request.clone());
                let mut refused = None;
                while let Some(item) = events.next().await {
                    match item {
                        // Comes before any output: nothing streamed is repeated below.
                        // `stream: true` in the model's settings: stream or fail, never ask
                        // again without streaming (the probe tells servers apart this way).
                        Err(e @ ProviderError::CannotStream { .. })
                            if inner.transport.config.model(&request.model).stream == Some(true) =>
                        {
                            yield Err(e);
                            return;
                        }
                        Err(ProviderError::CannotStream { message, .. }) => {
                            refused = Some(message);
                            break;
                        }
                        other => yield other,
                    }
                }
                let Some(why) = refused else {
                    return;
                };
                tracing::info!(
                    provider = inner.transport.name(),
                    model = %request.model,
                    "the server cannot stream this answer ({why}); asking again without streaming"
                );
                let answer = inner.unstreamed_answer(&request).await;
                if answer.is_ok() {
                    inner.remember_unstreamed(&request.model);
                }
                for item in answer.map_or_else(|e| vec![Err(e)], |events| events.into_iter().map(Ok).collect()) {
                    yield item;
                }
            } else {
                for item in inner.unstreamed_answer(&request).await.map_or_else(|e| vec![Err(e)], |events| events.into_iter().map(Ok).collect()) {
                    yield item;
                }
            }
        }
        .boxed()
}

/// One streamed attempt series (retried while nothing has streamed).
fn streamed(inner: Arc<Inner>, request: Arc<ChatRequest>) -> EventStream {
    let model = request.model.clone();
    run_stream(
        inner.transport.clone(),
        model,
        parse_error,
        Box::new(move || {
            let inner = inner.clone();
            let request = request.clone();
            async move {
                let (info, thinks) = inner.info_for(&request).await;
                let body = inner.body(&request, info.as_ref(), thinks, true);
                let http = inner.authorized(
                    inner
                        .transport
                        .client()?
                        .post(inner.transport.url("/chat/completions"))
                        .json(&body),
                );
                Ok((http, OpenAiDecoder::new(inner.transport.name().to_owned())))
            }
            .boxed()
        }),
    )
}

impl Inner {
    /// What the catalogue says about the request's model, and whether it thinks.
    async fn info_for(&self, request: &ChatRequest) -> (Option<ModelInfo>, bool) {
        let info = self.model_info(&request.model).await;
        let thinks = request.reasoning != ReasoningLevel::Off
            && match &info {
                Some(info) => info.capabilities.thinking,
                None => name_suggests_thinking(&request.model),
            };
        (info, thinks)
    }

    /// The whole answer from one request with `stream: false` (retried like a stream that has
    /// not started), as the events a stream would have given.
    async fn unstreamed_answer(
        &self,
        request: &ChatRequest,
    ) -> Result<Vec<StreamEvent>, ProviderError> {
        let (info, thinks) = self.info_for(request).await;
        let body = self.body(request, info.as_ref(), thinks, false);
        let url = self.transport.url("/chat/completions");
        let answer = self
            .transport
            .fetch_json(
                |client| self.authorized(client.post(&url).json(&body)),
                &request.model,
                parse_error,
                true,
            )
            .await?;
        let mut decoder = OpenAiDecoder::new(self.transport.name().to_owned());
        let mut out = Vec::new();
        decoder.feed("", &as_chunk(&answer).to_string().into_bytes(), &mut out)?;
        decoder.feed("", b"[DONE]", &mut out)?;
        Ok(out)
    }
}

/// A whole chat completion in the shape of one stream chunk (each `message` as its `delta`, each
/// tool call with its index), so the stream's decoder reads it.
fn as_chunk(answer: &Value) -> Value {
    let mut chunk = answer.clone();
    let choices = chunk
        .as_object_mut()
        .and_then(|c| c.get_mut("choices"))
        .and_then(Value::as_array_mut);
    for choice in choices.into_iter().flatten() {
        let Some(choice) = choice.as_object_mut() else {
            continue;
        };
        let mut delta = choice.remove("message").unwrap_or(Value::Null);
        let calls = delta
            .as_object_mut()
            .and_then(|d| d.get_mut("tool_calls"))
            .and_then(Value::as_array_mut);
        for (index, call) in calls.into_iter().flatten().enumerate() {
            if let Some(call) = call.as_object_mut() {
                call.insert("index".into(), index.into());
            }
        }
        choice.insert("delta".into(), delta);
    }
    chunk
}

/// Decodes chat-completion chunks.
pub(crate) struct OpenAiDecoder {
    provider: String,
    calls: Vec<PendingCall>,
    finish: Option<String>,
    done: bool,
    /// Inside a `<think>` block streamed in `content`.
    in_think: bool,
    /// The end of the content so far when it may be the start of a `<think>` or `</think>` tag.
    held: String,
    /// The field reasoning came in, when it came in one (`reasoning_content`, `reasoning`).
    reasoning_field: Option<&'static str>,
    /// OpenRouter's `reasoning_details`, merged by index, to send back unchanged.
    details: Vec<Value>,
}

#[derive(Default)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
    /// Gemini's `extra_content` (its thought signature), as JSON text.
    extra: Option<String>,
}

/// One chunk, decoded only as far as the hot path needs (an `error` stays raw until it is there).
#[derive(Deserialize)]
pub(crate) struct Chunk<'a> {
    #[serde(borrow, default)]
    choices: Few<Choice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    object: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "crate::wire::option_cow")]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolDelta<'a>>>,
    #[serde(borrow, default)]
    reasoning_details: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ToolDelta<'a> {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
    #[serde(borrow, default)]
    extra_content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(default)]
    name: Option<String>,
    /// A JSON string on OpenAI; some compatible servers send the arguments as an object.
    #[serde(borrow, default, deserialize_with = "crate::wire::option_json_text")]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl OpenAiDecoder {
    pub(crate) fn new(provider: String) -> Self {
        OpenAiDecoder {
            provider,
            calls: Vec::new(),
            finish: None,
            done: false,
            in_think: false,
            held: String::new(),
            reasoning_field: None,
            details: Vec::new(),
        }
    }

    /// What must go back with the answer (see [`REPLAY_KEY`]), as a part before its calls.
    fn flush_replay(&mut self, out: &mut Vec<StreamEvent>) {
        let field = self.reasoning_field.take();
        let details = std::mem::take(&mut self.details);
        if details.is_empty() && field != Some("reasoning_content") {
            return;
        }
        let state = json!({REPLAY_KEY: {"field": field, "details": details}});
        out.push(StreamEvent::RedactedReasoning {
            data: state.to_string(),
        });
    }

    /// One streamed `reasoning_details` entry: merged into the one of the same index (text
    /// pieces joined), or added.
    fn merge_detail(&mut self, detail: Value) {
        let index = detail.get("index").cloned();
        let same = index.as_ref().and_then(|index| {
            self.details
                .iter_mut()
                .find(|d| d.get("index") == Some(index) && d["type"] == detail["type"])
        });
        let (Some(existing), Value::Object(new)) = (same, &detail) else {
            self.details.push(detail);
            return;
        };
        for (key, value) in new {
            match (existing.get_mut(key), value) {
                (Some(Value::String(old)), Value::String(more))
                    if matches!(key.as_str(), "text" | "summary" | "data") =>
                {
                    old.push_str(more)
                }
                (_, Value::Null) => {}
                _ => {
                    if let Some(existing) = existing.as_object_mut() {
                        existing.insert(key.clone(), value.clone());
                    }
                }
            }
        }
    }

    fn malformed(&self, message: String) -> ProviderError {
        ProviderError::Malformed {
            provider: self.provider.clone(),
            message,
        }
    }

    /// Text that may hold `<think>` tags (llama.cpp with reasoning format `none`, some models).
    /// A tag may be split across chunks at any byte (`<thi` + `nk>`): what could be the start of
    /// one is held back until the next chunk says whether it is.
    fn push_content(&mut self, text: &str, out: &mut Vec<StreamEvent>) {
        let joined;
        let mut text = if self.held.is_empty() {
            text
        } else {
            joined = std::mem::take(&mut self.held) + text;
            joined.as_str()
        };
        loop {
            let tag = if self.in_think { "</think>" } else { "<think>" };
            if let Some(at) = text.find(tag) {
                self.emit(&text[..at], out);
                self.in_think = !self.in_think;
                text = &text[at + tag.len()..];
                continue;
            }
            let keep = partial_tag_len(text, tag);
            let (now, later) = text.split_at(text.len() - keep);
            self.emit(now, out);
            self.held = later.to_owned();
            return;
        }
    }

    /// Text held back as a possible tag start that turned out to be the end of the content.
    fn flush_held(&mut self, out: &mut Vec<StreamEvent>) {
        let held = std::mem::take(&mut self.held);
        self.emit(&held, out);
    }

    fn emit(&self, text: &str, out: &mut Vec<StreamEvent>) {
        if text.is_empty() {
            return;
        }
        let text = text.to_owned();
        out.push(if self.in_think {
            StreamEvent::ReasoningDelta { text }
        } else {
            StreamEvent::TextDelta { text }
        });
    }

    /// Emits the collected calls, each parsed once now that it is whole.
    fn flush_calls(&mut self, out: &mut Vec<StreamEvent>) {
        for (n, call) in self.calls.drain(..).enumerate() {
            let arguments = if call.arguments.trim().is_empty() {
                Value::Object(Map::new())
            } else {
                // Invalid JSON is kept as the raw string so the tool layer can tell the model.
                serde_json::from_str(&call.arguments).unwrap_or(Value::String(call.arguments))
            };
            out.push(StreamEvent::ToolCall(ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{n}")
                } else {
                    call.id
                },
                name: call.name,
                arguments,
                signature: call.extra,
            }));
        }
    }

    /// A choice's text.
    fn push_text(&mut self, content: Cow<'_, str>, out: &mut Vec<StreamEvent>) {
        if content.is_empty() {
            return;
        }
        if self.in_think || !self.held.is_empty() || content.contains('<') {
            self.push_content(&content, out);
        } else {
            out.push(StreamEvent::TextDelta {
                text: content.into_owned(),
            });
        }
    }

    /// A choice's finish reason: the calls collected so far, then the end of the answer.
    fn end_choice(
        &mut self,
        reason: Cow<'_, str>,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        self.finish = Some(reason.into_owned());
        self.flush_held(out);
        self.flush_replay(out);
        let had_calls = !self.calls.is_empty();
        self.flush_calls(out);
        if self.finish.as_deref() == Some("error") {
            return Err(ProviderError::Stream {
                provider: self.provider.clone(),
                code: Some("error".into()),
                message: "the provider ended the answer with an error".into(),
            });
        }
        out.push(self.finish_event(had_calls));
        Ok(())
    }

    fn finish_event(&self, had_calls: bool) -> StreamEvent {
        let reason = match self.finish.as_deref() {
            // A call cut at the output limit is no call to run.
            Some("length") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            _ if had_calls => FinishReason::ToolCalls,
            Some("stop") | None => FinishReason::Stop,
            Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
            Some(other) => FinishReason::Other(other.to_owned()),
        };
        StreamEvent::Finish(reason)
    }
}

impl Decoder for OpenAiDecoder {
    const FRAMING: Framing = Framing::Sse;

    fn feed(
        &mut self,
        _event: &str,
        data: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        if let Some(hot) = std::str::from_utf8(data).ok().and_then(hot) {
            if let Some(content) = hot.content {
                self.push_text(Cow::Borrowed(content), out);
            }
            // SGLang, older Ollama `/v1` and some gateways send `""` on every chunk: only a
            // reason with a word in it ends the answer.
            return match hot.finish.filter(|reason| !reason.is_empty()) {
                Some(reason) => self.end_choice(Cow::Borrowed(reason), out),
                None => Ok(()),
            };
        }
        self.feed_with_serde(data, out)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn empty_body(&self) -> Option<ProviderError> {
        Some(ProviderError::CannotStream {
            provider: self.provider.clone(),
            message: "the server ended the stream without sending anything".into(),
        })
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.flush_held(out);
        if !self.calls.is_empty() {
            // A server that ends without a finish reason after calls: the calls are still whole
            // only if the stream was complete ([DONE]).
            if !self.done {
                return Err(ProviderError::StreamBroken {
                    provider: self.provider.clone(),
                    message: "the body ended in the middle of a tool call".into(),
                });
            }
            self.flush_replay(out);
            self.flush_calls(out);
            out.push(self.finish_event(true));
            return Ok(());
        }
        if self.done || self.finish.is_some() {
            return Ok(());
        }
        Err(ProviderError::StreamBroken {
            provider: self.provider.clone(),
            message: "the body ended before a finish reason or [DONE]".into(),
        })
    }
}

/// How many bytes at the end of `text` are a proper start of `tag` (`<thi` of `<think>`).
fn partial_tag_len(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| text.ends_with(&tag[..n]))
        .unwrap_or(0)
}

/// The chunk nearly every delta comes in: one choice whose delta holds text (and maybe the role),
/// maybe a finish reason, `usage` null, and ids the decoder ignores.
struct Hot<'a> {
    content: Option<&'a str>,
    finish: Option<&'a str>,
}

/// Reads `data` as the hot chunk shape, or answers `None` for anything else (escapes, reasoning,
/// tool calls, usage, errors, several choices, duplicate keys serde refuses, values that are not
/// plain): those go to serde, which decides the way it always did. Keys serde ignores are skipped
/// when their value is a scalar, as serde skips them.
fn hot(data: &str) -> Option<Hot<'_>> {
    // Keys serde reads may come only once: it refuses a duplicate.
    fn once(seen: &mut u16, bit: u16) -> Option<()> {
        let first = *seen & bit == 0;
        *seen |= bit;
        first.then_some(())
    }
    let mut s = Scanner::new(data);
    let mut seen = 0u16;
    let (mut content, mut finish) = (None, None);
    s.object(|s, key| match key {
        "choices" => {
            once(&mut seen, 1)?;
            s.single(|s| {
                s.object(|s, key| match key {
                    "delta" => {
                        once(&mut seen, 2)?;
                        s.object(|s, key| match key {
                            "content" => {
                                once(&mut seen, 4)?;
                                content = s.string_or_null()?;
                                Some(())
                            }
                            "reasoning" => once(&mut seen, 8).and_then(|()| s.null()),
                            "reasoning_content" => once(&mut seen, 16).and_then(|()| s.null()),
                            "tool_calls" => once(&mut seen, 32).and_then(|()| s.null()),
                            _ => s.scalar(),
                        })
                    }
                    "finish_reason" => {
                        once(&mut seen, 64)?;
                        finish = s.string_or_null()?;
                        Some(())
                    }
                    _ => s.scalar(),
                })
            })
        }
        // Usage comes once, in a chunk of its own; an object is left to serde.
        "usage" => once(&mut seen, 256).and_then(|()| s.null()),
        "object" => {
            once(&mut seen, 128)?;
            (s.string_or_null()? != Some("error")).then_some(())
        }
        "error" => None,
        _ => s.scalar(),
    })?;
    s.end()?;
    Some(Hot { content, finish })
}

impl OpenAiDecoder {
    /// The general decoder, for every chunk the hot path steps aside from.
    fn feed_with_serde(
        &mut self,
        data: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        if data == b"[DONE]" {
            self.done = true;
            return self.finish(out);
        }
        let invalid = |e: serde_json::Error| {
            self.malformed(format!("invalid chunk ({e}): {}", preview(data)))
        };
        let chunk: Chunk<'_> = parse_event(data).map_err(invalid)?;
        let error = match parse_raw::<Value>(chunk.error).map_err(invalid)? {
            Some(error) => Some(json!({"error": error})),
            None if chunk.object.as_deref() == Some("error") => serde_json::from_slice(data).ok(),
            None => None,
        };
        if let Some(error) = error {
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
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                if delta.reasoning.is_some() || delta.reasoning_content.is_some() {
                    self.flush_held(out);
                }
                if delta
                    .reasoning_content
                    .as_deref()
                    .is_some_and(|r| !r.is_empty())
                {
                    self.reasoning_field = Some("reasoning_content");
                } else if delta.reasoning.as_deref().is_some_and(|r| !r.is_empty()) {
                    self.reasoning_field.get_or_insert("reasoning");
                }
                if let Some(raw) = delta.reasoning_details {
                    let details: Vec<Value> = serde_json::from_str(raw.get()).unwrap_or_default();
                    for detail in details {
                        self.merge_detail(detail);
                    }
                }
                for reasoning in [delta.reasoning, delta.reasoning_content]
                    .into_iter()
                    .flatten()
                {
                    if !reasoning.is_empty() {
                        out.push(StreamEvent::ReasoningDelta {
                            text: reasoning.into_owned(),
                        });
                    }
                }
                if let Some(content) = delta.content {
                    self.push_text(content, out);
                }
                for fragment in delta.tool_calls.unwrap_or_default() {
                    let index = fragment.index.unwrap_or(self.calls.len().saturating_sub(1));
                    if index > 1024 {
                        return Err(
                            self.malformed(format!("tool call index {index} is implausible"))
                        );
                    }
                    if self.calls.len() <= index {
                        self.calls.resize_with(index + 1, PendingCall::default);
                    }
                    let call = &mut self.calls[index];
                    if let Some(id) = fragment.id {
                        call.id = id;
                    }
                    if let Some(extra) = fragment.extra_content {
                        call.extra = Some(extra.get().to_owned());
                    }
                    if let Some(function) = fragment.function {
                        if let Some(name) = function.name {
                            // A name streamed in pieces is joined; one sent whole again, or
                            // growing (some gateways repeat it on every fragment), is kept once.
                            if name.starts_with(call.name.as_str()) {
                                call.name = name;
                            } else {
                                call.name.push_str(&name);
                            }
                        }
                        if let Some(arguments) = function.arguments {
                            call.arguments.push_str(&arguments);
                        }
                    }
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|reason| !reason.is_empty()) {
                self.end_choice(reason, out)?;
            }
        }
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0);
            out.push(StreamEvent::Usage(Usage {
                input_tokens: usage.prompt_tokens.saturating_sub(cached),
                output_tokens: usage.completion_tokens,
                cache_read_tokens: cached,
                reasoning_tokens: usage
                    .completion_tokens_details
                    .and_then(|d| d.reasoning_tokens)
                    .unwrap_or(0),
                ..Usage::default()
            }));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::{HotPath, agree, agree_on_all, combinations, mutations};

    impl HotPath for OpenAiDecoder {
        type State = (
            Vec<(String, String, String)>,
            Option<String>,
            bool,
            bool,
            String,
        );

        fn feed_serde_only(
            &mut self,
            data: &[u8],
            out: &mut Vec<StreamEvent>,
        ) -> Result<(), ProviderError> {
            self.feed_with_serde(data, out)
        }

        fn state(&self) -> Self::State {
            let calls = self.calls.iter();
            let calls = calls.map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()));
            (
                calls.collect(),
                self.finish.clone(),
                self.done,
                self.in_think,
                self.held.clone(),
            )
        }

        fn is_hot(data: &str) -> bool {
            hot(data).is_some()
        }
    }

    fn decoder() -> OpenAiDecoder {
        OpenAiDecoder::new("o".into())
    }

    /// Inside a `<think>` block, with a call half streamed.
    fn decoder_mid_answer() -> OpenAiDecoder {
        let mut d = decoder();
        d.in_think = true;
        d.calls.push(PendingCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: r#"{"path":"#.into(),
            extra: None,
        });
        d
    }

    /// The simulator's chunk (keys sorted) and OpenAI's own (its key order, a fingerprint).
    const SIM_CHUNK: &str = r#"{"choices":[{"delta":{"content":" tok"},"finish_reason":null,"index":0}],"created":1735000000,"id":"chatcmpl-sim1","model":"gpt-4o-mini","object":"chat.completion.chunk","usage":null}"#;
    const OPENAI_CHUNK: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735000000,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null}"#;

    #[test]
    fn the_hot_path_gives_exactly_what_serde_gives() {
        let objects: &[&str] = &[r#""chat.completion.chunk""#, r#""error""#, "null"];
        let delta_starts: &[&str] = &[
            "",
            r#""role":"assistant","#,
            r#""refusal":null,"reasoning":null,"#,
            r#""reasoning":"why","#,
            r#""tool_calls":null,"reasoning_content":null,"#,
            r#""tool_calls":[{"index":0,"id":"c2","function":{"name":"f","arguments":"{}"}}],"#,
        ];
        let contents: &[&str] = &[
            r#""content":" tok""#,
            r#""content":"""#,
            r#""content":null"#,
            r#""content":"a\nb""#,
            r#""content":"<think>hm""#,
            r#""content":"x</think>y""#,
            r#""content":"日本""#,
            r#""content":3"#,
            r#""content":"a","content":"b""#,
        ];
        // Choices without a finish reason are among the other shapes below.
        let finishes: &[&str] = &[
            "null",
            r#""stop""#,
            r#""length""#,
            r#""error""#,
            r#""stop","finish_reason":"stop""#,
            "1",
        ];
        let choice_extras: &[&str] = &[
            "",
            r#","logprobs":null,"native_finish_reason":"stop""#,
            r#","logprobs":{"content":[]}"#,
        ];
        let usages: &[&str] = &[
            r#","usage":null"#,
            r#","usage":{"prompt_tokens":3,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}"#,
            r#","usage":null,"usage":null"#,
        ];
        let tails: &[&str] = &[
            "",
            r#","system_fingerprint":"fp_1","provider":"OpenAI","x":true,"y":false"#,
            r#","error":{"message":"context length exceeded","code":"context_length_exceeded"}"#,
            r#","choices":[]"#,
            r#","created":-1"#,
        ];
        let mut events = combinations(
            r#"{"id":"chatcmpl-1","object":@,"created":1735000000,"model":"gpt-4o","choices":[{"index":0,"delta":{@@},"finish_reason":@@}]@@}"#,
            &[
                objects,
                delta_starts,
                contents,
                finishes,
                choice_extras,
                usages,
                tails,
            ],
        );
        // Other shapes around the hot one: whitespace, several or no choices, missing pieces,
        // other value types, trailing bytes, the end of the stream.
        events.extend(
            [
                " {\n \"choices\" : [ { \"delta\" : { \"content\" : \"x\" } , \"finish_reason\" : null } ] }\r\n",
                r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
                r#"{"choices":[{"delta":{}}]}"#,
                r#"{"choices":[{"delta":null}]}"#,
                r#"{"choices":[{"delta":{"content":"a"}}],"choices":[]}"#,
                r#"{"choices":[{"delta":{"content":"a"},"delta":{}}]}"#,
                r#"{"choices":[{}]}"#,
                r#"{"choices":[{"finish_reason":"stop"}]}"#,
                r#"{"choices":[{"delta":{"content":"a"}}],"object":"x","object":"y"}"#,
                r#"{"choices":[{"delta":{"content":"a"}}]} x"#,
                r#"{"choices":[{"delta":{"content":"a"}}]}{}"#,
                r#"{"\u0063hoices":[{"delta":{"content":"a"}}]}"#,
                r#"{"choices":[{"delta":{"content":"a"}}],"created":1.5}"#,
                r#"{"choices":[{"delta":{"content":"a"}}],"id":[1]}"#,
                r#"{"choices":[{"delta":{"content":"a"}}],"ok":nul}"#,
                r#"{"choices":[{"delta":{"content":"a"}}],"ok":truefalse}"#,
                r#"{"choices":[{"delta":{"content":"a","role":"assistant"}}],"error":null}"#,
                r#"{"object":"error","message":"overloaded","type":"server_error"}"#,
                "[DONE]",
                "{}",
                "[]",
                "",
            ]
            .map(str::to_owned),
        );
        // Each hot chunk cut short and with a stray byte in every position.
        events.extend(mutations(SIM_CHUNK));
        events.extend(mutations(OPENAI_CHUNK));
        let taken = agree_on_all(decoder, &events);
        // The hot path really is taken, for a good share of what was generated.
        assert!(
            taken > 2000,
            "hot path taken {taken} of {} times",
            events.len()
        );
        assert_eq!(agree_on_all(decoder_mid_answer, &events), taken);
    }

    #[test]
    fn the_simulators_and_openais_deltas_take_the_hot_path() {
        for chunk in [SIM_CHUNK, OPENAI_CHUNK] {
            assert!(agree(&decoder, chunk), "{chunk}");
        }
        assert!(agree(
            &decoder,
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#
        ));
    }

    fn feed_all(lines: &[&str]) -> (Vec<StreamEvent>, Result<(), ProviderError>) {
        let mut d = OpenAiDecoder::new("openai".into());
        let mut out = Vec::new();
        for line in lines {
            if let Err(e) = d.feed("", line.as_bytes(), &mut out) {
                return (out, Err(e));
            }
        }
        let r = d.finish(&mut out);
        (out, r)
    }

    #[test]
    fn think_tags_in_content_become_reasoning() {
        let (out, r) = feed_all(&[
            r#"{"choices":[{"index":0,"delta":{"content":"<think>hmm"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":" ok</think>Hello"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        r.unwrap();
        assert_eq!(
            out[..3],
            [
                StreamEvent::ReasoningDelta { text: "hmm".into() },
                StreamEvent::ReasoningDelta { text: " ok".into() },
                StreamEvent::TextDelta {
                    text: "Hello".into()
                },
            ]
        );
    }

    /// The content of one answer, as (reasoning?, text) runs, read by a plain scan of the whole.
    fn runs_of_whole(content: &str) -> Vec<(bool, String)> {
        let mut runs: Vec<(bool, String)> = Vec::new();
        let (mut rest, mut thinking) = (content, false);
        loop {
            let tag = if thinking { "</think>" } else { "<think>" };
            let (now, next) = match rest.find(tag) {
                Some(at) => (&rest[..at], Some(&rest[at + tag.len()..])),
                None => (rest, None),
            };
            match runs.last_mut() {
                Some((t, text)) if *t == thinking => text.push_str(now),
                _ if now.is_empty() => {}
                _ => runs.push((thinking, now.to_owned())),
            }
            let Some(next) = next else { return runs };
            rest = next;
            thinking = !thinking;
        }
    }

    /// What the decoder makes of `content` streamed in pieces cut at `cuts`, as runs.
    fn runs_of_stream(content: &str, cuts: &[usize]) -> Vec<(bool, String)> {
        let mut cuts: Vec<usize> = cuts
            .iter()
            .map(|c| c % (content.len() + 1))
            .filter(|c| content.is_char_boundary(*c))
            .chain([0, content.len()])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut lines: Vec<String> = cuts
            .windows(2)
            .map(|w| {
                json!({"choices": [{"index": 0, "delta": {"content": &content[w[0]..w[1]]}}]})
                    .to_string()
            })
            .collect();
        lines.push(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.into());
        lines.push("[DONE]".into());
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (out, result) = feed_all(&lines);
        result.unwrap();
        let mut runs: Vec<(bool, String)> = Vec::new();
        for event in out {
            let (thinking, text) = match event {
                StreamEvent::TextDelta { text } => (false, text),
                StreamEvent::ReasoningDelta { text } => (true, text),
                _ => continue,
            };
            assert!(!text.is_empty(), "an empty delta");
            match runs.last_mut() {
                Some((t, last)) if *t == thinking => last.push_str(&text),
                _ => runs.push((thinking, text)),
            }
        }
        runs
    }

    /// Content made of tag pieces and text likely to look like them.
    fn content() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let piece = prop_oneof![
            Just("<think>".to_owned()),
            Just("</think>".to_owned()),
            Just("<".to_owned()),
            Just("<thi".to_owned()),
            Just("</th".to_owned()),
            Just("nk>".to_owned()),
            "[a-z <>/é]{0,6}",
        ];
        proptest::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// `<think>` and `</think>` split at any byte, across any number of chunks, read exactly
        /// as the whole content does.
        #[test]
        fn think_tags_split_anywhere_read_as_the_whole(
            content in content(),
            cuts in proptest::collection::vec(0usize..64, 0..12),
        ) {
            proptest::prop_assert_eq!(runs_of_stream(&content, &cuts), runs_of_whole(&content));
        }
    }

    #[test]
    fn think_tags_split_across_chunks_become_reasoning() {
        let content = "<think>plan</think>Answer";
        for at in 0..=content.len() {
            for second in at..=content.len() {
                assert_eq!(
                    runs_of_stream(content, &[at, second]),
                    [(true, "plan".to_owned()), (false, "Answer".to_owned())],
                    "cut at {at} and {second}"
                );
            }
        }
        // Text that only looked like the start of a tag comes out whole at the end.
        assert_eq!(
            runs_of_stream("a <thi", &[3]),
            [(false, "a <thi".to_owned())]
        );
    }

    #[test]
    fn arguments_sent_as_an_object_are_taken_as_they_are() {
        let (out, r) = feed_all(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read","arguments":{"path":"a.txt"}}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        r.unwrap();
        assert!(
            matches!(&out[0], StreamEvent::ToolCall(c) if c.arguments == json!({"path": "a.txt"})),
            "{out:?}"
        );
    }

    #[test]
    fn stop_after_tool_calls_still_reports_tool_calls() {
        let (out, r) = feed_all(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        r.unwrap();
        assert_eq!(
            out.last(),
            Some(&StreamEvent::Finish(FinishReason::ToolCalls))
        );
        assert!(matches!(&out[0], StreamEvent::ToolCall(c) if c.arguments == json!({})));
    }

    #[test]
    fn openrouter_prices_become_per_million() {
        let m = model_from_entry(&json!({"id":"a/b","context_length":200000,
            "pricing":{"prompt":"0.000003","completion":"0.000015"},
            "supported_parameters":["tools","reasoning"],
            "architecture":{"input_modalities":["text","image"]}}))
        .unwrap();
        let p = m.prices.unwrap();
        assert_eq!((p.input_per_million, p.output_per_million), (3.0, 15.0));
        assert!(m.capabilities.tools && m.capabilities.thinking && m.capabilities.vision);
        assert_eq!(m.context_window, Some(200000));
    }
}
