//! What a provider's stream yields, normalized across providers, and the accumulator that folds
//! a stream into a finished assistant turn.

use serde::{Deserialize, Serialize};

use crate::request::{AssistantPart, ToolCall};

/// One normalized event of a model's answer.
///
/// Parts are delimited implicitly: consecutive deltas of one kind extend the same part, a delta of
/// another kind (or a tool call) starts a new one, and [`StreamEvent::PartEnd`] closes the part being
/// streamed, attaching the opaque data that must round-trip with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum StreamEvent {
    /// More text of the answer.
    TextDelta {
        /// The new text, to append.
        text: String,
    },
    /// More of the model's thinking.
    ReasoningDelta {
        /// The new thinking text, to append.
        text: String,
    },
    /// Closes the current text or reasoning part. `signature` (Anthropic thinking signature, Gemini
    /// `thoughtSignature`) belongs to that part and must be sent back with it, byte for byte.
    PartEnd {
        /// The part's signature, to send back with it.
        signature: Option<String>,
    },
    /// A whole block of encrypted reasoning (Anthropic `redacted_thinking`).
    RedactedReasoning {
        /// The encrypted block, sent back as received.
        data: String,
    },
    /// A complete tool call; arguments are parsed once the call is whole.
    ToolCall(ToolCall),
    /// Token counts so far for this answer. A later `Usage` replaces an earlier one.
    Usage(Usage),
    /// Why the answer ended; the last event of a stream.
    Finish(FinishReason),
    /// An attempt failed before any output and is about to be sent again. Not part of the
    /// answer: something to tell the user while they wait.
    Retry(RetryNotice),
    /// Something the user should know about how the request was sent (a history the server
    /// could not take was sent with less in it). Not part of the answer.
    Notice {
        /// One sentence, for people.
        text: String,
    },
}

/// A retry about to happen: who failed, how, and how long until the next attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryNotice {
    /// The configured provider that failed.
    pub provider: String,
    /// The HTTP status, when the failure was one.
    pub status: Option<u16>,
    /// What went wrong, in a few words.
    pub reason: String,
    /// How long until the next attempt, in milliseconds.
    pub wait_ms: u64,
    /// This retry's number, from 1, and how many are allowed.
    pub retry: u32,
    /// How many retries are allowed in all.
    pub max_retries: u32,
}

impl RetryNotice {
    pub(crate) fn new(
        error: &crate::ProviderError,
        wait: std::time::Duration,
        retry: u32,
        max_retries: u32,
    ) -> Self {
        RetryNotice {
            provider: error.provider().to_owned(),
            status: error.status(),
            reason: error.short_reason(),
            wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            retry,
            max_retries,
        }
    }
}

impl std::fmt::Display for RetryNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.provider, self.reason)?;
        if let Some(status) = self.status {
            write!(f, " (HTTP {status})")?;
        }
        if self.wait_ms < 1000 {
            write!(f, "; trying again in {} ms", self.wait_ms)?;
        } else {
            write!(f, "; trying again in {:.1} s", self.wait_ms as f64 / 1000.0)?;
        }
        write!(f, " (retry {} of {})", self.retry, self.max_retries)
    }
}

/// Token counts as the provider reported them: the protocol's [`Usage`], whose cost is left
/// unset here (the daemon prices it).
pub use totem_protocol::Usage;

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The model wants its tool calls run (also reported when a provider says "stop" after calls).
    ToolCalls,
    /// The output token limit was reached.
    Length,
    /// The context window is full (Anthropic `model_context_window_exceeded`).
    ContextWindow,
    /// Blocked by the provider's filter (OpenAI `content_filter`, Gemini `SAFETY`, Anthropic `refusal`…).
    ContentFilter,
    /// Anything else, with the provider's own word for it.
    Other(String),
}

/// A finished answer: what [`crate::Provider::complete`] returns and what [`TurnBuilder`] builds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// The answer's parts, in the order they streamed.
    pub parts: Vec<AssistantPart>,
    /// Token counts, when the provider sent them.
    pub usage: Option<Usage>,
    /// Why the answer ended, when the provider said.
    pub finish: Option<FinishReason>,
}

impl Completion {
    /// All text parts joined.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if let AssistantPart::Text { text, .. } = part {
                out.push_str(text);
            }
        }
        out
    }

    /// All reasoning text joined.
    pub fn reasoning(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if let AssistantPart::Reasoning { text, .. } = part {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|part| match part {
            AssistantPart::ToolCall(call) => Some(call),
            _ => None,
        })
    }
}

/// Folds [`StreamEvent`]s into the parts of an assistant turn, in the order they streamed, keeping
/// every signature attached to its part. Use it to build the `Message::Assistant` sent back next turn.
#[derive(Debug, Default)]
pub struct TurnBuilder {
    completion: Completion,
    /// The last part is still open for deltas.
    open: bool,
}

impl TurnBuilder {
    /// An empty turn, before the first event.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one event: extends the open part, starts a new one or records usage and the finish.
    pub fn push(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::TextDelta { text } => {
                if self.open
                    && let Some(AssistantPart::Text { text: current, .. }) =
                        self.completion.parts.last_mut()
                {
                    current.push_str(&text);
                    return;
                }
                self.completion.parts.push(AssistantPart::Text {
                    text,
                    signature: None,
                });
                self.open = true;
            }
            StreamEvent::ReasoningDelta { text } => {
                if self.open
                    && let Some(AssistantPart::Reasoning { text: current, .. }) =
                        self.completion.parts.last_mut()
                {
                    current.push_str(&text);
                    return;
                }
                self.completion.parts.push(AssistantPart::Reasoning {
                    text,
                    signature: None,
                });
                self.open = true;
            }
            StreamEvent::PartEnd { signature } => {
                if self.open
                    && let Some(
                        AssistantPart::Text {
                            signature: slot, ..
                        }
                        | AssistantPart::Reasoning {
                            signature: slot, ..
                        },
                    ) = self.completion.parts.last_mut()
                {
                    *slot = signature;
                } else if let Some(signature) = signature {
                    // A signature with nothing open before it: keep it on an empty text part so
                    // it still goes back in position.
                    self.completion.parts.push(AssistantPart::Text {
                        text: String::new(),
                        signature: Some(signature),
                    });
                }
                self.open = false;
            }
            StreamEvent::RedactedReasoning { data } => {
                self.completion
                    .parts
                    .push(AssistantPart::RedactedReasoning { data });
                self.open = false;
            }
            StreamEvent::ToolCall(call) => {
                self.completion.parts.push(AssistantPart::ToolCall(call));
                self.open = false;
            }
            StreamEvent::Usage(usage) => self.completion.usage = Some(usage),
            StreamEvent::Finish(reason) => self.completion.finish = Some(reason),
            StreamEvent::Retry(_) | StreamEvent::Notice { .. } => {}
        }
    }

    /// The turn so far (also usable after an error, to keep what did stream).
    pub fn finish(self) -> Completion {
        self.completion
    }
}
