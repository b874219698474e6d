//! `totem attach` (and bare `totem`): the interactive prompt. The async side owns the connection,
//! the subscription and the renderer; the line editor runs on its own thread ([`input`]). Leaving
//! never stops a run: the daemon owns it, and the reattach command is printed on the way out.

mod attach;
mod commands;
mod input;
mod shell;
mod spinner;
mod status;

use std::io::Write;
use std::time::{Duration, Instant};

use totem_client::{ClientError, EventStream, Received};
use totem_protocol::{
    Attachment, ErrorCode, EventKind, Method, PermissionQuestion, PermissionReply,
    PermissionReplyParams, Project, RunStatus, Session, SessionMessagesParams, SessionPromptParams,
    SessionRef, SessionStatus, method,
};

use crate::cli::{AttachArgs, reasoning_level};
use crate::daemon::{self, Connection, Endpoint};
use crate::exit::Exit;
use crate::project::HomeFolder;
use crate::render::{Chunk, LiveArea, Options, Renderer, Style, TextMode};
use input::{Input, LineEditor};
use spinner::Spinner;
use totem_protocol::display::displayable;

/// Messages replayed when attaching, so the screen shows where the session stands.
const REPLAY_MESSAGES: u32 = 40;
/// Events replayed when attaching to a daemon that cannot list the newest messages.
const REPLAY_EVENTS: u64 = 200;
/// Two Ctrl-C within this time leave.
const DOUBLE_INTERRUPT: Duration = Duration::from_secs(1);
/// A run that took longer than this rings the bell when it ends (`TOTEM_NOTIFY_AFTER`, seconds).
const NOTIFY_AFTER: Duration = Duration::from_secs(10);

const PROMPT: &str = "› ";

/// What the loop does after an input.
enum Flow {
    Continue,
    Leave,
}

/// A run going on in the attached session.
struct Running {
    id: Option<String>,
    since: Instant,
}

pub async fn attach(endpoint: &Endpoint, args: AttachArgs) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start_interactive(endpoint).await?;
    if let Some(id) = &args.terminal {
        let ended = crate::terminal::attach(&connection, id).await?;
        print!("{}", crate::terminal::farewell(&ended, id, id));
        return Ok(Exit::Success);
    }
    let (project, session) = match &args.session {
        Some(id) => {
            let session = crate::project::get_session(&connection, id).await?;
            let project = match &args.dir {
                Some(dir) => crate::project::open(&connection, Some(dir), HomeFolder::Ask).await?,
                None => crate::project::of_session(&connection, &session).await?,
            };
            (project, session)
        }
        None => {
            let project =
                crate::project::open(&connection, args.dir.as_deref(), HomeFolder::Ask).await?;
            let latest = match args.new {
                true => None,
                false => crate::project::latest_session(&connection, &project).await?,
            };
            let session = match latest {
                Some(session) => session,
                None => crate::project::create_session(&connection, &project, None).await?,
            };
            (project, session)
        }
    };
    let history = endpoint
        .home
        .join("history")
        .join(format!("{}.history", project.id));
    let editor = LineEditor::spawn(
        history,
        commands::names(),
        std::path::PathBuf::from(&project.path),
    )?;
    let style = Style::for_stdout();
    let options = Options {
        style,
        text: if style.color {
            TextMode::Markdown
        } else {
            TextMode::Lines
        },
        reasoning: true,
        user_messages: true,
        run_ends: true,
        thinking_command: true,
    };
    let (shell_done_tx, shell_done) = tokio::sync::mpsc::unbounded_channel();
    let mut repl = Repl {
        endpoint,
        connection,
        project,
        session: session.clone(),
        stream: None,
        last_seq: 0,
        options,
        renderer: Renderer::new(options),
        editor,
        running: None,
        last_interrupt: None,
        picking: None,
        deleting: false,
        questions: Vec::new(),
        settings: PromptSettings::default(),
        disconnected: false,
        live_after: 0,
        spinner: None,
        spins: spins(),
        shell_done_tx,
        shell_done,
        shell_outputs: Vec::new(),
        refill: None,
        draft: String::new(),
        held: None,
        asking_label: false,
        question_gone: false,
        live: String::new(),
        aborting: None,
        queued: Vec::new(),
        live_rows: 0,
        live_is_spinner: false,
        reading_prompt: PROMPT.to_string(),
        echo: None,
        unsettled: false,
        renderer_live: false,
        models: None,
        context: None,
        cost: None,
    };
    repl.renderer_live = repl.spins && repl.editor.printer.is_some();
    // Ctrl-C is taken from before the greeting: pressed as soon as it shows, it must not end
    // the process.
    let sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    repl.switch_to(session).await?;
    repl.print(&format!(
        "{}\n",
        style.dim("Type a prompt, /help for commands, Ctrl-D to leave.")
    ));
    let exit = repl.run(sigint).await;
    repl.editor.stop();
    // The line editor is done: write the way back in straight to stdout, flushed, so it cannot be
    // lost in the printer's queue when the process ends right after; what is queued goes first.
    repl.editor.flush();
    repl.editor.printer = None;
    // Left during a run: the live lines (the spinner's, the answer's unfinished one, the queued
    // prompts) and the line left on are erased as the farewell is printed (`print` goes up over
    // them and clears to the end), so no frozen "waiting for the model" stays behind.
    repl.live.clear();
    repl.aborting = None;
    repl.queued.clear();
    repl.echo = None;
    repl.print(&format!(
        "Left session {}; a running run goes on. Reattach with:\n  {}\n",
        repl.session.id,
        repl.endpoint.reattach_command(&repl.session.id)
    ));
    exit
}

