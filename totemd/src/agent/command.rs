//! `session.command`: slash commands run by the daemon.
//!
//! - `/compact`: summarise the conversation now; later requests carry the summary instead.
//! - `/init`: write `AGENTS.md` from a look at the project (build, test and lint commands, layout,
//!   conventions); in an empty folder, first scaffold a Total.js 5 project.
//! - `/NAME`: the custom command `.totem/commands/NAME.md`, sent as a prompt (`$ARGUMENTS` is
//!   replaced by the command's arguments; a front matter may set `mode` and `model`). The file is
//!   a project file like any other: its real path must be inside the project, and a secret or a
//!   hard-linked file is not sent; its `mode`/`agent` may not be wider than the session's current
//!   mode (the command then runs in that mode, with a notice).

use std::path::Path;
use std::sync::Arc;

use totem_protocol::{CommandResult, EventKind, SessionCommandParams};

use super::history::{summarise, to_model_messages};
use super::settings::provider_for;
use super::{BUILD, DaemonError, PLAN, RunRequest, lock, queue_run};
use crate::daemon::Daemon;
use crate::store::Compaction;
use crate::util::now_ms;

/// Runs a slash command (`session.command`), such as `/compact`, on a session.
pub async fn run(
    daemon: &Arc<Daemon>,
    p: SessionCommandParams,
) -> Result<CommandResult, DaemonError> {
    let agent = daemon.agents.session(daemon, &p.session_id)?;
    let name = p.command.trim().trim_start_matches('/').to_string();
    let args = p.args.unwrap_or_default();
    match name.as_str() {
        "compact" => {
            if agent.busy() {
                return Err(DaemonError::Busy(
                    "a run is going; wait for it to end (or abort it) before /compact".into(),
                ));
            }
            let model = lock(&agent.queue).last_model.clone();
            compact(daemon, &agent.session_id, model).await
        }
        "init" => init(daemon, &agent.root, &agent.session_id),
        _ => {
            let settings = super::settings::load(daemon).map_err(DaemonError::Invalid)?;
            // The client's mode when it says one (the REPL's /mode before any prompt), else the
            // newest prompt's.
            let current = p
                .mode
                .clone()
                .filter(|m| !m.trim().is_empty())
                .or_else(|| lock(&agent.queue).last_mode.clone())
                .unwrap_or_else(|| BUILD.to_string());
            let policy = settings
                .policy(&current, &[])
                .map_err(DaemonError::Invalid)?;
            let state = lock(&agent.permissions).clone();
            let Some((mut request, file)) = custom(&agent.root, &name, &args, &policy, &state)?
            else {
                return Err(DaemonError::NotFound(format!(
                    "no command /{name}: the daemon knows /compact and /init, and custom commands are files in .totem/commands/NAME.md"
                )));
            };
            let mut text = format!("Running /{name} from {file}.");
            if request.mode.is_empty() {
                // No agent named: the session's own mode, never a wider one.
                request.mode = current.clone();
            }
            let asked = request.mode.clone();
            if let Some(why) = wider_agent(&settings, &current, &asked) {
                // A file of the repository picks no agent that may do more than the user's.
                request.mode = current.clone();
                text = format!(
                    "{file} asks for agent `{asked}`, {why}: /{name} runs in `{current}`, the session's mode, instead. {text}"
                );
                daemon.sessions.get(&agent.session_id)?.emit(
                    daemon.store(),
                    EventKind::Notice {
                        run_id: None,
                        level: totem_protocol::NoticeLevel::Warning,
                        text: format!(
                            "{} asks for agent `{}`, {why}: /{name} runs in `{current}`, the session's mode, instead.",
                            totem_protocol::display::displayable_line(&file),
                            totem_protocol::display::displayable_line(&asked)
                        ),
                    },
                )?;
            }
            let accepted = queue_run(daemon, &agent, request)?;
            Ok(CommandResult {
                text,
                run_id: Some(accepted.run_id),
            })
        }
    }
}

