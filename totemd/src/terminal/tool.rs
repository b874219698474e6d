//! `terminal`: the model's interactive terminals. It starts a program on a terminal the daemon
//! owns (so the user can watch and take over), types lines and keys into it, waits for the screen
//! to show something or to stay still, and reads the rendered screen — text as a person sees it,
//! not escape codes, trimmed for small context windows.
//!
//! Starting a program is checked like a `bash` command (execute rules). When the program is a
//! shell waiting at its prompt (its own process group in the terminal's foreground), each line the
//! model enters is checked like a `bash` command too; lines typed to a program the shell runs
//! (`python3`, `npm init`) are that program's input. Plan mode has no terminal tool (it is not in
//! the read-only list).

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use totem_tools::{Access, Plan, Tool, ToolContext, ToolError, ToolOutput};

use super::{OpenRequest, OpenedBy, TerminalSettings, Terminals, term::Terminal};

/// Lines of screen the model is shown at most (the bottom ones).
const MAX_LINES: usize = 40;
/// Characters of screen the model is shown at most.
const MAX_CHARS: usize = 4000;
/// The size of a terminal the model starts.
const COLS: u16 = 100;
const ROWS: u16 = 30;
/// How long the screen must stay still before a read after `start`/`send`.
const SETTLE_MS: u64 = 400;
/// Seconds a wait lasts at most by default.
const DEFAULT_TIMEOUT: u64 = 10;
/// Shells: a line entered at their prompt is a command.
const SHELLS: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "fish", "tcsh", "csh",
];

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
/// Arguments of `terminal`.
pub struct TerminalInput {
    pub action: TerminalAction,
    /// For start: the command line
    pub command: Option<String>,
    /// Terminal id from start (t1)
    pub id: Option<String>,
    /// For send: text to type
    pub text: Option<String>,
    /// For send: press Enter after text (default true)
    pub enter: Option<bool>,
    /// For send: keys to press after text, e.g. ["ctrl-c"], ["down","enter"], ["tab"], ["esc"]
    pub keys: Option<Vec<String>>,
    /// Wait until the screen shows this (regex)
    pub pattern: Option<String>,
    /// For wait: until no output for this many ms (default 1000)
    pub still_ms: Option<u64>,
    /// Seconds to wait at most (default 10)
    pub timeout: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
/// What `terminal` should do.
pub enum TerminalAction {
    Start,
    Send,
    Wait,
    Read,
    Stop,
    List,
}

/// The `terminal` tool of one session.
pub struct TerminalTool {
    pub terminals: Arc<Terminals>,
    pub session_id: String,
    pub settings: TerminalSettings,
}

impl Tool for TerminalTool {
    const NAME: &'static str = "terminal";
    const DESCRIPTION: &'static str = "Interactive programs on a terminal (prompts, REPLs, `npm init`, watch modes): start, send (text then Enter, or keys), wait (for a pattern or quiet), read (the screen), stop, list. The user can watch and type too.";
    type Input = TerminalInput;

    fn plan(&self, input: &TerminalInput, _ctx: &ToolContext) -> Result<Plan, ToolError> {
        // Its commands run in a terminal the user shares, outside the sandbox, and its programs
        // go on changing files while a call waits (npm init's package.json).
        let mut plan = Plan {
            unconfined: true,
            programs_run: true,
            ..Plan::default()
        };
        match input.action {
            TerminalAction::Start => {
                let command = input.command.as_deref().unwrap_or("").trim();
                if command.is_empty() {
                    return Err(ToolError::Failed(
                        "terminal start needs a command".to_string(),
                    ));
                }
                plan.access.push(Access::execute(Self::NAME, command));
            }
            TerminalAction::Send => {
                let terminal = self.terminal(input)?;
                if input.text.as_deref().unwrap_or("").is_empty()
                    && input.keys.as_ref().is_none_or(|k| k.is_empty())
                {
                    return Err(ToolError::Failed(
                        "terminal send needs text or keys".to_string(),
                    ));
                }
                let typing = Typing::of(input)?;
                if at_shell_prompt(&terminal) {
                    let typed = super::lock(&terminal.typed).clone();
                    for line in typing.entered_lines(&typed).0 {
                        if !line.trim().is_empty() {
                            plan.access.push(Access::execute(Self::NAME, line.trim()));
                        }
                    }
                }
            }
            TerminalAction::Wait | TerminalAction::Read | TerminalAction::Stop => {
                self.terminal(input)?;
            }
            TerminalAction::List => {}
        }
        if let Some(pattern) = &input.pattern {
            regex::Regex::new(pattern)
                .map_err(|e| ToolError::Failed(format!("pattern is not a valid regex: {e}")))?;
        }
        Ok(plan)
    }

