//! Slash commands. Each names the daemon method it needs; one the daemon does not serve (per
//! `initialize`'s method list) says so instead of pretending.

use totem_protocol::{
    Method, ModelListParams, SessionCommandParams, SessionDiffParams, SessionForkParams,
    SessionListParams, SessionRef, SessionRenameParams, SessionUndoParams, ToolMode, method,
};

use super::{Flow, Repl};

/// One slash command.
pub struct SlashCommand {
    pub name: &'static str,
    pub args: &'static str,
    pub help: &'static str,
    /// The daemon method it needs, if any.
    pub needs: Option<&'static str>,
}

const fn cmd(
    name: &'static str,
    args: &'static str,
    help: &'static str,
    needs: Option<&'static str>,
) -> SlashCommand {
    SlashCommand {
        name,
        args,
        help,
        needs,
    }
}

/// The slash command typed after `draft`, the text the line started with, when `line` is the
/// draft followed by one of [`COMMANDS`] (not any `/`: "look at " + "/etc/hosts" is a prompt).
pub(crate) fn typed_after(draft: &str, line: &str) -> Option<String> {
    if draft.trim().is_empty() {
        return None;
    }
    let typed = line.strip_prefix(draft)?.trim();
    let name = typed.split_whitespace().next()?;
    COMMANDS
        .iter()
        .any(|c| c.name == name)
        .then(|| typed.to_string())
}

pub const COMMANDS: &[SlashCommand] = &[
    cmd("/help", "", "list these commands", None),
    cmd("/new", "", "start a new session in this project", None),
    cmd(
        "/sessions",
        "[words]",
        "list this project's sessions (those whose title has the words) and pick one; at the pick, words filter again",
        None,
    ),
    cmd(
        "/rename",
        "TITLE",
        "rename this session",
        Some(method::SessionRename::NAME),
    ),
    cmd(
        "/delete",
        "",
        "delete this session (asks first), then start a new one",
        Some(method::SessionDelete::NAME),
    ),
    cmd(
        "/abort",
        "",
        "abort the running run (also Esc or Ctrl-C)",
        Some(method::SessionAbort::NAME),
    ),
    cmd(
        "/mode",
        "[plan|build]",
        "the mode for the next prompts (plan: read-only tools)",
        None,
    ),
    cmd(
        "/model",
        "[MODEL]",
        "list the models, or use MODEL for the next prompts",
        None,
    ),
    cmd(
        "/reasoning",
        "[LEVEL]",
        "how hard the model thinks on the next prompts: off, low, medium or high",
        None,
    ),
    cmd(
        "/undo",
        "[force]",
        "take back the last run: its file changes and its messages (force: even if edited since)",
        Some(method::SessionUndo::NAME),
    ),
    cmd(
        "/redo",
        "[force]",
        "bring back the last undone run (files and messages)",
        Some(method::SessionRedo::NAME),
    ),
    cmd(
        "/diff",
        "[git]",
        "the session's file changes as a diff (git: git's view)",
        Some(method::SessionDiff::NAME),
    ),
    cmd(
        "/compact",
        "",
        "summarise older turns to free context",
        Some(method::SessionCommand::NAME),
    ),
    cmd(
        "/fork",
        "",
        "copy this session into a new one and switch to it",
        Some(method::SessionFork::NAME),
    ),
    cmd(
        "/init",
        "",
        "write AGENTS.md from a look at the project",
        Some(method::SessionCommand::NAME),
    ),
    cmd(
        "/jobs",
        "",
        "list background jobs",
        Some(method::JobList::NAME),
    ),
    cmd(
        "/terminals",
        "",
        "list this session's terminals",
        Some(method::TerminalList::NAME),
    ),
    cmd(
        "/terminal",
        "N",
        "attach terminal N (from /terminals) raw; Ctrl-] comes back",
        Some(method::TerminalSubscribe::NAME),
    ),
    cmd(
        "/share",
        "N [off]",
        "let the model see and type into your terminal N (off: hide it again)",
        Some(method::TerminalShare::NAME),
    ),
    cmd(
        "/thinking",
        "",
        "show the newest run's thinking in full (folded to one line as it streams)",
        None,
    ),
    cmd("/quit", "", "leave (a running run goes on)", None),
];

