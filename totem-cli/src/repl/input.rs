//! The line editor on its own thread: rustyline's `readline` blocks, so it runs here and hands
//! each line to the async side, which asks for the next one when it has dealt with it. The
//! external printer lets the async side print above the prompt while a line is being typed.

use std::path::PathBuf;

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{
    Cmd, CompletionType, Config, Context, Editor, EventHandler, ExternalPrinter, Helper, KeyCode,
    KeyEvent, Modifiers,
};
use tokio::sync::mpsc;

/// What the person did at the prompt.
#[derive(Debug)]
pub enum Input {
    Line(String),
    /// Ctrl-C.
    Interrupted,
    /// Ctrl-D on an empty line.
    Eof,
    Failed(String),
}

/// The line editor's thread, seen from the async side.
pub struct LineEditor {
    pub lines: mpsc::UnboundedReceiver<Input>,
    /// The printer thread's queue: text to print, and requests for the next line, in order.
    jobs: std::sync::mpsc::Sender<Job>,
    /// Prints above the prompt; None when stdin or stdout is not a terminal.
    pub printer: Option<Box<dyn ExternalPrinter + Send>>,
}

/// What the printer thread does next.
enum Job {
    Print(String),
    /// Ask the editor for a line with this prompt and initial text (None: end the editor).
    Read(Option<(String, String)>),
    /// Tell when everything queued before is printed.
    Flushed(std::sync::mpsc::Sender<()>),
}

impl LineEditor {
    /// Starts the thread with the history in `history` (created when missing), completion of
    /// `commands` and of `@path`s inside the project at `root`.
    pub fn spawn(
        history: PathBuf,
        commands: Vec<String>,
        root: PathBuf,
    ) -> anyhow::Result<LineEditor> {
        let (lines_tx, lines) = mpsc::unbounded_channel();
        let (next, next_rx) = std::sync::mpsc::channel::<Option<(String, String)>>();
        let (printer_tx, printer_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("totem-readline".into())
            .spawn(move || {
                let mut editor = match new_editor(&history, ReplHelper { commands, root }) {
                    Ok(editor) => editor,
                    Err(e) => {
                        let _ = printer_tx.send(None);
                        let _ = lines_tx.send(Input::Failed(e.to_string()));
                        return;
                    }
                };
                let _ = printer_tx.send(editor.create_external_printer().ok());
                while let Ok(Some((prompt, initial))) = next_rx.recv() {
                    let input = match editor.readline_with_initial(&prompt, (&initial, "")) {
                        Ok(line) => {
                            if !line.trim().is_empty() {
                                let _ = editor.add_history_entry(line.as_str());
                                // Saved line by line: a REPL may end any way, history stays.
                                let _ = editor.append_history(&history);
                            }
                            Input::Line(join_continued(&line))
                        }
                        Err(ReadlineError::Interrupted) => Input::Interrupted,
                        Err(ReadlineError::Eof) => Input::Eof,
                        Err(e) => Input::Failed(e.to_string()),
                    };
                    if lines_tx.send(input).is_err() {
                        break;
                    }
                }
            })?;
        let printer = printer_rx.recv().unwrap_or(None);
        let has_printer = printer.is_some();
        let jobs = start_printer(printer, next)?;
        Ok(LineEditor {
            lines,
            printer: has_printer
                .then(|| Box::new(Queued(jobs.clone())) as Box<dyn ExternalPrinter + Send>),
            jobs,
        })
    }

    /// Shows `prompt` and reads the next line.
    pub fn read(&self, prompt: &str) {
        self.read_with(prompt, String::new());
    }

    /// Shows `prompt` and reads the next line, which starts as `initial` (the cursor after it).
    /// Asked through the printer's queue, so text printed before is on screen above the prompt
    /// before the prompt is drawn.
    pub fn read_with(&self, prompt: &str, initial: String) {
        let _ = self
            .jobs
            .send(Job::Read(Some((prompt.to_string(), initial))));
    }

    /// Ends the thread once it is done with the current line.
    pub fn stop(&self) {
        let _ = self.jobs.send(Job::Read(None));
    }

    /// Waits (up to a second) until everything printed so far is on screen.
    pub fn flush(&self) {
        let (done, flushed) = std::sync::mpsc::channel();
        if self.jobs.send(Job::Flushed(done)).is_ok() {
            let _ = flushed.recv_timeout(std::time::Duration::from_secs(1));
        }
    }
}

/// The printer thread: prints queued text through rustyline's printer and hands the editor its
/// requests for lines, in the order they were made.
///
/// rustyline's printer holds one message: a second one printed while the editor is in raw mode
/// but no longer reading (the line was just entered) blocks until the next `readline`, and the
/// async side, blocked, would never ask for it (the REPL froze). So messages go through this
/// thread, which may wait; the async side never does. And a request for the next line waits
/// behind the text printed before it: while the editor is not reading, rustyline writes text
/// straight to the terminal, which would otherwise race the prompt being drawn.
fn start_printer(
    mut printer: Option<impl ExternalPrinter + Send + 'static>,
    next: std::sync::mpsc::Sender<Option<(String, String)>>,
) -> std::io::Result<std::sync::mpsc::Sender<Job>> {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("totem-printer".into())
        .spawn(move || {
            for job in rx {
                match job {
                    Job::Print(text) => {
                        if let Some(printer) = &mut printer {
                            let _ = printer.print(text);
                        }
                    }
                    Job::Read(request) => {
                        let _ = next.send(request);
                    }
                    Job::Flushed(done) => {
                        let _ = done.send(());
                    }
                }
            }
        })?;
    Ok(tx)
}

/// The async side's printer: queues text for the printer thread.
struct Queued(std::sync::mpsc::Sender<Job>);

impl ExternalPrinter for Queued {
    fn print(&mut self, msg: String) -> rustyline::Result<()> {
        self.0
            .send(Job::Print(msg))
            .map_err(|_| ReadlineError::Io(std::io::Error::other("the printer thread ended")))
    }
}

fn new_editor(
    history: &PathBuf,
    helper: ReplHelper,
) -> rustyline::Result<Editor<ReplHelper, FileHistory>> {
    let config = Config::builder()
        .auto_add_history(false)
        .max_history_size(2000)?
        .completion_type(CompletionType::List)
        .build();
    let mut editor = Editor::with_config(config)?;
    editor.set_helper(Some(helper));
    // Alt-Enter starts a new line inside the input, as a trailing backslash does.
    editor.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::ALT),
        EventHandler::Simple(Cmd::Newline),
    );
    if let Some(dir) = history.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if history.exists() {
        let _ = editor.load_history(history);
    }
    Ok(editor)
}

