//! Ending a terminal's programs, and those a crashed daemon left behind.
//!
//! A terminal's program leads its own session (`setsid`), so everything it starts stays in that
//! session unless it leaves on purpose: ending a terminal signals every process of the session
//! (found in `/proc` on Linux; elsewhere its process group). The daemon writes the session ids of
//! its running terminals, with their start times, to `terminals.json` in its home; the next daemon
//! ends what is listed there before it serves anyone, so `kill -9` of the daemon leaves no program
//! running after the restart. The start time guards against a reused process id.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// How long a session's processes get after SIGHUP before SIGKILL.
const HANGUP_GRACE: Duration = Duration::from_millis(300);

/// One running terminal's program, as recorded on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The program's process id: also its process group and session id.
    pub pid: u32,
    /// Its start time in clock ticks since boot (`/proc/PID/stat` field 22); 0 where unknown.
    pub start: u64,
}

impl Record {
    /// The record of the running process `pid`, with its start time read from `/proc` (0 when
    /// unreadable).
    pub fn of(pid: u32) -> Self {
        Self {
            pid,
            start: stat(pid).map_or(0, |s| s.start),
        }
    }
}

/// The fields of `/proc/PID/stat` this module needs.
#[derive(Debug, Clone, Copy)]
struct Stat {
    session: u32,
    start: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields start after the last `)`.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After `)`: state(0) ppid(1) pgrp(2) session(3) … starttime(19).
    Some(Stat {
        session: fields.get(3)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Processes whose session is `sid` (Linux); empty where `/proc` is missing.
fn members(sid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| stat(*pid).is_some_and(|s| s.session == sid))
        .collect()
}

fn signal_session(sid: u32, signal: Signal) {
    let Ok(raw) = i32::try_from(sid) else {
        return;
    };
    let _ = killpg(Pid::from_raw(raw), signal);
    for pid in members(sid) {
        if let Ok(raw) = i32::try_from(pid) {
            let _ = kill(Pid::from_raw(raw), signal);
        }
    }
}

/// Whether anything of session `sid` still runs.
pub fn session_alive(sid: u32) -> bool {
    if Path::new("/proc").is_dir() {
        return !members(sid).is_empty();
    }
    i32::try_from(sid).is_ok_and(|raw| killpg(Pid::from_raw(raw), None::<Signal>).is_ok())
}

/// Ends every process of session `sid`: SIGHUP (as a closing terminal window does), then SIGKILL
/// to whatever is left after a short grace. Blocking; call it off the async threads.
pub fn end_session(sid: u32) {
    if !session_alive(sid) {
        return;
    }
    signal_session(sid, Signal::SIGHUP);
    signal_session(sid, Signal::SIGCONT);
    let deadline = std::time::Instant::now() + HANGUP_GRACE;
    while std::time::Instant::now() < deadline {
        if !session_alive(sid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_session(sid, Signal::SIGKILL);
}

/// The file of running terminals under the daemon's home.
#[derive(Debug, Clone)]
pub struct RecordFile {
    path: PathBuf,
}

impl RecordFile {
    /// The record file (`terminals.json`) under the Totem home `home`.
    pub fn new(home: &Path) -> Self {
        Self {
            path: home.join("terminals.json"),
        }
    }

    /// Writes the list (atomically: a crash leaves the old list or the new one).
    pub fn write(&self, records: &[Record]) {
        let tmp = self.path.with_extension("json.tmp");
        let text = serde_json::to_vec(records).unwrap_or_default();
        let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = written {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot record the running terminals");
        }
    }

    /// Ends the programs a previous daemon left running, then empties the list. Returns how many
    /// sessions were ended.
    pub fn end_leftovers(&self) -> usize {
        let Ok(text) = std::fs::read(&self.path) else {
            return 0;
        };
        let records: Vec<Record> = serde_json::from_slice(&text).unwrap_or_default();
        let mut ended = 0;
        for record in records {
            if leftover(&record) {
                tracing::info!(
                    pid = record.pid,
                    "ending a terminal program left by the previous daemon"
                );
                end_session(record.pid);
                ended += 1;
            }
        }
        self.write(&[]);
        ended
    }
}

/// Whether the recorded session still has processes that are ours: its leader with the same start
/// time, or — the leader gone — members of the session (a session id is not reused while any
/// process holds it).
fn leftover(record: &Record) -> bool {
    if !Path::new("/proc").is_dir() {
        // No way to tell a reused id apart: only a process group that still carries the id.
        return session_alive(record.pid);
    }
    match stat(record.pid) {
        Some(s) => s.start == record.start && s.session == record.pid,
        None => !members(record.pid).is_empty(),
    }
}
