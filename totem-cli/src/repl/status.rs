//! Where the person stands: the line by the prompt naming the mode, model, reasoning, context use
//! and cost, and the model names `/model` takes (resolved against `model.list` before any prompt
//! goes out, so a wrong name is refused at once and nothing else is lost).

use std::time::Duration;

use totem_protocol::{ModelEntry, ModelList, ModelListParams, method};

use super::Repl;
use crate::render::tokens;

/// The mode a prompt runs in when none is chosen (totemd's default).
pub const DEFAULT_MODE: &str = "build";

/// `model.list`, or None when it fails or the providers take longer than `wait` to answer.
pub async fn fetch_models(client: totem_client::Client, wait: Duration) -> Option<ModelList> {
    let call = client.call::<method::ModelList>(ModelListParams { provider: None });
    tokio::time::timeout(wait, call).await.ok()?.ok()
}

/// One line, said as the prompt first shows, when no model answers: a first prompt would fail
/// for a reason known now.
pub fn no_model_line(list: &ModelList) -> Option<String> {
    if !list.models.is_empty() {
        return None;
    }
    let names: Vec<&str> = list.errors.iter().map(|e| e.provider.as_str()).collect();
    let why = match names.as_slice() {
        [] => "the providers list none".to_string(),
        many => format!("{} cannot be reached", many.join(", ")),
    };
    Some(format!(
        "No model answers yet: {why}. Start the server, or add one with `totem provider add`; `totem doctor` says more."
    ))
}

/// The full name (`provider/model`) that `name` stands for: itself, or the one model of any
/// provider whose own id it is. Else why not, with the closest names.
pub fn resolve_model(list: &ModelList, name: &str) -> Result<String, String> {
    if list.models.iter().any(|m| m.name == name) {
        return Ok(name.to_string());
    }
    let suffix = format!("/{name}");
    let matches: Vec<&ModelEntry> = list
        .models
        .iter()
        .filter(|m| m.id == name || m.name.ends_with(&suffix))
        .collect();
    match matches.as_slice() {
        [one] => return Ok(one.name.clone()),
        [_, _, ..] => {
            let names: Vec<&str> = matches.iter().map(|m| m.name.as_str()).collect();
            return Err(format!(
                "{name} is offered by several providers ({}): choose one with /model PROVIDER/{name}",
                names.join(", ")
            ));
        }
        [] => {}
    }
    let mut ranked: Vec<(usize, &str)> = list
        .models
        .iter()
        .map(|m| {
            let distance = edit_distance(name, &m.id).min(edit_distance(name, &m.name));
            (distance, m.name.as_str())
        })
        .collect();
    ranked.sort();
    let closest: Vec<&str> = ranked.iter().take(3).map(|(_, n)| *n).collect();
    Err(match closest.is_empty() {
        true => format!("no model {name}: no provider lists any. `totem doctor` says why"),
        false => format!(
            "no model {name}; the closest: {}. /model lists them all",
            closest.join(", ")
        ),
    })
}

/// Levenshtein distance, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

impl Repl<'_> {
    /// The model the next prompt uses: the chosen one, else the daemon's default.
    pub(super) fn current_model(&self) -> Option<String> {
        self.settings
            .model
            .clone()
            .or_else(|| self.models.as_ref()?.default_model.clone())
    }

    /// The model list's entry for the model the next prompt uses.
    pub(super) fn current_entry(&self) -> Option<&ModelEntry> {
        let name = self.current_model()?;
        self.models.as_ref()?.models.iter().find(|m| m.name == name)
    }

    /// `build · ollama/qwen3:8b · reasoning default · context 1.2k/32.8k · $0.0042`.
    pub(super) fn where_line(&self) -> String {
        let mode = self.settings.mode.as_deref().unwrap_or(DEFAULT_MODE);
        let model = self
            .current_model()
            .unwrap_or_else(|| "no model yet".to_string());
        let reasoning = self.settings.reasoning.as_deref().unwrap_or("default");
        let mut line = format!("{mode} · {model} · reasoning {reasoning}");
        let window = self.current_entry().and_then(|m| m.context_window);
        match (self.context, window) {
            (Some((used, window)), _) => {
                line.push_str(&format!(" · context {}/{}", tokens(used), tokens(window)))
            }
            (None, Some(window)) => line.push_str(&format!(" · context 0/{}", tokens(window))),
            (None, None) => {}
        }
        let cost = self.cost.or_else(|| self.session.usage.as_ref()?.cost_usd);
        if let Some(cost) = cost {
            line.push_str(&format!(" · ${cost:.4}"));
        }
        line
    }

    /// Prints the line by the prompt.
    pub(super) fn show_where(&mut self) {
        let line = self.where_line();
        self.note(&format!("◆ {line}"));
    }

    /// The models as the daemon lists them now; the last list when it does not answer in time.
    pub(super) async fn fresh_models(&mut self) -> Option<&ModelList> {
        let client = self.connection.client.clone();
        if let Some(list) = fetch_models(client, Duration::from_secs(5)).await {
            self.models = Some(list);
        }
        self.models.as_ref()
    }

    /// The models, asked again when none are known yet.
    pub(super) async fn models(&mut self) -> Option<&ModelList> {
        if self.models.as_ref().is_none_or(|l| l.models.is_empty()) {
            let client = self.connection.client.clone();
            if let Some(list) = fetch_models(client, Duration::from_secs(5)).await {
                self.models = Some(list);
            }
        }
        self.models.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use totem_protocol::ModelCapabilities;

    fn entry(name: &str) -> ModelEntry {
        let (provider, id) = name.split_once('/').unwrap_or(("", name));
        ModelEntry {
            name: name.into(),
            provider: provider.into(),
            id: id.into(),
            display_name: None,
            context_window: None,
            max_output_tokens: None,
            capabilities: ModelCapabilities::default(),
            prices: None,
            settings: None,
        }
    }

    #[test]
    fn a_bare_model_id_resolves_when_one_provider_has_it() {
        let list = ModelList {
            models: vec![
                entry("sim/llama3.2:latest"),
                entry("sim/qwen-sim:latest"),
                entry("other/llama3.2:latest"),
            ],
            errors: vec![],
            default_model: None,
        };
        assert_eq!(
            resolve_model(&list, "qwen-sim:latest"),
            Ok("sim/qwen-sim:latest".into())
        );
        assert_eq!(
            resolve_model(&list, "sim/llama3.2:latest"),
            Ok("sim/llama3.2:latest".into())
        );
        let twice = resolve_model(&list, "llama3.2:latest").unwrap_err();
        assert!(twice.contains("several providers"), "{twice}");
        let none = resolve_model(&list, "qwen-sim").unwrap_err();
        assert!(
            none.starts_with("no model qwen-sim; the closest: sim/qwen-sim:latest"),
            "{none}"
        );
    }
}