/// Names for completion.
pub fn names() -> Vec<String> {
    COMMANDS.iter().map(|c| c.name.to_string()).collect()
}

impl Repl<'_> {
    pub(super) async fn slash(&mut self, line: &str) -> Flow {
        let (name, arg) = match line.split_once(char::is_whitespace) {
            Some((name, arg)) => (name, arg.trim()),
            None => (line, ""),
        };
        let Some(command) = COMMANDS.iter().find(|c| c.name == name) else {
            self.project_command(name, arg).await;
            return Flow::Continue;
        };
        if let Some(method) = command.needs
            && !self.connection.has(method)
        {
            self.note(&format!(
                "{name} is not available in this daemon yet (it has no {method})."
            ));
            return Flow::Continue;
        }
        if !command.args.is_empty() && !command.args.starts_with('[') && arg.is_empty() {
            self.error(&format!("usage: {name} {}", command.args));
            return Flow::Continue;
        }
        let result = match name {
            "/help" => {
                self.help();
                Ok(())
            }
            "/quit" => return Flow::Leave,
            "/thinking" => {
                self.thinking();
                Ok(())
            }
            "/new" => self.new_session().await,
            "/sessions" => self.list_sessions(arg).await,
            "/rename" => self.rename(arg).await,
            "/delete" => {
                self.ask_delete();
                Ok(())
            }
            "/abort" => self.abort().await,
            "/mode" => {
                self.set_mode(arg);
                Ok(())
            }
            "/reasoning" => {
                self.set_reasoning(arg).await;
                Ok(())
            }
            "/model" => self.model(arg).await,
            "/undo" => self.undo(false, arg == "force").await,
            "/redo" => self.undo(true, arg == "force").await,
            "/diff" => self.diff(arg == "git").await,
            "/compact" => self.command("compact").await,
            "/init" => self.command("init").await,
            "/fork" => self.fork().await,
            "/jobs" => self.jobs().await,
            "/terminals" => self.terminals().await,
            "/terminal" => self.attach_terminal(arg).await,
            "/share" => self.share_terminal(arg).await,
            _ => Ok(()),
        };
        if let Err(e) = result {
            self.error(&format!("{name} failed: {e:#}"));
        }
        Flow::Continue
    }

    /// `/NAME [args]` that is not built in: the project's `.totem/commands/NAME.md`, run by the
    /// daemon in this prompt's mode (its front matter may not pick a wider one).
    async fn project_command(&mut self, name: &str, arg: &str) {
        if !self.connection.has(method::SessionCommand::NAME) {
            self.error(&format!("unknown command {name}. /help lists them"));
            return;
        }
        let result = self
            .connection
            .client
            .call::<method::SessionCommand>(SessionCommandParams {
                session_id: self.session.id.clone(),
                command: name.to_string(),
                args: (!arg.is_empty()).then(|| arg.to_string()),
                mode: self.settings.mode.clone(),
            })
            .await;
        match result {
            Ok(done) => self.note(&done.text),
            Err(totem_client::ClientError::Rpc { code, .. })
                if code == totem_protocol::ErrorCode::NOT_FOUND.0 =>
            {
                self.error(&format!(
                    "unknown command {name}. /help lists them; project commands are files in .totem/commands/NAME.md"
                ));
            }
            Err(e) => self.error(&format!("{name} was not run: {e:#}")),
        }
    }

    /// `/thinking`: the newest run's thinking, every line.
    fn thinking(&mut self) {
        let thoughts = self.renderer.thoughts().to_vec();
        if thoughts.is_empty() {
            self.note("No thinking to show: the runs here did not think (or it was not shown).");
            return;
        }
        let s = self.style();
        let mut out = String::new();
        for line in thoughts.iter().flat_map(|t| t.lines()) {
            out.push_str(&s.thinking(&format!("┊ {line}")));
            out.push('\n');
        }
        self.print(&out);
    }

    fn help(&mut self) {
        let s = self.style();
        let mut out = String::new();
        for c in COMMANDS {
            let usage = format!("{} {}", c.name, c.args);
            let missing = c.needs.is_some_and(|m| !self.connection.has(m));
            let help = match missing {
                true => s.dim(&format!("{} (not available in this daemon yet)", c.help)),
                false => c.help.to_string(),
            };
            out.push_str(&format!("  {:<22} {help}\n", usage.trim_end()));
        }
        out.push_str(&format!(
            "  {:<22} run a shell command in the project (asked first, as the model's would be); its output goes with your next prompt\n",
            "!command"
        ));
        out.push_str(&format!(
            "  {:<22} attach a file of the project to the prompt (Tab completes)\n",
            "@path"
        ));
        out.push_str(&format!(
            "  {:<22} run the project's command .totem/commands/NAME.md (in this mode, never a wider one)\n",
            "/NAME [words]"
        ));
        out.push_str(&s.dim(
            "  Enter sends; end a line with \\ (or press Alt-Enter) to go on on the next one.\n  Esc or Ctrl-C aborts a run (Ctrl-C twice within a second leaves); Ctrl-D leaves. Runs go on after you leave.\n",
        ));
        self.print(&out);
    }

    async fn new_session(&mut self) -> anyhow::Result<()> {
        let session = crate::project::create_session(&self.connection, &self.project, None).await?;
        self.switch_to(session).await
    }

    /// `/sessions [words]`: the project's sessions, newest first, those matching `search` when
    /// it is not empty.
    pub(super) async fn list_sessions(&mut self, search: &str) -> anyhow::Result<()> {
        let page = self
            .connection
            .client
            .call::<method::SessionList>(SessionListParams {
                project_id: Some(self.project.id.clone()),
                cursor: None,
                limit: Some(20),
                search: (!search.is_empty()).then(|| search.to_string()),
            })
            .await?;
        let s = self.style();
        let mut out = String::new();
        for (i, session) in page.items.iter().enumerate() {
            let mark = if session.id == self.session.id {
                "*"
            } else {
                " "
            };
            let title = if session.title.is_empty() {
                "(untitled)"
            } else {
                &session.title
            };
            out.push_str(&format!(
                "{mark}{:>3}. {:<40} {} {}\n",
                i + 1,
                crate::format::one_line(title, 40),
                s.dim(&crate::format::age(session.updated_at)),
                s.dim(&session.id)
            ));
        }
        if page.items.is_empty() {
            out = format!("No session here matches “{search}”. /sessions lists them all.\n");
        }
        self.print(&out);
        if page.items.len() > 1 || (!search.is_empty() && !page.items.is_empty()) {
            self.picking = Some(page.items);
        }
        Ok(())
    }

    /// `/delete`: the question; the next line answers it.
    fn ask_delete(&mut self) {
        let title = if self.session.title.is_empty() {
            "(untitled)"
        } else {
            &self.session.title
        };
        let question = format!(
            "Delete the session “{}”? Its messages and undo history go; files stay as they are.",
            crate::format::one_line(title, 60)
        );
        self.note(&question);
        self.deleting = true;
    }

    /// The answer to `/delete`'s question: `y` deletes the session and starts a new one.
    pub(super) async fn confirm_delete(&mut self, answer: &str) {
        if !crate::project::said_yes(answer) {
            self.note("Kept the session.");
            return;
        }
        if let Some(old) = self.stream.take() {
            let _ = self.connection.client.unsubscribe(&old.subscription).await;
        }
        let deleted = self
            .connection
            .client
            .call::<method::SessionDelete>(SessionRef {
                session_id: self.session.id.clone(),
            })
            .await;
        if let Err(e) = deleted {
            self.error(&format!("the session was not deleted: {e:#}"));
            return;
        }
        let title = crate::format::one_line(&self.session.title, 60);
        self.note(&format!("Deleted the session “{title}”."));
        if let Err(e) = self.new_session().await {
            self.error(&format!("no new session: {e:#}. /sessions picks one"));
        }
    }

    async fn rename(&mut self, title: &str) -> anyhow::Result<()> {
        let session = self
            .connection
            .client
            .call::<method::SessionRename>(SessionRenameParams {
                session_id: self.session.id.clone(),
                title: title.to_string(),
            })
            .await?;
        self.note(&format!("Renamed to “{}”.", session.title));
        self.session = session;
        Ok(())
    }

    async fn model(&mut self, arg: &str) -> anyhow::Result<()> {
        if !arg.is_empty() {
            // Asked again each time: a provider may have been added or removed since (another
            // client, a changed settings.json).
            let resolved = match self.fresh_models().await {
                Some(list) if !list.models.is_empty() => super::status::resolve_model(list, arg),
                // Nothing listed to check against: the daemon says at the prompt.
                _ => Ok(arg.to_string()),
            };
            match resolved {
                Ok(name) => {
                    self.settings.model = Some(name.clone());
                    self.note(&format!("The next prompts use {name}."));
                    if self
                        .settings
                        .reasoning
                        .as_deref()
                        .is_some_and(|r| r != "off")
                        && self
                            .current_entry()
                            .is_some_and(|m| !m.capabilities.thinking)
                    {
                        self.note(&format!(
                            "{name} cannot think: the reasoning level has no effect on it."
                        ));
                    }
                    self.show_where();
                }
                Err(why) => self.error(&format!("{why}. Nothing changed.")),
            }
            return Ok(());
        }
        if !self.connection.has(method::ModelList::NAME) {
            self.note("Listing models is not available in this daemon yet (it has no model.list).");
            return Ok(());
        }
        let list = self
            .connection
            .client
            .call::<method::ModelList>(ModelListParams::default())
            .await?;
        let chosen = self.settings.model.clone();
        let s = self.style();
        let default = list.default_model.clone();
        let current = chosen.clone().or_else(|| default.clone());
        let mut out = format!(
            "Model: {}; the default is {}.\n",
            current.as_deref().unwrap_or("none yet"),
            default
                .as_deref()
                .unwrap_or("none (no provider lists a model)")
        );
        self.models = Some(list.clone());
        for model in &list.models {
            let name = model.name.as_str();
            let mark = if chosen.as_deref() == Some(name) {
                "*"
            } else {
                " "
            };
            let mut line = format!("{mark} {name}");
            if let Some(window) = model.context_window {
                line.push_str(&s.dim(&format!("  {}k context", window / 1000)));
            }
            // What settings.json (or `totem models --probe`) says about its tools and streaming.
            let settings = model.settings.as_ref();
            match settings.and_then(|v| v.tools) {
                Some(ToolMode::Native) => line.push_str(&s.dim("  native tools")),
                Some(ToolMode::Text) => line.push_str(&s.dim("  tools in text")),
                Some(ToolMode::None) => line.push_str(&s.dim("  no tools")),
                None => {}
            }
            if settings.and_then(|v| v.stream) == Some(false) {
                line.push_str(&s.dim("  not streamed"));
            }
            if list.default_model.as_deref() == Some(name) {
                line.push_str(&s.dim("  (default)"));
            }
            out.push_str(&line);
            out.push('\n');
        }
        for error in &list.errors {
            let line = format!("! {}: {}", error.provider, error.message);
            out.push_str(&s.yellow(&totem_protocol::display::displayable(&line)));
            out.push('\n');
        }
        if list.models.is_empty() && list.errors.is_empty() {
            out.push_str(
                "No models: add a provider with `totem provider add` (or start Ollama).\n",
            );
        }
        out.push_str(&s.dim(
            "/model NAME uses one for the next prompts; `totem models --probe` tells what each can do.\n",
        ));
        self.print(&out);
        Ok(())
    }

    async fn diff(&mut self, git: bool) -> anyhow::Result<()> {
        let diff = self
            .connection
            .client
            .call::<method::SessionDiff>(SessionDiffParams {
                session_id: self.session.id.clone(),
                run_id: None,
                git,
            })
            .await?;
        match diff.diff.as_str() {
            "" => self.note("No file changes."),
            text => self.show_diff(text),
        }
        Ok(())
    }

    fn set_mode(&mut self, arg: &str) {
        match arg {
            "" => {
                let default = super::status::DEFAULT_MODE;
                let mode = self.settings.mode.clone().unwrap_or_else(|| default.into());
                self.note(&format!(
                    "Mode: {mode}; the default is {default}. /mode plan or /mode build changes it."
                ));
            }
            mode => {
                self.settings.mode = Some(mode.to_string());
                self.note(&format!("The next prompts run in {mode} mode."));
                self.show_where();
            }
        }
    }

    async fn set_reasoning(&mut self, arg: &str) {
        match arg {
            "low" | "medium" | "high"
                if self.models().await.is_some()
                    && self
                        .current_entry()
                        .is_some_and(|m| !m.capabilities.thinking) =>
            {
                let model = self.current_model().unwrap_or_default();
                self.error(&format!(
                    "{model} cannot think, so a reasoning level has no effect on it. /model picks one that can; nothing changed."
                ));
            }
            "off" | "low" | "medium" | "high" => {
                self.settings.reasoning = Some(arg.to_string());
                self.note(&format!("Reasoning: {arg} for the next prompts."));
                self.show_where();
            }
            "" => {
                let level = self
                    .settings
                    .reasoning
                    .clone()
                    .unwrap_or_else(|| "the daemon's default".into());
                self.note(&format!(
                    "Reasoning: {level}. /reasoning off|low|medium|high changes it."
                ));
            }
            other => self.error(&format!(
                "unknown reasoning level {other}: use off, low, medium or high"
            )),
        }
    }

    async fn jobs(&mut self) -> anyhow::Result<()> {
        let list = self
            .connection
            .client
            .call::<method::JobList>(SessionRef {
                session_id: self.session.id.clone(),
            })
            .await?;
        if list.jobs.is_empty() {
            self.note(
                "No background jobs in this session (the model starts them with its job tool).",
            );
            return Ok(());
        }
        let s = self.style();
        let mut out = String::new();
        for job in &list.jobs {
            let state = match (&job.ended, job.running) {
                (_, true) => s.green(&format!("{:<14}", "running")),
                (Some(how), false) => s.dim(&format!("{how:<14}")),
                (None, false) => s.dim(&format!("{:<14}", "ended")),
            };
            let age = crate::format::duration_ms(job.elapsed_ms);
            out.push_str(&format!(
                "  {:<4} {state} {}  {}\n",
                job.id,
                crate::format::one_line(&job.command, 60),
                s.dim(&age)
            ));
        }
        self.print(&out);
        Ok(())
    }

    async fn terminals(&mut self) -> anyhow::Result<()> {
        let list = crate::terminal::list(&self.connection, Some(&self.session.id)).await?;
        self.print(&crate::terminal::describe(&list));
        Ok(())
    }

    /// `/terminal N`: the Nth terminal of `/terminals`, or one named by its name or id.
    async fn attach_terminal(&mut self, arg: &str) -> anyhow::Result<()> {
        let list = crate::terminal::list(&self.connection, Some(&self.session.id)).await?;
        let found = match arg.parse::<usize>() {
            Ok(n) => n.checked_sub(1).and_then(|i| list.get(i)),
            Err(_) => list.iter().find(|t| t.name == arg || t.id == arg),
        };
        let Some(terminal) = found else {
            self.error(&format!("no terminal {arg}; /terminals lists them"));
            return Ok(());
        };
        let ended = crate::terminal::attach(&self.connection, &terminal.id).await?;
        self.print(&crate::terminal::farewell(
            &ended,
            &terminal.name,
            &terminal.id,
        ));
        Ok(())
    }

    /// `/share N [off]`: shows terminal N of `/terminals` to the model, or hides it.
    async fn share_terminal(&mut self, arg: &str) -> anyhow::Result<()> {
        let (which, off) = match arg.trim().rsplit_once(' ') {
            Some((n, "off")) => (n.trim(), true),
            _ => (arg.trim(), false),
        };
        let list = crate::terminal::list(&self.connection, Some(&self.session.id)).await?;
        let found = match which.parse::<usize>() {
            Ok(n) => n.checked_sub(1).and_then(|i| list.get(i)),
            Err(_) => list.iter().find(|t| t.name == which || t.id == which),
        };
        let Some(terminal) = found else {
            self.error(&format!("no terminal {which}; /terminals lists them"));
            return Ok(());
        };
        let info = self
            .connection
            .client
            .call::<method::TerminalShare>(totem_protocol::TerminalShareParams {
                id: terminal.id.clone(),
                shared: !off,
            })
            .await?;
        self.print(&match (info.shared, info.opened_by.as_str()) {
            (true, "model") => format!("{} was started by the model; it sees it.\n", info.name),
            (true, _) => format!(
                "{} is shared: the model can read it and type into it (as you).\n",
                info.name
            ),
            (false, _) => format!("{} is hidden from the model again.\n", info.name),
        });
        Ok(())
    }

    async fn fork(&mut self) -> anyhow::Result<()> {
        let session = self
            .connection
            .client
            .call::<method::SessionFork>(SessionForkParams {
                session_id: self.session.id.clone(),
                message_id: None,
            })
            .await?;
        self.switch_to(session).await
    }

    /// `/abort`: its end arrives as the run's last event.
    async fn abort(&mut self) -> anyhow::Result<()> {
        self.connection
            .client
            .call::<method::SessionAbort>(SessionRef {
                session_id: self.session.id.clone(),
            })
            .await?;
        Ok(())
    }

    /// `/undo` and `/redo`: what they changed arrives as a changes.undone/redone event; files
    /// overwritten because of `force` are named here.
    async fn undo(&mut self, redo: bool, force: bool) -> anyhow::Result<()> {
        let params = SessionUndoParams {
            session_id: self.session.id.clone(),
            force,
        };
        let client = &self.connection.client;
        let applied = match redo {
            false => client.call::<method::SessionUndo>(params).await?,
            true => client.call::<method::SessionRedo>(params).await?,
        };
        if !applied.overwritten.is_empty() {
            self.note(&format!("Overwritten: {}", applied.overwritten.join(", ")));
        }
        // Undo gives back the prompt of the run it took back, to edit and send again.
        if let Some(prompt) = applied.prompt {
            self.note(
                "The undone prompt is back in the input line: edit and send it, or clear it.",
            );
            self.refill = Some(prompt);
        }
        Ok(())
    }

    /// `/compact`, `/init`: their outcome comes as a notice every client of the session sees.
    async fn command(&mut self, command: &str) -> anyhow::Result<()> {
        self.connection
            .client
            .call::<method::SessionCommand>(SessionCommandParams {
                session_id: self.session.id.clone(),
                command: command.to_string(),
                args: None,
                mode: self.settings.mode.clone(),
            })
            .await?;
        Ok(())
    }

    /// A diff, coloured.
    fn show_diff(&mut self, text: &str) {
        let text = totem_protocol::display::displayable(text);
        let s = self.style();
        let mut out = String::new();
        for line in text.lines() {
            let drawn = if line.starts_with('+') && !line.starts_with("+++") {
                s.green(line)
            } else if line.starts_with('-') && !line.starts_with("---") {
                s.red(line)
            } else if line.starts_with("@@") {
                s.cyan(line)
            } else {
                line.to_string()
            };
            out.push_str(&drawn);
            out.push('\n');
        }
        self.print(&out);
    }
}
