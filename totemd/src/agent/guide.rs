//! What keeps a small model's constrained steps on the task: a change asked for is made before
//! the answer is offered, a repeated call is followed by a hotter step, and an existing file is
//! read before it is overwritten. Each rule comes from what Qwen2.5-Coder 0.5B and 1.5B did in
//! `bench-tasks` (BENCHMARKS.md, "Constrained steps").

use std::collections::HashSet;

/// Words that start a request to change the project ("Add a route…", "Fix it…").
const CHANGE_VERBS: &[&str] = &[
    "add",
    "append",
    "change",
    "convert",
    "correct",
    "create",
    "delete",
    "edit",
    "extract",
    "fix",
    "implement",
    "insert",
    "make",
    "modify",
    "move",
    "put",
    "refactor",
    "remove",
    "rename",
    "repair",
    "replace",
    "rewrite",
    "set",
    "update",
    "write",
];

/// Words that may come before the verb of a request ("Please add…", "Can you fix…").
const COURTESY: &[&str] = &[
    "please", "can", "could", "would", "will", "you", "now", "then", "also", "and", "just",
    "kindly", "so",
];

/// The tools whose success is a change of the project's files.
pub(super) const CHANGE_TOOLS: &[&str] = &["write", "edit", "patch", "multiedit"];

/// The tools that only look.
pub(super) const LOOK_TOOLS: &[&str] = &["read", "list", "grep", "glob"];

/// The tools that show only names: a question is not answered on them alone.
pub(super) const NAMES_ONLY: &[&str] = &["list", "glob"];

/// Calls after which a run asked for a change may answer without one (the change may be there
/// already, or impossible): a model is not held in a loop it cannot leave.
pub(super) const CALLS_BEFORE_UNCHANGED_ANSWER: usize = 6;

/// The temperature of the step after a repeated call. At the usual 0.2 a small model given the
/// same conversation writes the same call again (Qwen2.5-Coder 1.5B read a missing file four times
/// in a row, with "To create it, use write" in every result); llama.cpp's default is 0.8.
pub(super) const HOT_TEMPERATURE: f32 = 0.8;

/// Whether `prompt` asks for a change: one of its sentences starts with a verb of change, after
/// courtesy words. A question ("Which routes…?") or "Do not change any file" does not.
pub(super) fn asks_for_change(prompt: &str) -> bool {
    prompt
        .split(['!', '?', '\n', ';'])
        .flat_map(|part| part.split(". "))
        .any(|sentence| {
            sentence
                .split_whitespace()
                .map(|w| {
                    w.trim_matches(|c: char| !c.is_alphanumeric())
                        .to_lowercase()
                })
                .find(|w| !w.is_empty() && !COURTESY.contains(&w.as_str()))
                .is_some_and(|w| CHANGE_VERBS.contains(&w.as_str()))
        })
}

/// A path as the model wrote it, in one form: no `./`, no leading `/` (the project's root, as the
/// tools read it), no trailing `/`.
fn key(path: &str) -> String {
    let mut path = path.trim();
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    path.trim_start_matches('/')
        .trim_end_matches('/')
        .to_string()
}

/// The files a run has seen: read, written or edited with success.
#[derive(Debug, Default)]
pub(super) struct SeenFiles(HashSet<String>);

impl SeenFiles {
    /// Notes a successful call of `tool` on `path` (relative to the project's root).
    pub(super) fn record(&mut self, tool: &str, path: &str) {
        if tool == "read" || CHANGE_TOOLS.contains(&tool) {
            self.0.insert(key(path));
        }
    }

    /// The refusal of a `write` over `path`, a file that `exists` in the project but that this
    /// run has not seen: a small model overwrote a file it had never read with three lines of
    /// its own (Qwen2.5-Coder 1.5B, actions/products.js).
    pub(super) fn unseen_overwrite(&self, path: &str, exists: bool) -> Option<String> {
        let path = key(path);
        (exists && !self.0.contains(&path)).then(|| {
            format!(
                "{path} already exists and has not been read in this task: write would replace all of it. Read {path} first, then change the part that needs it with edit."
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_to_change_are_told_from_questions() {
        for prompt in [
            "Add a route GET /api/ping/ in controllers/default.js that answers the JSON {\"pong\": true}.",
            "Change the heading of the home page (views/index.html) from \"Acme Shop\" to \"Welcome\".",
            "The app crashes at start with a SyntaxError in controllers/default.js. Fix it without changing what the routes do.",
            "Please create a file notes.md",
            "can you rename index.js to main.js?",
        ] {
            assert!(asks_for_change(prompt), "{prompt}");
        }
        for prompt in [
            "Which routes does this app define? List each HTTP method and path. Do not change any file.",
            "What does controllers/default.js do?",
            "Explain how the products action works",
            "",
        ] {
            assert!(!asks_for_change(prompt), "{prompt}");
        }
    }

    #[test]
    fn an_existing_file_is_overwritten_only_once_seen() {
        let mut seen = SeenFiles::default();
        assert!(
            seen.unseen_overwrite("new.js", false).is_none(),
            "a new file"
        );
        let refusal = seen
            .unseen_overwrite("./actions/products.js", true)
            .expect("refused");
        assert!(
            refusal.starts_with("actions/products.js already exists"),
            "{refusal}"
        );
        seen.record("read", "actions/products.js");
        assert!(seen.unseen_overwrite("actions/products.js", true).is_none());
        seen.record("list", "views");
        assert!(
            seen.unseen_overwrite("views", true).is_some(),
            "a list is not a read"
        );
    }
}
