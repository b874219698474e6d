//! Session events as terminal text. [`Renderer`] turns each event (typed when this build knows its
//! kind, else its JSON, so kinds newer than this build still show their name) into [`Chunk`]s; the
//! caller decides where they go (stdout for `totem run`, the REPL's external printer for
//! `totem attach`).
//!
//! A new event kind gets one arm in [`Renderer::known`]: the match is exhaustive.

mod highlight;
mod markdown;
mod tools;

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;

use serde_json::Value;
use totem_client::Received;
use totem_protocol::{
    EventKind, Message, NoticeLevel, Part, PartType, PermissionQuestion, PermissionReply,
    QuestionKind, Role, Run, RunStatus, TodoStatus, Usage,
};

use crate::format::one_line;
use totem_protocol::display::{displayable, displayable_json, is_displayable_json};

/// The event with every string in it made displayable (control characters, CR, ESC and bidi
/// controls shown as visible escapes; see [`totem_protocol::display`]): model, tool and project
/// text reaches the terminal only this way, and Totem's own styling is added after.
pub fn displayable_event(received: &Received) -> std::borrow::Cow<'_, Received> {
    if is_displayable_json(&received.json) {
        return std::borrow::Cow::Borrowed(received);
    }
    let mut json = received.json.clone();
    displayable_json(&mut json);
    std::borrow::Cow::Owned(Received::from(json))
}

/// Lines of a proposed diff shown in a permission question before the rest is folded.
pub const QUESTION_DIFF_LINES: usize = 20;

/// The proposed diff of a permission question, coloured, its first `limit` lines (then how many
/// more and that `v` shows them), with a line when totemd cut it.
pub fn question_diff(question: &PermissionQuestion, s: Style, limit: usize) -> String {
    let diff = displayable(question.diff.as_deref().unwrap_or(""));
    let mut out = tools::diff_lines(&diff, s, limit, ": v shows them all");
    if question.truncated {
        out.push_str(&s.dim("    … the rest of the change is too long to show here"));
        out.push('\n');
    }
    out
}

/// Whether to draw with ANSI colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset (or empty).
    pub fn for_stdout() -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style {
            color: !no_color && std::io::stdout().is_terminal(),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        match self.color {
            true => format!("\x1b[{code}m{text}\x1b[0m"),
            false => text.to_string(),
        }
    }

    pub fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
    pub fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }
    pub fn red(&self, text: &str) -> String {
        self.paint("31", text)
    }
    pub fn green(&self, text: &str) -> String {
        self.paint("32", text)
    }
    pub fn yellow(&self, text: &str) -> String {
        self.paint("33", text)
    }
    pub fn cyan(&self, text: &str) -> String {
        self.paint("36", text)
    }
    pub fn thinking(&self, text: &str) -> String {
        self.paint("2;3", text)
    }
}

/// How the model's text is drawn as it streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextMode {
    /// Markdown drawn block by block (colour on).
    Markdown,
    /// The text as written, a whole line at a time (for printers that need whole lines).
    Lines,
    /// The text as written, each delta as it comes (plain `totem run`).
    Raw,
}

/// What to show besides the answer.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub style: Style,
    pub text: TextMode,
    /// Show the model's reasoning (folded to a few lines).
    pub reasoning: bool,
    /// Show user messages (replays, and prompts typed in other terminals).
    pub user_messages: bool,
    /// Show run ends (done, failed, aborted) as lines; `totem run` reports them itself.
    pub run_ends: bool,
    /// The client has `/thinking` to show a folded thinking whole (the REPL), and says so.
    pub thinking_command: bool,
}

/// Output for the caller to place.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    /// The model's answer. Whole lines, except in [`TextMode::Raw`].
    Answer(String),
    /// Everything else: tool calls, notices, run ends. Whole lines.
    Aside(String),
    /// The unfinished line being streamed (the answer's last line, the thinking folded to one
    /// line), replacing the one shown before; empty when there is none any more. Only when
    /// [`Renderer::set_live`] asked for it.
    Live(String),
}

/// Where live lines are drawn: the terminal's width, and how many rows an unfinished line may
/// take before its words so far are drawn as a line of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveArea {
    pub cols: usize,
    pub max_rows: usize,
}

impl LiveArea {
    /// This terminal's: its width, and up to half its height.
    pub fn of_terminal() -> LiveArea {
        let (cols, rows) = crate::terminal::window_size().unwrap_or((80, 24));
        LiveArea {
            cols: usize::from(cols),
            max_rows: usize::from(rows / 2).max(1),
        }
    }
}

