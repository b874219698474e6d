//! Anthropic Messages: `event: <name>` / `data: <json>` stream, `/v1/models`, and the checks the
//! real API makes on thinking requests.

use std::collections::BTreeMap;

use axum::http::Method;
use bytes::Bytes;
use serde_json::{Value, json};

use super::{
    Prepared, RenderContext, Script, SimEvent, SimModel, Variants, halves, json_reply,
    script_finish, script_usage,
};

fn event(name: &str, value: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {value}\n\n"))
}

pub(super) fn error_body(status: u16, message: &str, code: Option<&str>) -> Value {
    let kind = code.unwrap_or(match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        _ => "api_error",
    });
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011CSim"})
}

fn bad_request(message: &str) -> Option<Prepared> {
    Some(json_reply(400, error_body(400, message, None), Vec::new()))
}

/// What the real API refuses before streaming.
pub(super) fn reject(
    request: &Value,
    headers: &BTreeMap<String, String>,
    models: &[SimModel],
) -> Option<Prepared> {
    if !headers.contains_key("anthropic-version") {
        return bad_request("anthropic-version: header is required");
    }
    let Some(max_tokens) = request["max_tokens"].as_u64() else {
        return bad_request("max_tokens: Field required");
    };
    let thinking = &request["thinking"];
    // Each model takes the thinking forms it supports, and no other.
    if let Some(model) = models.iter().find(|m| request["model"] == m.id.as_str()) {
        match thinking["type"].as_str() {
            Some("enabled") if model.adaptive_only => {
                return bad_request(
                    "\"thinking.type.enabled\" is not supported for this model. Use \"thinking.type.adaptive\" and \"output_config.effort\" to control thinking behavior.",
                );
            }
            Some("adaptive") if !model.adaptive => {
                return bad_request(
                    "thinking.type: adaptive thinking is not supported on this model",
                );
            }
            _ => {}
        }
    }
    if let Some(refused) = reject_tool_history(request) {
        return Some(refused);
    }
    let thinking_on = matches!(thinking["type"].as_str(), Some("enabled" | "adaptive"));
    if thinking["type"] == "enabled" {
        let budget = thinking["budget_tokens"].as_u64().unwrap_or(0);
        if budget < 1024 {
            return bad_request(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
            );
        }
        if max_tokens <= budget {
            return bad_request("`max_tokens` must be greater than `thinking.budget_tokens`");
        }
    }
    if thinking_on && request.get("temperature").is_some() {
        return bad_request(
            "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode",
        );
    }
    if thinking_on && let Some(messages) = request["messages"].as_array() {
        // The assistant turn being continued with tool results must start with its thinking.
        if let Some((index, last)) = messages
            .iter()
            .enumerate()
            .rev()
            .find(|(_, m)| m["role"] == "assistant")
        {
            let blocks = last["content"].as_array().cloned().unwrap_or_default();
            let uses_tools = blocks.iter().any(|b| b["type"] == "tool_use");
            let first = blocks
                .first()
                .map(|b| b["type"].clone())
                .unwrap_or(Value::Null);
            if uses_tools && first != "thinking" && first != "redacted_thinking" {
                return bad_request(&format!(
                    "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block.",
                    first.as_str().unwrap_or("nothing")
                ));
            }
        }
    }
    None
}

struct Writer {
    frames: Vec<Bytes>,
    index: usize,
    open_text: bool,
}

impl Writer {
    fn close_text(&mut self) {
        if self.open_text {
            self.frames.push(event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": self.index}),
            ));
            self.index += 1;
            self.open_text = false;
        }
    }

    fn start(&mut self, block: Value) {
        self.frames.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": self.index, "content_block": block}),
        ));
    }

    fn delta(&mut self, delta: Value) {
        self.frames.push(event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": self.index, "delta": delta}),
        ));
    }

    fn stop(&mut self) {
        self.frames.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": self.index}),
        ));
        self.index += 1;
    }
}

