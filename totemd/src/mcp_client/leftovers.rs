//! The process groups of the stdio servers this daemon started, written to
//! `$TOTEM_HOME/mcp-servers.txt` while they run, so that a daemon killed without a chance to stop
//! them (`kill -9`, a crash) does not leave them behind: the next daemon ends what is still
//! recorded when it starts.
//!
//! A line is `PGID START`: the group leader's pid and its start time (clock ticks since boot, as
//! `/proc/PID/stat` gives it), so a pid the system gave to another program since is left alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::util::lock;

/// The record file and what it holds now.
struct Record {
    path: PathBuf,
    groups: BTreeMap<i32, u64>,
}

static RECORD: OnceLock<Mutex<Record>> = OnceLock::new();

const FILE: &str = "mcp-servers.txt";

/// Ends the server groups a previous daemon recorded under `home` and still running as recorded,
/// then keeps the record of this daemon's servers there. Returns how many groups it ended.
pub fn end_previous(home: &Path) -> usize {
    let path = home.join(FILE);
    let mut ended = 0;
    if let Ok(text) = std::fs::read_to_string(&path) {
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            let (Some(Ok(pgid)), Some(Ok(start))) = (
                parts.next().map(str::parse::<i32>),
                parts.next().map(str::parse::<u64>),
            ) else {
                continue;
            };
            if pgid > 1 && still_running(pgid, start) {
                tracing::info!(pgid, "ending an MCP server a previous totemd left running");
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                );
                ended += 1;
            }
        }
    }
    let _ = std::fs::remove_file(&path);
    let record = Record {
        path,
        groups: BTreeMap::new(),
    };
    if let Err(record) = RECORD.set(Mutex::new(record)) {
        // A second daemon in this process (tests): it records to its own home from now on.
        if let Some(current) = RECORD.get() {
            let record = record.into_inner().unwrap_or_else(|e| e.into_inner());
            *lock(current) = record;
        }
    }
    ended
}

/// Records a started server's process group (its leader is `pgid`).
pub fn record(pgid: i32) {
    let Some(start) = start_time(pgid) else {
        return;
    };
    if let Some(record) = RECORD.get() {
        let mut record = lock(record);
        record.groups.insert(pgid, start);
        write(&record);
    }
}

/// Forgets a server's group once it was killed.
pub fn forget(pgid: i32) {
    if let Some(record) = RECORD.get() {
        let mut record = lock(record);
        if record.groups.remove(&pgid).is_some() {
            write(&record);
        }
    }
}

fn write(record: &Record) {
    let text: String = record
        .groups
        .iter()
        .map(|(pgid, start)| format!("{pgid} {start}\n"))
        .collect();
    let tmp = record.path.with_extension("tmp");
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &record.path));
    if let Err(e) = written {
        tracing::warn!(error = %e, path = %record.path.display(), "cannot record the MCP servers' processes");
    }
}

/// Whether group `pgid` still holds what was recorded: its leader with the recorded start time,
/// or, the leader gone, members started after it (a group's id is not reused while it has
/// members).
fn still_running(pgid: i32, start: u64) -> bool {
    if let Some(leader) = start_time(pgid) {
        return leader == start;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        entry
            .file_name()
            .to_str()
            .and_then(|pid| pid.parse::<i32>().ok())
            .and_then(stat_fields)
            .is_some_and(|fields| {
                // After the command name: state, ppid, pgrp, …, starttime (the 20th).
                fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
                    && fields
                        .get(19)
                        .and_then(|s| s.parse::<u64>().ok())
                        .is_some_and(|s| s >= start)
            })
    })
}

/// A process's start time in clock ticks since boot.
fn start_time(pid: i32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The fields of `/proc/PID/stat` after the command name (which may hold spaces).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    Some(rest.split(' ').map(str::to_string).collect())
}