/// The rows `text` (ANSI escapes left out) takes on a terminal `cols` wide; at least one.
pub fn rows(text: &str, cols: usize) -> usize {
    let width: usize = markdown::visible_chars(text)
        .map(|c| unicode_width::UnicodeWidthChar::width(c).unwrap_or(0))
        .sum();
    width.div_ceil(cols.max(1)).max(1)
}

/// A part being streamed: its type and the text not yet drawn.
struct Streaming {
    part_type: PartType,
    text: String,
    /// Bytes of `text` already drawn.
    drawn: usize,
    /// Its Markdown, drawn line by line.
    lines: markdown::Lines,
}

impl Default for Streaming {
    fn default() -> Self {
        Streaming {
            part_type: PartType::Text,
            text: String::new(),
            drawn: 0,
            lines: markdown::Lines::default(),
        }
    }
}

/// Turns a session's events into terminal output, keeping the state of streaming parts.
pub struct Renderer {
    options: Options,
    parts: HashMap<(String, u32), Streaming>,
    /// The text of a prompt this terminal sent, not to be echoed back when its message arrives.
    own_prompts: Vec<String>,
    /// Runs taken back by `session.undo`: what belongs to them is drawn dimmed.
    undone: HashSet<String>,
    /// Draw unfinished lines live (the REPL on a terminal).
    live: Option<LiveArea>,
    /// A live line is on screen.
    live_shown: bool,
    /// The newest run's thinking, whole, and that run.
    thoughts: (Option<String>, Vec<String>),
    /// Runs queued or going, not ended, oldest first.
    active: Vec<String>,
    /// Runs shown as queued behind the one going, and the line saying so: their prompt is drawn
    /// when they start.
    queued: Vec<(String, String)>,
}

impl Renderer {
    pub fn new(options: Options) -> Renderer {
        Renderer {
            options,
            parts: HashMap::new(),
            own_prompts: Vec::new(),
            undone: HashSet::new(),
            live: None,
            live_shown: false,
            thoughts: (None, Vec::new()),
            active: Vec::new(),
            queued: Vec::new(),
        }
    }

    /// Draw unfinished lines as they stream, as [`Chunk::Live`], in `area`.
    pub fn set_live(&mut self, area: Option<LiveArea>) {
        self.live = area;
    }

    /// With live lines: the lines of the prompts queued behind the run going on, oldest first,
    /// for the caller to draw under the live line until their runs start.
    pub fn queued_lines(&self) -> Vec<String> {
        match self.live {
            Some(_) => self
                .queued
                .iter()
                .filter(|(_, line)| !line.is_empty())
                .map(|(_, line)| line.clone())
                .collect(),
            None => Vec::new(),
        }
    }

    /// Takes `run` off the queued ones; whether it was there.
    fn unqueue(&mut self, run: &str) -> bool {
        let before = self.queued.len();
        self.queued.retain(|(id, _)| id != run);
        self.queued.len() != before
    }

    /// The thinking of the newest run that had some, whole.
    pub fn thoughts(&self) -> &[String] {
        &self.thoughts.1
    }

    /// Runs undone when the session was attached (`undone` marks of `session.messages`); later
    /// `changes.undone`/`changes.redone` events keep the set up to date.
    pub fn set_undone(&mut self, runs: impl IntoIterator<Item = String>) {
        self.undone = runs.into_iter().collect();
    }

    /// The user typed this prompt here: do not show it again when the daemon echoes it.
    pub fn sent_prompt(&mut self, text: &str) {
        self.own_prompts.push(displayable(text).into_owned());
    }

    /// The prompt was not taken after all: its echo, should it come, is shown.
    pub fn forget_prompt(&mut self, text: &str) {
        let text = displayable(text);
        if let Some(i) = self.own_prompts.iter().rposition(|p| *p == text) {
            self.own_prompts.remove(i);
        }
    }

    /// Draws one event, as received: by its typed kind when this build knows it, else from its
    /// JSON.
    /// What belongs to an undone run is drawn plain and dimmed, its prompt marked `(undone)`.
    /// Every string of the event is made displayable first ([`displayable_event`]).
    pub fn event(&mut self, received: &Received) -> Vec<Chunk> {
        let received = displayable_event(received);
        let Some(kind) = received.kind() else {
            return self.unknown(&received.json);
        };
        match kind {
            EventKind::ChangesUndone { run_id, .. } => {
                self.undone.insert(run_id.clone());
            }
            EventKind::ChangesRedone { run_id, .. } => {
                self.undone.remove(run_id);
            }
            _ if kind.run_id().is_some_and(|run| self.undone.contains(run)) => {
                return self.undone_event(kind);
            }
            _ => {}
        }
        self.known(kind)
    }