    async fn run(&self, input: TerminalInput, ctx: &ToolContext) -> ToolOutput {
        let timeout = Duration::from_secs(input.timeout.unwrap_or(DEFAULT_TIMEOUT).clamp(1, 600));
        let pattern = input
            .pattern
            .as_deref()
            .and_then(|p| regex::Regex::new(p).ok());
        match input.action {
            TerminalAction::Start => {
                let command = input.command.as_deref().unwrap_or("").trim().to_string();
                let terminals = self.terminals.clone();
                let request = OpenRequest {
                    session_id: &self.session_id,
                    command: &command,
                    cwd: ctx.root(),
                    cols: COLS,
                    rows: ROWS,
                    opened_by: OpenedBy::Model,
                    shared: true,
                    settings: self.settings,
                    env: &ctx.shell,
                };
                let terminal = match terminals.open(request) {
                    Ok(t) => t,
                    Err(e) => return ToolOutput::error(e.to_string()),
                };
                let waited = settle(&terminal, pattern.as_ref(), SETTLE_MS, timeout, ctx).await;
                ToolOutput::ok(format!(
                    "started terminal {} (send input with action=send id={}){}\n{}",
                    terminal.name,
                    terminal.name,
                    waited.note(),
                    render(&terminal)
                ))
            }
            TerminalAction::Send => {
                let terminal = match self.terminal(&input) {
                    Ok(t) => t,
                    Err(e) => return e.into(),
                };
                let typing = match Typing::of(&input) {
                    Ok(t) => t,
                    Err(e) => return e.into(),
                };
                let typed_now = {
                    let typed = super::lock(&terminal.typed);
                    typing.entered_lines(&typed).1
                };
                if let Err(e) = terminal.write(&typing.bytes) {
                    return ToolOutput::error(e.to_string());
                }
                *super::lock(&terminal.typed) = typed_now;
                let waited = settle(&terminal, pattern.as_ref(), SETTLE_MS, timeout, ctx).await;
                ToolOutput::ok(format!("sent{}\n{}", waited.note(), render(&terminal)))
            }
            TerminalAction::Wait => {
                let terminal = match self.terminal(&input) {
                    Ok(t) => t,
                    Err(e) => return e.into(),
                };
                let still = input.still_ms.unwrap_or(1000).clamp(50, 600_000);
                let waited = settle(&terminal, pattern.as_ref(), still, timeout, ctx).await;
                let text = format!("{}\n{}", waited.note().trim_start(), render(&terminal));
                if matches!(waited, Waited::TimedOut) && pattern.is_some() {
                    return ToolOutput::error(text);
                }
                ToolOutput::ok(text)
            }
            TerminalAction::Read => match self.terminal(&input) {
                Ok(t) => ToolOutput::ok(render(&t)),
                Err(e) => e.into(),
            },
            TerminalAction::Stop => {
                let terminal = match self.terminal(&input) {
                    Ok(t) => t,
                    Err(e) => return e.into(),
                };
                let terminals = self.terminals.clone();
                let closing = terminal.clone();
                let _ =
                    tokio::task::spawn_blocking(move || terminals.close(&closing, "closed")).await;
                ToolOutput::ok(format!(
                    "stopped terminal {}; its last screen:\n{}",
                    terminal.name,
                    render(&terminal)
                ))
            }
            TerminalAction::List => {
                let list = self.terminals.list_for_model(&self.session_id);
                if list.is_empty() {
                    return ToolOutput::ok("no terminals");
                }
                ToolOutput::ok(
                    list.iter()
                        .map(|t| format!("{} [{}] {}\n", t.name, status_words(t), t.command))
                        .collect::<String>(),
                )
            }
        }
    }
}

/// The built-in tools with this session's `terminal` tool.
pub fn registry(daemon: &crate::daemon::Daemon, session_id: &str) -> totem_tools::Registry {
    let mut registry = totem_tools::Registry::builtin();
    registry.register(totem_tools::tool::Typed::new(TerminalTool {
        terminals: daemon.terminals.clone(),
        session_id: session_id.to_string(),
        settings: crate::server::rpc_terminal::terminal_settings(daemon),
    }));
    registry
}

impl TerminalTool {
    fn terminal(&self, input: &TerminalInput) -> Result<Arc<Terminal>, ToolError> {
        let id = input.id.as_deref().unwrap_or("").trim();
        if id.is_empty() {
            return Err(ToolError::Failed(
                "this action needs the terminal id (t1; see action=list)".to_string(),
            ));
        }
        self.terminals
            .find_for_model(&self.session_id, id)
            .ok_or_else(|| ToolError::Failed(format!("no terminal {id:?}; see action=list")))
    }
}

/// Whether a shell is in the terminal's foreground, so that a line entered now is a command: the
/// foreground process group's leader is a shell (from `/proc`; elsewhere, the terminal's program
/// is a shell and holds the foreground itself).
fn at_shell_prompt(terminal: &Terminal) -> bool {
    if !terminal.is_running() {
        return false;
    }
    let Some(foreground) = terminal.foreground() else {
        return false;
    };
    let is_shell = |name: &str| {
        let name = name.trim().rsplit('/').next().unwrap_or("");
        SHELLS.contains(&name.trim_start_matches('-'))
    };
    if let Ok(comm) = std::fs::read_to_string(format!("/proc/{foreground}/comm")) {
        return is_shell(&comm);
    }
    let program = totem_permission::bash::split_commands(&terminal.command)
        .ok()
        .and_then(|parts| parts.last().and_then(|p| p.program().map(str::to_string)));
    foreground == terminal.pid && program.is_some_and(|p| is_shell(&p))
}

/// What one `send` types.
struct Typing {
    bytes: Vec<u8>,
    /// The text, then each key as an edit of the line: text, Enter, or a line cleared.
    steps: Vec<Step>,
}

enum Step {
    Text(String),
    Enter,
    Clear,
    Backspace,
    Other,
}

impl Typing {
    fn of(input: &TerminalInput) -> Result<Typing, ToolError> {
        let mut bytes = Vec::new();
        let mut steps = Vec::new();
        if let Some(text) = input.text.as_deref().filter(|t| !t.is_empty()) {
            bytes.extend_from_slice(text.as_bytes());
            steps.push(Step::Text(text.to_string()));
            let keys_given = input.keys.as_ref().is_some_and(|k| !k.is_empty());
            if input.enter.unwrap_or(!keys_given) {
                bytes.push(b'\r');
                steps.push(Step::Enter);
            }
        }
        for key in input.keys.iter().flatten() {
            let (seq, step) = key_bytes(key).ok_or_else(|| {
                ToolError::Failed(format!(
                    "unknown key {key:?}; use enter, tab, esc, backspace, up, down, left, right, home, end, pageup, pagedown, delete, space, or ctrl-LETTER"
                ))
            })?;
            bytes.extend_from_slice(&seq);
            steps.push(step);
        }
        Ok(Typing { bytes, steps })
    }

