//! A watcher's view of a terminal: the events to send, batched and rate-limited.
//!
//! Output goes out in batches of at most 64 KiB, at most about 30 a second; a watcher that is
//! more than 256 KiB behind, or whose position the daemon no longer keeps, gets a `redraw` of the
//! current screen instead of what it missed, so a slow client costs the daemon nothing and its
//! screen still ends the same as everyone else's.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use totem_protocol::{TerminalEvent, TerminalEventKind};

use super::term::{Status, Terminal};

/// Shortest time between two output events of one watcher.
pub const MIN_INTERVAL: Duration = Duration::from_millis(33);
/// Largest output event.
const MAX_BATCH: usize = 64 * 1024;
/// A watcher further behind than this is redrawn instead of sent what it missed.
const MAX_BEHIND: u64 = 256 * 1024;

/// One client's subscription to a terminal.
pub struct Watcher {
    terminal: Arc<Terminal>,
    changes: tokio::sync::watch::Receiver<u64>,
    /// Output delivered up to here.
    pos: u64,
    redraw: bool,
    size: (u16, u16),
    exited_sent: bool,
    done: bool,
    last_output: Option<Instant>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.terminal.watchers.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Watcher {
    /// Starts after `after_seq` when that output is still kept, else with a redraw.
    pub fn new(terminal: Arc<Terminal>, after_seq: u64) -> Self {
        terminal.watchers.fetch_add(1, Ordering::Relaxed);
        let changes = terminal.changes();
        let (size, kept) = {
            let state = terminal.state();
            (
                state.size(),
                after_seq > 0 && state.ring.since(after_seq, 0).is_some(),
            )
        };
        Self {
            terminal,
            changes,
            pos: after_seq,
            redraw: !kept,
            size,
            exited_sent: false,
            done: false,
            last_output: None,
        }
    }

    /// Marks the watcher as fallen behind: its next event is a redraw.
    pub fn fell_behind(&mut self) {
        self.redraw = true;
    }

    /// The next event to send; `None` once the terminal is closed and `closed` was returned.
    pub async fn next(&mut self) -> Option<TerminalEvent> {
        loop {
            if self.done {
                return None;
            }
            match self.poll() {
                Poll::Event(kind, seq) => {
                    return Some(TerminalEvent {
                        terminal_id: self.terminal.id.clone(),
                        seq,
                        kind,
                    });
                }
                Poll::Later(wait) => tokio::time::sleep(wait).await,
                Poll::Wait => {
                    if self.changes.changed().await.is_err() {
                        // The terminal is gone without a close: nothing more will come.
                        self.done = true;
                        return None;
                    }
                }
            }
        }
    }

    fn poll(&mut self) -> Poll {
        // Seen every change up to now; a change after this lock wakes the next wait.
        self.changes.borrow_and_update();
        let state = self.terminal.state();
        let end = state.ring.end();
        let closing = state.closed.is_some();
        if self.redraw {
            self.redraw = false;
            self.pos = end;
            self.size = state.size();
            return Poll::Event(
                TerminalEventKind::Redraw {
                    data: state.parser.screen().state_formatted(),
                    cols: self.size.0,
                    rows: self.size.1,
                },
                end,
            );
        }
        if state.size() != self.size {
            self.size = state.size();
            return Poll::Event(
                TerminalEventKind::Resized {
                    cols: self.size.0,
                    rows: self.size.1,
                },
                self.pos,
            );
        }
        if self.pos < end {
            if end - self.pos > MAX_BEHIND {
                drop(state);
                self.redraw = true;
                return self.poll();
            }
            let ended = closing || state.status != Status::Running;
            if !ended
                && let Some(last) = self.last_output
                && last.elapsed() < MIN_INTERVAL
            {
                return Poll::Later(MIN_INTERVAL - last.elapsed());
            }
            let Some(bytes) = state.ring.since(self.pos, MAX_BATCH) else {
                drop(state);
                self.redraw = true;
                return self.poll();
            };
            let cut = utf8_cut(&bytes, ended || bytes.len() == MAX_BATCH);
            if cut > 0 {
                self.pos += cut as u64;
                self.last_output = Some(Instant::now());
                return Poll::Event(
                    TerminalEventKind::Output {
                        data: String::from_utf8_lossy(&bytes[..cut]).into_owned(),
                    },
                    self.pos,
                );
            }
        }
        if let Status::Exited { code, how } = &state.status
            && !self.exited_sent
            && self.pos >= end
        {
            self.exited_sent = true;
            return Poll::Event(
                TerminalEventKind::Exited {
                    how: how.clone(),
                    exit_code: *code,
                },
                self.pos,
            );
        }
        if let Some(reason) = &state.closed {
            self.done = true;
            return Poll::Event(
                TerminalEventKind::Closed {
                    reason: reason.clone(),
                },
                self.pos,
            );
        }
        Poll::Wait
    }
}

enum Poll {
    Event(TerminalEventKind, u64),
    Later(Duration),
    Wait,
}

/// How many of `bytes` to send now: all, less an incomplete UTF-8 character at the end (it is
/// sent with the rest of it), unless `all` says not to wait.
fn utf8_cut(bytes: &[u8], all: bool) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() && !all => e.valid_up_to(),
        Err(_) => {
            // Invalid bytes further in are replaced when sent; only a cut-off tail waits.
            let tail_start = bytes.len().saturating_sub(3);
            let tail = &bytes[tail_start..];
            match tail.iter().rposition(|b| b & 0xC0 == 0xC0) {
                Some(i) if !all => {
                    let lead = tail[i];
                    let need = if lead >= 0xF0 {
                        4
                    } else if lead >= 0xE0 {
                        3
                    } else {
                        2
                    };
                    if tail.len() - i < need {
                        tail_start + i
                    } else {
                        bytes.len()
                    }
                }
                _ => bytes.len(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::utf8_cut;

    #[test]
    fn an_incomplete_character_waits_for_the_rest() {
        let text = "aé".as_bytes();
        assert_eq!(utf8_cut(&text[..2], false), 1);
        assert_eq!(utf8_cut(&text[..2], true), 2);
        assert_eq!(utf8_cut(text, false), 3);
        let mut bad = b"\xffab".to_vec();
        bad.extend_from_slice(&"é".as_bytes()[..1]);
        assert_eq!(utf8_cut(&bad, false), 3);
    }
}