    /// An event of an undone run: drawn without colour, then every line dimmed.
    fn undone_event(&mut self, kind: &EventKind) -> Vec<Chunk> {
        let style = self.options.style;
        self.options.style = Style { color: false };
        let chunks = self.known(kind);
        self.options.style = style;
        let dim = |text: String| {
            let mut out = String::new();
            for line in text.split_inclusive('\n') {
                let (line, newline) = match line.strip_suffix('\n') {
                    Some(line) => (line, "\n"),
                    None => (line, ""),
                };
                let mark = if line.starts_with("› ") {
                    " (undone)"
                } else {
                    ""
                };
                out.push_str(&style.dim(&format!("{line}{mark}")));
                out.push_str(newline);
            }
            out
        };
        chunks
            .into_iter()
            .map(|chunk| match chunk {
                Chunk::Answer(text) => Chunk::Answer(dim(text)),
                Chunk::Aside(text) => Chunk::Aside(dim(text)),
                Chunk::Live(text) => Chunk::Live(text),
            })
            .collect()
    }

    fn known(&mut self, kind: &EventKind) -> Vec<Chunk> {
        let s = self.options.style;
        if let Some(run) = kind.ended_run() {
            self.active.retain(|id| *id != run.id);
            if self.unqueue(&run.id) {
                // A queued prompt that never started (aborted with the run before it).
                return self.queued_end(run);
            }
            return self.run_end(run);
        }
        let out = match kind {
            EventKind::RunQueued { run, message } => return self.run_queued(run, message),
            EventKind::MessageCreated { message } => return self.message_created(message),
            EventKind::PartStarted {
                message_id,
                index,
                part_type,
                ..
            } => {
                self.parts.insert(
                    (message_id.clone(), *index),
                    Streaming {
                        part_type: *part_type,
                        ..Streaming::default()
                    },
                );
                return vec![];
            }
            EventKind::PartDelta {
                message_id,
                index,
                text,
                ..
            } => return self.delta(message_id, *index, text),
            EventKind::PartDone {
                message_id,
                index,
                part,
                run_id,
            } => {
                let streamed = self.parts.remove(&(message_id.clone(), *index));
                let chunks = self.part_done(part, streamed, Some(run_id));
                return self.clear_live(chunks);
            }
            EventKind::Notice { level, text, .. } => match level {
                NoticeLevel::Error => s.red(&format!("✗ {text}")),
                NoticeLevel::Warning => s.yellow(&format!("! {text}")),
                NoticeLevel::Info => s.dim(&format!("· {text}")),
            },
            EventKind::SessionDeleted {} => s.yellow("This session was deleted."),
            EventKind::PermissionAsked { question } => question_lines(question, s),
            EventKind::PermissionResolved { reply, .. } => match reply {
                Some(PermissionReply::Deny { .. }) => s.red("· permission denied"),
                Some(_) => s.dim("· permission granted"),
                None => s.dim("· permission question withdrawn"),
            },
            EventKind::Usage {
                usage,
                session,
                context_tokens,
                context_window,
                ..
            } => s.dim(&usage_line(
                usage,
                session,
                *context_tokens,
                *context_window,
            )),
            EventKind::Todo { todos, .. } => {
                let mut out = s.dim("plan:");
                for item in todos {
                    let mark = match item.status {
                        TodoStatus::Done => "[x]",
                        TodoStatus::InProgress => "[>]",
                        TodoStatus::Pending => "[ ]",
                    };
                    out.push_str(&format!("\n  {mark} {}", item.content));
                }
                out
            }
            EventKind::ChangesUndone { run_id, files, .. } => changes_line(
                &format!("↶ undid run {run_id}"),
                files,
                "the model no longer sees it",
                s,
            ),
            EventKind::ChangesRedone { run_id, files, .. } => changes_line(
                &format!("↷ redid run {run_id}"),
                files,
                "it is back in the conversation",
                s,
            ),
            EventKind::DocsFound { .. } => s.dim("· docs.found"),
            // For editors (buffers to reload); the tool calls already said what they wrote.
            EventKind::FilesChanged { .. }
            | EventKind::RunStarted { .. }
            | EventKind::SessionUpdated { .. }
            | EventKind::Lagged {} => return vec![],
            // Drawn above, with the run's end.
            EventKind::RunDone { .. }
            | EventKind::RunFailed { .. }
            | EventKind::RunAborted { .. }
            | EventKind::RunInterrupted { .. } => return vec![],
        };
        vec![Chunk::Aside(format!("{out}\n"))]
    }

    /// A kind newer than this build: its name, so the person knows something happened.
    fn unknown(&mut self, json: &Value) -> Vec<Chunk> {
        let kind = json.get("type").and_then(Value::as_str).unwrap_or("event");
        let line = self.options.style.dim(&format!("· {kind}"));
        vec![Chunk::Aside(format!("{line}\n"))]
    }

