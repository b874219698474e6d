//! One terminal: a program on a pseudo-terminal, the screen the daemon keeps for it, and the
//! recent output its watchers are sent.
//!
//! `portable-pty` opens the pseudo-terminal and starts the program as the leader of a new session
//! with the terminal as its controlling terminal (the `setsid` + `TIOCSCTTY` step needs code in the
//! child before `exec`, which this workspace keeps out of its own crates). Its reader and writer
//! block, so each terminal has a reader thread (output → screen → watchers) and a writer thread
//! (a program that never reads blocks only that thread; `write` refuses more once 64 KiB wait).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, MasterPty, PtySize};
use tokio::sync::watch;
use totem_protocol::{TerminalCursor, TerminalInfo, TerminalScreen};

use super::lock;

/// Output kept for watchers that reconnect or fall behind (the newest bytes).
pub const OUTPUT_KEEP: usize = 1 << 20;
/// Bytes typed but not yet read by the program before `write` refuses more.
const MAX_PENDING_INPUT: usize = 64 * 1024;
/// Largest size either way.
const MAX_SIDE: u16 = 1000;

/// Why a terminal call failed; the text is for a person or the model.
#[derive(Debug, thiserror::Error)]
pub enum TermError {
    /// No terminal has this id, or it is closed.
    #[error("{0}")]
    NotFound(String),
    /// The request is malformed (a bad size, key or pattern).
    #[error("{0}")]
    Invalid(String),
    /// The terminal cannot do it now (its program ended or does not read input, or a limit is
    /// reached).
    #[error("{0}")]
    Conflict(String),
    /// The system refused (the pty or the process could not be made).
    #[error("{0}")]
    Failed(String),
}

/// Who opened a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenedBy {
    /// The model, through the `terminal` tool.
    Model,
    /// The user, through `terminal.open`.
    User,
}

/// Checks a size from a client or the model.
pub fn check_size(cols: u16, rows: u16) -> Result<(NonZeroU16, NonZeroU16), TermError> {
    let bad = || {
        TermError::Invalid(format!(
            "a terminal is 2 to {MAX_SIDE} columns by 2 to {MAX_SIDE} rows; {cols}x{rows} is not"
        ))
    };
    if !(2..=MAX_SIDE).contains(&cols) || !(2..=MAX_SIDE).contains(&rows) {
        return Err(bad());
    }
    Ok((
        NonZeroU16::new(cols).ok_or_else(bad)?,
        NonZeroU16::new(rows).ok_or_else(bad)?,
    ))
}

/// The newest output bytes, with their absolute offsets.
#[derive(Debug, Default)]
pub struct OutputRing {
    data: VecDeque<u8>,
    /// Absolute offset of `data[0]`.
    start: u64,
}

impl OutputRing {
    fn push(&mut self, bytes: &[u8]) {
        self.data.extend(bytes);
        if self.data.len() > OUTPUT_KEEP {
            let excess = self.data.len() - OUTPUT_KEEP;
            self.data.drain(..excess);
            self.start += excess as u64;
        }
    }

    /// Total bytes ever pushed.
    pub fn end(&self) -> u64 {
        self.start + self.data.len() as u64
    }

    /// At most `max` bytes from absolute offset `from`; `None` when they are no longer kept.
    pub fn since(&self, from: u64, max: usize) -> Option<Vec<u8>> {
        if from < self.start || from > self.end() {
            return None;
        }
        let index = (from - self.start) as usize;
        Some(self.data.range(index..).take(max).copied().collect())
    }
}

/// Answers the program's questions to its terminal (cursor position, device attributes) and
/// remembers its title: a real terminal does, and some programs wait for the answer.
#[derive(Debug, Default)]
pub struct Replies {
    /// The window title the program set last, if any.
    pub title: Option<String>,
    /// Answers not yet written back to the program.
    pub pending: Vec<u8>,
}