/// Summarises every message of the session so far.
async fn compact(
    daemon: &Arc<Daemon>,
    session_id: &str,
    model: Option<String>,
) -> Result<CommandResult, DaemonError> {
    let store = daemon.store();
    let settings = super::settings::load(daemon).map_err(DaemonError::Invalid)?;
    let name = settings
        .compaction
        .as_ref()
        .and_then(|c| c.model.clone())
        .or(model);
    let model = provider_for(daemon, name.as_deref())
        .await
        .map_err(DaemonError::Invalid)?;
    let previous = store.compaction(session_id)?;
    let undo = store.undo_state(session_id)?;
    let (messages, _) = store.messages_after(session_id, 0, 1_000_000)?;
    let messages: Vec<_> = messages
        .into_iter()
        .filter(|m| undo.keeps(m) && previous.as_ref().is_none_or(|c| c.keeps(m)))
        .collect();
    let Some(last) = messages.last().map(|m| m.seq) else {
        let text = "Nothing to compact: no messages since the last summary.".to_string();
        daemon.sessions.get(session_id)?.emit(
            store,
            EventKind::Notice {
                run_id: None,
                level: totem_protocol::NoticeLevel::Info,
                text: text.clone(),
            },
        )?;
        return Ok(CommandResult { text, run_id: None });
    };
    let summary = summarise(
        &model,
        previous.as_ref().map(|c| c.summary.as_str()),
        &to_model_messages(&messages),
    )
    .await
    .map_err(DaemonError::Invalid)?;
    store.put_compaction(
        session_id,
        &Compaction {
            upto_seq: last,
            summary,
            at: now_ms(),
            keep: Vec::new(),
        },
    )?;
    let text = format!(
        "Compacted the conversation: {} messages were summarised by {}.",
        messages.len(),
        model.name
    );
    let live = daemon.sessions.get(session_id)?;
    live.emit(
        store,
        EventKind::Notice {
            run_id: None,
            level: totem_protocol::NoticeLevel::Info,
            text: text.clone(),
        },
    )?;
    Ok(CommandResult { text, run_id: None })
}

