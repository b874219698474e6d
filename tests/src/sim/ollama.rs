//! Ollama's native API: `/api/chat` NDJSON, `/api/tags`, `/api/show`, and its silent truncation
//! of prompts longer than `num_ctx`.

use axum::http::Method;
use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{
    Prepared, RenderContext, Script, SimEvent, SimModel, Variants, json_reply, script_finish,
    script_usage,
};

const CREATED_AT: &str = "2026-01-02T10:00:00.1Z";

pub(super) fn error_body(message: &str) -> Value {
    json!({ "error": message })
}

/// Refuses what a real server refuses before streaming: unknown models, `think` or `tools` for a
/// model without that capability.
pub(super) fn reject(request: &Value, models: &[SimModel]) -> Option<Prepared> {
    let name = request["model"].as_str().unwrap_or_default();
    let Some(model) = find(models, name) else {
        return Some(json_reply(
            404,
            error_body(&format!("model \"{name}\" not found, try pulling it first")),
            Vec::new(),
        ));
    };
    if request["think"] == json!(true) && !model.thinking {
        return Some(json_reply(
            400,
            error_body(&format!("\"{name}\" does not support thinking")),
            Vec::new(),
        ));
    }
    // `format` is "json" or a JSON schema (an object); anything else Ollama refuses.
    if let Some(format) = request.get("format")
        && !(format.is_object() || format == "json" || format == "")
    {
        return Some(json_reply(
            400,
            error_body(&format!(
                "invalid format: {format}: expected \"json\" or a JSON schema"
            )),
            Vec::new(),
        ));
    }
    // A call's arguments are a Go map: anything else fails to decode, as in Ollama.
    for message in request["messages"].as_array().into_iter().flatten() {
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let arguments = &call["function"]["arguments"];
            if !arguments.is_null() && !arguments.is_object() {
                let kind = if arguments.is_string() {
                    "string"
                } else {
                    "value"
                };
                return Some(json_reply(
                    400,
                    error_body(&format!(
                        "json: cannot unmarshal {kind} into Go struct field ToolCallFunction.messages.tool_calls.function.arguments of type api.ToolCallFunctionArguments"
                    )),
                    Vec::new(),
                ));
            }
        }
    }
    let has_tools = request["tools"].as_array().is_some_and(|t| !t.is_empty());
    if has_tools && !model.tools {
        return Some(json_reply(
            400,
            error_body(&format!(
                "registry.ollama.ai/library/{name} does not support tools"
            )),
            Vec::new(),
        ));
    }
    None
}

fn find<'a>(models: &'a [SimModel], name: &str) -> Option<&'a SimModel> {
    models
        .iter()
        .find(|m| m.id == name || m.id == format!("{name}:latest"))
}

/// Tokens of a rendered prompt, the simulator's way: four bytes per token plus four per message.
fn message_tokens(message: &Value) -> u64 {
    let mut bytes = 0;
    for key in ["content", "thinking"] {
        bytes += message[key].as_str().map_or(0, str::len);
    }
    if let Some(calls) = message.get("tool_calls") {
        bytes += calls.to_string().len();
    }
    (bytes as u64).div_ceil(4) + 4
}

/// Prompt tokens after Ollama's truncation: whole messages dropped from the front, keeping the
/// system messages and the last message, until the prompt fits `num_ctx`.
fn evaluated_prompt(request: &Value, num_ctx: u64) -> (u64, bool) {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let tools = request
        .get("tools")
        .map_or(0, |t| (t.to_string().len() as u64).div_ceil(4));
    let mut tokens: Vec<(bool, u64)> = messages
        .iter()
        .map(|m| (m["role"] == "system", message_tokens(m)))
        .collect();
    let total = |t: &[(bool, u64)]| tools + t.iter().map(|(_, n)| n).sum::<u64>();
    let full = total(&tokens);
    if full <= num_ctx {
        return (full, false);
    }
    let mut index = 0;
    while total(&tokens) > num_ctx && index + 1 < tokens.len() {
        if tokens[index].0 {
            index += 1;
        } else {
            tokens.remove(index);
        }
    }
    (total(&tokens).min(num_ctx), true)
}

fn line(model: &str, message: Value) -> Bytes {
    let mut line =
        json!({"model": model, "created_at": CREATED_AT, "message": message, "done": false})
            .to_string();
    line.push('\n');
    Bytes::from(line)
}