    /// A user's prompt (not one sent from here) with its attachments under it; or an assistant
    /// message that arrives whole (a fork's or an import's copy: no part events follow it).
    fn message_created(&mut self, message: &Message) -> Vec<Chunk> {
        if message.role == Role::Assistant {
            return message
                .parts
                .iter()
                .flat_map(|part| self.part_done(part, None, None))
                .collect();
        }
        let mut chunks = self.user_prompt(message);
        let s = self.options.style;
        if let Some(Chunk::Aside(text)) = chunks.last_mut() {
            for part in &message.parts {
                if let Part::Attachment { path, range, .. } = part {
                    let lines = range
                        .map(|r| format!(" (lines {}–{})", r.start_line, r.end_line))
                        .unwrap_or_default();
                    text.push_str(&format!("  {}\n", s.dim(&format!("📎 {path}{lines}"))));
                }
            }
        }
        chunks
    }

    /// A prompt accepted while another run goes: shown as queued; its own line comes when its
    /// run starts, after the answer before it.
    fn run_queued(&mut self, run: &Run, message: &Message) -> Vec<Chunk> {
        let behind = !self.active.is_empty();
        self.active.push(run.id.clone());
        if !behind {
            // Nothing goes before it: it starts at once.
            return vec![];
        }
        if !self.options.user_messages {
            self.queued.push((run.id.clone(), String::new()));
            return vec![];
        }
        let text = Part::joined_text(&message.parts);
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        let more = if text.trim().lines().count() > 1 {
            " …"
        } else {
            ""
        };
        let line = self.options.style.dim(&format!(
            "⧗ queued: {first}{more} (sent when the run before it ends)"
        ));
        self.queued.push((run.id.clone(), line.clone()));
        match self.live {
            // Drawn under the live line by the caller, not inside the answer going on.
            Some(_) => vec![],
            None => vec![Chunk::Aside(format!("{line}\n"))],
        }
    }

    /// A queued prompt's run ended before it started.
    fn queued_end(&mut self, run: &Run) -> Vec<Chunk> {
        if !self.options.run_ends {
            return vec![];
        }
        let line = self.options.style.yellow(&format!(
            "■ queued prompt not sent ({})",
            ended_how(run.status)
        ));
        vec![Chunk::Aside(format!("{line}\n"))]
    }

    fn user_prompt(&mut self, message: &Message) -> Vec<Chunk> {
        if message.role != Role::User {
            return vec![];
        }
        let text = Part::joined_text(&message.parts);
        let was_queued = message.run_id.as_ref().is_some_and(|run| self.unqueue(run));
        if let Some(i) = self.own_prompts.iter().position(|p| *p == text) {
            self.own_prompts.remove(i);
            if !was_queued {
                return vec![];
            }
        }
        if !self.options.user_messages {
            return vec![];
        }
        let s = self.options.style;
        let mut out = String::new();
        for (i, line) in text.lines().enumerate() {
            let mark = if i == 0 { "› " } else { "  " };
            out.push_str(&s.bold(&format!("{mark}{line}")));
            out.push('\n');
        }
        vec![Chunk::Aside(out)]
    }

    fn delta(&mut self, message_id: &str, index: u32, text: &str) -> Vec<Chunk> {
        let mode = self.options.text;
        let style = self.options.style;
        let live = self.live;
        let part = self
            .parts
            .entry((message_id.to_string(), index))
            .or_default();
        part.text.push_str(text);
        let Some(area) = live else {
            if part.part_type != PartType::Text {
                // Reasoning and tool input are shown whole, when done.
                return vec![];
            }
            return streamed_lines(part, mode, style, None);
        };
        let line = match part.part_type {
            PartType::Text => {
                let mut chunks = streamed_lines(part, mode, style, Some(area));
                let pending = &part.text[part.drawn..];
                let line = match mode {
                    TextMode::Markdown => part.lines.live(pending, style),
                    _ => pending.to_string(),
                };
                self.live_shown = !line.is_empty();
                chunks.push(Chunk::Live(line));
                return chunks;
            }
            PartType::Reasoning if !self.options.reasoning => return vec![],
            PartType::Reasoning => thinking_line(&part.text, area.cols, style),
            PartType::ToolCall | PartType::ToolResult => style.dim(&format!(
                "⋯ preparing a tool call · {} chars",
                tokens(part.text.chars().count() as u64)
            )),
        };
        self.live_shown = true;
        vec![Chunk::Live(line)]
    }

    /// Clears the live line, if one is shown, before `chunks`.
    fn clear_live(&mut self, mut chunks: Vec<Chunk>) -> Vec<Chunk> {
        if std::mem::take(&mut self.live_shown) {
            chunks.insert(0, Chunk::Live(String::new()));
        }
        chunks
    }