/// Writes AGENTS.md (and, in an empty folder, a Total.js 5 scaffold first).
fn init(daemon: &Daemon, root: &Path, session_id: &str) -> Result<CommandResult, DaemonError> {
    let mut done = Vec::new();
    let project = totem_totaljs::detect(root);
    if matches!(project, totem_totaljs::Project::Empty) {
        match totem_totaljs::write_scaffold(root) {
            Ok(files) => done.push(format!(
                "Created a Total.js 5 project: {}.",
                files
                    .iter()
                    .filter_map(|f| f.strip_prefix(root).ok())
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Err(e) => return Err(DaemonError::Busy(e.to_string())),
        }
    }
    let path = root.join("AGENTS.md");
    if path.exists() {
        done.push("AGENTS.md exists already; it was left as it is.".into());
    } else {
        let text = describe(root);
        std::fs::write(&path, text)
            .map_err(|e| DaemonError::Invalid(format!("cannot write {}: {e}", path.display())))?;
        done.push("Wrote AGENTS.md: check it and add what the agent should know.".into());
    }
    let text = done.join(" ");
    let live = daemon.sessions.get(session_id)?;
    live.emit(
        daemon.store(),
        EventKind::Notice {
            run_id: None,
            level: totem_protocol::NoticeLevel::Info,
            text: text.clone(),
        },
    )?;
    Ok(CommandResult { text, run_id: None })
}

/// An AGENTS.md for the project from what its files say.
fn describe(root: &Path) -> String {
    let name = root.file_name().map_or_else(
        || "this project".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut commands: Vec<(String, String)> = Vec::new();
    let mut conventions: Vec<String> = Vec::new();
    if let Ok(text) = std::fs::read_to_string(root.join("package.json"))
        && let Ok(package) = serde_json::from_str::<serde_json::Value>(&text)
    {
        if let Some(scripts) = package["scripts"].as_object() {
            for (script, _) in scripts {
                let label = match script.as_str() {
                    "build" => "Build",
                    "test" => "Test",
                    "lint" => "Lint",
                    "start" | "dev" => "Run",
                    "format" | "fmt" => "Format",
                    _ => continue,
                };
                commands.push((label.into(), format!("npm run {script}")));
            }
        }
        let depends = |dep: &str| {
            package["dependencies"].get(dep).is_some()
                || package["devDependencies"].get(dep).is_some()
        };
        if depends("total5") {
            conventions.push("Total.js 5: `require('total5')` and `Total.run()`; controllers in `controllers/`, actions in `actions/` or `schemas/`; handlers take `$`; tabs, `var`, single quotes; no Express, no Total.js 4 APIs.".into());
            if !commands.iter().any(|(l, _)| l == "Run") {
                commands.push(("Run".into(), "node index.js".into()));
            }
        }
    }
    if root.join("Cargo.toml").is_file() {
        commands.push(("Build".into(), "cargo build".into()));
        commands.push(("Test".into(), "cargo test".into()));
        commands.push((
            "Lint".into(),
            "cargo clippy --all-targets -- -D warnings".into(),
        ));
        commands.push(("Format".into(), "cargo fmt".into()));
    }
    if root.join("go.mod").is_file() {
        commands.push(("Build".into(), "go build ./...".into()));
        commands.push(("Test".into(), "go test ./...".into()));
        commands.push(("Format".into(), "gofmt -w .".into()));
    }
    if root.join("pyproject.toml").is_file() || root.join("setup.py").is_file() {
        commands.push(("Test".into(), "pytest".into()));
    }
    if let Ok(text) = std::fs::read_to_string(root.join("Makefile")) {
        for target in ["build", "test", "lint"] {
            if text.lines().any(|l| l.starts_with(&format!("{target}:"))) {
                let label = match target {
                    "build" => "Build",
                    "test" => "Test",
                    _ => "Lint",
                };
                if !commands.iter().any(|(l, _)| l == label) {
                    commands.push((label.into(), format!("make {target}")));
                }
            }
        }
    }
    if root.join(".editorconfig").is_file() {
        conventions.push("Follow .editorconfig (indentation, line endings).".into());
    }
    let mut layout: Vec<String> = std::fs::read_dir(root)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with('.')
                        || matches!(name.as_str(), "node_modules" | "target" | "AGENTS.md")
                    {
                        return None;
                    }
                    let dir = e.file_type().is_ok_and(|t| t.is_dir());
                    Some(if dir { format!("{name}/") } else { name })
                })
                .collect()
        })
        .unwrap_or_default();
    layout.sort();
    layout.truncate(40);

    let mut out = format!(
        "# {name}\n\nInstructions for coding agents working in this project.\n\n## Commands\n\n"
    );
    if commands.is_empty() {
        out.push_str("No build or test commands were found; add them here.\n");
    }
    for (label, command) in &commands {
        out.push_str(&format!("- {label}: `{command}`\n"));
    }
    out.push_str("\n## Layout\n\n");
    for entry in &layout {
        out.push_str(&format!("- `{entry}`\n"));
    }
    out.push_str("\n## Conventions\n\n");
    if conventions.is_empty() {
        out.push_str("- Follow the style of the surrounding code.\n");
    }
    for c in &conventions {
        out.push_str(&format!("- {c}\n"));
    }
    // Only a command the project has: an example here is taken for an instruction.
    if let Some((_, lint)) = commands.iter().find(|(label, _)| label == "Lint") {
        out.push_str(&format!("\n## After an edit\n\n- check: `{lint}`\n"));
    }
    out
}

/// Why agent `asked` (a project command's front matter) may do more than `current`, the
/// session's mode; `None` when it may not. Conservative: another agent is accepted only when it
/// is read-only wherever `current` is, allows nothing `current` does not list, and refuses all
/// `current` refuses.
fn wider_agent(
    settings: &crate::config::SettingsFile,
    current: &str,
    asked: &str,
) -> Option<String> {
    if asked == current {
        return None;
    }
    if asked != BUILD && asked != PLAN && !settings.agents.contains_key(asked) {
        return Some("which is not an agent of your settings".into());
    }
    let (cur, ask) = (settings.agent(current), settings.agent(asked));
    let read_only = |mode: &str, a: &crate::config::AgentSettings| mode == PLAN || a.read_only;
    if read_only(current, &cur) && !read_only(asked, &ask) {
        return Some(format!(
            "which may change files and run commands, and `{current}` may not"
        ));
    }
    if let Some(rule) = ask.allow.iter().find(|r| !cur.allow.contains(r)) {
        return Some(format!("which allows `{rule}` and `{current}` does not"));
    }
    if let Some(rule) = cur.deny.iter().find(|r| !ask.deny.contains(r)) {
        return Some(format!(
            "which does not refuse `{rule}` as `{current}` does"
        ));
    }
    None
}

