//! Every way a provider call can fail, typed so the run loop can decide: retry, compact, or tell
//! the user. Each variant keeps the provider's own message.

use std::time::Duration;

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// Opening the TCP/TLS connection.
    Connect,
    /// Waiting for the response headers.
    Response,
    /// Waiting for the next chunk of a streaming body.
    BetweenChunks,
}

impl std::fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeoutPhase::Connect => "connecting",
            TimeoutPhase::Response => "waiting for the response",
            TimeoutPhase::BetweenChunks => "waiting for the next chunk of the stream",
        })
    }
}

/// A failed provider call. In every variant `provider` is the configured provider name,
/// `message` the provider's own words where it gave any, `status` the HTTP status and
/// `retry_after` the wait the server asked for.
// The fields are the ones named above; a line on each of them would say it again.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The server could not be reached at `url`.
    #[error("cannot reach provider {provider} at {url}: {message}; is the server running?")]
    Connect {
        provider: String,
        url: String,
        message: String,
    },
    /// No answer within `after` while waiting in `phase`.
    #[error("provider {provider} timed out after {after:?} {phase}")]
    Timeout {
        provider: String,
        phase: TimeoutPhase,
        after: Duration,
    },
    /// Too many requests: retried after the wait.
    #[error("provider {provider} is rate limiting (HTTP {status}): {message}")]
    RateLimited {
        provider: String,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// The server is busy: retried after the wait.
    #[error("provider {provider} is overloaded (HTTP {status}): {message}")]
    Overloaded {
        provider: String,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// The server failed on its side (HTTP 5xx).
    #[error("provider {provider} had a server error (HTTP {status}): {message}")]
    Server {
        provider: String,
        status: u16,
        message: String,
    },
    /// The API key is missing, wrong or not allowed this model.
    #[error(
        "provider {provider} refused the credentials (HTTP {status}): {message}; check its API key"
    )]
    Auth {
        provider: String,
        status: u16,
        message: String,
    },
    /// The account cannot pay for the request.
    #[error("provider {provider} refused payment (HTTP {status}): {message}")]
    Billing {
        provider: String,
        status: u16,
        message: String,
    },
    /// The provider has no model of that id.
    #[error("provider {provider} does not know model {model}: {message}")]
    ModelNotFound {
        provider: String,
        model: String,
        message: String,
    },
    /// The request does not fit the model's context: compact the conversation and try again.
    /// `needed`/`limit` are token counts where known (always set by Ollama's `num_ctx` sizing).
    #[error("the request does not fit the context window of provider {provider}: {message}")]
    ContextOverflow {
        provider: String,
        message: String,
        needed: Option<u64>,
        limit: Option<u64>,
    },
    /// The provider refused the request as malformed or unsupported (HTTP 4xx).
    #[error("provider {provider} rejected the request (HTTP {status}): {message}")]
    InvalidRequest {
        provider: String,
        status: u16,
        message: String,
    },
    /// The provider reported an error inside a stream that had started.
    #[error("provider {provider} reported an error mid-stream: {message}")]
    Stream {
        provider: String,
        /// The provider's error type or code, when it gave one (`overloaded_error`, `500`…).
        code: Option<String>,
        message: String,
    },
    /// The connection closed before the answer was complete.
    #[error("the stream from provider {provider} broke before the answer was complete: {message}")]
    StreamBroken { provider: String, message: String },
    /// The server cannot stream this request (it sent an empty stream, or said so): ask again
    /// without streaming.
    #[error("provider {provider} cannot stream this answer: {message}")]
    CannotStream { provider: String, message: String },
    /// A chunk could not be understood.
    #[error("provider {provider} sent a malformed chunk: {message}")]
    Malformed { provider: String, message: String },
    /// The provider refused the prompt itself (Gemini `promptFeedback.blockReason`).
    #[error("provider {provider} blocked the prompt ({reason}); rephrase it, or try another model")]
    Blocked { provider: String, reason: String },
    /// Something is wrong in Totem's configuration for this provider.
    #[error("provider {provider} is misconfigured: {message}")]
    Config { provider: String, message: String },
}

