//! Params, results and events of the interactive terminals: programs on a pseudo-terminal owned
//! by the daemon, belonging to a session, that the model and every client can watch and type into.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `terminal.open`: start a program on a new terminal of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalOpenParams {
    /// The session the terminal belongs to.
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
    /// Show it to the model (its `terminal` tool lists, reads and types into it); default false:
    /// a user's terminal is the user's until shared (`terminal.share`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
}

/// One terminal as `terminal.list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalInfo {
    /// `term_…`, unique for the daemon.
    pub id: String,
    /// The session it belongs to.
    pub session_id: String,
    /// `t1`, `t2`, … within the session: what the model calls it.
    pub name: String,
    /// The command line it runs.
    pub command: String,
    /// Width in columns.
    pub cols: u16,
    /// Height in rows.
    pub rows: u16,
    /// The program still runs.
    pub running: bool,
    /// How it ended, in words (`exit code 0`, `killed by signal 9`); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// The program's exit code; absent while it runs or when a signal ended it.
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
    /// The model sees it: always for one the model started, for a user's only once shared.
    #[serde(default)]
    pub shared: bool,
    /// When it was opened, in milliseconds since the Unix epoch.
    pub started_at: u64,
    /// Clients subscribed to its output now.
    pub watchers: u32,
    /// Bytes of output so far; the `seq` of its latest output event.
    pub seq: u64,
}

/// `terminal.close`: one terminal by its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalRef {
    /// The terminal's id (`term_…`).
    pub id: String,
}

/// `terminal.write`: type into a terminal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalWriteParams {
    /// The terminal to type into.
    pub id: String,
    /// What to type, as the terminal would send it: text, `\r` for Enter, `\u0003` for Ctrl-C,
    /// escape sequences for keys. At most 64 KiB.
    pub data: String,
}

/// What `terminal.write` accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalWritten {
    /// Bytes accepted.
    pub bytes: u64,
}

/// `terminal.resize`: give a terminal a new size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalResizeParams {
    /// The terminal to resize.
    pub id: String,
    /// New width in columns (2 to 1000).
    pub cols: u16,
    /// New height in rows (2 to 1000).
    pub rows: u16,
}

/// `terminal.share`: show a user's terminal to the model of its session, or hide it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalShareParams {
    /// The terminal.
    pub id: String,
    /// True: the model's `terminal` tool can list, read and type into it; false: it cannot.
    pub shared: bool,
}

/// `terminal.list`: the daemon's terminals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalListParams {
    /// Only this session's terminals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// What `terminal.list` returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalList {
    /// Oldest first.
    pub terminals: Vec<TerminalInfo>,
}

/// `terminal.screen`: the rendered screen of a terminal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalScreenParams {
    /// The terminal to read.
    pub id: String,
    /// Also this many lines of scrollback above the screen (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollback: Option<u32>,
}

/// A cell position, from 0 at the top left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TerminalCursor {
    /// Row, from 0 at the top.
    pub row: u16,
    /// Column, from 0 at the left.
    pub col: u16,
}

/// The rendered screen: what a person looking at the terminal would read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalScreen {
    /// The terminal's id.
    pub id: String,
    /// The screen's rows as lines of text (scrollback lines first when asked for), without
    /// colours; trailing blanks are trimmed from each line.
    pub text: String,
    /// Where the cursor is on the screen.
    pub cursor: TerminalCursor,
    /// Width in columns.
    pub cols: u16,
    /// Height in rows.
    pub rows: u16,
    /// Lines of scrollback included above the screen.
    pub scrollback: u32,
    /// The program still runs.
    pub running: bool,
    /// The output this screen includes (the `seq` of the last output event it shows).
    pub seq: u64,
    /// The window title the program set, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// `terminal.subscribe`: stream a terminal's output as `terminal.event` notifications.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalSubscribeParams {
    /// The terminal to watch.
    pub id: String,
    /// Replay the output after this `seq` when the daemon still has it; otherwise (and with 0)
    /// the first event is a `redraw` of the current screen.
    #[serde(default)]
    pub after_seq: u64,
}

/// `terminal.unsubscribe`: stop a `terminal.subscribe` stream.
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
    /// The terminal the event is about.
    pub terminal_id: String,
    /// Bytes of output the terminal had produced when the event was sent: strictly increasing
    /// for `output`; resubscribe with `afterSeq` set to it.
    pub seq: u64,
    /// What happened, tagged by `type`.
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
    Output {
        /// The output, as the program wrote it.
        data: String,
    },
    /// Everything needed to draw the screen from scratch: clear the screen, then write `data`.
    /// Sent first when the output after `afterSeq` is gone, and when a client fell behind (its
    /// missed output is skipped, the screen ends the same).
    #[serde(rename = "redraw")]
    Redraw {
        /// Output that paints the whole screen.
        data: String,
        /// Width in columns.
        cols: u16,
        /// Height in rows.
        rows: u16,
    },
    /// The terminal was resized (by a client or the model).
    #[serde(rename = "resized")]
    Resized {
        /// New width in columns.
        cols: u16,
        /// New height in rows.
        rows: u16,
    },
    /// The program ended; the terminal stays readable until it is closed.
    #[serde(rename = "exited")]
    Exited {
        /// In words: `exit code 0`, `killed by signal 9`.
        how: String,
        /// The exit code; absent when a signal ended it.
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