    /// The lines this typing enters after what was typed before, and what is left typed.
    fn entered_lines(&self, typed: &str) -> (Vec<String>, String) {
        let mut line = typed.to_string();
        let mut entered = Vec::new();
        for step in &self.steps {
            match step {
                Step::Text(text) => {
                    for c in text.chars() {
                        if c == '\n' || c == '\r' {
                            entered.push(std::mem::take(&mut line));
                        } else {
                            line.push(c);
                        }
                    }
                }
                Step::Enter => entered.push(std::mem::take(&mut line)),
                Step::Clear => line.clear(),
                Step::Backspace => {
                    line.pop();
                }
                Step::Other => {}
            }
        }
        (entered, line)
    }
}

fn key_bytes(key: &str) -> Option<(Vec<u8>, Step)> {
    let k = key.trim().to_ascii_lowercase().replace(['+', '_'], "-");
    let plain = |s: &str| Some((s.as_bytes().to_vec(), Step::Other));
    match k.as_str() {
        "enter" | "return" | "cr" => Some((b"\r".to_vec(), Step::Enter)),
        "tab" => plain("\t"),
        "esc" | "escape" => plain("\x1b"),
        "backspace" | "bs" => Some((vec![0x7f], Step::Backspace)),
        "up" => plain("\x1b[A"),
        "down" => plain("\x1b[B"),
        "right" => plain("\x1b[C"),
        "left" => plain("\x1b[D"),
        "home" => plain("\x1b[H"),
        "end" => plain("\x1b[F"),
        "pageup" | "pgup" => plain("\x1b[5~"),
        "pagedown" | "pgdn" => plain("\x1b[6~"),
        "delete" | "del" => plain("\x1b[3~"),
        "space" => Some((b" ".to_vec(), Step::Text(" ".into()))),
        _ => {
            let letter = k
                .strip_prefix("ctrl-")
                .or_else(|| k.strip_prefix("c-"))
                .or_else(|| k.strip_prefix('^'))?;
            let mut chars = letter.chars();
            let c = chars.next()?;
            if chars.next().is_some() || !c.is_ascii_alphabetic() {
                return None;
            }
            let byte = (c as u8) & 0x1f;
            // Ctrl-C and Ctrl-U abandon the line; Ctrl-D on an empty line ends the input.
            let step = match c {
                'c' | 'u' => Step::Clear,
                'm' | 'j' => Step::Enter,
                _ => Step::Other,
            };
            Some((vec![byte], step))
        }
    }
}

/// How a wait ended.
enum Waited {
    Matched,
    Still,
    Ended,
    TimedOut,
    Cancelled,
}

impl Waited {
    fn note(&self) -> &'static str {
        match self {
            Waited::Matched => " (the pattern showed)",
            Waited::Still => "",
            Waited::Ended => " (the program ended)",
            Waited::TimedOut => " (timed out waiting; the program is still busy)",
            Waited::Cancelled => " (cancelled)",
        }
    }
}

