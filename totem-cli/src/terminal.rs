//! Watching and taking over the daemon's terminals: `totem attach --terminal ID` and the REPL's
//! `/terminal N` attach this terminal raw to one of them — keys go to the program, its output
//! comes back, the size follows the window — until Ctrl-] detaches. The program keeps running.
//!
//! rustix does the terminal work (raw mode, window size, waiting for a key with a timeout) with
//! safe calls; stdin stays blocking so the line editor finds it as it left it.

use std::io::Write;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use tokio::sync::mpsc;
use totem_protocol::{
    TerminalEventKind, TerminalInfo, TerminalList, TerminalListParams, TerminalResizeParams,
    TerminalWriteParams, method,
};

use crate::daemon::Connection;

/// The detach key: Ctrl-].
const DETACH: u8 = 0x1d;

/// How an attach ended.
pub enum Ended {
    /// The user pressed Ctrl-]; the program goes on.
    Detached,
    /// The program ended.
    Exited(String),
    /// The terminal was closed.
    Closed(String),
}

/// The session's terminals (all of them when `session_id` is None), oldest first.
pub async fn list(
    connection: &Connection,
    session_id: Option<&str>,
) -> anyhow::Result<Vec<TerminalInfo>> {
    let list: TerminalList = connection
        .client
        .call::<method::TerminalList>(TerminalListParams {
            session_id: session_id.map(str::to_string),
        })
        .await
        .context("cannot list the terminals")?;
    Ok(list.terminals)
}

/// One line per terminal, numbered from 1 as `/terminal N` takes them.
pub fn describe(terminals: &[TerminalInfo]) -> String {
    if terminals.is_empty() {
        return "No terminals. The model starts them with its terminal tool.\n".into();
    }
    let mut out = String::new();
    for (i, t) in terminals.iter().enumerate() {
        let state = match &t.ended {
            None => "running".to_string(),
            Some(how) => format!("ended, {how}"),
        };
        let yours = if t.opened_by == "user" && !t.shared {
            ", yours, hidden from the model"
        } else if t.opened_by == "user" {
            ", yours, shared with the model"
        } else {
            ""
        };
        let watchers = match t.watchers {
            0 => String::new(),
            1 => ", 1 watching".into(),
            n => format!(", {n} watching"),
        };
        out.push_str(&format!(
            "  {}. {} [{state}{yours}{watchers}] {}  ({})\n",
            i + 1,
            crate::format::one_line(&t.name, 60),
            crate::format::one_line(&t.command, 80),
            t.id
        ));
    }
    out.push_str("Attach with /terminal N; Ctrl-] comes back. /share N shows one of yours to the model, /share N off hides it.\n");
    out
}

/// Puts the terminal back as it was when dropped.
struct RawMode {
    saved: rustix::termios::Termios,
}