impl vt100::Callbacks for Replies {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.title = Some(String::from_utf8_lossy(title).into_owned());
    }

    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        match (i1, c, first) {
            // Device status report: "are you there" and "where is the cursor".
            (None, 'n', 5) => self.pending.extend_from_slice(b"\x1b[0n"),
            (None, 'n', 6) => {
                let (row, col) = screen.cursor_position();
                let answer = format!("\x1b[{};{}R", row + 1, col + 1);
                self.pending.extend_from_slice(answer.as_bytes());
            }
            // Primary device attributes: a VT220-class terminal.
            (None, 'c', 0) => self.pending.extend_from_slice(b"\x1b[?62;22c"),
            _ => {}
        }
    }
}

/// How the program stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// The program runs.
    Running,
    /// The program ended.
    Exited {
        /// Its exit code; absent when a signal ended it.
        code: Option<i32>,
        /// How it ended, in words (`exit code 1`, `killed by signal 15`).
        how: String,
    },
}

/// Everything about a terminal that changes, under one lock.
pub struct State {
    /// The emulated screen and its scrollback.
    pub parser: vt100::Parser<Replies>,
    /// The recent raw output, for watchers that catch up.
    pub ring: OutputRing,
    /// Whether the program runs or how it ended.
    pub status: Status,
    /// Why it was closed; set once.
    pub closed: Option<String>,
    /// The last time the program printed or was typed to.
    pub last_activity: Instant,
    /// The reader reached the end of the output.
    pub eof: bool,
}

impl State {
    /// The screen size as (columns, rows).
    pub fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.parser.screen().size();
        (cols.get(), rows.get())
    }
}

/// A terminal the daemon owns.
pub struct Terminal {
    /// The terminal's id, unique in the daemon.
    pub id: String,
    /// The session it belongs to.
    pub session_id: String,
    /// Its short name in the session (`t1`), which the model uses.
    pub name: String,
    /// The command line it runs.
    pub command: String,
    /// Who opened it.
    pub opened_by: OpenedBy,
    /// A user's terminal its session's model may see (`terminal.share`).
    shared: std::sync::atomic::AtomicBool,
    /// When it started, Unix milliseconds.
    pub started_at: u64,
    /// The program's process id.
    pub pid: u32,
    state: Mutex<State>,
    /// Bumped on every change (output, size, status, close); watchers wait on it.
    changed: watch::Sender<u64>,
    master: Mutex<Box<dyn MasterPty + Send>>,
    input: SyncSender<Vec<u8>>,
    pending_input: Arc<std::sync::atomic::AtomicUsize>,
    /// Clients watching its output now.
    pub watchers: AtomicU32,
    /// What the model typed on the current line of a shell, not yet entered (see the tool).
    pub typed: Mutex<String>,
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal")
            .field("id", &self.id)
            .field("command", &self.command)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// What `spawn` needs.
pub struct Spawn<'a> {
    /// The terminal's id, unique in the daemon.
    pub id: String,
    /// The session it belongs to.
    pub session_id: String,
    /// Its short name in the session (`t1`).
    pub name: String,
    /// The command line to run.
    pub command: &'a str,
    /// The folder it starts in.
    pub cwd: &'a std::path::Path,
    /// Width, columns.
    pub cols: NonZeroU16,
    /// Height, rows.
    pub rows: NonZeroU16,
    /// Lines of scrollback kept.
    pub scrollback: usize,
    /// Who opens it.
    pub opened_by: OpenedBy,
    /// A user's terminal shown to the model from the start.
    pub shared: bool,
    /// The environment the program gets: the daemon's minus secret-looking names, as commands.
    pub env: &'a totem_tools::ShellSpec,
}

impl Terminal {
    /// The model of its session may see it: it started it, or the user shared it.
    pub fn model_sees(&self) -> bool {
        self.opened_by == OpenedBy::Model || self.shared.load(Ordering::Relaxed)
    }

    /// Shows a user's terminal to the model, or hides it again (a model's own stays shown).
    pub fn share(&self, shared: bool) {
        self.shared.store(shared, Ordering::Relaxed);
    }