struct Repl<'a> {
    endpoint: &'a Endpoint,
    connection: Connection,
    project: Project,
    session: Session,
    stream: Option<EventStream>,
    /// The newest event seen, to resubscribe after a lag.
    last_seq: u64,
    options: Options,
    renderer: Renderer,
    editor: LineEditor,
    running: Option<Running>,
    last_interrupt: Option<Instant>,
    /// `/sessions` listed these; the next line picks one by number.
    picking: Option<Vec<Session>>,
    /// `/delete` asked; the next line answers.
    deleting: bool,
    /// Permission questions waiting for this person, oldest first.
    questions: Vec<Question>,
    /// `/mode`, `/model` and `/reasoning`, sent with every prompt.
    settings: PromptSettings,
    /// The connection to the daemon was lost; the next line reconnects.
    disconnected: bool,
    /// Events up to this sequence number are replays; after it, live.
    live_after: u64,
    /// Waiting for the first output of a run.
    spinner: Option<Spinner>,
    /// A spinner can be drawn: stdin and stdout are a terminal that moves its cursor.
    spins: bool,
    /// `!command` answers, from the tasks that wait for them.
    shell_done_tx: tokio::sync::mpsc::UnboundedSender<shell::ShellDone>,
    shell_done: tokio::sync::mpsc::UnboundedReceiver<shell::ShellDone>,
    /// `!command`s and their output, for the next prompt.
    shell_outputs: Vec<String>,
    /// Text for the next input line (an undone prompt, a refused one).
    refill: Option<String>,
    /// The text the line being read started with (a restored draft; empty: none).
    draft: String,
    /// A line typed while a question waited that was not an answer: it comes back after the
    /// answer.
    held: Option<String>,
    /// The line being read shows the question's label (`allow? o/s/p/d›`).
    asking_label: bool,
    /// Ctrl-C took away a question the person may still be answering.
    question_gone: bool,
    /// The live line above the prompt: the spinner's frame, or the unfinished line being
    /// streamed (empty: none); it is drawn again under whatever is printed.
    live: String,
    /// "Aborting the run…", under the live line until the run's end is shown.
    aborting: Option<String>,
    /// Prompts sent here or elsewhere that wait for the run before them, drawn under the live
    /// line until their run starts (then the prompt is printed in its place in the conversation).
    queued: Vec<String>,
    /// The rows the live lines take on screen now, with the line just entered below them when
    /// it is to be erased (0: nothing to erase).
    live_rows: usize,
    /// The live line is the spinner's frame.
    live_is_spinner: bool,
    /// The renderer draws unfinished lines live (a terminal that moves its cursor).
    renderer_live: bool,
    /// The label of the line being read.
    reading_prompt: String,
    /// A line entered during a run, erased with the live lines, to print again above them (as
    /// the record of a command or an answer) at the next print; None for a prompt, which shows
    /// as queued and then in its place.
    echo: Option<String>,
    /// The live lines and the line just entered are to be erased and drawn again.
    unsettled: bool,
    /// `model.list`, asked at start and again when needed.
    models: Option<totem_protocol::ModelList>,
    /// Context use of the newest model request: tokens used, window.
    context: Option<(u64, u64)>,
    /// The session's cost so far, from its newest `usage` event.
    cost: Option<f64>,
}

/// Whether this terminal gets a spinner: a TTY (the editor has an external printer) that is not
/// a dumb one.
fn spins() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
        && std::io::stdin().is_terminal()
        && std::env::var("TERM").is_ok_and(|t| !t.is_empty() && t != "dumb")
}

/// What the next prompts ask for; unset fields leave the daemon's choice.
#[derive(Debug, Default)]
pub(crate) struct PromptSettings {
    pub mode: Option<String>,
    pub model: Option<String>,
    pub reasoning: Option<String>,
}

