//! The neutral request: what Totem asks of any model, before a provider turns it into its own
//! wire format.

use serde::{Deserialize, Serialize};

/// One call to a model: the conversation so far, the tools it may call and how to answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The provider's own model id (`qwen3:8b`, `claude-sonnet-4-5`), without the `provider/` prefix.
    pub model: String,
    /// The system prompt, sent the way each provider expects it.
    pub system: Option<String>,
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// The tools the model may call; empty for none.
    pub tools: Vec<ToolDefinition>,
    /// How hard the model should think, turned into each provider's own setting.
    pub reasoning: ReasoningLevel,
    /// Output token limit. Anthropic requires one; [`DEFAULT_MAX_OUTPUT_TOKENS`] is used there when unset.
    pub max_output_tokens: Option<u32>,
    /// Overrides the provider's configured temperature. Ignored while a model thinks on Anthropic,
    /// which refuses a changed temperature then.
    pub temperature: Option<f32>,
    /// Nucleus sampling, where the server takes it.
    pub top_p: Option<f32>,
    /// llama.cpp's and Ollama's penalty on repeated tokens; sent only to servers that take it.
    pub repeat_penalty: Option<f32>,
    /// A JSON schema the answer must match: the server constrains its output to one JSON value
    /// of this shape (OpenAI-compatible `response_format: json_schema`, Ollama `format`). Used
    /// for the constrained steps of models without reliable native tool calls; providers whose
    /// API has no such field leave it out.
    pub answer_schema: Option<serde_json::Value>,
}

/// Output token limit used where a provider requires one and the request gave none.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    /// What the person (or Totem on their behalf) said.
    User {
        /// The message's text.
        text: String,
        #[serde(default)]
        /// Images attached to it, for models that see.
        images: Vec<Image>,
    },
    /// What the model answered, part by part, in the order it streamed them.
    Assistant {
        /// The turn's parts.
        parts: Vec<AssistantPart>,
    },
    /// The result of one tool call. Consecutive results answer the same assistant turn and are
    /// grouped into one message where the provider wants that (Anthropic, Gemini).
    ToolResult(ToolResult),
}

impl Message {
    /// A user message with text only.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User {
            text: text.into(),
            images: Vec::new(),
        }
    }

    /// An assistant message with text only.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::Assistant {
            parts: vec![AssistantPart::Text {
                text: text.into(),
                signature: None,
            }],
        }
    }
}

/// An image attached to a user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    /// `image/png`, `image/jpeg`…
    pub media_type: String,
    /// The image bytes, base64-encoded (standard alphabet, padded).
    pub data_base64: String,
}

/// One piece of an assistant turn. The opaque round-trip data (`signature`, `data`) must be sent
/// back exactly as received, which the providers do when the part is replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AssistantPart {
    /// Text of the answer.
    Text {
        /// The text as it streamed.
        text: String,
        /// Gemini `thoughtSignature` carried by a text part.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// The model's thinking, shown folded and sent back where the provider wants it.
    Reasoning {
        /// The thinking as it streamed.
        text: String,
        /// Anthropic thinking `signature`, or Gemini `thoughtSignature` on a thought part.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Anthropic `redacted_thinking`: encrypted reasoning with no readable text.
    RedactedReasoning {
        /// The encrypted block, sent back as received.
        data: String,
    },
    /// A call of one of the request's tools.
    ToolCall(ToolCall),
}

/// A call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The provider's call id; synthesised (`call_0`…) where the provider gives none. The
    /// daemon makes repeats unique before it stores them.
    pub id: String,
    /// The tool's name, as in the request's tool list.
    pub name: String,
    /// Always a JSON value (an object for every well-behaved model), never a JSON string.
    pub arguments: serde_json::Value,
    /// Gemini `thoughtSignature` carried by the `functionCall` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// What a tool returned, sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The name of the tool that was called (Gemini matches results by name).
    pub tool_name: String,
    /// What the tool returned, as the model reads it.
    pub content: String,
    #[serde(default)]
    /// The tool failed: `content` says why.
    pub is_error: bool,
}

pub use totem_protocol::ToolDefinition;

pub use totem_protocol::ReasoningLevel;

/// A rough token count for a request: about four bytes of text per token, plus a little per
/// message. Good enough to size Ollama's `num_ctx` and to decide when to compact; the provider's
/// own count (in [`crate::Usage`]) is the truth afterwards.
pub fn estimate_tokens(request: &ChatRequest) -> u32 {
    const PER_MESSAGE: usize = 8;
    let mut bytes = request.system.as_deref().map_or(0, str::len);
    let mut overhead = PER_MESSAGE;
    for message in &request.messages {
        overhead += PER_MESSAGE;
        bytes += match message {
            // An image costs several hundred tokens on every vision model we know.
            Message::User { text, images } => text.len() + images.len() * 3000,
            Message::Assistant { parts } => parts
                .iter()
                .map(|part| match part {
                    AssistantPart::Text { text, .. } | AssistantPart::Reasoning { text, .. } => {
                        text.len()
                    }
                    AssistantPart::RedactedReasoning { data } => data.len() / 2,
                    AssistantPart::ToolCall(call) => call.name.len() + json_len(&call.arguments),
                })
                .sum(),
            Message::ToolResult(result) => result.content.len() + result.tool_name.len(),
        };
    }
    for tool in &request.tools {
        overhead += PER_MESSAGE;
        bytes += tool.name.len() + tool.description.len() + json_len(&tool.parameters);
    }
    let tokens = bytes.div_ceil(4) + overhead;
    u32::try_from(tokens).unwrap_or(u32::MAX)
}

fn json_len(value: &serde_json::Value) -> usize {
    serde_json::to_vec(value).map_or(0, |bytes| bytes.len())
}

/// An id for a call the server sent without one: `prefix`, then the time and a counter, so no
/// other call of this process, or of an earlier one, gets the same (Anthropic refuses a history
/// with a `tool_use` id twice, and numbering from 0 each answer repeats ids every step).
pub fn synthetic_call_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{prefix}{ms:x}_{n}")
}