impl ProviderError {
    /// Worth retrying with backoff, provided nothing has been streamed yet.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Connect { .. }
            | ProviderError::Timeout { .. }
            | ProviderError::RateLimited { .. }
            | ProviderError::Overloaded { .. }
            | ProviderError::Server { .. }
            | ProviderError::StreamBroken { .. }
            | ProviderError::Malformed { .. } => true,
            ProviderError::Stream { code, .. } => code.as_deref().is_some_and(is_transient_code),
            _ => false,
        }
    }

    /// The wait the provider asked for before the next attempt.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::RateLimited { retry_after, .. }
            | ProviderError::Overloaded { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The configured name of the provider that failed.
    pub fn provider(&self) -> &str {
        match self {
            ProviderError::Connect { provider, .. }
            | ProviderError::Timeout { provider, .. }
            | ProviderError::RateLimited { provider, .. }
            | ProviderError::Overloaded { provider, .. }
            | ProviderError::Server { provider, .. }
            | ProviderError::Auth { provider, .. }
            | ProviderError::Billing { provider, .. }
            | ProviderError::ModelNotFound { provider, .. }
            | ProviderError::ContextOverflow { provider, .. }
            | ProviderError::InvalidRequest { provider, .. }
            | ProviderError::Stream { provider, .. }
            | ProviderError::StreamBroken { provider, .. }
            | ProviderError::Malformed { provider, .. }
            | ProviderError::CannotStream { provider, .. }
            | ProviderError::Blocked { provider, .. }
            | ProviderError::Config { provider, .. } => provider,
        }
    }

    /// The HTTP status the provider answered with, when the failure was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ProviderError::RateLimited { status, .. }
            | ProviderError::Overloaded { status, .. }
            | ProviderError::Server { status, .. }
            | ProviderError::Auth { status, .. }
            | ProviderError::Billing { status, .. }
            | ProviderError::InvalidRequest { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// What went wrong in a few words, for a notice ("is overloaded", "timed out").
    pub fn short_reason(&self) -> String {
        match self {
            ProviderError::Connect { .. } => "cannot be reached".into(),
            ProviderError::Timeout { phase, .. } => format!("timed out {phase}"),
            ProviderError::RateLimited { .. } => "is rate limiting".into(),
            ProviderError::Overloaded { .. } => "is overloaded".into(),
            ProviderError::Server { .. } => "had a server error".into(),
            ProviderError::Stream { message, .. } => format!("reported an error: {message}"),
            ProviderError::StreamBroken { .. } => "broke the stream before any output".into(),
            ProviderError::Malformed { .. } => "sent a malformed chunk".into(),
            other => other.to_string(),
        }
    }

    /// The same error, saying how long the provider asked to wait before the next try.
    pub(crate) fn with_wait_note(self, wait: Duration) -> Self {
        let note = |message: String| {
            format!(
                "{message}; the server asked to wait {} before trying again",
                describe_wait(wait)
            )
        };
        match self {
            ProviderError::RateLimited {
                provider,
                status,
                message,
                retry_after,
            } => ProviderError::RateLimited {
                provider,
                status,
                message: note(message),
                retry_after,
            },
            ProviderError::Overloaded {
                provider,
                status,
                message,
                retry_after,
            } => ProviderError::Overloaded {
                provider,
                status,
                message: note(message),
                retry_after,
            },
            other => other,
        }
    }

    /// True when the conversation should be compacted before another try.
    pub fn is_context_overflow(&self) -> bool {
        matches!(self, ProviderError::ContextOverflow { .. })
    }
}

/// A wait in words: "45 s", "2 min", "1 h 30 min".
fn describe_wait(wait: Duration) -> String {
    let secs = wait.as_secs_f64().ceil() as u64;
    match secs {
        0..=119 => format!("{secs} s"),
        120..=3599 => format!("{} min", secs.div_ceil(60)),
        _ => match (secs / 3600, (secs % 3600) / 60) {
            (h, 0) => format!("{h} h"),
            (h, m) => format!("{h} h {m} min"),
        },
    }
}

/// Error codes a provider uses mid-stream for a failure that a new attempt may not meet.
fn is_transient_code(code: &str) -> bool {
    matches!(
        code,
        "overloaded_error"
            | "api_error"
            | "rate_limit_error"
            | "timeout_error"
            | "server_error"
            | "internal_error"
            | "UNAVAILABLE"
            | "INTERNAL"
            | "RESOURCE_EXHAUSTED"
            | "DEADLINE_EXCEEDED"
            | "429"
            | "500"
            | "502"
            | "503"
            | "504"
            | "529"
    )
}

/// Words providers use for an over-long prompt, across dialects.
pub(crate) fn looks_like_context_overflow(code: Option<&str>, message: &str) -> bool {
    if matches!(
        code,
        Some("context_length_exceeded" | "exceed_context_size_error")
    ) {
        return true;
    }
    let lower = message.to_ascii_lowercase();
    lower.contains("prompt is too long")
        || lower.contains("context length")
        || lower.contains("context_length")
        || lower.contains("context size")
        || lower.contains("context window")
        || lower.contains("maximum context")
        || (lower.contains("input token count") && lower.contains("exceeds"))
        || lower.contains("too many tokens")
}

/// Words servers use to refuse streaming a request (llama.cpp's "Cannot use tools with stream",
/// llama-cpp-python's "Automatic streaming tool choice is not supported").
pub(crate) fn looks_like_no_streaming(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    (lower.contains("stream") || lower.contains("streaming"))
        && (lower.contains("not supported")
            || lower.contains("unsupported")
            || lower.contains("cannot use")
            || lower.contains("does not support"))
}

/// A request validation error (pydantic's, as FastAPI-based servers report them), which no
/// retry can fix.
fn looks_like_validation_error(message: &str) -> bool {
    message.contains("validation error")
        || (message.contains("'loc'") && message.contains("'msg'"))
        || message.contains("Input should be")
}

/// A context overflow with the window the server really has (`limit`) and what the request
/// needed, where its error says: llama.cpp's `n_ctx`/`n_prompt_tokens` fields, or the words of
/// OpenAI, vLLM, OpenRouter and LM Studio ("maximum context length is 8192 tokens… you
/// requested 9000 tokens", "loaded with context length of only 4096 tokens").
pub(crate) fn with_context_counts(error: ProviderError, body: &[u8]) -> ProviderError {
    let ProviderError::ContextOverflow {
        provider,
        message,
        needed,
        limit,
    } = error
    else {
        return error;
    };
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let fields = &value["error"];
    let lower = message.to_ascii_lowercase();
    let limit = limit
        .or_else(|| fields["n_ctx"].as_u64())
        .or_else(|| number_after(&lower, "maximum context length is "))
        .or_else(|| number_after(&lower, "context length of only "))
        .or_else(|| number_after(&lower, "context window of "));
    let needed = needed
        .or_else(|| fields["n_prompt_tokens"].as_u64())
        .or_else(|| number_after(&lower, "you requested "))
        .or_else(|| number_after(&lower, "resulted in "));
    ProviderError::ContextOverflow {
        provider,
        message,
        needed,
        limit,
    }
}

/// The number right after `words` in `text` (`8192` in "…length is 8192 tokens"), commas allowed.
fn number_after(text: &str, words: &str) -> Option<u64> {
    let rest = &text[text.find(words)? + words.len()..];
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// One line for a body that is an HTML page (a proxy's sign-in page, nginx's 502): its title,
/// or that it is a page. `None` for anything else.
pub(crate) fn html_page(text: &str) -> Option<String> {
    let head: String = text
        .chars()
        .take(512)
        .collect::<String>()
        .to_ascii_lowercase();
    if !(head.starts_with("<!doctype html") || head.starts_with("<html") || head.contains("<html"))
    {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let title = lower
        .find("<title")
        .and_then(|start| Some(start + lower[start..].find('>')? + 1))
        .and_then(|from| Some((from, from + lower[from..].find("</title")?)))
        .and_then(|(from, to)| text.get(from..to))
        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|t| !t.is_empty());
    Some(match title {
        Some(title) => {
            let title: String = title.chars().take(120).collect();
            format!("the server answered with an HTML page titled \"{title}\", not the API (a proxy or sign-in page in the way?)")
        }
        None => "the server answered with an HTML page, not the API (a proxy or sign-in page in the way?)".into(),
    })
}

/// Maps an HTTP error status and the provider's message to a typed error.
pub(crate) fn from_status(
    provider: &str,
    model: &str,
    status: u16,
    code: Option<&str>,
    message: String,
    retry_after: Option<Duration>,
) -> ProviderError {
    let provider = provider.to_owned();
    // OpenAI's 429 `insufficient_quota` is the bill, not the rate: waiting will not help.
    if status == 429
        && (code == Some("insufficient_quota") || message.contains("exceeded your current quota"))
    {
        return ProviderError::Billing {
            provider,
            status,
            message: format!(
                "{message} (the account is out of credit: this is billing, not rate limiting; add credit or use another key)"
            ),
        };
    }
    // Ollama cannot load the model in the memory it has: each retry would load it again.
    if message.contains("requires more system memory") {
        return ProviderError::InvalidRequest {
            provider,
            status,
            message: format!(
                "{message}; pick a smaller model, or a smaller num_ctx in the provider's Ollama settings"
            ),
        };
    }
    // Anthropic's 413 `request_too_large`: shortening the conversation is what fixes it.
    if status == 413 {
        return ProviderError::ContextOverflow {
            provider,
            message,
            needed: None,
            limit: None,
        };
    }
    if looks_like_no_streaming(&message) && (status == 400 || status >= 500) {
        return ProviderError::CannotStream { provider, message };
    }
    // A request the server's own validation refused fails the same way every time, whatever
    // status it comes with (llama-cpp-python answers 500): retrying only makes the user wait.
    if status >= 500 && looks_like_validation_error(&message) {
        return ProviderError::InvalidRequest {
            provider,
            status,
            message,
        };
    }
    if looks_like_context_overflow(code, &message)
        && (status == 400 || status == 413 || status >= 500)
    {
        return ProviderError::ContextOverflow {
            provider,
            message,
            needed: None,
            limit: None,
        };
    }
    match status {
        401 | 403 => ProviderError::Auth {
            provider,
            status,
            message,
        },
        402 => ProviderError::Billing {
            provider,
            status,
            message,
        },
        404 => ProviderError::ModelNotFound {
            provider,
            model: model.to_owned(),
            message,
        },
        429 => ProviderError::RateLimited {
            provider,
            status,
            message,
            retry_after,
        },
        503 | 529 => ProviderError::Overloaded {
            provider,
            status,
            message,
            retry_after,
        },
        s if s >= 500 => ProviderError::Server {
            provider,
            status,
            message,
        },
        _ => ProviderError::InvalidRequest {
            provider,
            status,
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overflow(message: &str) -> ProviderError {
        ProviderError::ContextOverflow {
            provider: "p".into(),
            message: message.into(),
            needed: None,
            limit: None,
        }
    }

    fn counts(error: ProviderError) -> (Option<u64>, Option<u64>) {
        match error {
            ProviderError::ContextOverflow { needed, limit, .. } => (needed, limit),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn context_errors_tell_the_real_window() {
        let llamacpp = br#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}"#;
        assert_eq!(
            counts(with_context_counts(
                overflow("the request exceeds the available context size, try increasing it"),
                llamacpp
            )),
            (Some(14429), Some(8192))
        );
        let vllm = "This model's maximum context length is 8192 tokens. However, you requested 9,000 tokens (8000 in the messages, 1000 in the completion).";
        assert_eq!(
            counts(with_context_counts(overflow(vllm), b"")),
            (Some(9000), Some(8192))
        );
        let lmstudio = "Trying to keep the first 5000 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough.";
        assert_eq!(
            counts(with_context_counts(overflow(lmstudio), b"")),
            (None, Some(4096))
        );
        assert_eq!(
            counts(with_context_counts(overflow("prompt is too long"), b"")),
            (None, None)
        );
        let other = ProviderError::Config {
            provider: "p".into(),
            message: "x".into(),
        };
        assert_eq!(with_context_counts(other.clone(), b""), other);
    }

    #[test]
    fn long_waits_are_said_in_words() {
        assert_eq!(describe_wait(Duration::from_secs(45)), "45 s");
        assert_eq!(describe_wait(Duration::from_secs(600)), "10 min");
        assert_eq!(describe_wait(Duration::from_secs(3600)), "1 h");
        assert_eq!(describe_wait(Duration::from_secs(5400)), "1 h 30 min");
    }
}
