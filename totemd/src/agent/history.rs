//! The conversation as the model sees it: stored messages turned into provider messages, and
//! compaction — a model-written summary that replaces older turns in later requests while the
//! store keeps every message.

use std::collections::HashSet;

use totem_protocol::{Message, Part, Role};
use totem_provider::{AssistantPart, ChatRequest, Message as ModelMessage, ToolCall, ToolResult};

use super::settings::ResolvedModel;

/// Stored messages as provider messages. Reasoning of earlier runs is kept only with answers that
/// called tools (DeepSeek wants it back on those in every later request; providers that cannot
/// take unsigned reasoning leave it out); a call left without a result (an aborted run) gets one
/// saying so, since every provider wants each call answered.
pub fn to_model_messages(messages: &[Message]) -> Vec<ModelMessage> {
    let mut out = Vec::new();
    for message in messages {
        match message.role {
            Role::User => {
                let text = super::attach::model_text(&message.parts);
                if !text.is_empty() {
                    out.push(ModelMessage::user(text));
                }
            }
            Role::Assistant => {
                let mut parts = Vec::new();
                let mut results = Vec::new();
                let mut answered = HashSet::new();
                let calls_tools = message
                    .parts
                    .iter()
                    .any(|p| matches!(p, Part::ToolCall { .. }));
                for part in &message.parts {
                    match part {
                        Part::Reasoning { text } if calls_tools && !text.is_empty() => {
                            parts.push(AssistantPart::Reasoning {
                                text: text.clone(),
                                signature: None,
                            })
                        }
                        Part::Text { text } if !text.is_empty() => {
                            parts.push(AssistantPart::Text {
                                text: text.clone(),
                                signature: None,
                            })
                        }
                        Part::ToolCall {
                            call_id,
                            tool,
                            input,
                        } => parts.push(AssistantPart::ToolCall(ToolCall {
                            id: call_id.clone(),
                            name: tool.clone(),
                            arguments: input.clone(),
                            signature: None,
                        })),
                        Part::ToolResult {
                            call_id,
                            tool,
                            output,
                            is_error,
                        } => {
                            answered.insert(call_id.clone());
                            results.push(ToolResult {
                                call_id: call_id.clone(),
                                tool_name: tool.clone(),
                                content: output.clone(),
                                is_error: *is_error,
                            });
                        }
                        _ => {}
                    }
                }
                for part in &parts {
                    if let AssistantPart::ToolCall(call) = part
                        && !answered.contains(&call.id)
                    {
                        results.push(ToolResult {
                            call_id: call.id.clone(),
                            tool_name: call.name.clone(),
                            content: "not run: the run stopped before this call".into(),
                            is_error: true,
                        });
                    }
                }
                if parts.is_empty() {
                    continue;
                }
                out.push(ModelMessage::Assistant { parts });
                out.extend(results.into_iter().map(ModelMessage::ToolResult));
            }
        }
    }
    out
}

/// The longest transcript sent to the summariser, in bytes (about 24k tokens); less when the
/// summarising model's window is smaller (half of it, at 4 bytes a token).
const MAX_TRANSCRIPT: usize = 96 * 1024;
/// Each tool result is cut to this many bytes in the transcript.
const MAX_RESULT: usize = 1500;

const SUMMARY_PROMPT: &str = "You summarise a coding session so the work can continue without the full history. Write concise bullet points: what the user wants, decisions made, files created or changed and their state, commands run and their outcome, open problems, and the next steps. Keep file paths, names and exact error messages. Do not invent anything.";

