//! The probe behind `totem models --probe` and `provider.test {probe: true}`: each model is
//! asked a tiny scripted question set — a plain answer, one native tool call, the same call in
//! text form, a tool call in a streamed answer — and what it can do is saved as its settings
//! (`tools`, `stream`, `contextWindow`), so runs use the way that works with that server.
//!
//! The questions are few and short (answers capped at a few dozen tokens, temperature 0):
//! on a small local model the whole probe takes seconds, most of it the server reading its
//! first prompt.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use totem_protocol::{ModelProbe, ModelSettings, ToolMode};
use totem_provider::{
    ChatRequest, Completion, Message, ModelInfo, ProviderConfig, ProviderError, StreamEvent,
    ToolDefinition, TurnBuilder,
};

use super::{ConfigError, ProviderSettings, Settings};

/// Models probed when none is named: a server listing hundreds (OpenRouter) is not asked about
/// each of them.
const MAX_PROBED: usize = 8;
/// How long one question may take (a small machine reads a first prompt slowly).
const QUESTION_TIMEOUT: Duration = Duration::from_secs(180);
/// The output cap of every question.
const CAP: u32 = 48;
/// A prompt longer than any local window, sent only to local OpenAI-compatible servers that do
/// not list their window: they refuse it at once, saying how large the window is.
const OVERSIZED_CHARS: usize = 2_000_000;

/// The one tool the questions offer.
fn list_tool() -> ToolDefinition {
    ToolDefinition {
        name: "list".into(),
        description: "List the files in a folder of the project.".into(),
        parameters: json!({"type": "object", "required": ["path"],
            "properties": {"path": {"type": "string", "description": "The folder, relative to the project."}}}),
    }
}

const CALL_PROMPT: &str =
    "Call the list tool with path \".\" to see the files. Do not answer in words.";

/// One question's answer, with when its first output came.
struct Answer {
    completion: Result<Completion, ProviderError>,
    /// From the first output to the end.
    generating: Duration,
}

impl Answer {
    fn calls_list(&self) -> bool {
        self.completion
            .as_ref()
            .is_ok_and(|c| c.tool_calls().any(|call| call.name == "list"))
    }
}

/// Asks `request` of the model with its `stream` setting forced, without retries.
async fn ask(config: &ProviderConfig, stream: Option<bool>, request: ChatRequest) -> Answer {
    let mut config = config.clone();
    config.retry.max_retries = 0;
    config
        .models
        .entry(request.model.clone())
        .or_default()
        .stream = stream;
    let provider = match totem_provider::build(config) {
        Ok(provider) => provider,
        Err(e) => {
            return Answer {
                completion: Err(e),
                generating: Duration::ZERO,
            };
        }
    };
    let started = Instant::now();
    let mut first = None;
    let mut turn = TurnBuilder::new();
    let mut events = provider.stream(request);
    let read = tokio::time::timeout(QUESTION_TIMEOUT, async {
        while let Some(event) = events.next().await {
            let event = event?;
            if first.is_none()
                && matches!(
                    event,
                    StreamEvent::TextDelta { .. }
                        | StreamEvent::ReasoningDelta { .. }
                        | StreamEvent::ToolCall(_)
                )
            {
                first = Some(started.elapsed());
            }
            turn.push(event);
        }
        Ok::<(), ProviderError>(())
    })
    .await;
    let completion = match read {
        Ok(Ok(())) => Ok(turn.finish()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ProviderError::Config {
            provider: provider.config().name.clone(),
            message: format!("no answer within {} s", QUESTION_TIMEOUT.as_secs()),
        }),
    };
    Answer {
        completion,
        generating: first.map_or(Duration::ZERO, |f| started.elapsed().saturating_sub(f)),
    }
}

fn question(model: &str, system: &str, user: &str, tools: Vec<ToolDefinition>) -> ChatRequest {
    ChatRequest {
        model: model.to_owned(),
        system: Some(system.to_owned()),
        messages: vec![Message::user(user)],
        tools,
        max_output_tokens: Some(CAP),
        temperature: Some(0.0),
        ..ChatRequest::default()
    }
}

/// Whether `url` is this machine or a private network: only there is an oversized request sent.
pub fn is_local(url: &str) -> bool {
    let host = url
        .split("://")
        .nth(1)
        .unwrap_or(url)
        .split(['/', ':'])
        .next()
        .unwrap_or_default();
    host == "localhost"
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| match ip {
            std::net::IpAddr::V4(v4) => v4.is_loopback() || v4.is_private(),
            std::net::IpAddr::V6(v6) => v6.is_loopback(),
        })
}

/// What the model did when its answer was held to a JSON schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// It called the tool.
    Called,
    /// The server took the schema, the model answered instead.
    NoCall,
    /// The server refused the schema.
    Refused,
}

