//! OpenAI-compatible chat completions (`data: <json>` events ending in `data: [DONE]`), and the
//! OpenAI and OpenRouter model lists.

use axum::http::Method;
use bytes::Bytes;
use serde_json::{Value, json};

use super::{
    Prepared, RenderContext, Script, SimEvent, SimKind, SimModel, Variants, halves, json_reply,
    script_finish, script_usage,
};

const KEEPALIVE: &[u8] = b": OPENROUTER PROCESSING\n\n";

fn event(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

struct Chunks<'a> {
    model: &'a str,
    include_usage: bool,
    empty_finish: bool,
}

impl Chunks<'_> {
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Bytes {
        let finish = finish.or(self.empty_finish.then_some(""));
        let mut value = json!({"id": "chatcmpl-sim1", "object": "chat.completion.chunk",
            "created": 1735000000, "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        if self.include_usage {
            value["usage"] = Value::Null;
        }
        event(&value)
    }
}

pub(super) fn render(script: &Script, context: &RenderContext<'_>, kind: SimKind) -> Vec<Bytes> {
    let request = context.request;
    let chunks = Chunks {
        model: request["model"].as_str().unwrap_or("sim-model"),
        include_usage: request["stream_options"]["include_usage"] == json!(true),
        empty_finish: script.empty_finish,
    };
    let reasoning_key = if script.reasoning_content || context.variants.deepseek {
        "reasoning_content"
    } else {
        "reasoning"
    };
    let mut frames = vec![chunks.chunk(json!({"role": "assistant", "content": ""}), None)];
    let mut group: Vec<Call<'_>> = Vec::new();
    let mut next_index = 0;
    let mut any_calls = false;
    for item in &script.events {
        if !matches!(item, SimEvent::ToolCall { .. }) {
            flush_calls(&chunks, script, &mut group, &mut next_index, &mut frames);
        }
        match item {
            SimEvent::Text { text } => frames.push(chunks.chunk(json!({ "content": text }), None)),
            SimEvent::Thinking { text, .. } if script.think_tags => {
                // Each tag cut in two, across chunks.
                for piece in ["<thi", &format!("nk>{text}</th"), "ink>"] {
                    frames.push(chunks.chunk(json!({ "content": piece }), None));
                }
            }
            // OpenRouter: reasoning also as `reasoning_details`, signed where the upstream signs.
            SimEvent::Thinking { text, signature } if kind == SimKind::Openrouter => {
                let mut detail = json!({"type": "reasoning.text", "text": text,
                    "format": "unknown", "index": 0});
                if let Some(signature) = signature {
                    detail["signature"] = signature.clone().into();
                }
                frames.push(chunks.chunk(
                    json!({"reasoning": text, "reasoning_details": [detail]}),
                    None,
                ));
            }
            SimEvent::Thinking { text, .. } => {
                frames.push(chunks.chunk(json!({ reasoning_key: text }), None));
            }
            // OpenRouter in front of Gemini 3: the thought signature as encrypted reasoning.
            SimEvent::RedactedThinking { data } if kind == SimKind::Openrouter => {
                frames.push(chunks.chunk(
                    json!({"reasoning_details": [{"type": "reasoning.encrypted", "data": data,
                        "format": "google-gemini-v1", "index": 1}]}),
                    None,
                ));
            }
            SimEvent::ToolCall {
                id,
                name,
                arguments,
                signature,
            } => {
                any_calls = true;
                let extra = signature
                    .as_ref()
                    .filter(|_| context.variants.gemini_openai)
                    .map(|s| json!({"google": {"thought_signature": s}}));
                group.push((id, name, arguments, extra));
            }
            SimEvent::Error { message, code } => {
                let body = match kind {
                    SimKind::Openrouter => json!({"error": {"code": 502, "message": message},
                        "choices": [{"delta": {"content": ""}, "finish_reason": "error"}]}),
                    _ => json!({"error": {"message": message, "type": "server_error",
                        "param": null, "code": code}}),
                };
                frames.push(event(&body));
                return frames;
            }
            SimEvent::RedactedThinking { .. }
            | SimEvent::Signature { .. }
            | SimEvent::Usage { .. }
            | SimEvent::Finish { .. } => {}
        }
    }
    flush_calls(&chunks, script, &mut group, &mut next_index, &mut frames);
    let finish = script_finish(script).unwrap_or(if any_calls { "tool_calls" } else { "stop" });
    frames.push(chunks.chunk(json!({}), Some(finish)));
    if chunks.include_usage {
        let (input, output, cached, reasoning) = script_usage(script).unwrap_or((0, 0, 0, 0));
        frames.push(event(
            &json!({"id": "chatcmpl-sim1", "object": "chat.completion.chunk",
            "created": 1735000000, "model": chunks.model, "choices": [],
            "usage": {"prompt_tokens": input, "completion_tokens": output,
                "total_tokens": input + output,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": reasoning}}}),
        ));
    }
    frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
    frames
}

/// The answer to a request with `stream: false`: one `chat.completion` object, as llama-cpp-python
/// and OpenAI send it (`content` null when the answer is only tool calls).
pub(super) fn render_whole(script: &Script, context: &RenderContext<'_>) -> Value {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for item in &script.events {
        match item {
            SimEvent::Text { text: t } => text.push_str(t),
            SimEvent::Thinking { text: t, .. } => reasoning.push_str(t),
            SimEvent::ToolCall {
                id,
                name,
                arguments,
                ..
            } => calls.push(json!({"id": id, "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}})),
            _ => {}
        }
    }
    let finish = script_finish(script).unwrap_or(if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    });
    let mut message = json!({"role": "assistant",
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text) }});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::String(reasoning);
    }
    let (input, output, cached, _) = script_usage(script).unwrap_or((0, 0, 0, 0));
    json!({"id": "chatcmpl-sim1", "object": "chat.completion", "created": 1735000000,
        "model": context.request["model"].as_str().unwrap_or("sim-model"),
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": input, "completion_tokens": output,
            "total_tokens": input + output, "prompt_tokens_details": {"cached_tokens": cached}}})
}

