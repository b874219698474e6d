//! A model-written title for a session (`titleModel`). A session is titled from its first prompt
//! at once (`title_from_prompt`); after its first answer, when a title model is configured, that
//! model is asked for a short title on the side. The run never waits for it: it has ended when
//! this starts, and a failure only leaves the prompt's title in place (logged). A title someone
//! gave the session meanwhile wins.

use std::sync::Arc;
use std::time::Duration;

use totem_protocol::{Part, Role};
use totem_provider::{ChatRequest, Message as ModelMessage};

use super::settings::provider_for;
use super::title_from_prompt;
use crate::daemon::Daemon;

/// How much of the prompt and of the answer the title model reads, in characters.
const EXCERPT_CHARS: usize = 1_500;
/// The title model's whole answer, in tokens: a few words (a thinking model needs room first).
const TITLE_TOKENS: u32 = 256;
/// Longer than this and the title is given up.
const TIMEOUT: Duration = Duration::from_secs(60);

const TITLE_PROMPT: &str = "You name coding sessions. Read the request and the answer below and reply with a title of at most six words that says what the session is about. Reply with the title only: no quotes, no full stop, no other words.";

/// Asks the title model for a title after a session's first answer, on the side. Does nothing
/// without `titleModel`, or when the session's title is no longer the one its prompt gave it
/// (a later run, a title given at creation, a rename).
pub fn after_first_answer(daemon: &Arc<Daemon>, session_id: &str, prompt: &str) {
    let Some(model) = daemon.settings.current().title_model.clone() else {
        return;
    };
    let Some(from_prompt) = title_from_prompt(prompt) else {
        return;
    };
    if daemon
        .sessions
        .snapshot(session_id)
        .map_or(true, |s| s.title != from_prompt)
    {
        return;
    }
    let daemon = daemon.clone();
    let session_id = session_id.to_string();
    let prompt = prompt.to_string();
    tokio::spawn(async move {
        let written =
            tokio::time::timeout(TIMEOUT, write_title(&daemon, &model, &session_id, &prompt));
        let title = match written.await {
            Ok(Ok(title)) => title,
            Ok(Err(e)) => {
                tracing::info!(session = %session_id, model = %model, error = %e, "no model-written title");
                return;
            }
            Err(_) => {
                tracing::info!(session = %session_id, model = %model, "no model-written title: the model took over a minute");
                return;
            }
        };
        if let Err(e) = daemon.sessions.retitle(&session_id, &from_prompt, title) {
            tracing::warn!(session = %session_id, error = %e, "cannot title the session");
        }
    });
}

/// The title model's title for the session's first prompt and answer.
async fn write_title(
    daemon: &Daemon,
    model: &str,
    session_id: &str,
    prompt: &str,
) -> Result<String, String> {
    let answer = first_answer(daemon, session_id);
    let resolved = provider_for(daemon, Some(model)).await?;
    let request = ChatRequest {
        model: resolved.model.clone(),
        system: Some(TITLE_PROMPT.to_string()),
        messages: vec![ModelMessage::user(format!(
            "Request:\n{}\n\nAnswer:\n{}",
            excerpt(prompt),
            excerpt(&answer)
        ))],
        max_output_tokens: Some(TITLE_TOKENS),
        ..ChatRequest::default()
    };
    let completion = resolved
        .provider
        .complete(request)
        .await
        .map_err(|e| e.to_string())?;
    clean_title(&completion.text()).ok_or_else(|| "the model gave no title".to_string())
}

/// The text of the session's first answer (empty when there is none).
fn first_answer(daemon: &Daemon, session_id: &str) -> String {
    let Ok((messages, _)) = daemon.store().messages_after(session_id, 0, 16) else {
        return String::new();
    };
    messages
        .iter()
        .find(|m| m.role == Role::Assistant && !Part::joined_text(&m.parts).trim().is_empty())
        .map(|m| Part::joined_text(&m.parts))
        .unwrap_or_default()
}

fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A title from what the model wrote: its first line with words after any thinking, without
/// quotes, Markdown marks, a `Title:` label or a full stop, cut like a prompt's title.
fn clean_title(text: &str) -> Option<String> {
    let text = text
        .rsplit_once("</think>")
        .map_or(text, |(_, after)| after);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '*' | '#' | '“' | '”'));
    let line = line
        .strip_prefix("Title:")
        .or_else(|| line.strip_prefix("title:"))
        .unwrap_or(line)
        .trim()
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '*' | '“' | '”'))
        .trim_end_matches('.');
    title_from_prompt(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_the_first_line_without_quotes_labels_or_thinking() {
        assert_eq!(
            clean_title("\"Fix the login page.\"").as_deref(),
            Some("Fix the login page")
        );
        assert_eq!(
            clean_title("<think>they want a title</think>\n\n**Title:** Lighthouse facts\nMore")
                .as_deref(),
            Some("Lighthouse facts")
        );
        assert_eq!(clean_title("  \n\n"), None);
        assert_eq!(clean_title("\"\""), None);
        let long = "word ".repeat(40);
        assert!(clean_title(&long).is_some_and(|t| t.chars().count() <= 61));
    }

    #[test]
    fn excerpts_are_cut_at_a_char_boundary() {
        let text = "é".repeat(EXCERPT_CHARS + 10);
        let cut = excerpt(&text);
        assert_eq!(cut.chars().count(), EXCERPT_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(excerpt(" short "), "short");
    }
}
