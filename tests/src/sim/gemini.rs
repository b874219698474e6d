//! Gemini `streamGenerateContent?alt=sse` (`data: <json>` + CRLF, no `[DONE]`), `/v1beta/models`,
//! and the checks the real API makes on schemas, thinking settings and thought signatures.

use axum::http::Method;
use bytes::Bytes;
use serde_json::{Value, json};

use super::{
    Prepared, RenderContext, Script, SimEvent, SimModel, json_reply, script_finish, script_usage,
};

fn event(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\r\n\r\n"))
}

fn status_name(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

pub(super) fn error_body(status: u16, message: &str, code: Option<&str>) -> Value {
    json!({"error": {"code": status, "message": message,
        "status": code.unwrap_or(status_name(status)), "details": []}})
}

/// The error body, with Google's `RetryInfo` when the server asks for a wait (as the real API
/// does on 429 RESOURCE_EXHAUSTED).
pub(super) fn error_body_with_delay(
    status: u16,
    message: &str,
    code: Option<&str>,
    retry_after: &Option<String>,
) -> Value {
    let mut body = error_body(status, message, code);
    if let Some(delay) = retry_after {
        body["error"]["details"] = json!([
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                 "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{delay}s")}
        ]);
    }
    body
}

/// A prompt Gemini blocks before answering: one event with `promptFeedback.blockReason` and
/// no candidates, as the real API streams it.
pub fn blocked_prompt(reason: &str, message: Option<&str>) -> super::Reply {
    let mut feedback = json!({"blockReason": reason, "safetyRatings": [
        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}]});
    if let Some(message) = message {
        feedback["blockReasonMessage"] = message.into();
    }
    let value = json!({"promptFeedback": feedback,
        "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
        "modelVersion": "gemini-2.5-flash"});
    super::Reply::Raw {
        status: 200,
        content_type: "text/event-stream".into(),
        body: format!("data: {value}\r\n\r\n"),
    }
}

/// The events of a stream as Gemini answers without `alt=sse`: one JSON array of the same
/// responses, split into the same number of chunks.
pub(super) fn as_array(frames: &[Bytes]) -> Vec<Bytes> {
    let last = frames.len().saturating_sub(1);
    frames
        .iter()
        .enumerate()
        .map(|(i, frame)| {
            let text = String::from_utf8_lossy(frame);
            let value = text.trim().strip_prefix("data: ").unwrap_or(text.trim());
            let open = if i == 0 { "[" } else { "" };
            let close = if i == last { "]" } else { "\r\n," };
            Bytes::from(format!("{open}{value}{close}"))
        })
        .collect()
}

fn bad_request(message: &str) -> Option<Prepared> {
    Some(json_reply(400, error_body(400, message, None), Vec::new()))
}

/// The model id in `/v1beta/models/{model}:streamGenerateContent`.
pub(super) fn model_of(path: &str) -> &str {
    let rest = path.strip_prefix("/v1beta/models/").unwrap_or(path);
    rest.split(':').next().unwrap_or(rest)
}

/// Keys a `parameters` schema may use on the Developer API.
const ALLOWED: &[&str] = &[
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

fn unknown_schema_key(schema: &Value) -> Option<String> {
    let object = schema.as_object()?;
    for (key, value) in object {
        if !ALLOWED.contains(&key.as_str()) {
            return Some(key.clone());
        }
        if key == "type" && !value.is_string() {
            return Some("type (must be a string)".into());
        }
        let nested: Vec<&Value> = match key.as_str() {
            "properties" => value
                .as_object()
                .map(|p| p.values().collect())
                .unwrap_or_default(),
            "items" => vec![value],
            "anyOf" => value
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        if let Some(found) = nested.into_iter().find_map(unknown_schema_key) {
            return Some(found);
        }
    }
    None
}

/// What the real API refuses before streaming.
pub(super) fn reject(path: &str, request: &Value, models: &[SimModel]) -> Option<Prepared> {
    let model = model_of(path);
    if !path.contains("alt=sse") {
        return bad_request("totem-sim: only the alt=sse form is simulated");
    }
    if !models.iter().any(|m| m.id == model) {
        return Some(json_reply(
            404,
            error_body(
                404,
                &format!(
                    "models/{model} is not found for API version v1beta, or is not supported for generateContent."
                ),
                None,
            ),
            Vec::new(),
        ));
    }
    let thinking = &request["generationConfig"]["thinkingConfig"];
    if thinking.get("thinkingBudget").is_some() && thinking.get("thinkingLevel").is_some() {
        return bad_request("thinking_budget and thinking_level are not supported together");
    }
    if let Some(tools) = request["tools"].as_array() {
        for (t, tool) in tools.iter().enumerate() {
            let declarations = tool["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for (d, declaration) in declarations.iter().enumerate() {
                if let Some(key) = unknown_schema_key(&declaration["parameters"]) {
                    return bad_request(&format!(
                        "Invalid JSON payload received. Unknown name \"{key}\" at 'tools[{t}].function_declarations[{d}].parameters': Cannot find field."
                    ));
                }
            }
        }
    }
    // `functionCall.args` is a protobuf Struct: a string (arguments sent back as the model
    // wrote them) is refused as Google refuses it.
    for (c, content) in request["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (p, part) in content["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let args = &part["functionCall"]["args"];
            if !args.is_null() && !args.is_object() {
                return bad_request(&format!(
                    "Invalid value at 'contents[{c}].parts[{p}].function_call.args' (type.googleapis.com/google.protobuf.Struct), {args}"
                ));
            }
        }
    }
    // A function call turn is answered by as many function responses as it has calls.
    if let Some(contents) = request["contents"].as_array() {
        let count = |c: &Value, key: &str| {
            c["parts"]
                .as_array()
                .map_or(0, |p| p.iter().filter(|p| p.get(key).is_some()).count())
        };
        for (n, content) in contents.iter().enumerate() {
            let responses = count(content, "functionResponse");
            let calls_before = n
                .checked_sub(1)
                .map_or(0, |p| count(&contents[p], "functionCall"));
            let calls = count(content, "functionCall");
            let answered_by = contents.get(n + 1).map(|c| count(c, "functionResponse"));
            if (responses > 0 && responses != calls_before)
                || (calls > 0 && answered_by.is_some_and(|r| r != calls))
            {
                return bad_request(
                    "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.",
                );
            }
        }
    }
    if model.starts_with("gemini-3")
        && let Some(last) = request["contents"]
            .as_array()
            .and_then(|c| c.iter().rev().find(|c| c["role"] == "model"))
        && let Some(first_call) = last["parts"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p.get("functionCall").is_some()))
        && first_call.get("thoughtSignature").is_none()
    {
        return bad_request(
            "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance.",
        );
    }
    None
}