/// Waits until the screen shows `pattern` (when given) or no output came for `still_ms`, the
/// program ends, `timeout` passes or the run is cancelled.
async fn settle(
    terminal: &Terminal,
    pattern: Option<&regex::Regex>,
    still_ms: u64,
    timeout: Duration,
    ctx: &ToolContext,
) -> Waited {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut changes = terminal.changes();
    let still = Duration::from_millis(still_ms);
    loop {
        changes.borrow_and_update();
        if let Some(re) = pattern
            && re.is_match(&terminal.screen(0).text)
        {
            return Waited::Matched;
        }
        if !terminal.is_running() {
            return Waited::Ended;
        }
        let quiet = async {
            if pattern.is_some() {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(still).await;
        };
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return Waited::Ended },
            _ = quiet => return Waited::Still,
            _ = tokio::time::sleep_until(deadline) => return Waited::TimedOut,
            _ = ctx.cancel.cancelled() => return Waited::Cancelled,
        }
    }
}

fn status_words(terminal: &Terminal) -> String {
    let info = terminal.info();
    match info.ended {
        None => "running".to_string(),
        Some(how) => format!("ended, {how}"),
    }
}

/// The screen as the model reads it: a header, then the bottom lines, trimmed.
fn render(terminal: &Terminal) -> String {
    let screen = terminal.screen(0);
    let mut lines: Vec<&str> = screen.text.lines().collect();
    let mut cut = 0;
    if lines.len() > MAX_LINES {
        cut = lines.len() - MAX_LINES;
        lines.drain(..cut);
    }
    let mut body = lines.join("\n");
    if body.len() > MAX_CHARS {
        let start = body.ceil_char_boundary(body.len() - MAX_CHARS);
        cut += body[..start].lines().count();
        body = body[start..].to_string();
    }
    let mut out = format!(
        "[terminal {} · {} · {} · cursor line {}]\n",
        terminal.name,
        terminal.command,
        status_words(terminal),
        screen.cursor.row + 1
    );
    if cut > 0 {
        out.push_str(&format!("… {cut} lines above not shown …\n"));
    }
    if body.is_empty() {
        out.push_str("(the screen is empty)");
    } else {
        out.push_str(&body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(text: Option<&str>, enter: Option<bool>, keys: &[&str]) -> TerminalInput {
        TerminalInput {
            action: TerminalAction::Send,
            command: None,
            id: Some("t1".into()),
            text: text.map(str::to_string),
            enter,
            keys: if keys.is_empty() {
                None
            } else {
                Some(keys.iter().map(|k| k.to_string()).collect())
            },
            pattern: None,
            still_ms: None,
            timeout: None,
        }
    }

    #[test]
    fn a_line_split_over_sends_is_checked_whole() {
        let first = Typing::of(&input(Some("rm -r"), Some(false), &[])).unwrap();
        let (entered, typed) = first.entered_lines("");
        assert!(entered.is_empty());
        let second = Typing::of(&input(Some("f /tmp/x"), None, &[])).unwrap();
        assert_eq!(second.entered_lines(&typed).0, vec!["rm -rf /tmp/x"]);
        let cleared = Typing::of(&input(None, None, &["ctrl-c"])).unwrap();
        assert_eq!(cleared.entered_lines("rm -rf /").1, "");
        let multi = Typing::of(&input(Some("ls\npwd"), None, &[])).unwrap();
        assert_eq!(multi.entered_lines("").0, vec!["ls", "pwd"]);
        assert_eq!(multi.bytes, b"ls\npwd\r");
    }

    #[test]
    fn keys_are_what_a_keyboard_sends() {
        let typing = Typing::of(&input(None, None, &["ctrl-c", "up", "Enter", "^D"])).unwrap();
        assert_eq!(typing.bytes, b"\x03\x1b[A\r\x04");
        assert!(Typing::of(&input(None, None, &["hyper-x"])).is_err());
    }
}
