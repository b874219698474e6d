//! Params and results of every method. Params reject unknown fields, so a typo is an error and
//! never a silently ignored option.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::types::{Message, Page, Project, Session};

/// Params of a method that takes none. `{}` or no params at all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// A result that carries nothing but success.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ack {}

/// Name and version of a program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Implementation {
    /// The program's name (`totem`, `totem-vscode`).
    pub name: String,
    /// Its version.
    pub version: String,
}

/// What a client can do. Unlike every other params object, unknown keys are accepted and
/// ignored (as LSP and MCP do), so a newer client can still initialize with an older daemon.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientCapabilities {
    /// The client can show permission questions to a person and send `permission.reply`.
    #[serde(default)]
    pub permissions: bool,
}

/// `initialize`: the first request on a connection; nothing else is served before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InitializeParams {
    /// The protocol major version the client speaks.
    pub protocol_version: u32,
    /// Who is connecting, for logs and `daemon.status`.
    pub client: Implementation,
    /// What the client can do; absent means nothing optional.
    #[serde(default)]
    pub capabilities: ClientCapabilities,
}

/// What the daemon offers on this connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerCapabilities {
    /// Longest accepted line, in bytes.
    pub max_line_bytes: u64,
    /// Names of every method the daemon serves.
    pub methods: Vec<String>,
}

/// What `initialize` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The version this connection speaks from now on.
    pub protocol_version: u32,
    /// Every major version the daemon can serve, oldest first.
    pub supported_versions: Vec<u32>,
    /// The daemon's name and version.
    pub server: Implementation,
    /// What the daemon offers on this connection.
    pub capabilities: ServerCapabilities,
    /// Things the user should be told once, sent to the first client after the daemon starts
    /// (e.g. what a damaged store lost when it was repaired). Show them to the person.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
}

/// How many of each thing the daemon holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonCounts {
    /// Projects known.
    pub projects: u64,
    /// Sessions stored.
    pub sessions: u64,
    /// Clients connected now.
    pub connections: u64,
    /// Runs going now, across all sessions.
    pub running_runs: u64,
    /// Connections the daemon can hold open at once (from its file descriptor limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u64>,
}

/// Whether the store can write, and the room left on its disk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreStatus {
    /// `ok`; `full` (a write failed for lack of space: writing resumes once there is room);
    /// `failed` (a write failed otherwise: the next write reopens the store); `closed` (the
    /// store cannot be reopened: the daemon is stopping).
    pub state: String,
    /// Bytes free on the disk holding the store, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
    /// What went wrong and what to do, when `state` is not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What a damaged journal lost when this daemon opened the store, when it had to repair one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repaired: Option<String>,
}

/// What `daemon.status` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonStatus {
    /// The daemon's version.
    pub version: String,
    /// The protocol major version it speaks by default.
    pub protocol_version: u32,
    /// Its process id.
    pub pid: u32,
    /// How long it has run, in milliseconds.
    pub uptime_ms: u64,
    /// When it started, Unix milliseconds.
    pub started_at: u64,
    /// Totem's home folder (settings, store, socket), absolute.
    pub home: String,
    /// The socket it listens on, absolute.
    pub socket: String,
    /// The store's folder, absolute.
    pub store_path: String,
    /// How many of each thing it holds.
    pub counts: DaemonCounts,
    /// How commands the rules allow without asking are confined: `landlock` (the kernel
    /// sandbox) or `none` (then only commands that read no file run without asking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxStatus>,
    /// Whether the store can write, and the room left; absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreStatus>,
}

/// The daemon's sandbox for commands run without asking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxStatus {
    /// `landlock` or `none`.
    pub mode: String,
    /// One sentence: what is confined, or why nothing is.
    pub detail: String,
}

/// `store.backup`: copy the store to a file while the daemon runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoreBackupParams {
    /// The backup file to write, an absolute path; an existing file is replaced.
    pub path: String,
}

/// What `store.backup` wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreBackupResult {
    /// The backup file written, absolute.
    pub path: String,
    /// Store records and blobs written.
    pub records: u64,
    /// Blobs of the store (kept file contents) written.
    pub blobs: u64,
    /// Size of the file.
    pub bytes: u64,
}

/// `project.open`: the project of a folder, created on first open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct ProjectOpenParams {
    /// A folder; relative paths are refused. Its canonical path becomes the project.
    pub path: String,
    /// The user named this folder on purpose (`--project DIR`, or said yes when asked). `/`, a
    /// folder that holds the home folder, and the home folder itself are opened only then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_name: bool,
}

