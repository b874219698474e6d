//! The line editor on its own thread: rustyline's `readline` blocks, so it runs here and hands
//! each line to the async side, which asks for the next one when it has dealt with it. The
//! external printer lets the async side print above the prompt while a line is being typed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{
    Cmd, CompletionType, ConditionalEventHandler, Config, Context, Editor, Event, EventContext,
    EventHandler, ExternalPrinter, Helper, KeyCode, KeyEvent, Modifiers, RepeatCount,
};
use tokio::sync::mpsc;

/// What the person did at the prompt.
#[derive(Debug)]
pub enum Input {
    /// A line entered: its text (continued lines joined), and as the editor showed it.
    Line {
        text: String,
        raw: String,
    },
    /// Ctrl-C, with what the line held (it stays on screen as typed).
    Interrupted {
        raw: String,
    },
    /// Ctrl-D on an empty line.
    Eof,
    Failed(String),
}

/// The line editor's thread, seen from the async side.
pub struct LineEditor {
    pub lines: mpsc::UnboundedReceiver<Input>,
    /// Esc pressed while a line is being read (the line stays as it is).
    pub escapes: mpsc::UnboundedReceiver<()>,
    /// Requests for the next line (None: end the editor).
    next: std::sync::mpsc::Sender<Option<Request>>,
    /// The printer thread's queue.
    jobs: std::sync::mpsc::Sender<Job>,
    /// How many texts were queued for the printer thread, and how many it has printed.
    printed: Arc<Printed>,
    /// Prints above the prompt; None when stdin or stdout is not a terminal.
    pub printer: Option<Box<dyn ExternalPrinter + Send>>,
}

/// A request for the next line.
struct Request {
    prompt: String,
    /// The text the line starts with, the cursor after it.
    initial: String,
    /// The texts queued for printing before this request: they go on screen before the prompt.
    after: u64,
}

/// What the printer thread does next.
enum Job {
    Print(String),
    /// Tell when everything queued before is printed.
    Flushed(std::sync::mpsc::Sender<()>),
}

/// The printer thread's progress, which the editor thread waits on before it draws a prompt.
#[derive(Default)]
struct Printed {
    queued: AtomicU64,
    done: Mutex<u64>,
    changed: Condvar,
}

/// The longest an editor waits for the text queued before its prompt. A print can only block
/// for good when rustyline took one message as its line ended and is handed a second before it
/// leaves raw mode: that second one waits for the next `readline`, which this wait lets start.
const PRINTED_WAIT: Duration = Duration::from_millis(250);

impl Printed {
    /// Waits until `count` texts are printed, or [`PRINTED_WAIT`] has passed.
    fn wait_for(&self, count: u64) {
        let Ok(done) = self.done.lock() else { return };
        let _ = self
            .changed
            .wait_timeout_while(done, PRINTED_WAIT, |done| *done < count);
    }