/// A line ending in `\` continues on the next one; the backslashes go.
fn join_continued(line: &str) -> String {
    line.replace("\\\n", "\n")
}

/// Input is complete unless it ends with `\` or leaves a code fence open.
pub fn is_incomplete(input: &str) -> bool {
    let fences = input
        .lines()
        .filter(|l| l.trim_start().starts_with("```"))
        .count();
    input.ends_with('\\') || fences % 2 == 1
}

/// Completion of slash commands and `@path`s; multi-line input.
struct ReplHelper {
    commands: Vec<String>,
    /// The project folder `@path`s are completed in.
    root: PathBuf,
}

impl Completer for ReplHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let typed = &line[..pos];
        let word_start = typed.rfind(char::is_whitespace).map_or(0, |i| {
            i + typed[i..].chars().next().map_or(1, char::len_utf8)
        });
        if let Some(path) = typed[word_start..].strip_prefix('@') {
            let candidates = super::attach::complete(&self.root, path)
                .into_iter()
                .map(|c| Pair {
                    replacement: match c.ends_with('/') {
                        true => format!("@{c}"),
                        false => format!("@{c} "),
                    },
                    display: c,
                })
                .collect();
            return Ok((word_start, candidates));
        }
        if !typed.starts_with('/') || typed.contains(char::is_whitespace) {
            return Ok((pos, vec![]));
        }
        let candidates = self
            .commands
            .iter()
            .filter(|c| c.starts_with(typed))
            .map(|c| Pair {
                display: c.clone(),
                replacement: format!("{c} "),
            })
            .collect();
        Ok((0, candidates))
    }
}

impl Hinter for ReplHelper {
    type Hint = String;
}

impl Highlighter for ReplHelper {}

impl Validator for ReplHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(match is_incomplete(ctx.input()) {
            true => ValidationResult::Incomplete,
            false => ValidationResult::Valid(None),
        })
    }
}

impl Helper for ReplHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backslash_and_open_fences_continue_the_input() {
        assert!(is_incomplete("first line \\"));
        assert!(is_incomplete("look:\n```rust\nfn x() {}"));
        assert!(!is_incomplete("look:\n```rust\nfn x() {}\n```"));
        assert!(!is_incomplete("plain"));
        assert_eq!(join_continued("a \\\nb"), "a \nb");
    }
}
