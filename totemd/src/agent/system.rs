//! The system prompt: a short base written for small models, the mode, the environment, the
//! project's instruction files and, in Total.js 5 projects, the primer (a small model has its
//! essentials in a few lines instead).
//!
//! Instruction files are `AGENTS.md` (or `CLAUDE.md` where a folder has no AGENTS.md): the root's
//! goes into the system prompt; those of folders the run touches, up to the root, are added to the
//! tool result that touched them, once per run. They are read only from inside the project root
//! (resolved, links included), never from outside it and never from a URL.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The prompt every mode starts with. Plain, direct, no padding: small models follow short
/// numbered-free rules better than long prose. The rules name only tools the run offers: told
/// "change files with edit or patch" with neither offered, the 0.5B rewrote the file unchanged.
fn base(offers: &dyn Fn(&str) -> bool) -> String {
    let named = |names: &[&'static str]| -> Vec<&'static str> {
        names.iter().copied().filter(|n| offers(n)).collect()
    };
    let mut rules = vec![
        "You are Totem, a coding agent working in the user's project through tools.\n\nRules:"
            .to_string(),
    ];
    let finders = named(&["grep", "glob", "list"]);
    rules.push(match finders.as_slice() {
        [] => "- Look before you change: read a file before changing it.".to_string(),
        _ => format!(
            "- Look before you change: read a file before changing it; find things with {}.",
            words(&finders)
        ),
    });
    rules.push(
        "- Keep changes small and focused on what the user asked. Follow the project's style."
            .to_string(),
    );
    let partial = named(&["edit", "patch"]);
    if !partial.is_empty() {
        rules.push(format!(
            "- Change files with {}; use write for new files or full rewrites.",
            words_or(&partial)
        ));
    } else if offers("write") {
        rules.push(
            "- Change a file with write: its whole new content, every line it keeps and your change."
                .to_string(),
        );
    }
    if offers("bash") {
        rules.push(
            "- After changing code, run the project's checks or tests with bash when it has any."
                .to_string(),
        );
    }
    rules.push(
        "- Paths are relative to the project root. Files outside it are off limits.
- If a tool returns an error, read it and fix the call. Never repeat the same failing call.
- If the request is unclear or risky, ask the user instead of guessing.
- When done, answer briefly: what you changed and what the user still has to do."
            .to_string(),
    );
    rules.join("\n")
}

/// `a, b and c`.
fn words(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// `a, b or c`.
fn words_or(names: &[&str]) -> String {
    match names {
        [rest @ .., last] if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => words(names),
    }
}

/// Plan mode, with the reading tools the run offers.
fn plan(offers: &dyn Fn(&str) -> bool) -> String {
    let tools: Vec<&str> = ["read", "list", "glob", "grep", "todo"]
        .into_iter()
        .filter(|n| offers(n))
        .collect();
    format!(
        "Mode: Plan. You can only read ({}): do not change files or run commands. Study the code, then answer with a short step-by-step plan.",
        tools.join(", ")
    )
}

const BUILD: &str =
    "Mode: Build. You can read and change files and run commands. Do the work, then report.";

/// Instruction files longer than this are cut (bytes).
const MAX_INSTRUCTIONS: usize = 16 * 1024;

/// What the system prompt is built from.
pub struct SystemPrompt<'a> {
    /// The project root, described in the prompt and searched for instruction files.
    pub root: &'a Path,
    /// The run may only read (Plan mode or a read-only agent); the prompt then gives the Plan text.
    pub read_only: bool,
    /// The agent's own prompt from settings.
    pub agent_prompt: Option<&'a str>,
    /// The Total.js 5 primer goes in.
    pub primer: bool,
    /// A Total.js 5 project and a small model: the primer's essentials in a few lines instead.
    pub essentials: bool,
    /// The summary of older turns, after a compaction.
    pub summary: Option<&'a str>,
    /// Every file of a small project, for a small model: told up front, it does not list
    /// folders the project does not have (the 1.5B listed schemas/, definitions/, modules/).
    pub files: Option<&'a [String]>,
    /// Whether the run offers a tool by this name (the rules name no other).
    pub offers: &'a dyn Fn(&str) -> bool,
}

impl SystemPrompt<'_> {
    /// The whole system prompt, base text first, then what the fields add.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str(&base(self.offers));
        out.push_str("\n\n");
        if self.read_only {
            out.push_str(&plan(self.offers));
        } else {
            out.push_str(BUILD);
        }
        if let Some(extra) = self.agent_prompt.filter(|p| !p.trim().is_empty()) {
            out.push_str("\n\n");
            out.push_str(extra.trim());
        }
        out.push_str("\n\n");
        out.push_str(&environment(self.root));
        if let Some(files) = self.files {
            out.push_str(&if files.is_empty() {
                "\n- Project files: none yet".to_string()
            } else {
                format!("\n- Project files: {}", files.join(", "))
            });
        }
        if self.primer {
            out.push_str("\n\n");
            out.push_str(totem_totaljs::primer().trim());
        } else if self.essentials {
            out.push_str("\n\n");
            out.push_str(totem_totaljs::reminder());
        }
        if let Some((name, text)) = root_instructions(self.root) {
            out.push_str(&format!("\n\nProject instructions ({name}):\n{text}"));
        }
        if let Some(summary) = self.summary {
            out.push_str(
                "\n\nSummary of the earlier conversation (older messages are not shown):\n",
            );
            out.push_str(summary.trim());
        }
        out
    }
}