    fn part_done(
        &mut self,
        part: &Part,
        streamed: Option<Streaming>,
        run_id: Option<&String>,
    ) -> Vec<Chunk> {
        let s = self.options.style;
        match part {
            Part::Text { text } => {
                let drawn = streamed.as_ref().map_or(0, |p| p.drawn);
                // The finished part is the truth; draw what the deltas did not.
                let rest = match text.get(drawn..) {
                    Some(rest) => rest,
                    None => text.as_str(),
                };
                if let (TextMode::Markdown, Some(mut part)) = (self.options.text, streamed) {
                    // Streamed line by line: the last lines go the same way.
                    let mut out = String::new();
                    for line in rest.lines() {
                        out.push_str(&part.lines.line(line, s));
                    }
                    out.push_str(&part.lines.finish(s));
                    return match out.trim().is_empty() {
                        true => vec![],
                        false => vec![Chunk::Answer(out)],
                    };
                }
                if rest.trim().is_empty() {
                    return match (self.options.text, rest.is_empty()) {
                        (TextMode::Raw, false) => vec![Chunk::Answer(rest.to_string())],
                        _ => vec![],
                    };
                }
                let out = match self.options.text {
                    TextMode::Markdown => markdown::render(rest, s),
                    TextMode::Lines => {
                        let mut r = rest.to_string();
                        if !r.ends_with('\n') {
                            r.push('\n');
                        }
                        r
                    }
                    TextMode::Raw => rest.to_string(),
                };
                vec![Chunk::Answer(out)]
            }
            Part::Reasoning { text } => {
                if !self.options.reasoning || text.trim().is_empty() {
                    return vec![];
                }
                if run_id.is_some() && self.thoughts.0.as_ref() != run_id {
                    self.thoughts = (run_id.cloned(), Vec::new());
                }
                self.thoughts.1.push(text.trim().to_string());
                let size = tokens(text.trim().chars().count() as u64);
                let hint = match self.options.thinking_command {
                    true => " · /thinking shows it",
                    false => "",
                };
                let line = s.thinking(&format!("┊ thought · {size} chars{hint}"));
                vec![Chunk::Aside(format!("{line}\n"))]
            }
            Part::ToolCall { tool, input, .. } => {
                vec![Chunk::Aside(format!(
                    "{}\n",
                    tools::call_line(tool, input, s)
                ))]
            }
            Part::ToolResult {
                output, is_error, ..
            } => vec![Chunk::Aside(tools::result_lines(output, *is_error, s))],
            // Only user messages have them; `message.created` shows them.
            Part::Attachment { .. } => vec![],
        }
    }

    fn run_end(&mut self, run: &Run) -> Vec<Chunk> {
        self.parts.retain(|_, _| false);
        if !self.options.run_ends {
            return self.clear_live(vec![]);
        }
        let s = self.options.style;
        let took = run
            .ended_at
            .map(|end| crate::format::duration_ms(end.saturating_sub(run.started_at)));
        let took = took.map(|t| format!(" in {t}")).unwrap_or_default();
        let line = match run.status {
            RunStatus::Done => s.dim(&format!("✓ done{took}")),
            RunStatus::Aborted => s.yellow(&format!("■ run aborted{took}")),
            status => {
                let why = run.error.as_deref().unwrap_or("no reason given");
                s.red(&format!("✗ run {}{took}: {why}", ended_how(status)))
            }
        };
        self.clear_live(vec![Chunk::Aside(format!("{line}\n"))])
    }
}

/// The finished lines of a streaming text part not drawn yet; with a live area, also the words of
/// an unfinished line too long for it (up to its last space), so the live line stays in its rows.
fn streamed_lines(
    part: &mut Streaming,
    mode: TextMode,
    style: Style,
    live: Option<LiveArea>,
) -> Vec<Chunk> {
    let pending = &part.text[part.drawn..];
    let mut ready = match mode {
        TextMode::Raw => pending.len(),
        TextMode::Lines | TextMode::Markdown => pending.rfind('\n').map_or(0, |i| i + 1),
    };
    let mut out = String::new();
    if ready > 0 {
        let chunk = &pending[..ready];
        match mode {
            TextMode::Markdown => {
                for line in chunk.lines() {
                    out.push_str(&part.lines.line(line, style));
                }
            }
            _ => out.push_str(chunk),
        }
    }
    if let Some(area) = live {
        let unfinished = &pending[ready..];
        if rows(unfinished, area.cols) > area.max_rows
            && let Some(space) = unfinished.rfind(' ')
        {
            let words = &unfinished[..space];
            match mode {
                TextMode::Markdown => out.push_str(&part.lines.line(words, style)),
                _ => out.push_str(&format!("{words}\n")),
            }
            ready += space + 1;
        }
    }
    part.drawn += ready;
    match out.is_empty() {
        true => vec![],
        false => vec![Chunk::Answer(out)],
    }
}