/// Asks one model the questions. `known` is what the user had set for it.
async fn probe(
    config: &ProviderConfig,
    entry: &ProviderSettings,
    info: &ModelInfo,
    known: ModelSettings,
) -> ModelProbe {
    let model = info.id.as_str();
    let name = format!("{}/{model}", entry.name);
    let plain = ask(
        config,
        None,
        question(
            model,
            "You are a helpful assistant. Answer in a few words.",
            "Say hello.",
            vec![],
        ),
    )
    .await;
    let answers = plain
        .completion
        .as_ref()
        .is_ok_and(|c| !c.text().trim().is_empty());
    let tokens_per_second = plain.completion.as_ref().ok().and_then(|c| {
        let tokens = c
            .usage
            .map(|u| u.output_tokens)
            .filter(|n| *n > 0)
            // Servers that report no usage in a stream: about four characters a token.
            .unwrap_or_else(|| c.text().len().div_ceil(4) as u64);
        let secs = plain.generating.as_secs_f64();
        (tokens > 1 && secs > 0.0).then(|| ((tokens as f64 - 1.0) / secs * 10.0).round() / 10.0)
    });
    if let Err(e) = &plain.completion {
        return ModelProbe {
            name,
            answers: false,
            native_tools: false,
            text_tools: false,
            streams_tool_calls: None,
            context_window: info.context_window,
            tokens_per_second: None,
            constrained: None,
            temperature: None,
            settings: known,
            message: format!("it did not answer a plain question: {e}"),
        };
    }

    let system = "You are a coding assistant with tools.";
    let native = ask(
        config,
        Some(false),
        question(model, system, CALL_PROMPT, vec![list_tool()]),
    )
    .await;
    let native_tools = native.calls_list();
    let streams_tool_calls = if native_tools {
        let streamed = ask(
            config,
            Some(true),
            question(model, system, CALL_PROMPT, vec![list_tool()]),
        )
        .await;
        Some(streamed.calls_list())
    } else {
        None
    };
    let tool = list_tool();
    let text_system = format!(
        "{system}\n\n{}",
        totem_tools::recover::text_tools_prompt(
            [(
                tool.name.as_str(),
                &tool.parameters,
                tool.description.as_str()
            )],
            false,
            false
        )
    );
    let text = ask(
        config,
        None,
        question(model, &text_system, CALL_PROMPT, vec![]),
    )
    .await;
    let text_tools = text
        .completion
        .as_ref()
        .is_ok_and(|c| !totem_tools::recover::calls_from_text(&c.text(), &["list"]).is_empty());
    // Without native calls: the same question with the answer held to a JSON schema (one call
    // of the tool, or a final answer), as runs ask it.
    let schema_kind = matches!(
        entry.kind,
        totem_protocol::ProviderKind::Openai | totem_protocol::ProviderKind::Ollama
    );
    let constrained = if native_tools || !schema_kind || known.constrained == Some(false) {
        None
    } else {
        let constrained_system = format!(
            "{system}\n\n{}",
            totem_tools::recover::text_tools_prompt(
                [(
                    tool.name.as_str(),
                    &tool.parameters,
                    tool.description.as_str()
                )],
                true,
                false
            )
        );
        let mut request = question(model, &constrained_system, CALL_PROMPT, vec![]);
        request.answer_schema = Some(totem_tools::recover::answer_schema(
            [(tool.name.as_str(), &tool.parameters)],
            true,
            false,
        ));
        match ask(config, None, request).await.completion {
            Ok(c) if !totem_tools::recover::calls_from_text(&c.text(), &["list"]).is_empty() => {
                Some(Held::Called)
            }
            Ok(_) => Some(Held::NoCall),
            Err(ProviderError::InvalidRequest { .. }) => Some(Held::Refused),
            Err(_) => None,
        }
    };

    let mut context_window = info.context_window;
    if context_window.is_none()
        && entry.kind == totem_protocol::ProviderKind::Openai
        && is_local(&entry.url)
    {
        let huge = "a ".repeat(OVERSIZED_CHARS / 2);
        let mut request = question(model, system, &huge, vec![]);
        request.max_output_tokens = Some(1);
        if let Err(ProviderError::ContextOverflow {
            limit: Some(limit), ..
        }) = ask(config, Some(false), request).await.completion
        {
            context_window = Some(limit);
        }
    }

    let tools = if native_tools {
        ToolMode::Native
    } else if text_tools || constrained == Some(Held::Called) {
        ToolMode::Text
    } else {
        ToolMode::None
    };
    let settings = ModelSettings {
        tools: Some(tools),
        // A server that cannot stream tool calls is not asked to stream at all: a run's every
        // step may call a tool.
        stream: match streams_tool_calls {
            Some(false) => Some(false),
            _ => known.stream.filter(|s| !s),
        },
        context_window: known
            .context_window
            .or(context_window.filter(|_| info.context_window.is_none())),
        // A server that refused the schema is not asked again with one.
        constrained: if constrained == Some(Held::Refused) {
            Some(false)
        } else {
            known.constrained
        },
        tokens_per_second: tokens_per_second.or(known.tokens_per_second),
        ..known
    };
    let message = match (tools, constrained) {
        (ToolMode::Native, _) if streams_tool_calls == Some(false) => {
            "calls tools natively, but not in a streamed answer: Totem will not ask it to stream".to_string()
        }
        (ToolMode::Native, _) => "calls tools natively".to_string(),
        (ToolMode::Text, Some(Held::Called)) if text_tools => "the server returned no tool calls, but the model writes calls as text; Totem will constrain its answers (the server holds each one to a call of a tool or a final answer)".to_string(),
        (ToolMode::Text, Some(Held::Called)) => "the server returned no tool calls and the model wrote none on its own, but it called the tool when its answer was held to a JSON schema: Totem will constrain its answers".to_string(),
        (ToolMode::Text, Some(Held::Refused)) => "the server returned no tool calls, but the model writes calls as text; the server does not take a JSON schema, so Totem will read the calls from the model's text".to_string(),
        (ToolMode::Text, _) => "the server returned no tool calls, but the model writes calls as text: Totem will describe the tools in the prompt and read the calls from its text".to_string(),
        (_, _) => "called no tool, natively or in text: it can chat but not edit; pick a larger model, or a server template with tool calls (llama.cpp: --jinja; llama-cpp-python: --chat_format chatml-function-calling)".to_string(),
    };
    let config_temperature = config.model(model).temperature.or(config.temperature);
    let temperature = config_temperature
        .or_else(|| is_local(&entry.url).then_some(crate::agent::settings::LOCAL_TEMPERATURE));
    let message = match temperature {
        Some(t) => format!("{message}; runs use temperature {t} (the probe asks at 0)"),
        None => {
            format!("{message}; runs use the server's default temperature (the probe asks at 0)")
        }
    };
    ModelProbe {
        name,
        answers,
        native_tools,
        text_tools,
        streams_tool_calls,
        context_window,
        tokens_per_second,
        constrained: constrained.map(|c| c == Held::Called),
        temperature,
        settings,
        message,
    }
}