impl RawMode {
    fn enter() -> anyhow::Result<RawMode> {
        let stdin = std::io::stdin();
        let saved = rustix::termios::tcgetattr(stdin.as_fd())
            .context("attaching a terminal needs a terminal on standard input")?;
        let mut raw = saved.clone();
        raw.make_raw();
        rustix::termios::tcsetattr(stdin.as_fd(), rustix::termios::OptionalActions::Now, &raw)
            .context("cannot switch the terminal to raw mode")?;
        Ok(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(
            std::io::stdin().as_fd(),
            rustix::termios::OptionalActions::Now,
            &self.saved,
        );
    }
}

/// The window's size as (cols, rows), when standard output is a terminal.
pub(crate) fn window_size() -> Option<(u16, u16)> {
    let size = rustix::termios::tcgetwinsize(std::io::stdout().as_fd()).ok()?;
    (size.ws_col >= 2 && size.ws_row >= 2).then_some((size.ws_col, size.ws_row))
}

/// Reads keys on a thread that checks every 100 ms whether it should stop, so it never holds
/// standard input after the attach ends.
fn read_keys(stop: Arc<AtomicBool>) -> mpsc::UnboundedReceiver<Vec<u8>> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut buf = [0u8; 4096];
        let tick = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        while !stop.load(Ordering::Acquire) {
            let mut fds = [rustix::event::PollFd::new(
                &stdin,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut fds, Some(&tick)) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
            if stop.load(Ordering::Acquire) {
                break;
            }
            match rustix::io::read(stdin.as_fd(), &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

fn out(bytes: &[u8]) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(bytes);
    let _ = stdout.flush();
}

/// Attaches this terminal raw to terminal `id` until Ctrl-], the program's end or the terminal's
/// close. Several clients may be attached to one terminal at once.
pub async fn attach(connection: &Connection, id: &str) -> anyhow::Result<Ended> {
    let client = &connection.client;
    let info = list(connection, None)
        .await?
        .into_iter()
        .find(|t| t.id == id || t.name == id)
        .with_context(|| format!("no terminal {id}; `/terminals` lists them"))?;
    let id = info.id.clone();
    let raw = RawMode::enter()?;
    out(format!(
        "\x1b[2J\x1b[H[attached to {} `{}`; Ctrl-] detaches]\r\n",
        info.name, info.command
    )
    .as_bytes());
    if let Some((cols, rows)) = window_size() {
        resize(connection, &id, cols, rows).await;
    }
    let mut stream = client
        .subscribe_terminal(&id, 0)
        .await
        .with_context(|| format!("cannot watch terminal {}", info.name))?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut keys = read_keys(stop.clone());
    let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
        .context("cannot follow the window size")?;
    let ended = loop {
        tokio::select! {
            key = keys.recv() => {
                let Some(bytes) = key else { break Ended::Detached };
                let (typed, detach) = match bytes.iter().position(|b| *b == DETACH) {
                    Some(i) => (&bytes[..i], true),
                    None => (&bytes[..], false),
                };
                if !typed.is_empty() {
                    let data = String::from_utf8_lossy(typed).into_owned();
                    let _ = client
                        .call::<method::TerminalWrite>(TerminalWriteParams { id: id.clone(), data })
                        .await;
                }
                if detach {
                    break Ended::Detached;
                }
            }
            event = stream.next() => {
                let Some(Ok(event)) = event else {
                    break Ended::Closed("the daemon went away".into());
                };
                match event.kind {
                    TerminalEventKind::Output { data } => out(data.as_bytes()),
                    TerminalEventKind::Redraw { data, .. } => out(data.as_bytes()),
                    TerminalEventKind::Resized { .. } => {}
                    TerminalEventKind::Exited { how, .. } => break Ended::Exited(how),
                    TerminalEventKind::Closed { reason } => break Ended::Closed(reason),
                }
            }
            _ = winch.recv() => {
                if let Some((cols, rows)) = window_size() {
                    resize(connection, &id, cols, rows).await;
                }
            }
        }
    };
    stop.store(true, Ordering::Release);
    let _ = client.unsubscribe_terminal(&stream.subscription).await;
    drop(raw);
    // Leave the program's colours and modes behind, on a fresh line.
    out(b"\x1b[0m\x1b[?25h\r\n");
    // Give the key reader its last tick so the line editor gets standard input alone.
    tokio::time::sleep(Duration::from_millis(120)).await;
    Ok(ended)
}

async fn resize(connection: &Connection, id: &str, cols: u16, rows: u16) {
    let params = TerminalResizeParams {
        id: id.to_string(),
        cols,
        rows,
    };
    let _ = connection
        .client
        .call::<method::TerminalResize>(params)
        .await;
}

/// What to tell the user after an attach.
pub fn farewell(ended: &Ended, name: &str, id: &str) -> String {
    match ended {
        Ended::Detached => format!(
            "Detached from terminal {name}; it keeps running. Attach again with `totem attach --terminal {id}`.\n"
        ),
        Ended::Exited(how) => format!("The program in terminal {name} ended ({how}).\n"),
        Ended::Closed(reason) => format!("Terminal {name} was closed ({reason}).\n"),
    }
}