    /// Starts the program and the threads that serve it. Call from within the tokio runtime.
    pub fn spawn(spec: Spawn<'_>) -> Result<Arc<Terminal>, TermError> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            TermError::Failed(format!("cannot start the terminal: {what}: {e}"))
        };
        let pty = portable_pty::native_pty_system()
            .openpty(PtySize {
                rows: spec.rows.get(),
                cols: spec.cols.get(),
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| failed("no pseudo-terminal", &e))?;
        let shell = if std::path::Path::new("/bin/bash").exists() {
            "/bin/bash"
        } else {
            "/bin/sh"
        };
        let mut cmd = CommandBuilder::new(shell);
        cmd.arg("-c");
        cmd.arg(spec.command);
        cmd.cwd(spec.cwd);
        for name in &spec.env.env_remove {
            cmd.env_remove(name);
        }
        for (name, value) in &spec.env.env_set {
            cmd.env(name, value);
        }
        cmd.env("TERM", "xterm-256color");
        cmd.env("COLORTERM", "truecolor");
        cmd.env("TOTEM_TERMINAL", &spec.name);
        cmd.env_remove("NO_COLOR");
        let child = pty
            .slave
            .spawn_command(cmd)
            .map_err(|e| failed("the program did not start", &e))?;
        // The program holds its own copy of the terminal's far end.
        drop(pty.slave);
        let pid = child
            .process_id()
            .ok_or_else(|| TermError::Failed("the program ended before it started".into()))?;
        // On Unix the child is a plain `std::process::Child`: its status says which signal
        // ended it (portable-pty's own status only names it).
        let child: Box<dyn portable_pty::Child> = child;
        let child = match child.downcast::<std::process::Child>() {
            Ok(child) => *child,
            Err(_) => {
                super::procs::end_session(pid);
                return Err(TermError::Failed(
                    "cannot start the terminal: the program is not a local process".into(),
                ));
            }
        };
        let reader = pty
            .master
            .try_clone_reader()
            .map_err(|e| failed("no reader", &e))?;
        let writer = pty
            .master
            .take_writer()
            .map_err(|e| failed("no writer", &e))?;
        let mut parser = vt100::Parser::new_with_callbacks(
            spec.rows,
            spec.cols,
            spec.scrollback,
            Replies::default(),
        );
        parser.screen_mut().set_scrollback(0);
        let (input, input_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(256);
        let (changed, _) = watch::channel(0);
        let term = Arc::new(Terminal {
            id: spec.id,
            session_id: spec.session_id,
            name: spec.name,
            command: spec.command.to_string(),
            opened_by: spec.opened_by,
            shared: std::sync::atomic::AtomicBool::new(spec.shared),
            started_at: crate::util::now_ms(),
            pid,
            state: Mutex::new(State {
                parser,
                ring: OutputRing::default(),
                status: Status::Running,
                closed: None,
                last_activity: Instant::now(),
                eof: false,
            }),
            changed,
            master: Mutex::new(pty.master),
            input,
            pending_input: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            watchers: AtomicU32::new(0),
            typed: Mutex::new(String::new()),
        });
        let pending = term.pending_input.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("term-w-{pid}"))
            .spawn(move || write_loop(writer, input_rx, pending))
            .and_then(|_| {
                let weak = Arc::downgrade(&term);
                std::thread::Builder::new()
                    .name(format!("term-r-{pid}"))
                    .spawn(move || read_loop(reader, weak))
            });
        if let Err(e) = spawned {
            super::procs::end_session(pid);
            return Err(failed("no thread", &e));
        }
        let weak = Arc::downgrade(&term);
        tokio::spawn(watch_exit(child, weak));
        Ok(term)
    }