pub(super) fn render(script: &Script, context: &RenderContext<'_>) -> (Vec<Bytes>, bool) {
    let request = context.request;
    let model = request["model"].as_str().unwrap_or("sim-model");
    let num_ctx = request["options"]["num_ctx"]
        .as_u64()
        .unwrap_or(context.ollama_default_ctx);
    let (evaluated, truncated) = evaluated_prompt(request, num_ctx);

    let mut frames = Vec::new();
    let mut calls: Vec<Value> = Vec::new();
    let flush = |calls: &mut Vec<Value>, frames: &mut Vec<Bytes>| {
        if !calls.is_empty() {
            frames.push(line(
                model,
                json!({"role": "assistant", "content": "", "tool_calls": std::mem::take(calls)}),
            ));
        }
    };
    for event in &script.events {
        if !matches!(event, SimEvent::ToolCall { .. }) {
            flush(&mut calls, &mut frames);
        }
        match event {
            SimEvent::Text { text } => {
                frames.push(line(model, json!({"role": "assistant", "content": text})));
            }
            SimEvent::Thinking { text, .. } => frames.push(line(
                model,
                json!({"role": "assistant", "content": "", "thinking": text}),
            )),
            SimEvent::ToolCall {
                id,
                name,
                arguments,
                ..
            } => {
                let index = calls.len();
                calls.push(json!({"id": id, "function": {"index": index, "name": name, "arguments": arguments}}));
            }
            SimEvent::Error { message, .. } => {
                let mut text = error_body(message).to_string();
                text.push('\n');
                frames.push(Bytes::from(text));
                return (frames, truncated);
            }
            SimEvent::RedactedThinking { .. }
            | SimEvent::Signature { .. }
            | SimEvent::Usage { .. }
            | SimEvent::Finish { .. } => {}
        }
    }
    flush(&mut calls, &mut frames);

    let usage = script_usage(script);
    let prompt = match usage {
        Some((input, ..)) if !truncated => input,
        _ => evaluated,
    };
    let output = usage.map_or(0, |(_, output, ..)| output);
    let mut last = Map::new();
    last.insert("model".into(), model.into());
    last.insert("created_at".into(), CREATED_AT.into());
    last.insert(
        "message".into(),
        json!({"role": "assistant", "content": ""}),
    );
    last.insert("done".into(), true.into());
    last.insert(
        "done_reason".into(),
        script_finish(script).unwrap_or("stop").into(),
    );
    last.insert("total_duration".into(), 4_883_583_458u64.into());
    last.insert("load_duration".into(), 1_334_875u64.into());
    // Counts are omitempty on the real server: a zero is left out.
    if prompt > 0 {
        last.insert("prompt_eval_count".into(), prompt.into());
    }
    last.insert("prompt_eval_duration".into(), 342_546_000u64.into());
    if output > 0 {
        last.insert("eval_count".into(), output.into());
    }
    last.insert("eval_duration".into(), 4_535_599_000u64.into());
    let mut text = Value::Object(last).to_string();
    text.push('\n');
    frames.push(Bytes::from(text));
    (frames, truncated)
}

/// A digest that changes whenever what the simulator says about the model does, as a real
/// one changes with the model's files.
fn digest(model: &SimModel, variants: &Variants) -> String {
    let text = serde_json::to_string(model).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ variants.instance();
    for byte in text.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}").repeat(4)
}

pub(super) fn catalogue(
    method: &Method,
    path: &str,
    request: &Value,
    models: &[SimModel],
    variants: &Variants,
) -> Option<Prepared> {
    match (method.as_str(), path) {
        // Go's mux answers an unknown route in plain text.
        ("POST", "/api/show") if variants.no_show => Some(Prepared {
            status: 404,
            content_type: "text/plain; charset=utf-8".to_owned(),
            headers: Vec::new(),
            frames: vec![Bytes::from_static(b"404 page not found")],
            delay: std::time::Duration::ZERO,
            first_delay: std::time::Duration::ZERO,
            cut_after: None,
            malformed_at: None,
        }),
        ("GET", "/api/tags") => {
            let list: Vec<Value> = models
                .iter()
                .map(|m| {
                    json!({"name": m.id, "model": m.id,
                        "modified_at": "2025-05-04T17:37:44.706015396-07:00",
                        "size": 2019393189u64, "digest": digest(m, variants),
                        "details": {"parent_model": "", "format": "gguf", "family": "llama",
                            "families": ["llama"], "parameter_size": "3.2B", "quantization_level": "Q4_K_M"}})
                })
                .collect();
            Some(json_reply(200, json!({ "models": list }), Vec::new()))
        }
        ("POST", "/api/show") => {
            let name = request["model"]
                .as_str()
                .or(request["name"].as_str())
                .unwrap_or_default();
            let Some(model) = find(models, name) else {
                return Some(json_reply(
                    404,
                    error_body(&format!("model '{name}' not found")),
                    Vec::new(),
                ));
            };
            let mut capabilities = vec![if model.embedding {
                "embedding"
            } else {
                "completion"
            }];
            if model.tools {
                capabilities.push("tools");
            }
            if model.thinking {
                capabilities.push("thinking");
            }
            if model.vision {
                capabilities.push("vision");
            }
            Some(json_reply(
                200,
                json!({
                    "modelfile": "# Modelfile generated by \"ollama show\"\nFROM /models/blob\n",
                    "parameters": "stop                           \"<|im_end|>\"\ntemperature                    0.6",
                    "template": "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>{{ end }}",
                    "details": {"parent_model": "", "format": "gguf", "family": "qwen3",
                        "families": ["qwen3"], "parameter_size": "8.2B", "quantization_level": "Q4_K_M"},
                    "model_info": {"general.architecture": "qwen3", "general.parameter_count": 8190735360u64,
                        "qwen3.context_length": model.context_window, "qwen3.embedding_length": 4096,
                        "qwen3.block_count": 36, "tokenizer.ggml.model": "gpt2"},
                    "capabilities": capabilities,
                    "modified_at": "2025-05-04T17:37:44.706015396-07:00"
                }),
                Vec::new(),
            ))
        }
        _ => None,
    }
}