pub(super) fn render(script: &Script, context: &RenderContext<'_>) -> Vec<Bytes> {
    let _ = context;
    let (input, output, cached, reasoning) = script_usage(script).unwrap_or((0, 0, 0, 0));
    let mut chunks: Vec<Vec<Value>> = Vec::new();
    let mut calls: Vec<Value> = Vec::new();
    let mut error: Option<Value> = None;
    for item in &script.events {
        if !matches!(item, SimEvent::ToolCall { .. }) && !calls.is_empty() {
            chunks.push(std::mem::take(&mut calls));
        }
        match item {
            SimEvent::Text { text } => chunks.push(vec![json!({ "text": text })]),
            SimEvent::Thinking { text, signature } => {
                let mut part = json!({"text": text, "thought": true});
                if let Some(signature) = signature {
                    part["thoughtSignature"] = signature.clone().into();
                }
                chunks.push(vec![part]);
            }
            SimEvent::ToolCall {
                name,
                arguments,
                signature,
                ..
            } => {
                let mut part = json!({"functionCall": {"name": name, "args": arguments}});
                if let Some(signature) = signature {
                    part["thoughtSignature"] = signature.clone().into();
                }
                calls.push(part);
            }
            SimEvent::Signature { signature } => {
                chunks.push(vec![json!({"text": "", "thoughtSignature": signature})]);
            }
            SimEvent::Error { message, code } => {
                error = Some(error_body(500, message, code.as_deref()));
                break;
            }
            SimEvent::RedactedThinking { .. }
            | SimEvent::Usage { .. }
            | SimEvent::Finish { .. } => {}
        }
    }
    if !calls.is_empty() {
        chunks.push(calls);
    }
    if chunks.is_empty() && error.is_none() {
        chunks.push(vec![json!({"text": ""})]);
    }
    let count = chunks.len() as u64;
    let finish = script_finish(script).unwrap_or("STOP");
    let mut frames = Vec::with_capacity(chunks.len() + 1);
    for (i, parts) in chunks.into_iter().enumerate() {
        let last = i as u64 + 1 == count && error.is_none();
        // Running totals, as the real API sends them; the last chunk carries the final counts.
        let so_far = output * (i as u64 + 1) / count.max(1);
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if last {
            candidate["finishReason"] = finish.into();
        }
        frames.push(event(&json!({
            "candidates": [candidate],
            "usageMetadata": {"promptTokenCount": input, "candidatesTokenCount": so_far,
                "thoughtsTokenCount": reasoning, "cachedContentTokenCount": cached,
                "totalTokenCount": input + so_far + reasoning},
            "modelVersion": "gemini-sim", "responseId": "sim123"
        })));
    }
    if let Some(error) = error {
        frames.push(event(&error));
    }
    frames
}

pub(super) fn catalogue(method: &Method, path: &str, models: &[SimModel]) -> Option<Prepared> {
    if method != Method::GET || path != "/v1beta/models" {
        return None;
    }
    let mut list: Vec<Value> = models
        .iter()
        .map(|m| {
            let mut entry = json!({"name": format!("models/{}", m.id), "version": "001",
                "displayName": m.id, "description": "A simulated model.",
                "inputTokenLimit": m.context_window, "outputTokenLimit": 65536,
                "supportedGenerationMethods": ["generateContent", "countTokens", "createCachedContent", "batchGenerateContent"],
                "temperature": 1, "maxTemperature": 2, "topP": 0.95, "topK": 64});
            if m.thinking {
                entry["thinking"] = true.into();
            }
            entry
        })
        .collect();
    list.push(
        json!({"name": "models/text-embedding-004", "version": "004",
        "displayName": "Text Embedding 004", "inputTokenLimit": 2048, "outputTokenLimit": 1,
        "supportedGenerationMethods": ["embedContent"]}),
    );
    Some(json_reply(200, json!({ "models": list }), Vec::new()))
}