/// The thinking so far, folded to one line that fits `cols`: its size and its newest words.
fn thinking_line(text: &str, cols: usize, s: Style) -> String {
    let head = format!(
        "┊ thinking… {} chars · ",
        tokens(text.trim().chars().count() as u64)
    );
    let room = cols.saturating_sub(head.chars().count() + 1);
    let last = text.trim_end().lines().last().unwrap_or("").trim();
    let skip = last.chars().count().saturating_sub(room);
    let tail: String = last.chars().skip(skip).collect();
    let tail = match skip {
        0 => tail,
        _ => format!("…{}", tail.chars().skip(1).collect::<String>()),
    };
    s.thinking(&format!("{head}{tail}"))
}

/// How a run ended, in a word (`done`, `failed`, `aborted`, `interrupted`).
pub fn ended_how(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Done => "done",
        RunStatus::Failed => "failed",
        RunStatus::Aborted => "aborted",
        RunStatus::Interrupted => "interrupted",
        RunStatus::Running => "running",
    }
}

/// `? bash wants to execute rm -rf build`, why, what part of the command asked, and the
/// proposed diff's first lines.
/// Every field is made displayable here too (the REPL keeps questions to show again); a target or
/// subcommand of several lines (a script, a heredoc) is shown whole, each further line behind a
/// `│` gutter, so no line of it can pass for one of the question's own.
fn question_lines(question: &PermissionQuestion, s: Style) -> String {
    let target = displayable(&question.target);
    let mut target_lines = target.split('\n');
    let line = format!(
        "? {} wants to {} {}",
        displayable(&question.tool),
        question_kind(question.kind),
        target_lines.next().unwrap_or("")
    );
    let mut out = s.yellow(&line);
    for more in target_lines {
        out.push_str(&format!("\n  {} {}", s.dim("│"), s.yellow(more)));
    }
    if !question.explanation.is_empty() {
        for line in displayable(&question.explanation).split('\n') {
            out.push_str(&format!("\n  {}", s.dim(line)));
        }
    }
    if let Some(sub) = question
        .subcommand
        .as_deref()
        .filter(|sub| !sub.is_empty() && *sub != question.target)
    {
        let sub = displayable(sub);
        let mut lines = sub.split('\n');
        out.push_str(&format!(
            "\n  asks for: {}",
            s.bold(lines.next().unwrap_or(""))
        ));
        for more in lines {
            out.push_str(&format!("\n  {} {}", s.dim("│"), s.bold(more)));
        }
    }
    if question.diff.as_deref().is_some_and(|d| !d.is_empty()) {
        out.push('\n');
        out.push_str(&question_diff(question, s, QUESTION_DIFF_LINES));
        out.truncate(out.trim_end().len());
    }
    out
}

/// The question's kind as the wire spells it (`mcpServer`), the verb of its line.
fn question_kind(kind: QuestionKind) -> &'static str {
    match kind {
        QuestionKind::Read => "read",
        QuestionKind::Write => "write",
        QuestionKind::Execute => "execute",
        QuestionKind::Mcp => "mcp",
        QuestionKind::McpServer => "mcpServer",
    }
}

/// `↶ undid the changes of run_1: a.rs, b.rs`.
/// `↶ undid run run_1: a.rs, b.rs; the model no longer sees it` (no files: none named).
fn changes_line(what: &str, files: &[String], then: &str, s: Style) -> String {
    let files = match files.is_empty() {
        true => String::new(),
        false => format!(": {}", one_line(&files.join(", "), 100)),
    };
    s.cyan(&format!("{what}{files}; {then}"))
}

/// `· 1.2k in · 310 out · $0.0042 · context 12k/128k` from a `usage` event.
fn usage_line(usage: &Usage, session: &Usage, context: Option<u64>, window: Option<u64>) -> String {
    let mut line = format!(
        "· {} in · {} out",
        tokens(usage.input_tokens),
        tokens(usage.output_tokens)
    );
    if let Some(cost) = session.cost_usd {
        line.push_str(&format!(" · ${cost:.4} this session"));
    }
    if let (Some(used), Some(window)) = (context, window) {
        line.push_str(&format!(" · context {}/{}", tokens(used), tokens(window)));
    }
    line
}