/// Parallel calls as real servers stream them: each call's first fragment (id, name, empty
/// arguments), then the argument pieces of all calls interleaved by index. Arguments given as a
/// JSON string are sent as that text, valid JSON or not; with `object_arguments` each call
/// comes whole in one fragment, its arguments an object.
/// A call of a group: id, name, arguments and the `extra_content` to send with it.
type Call<'a> = (&'a str, &'a str, &'a Value, Option<Value>);

fn flush_calls(
    chunks: &Chunks<'_>,
    script: &Script,
    group: &mut Vec<Call<'_>>,
    next_index: &mut usize,
    frames: &mut Vec<Bytes>,
) {
    if group.is_empty() {
        return;
    }
    let base = *next_index;
    if script.object_arguments {
        for (offset, (id, name, arguments, _)) in group.iter().enumerate() {
            frames.push(chunks.chunk(
                json!({"tool_calls": [{"index": base + offset, "id": id, "type": "function",
                    "function": {"name": name, "arguments": arguments}}]}),
                None,
            ));
        }
        *next_index += group.len();
        group.clear();
        return;
    }
    for (offset, (id, name, _, extra)) in group.iter().enumerate() {
        let (first, rest) = if script.split_names {
            halves(name)
        } else {
            (*name, "")
        };
        let mut call = json!({"index": base + offset, "id": id, "type": "function",
            "function": {"name": first, "arguments": ""}});
        if let Some(extra) = extra {
            call["extra_content"] = extra.clone();
        }
        frames.push(chunks.chunk(json!({ "tool_calls": [call] }), None));
        if !rest.is_empty() {
            frames.push(chunks.chunk(
                json!({"tool_calls": [{"index": base + offset, "function": {"name": rest}}]}),
                None,
            ));
        }
    }
    let texts: Vec<String> = group
        .iter()
        .map(|(_, _, arguments, _)| match arguments {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect();
    for half in 0..2 {
        for (offset, arguments) in texts.iter().enumerate() {
            let (first, second) = halves(arguments);
            let piece = if half == 0 { first } else { second };
            frames.push(chunks.chunk(
                json!({"tool_calls": [{"index": base + offset, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    *next_index += group.len();
    group.clear();
}

/// Puts an SSE keep-alive comment in front of every chunk (in the same write, so chunk numbers
/// for faults stay the same).
pub(super) fn with_keepalives(frames: Vec<Bytes>) -> Vec<Bytes> {
    frames
        .into_iter()
        .map(|frame| {
            let mut joined = Vec::with_capacity(KEEPALIVE.len() + frame.len());
            joined.extend_from_slice(KEEPALIVE);
            joined.extend_from_slice(&frame);
            Bytes::from(joined)
        })
        .collect()
}

/// What llama.cpp's server refuses before answering: a `response_format` type it does not know
/// (all but `text` and `json_object` on a server without JSON-schema answers), `json_schema`
/// beside `grammar`, and a schema its grammar converter cannot take (common/json-schema.cpp: not
/// an object, an unknown `type`, an empty `oneOf`/`anyOf`, a `$ref` outside the document, a
/// negative or fractional `minLength`…). Each is a 400 in its error shape.
pub(super) fn reject_format(request: &Value, variants: &Variants) -> Option<Prepared> {
    let refuse = |message: String| {
        Some(super::json_reply(
            400,
            json!({"error": {"code": 400, "message": message, "type": "invalid_request_error"}}),
            Vec::new(),
        ))
    };
    let format = request.get("response_format")?;
    let kind = format["type"].as_str().unwrap_or_default();
    let known: &[&str] = if variants.no_json_schema {
        &["", "text", "json_object"]
    } else {
        &["", "text", "json_object", "json_schema"]
    };
    if !known.contains(&kind) {
        return refuse(format!(
            "response_format type must be one of \"text\" or \"json_object\", but got: {kind}"
        ));
    }
    if request
        .get("grammar")
        .is_some_and(|g| g.as_str().is_some_and(|g| !g.is_empty()))
    {
        return refuse("Cannot use both json_schema and grammar".into());
    }
    let schema = match kind {
        "json_schema" => format["json_schema"].get("schema"),
        "json_object" => format.get("schema"),
        _ => None,
    }?;
    let mut errors = Vec::new();
    check_schema(schema, "/", &mut errors);
    match errors.first() {
        Some(first) => refuse(format!("JSON schema conversion failed:\n{first}")),
        None => None,
    }
}

/// llama.cpp's schema checks (common/json-schema.cpp), the ones a tool schema can meet.
fn check_schema(schema: &Value, path: &str, errors: &mut Vec<String>) {
    let fail = |errors: &mut Vec<String>, message: &str| {
        errors.push(format!("JSON schema error at {path}: {message}"));
    };
    let Some(map) = schema.as_object() else {
        if !schema.is_boolean() {
            fail(errors, "schema must be an object");
        }
        return;
    };
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(list) = map.get(key) {
            match list.as_array() {
                None => fail(errors, "must be an array of schemas"),
                Some(items) if items.is_empty() => fail(errors, "must not be empty"),
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        check_schema(item, &format!("{path}{key}/{i}/"), errors);
                    }
                }
            }
        }
    }
    if let Some(reference) = map.get("$ref") {
        match reference.as_str() {
            None => fail(errors, "$ref must be a string"),
            Some(r) if !r.starts_with('#') => fail(
                errors,
                &format!(
                    "unsupported $ref {r}, only references into the same document are supported"
                ),
            ),
            _ => {}
        }
    }
    if let Some(kind) = map.get("type") {
        let names: Vec<&str> = match kind {
            Value::String(name) => vec![name.as_str()],
            Value::Array(list) if list.is_empty() => {
                fail(errors, "type must not be empty");
                Vec::new()
            }
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => {
                fail(errors, "type must be a string or an array of strings");
                Vec::new()
            }
        };
        for name in names {
            if ![
                "string", "number", "integer", "boolean", "object", "array", "null",
            ]
            .contains(&name)
            {
                fail(errors, &format!("unrecognized type {name}"));
            }
        }
    }
    for key in ["minLength", "maxLength", "minItems", "maxItems"] {
        if let Some(value) = map.get(key)
            && value.as_u64().is_none_or(|n| i32::try_from(n).is_err())
        {
            fail(errors, &format!("{key} must be a non-negative integer"));
        }
    }
    if let Some(enumerated) = map.get("enum")
        && enumerated.as_array().is_none_or(|e| e.is_empty())
    {
        fail(errors, "enum must be a non-empty array");
    }
    if let Some(properties) = map.get("properties") {
        match properties.as_object() {
            None => fail(errors, "properties must be an object"),
            Some(props) => {
                for (name, sub) in props {
                    check_schema(sub, &format!("{path}properties/{name}/"), errors);
                }
            }
        }
    }
    if let Some(additional) = map.get("additionalProperties") {
        if additional.is_object() {
            check_schema(additional, &format!("{path}additionalProperties/"), errors);
        } else if !additional.is_boolean() {
            fail(errors, "additionalProperties must be a boolean or a schema");
        }
    }
    if let Some(items) = map.get("items") {
        check_schema(items, &format!("{path}items/"), errors);
    }
}

pub(super) fn error_body(kind: SimKind, status: u16, message: &str, code: Option<&str>) -> Value {
    if kind == SimKind::Openrouter {
        return json!({"error": {"code": status, "message": message, "metadata": {}}});
    }
    let (kind, default_code) = match status {
        400 => ("invalid_request_error", None),
        401 => ("invalid_request_error", Some("invalid_api_key")),
        404 => ("invalid_request_error", Some("model_not_found")),
        429 => ("requests", Some("rate_limit_exceeded")),
        _ => ("server_error", None),
    };
    json!({"error": {"message": message, "type": kind, "param": null,
        "code": code.or(default_code)}})
}

pub(super) fn catalogue(
    kind: SimKind,
    method: &Method,
    path: &str,
    models: &[SimModel],
    variants: &Variants,
) -> Option<Prepared> {
    if method != Method::GET {
        return None;
    }
    match (kind, path) {
        (SimKind::Openai, "/v1/models") => {
            let data: Vec<Value> = models
                .iter()
                .map(|m| match variants.llamacpp_n_ctx {
                    // llama.cpp: the trained window in `meta`, the running one only in /props.
                    Some(_) => json!({"id": m.id, "object": "model", "created": 1735000000,
                        "owned_by": "llamacpp", "meta": {"vocab_type": 2, "n_vocab": 151936,
                            "n_ctx_train": m.context_window, "n_embd": 4096,
                            "n_params": 8190735360u64, "size": 5027783488u64}}),
                    None => json!({"id": m.id, "object": "model", "created": 1686935002,
                        "owned_by": "openai"}),
                })
                .collect();
            Some(json_reply(
                200,
                json!({"object": "list", "data": data}),
                Vec::new(),
            ))
        }
        (SimKind::Openai, "/props") => {
            let n_ctx = variants.llamacpp_n_ctx?;
            Some(json_reply(
                200,
                json!({"default_generation_settings": {"n_ctx": n_ctx, "params": {
                    "n_predict": -1, "temperature": 0.8}},
                    "total_slots": 1, "model_path": "/models/qwen3-8b-q4_k_m.gguf",
                    "chat_template": "{{ messages }}", "build_info": "b6100-sim"}),
                Vec::new(),
            ))
        }
        (SimKind::Openai, "/api/v0/models") => {
            let loaded = variants.lmstudio_loaded_ctx?;
            let data: Vec<Value> = models
                .iter()
                .enumerate()
                .map(|(n, m)| {
                    let kind = if m.embedding {
                        "embeddings"
                    } else if m.vision {
                        "vlm"
                    } else {
                        "llm"
                    };
                    let mut entry = json!({"id": m.id, "object": "model", "type": kind,
                        "publisher": "lmstudio-community", "arch": "qwen3",
                        "compatibility_type": "gguf", "quantization": "Q4_K_M",
                        "state": if n == 0 { "loaded" } else { "not-loaded" },
                        "max_context_length": m.context_window});
                    if n == 0 {
                        entry["loaded_context_length"] = loaded.into();
                    }
                    entry
                })
                .collect();
            Some(json_reply(
                200,
                json!({"object": "list", "data": data}),
                Vec::new(),
            ))
        }
        (SimKind::Openrouter, "/api/v1/models") => {
            let data: Vec<Value> = models.iter().map(openrouter_entry).collect();
            Some(json_reply(200, json!({ "data": data }), Vec::new()))
        }
        _ => None,
    }
}

fn per_token(price: Option<f64>) -> String {
    format!("{}", price.unwrap_or(0.0) / 1_000_000.0)
}

fn openrouter_entry(model: &SimModel) -> Value {
    let mut params = vec!["max_tokens", "stop", "temperature", "top_p"];
    if model.tools {
        params.extend(["tool_choice", "tools"]);
    }
    if model.thinking {
        params.extend(["include_reasoning", "reasoning"]);
    }
    let inputs: Vec<&str> = if model.vision {
        vec!["text", "image"]
    } else {
        vec!["text"]
    };
    json!({
        "id": model.id, "canonical_slug": model.id, "name": model.id, "created": 1747930371,
        "description": "A simulated model.", "context_length": model.context_window,
        "architecture": {"modality": if model.vision { "text+image->text" } else { "text->text" },
            "input_modalities": inputs, "output_modalities": ["text"], "tokenizer": "Other",
            "instruct_type": null},
        "pricing": {"prompt": per_token(model.input_price), "completion": per_token(model.output_price),
            "request": "0", "image": "0", "web_search": "0", "internal_reasoning": "0"},
        "top_provider": {"context_length": model.context_window, "max_completion_tokens": 64000,
            "is_moderated": false},
        "per_request_limits": null,
        "supported_parameters": params,
        "default_parameters": {}
    })
}

fn bad_request(kind: SimKind, message: &str) -> Prepared {
    json_reply(400, error_body(kind, 400, message, None), Vec::new())
}

/// What every OpenAI-compatible server refuses in a history, and what DeepSeek, Gemini's
/// OpenAI endpoint and OpenRouter in front of Gemini 3 refuse besides.
pub(super) fn reject(
    kind: SimKind,
    request: &Value,
    models: &[SimModel],
    variants: &Variants,
) -> Option<Prepared> {
    let model = request["model"].as_str().unwrap_or_default();
    let thinks = models.iter().any(|m| m.id == model && m.thinking);
    if variants.reasoning_wants_completion_tokens && thinks && request.get("max_tokens").is_some() {
        let body = json!({"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}});
        return Some(json_reply(400, body, Vec::new()));
    }
    let tools = request["tools"].as_array().is_some_and(|t| !t.is_empty());
    let auto = matches!(request.get("tool_choice"), None | Some(Value::Null))
        || request["tool_choice"] == "auto";
    if variants.vllm_no_auto_tools && tools && auto {
        let body = json!({"object": "error", "message": "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
            "type": "BadRequestError", "param": null, "code": 400});
        return Some(json_reply(400, body, Vec::new()));
    }
    let messages = request["messages"].as_array()?;
    // Each tool message answers a call of the assistant message before the tool messages, and
    // each call is answered before the next message that is not a tool message.
    let mut open: Vec<String> = Vec::new();
    let mut answering: Vec<String> = Vec::new();
    for message in messages {
        let role = message["role"].as_str().unwrap_or_default();
        if role == "tool" {
            let id = message["tool_call_id"].as_str().unwrap_or_default();
            if !answering.iter().any(|a| a == id) {
                return Some(bad_request(
                    kind,
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                ));
            }
            open.retain(|o| o != id);
            continue;
        }
        if !open.is_empty() {
            return Some(bad_request(
                kind,
                &format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                    open.join(", ")
                ),
            ));
        }
        answering.clear();
        if role == "assistant" {
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                let id = call["id"].as_str().unwrap_or_default().to_owned();
                open.push(id.clone());
                answering.push(id);
            }
        }
    }
    if variants.deepseek {
        for (index, message) in messages.iter().enumerate() {
            let calls = message["tool_calls"]
                .as_array()
                .is_some_and(|c| !c.is_empty());
            if message["role"] == "assistant" && calls && !message["reasoning_content"].is_string()
            {
                return Some(bad_request(
                    kind,
                    &format!(
                        "Missing `reasoning_content` field in the assistant message at message index {index}. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
                    ),
                ));
            }
        }
    }
    // Gemini 3 checks the signatures of the current turn: the assistant messages after the
    // last user message.
    let gemini_3 = model.starts_with("gemini-3") || model.starts_with("google/gemini-3");
    if !gemini_3 || !(variants.gemini_openai || kind == SimKind::Openrouter) {
        return None;
    }
    let turn_start = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    for (position, message) in messages.iter().enumerate().skip(turn_start) {
        let Some(first) = message["tool_calls"].as_array().and_then(|c| c.first()) else {
            continue;
        };
        let signed = if kind == SimKind::Openrouter {
            message["reasoning_details"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d["type"] == "reasoning.encrypted"))
        } else {
            first["extra_content"]["google"]["thought_signature"].is_string()
        };
        if signed {
            continue;
        }
        let google = json!({"error": {"code": 400,
            "message": format!("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                first["function"]["name"].as_str().unwrap_or_default(), position + 1),
            "status": "INVALID_ARGUMENT"}});
        let body = if kind == SimKind::Openrouter {
            json!({"error": {"code": 400, "message": "Provider returned error",
                "metadata": {"raw": google.to_string(), "provider_name": "Google AI Studio"}}})
        } else {
            json!([google])
        };
        return Some(json_reply(400, body, Vec::new()));
    }
    None
}