/// Cursor and size of a page. `limit` defaults to 50 and is capped at 500.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListParams {
    /// Where the page starts: a previous page's `nextCursor`; absent for the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// At most this many items (default 50, at most 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// `session.create`: a new, empty session in a project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionCreateParams {
    /// The project it works in (from `project.open`).
    pub project_id: String,
    /// Its title; absent lets its first prompt name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// `session.list`: sessions, most recently updated first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionListParams {
    /// Only sessions of this project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Where the page starts: a previous page's `nextCursor`; absent for the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// At most this many sessions (default 50, at most 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Only sessions whose title or messages contain this text (case does not matter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
}

/// One session by its id (`session.get`, `session.delete`, `session.abort`, `job.list`, `permission.list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionRef {
    /// The session's id.
    pub session_id: String,
}

/// `session.rename`: give a session a new title.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionRenameParams {
    /// The session to rename.
    pub session_id: String,
    /// Its new title.
    pub title: String,
}

/// What `session.delete` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionDeleted {
    /// The deleted session's id.
    pub session_id: String,
}

/// `session.messages`: a page of a session's stored messages, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionMessagesParams {
    /// The session to read.
    pub session_id: String,
    /// Only messages created after this event sequence number.
    #[serde(default)]
    pub after_seq: u64,
    /// At most this many messages (default 100, capped at 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The newest `limit` messages instead of the oldest (still oldest first, no next page):
    /// where a session stands, for a client that attaches.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub newest: bool,
}

/// What `session.messages` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionMessages {
    /// The page's messages, oldest first.
    pub messages: Vec<Message>,
    /// Pass as `afterSeq` for the next page; absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after_seq: Option<u64>,
    /// The summary in force, when the session was compacted: what the model is sent in place of
    /// the messages marked `compacted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionSummary>,
}

/// A session's compaction summary (`session.messages`, `session.import`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummary {
    /// The summary the model wrote, sent in place of the compacted messages.
    pub summary: String,
    /// When it was made, Unix milliseconds; default (import): the time of the import.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
}

/// `session.subscribe`: stream a session's events as `session.event` notifications.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionSubscribeParams {
    /// The session to watch.
    pub session_id: String,
    /// Replay every stored event after this sequence number before the live ones. 0 replays all.
    #[serde(default)]
    pub after_seq: u64,
}

/// `session.unsubscribe`, `daemon.unsubscribe`: stop a subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionUnsubscribeParams {
    /// The id `session.subscribe` returned.
    pub subscription: String,
}

/// `session.prompt`: send the user's text; a run starts, or waits behind the one going.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionPromptParams {
    /// The session to prompt.
    pub session_id: String,
    /// What the user wrote.
    pub text: String,
    /// `build` (all tools, the default), `plan` (read-only tools) or an agent from settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The model as `provider/model`; default: the session's last model, else the settings' one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How hard the model should think, for models known to think (default off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningLevel>,
    /// Permission rules granted for this run only, as in an agent's `allow:` list: a rule key
    /// alone (`edit`) or with a pattern (`bash(cargo test*)`). They never lift the project boundary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Files or selections to give the model with the prompt; stored as `attachment` parts of
    /// the user's message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

/// A file, some lines of it, or an editor's unsaved text for it, sent with a prompt. Checked like
/// any read: inside the project, not a secret file, text, at most 100 KB each and 300 KB in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Attachment {
    /// Relative to the project root, or absolute inside it.
    pub path: String,
    /// Only these lines (1-based, inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<crate::types::LineRange>,
    /// The text to attach instead of the file's content on disk (an unsaved buffer); with
    /// `range`, the text of those lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// How hard a model should think; each provider maps it to its own setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningLevel {
    /// No extended thinking.
    #[default]
    Off,
    /// A little thinking.
    Low,
    /// More thinking.
    Medium,
    /// As much thinking as the provider allows.
    High,
}

impl ReasoningLevel {
    /// The name on the wire and in settings.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningLevel::Off => "off",
            ReasoningLevel::Low => "low",
            ReasoningLevel::Medium => "medium",
            ReasoningLevel::High => "high",
        }
    }
}

/// What `session.abort` stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionAborted {
    /// The run that was going, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Prompts that were waiting behind it and were dropped.
    pub dropped_queued: u32,
}

/// `permission.reply`: answer a permission question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionReplyParams {
    /// The session whose run asked.
    pub session_id: String,
    /// The question's id (`permission.asked`).
    pub question_id: String,
    /// The answer.
    pub reply: crate::types::PermissionReply,
}