/// A permission question shown here and not answered yet.
struct Question {
    id: String,
    answered_here: bool,
    /// The question when its proposed diff was folded (`v` shows all of it).
    folded: Option<PermissionQuestion>,
}

/// A word that answers a permission question (what `answer` takes).
fn answer_word(text: &str) -> bool {
    let word = text.split_whitespace().next().unwrap_or("").to_lowercase();
    matches!(
        word.as_str(),
        "o" | "once" | "y" | "yes" | "s" | "session" | "p" | "project" | "d" | "deny" | "n" | "no"
    )
}

const ANSWER_HINT: &str =
    "Answer: o = once · s = always in this session · p = always in this project · d [note] = deny";

impl Repl<'_> {
    async fn run(&mut self, mut sigint: tokio::signal::unix::Signal) -> anyhow::Result<Exit> {
        self.editor.read(PROMPT);
        let mut model_check = Some(Box::pin(status::fetch_models(
            self.connection.client.clone(),
            Duration::from_secs(3),
        )));
        loop {
            tokio::select! {
                list = once(&mut model_check) => {
                    model_check = None;
                    if let Some(line) = list.as_ref().and_then(status::no_model_line) {
                        self.error(&line);
                    }
                    self.models = list;
                    self.show_where();
                }
                input = self.editor.lines.recv() => {
                    let Some(input) = input else { return Ok(Exit::Success) };
                    let flow = self.on_input(input).await;
                    if self.unsettled {
                        self.redraw_live();
                    }
                    match flow {
                        Flow::Continue => {
                            let prompt = self.prompt();
                            let asking = self.questions.iter().any(|q| !q.answered_here);
                            self.asking_label = asking;
                            let initial = match asking {
                                true => String::new(),
                                false => self
                                    .refill
                                    .take()
                                    .or_else(|| self.held.take())
                                    .unwrap_or_default(),
                            };
                            self.draft.clone_from(&initial);
                            self.editor.read_with(&prompt, initial);
                            self.reading_prompt = prompt;
                        }
                        Flow::Leave => return Ok(Exit::Success),
                    }
                }
                Some(()) = self.editor.escapes.recv() => self.on_escape().await,
                event = next_event(&mut self.stream) => self.on_event(event).await,
                _ = spinner_due(&self.spinner) => self.spin(),
                Some(done) = self.shell_done.recv() => self.on_shell_done(done),
                // Ctrl-C arrives as a signal only while the editor is not reading a line.
                _ = sigint.recv() => {
                    if let Flow::Leave = self.on_interrupt().await {
                        return Ok(Exit::Success);
                    }
                }
            }
        }
    }

    fn prompt(&self) -> String {
        if self.questions.iter().any(|q| !q.answered_here) {
            return "allow? o/s/p/d› ".to_string();
        }
        if self.deleting {
            return "delete? y/N› ".to_string();
        }
        match &self.picking {
            Some(list) => format!(
                "pick 1-{}, or type words to filter (Enter keeps this one)› ",
                list.len()
            ),
            None => PROMPT.to_string(),
        }
    }

    /// Prints whole lines (ending in a newline) above the prompt, over the live line when one
    /// is shown, which is drawn again under them.
    fn print(&mut self, text: &str) {
        let mut out = spinner::erase(std::mem::take(&mut self.live_rows));
        self.unsettled = false;
        if let Some(echo) = self.echo.take() {
            out.push_str(&echo);
            out.push('\n');
        }
        out.push_str(text);
        self.push_live(&mut out);
        let text = out.as_str();
        match &mut self.editor.printer {
            // Keep the newline: while a line is being read rustyline adds none to text that has
            // one, and while none is, the text is written as it is.
            Some(printer) => {
                let _ = printer.print(text.to_string());
            }
            None => {
                let mut stdout = std::io::stdout().lock();
                let _ = stdout.write_all(text.as_bytes());
                let _ = stdout.flush();
            }
        }
    }

    fn style(&self) -> Style {
        self.options.style
    }

    /// `text` (made displayable: it may carry the daemon's or a provider's words) in red.
    fn error(&mut self, text: &str) {
        let line = self.style().red(&displayable(text));
        self.print(&format!("{line}\n"));
    }

    /// `text` (made displayable) dimmed.
    fn note(&mut self, text: &str) {
        let line = self.style().dim(&displayable(text));
        self.print(&format!("{line}\n"));
    }

    /// Draws the spinner's next frame.
    fn spin(&mut self) {
        let Some(frame) = self.spinner.as_mut().map(Spinner::frame) else {
            return;
        };
        self.draw_live(frame);
        self.live_is_spinner = true;
    }

    /// Replaces the live line above the prompt with `line` (empty: takes it away).
    fn draw_live(&mut self, line: String) {
        self.live = line;
        self.live_is_spinner = false;
        self.redraw_live();
    }

    /// The live lines: the live line (spinner or unfinished answer line), then the queued
    /// prompts.
    fn live_lines(&self) -> Vec<&str> {
        let live = (!self.live.is_empty()).then_some(self.live.as_str());
        live.into_iter()
            .chain(self.aborting.as_deref())
            .chain(self.queued.iter().map(String::as_str))
            .collect()
    }

    /// Appends the live lines to `out`, each ending in a newline, and notes the rows they take.
    fn push_live(&mut self, out: &mut String) {
        if self.editor.printer.is_none() {
            return;
        }
        let cols = LiveArea::of_terminal().cols;
        let mut rows = 0;
        for line in self.live_lines() {
            out.push_str(line);
            out.push('\n');
            rows += crate::render::rows(line, cols);
        }
        self.live_rows = rows;
    }

    /// Erases what the live lines (and a line just entered) take, and draws them again.
    fn redraw_live(&mut self) {
        if self.editor.printer.is_none() {
            return;
        }
        self.unsettled = false;
        let rows = std::mem::take(&mut self.live_rows);
        let mut out = spinner::erase(rows);
        if let Some(echo) = self.echo.take() {
            out.push_str(&echo);
            out.push('\n');
        }
        self.push_live(&mut out);
        if out.is_empty() {
            return;
        }
        if !out.ends_with('\n') {
            // Only erased: up one more, and the newline brings the cursor back to the cleared
            // line, where the prompt is drawn again (a text that ends in one is printed as it
            // is, whether the editor reads a line or not).
            out.push_str("\x1b[1A\n");
        }
        if let Some(printer) = &mut self.editor.printer {
            let _ = printer.print(out);
        }
    }

    /// Starts the spinner for a run this terminal waits on.
    fn start_spinner(&mut self) {
        if self.spins && self.spinner.is_none() {
            self.spinner = Some(Spinner::start(self.style().color));
        }
    }

    /// Erases the spinner, if shown, and stops it.
    fn stop_spinner(&mut self) {
        if self.spinner.take().is_some() && self.live_is_spinner {
            self.draw_live(String::new());
        }
    }

    async fn on_input(&mut self, input: Input) -> Flow {
        // The line just entered now sits under the live lines (the spinner, the answer's
        // unfinished line, queued prompts). During a run it is erased with them: the answer goes
        // on below what came before it, a prompt shows as queued (then in its place when its run
        // starts), and a command or an answer is printed again above the live lines.
        let during = self.running.is_some() || self.live_rows > 0;
        if during && self.editor.printer.is_some() {
            let cols = LiveArea::of_terminal().cols;
            let entered = match &input {
                Input::Line { raw, .. } | Input::Interrupted { raw } => {
                    echo_rows(&self.reading_prompt, raw, cols)
                }
                Input::Eof => 1,
                Input::Failed(_) => 0,
            };
            self.live_rows += entered;
            self.unsettled = true;
            if let Input::Line { raw, .. } = &input {
                self.echo = Some(format!("{}{raw}", self.reading_prompt));
            }
        }
        match input {
            Input::Line { text: line, .. } => {
                self.last_interrupt = None;
                // A slash command typed after a restored draft (an undone prompt) runs as a
                // command, and the draft comes back: `/undo` twice undoes two runs, it does not
                // send "the prompt/undo" to the model.
                let draft = std::mem::take(&mut self.draft);
                if let Some(command) = commands::typed_after(&draft, &line) {
                    let flow = self.slash(&command).await;
                    if self.refill.is_none() {
                        self.refill = Some(draft);
                    }
                    return flow;
                }
                if self.disconnected {
                    self.reconnect().await;
                    if line.trim().is_empty() {
                        return Flow::Continue;
                    }
                }
                if let Some(list) = self.picking.take() {
                    self.pick(list, line.trim()).await;
                    return Flow::Continue;
                }
                if std::mem::take(&mut self.deleting) {
                    self.confirm_delete(line.trim()).await;
                    return Flow::Continue;
                }
                let text = line.trim();
                if text.is_empty() {
                    return Flow::Continue;
                }
                if text.starts_with('/') {
                    return self.slash(text).await;
                }
                if self.questions.iter().any(|q| !q.answered_here) {
                    self.answer(&line).await;
                    return Flow::Continue;
                }
                // Read under the question's label, but the question went meanwhile (the run was
                // aborted, another terminal answered): an answer word is not a prompt.
                let gone = std::mem::take(&mut self.asking_label)
                    | std::mem::take(&mut self.question_gone);
                if gone && answer_word(text) {
                    self.note("That question is gone (answered elsewhere, or its run ended); nothing was sent.");
                    return Flow::Continue;
                }
                if let Some(command) = text.strip_prefix('!') {
                    self.shell(command.trim());
                    return Flow::Continue;
                }
                // Entered during a run, the line was erased: the prompt shows as queued, then in
                // its place when its run starts (echoed by the renderer, not printed here).
                let own = self.echo.take().is_none();
                let (text, attachments) = self.compose(line.trim_end());
                if !self.send_prompt(text, attachments, own).await {
                    // Refused: the prompt goes back in the line, to send again once fixed.
                    self.refill = Some(line.trim_end().to_string());
                }
                Flow::Continue
            }
            Input::Interrupted { .. } => self.on_interrupt().await,
            Input::Eof => Flow::Leave,
            Input::Failed(e) => {
                self.error(&format!("the line editor failed: {e}"));
                Flow::Leave
            }
        }
    }

    /// Sends a prompt; false when totemd did not take it. `own`: it shows on screen as typed,
    /// not to be echoed again.
    async fn send_prompt(&mut self, text: String, attachments: Vec<String>, own: bool) -> bool {
        if own {
            self.renderer.sent_prompt(&text);
        }
        let sent = text.clone();
        let params = SessionPromptParams {
            session_id: self.session.id.clone(),
            text,
            mode: self.settings.mode.clone(),
            model: self.settings.model.clone(),
            reasoning: self.settings.reasoning.as_deref().and_then(reasoning_level),
            allow: Vec::new(),
            attachments: attachments
                .into_iter()
                .map(|path| Attachment {
                    path,
                    range: None,
                    text: None,
                })
                .collect(),
        };
        let chosen: Vec<&str> = [
            ("mode", params.mode.is_some()),
            ("model", params.model.is_some()),
            ("reasoning", params.reasoning.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect();
        match self
            .connection
            .client
            .call::<method::SessionPrompt>(params)
            .await
        {
            Ok(accepted) => {
                // Queued behind a run going on, it gets its spinner when its run starts.
                if self.running.is_none() {
                    self.start_spinner();
                    self.running = Some(Running {
                        id: Some(accepted.run_id),
                        since: Instant::now(),
                    });
                }
                return true;
            }
            Err(ClientError::Rpc { code, message, .. })
                if code == ErrorCode::INVALID_PARAMS.0 && !chosen.is_empty() =>
            {
                self.error(&format!(
                    "totemd refused the prompt ({message}). It is back in the line: change the {} it names, then send it again",
                    chosen.join(" or ")
                ));
            }
            Err(e) => self.error(&format!(
                "totemd did not take the prompt: {e}. It is back in the line: try again, or check `totem daemon status`"
            )),
        }
        if own {
            self.renderer.forget_prompt(&sent);
        }
        false
    }

    /// Answers the oldest open permission question.
    async fn answer(&mut self, line: &str) {
        let text = line.trim();
        let Some(question) = self.questions.iter_mut().find(|q| !q.answered_here) else {
            return;
        };
        let (word, note) = match text.split_once(char::is_whitespace) {
            Some((word, note)) => (word, Some(note.trim().to_string())),
            None => (text, None),
        };
        let reply = match word.to_lowercase().as_str() {
            "v" | "view" => {
                let folded = question.folded.clone();
                let all = match folded {
                    Some(question) => {
                        crate::render::question_diff(&question, self.style(), usize::MAX)
                    }
                    None => String::new(),
                };
                match all.is_empty() {
                    true => self.note("This question has no more of its diff to show."),
                    false => self.print(&all),
                }
                self.note(ANSWER_HINT);
                return;
            }
            "o" | "once" | "y" | "yes" => PermissionReply::Once,
            "s" | "session" => PermissionReply::AlwaysSession,
            "p" | "project" => PermissionReply::AlwaysProject,
            "d" | "deny" | "n" | "no" => PermissionReply::Deny { note },
            _ => {
                // Typed while the question came, most likely: kept for after the answer.
                if self.held.is_none() {
                    self.held = Some(line.trim_end().to_string());
                    self.note("Your text is kept: it comes back in the line after the answer.");
                }
                self.note(ANSWER_HINT);
                return;
            }
        };
        question.answered_here = true;
        let params = PermissionReplyParams {
            session_id: self.session.id.clone(),
            question_id: question.id.clone(),
            reply,
        };
        if let Err(e) = self
            .connection
            .client
            .call::<method::PermissionReply>(params)
            .await
        {
            self.error(&format!("the answer was not taken: {e}"));
        }
    }

    async fn on_interrupt(&mut self) -> Flow {
        let now = Instant::now();
        if self
            .last_interrupt
            .is_some_and(|t| now.duration_since(t) < DOUBLE_INTERRUPT)
        {
            return Flow::Leave;
        }
        self.last_interrupt = Some(now);
        if self.running.is_none() {
            self.note("(Ctrl-C again within a second, or Ctrl-D, leaves)");
            return Flow::Continue;
        }
        self.abort_run("Ctrl-C again within a second leaves").await;
        Flow::Continue
    }

    /// Esc: aborts the run going on; else does nothing (the line being typed stays).
    async fn on_escape(&mut self) {
        if self.running.is_some() {
            self.abort_run("Ctrl-C twice within a second leaves").await;
        }
    }

    /// Aborts the session's run; `leaving` says how to leave.
    async fn abort_run(&mut self, leaving: &str) {
        if !self.connection.has(method::SessionAbort::NAME) {
            self.note(&format!(
                "This daemon cannot abort runs yet (no session.abort); the run goes on. {leaving}."
            ));
            return;
        }
        let params = SessionRef {
            session_id: self.session.id.clone(),
        };
        match self
            .connection
            .client
            .call::<method::SessionAbort>(params)
            .await
        {
            Ok(_) => {
                // The open questions go with the run: none waits for an answer here now, so the
                // next line is read as a prompt again, not under `allow? o/s/p/d›`.
                for question in &mut self.questions {
                    self.question_gone |= !question.answered_here;
                    question.answered_here = true;
                }
                // Under the answer's unfinished line, not above it; the run's end replaces it.
                let line = format!("Aborting the run… ({leaving})");
                match self.editor.printer.is_some() {
                    true => {
                        self.aborting = Some(self.style().dim(&line));
                        self.redraw_live();
                    }
                    false => self.note(&line),
                }
            }
            Err(e) => self.error(&format!("cannot abort the run: {e}")),
        }
    }

    async fn on_event(&mut self, received: Option<Received>) {
        let Some(received) = received else {
            self.stream = None;
            self.disconnected = true;
            self.error(
                "Lost the connection to totemd. Press Enter to reconnect (it starts again if needed), Ctrl-D to leave.",
            );
            return;
        };
        let seq = match &received.event {
            Some(event) => Some(event.seq),
            None => received.json["seq"].as_u64(),
        };
        if let Some(seq) = seq {
            self.last_seq = self.last_seq.max(seq);
        }
        let live = seq.is_some_and(|seq| seq > self.live_after);
        let Some(kind) = received.kind() else {
            // A kind newer than this build: its name is shown, it steers nothing.
            let chunks = self.renderer.event(&received);
            self.print_chunks(chunks, "", false);
            return;
        };
        if let EventKind::Lagged {} = kind {
            self.resubscribe().await;
            return;
        }
        // A bell (and desktop notice) rides on the line it belongs to: a printed line of its own
        // would leave a blank one.
        let mut alert = String::new();
        let ended = kind.ended_run();
        if let Some(run) = ended
            && let Some(running) = self.running.take()
            && running.id.as_deref().is_none_or(|id| id == run.id)
        {
            alert = self.notice_for(running.since.elapsed(), run.status);
        }
        match kind {
            EventKind::RunStarted { run } => {
                self.running = Some(Running {
                    id: Some(run.id.clone()),
                    since: Instant::now(),
                });
            }
            EventKind::PermissionAsked { question } => {
                let lines = question.diff.as_deref().map_or(0, |d| d.lines().count());
                self.questions.push(Question {
                    id: question.id.clone(),
                    answered_here: false,
                    folded: (lines > crate::render::QUESTION_DIFF_LINES).then(|| question.clone()),
                });
            }
            EventKind::PermissionResolved {
                question_id, reply, ..
            } => {
                if let Some(i) = self.questions.iter().position(|q| q.id == *question_id) {
                    let question = self.questions.remove(i);
                    // Only live: a replay does not know where its questions were answered.
                    if live && !question.answered_here && reply.is_some() {
                        self.note("(answered in another terminal)");
                    }
                }
            }
            EventKind::SessionUpdated { session } => self.session = session.clone(),
            EventKind::Usage {
                session,
                context_tokens,
                context_window,
                ..
            } => {
                if let (Some(used), Some(window)) = (context_tokens, context_window) {
                    self.context = Some((*used, *window));
                }
                self.cost = session.cost_usd.or(self.cost);
            }
            _ => {}
        }
        if self.renderer_live {
            self.renderer.set_live(Some(LiveArea::of_terminal()));
        }
        let chunks = self.renderer.event(&received);
        let queued = self.renderer.queued_lines();
        let mut requeued = queued != self.queued;
        if ended.is_some() {
            requeued |= self.aborting.take().is_some();
        }
        self.queued = queued;
        // The first delta of any kind, a question or the run's end stops the spinner; a notice
        // or another terminal's prompt is printed above it and it goes on.
        let first_output = matches!(
            kind,
            EventKind::PartStarted { .. }
                | EventKind::PartDelta { .. }
                | EventKind::PartDone { .. }
                | EventKind::PermissionAsked { .. }
                | EventKind::PermissionResolved { .. }
        );
        let deleted = matches!(kind, EventKind::SessionDeleted {});
        if matches!(kind, EventKind::RunStarted { .. }) && live {
            self.start_spinner();
        }
        self.print_chunks(chunks, &alert, requeued);
        if first_output || ended.is_some() || deleted {
            self.stop_spinner();
        }
        if ended.is_some() && live {
            self.show_where();
        }
        if let EventKind::PermissionAsked { .. } = kind {
            if self.connection.has(method::PermissionReply::NAME) {
                let bell = if live && self.style().color {
                    notice("Totem: a question waits for you", &notify_setting())
                } else {
                    String::new()
                };
                let folded = self.questions.last().is_some_and(|q| q.folded.is_some());
                let hint = match folded {
                    true => format!("{ANSWER_HINT} · v = the whole diff"),
                    false => ANSWER_HINT.to_string(),
                };
                let hint = self.style().dim(&hint);
                self.print(&format!("{hint}{bell}\n"));
            } else {
                self.note("This daemon cannot take answers yet (no permission.reply).");
            }
        }
        if deleted {
            self.stream = None;
            self.note("/new starts a session, /sessions picks another, Ctrl-D leaves.");
        }
    }

    /// Prints what the renderer drew, `alert` riding on its last line; the live line it gave
    /// last is drawn under it (and the live lines again when `redraw`: the queued ones changed).
    fn print_chunks(&mut self, chunks: Vec<Chunk>, alert: &str, redraw: bool) {
        let mut live = None;
        let mut lines = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            match chunk {
                Chunk::Live(line) => live = Some(line),
                Chunk::Answer(text) | Chunk::Aside(text) => lines.push(text),
            }
        }
        if let Some(line) = live {
            if lines.is_empty() {
                return self.draw_live(line);
            }
            self.live = line;
            self.live_is_spinner = false;
        }
        if lines.is_empty() && redraw {
            return self.redraw_live();
        }
        let last = lines.len().saturating_sub(1);
        for (i, text) in lines.into_iter().enumerate() {
            match i == last && !alert.is_empty() {
                true => {
                    let line = text.strip_suffix('\n').unwrap_or(&text);
                    self.print(&format!("{line}{alert}\n"));
                }
                false => self.print(&text),
            }
        }
    }

    /// The bell and an OSC 9 desktop notice, when a long run ends on a terminal.
    fn notice_for(&self, took: Duration, status: RunStatus) -> String {
        let after = std::env::var("TOTEM_NOTIFY_AFTER")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map_or(NOTIFY_AFTER, Duration::from_secs);
        if !self.style().color || took < after {
            return String::new();
        }
        let what = crate::render::ended_how(status);
        notice(&format!("Totem: run {what}"), &notify_setting())
    }

    /// Follows `session` from now on, replaying its recent events.
    async fn switch_to(&mut self, session: Session) -> anyhow::Result<()> {
        if let Some(old) = self.stream.take() {
            let _ = self.connection.client.unsubscribe(&old.subscription).await;
        }
        self.renderer = Renderer::new(self.options);
        self.stop_spinner();
        self.queued.clear();
        self.aborting = None;
        self.draw_live(String::new());
        let (after, earlier) = self.replay_from(&session).await;
        self.stream = Some(self.connection.client.subscribe(&session.id, after).await?);
        self.last_seq = after;
        self.live_after = session.last_seq;
        self.context = None;
        self.cost = None;
        self.questions.clear();
        self.running = (session.status == SessionStatus::Running).then(|| Running {
            id: None,
            since: Instant::now(),
        });
        let s = self.style();
        let title = if session.title.is_empty() {
            "new session"
        } else {
            &session.title
        };
        let header = format!("── {} · {} · {} ──", self.project.name, title, session.id);
        self.session = session;
        self.print(&format!("{}\n", s.bold(&header)));
        if earlier > 0 {
            let plural = if earlier == 1 { "" } else { "s" };
            self.note(&format!("({earlier} earlier message{plural} not shown)"));
        }
        Ok(())
    }

    /// Where the replay of `session` starts: just before its newest messages (by their own
    /// numbers, which gaps in the numbering cannot throw off), and how many messages come before.
    /// The renderer learns which of their runs are undone.
    async fn replay_from(&mut self, session: &Session) -> (u64, u64) {
        let params = SessionMessagesParams {
            session_id: session.id.clone(),
            after_seq: 0,
            limit: Some(REPLAY_MESSAGES),
            newest: true,
        };
        match self
            .connection
            .client
            .call::<method::SessionMessages>(params)
            .await
        {
            Ok(page) => match page.messages.first() {
                Some(first) => {
                    let undone = page
                        .messages
                        .iter()
                        .filter(|m| m.undone)
                        .filter_map(|m| m.run_id.clone());
                    self.renderer.set_undone(undone);
                    (
                        first.seq.saturating_sub(1),
                        session
                            .message_count
                            .saturating_sub(page.messages.len() as u64),
                    )
                }
                None => (0, 0),
            },
            Err(_) => (session.last_seq.saturating_sub(REPLAY_EVENTS), 0),
        }
    }

    async fn resubscribe(&mut self) {
        match self
            .connection
            .client
            .subscribe(&self.session.id, self.last_seq)
            .await
        {
            Ok(stream) => self.stream = Some(stream),
            Err(e) => self.error(&format!("cannot follow the session again: {e}")),
        }
    }

    async fn reconnect(&mut self) {
        match daemon::connect_or_start_interactive(self.endpoint).await {
            Ok(connection) => {
                self.connection = connection;
                self.disconnected = false;
                self.resubscribe().await;
                self.note("Reconnected.");
            }
            Err(e) => self.error(&format!("{e:#}")),
        }
    }

    async fn pick(&mut self, list: Vec<Session>, answer: &str) {
        if answer.is_empty() {
            return;
        }
        if answer.parse::<usize>().is_err() {
            // Words, not a number: the list again, filtered by them.
            if let Err(e) = self.list_sessions(answer).await {
                self.error(&format!("cannot list the sessions: {e:#}"));
            }
            return;
        }
        let chosen = answer
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| list.get(i).cloned());
        match chosen {
            Some(session) => {
                if let Err(e) = self.switch_to(session).await {
                    self.error(&format!("cannot switch: {e}"));
                }
            }
            None => self.error(&format!(
                "no session number {answer}; /sessions lists them again"
            )),
        }
    }
}