    /// The terminal's changing state, locked.
    pub fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// A receiver that sees every change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v += 1);
    }

    /// Whether the program still runs.
    pub fn is_running(&self) -> bool {
        self.state().status == Status::Running
    }

    /// Whether the terminal was closed.
    pub fn is_closed(&self) -> bool {
        self.state().closed.is_some()
    }

    /// Types `bytes` into the terminal. Refused once the program has ended, or when it has not
    /// read 64 KiB typed before.
    pub fn write(&self, bytes: &[u8]) -> Result<usize, TermError> {
        {
            let mut state = self.state();
            if state.closed.is_some() {
                return Err(TermError::NotFound(format!(
                    "terminal {} is closed",
                    self.name
                )));
            }
            if let Status::Exited { how, .. } = &state.status {
                return Err(TermError::Conflict(format!(
                    "the program in terminal {} has ended ({how}); start a new one",
                    self.name
                )));
            }
            state.last_activity = Instant::now();
        }
        if bytes.is_empty() {
            return Ok(0);
        }
        let waiting = self.pending_input.load(Ordering::Acquire);
        if waiting + bytes.len() > MAX_PENDING_INPUT {
            return Err(TermError::Conflict(format!(
                "the program in terminal {} is not reading its input ({waiting} bytes typed earlier still wait); wait for it or press Ctrl-C",
                self.name
            )));
        }
        self.queue_input(bytes.to_vec())
    }

    /// Hands bytes to the writer thread, counting them as waiting until written.
    fn queue_input(&self, bytes: Vec<u8>) -> Result<usize, TermError> {
        let len = bytes.len();
        self.pending_input.fetch_add(len, Ordering::AcqRel);
        match self.input.try_send(bytes) {
            Ok(()) => Ok(len),
            Err(TrySendError::Full(_)) => {
                self.pending_input.fetch_sub(len, Ordering::AcqRel);
                Err(TermError::Conflict(format!(
                    "the program in terminal {} is not reading its input; wait for it or press Ctrl-C",
                    self.name
                )))
            }
            Err(TrySendError::Disconnected(_)) => {
                self.pending_input.fetch_sub(len, Ordering::AcqRel);
                Err(TermError::Conflict(format!(
                    "terminal {} no longer takes input",
                    self.name
                )))
            }
        }
    }

    /// Changes the size of the terminal and of its screen.
    pub fn resize(&self, cols: u16, rows: u16) -> Result<(), TermError> {
        let (c, r) = check_size(cols, rows)?;
        {
            let mut state = self.state();
            if state.closed.is_some() {
                return Err(TermError::NotFound(format!(
                    "terminal {} is closed",
                    self.name
                )));
            }
            if state.size() == (cols, rows) {
                return Ok(());
            }
            state.parser.set_size(r, c);
        }
        let resized = lock(&self.master).resize(PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        });
        self.bump();
        resized.map_err(|e| TermError::Failed(format!("cannot resize the terminal: {e}")))
    }

    /// The process group in the terminal's foreground (the shell itself, or the job it runs).
    pub fn foreground(&self) -> Option<u32> {
        lock(&self.master)
            .process_group_leader()
            .and_then(|p| u32::try_from(p).ok())
    }

    /// Marks the terminal closed for `reason` and ends its programs (blocking for up to a third
    /// of a second). The screen stays readable through existing handles.
    pub fn close(&self, reason: &str) {
        {
            let mut state = self.state();
            if state.closed.is_some() {
                return;
            }
            state.closed = Some(reason.to_string());
        }
        self.bump();
        super::procs::end_session(self.pid);
    }

    /// The rendered screen, with up to `scrollback` lines above it.
    pub fn screen(&self, scrollback: u32) -> TerminalScreen {
        let mut state = self.state();
        let (cols, rows) = state.size();
        let (lines, included) = rendered_lines(&mut state.parser, scrollback as usize);
        let (row, col) = state.parser.screen().cursor_position();
        TerminalScreen {
            id: self.id.clone(),
            text: lines.join("\n"),
            cursor: TerminalCursor { row, col },
            cols,
            rows,
            scrollback: included as u32,
            running: state.status == Status::Running && state.closed.is_none(),
            seq: state.ring.end(),
            title: state.parser.callbacks().title.clone(),
        }
    }

    /// What clients are told about the terminal (`terminal.list`).
    pub fn info(&self) -> TerminalInfo {
        let state = self.state();
        let (cols, rows) = state.size();
        let (running, ended, exit_code) = match &state.status {
            Status::Running if state.closed.is_none() => (true, None, None),
            Status::Running => (false, Some("closed".to_string()), None),
            Status::Exited { code, how } => (false, Some(how.clone()), *code),
        };
        TerminalInfo {
            id: self.id.clone(),
            session_id: self.session_id.clone(),
            name: self.name.clone(),
            command: self.command.clone(),
            cols,
            rows,
            running,
            ended,
            exit_code,
            pid: Some(self.pid),
            title: state.parser.callbacks().title.clone(),
            opened_by: match self.opened_by {
                OpenedBy::Model => "model".into(),
                OpenedBy::User => "user".into(),
            },
            shared: self.model_sees(),
            started_at: self.started_at,
            watchers: self.watchers.load(Ordering::Relaxed),
            seq: state.ring.end(),
        }
    }
}