impl Settings {
    /// Probes the models of `entry` among `models` (only `model` when named) one after the
    /// other, and saves each one's findings as its settings.
    pub(super) async fn probe_models(
        &self,
        entry: &ProviderSettings,
        implicit: bool,
        models: &[ModelInfo],
        model: Option<&str>,
    ) -> Result<Vec<ModelProbe>, ConfigError> {
        let chosen: Vec<&ModelInfo> = match model {
            Some(id) => {
                let found = models.iter().find(|m| m.id == id).ok_or_else(|| {
                    ConfigError::BadRequest(format!(
                        "{} lists no model {id}; see `totem models --provider {}`",
                        entry.name, entry.name
                    ))
                })?;
                vec![found]
            }
            None => models.iter().take(MAX_PROBED).collect(),
        };
        let config = self.provider_config(entry)?;
        let mut probes = Vec::with_capacity(chosen.len());
        for info in chosen {
            let known = entry.models.get(&info.id).cloned().unwrap_or_default();
            let mut found = probe(&config, entry, info, known).await;
            if implicit {
                found.message.push_str(
                    "; not saved: add the server with `totem provider add` to keep what the probe found",
                );
            } else if found.answers {
                self.save_model_settings(&entry.name, &info.id, found.settings.clone())?;
            }
            probes.push(found);
        }
        Ok(probes)
    }

    /// Writes one model's settings under its provider in settings.json.
    fn save_model_settings(
        &self,
        provider: &str,
        model: &str,
        settings: ModelSettings,
    ) -> Result<(), ConfigError> {
        let _writing = crate::util::lock(&self.writing);
        self.update(|file| {
            let entry = file
                .providers
                .iter_mut()
                .find(|p| p.name == provider)
                .ok_or_else(|| ConfigError::NoProvider(provider.to_owned()))?;
            entry.models.insert(model.to_owned(), settings);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::is_local;

    #[test]
    fn only_local_servers_get_the_oversized_request() {
        assert!(is_local("http://127.0.0.1:8080/v1"));
        assert!(is_local("http://localhost:1234/v1"));
        assert!(is_local("http://192.168.1.20:8080/v1"));
        assert!(!is_local("https://openrouter.ai/api/v1"));
        assert!(!is_local("http://8.8.8.8/v1"));
    }
}