    fn one_done(&self) {
        if let Ok(mut done) = self.done.lock() {
            *done += 1;
        }
        self.changed.notify_all();
    }
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
        let (escapes_tx, escapes) = mpsc::unbounded_channel();
        let (next, next_rx) = std::sync::mpsc::channel::<Option<Request>>();
        let (printer_tx, printer_rx) = std::sync::mpsc::channel();
        let printed = Arc::new(Printed::default());
        let waits = printed.clone();
        std::thread::Builder::new()
            .name("totem-readline".into())
            .spawn(move || {
                let typed = Arc::new(Mutex::new(String::new()));
                let keys = Keys {
                    escapes: escapes_tx,
                    typed: typed.clone(),
                };
                let mut editor = match new_editor(&history, ReplHelper { commands, root }, keys) {
                    Ok(editor) => editor,
                    Err(e) => {
                        let _ = printer_tx.send(None);
                        let _ = lines_tx.send(Input::Failed(e.to_string()));
                        return;
                    }
                };
                let _ = printer_tx.send(editor.create_external_printer().ok());
                while let Ok(Some(request)) = next_rx.recv() {
                    waits.wait_for(request.after);
                    let input = match editor
                        .readline_with_initial(&request.prompt, (&request.initial, ""))
                    {
                        Ok(line) => {
                            if !line.trim().is_empty() {
                                let _ = editor.add_history_entry(line.as_str());
                                // Saved line by line: a REPL may end any way, history stays.
                                let _ = editor.append_history(&history);
                            }
                            Input::Line {
                                text: join_continued(&line),
                                raw: line,
                            }
                        }
                        Err(ReadlineError::Interrupted) => Input::Interrupted {
                            raw: typed.lock().map(|t| t.clone()).unwrap_or_default(),
                        },
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
        let jobs = start_printer(printer, printed.clone())?;
        Ok(LineEditor {
            lines,
            escapes,
            next,
            printer: has_printer.then(|| {
                Box::new(Queued {
                    jobs: jobs.clone(),
                    printed: printed.clone(),
                }) as Box<dyn ExternalPrinter + Send>
            }),
            jobs,
            printed,
        })
    }

    /// Shows `prompt` and reads the next line.
    pub fn read(&self, prompt: &str) {
        self.read_with(prompt, String::new());
    }

    /// Shows `prompt` and reads the next line, which starts as `initial` (the cursor after it).
    /// The prompt is drawn once the text printed before is on screen above it.
    pub fn read_with(&self, prompt: &str, initial: String) {
        let _ = self.next.send(Some(Request {
            prompt: prompt.to_string(),
            initial,
            after: self.printed.queued.load(Ordering::SeqCst),
        }));
    }

    /// Ends the thread once it is done with the current line.
    pub fn stop(&self) {
        let _ = self.next.send(None);
    }

    /// Waits (up to a second) until everything printed so far is on screen.
    pub fn flush(&self) {
        let (done, flushed) = std::sync::mpsc::channel();
        if self.jobs.send(Job::Flushed(done)).is_ok() {
            let _ = flushed.recv_timeout(Duration::from_secs(1));
        }
    }
}

/// The printer thread: prints queued text through rustyline's printer, in order.
///
/// rustyline's printer holds one message: a second one printed while the editor is in raw mode
/// but no longer reading (the line was just entered) blocks until the next `readline`, and the
/// async side, blocked, would never ask for it (the REPL froze). So messages go through this
/// thread, which may wait; the async side never does. The editor thread draws its next prompt
/// once the text queued before the request is printed: while the editor is not reading,
/// rustyline writes text straight to the terminal, which would otherwise race the prompt.
fn start_printer(
    mut printer: Option<impl ExternalPrinter + Send + 'static>,
    printed: Arc<Printed>,
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
                        printed.one_done();
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
struct Queued {
    jobs: std::sync::mpsc::Sender<Job>,
    printed: Arc<Printed>,
}

impl ExternalPrinter for Queued {
    fn print(&mut self, msg: String) -> rustyline::Result<()> {
        self.jobs
            .send(Job::Print(msg))
            .map_err(|_| ReadlineError::Io(std::io::Error::other("the printer thread ended")))?;
        self.printed.queued.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// How long after Esc the editor waits for the rest of a key's escape sequence. Without a limit
/// rustyline waits for the next key and reads Esc and it as one Alt key (the key is lost);
/// terminals send a sequence in one write, so a few tens of milliseconds tell them apart.
const ESC_WAIT_MS: u16 = 40;

/// The keys the editor thread tells the async side about.
struct Keys {
    escapes: mpsc::UnboundedSender<()>,
    /// The line as it was when Ctrl-C was pressed.
    typed: Arc<Mutex<String>>,
}

/// Esc: told to the async side (which aborts a run going on, as Claude Code and OpenCode do);
/// the line being typed is left as it is.
struct Escape(mpsc::UnboundedSender<()>);

impl ConditionalEventHandler for Escape {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, _: &EventContext) -> Option<Cmd> {
        let _ = self.0.send(());
        Some(Cmd::Noop)
    }
}

/// Ctrl-C: notes the line (the REPL erases it with what it covers), then interrupts as usual.
struct Interrupt(Arc<Mutex<String>>);

impl ConditionalEventHandler for Interrupt {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        if let Ok(mut typed) = self.0.lock() {
            *typed = ctx.line().to_string();
        }
        None
    }
}

fn new_editor(
    history: &PathBuf,
    helper: ReplHelper,
    keys: Keys,
) -> rustyline::Result<Editor<ReplHelper, FileHistory>> {
    let config = Config::builder()
        .auto_add_history(false)
        .max_history_size(2000)?
        .completion_type(CompletionType::List)
        .keyseq_timeout(Some(ESC_WAIT_MS))
        .build();
    let mut editor = Editor::with_config(config)?;
    editor.set_helper(Some(helper));
    editor.bind_sequence(
        KeyEvent(KeyCode::Esc, Modifiers::NONE),
        EventHandler::Conditional(Box::new(Escape(keys.escapes))),
    );
    editor.bind_sequence(
        KeyEvent::ctrl('C'),
        EventHandler::Conditional(Box::new(Interrupt(keys.typed))),
    );
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

    /// A printer that blocks on its second message until released, as rustyline's does when
    /// handed two while its line ends.
    struct Stuck {
        count: usize,
        release: std::sync::mpsc::Receiver<()>,
        seen: std::sync::mpsc::Sender<String>,
    }

    impl ExternalPrinter for Stuck {
        fn print(&mut self, msg: String) -> rustyline::Result<()> {
            self.count += 1;
            if self.count == 2 {
                let _ = self.release.recv();
            }
            let _ = self.seen.send(msg);
            Ok(())
        }
    }

    #[test]
    fn a_prompt_waits_for_what_was_printed_before_it_but_not_for_a_stuck_print() {
        let (release_tx, release) = std::sync::mpsc::channel();
        let (seen, seen_rx) = std::sync::mpsc::channel();
        let printed = Arc::new(Printed::default());
        let stuck = Stuck {
            count: 0,
            release,
            seen,
        };
        let jobs = start_printer(Some(stuck), printed.clone()).expect("printer thread");
        let mut queued = Queued {
            jobs,
            printed: printed.clone(),
        };
        queued.print("first\n".into()).expect("queued");
        printed.wait_for(1);
        assert_eq!(
            seen_rx.try_recv().as_deref(),
            Ok("first\n"),
            "the prompt waited for the text printed before it"
        );
        queued.print("second\n".into()).expect("queued");
        let started = std::time::Instant::now();
        printed.wait_for(2);
        assert!(
            started.elapsed() < PRINTED_WAIT * 4,
            "a print that cannot finish does not hold the prompt back: {:?}",
            started.elapsed()
        );
        // The next readline takes the stuck message; the printer goes on.
        release_tx.send(()).expect("release");
        assert_eq!(
            seen_rx.recv_timeout(Duration::from_secs(5)).as_deref(),
            Ok("second\n")
        );
    }

    #[test]
    fn backslash_and_open_fences_continue_the_input() {
        assert!(is_incomplete("first line \\"));
        assert!(is_incomplete("look:\n```rust\nfn x() {}"));
        assert!(!is_incomplete("look:\n```rust\nfn x() {}\n```"));
        assert!(!is_incomplete("plain"));
        assert_eq!(join_continued("a \\\nb"), "a \nb");
    }
}