pub(super) fn render(script: &Script, context: &RenderContext<'_>) -> Vec<Bytes> {
    let model = context.request["model"].as_str().unwrap_or("claude-sim");
    let (input, output, cached, _) = script_usage(script).unwrap_or((0, 0, 0, 0));
    let mut w = Writer {
        frames: Vec::new(),
        index: 0,
        open_text: false,
    };
    w.frames.push(event(
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_01Sim", "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": input,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached,
                "output_tokens": 1, "service_tier": "standard"}}}),
    ));
    w.frames.push(event("ping", &json!({"type": "ping"})));
    let mut any_calls = false;
    for item in &script.events {
        if !matches!(item, SimEvent::Text { .. }) {
            w.close_text();
        }
        match item {
            SimEvent::Text { text } => {
                if !w.open_text {
                    w.start(json!({"type": "text", "text": ""}));
                    w.open_text = true;
                }
                w.delta(json!({"type": "text_delta", "text": text}));
            }
            SimEvent::Thinking { text, signature } => {
                w.start(json!({"type": "thinking", "thinking": "", "signature": ""}));
                let (first, second) = halves(text);
                w.delta(json!({"type": "thinking_delta", "thinking": first}));
                w.delta(json!({"type": "thinking_delta", "thinking": second}));
                if let Some(signature) = signature {
                    w.delta(json!({"type": "signature_delta", "signature": signature}));
                }
                w.stop();
            }
            SimEvent::RedactedThinking { data } => {
                w.start(json!({"type": "redacted_thinking", "data": data}));
                w.stop();
            }
            SimEvent::ToolCall {
                id,
                name,
                arguments,
                ..
            } => {
                any_calls = true;
                w.start(json!({"type": "tool_use", "id": id, "name": name, "input": {}}));
                w.delta(json!({"type": "input_json_delta", "partial_json": ""}));
                let text = arguments.to_string();
                let (first, second) = halves(&text);
                w.delta(json!({"type": "input_json_delta", "partial_json": first}));
                w.delta(json!({"type": "input_json_delta", "partial_json": second}));
                w.stop();
            }
            SimEvent::Error { message, code } => {
                w.frames.push(event(
                    "error",
                    &json!({"type": "error", "error": {
                        "type": code.as_deref().unwrap_or("overloaded_error"), "message": message}}),
                ));
                return w.frames;
            }
            SimEvent::Signature { .. } | SimEvent::Usage { .. } | SimEvent::Finish { .. } => {}
        }
    }
    w.close_text();
    let stop = script_finish(script).unwrap_or(if any_calls { "tool_use" } else { "end_turn" });
    w.frames.push(event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": output}}),
    ));
    w.frames
        .push(event("message_stop", &json!({"type": "message_stop"})));
    w.frames
}

pub(super) fn catalogue(
    method: &Method,
    path: &str,
    models: &[SimModel],
    variants: &Variants,
) -> Option<Prepared> {
    if method != Method::GET || path != "/v1/models" {
        return None;
    }
    let data: Vec<Value> = models
        .iter()
        .map(|m| {
            let mut entry = json!({"type": "model", "id": m.id, "display_name": m.id,
                "created_at": "2026-02-05T00:00:00Z",
                "max_input_tokens": m.context_window, "max_tokens": 64000,
                "capabilities": {
                    "thinking": {"supported": m.thinking, "types": {
                        "enabled": {"supported": m.thinking && !m.adaptive_only},
                        "adaptive": {"supported": m.adaptive}}},
                    "image_input": {"supported": m.vision},
                    "pdf_input": {"supported": true},
                    "structured_outputs": {"supported": true}}});
            if variants.bare_model_list {
                // A gateway's list: ids and names only.
                entry = json!({"type": "model", "id": m.id, "display_name": m.id,
                    "created_at": "2026-02-05T00:00:00Z"});
            }
            entry
        })
        .collect();
    let first = models.first().map(|m| m.id.clone());
    let last = models.last().map(|m| m.id.clone());
    Some(json_reply(
        200,
        json!({"data": data, "has_more": false, "first_id": first, "last_id": last}),
        Vec::new(),
    ))
}

/// Anthropic's rules for tool calls in a history: ids unique and of the allowed characters, each
/// `tool_use` answered by a `tool_result` in the next message, and each `tool_result` answering
/// a `tool_use` of the message before.
fn reject_tool_history(request: &Value) -> Option<Prepared> {
    let messages = request["messages"].as_array()?;
    let mut seen = std::collections::HashSet::new();
    let blocks = |m: &Value| m["content"].as_array().cloned().unwrap_or_default();
    for (index, message) in messages.iter().enumerate() {
        let content = blocks(message);
        let uses: Vec<String> = content
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap_or_default().to_owned())
            .collect();
        for (n, block) in content.iter().enumerate() {
            if block["type"] != "tool_use" {
                continue;
            }
            let id = block["id"].as_str().unwrap_or_default();
            let fine = !id.is_empty()
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !fine {
                return bad_request(&format!(
                    "messages.{index}.content.{n}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                ));
            }
            if !seen.insert(id.to_owned()) {
                return bad_request(&format!(
                    "messages.{index}.content.{n}: `tool_use` ids must be unique"
                ));
            }
        }
        if !uses.is_empty() {
            let next = messages.get(index + 1).map(blocks).unwrap_or_default();
            let answered: Vec<&str> = next
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .filter_map(|b| b["tool_use_id"].as_str())
                .collect();
            let missing: Vec<&str> = uses
                .iter()
                .map(String::as_str)
                .filter(|id| !answered.contains(id))
                .collect();
            if !missing.is_empty() && index + 1 < messages.len() {
                return bad_request(&format!(
                    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                    missing.join(", ")
                ));
            }
        }
        let previous_uses: Vec<String> = index
            .checked_sub(1)
            .map(|p| blocks(&messages[p]))
            .unwrap_or_default()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .filter_map(|b| b["id"].as_str().map(str::to_owned))
            .collect();
        for (n, block) in content.iter().enumerate() {
            if block["type"] != "tool_result" {
                continue;
            }
            let id = block["tool_use_id"].as_str().unwrap_or_default();
            if message["role"] != "user" || !previous_uses.iter().any(|u| u == id) {
                return bad_request(&format!(
                    "messages.{index}.content.{n}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                ));
            }
        }
    }
    None
}