/// The rows a line entered at `prompt` takes on screen (continued lines have no label).
fn echo_rows(prompt: &str, raw: &str, cols: usize) -> usize {
    raw.split('\n')
        .enumerate()
        .map(|(i, line)| match i {
            0 => crate::render::rows(&format!("{prompt}{line}"), cols),
            _ => crate::render::rows(line, cols),
        })
        .sum()
}

/// `TOTEM_NOTIFY`: how notices reach the person (default `osc9`).
fn notify_setting() -> String {
    std::env::var("TOTEM_NOTIFY").unwrap_or_default()
}

/// The bytes of a notice: `off` nothing, `bell` the bell alone, `osc777` the bell and an OSC 777
/// desktop notification (urxvt, foot, some GNOME terminals), anything else the bell and OSC 9
/// (iTerm2, WezTerm, Windows Terminal, kitty).
fn notice(text: &str, setting: &str) -> String {
    match setting.trim().to_ascii_lowercase().as_str() {
        "off" | "none" | "0" => String::new(),
        "bell" => "\x07".into(),
        "osc777" | "777" => format!("\x1b]777;notify;Totem;{text}\x07\x07"),
        _ => format!("\x1b]9;{text}\x07\x07"),
    }
}

/// The output of a future that runs once; pending for ever after (or when there is none).
async fn once<F: std::future::Future + Unpin>(future: &mut Option<F>) -> F::Output {
    match future {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

/// Resolves when the spinner's next frame is due; never without a spinner.
async fn spinner_due(spinner: &Option<Spinner>) {
    match spinner {
        Some(spinner) => tokio::time::sleep_until(spinner.next_frame()).await,
        None => std::future::pending().await,
    }
}

async fn next_event(stream: &mut Option<EventStream>) -> Option<Received> {
    match stream {
        Some(stream) => stream.next_received().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::notice;

    #[test]
    fn notices_follow_the_setting() {
        assert_eq!(notice("hi", "off"), "");
        assert_eq!(notice("hi", "bell"), "\x07");
        assert_eq!(notice("hi", "osc777"), "\x1b]777;notify;Totem;hi\x07\x07");
        assert_eq!(notice("hi", ""), "\x1b]9;hi\x07\x07");
    }
}