pub fn tokens(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        _ => format!("{:.1}k", n as f64 / 1000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plain(text: TextMode) -> Renderer {
        Renderer::new(Options {
            style: Style { color: false },
            text,
            reasoning: true,
            user_messages: true,
            run_ends: true,
            thinking_command: true,
        })
    }

    fn answer(chunks: Vec<Chunk>) -> String {
        chunks
            .into_iter()
            .map(|c| match c {
                Chunk::Answer(s) | Chunk::Aside(s) => s,
                Chunk::Live(_) => String::new(),
            })
            .collect()
    }

    fn delta(text: &str) -> Received {
        json!({"sessionId": "ses_1", "seq": 3, "at": 0, "type": "part.delta", "runId": "run_1",
               "messageId": "msg_1", "index": 0, "text": text})
        .into()
    }

    fn done(text: &str) -> Received {
        json!({"sessionId": "ses_1", "seq": 4, "at": 0, "type": "part.done", "runId": "run_1",
               "messageId": "msg_1", "index": 0, "part": {"type": "text", "text": text}})
        .into()
    }

    #[test]
    fn lines_mode_draws_whole_lines_and_the_rest_when_done() {
        let mut r = plain(TextMode::Lines);
        assert_eq!(answer(r.event(&delta("Hel"))), "");
        assert_eq!(answer(r.event(&delta("lo\nwor"))), "Hello\n");
        assert_eq!(answer(r.event(&done("Hello\nworld"))), "world\n");
    }

    #[test]
    fn markdown_streams_line_by_line_keeping_blank_lines() {
        let mut r = Renderer::new(Options {
            style: Style { color: true },
            text: TextMode::Markdown,
            reasoning: true,
            user_messages: true,
            run_ends: true,
            thinking_command: true,
        });
        assert_eq!(answer(r.event(&delta("first *para"))), "");
        let first = answer(r.event(&delta("graph*\n\nsecond")));
        assert_eq!(first, "first \x1b[3mparagraph\x1b[0m\n\n");
        let rest = answer(r.event(&done("first *paragraph*\n\nsecond")));
        assert_eq!(rest, "second\n");
    }

    #[test]
    fn live_lines_show_the_unfinished_line_and_folded_thinking() {
        let mut r = plain(TextMode::Lines);
        r.set_live(Some(LiveArea {
            cols: 40,
            max_rows: 2,
        }));
        let live = |chunks: Vec<Chunk>| -> Vec<String> {
            chunks
                .into_iter()
                .filter_map(|c| match c {
                    Chunk::Live(text) => Some(text),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(live(r.event(&delta("Hel"))), ["Hel"]);
        let chunks = r.event(&delta("lo\nwor"));
        assert_eq!(
            chunks,
            [Chunk::Answer("Hello\n".into()), Chunk::Live("wor".into())]
        );
        // Longer than two rows of 40: the words so far become a line, the last one stays live.
        let long = format!(" {}end", "word ".repeat(20));
        let chunks = r.event(&delta(&long));
        assert!(
            matches!(&chunks[..], [Chunk::Answer(a), Chunk::Live(l)] if a.starts_with("wor word") && l == "end"),
            "{chunks:?}"
        );
        let chunks = r.event(&done(&format!("Hello\nwor{long}")));
        assert_eq!(chunks[0], Chunk::Live(String::new()));
        assert_eq!(answer(chunks), "end\n");

        let thinking: Received = json!({"sessionId": "ses_1", "seq": 3, "at": 0,
            "type": "part.started", "runId": "run_1", "messageId": "msg_2", "index": 0,
            "partType": "reasoning"})
        .into();
        r.event(&thinking);
        let step = |text: &str| -> Received {
            json!({"sessionId": "ses_1", "seq": 3, "at": 0, "type": "part.delta", "runId": "run_1",
                   "messageId": "msg_2", "index": 0, "text": text})
            .into()
        };
        r.event(&step("First I read.\n"));
        let line = live(r.event(&step("Then a very long thought that goes on and on")));
        assert_eq!(line, ["┊ thinking… 58 chars · … goes on and on"]);
        let done: Received = json!({"sessionId": "ses_1", "seq": 4, "at": 0, "type": "part.done",
            "runId": "run_1", "messageId": "msg_2", "index": 0,
            "part": {"type": "reasoning", "text": "First I read.\nThen."}})
        .into();
        let chunks = r.event(&done);
        assert_eq!(chunks[0], Chunk::Live(String::new()));
        assert_eq!(
            answer(chunks),
            "┊ thought · 19 chars · /thinking shows it\n"
        );
        assert_eq!(r.thoughts(), ["First I read.\nThen."]);
    }

    #[test]
    fn raw_mode_streams_every_delta() {
        let mut r = plain(TextMode::Raw);
        assert_eq!(answer(r.event(&delta("Hel"))), "Hel");
        assert_eq!(answer(r.event(&delta("lo"))), "lo");
        assert_eq!(answer(r.event(&done("Hello"))), "");
    }

    #[test]
    fn a_replayed_part_is_drawn_whole() {
        let mut r = plain(TextMode::Lines);
        assert_eq!(answer(r.event(&done("all at once"))), "all at once\n");
    }

    #[test]
    fn a_failed_run_shows_its_reason() {
        let mut r = plain(TextMode::Lines);
        let ev = json!({"sessionId": "ses_1", "seq": 5, "at": 0, "type": "run.failed",
            "run": {"id": "run_1", "sessionId": "ses_1", "status": "failed", "startedAt": 0,
                    "endedAt": 10, "error": "no agent loop"}});
        let out = answer(r.event(&ev.clone().into()));
        assert!(
            out.contains("run failed") && out.contains("no agent loop"),
            "{out}"
        );
    }

    #[test]
    fn unknown_kinds_still_show_their_name() {
        let mut r = plain(TextMode::Lines);
        let ev = json!({"sessionId": "ses_1", "seq": 6, "at": 0, "type": "todo.updated"});
        assert_eq!(answer(r.event(&ev.clone().into())), "· todo.updated\n");
    }

    #[test]
    fn usage_reads_as_one_status_line() {
        let mut r = plain(TextMode::Lines);
        let ev = json!({"sessionId": "ses_1", "seq": 7, "at": 0, "type": "usage", "runId": "run_1",
            "messageId": "msg_1", "usage": {"inputTokens": 1200, "outputTokens": 310},
            "run": {"inputTokens": 1200, "outputTokens": 310},
            "session": {"inputTokens": 1200, "outputTokens": 310, "costUsd": 0.0042},
            "contextTokens": 12000, "contextWindow": 128000});
        assert_eq!(
            answer(r.event(&ev.clone().into())),
            "· 1.2k in · 310 out · $0.0042 this session · context 12.0k/128.0k\n"
        );
    }

    #[test]
    fn a_permission_question_says_what_and_why() {
        let mut r = plain(TextMode::Lines);
        let ev = json!({"sessionId": "ses_1", "seq": 8, "at": 0, "type": "permission.asked",
            "question": {"id": "q_1", "sessionId": "ses_1", "runId": "run_1", "callId": "c_1",
                         "tool": "bash", "kind": "execute", "target": "rm -rf build",
                         "explanation": "deletes files", "always": {}, "askedAt": 0}});
        assert_eq!(
            answer(r.event(&ev.clone().into())),
            "? bash wants to execute rm -rf build\n  deletes files\n"
        );
    }

    #[test]
    fn undone_changes_name_their_files() {
        let mut r = plain(TextMode::Lines);
        let ev = json!({"sessionId": "ses_1", "seq": 9, "at": 0, "type": "changes.undone",
            "runId": "run_1", "files": ["a.rs", "b.rs"]});
        assert_eq!(
            answer(r.event(&ev.clone().into())),
            "↶ undid run run_1: a.rs, b.rs; the model no longer sees it\n"
        );
    }

    #[test]
    fn an_undone_runs_messages_are_dimmed_and_its_prompt_marked() {
        let mut r = Renderer::new(Options {
            style: Style { color: true },
            text: TextMode::Lines,
            reasoning: true,
            user_messages: true,
            run_ends: true,
            thinking_command: true,
        });
        r.set_undone(["run_1".to_string()]);
        let prompt = |run: &str| -> Received {
            json!({"sessionId": "ses_1", "seq": 1, "at": 0, "type": "message.created",
                "message": {"id": "msg_0", "sessionId": "ses_1", "seq": 1, "role": "user",
                            "runId": run, "createdAt": 0, "parts": [{"type": "text", "text": "hi"}]}})
            .into()
        };
        assert_eq!(
            answer(r.event(&prompt("run_1"))),
            "\x1b[2m› hi (undone)\x1b[0m\n"
        );
        assert_eq!(answer(r.event(&prompt("run_2"))), "\x1b[1m› hi\x1b[0m\n");
        let redone = json!({"sessionId": "ses_1", "seq": 9, "at": 0, "type": "changes.redone",
            "runId": "run_1", "files": []});
        r.event(&redone.into());
        assert_eq!(answer(r.event(&prompt("run_1"))), "\x1b[1m› hi\x1b[0m\n");
    }

    #[test]
    fn own_prompts_are_not_echoed() {
        let mut r = plain(TextMode::Lines);
        r.sent_prompt("hi");
        let ev = json!({"sessionId": "ses_1", "seq": 1, "at": 0, "type": "message.created",
            "message": {"id": "msg_0", "sessionId": "ses_1", "seq": 1, "role": "user",
                        "createdAt": 0, "parts": [{"type": "text", "text": "hi"}]}});
        assert_eq!(answer(r.event(&ev.clone().into())), "");
        assert_eq!(answer(r.event(&ev.clone().into())), "› hi\n");
    }
}