fn cut(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// A plain-text transcript of model messages for the summariser.
fn transcript(previous: Option<&str>, messages: &[ModelMessage], max: usize) -> String {
    let mut out = String::new();
    if let Some(summary) = previous {
        out.push_str("Summary of what came before:\n");
        out.push_str(summary);
        out.push_str("\n\n");
    }
    for message in messages {
        match message {
            ModelMessage::User { text, .. } => {
                out.push_str("User: ");
                out.push_str(text);
            }
            ModelMessage::Assistant { parts } => {
                for part in parts {
                    match part {
                        AssistantPart::Text { text, .. } => {
                            out.push_str("Assistant: ");
                            out.push_str(text);
                        }
                        AssistantPart::ToolCall(call) => {
                            out.push_str(&format!(
                                "Assistant called {}({})",
                                call.name, call.arguments
                            ));
                        }
                        _ => continue,
                    }
                    out.push('\n');
                }
                continue;
            }
            ModelMessage::ToolResult(result) => {
                out.push_str(&format!("Result of {}: ", result.tool_name));
                out.push_str(cut(&result.content, MAX_RESULT));
            }
        }
        out.push('\n');
    }
    if out.len() > max {
        // Keep the beginning (what the user asked for) and most of the end (where the work
        // stands); cut the middle.
        let head = out.floor_char_boundary(max / 4);
        let tail = out.ceil_char_boundary(out.len() - (max - head));
        out = format!(
            "{}\n[… middle of the session cut …]\n{}",
            &out[..head],
            &out[tail..]
        );
    }
    out
}

/// Asks `model` for a summary of `messages` (and of the summary before them).
pub async fn summarise(
    model: &ResolvedModel,
    previous: Option<&str>,
    messages: &[ModelMessage],
) -> Result<String, String> {
    let max = model
        .info
        .as_ref()
        .and_then(|i| i.context_window)
        .map_or(MAX_TRANSCRIPT, |w| {
            usize::try_from(w.saturating_mul(2)).unwrap_or(MAX_TRANSCRIPT)
        })
        .min(MAX_TRANSCRIPT);
    let request = ChatRequest {
        model: model.model.clone(),
        system: Some(SUMMARY_PROMPT.to_string()),
        messages: vec![ModelMessage::user(format!(
            "Summarise this session:\n\n{}",
            transcript(previous, messages, max)
        ))],
        ..ChatRequest::default()
    };
    let completion = model
        .provider
        .complete(request)
        .await
        .map_err(|e| format!("compaction failed: {e}"))?;
    let text = completion.text();
    if text.trim().is_empty() {
        return Err("compaction failed: the model returned an empty summary".into());
    }
    Ok(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn message(role: Role, parts: Vec<Part>) -> Message {
        Message {
            id: "m".into(),
            session_id: "s".into(),
            seq: 1,
            role,
            run_id: None,
            created_at: 0,
            undone: false,
            compacted: false,
            parts,
        }
    }

    fn call(id: &str) -> Part {
        Part::ToolCall {
            call_id: id.into(),
            tool: "read".into(),
            input: json!({"path": "a"}),
        }
    }

    #[test]
    fn answers_keep_text_and_calls_and_their_results_follow() {
        let stored = [
            message(
                Role::User,
                vec![
                    Part::Text { text: "one".into() },
                    Part::Text { text: "two".into() },
                ],
            ),
            message(
                Role::Assistant,
                vec![
                    Part::Reasoning {
                        text: "thinking".into(),
                    },
                    Part::Text {
                        text: "Reading.".into(),
                    },
                    call("c1"),
                    Part::ToolResult {
                        call_id: "c1".into(),
                        tool: "read".into(),
                        output: "content".into(),
                        is_error: false,
                    },
                ],
            ),
        ];
        let out = to_model_messages(&stored);
        assert_eq!(out.len(), 3, "{out:?}");
        assert_eq!(out[0], ModelMessage::user("one\ntwo"));
        let ModelMessage::Assistant { parts } = &out[1] else {
            panic!("{out:?}");
        };
        assert_eq!(
            parts.len(),
            3,
            "reasoning stays with an answer that called tools"
        );
        assert!(
            matches!(&parts[0], AssistantPart::Reasoning { text, signature: None } if text == "thinking")
        );
        let ModelMessage::ToolResult(result) = &out[2] else {
            panic!("{out:?}");
        };
        assert_eq!(
            (result.content.as_str(), result.is_error),
            ("content", false)
        );
    }

    #[test]
    fn a_call_left_without_result_is_answered_and_empty_answers_are_dropped() {
        let stored = [
            message(Role::Assistant, vec![call("c1")]),
            message(
                Role::Assistant,
                vec![Part::Reasoning {
                    text: "only thinking".into(),
                }],
            ),
            message(Role::User, vec![]),
        ];
        let out = to_model_messages(&stored);
        assert_eq!(out.len(), 2, "{out:?}");
        let ModelMessage::ToolResult(result) = &out[1] else {
            panic!("{out:?}");
        };
        assert_eq!(result.call_id, "c1");
        assert!(result.is_error && result.content.contains("not run"));
    }

    #[test]
    fn a_long_transcript_keeps_its_start_and_end() {
        let messages = vec![
            ModelMessage::user(format!("START {}", "é".repeat(2000))),
            ModelMessage::user(format!("{} END", "ü".repeat(2000))),
        ];
        let text = transcript(Some("before"), &messages, 1000);
        assert!(text.starts_with("Summary of what came before:\nbefore"));
        assert!(text.contains("START") && text.contains("END"), "{text}");
        assert!(text.contains("middle of the session cut"));
        assert!(text.len() < 1100, "{}", text.len());
    }
}