/// The screen's lines (scrollback first), trailing blanks trimmed from each and blank lines
/// trimmed from the end; and how many scrollback lines are included.
fn rendered_lines(parser: &mut vt100::Parser<Replies>, scrollback: usize) -> (Vec<String>, usize) {
    let screen = parser.screen_mut();
    let (rows, cols) = screen.size();
    let rows = usize::from(rows.get());
    let wanted = scrollback.min(screen.scrollback_len());
    let mut lines = Vec::new();
    let mut offset = wanted;
    while offset > 0 {
        screen.set_scrollback(offset);
        let take = offset.min(rows);
        lines.extend(screen.rows(0, cols.get()).take(take));
        offset -= take;
    }
    screen.set_scrollback(0);
    lines.extend(screen.rows(0, cols.get()));
    for line in &mut lines {
        line.truncate(line.trim_end().len());
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    (lines, wanted)
}

fn write_loop(
    mut writer: Box<dyn Write + Send>,
    input: std::sync::mpsc::Receiver<Vec<u8>>,
    pending: Arc<std::sync::atomic::AtomicUsize>,
) {
    while let Ok(bytes) = input.recv() {
        let ok = writer
            .write_all(&bytes)
            .and_then(|()| writer.flush())
            .is_ok();
        pending.fetch_sub(bytes.len(), Ordering::AcqRel);
        if !ok {
            break;
        }
    }
}

fn read_loop(mut reader: Box<dyn Read + Send>, term: std::sync::Weak<Terminal>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) | Err(_) => 0,
            Ok(n) => n,
        };
        let Some(term) = term.upgrade() else {
            return;
        };
        if n == 0 {
            term.state().eof = true;
            term.bump();
            return;
        }
        let replies = {
            let mut state = term.state();
            state.parser.process(&buf[..n]);
            state.ring.push(&buf[..n]);
            state.last_activity = Instant::now();
            std::mem::take(&mut state.parser.callbacks_mut().pending)
        };
        if !replies.is_empty() {
            let _ = term.queue_input(replies);
        }
        term.bump();
    }
}

/// Waits for the program to end, records how, and ends what it left in its session (as the
/// kernel's hangup would, but also for what ignores it).
async fn watch_exit(mut child: std::process::Child, term: std::sync::Weak<Terminal>) {
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break describe(&status),
            Ok(None) => {}
            Err(e) => break (None, format!("lost: {e}")),
        }
        if term.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let Some(term) = term.upgrade() else {
        return;
    };
    let pid = term.pid;
    let _ = tokio::task::spawn_blocking(move || super::procs::end_session(pid)).await;
    // Give the reader a moment to take the last output before announcing the end.
    let mut changes = term.changes();
    let _ = tokio::time::timeout(Duration::from_millis(300), async {
        while !term.state().eof {
            if changes.changed().await.is_err() {
                break;
            }
        }
    })
    .await;
    {
        let mut state = term.state();
        state.status = Status::Exited {
            code: status.0,
            how: status.1,
        };
        state.last_activity = Instant::now();
    }
    term.bump();
}

fn describe(status: &std::process::ExitStatus) -> (Option<i32>, String) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => (Some(code), format!("exit code {code}")),
        (None, Some(signal)) => (None, format!("killed by signal {signal}")),
        (None, None) => (None, "ended".to_string()),
    }
}