/// Root, OS, date, and whether the project is a git repository.
fn environment(root: &Path) -> String {
    let date = time::OffsetDateTime::now_utc().date();
    let git = if root.join(".git").exists() {
        "yes"
    } else {
        "no"
    };
    format!(
        "Environment:\n- Project root: {}\n- OS: {}\n- Date: {date}\n- Git repository: {git}",
        root.display(),
        std::env::consts::OS
    )
}

/// The instruction file of one folder: AGENTS.md, else CLAUDE.md, only when it resolves to a
/// regular file inside `root`. Returns its root-relative name and text.
fn folder_instructions(root: &Path, dir: &Path) -> Option<(String, String)> {
    for name in ["AGENTS.md", "CLAUDE.md"] {
        let candidate = dir.join(name);
        let Ok(real) = std::fs::canonicalize(&candidate) else {
            continue;
        };
        if !real.starts_with(root) || !real.is_file() {
            continue;
        }
        let rel = candidate
            .strip_prefix(root)
            .map_or_else(|_| name.to_string(), |p| p.display().to_string());
        // Secrets by every name: an AGENTS.md that is a link to `.env` (or a hard link) is not
        // sent; the model is told why, so it can say so.
        static SECRETS: std::sync::OnceLock<totem_permission::SecretPatterns> =
            std::sync::OnceLock::new();
        let secrets = SECRETS.get_or_init(totem_permission::SecretPatterns::default);
        if let Some(why) = super::command::prompt_file_refusal(root, &rel, &real, secrets) {
            return Some((rel, format!("[not loaded: {why}]")));
        }
        let Ok(mut text) = std::fs::read_to_string(&real) else {
            continue;
        };
        if text.len() > MAX_INSTRUCTIONS {
            text.truncate(text.floor_char_boundary(MAX_INSTRUCTIONS));
            text.push_str("\n[cut]");
        }
        return Some((rel, text.trim().to_string()));
    }
    None
}

/// The root's instruction file.
pub fn root_instructions(root: &Path) -> Option<(String, String)> {
    folder_instructions(root, root)
}

/// Instruction files of the folders from `rel`'s folder up to (not including) the root that this
/// run has not seen yet. `rel` is a project-relative path that already passed the boundary.
pub fn nested_instructions(
    root: &Path,
    rel: &str,
    seen: &mut HashSet<PathBuf>,
) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let target = root.join(rel);
    let mut dir = if target.is_dir() {
        Some(target.as_path())
    } else {
        target.parent()
    };
    while let Some(d) = dir {
        // Compare resolved folders: a link never leads the walk out of the project.
        let Ok(real) = std::fs::canonicalize(d) else {
            dir = d.parent();
            continue;
        };
        if real == root || !real.starts_with(root) {
            break;
        }
        if seen.insert(real.clone())
            && let Some(file) = folder_instructions(root, &real)
        {
            found.push(file);
        }
        dir = d.parent();
    }
    found.reverse();
    found
}

/// The commands AGENTS.md names for after an edit: lines such as `format: prettier --write {file}`
/// or `check: npm run lint` (a list marker and backticks are allowed).
pub fn instruction_commands(root: &Path) -> (Vec<String>, Vec<String>) {
    let mut format = Vec::new();
    let mut check = Vec::new();
    let Some((_, text)) = root_instructions(root) else {
        return (format, check);
    };
    for line in text.lines() {
        let line = line.trim().trim_start_matches(['-', '*']).trim();
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim().trim_matches('`').trim();
        if value.is_empty() {
            continue;
        }
        match key.trim().trim_matches('*').to_ascii_lowercase().as_str() {
            "format" | "formatter" => format.push(value.to_string()),
            "check" | "lint" => check.push(value.to_string()),
            _ => {}
        }
    }
    (format, check)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_name_only_the_tools_offered() {
        let all = base(&|_| true);
        assert!(
            all.contains("find things with grep, glob and list."),
            "{all}"
        );
        assert!(all.contains("Change files with edit or patch;"), "{all}");
        assert!(
            all.contains("run the project's checks or tests with bash"),
            "{all}"
        );
        // A model that writes code blocks: read, list, write and bash.
        let small = base(&|n| matches!(n, "read" | "list" | "write" | "bash"));
        assert!(small.contains("find things with list."), "{small}");
        assert!(
            small.contains("Change a file with write: its whole new content"),
            "{small}"
        );
        for absent in ["grep", "glob", "edit", "patch"] {
            assert!(!small.contains(absent), "{absent} in {small}");
        }
        let none = base(&|_| false);
        assert!(!none.contains("bash") && !none.contains("write"), "{none}");
        assert_eq!(
            plan(&|n| n != "todo"),
            "Mode: Plan. You can only read (read, list, glob, grep): do not change files or run commands. Study the code, then answer with a short step-by-step plan."
        );
    }
}