/// What `permission.list` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionList {
    /// Questions waiting for an answer, oldest first.
    pub questions: Vec<crate::types::PermissionQuestion>,
}

/// `session.command`: run a slash command in a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionCommandParams {
    /// The session to run it in.
    pub session_id: String,
    /// `compact`, `init`, or the name of a custom command (`.totem/commands/NAME.md`); a leading
    /// `/` is accepted.
    pub command: String,
    /// Text after the command (custom commands put it where they say `$ARGUMENTS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<String>,
    /// The mode the client is in (`build`, `plan` or an agent); a custom command's front matter
    /// may not pick a wider one. Absent: the mode of the session's newest prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// What `session.command` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandResult {
    /// What the command did, for the user.
    pub text: String,
    /// The run the command started (custom commands and `/init` are prompts to the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// What `session.prompt` answers: the run the prompt started or queued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptAccepted {
    /// The run of the prompt.
    pub run_id: String,
    /// The stored user message.
    pub message_id: String,
}

/// The list results, named so the schema reads well.
pub type ProjectPage = Page<Project>;
/// What `session.list` answers.
pub type SessionPage = Page<Session>;

/// A background command of a session (`job.list`), as started by the `job` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobInfo {
    /// `j1`, `j2`, … within the session.
    pub id: String,
    /// The command line it runs.
    pub command: String,
    /// Still running.
    pub running: bool,
    /// How it ended, in words (`exit code 0`, `killed by signal 9`); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// Its exit code; absent while it runs or when a signal ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Milliseconds since it started.
    pub elapsed_ms: u64,
}

/// The session's background jobs, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobList {
    /// The jobs, oldest first.
    pub jobs: Vec<JobInfo>,
}

/// `session.shell`: the user runs a command in the project, like a `!` line in the REPL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionShellParams {
    /// The session whose project and permissions apply.
    pub session_id: String,
    /// The command line, run by `bash -c` in the project folder.
    pub command: String,
    /// Seconds before the command and its children are killed (default 120, at most 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

/// What `session.shell` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShellResult {
    /// The command ran (false: the permission was denied, and `output` says why).
    pub ran: bool,
    /// Its output, stdout and stderr interleaved, cut to its head and tail past 30,000 bytes,
    /// ending with a bracketed note when it failed, timed out or printed nothing.
    pub output: String,
    /// The command's exit code; absent when it did not run, timed out or was killed by a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// It ran past its timeout and was killed.
    #[serde(default)]
    pub timed_out: bool,
    /// `output` was cut to its head and tail.
    #[serde(default)]
    pub truncated: bool,
}

/// What to run the Total.js conventions check on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectCheckParams {
    /// The project folder, absolute.
    pub path: String,
    /// Files or folders to check, relative to `path` (or absolute, inside it); none means the
    /// whole project.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Also start the app (`node index.js` on a free loopback port), ask its `GET` routes without
    /// parameters, and stop it; the outcome is in [`ProjectCheck::boot`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub boot: bool,
    /// On a Total.js 3/4 project, list what would have to change for Total.js 5 (the check does
    /// not apply there otherwise, and reports nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub migrate: bool,
}

/// One finding of the conventions check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckFinding {
    /// Relative to the project folder, with `/`.
    pub path: String,
    /// 1-based.
    pub line: u32,
    /// The rule's id; `// totem-ignore <rule>` on the line, or `totaljs.check.disabled` in
    /// settings, switches it off.
    pub rule: String,
    /// `error` (breaks at run time), `warning` or `info`.
    pub severity: String,
    /// What is wrong and how to fix it, in words.
    pub message: String,
}

/// The conventions check of a project or some of its files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectCheck {
    /// Findings, by file then line.
    pub findings: Vec<CheckFinding>,
    /// How many files the check read.
    pub files_checked: u32,
    /// How many findings are errors.
    pub errors: u32,
    /// How many findings are warnings.
    pub warnings: u32,
    /// How many findings are info.
    pub notes: u32,
    /// Something the user should know: the folder is not detected as Total.js 5, the project's
    /// `.totem/settings.json` names an unknown rule, a file could not be read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
    /// What the folder was detected as: `totaljs5`, `totaljs4`, `totaljs3`, `empty` or `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The boot check's outcome when it was asked for: one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<BootResult>,
}

/// The outcome of starting the app (`project.check` with `boot`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootResult {
    /// `passed`, `failed` or `skipped`.
    pub status: String,
    /// What happened, in one line (for `failed`: what broke and the project line it broke at).
    pub message: String,
    /// Milliseconds from starting `node` to stopping it; absent when skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub millis: Option<u64>,
}