/// Why a project-provided prompt file (`.totem/commands/NAME.md`, AGENTS.md) is not loaded:
/// it leads outside the project, to a secret file, or to a file with other names (hard links).
/// `real_rel` is the file's real project-relative path.
pub(super) fn prompt_file_refusal(
    root: &Path,
    rel: &str,
    real: &Path,
    secrets: &totem_permission::SecretPatterns,
) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let Ok(real_rel) = real.strip_prefix(root) else {
        return Some(format!("{rel} leads outside the project"));
    };
    let real_rel = real_rel.to_string_lossy();
    if secrets.is_secret(&real_rel) || secrets.is_secret(rel) {
        return Some(match real_rel == rel {
            true => format!("{rel} is a secret file"),
            false => format!("{rel} leads to {real_rel}, a secret file"),
        });
    }
    if std::fs::metadata(real).is_ok_and(|m| m.nlink() > 1) {
        return Some(format!(
            "{rel} has more than one name (hard links), so it may be a secret or a file outside the project"
        ));
    }
    None
}

/// A custom command's prompt, from `.totem/commands/NAME.md`. `None` when there is no such file.
/// The file goes through the file tools' rules: its real path must be inside the project, and a
/// secret (also through a symlink, `review.md -> ../../.env`) or a hard-linked file is not sent
/// unless the user answered "always" for reading exactly that file.
fn custom(
    root: &Path,
    name: &str,
    args: &str,
    policy: &totem_permission::Policy,
    state: &totem_permission::PermissionState,
) -> Result<Option<(RunRequest, String)>, DaemonError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Ok(None);
    }
    let rel = format!(".totem/commands/{name}.md");
    let path = root.join(&rel);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let refused = |why: String| {
        DaemonError::Invalid(format!(
            "/{name} was not run: {why}, and a command file is sent to the model only under the rules of the file tools. Write the prompt into {rel} itself."
        ))
    };
    let Ok(real) = std::fs::canonicalize(&path) else {
        return Err(refused(format!("{rel} is a link to nothing")));
    };
    if !real.starts_with(root) {
        return Err(refused(format!("{rel} leads outside the project")));
    }
    if !real.is_file() {
        return Ok(None);
    }
    if let Some(why) = prompt_file_refusal(root, &rel, &real, policy.secrets()) {
        // Only the user's own answer for exactly that file lets it through.
        let real_rel = real
            .strip_prefix(root)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let links = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(&real).map_or(1, |m| m.nlink())
        };
        let access = totem_permission::Access::read("read", real_rel.clone());
        let allowed = policy.evaluate_file(&access, links, state).decision
            == totem_permission::Decision::Allow;
        if !allowed {
            return Err(refused(format!(
                "{why}, which is not sent to the model without your yes (answer \"always\" when the model asks to read {real_rel})"
            )));
        }
    }
    let verdict = policy.evaluate(&totem_permission::Access::read("read", rel.clone()), state);
    if verdict.decision == totem_permission::Decision::Deny {
        return Err(refused(format!(
            "the settings do not let {rel} be read ({})",
            verdict.explain()
        )));
    }
    let text = std::fs::read_to_string(&real)
        .map_err(|e| DaemonError::Invalid(format!("cannot read {rel}: {e}")))?;
    let (front, body) = split_front_matter(&text);
    // Empty: the session's current mode (filled in by the caller).
    let mut mode = String::new();
    let mut model = None;
    for line in front.lines() {
        if let Some((key, value)) = line.split_once(':') {
            let value = value.trim().trim_matches('"').to_string();
            match key.trim() {
                "mode" | "agent" if !value.is_empty() => mode = value,
                "model" if !value.is_empty() => model = Some(value),
                _ => {}
            }
        }
    }
    let mut prompt = body.trim().to_string();
    if prompt.contains("$ARGUMENTS") {
        prompt = prompt.replace("$ARGUMENTS", args.trim());
    } else if !args.trim().is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(args.trim());
    }
    if prompt.is_empty() {
        return Err(DaemonError::Invalid(format!(
            "{rel} is empty; write the prompt in it"
        )));
    }
    Ok(Some((
        RunRequest {
            text: prompt,
            mode,
            model,
            reasoning: None,
            allow: Vec::new(),
            attachments: Vec::new(),
            ask_to_start_servers: true,
        },
        rel,
    )))
}

fn split_front_matter(text: &str) -> (&str, &str) {
    if let Some(rest) = text.strip_prefix("---\n")
        && let Some(end) = rest.find("\n---")
    {
        let body = &rest[end + 4..];
        return (&rest[..end], body.strip_prefix('\n').unwrap_or(body));
    }
    ("", text)
}
