//! Params, results and events of the interactive terminals: programs on a pseudo-terminal owned
//! by the daemon, belonging to a session, that the model and every client can watch and type into.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalOpenParams {
    pub session_id: String,
    /// The command line, run by `bash -c` (or `sh -c`) on a new pseudo-terminal in the project
    /// folder.
    pub command: String,
    /// Width in columns (default 80, 2 to 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    /// Height in rows (default 24, 2 to 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
}

/// One terminal as `terminal.list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalInfo {
    /// `term_…`, unique for the daemon.
    pub id: String,
    pub session_id: String,
    /// `t1`, `t2`, … within the session: what the model calls it.
    pub name: String,
    pub command: String,
    pub cols: u16,
    pub rows: u16,
    /// The program still runs.
    pub running: bool,
    /// How it ended, in words (`exit code 0`, `killed by signal 9`); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The process id of the program (also its process group and session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The window title the program set, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `model` (the `terminal` tool) or `user` (`terminal.open`).
    pub opened_by: String,
    pub started_at: u64,
    /// Clients subscribed to its output now.
    pub watchers: u32,
    /// Bytes of output so far; the `seq` of its latest output event.
    pub seq: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalRef {
    /// The terminal's id (`term_…`).
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalWriteParams {
    pub id: String,
    /// What to type, as the terminal would send it: text, `\r` for Enter, `\u0003` for Ctrl-C,
    /// escape sequences for keys. At most 64 KiB.
    pub data: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalWritten {
    /// Bytes accepted.
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalResizeParams {
    pub id: String,
    pub cols: u16,
    pub rows: u16,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalListParams {
    /// Only this session's terminals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalList {
    /// Oldest first.
    pub terminals: Vec<TerminalInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalScreenParams {
    pub id: String,
    /// Also this many lines of scrollback above the screen (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollback: Option<u32>,
}

/// A cell position, from 0 at the top left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TerminalCursor {
    pub row: u16,
    pub col: u16,
}

/// The rendered screen: what a person looking at the terminal would read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalScreen {
    pub id: String,
    /// The screen's rows as lines of text (scrollback lines first when asked for), without
    /// colours; trailing blanks are trimmed from each line.
    pub text: String,
    pub cursor: TerminalCursor,
    pub cols: u16,
    pub rows: u16,
    /// Lines of scrollback included above the screen.
    pub scrollback: u32,
    pub running: bool,
    /// The output this screen includes (the `seq` of the last output event it shows).
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalSubscribeParams {
    pub id: String,
    /// Replay the output after this `seq` when the daemon still has it; otherwise (and with 0)
    /// the first event is a `redraw` of the current screen.
    #[serde(default)]
    pub after_seq: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalUnsubscribeParams {
    /// The id `terminal.subscribe` returned.
    pub subscription: String,
}

/// One event of a terminal, as sent in `terminal.event` notifications.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalEvent {
    pub terminal_id: String,
    /// Bytes of output the terminal had produced when the event was sent: strictly increasing
    /// for `output`; resubscribe with `afterSeq` set to it.
    pub seq: u64,
    #[serde(flatten)]
    pub kind: TerminalEventKind,
}

/// What happened to a terminal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum TerminalEventKind {
    /// The program printed `data` (raw terminal output, escape sequences included). Output is
    /// batched, at most about 30 events a second.
    #[serde(rename = "output")]
    Output { data: String },
    /// Everything needed to draw the screen from scratch: clear the screen, then write `data`.
    /// Sent first when the output after `afterSeq` is gone, and when a client fell behind (its
    /// missed output is skipped, the screen ends the same).
    #[serde(rename = "redraw")]
    Redraw { data: String, cols: u16, rows: u16 },
    /// The terminal was resized (by a client or the model).
    #[serde(rename = "resized")]
    Resized { cols: u16, rows: u16 },
    /// The program ended; the terminal stays readable until it is closed.
    #[serde(rename = "exited")]
    Exited {
        /// In words: `exit code 0`, `killed by signal 9`.
        how: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
    },
    /// The terminal was closed (by a client, the model, its session's deletion, the idle timeout
    /// or the daemon stopping); the subscription ends.
    #[serde(rename = "closed")]
    Closed {
        /// `closed`, `idle`, `sessionDeleted` or `shutdown`.
        reason: String,
    },
}
