//! The method table: every method is declared once, here. Dispatch names, the typed `Method`
//! markers, the MCP mirror's list and the JSON Schema all come from this one table.

use schemars::{JsonSchema, SchemaGenerator};
use serde::{Serialize, de::DeserializeOwned};

use crate::api::*;
use crate::api_changes::*;
use crate::api_provider::*;
use crate::api_run::*;
use crate::api_terminal::*;
use crate::types::Session;

/// A method of the protocol, known at compile time: `method::SessionGet::NAME` and its types.
pub trait Method {
    /// The name on the wire (`session.get`).
    const NAME: &'static str;
    /// What the call takes.
    type Params: Serialize + DeserializeOwned + JsonSchema;
    /// What it answers.
    type Result: Serialize + DeserializeOwned + JsonSchema;
}

/// What the table knows about a method, at run time.
#[derive(Clone, Copy)]
pub struct MethodInfo {
    /// The name on the wire.
    pub name: &'static str,
    /// What it does, for the schema and the MCP tool's description.
    pub doc: &'static str,
    /// Mirrored as a tool by Totem's MCP server.
    pub mcp: bool,
    /// A subscription: the result is a subscription id and events follow as notifications.
    pub subscription: bool,
    /// The params' JSON Schema.
    pub params_schema: fn(&mut SchemaGenerator) -> schemars::Schema,
    /// The result's JSON Schema.
    pub result_schema: fn(&mut SchemaGenerator) -> schemars::Schema,
}

impl std::fmt::Debug for MethodInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MethodInfo")
            .field("name", &self.name)
            .field("mcp", &self.mcp)
            .finish()
    }
}

macro_rules! method_table {
    ($(
        $(#[doc = $doc:literal])+
        $marker:ident = $name:literal ($params:ty) -> $result:ty { mcp: $mcp:literal, subscription: $sub:literal };
    )*) => {
        /// Typed markers, one per method.
        pub mod method {
            #[allow(unused_imports)]
            use super::*;
            $(
                $(#[doc = $doc])+
                #[derive(Debug, Clone, Copy)]
                pub struct $marker;
                impl super::Method for $marker {
                    const NAME: &'static str = $name;
                    type Params = $params;
                    type Result = $result;
                }
            )*
        }

        /// Every method, in the order of the spec.
        pub const METHODS: &[MethodInfo] = &[$(
            MethodInfo {
                name: $name,
                doc: concat!($($doc, "\n"),+),
                mcp: $mcp,
                subscription: $sub,
                params_schema: |g| g.subschema_for::<$params>(),
                result_schema: |g| g.subschema_for::<$result>(),
            },
        )*];
    };
}

method_table! {
    /// Opens the conversation: version negotiation and capabilities. Must be the first call.
    Initialize = "initialize" (InitializeParams) -> InitializeResult { mcp: false, subscription: false };
    /// Version, pid, uptime, store path and counts.
    DaemonStatus = "daemon.status" (NoParams) -> crate::api::DaemonStatus { mcp: false, subscription: false };
    /// Streams events across sessions (created, renamed, deleted, their status, permission
    /// questions asked and resolved, runs ended) as `daemon.event` notifications; the current
    /// state comes first.
    DaemonSubscribe = "daemon.subscribe" (NoParams) -> String { mcp: false, subscription: true };
    /// Stops a `daemon.subscribe` subscription.
    DaemonUnsubscribe = "daemon.unsubscribe" (SessionUnsubscribeParams) -> bool { mcp: false, subscription: false };
    /// Stops the daemon gracefully after answering; the store is persisted first.
    DaemonShutdown = "daemon.shutdown" (NoParams) -> Ack { mcp: false, subscription: false };
    /// Writes a consistent copy of the store and the blobs to a file while the daemon runs
    /// (`totem store backup FILE`; `totem store restore FILE` puts it back with the daemon stopped).
    StoreBackup = "store.backup" (StoreBackupParams) -> StoreBackupResult { mcp: false, subscription: false };
    /// Registers a folder as a project (or finds it) by its canonical path.
    ProjectOpen = "project.open" (ProjectOpenParams) -> crate::types::Project { mcp: false, subscription: false };
    /// Lists projects, oldest first.
    ProjectList = "project.list" (ListParams) -> ProjectPage { mcp: true, subscription: false };
    /// Runs the Total.js 5 conventions check on a project, or on some of its files or folders.
    ProjectCheck = "project.check" (ProjectCheckParams) -> crate::api::ProjectCheck { mcp: true, subscription: false };
    /// Creates a session in a project.
    SessionCreate = "session.create" (SessionCreateParams) -> Session { mcp: true, subscription: false };
    /// Lists sessions, newest activity first, optionally of one project.
    SessionList = "session.list" (SessionListParams) -> SessionPage { mcp: true, subscription: false };
    /// One session.
    SessionGet = "session.get" (SessionRef) -> Session { mcp: true, subscription: false };
    /// Changes a session's title.
    SessionRename = "session.rename" (SessionRenameParams) -> Session { mcp: false, subscription: false };
    /// Deletes a session with its messages and events.
    SessionDelete = "session.delete" (SessionRef) -> SessionDeleted { mcp: false, subscription: false };
    /// A session's stored messages, oldest first, after a sequence number.
    SessionMessages = "session.messages" (SessionMessagesParams) -> crate::api::SessionMessages { mcp: true, subscription: false };
    /// Streams a session's events as `session.event` notifications, replaying those after `afterSeq`.
    SessionSubscribe = "session.subscribe" (SessionSubscribeParams) -> String { mcp: false, subscription: true };
    /// Stops a subscription.
    SessionUnsubscribe = "session.unsubscribe" (SessionUnsubscribeParams) -> bool { mcp: false, subscription: false };
    /// Stores the user's prompt and starts a run; returns at once, progress comes as events.
    SessionPrompt = "session.prompt" (SessionPromptParams) -> PromptAccepted { mcp: false, subscription: false };
    /// Sends a prompt to the agent and waits until its run ends or `timeoutMs` passes; returns
    /// the run's status and final answer. Permission questions wait for a person.
    SessionAsk = "session.ask" (SessionAskParams) -> RunOutcome { mcp: true, subscription: false };
    /// Stops the session's run and every process it started; prompts queued behind it are dropped.
    SessionAbort = "session.abort" (SessionRef) -> SessionAborted { mcp: true, subscription: false };
    /// Runs a slash command on the daemon: `/compact`, `/init`, or a custom one from `.totem/commands/`.
    SessionCommand = "session.command" (SessionCommandParams) -> CommandResult { mcp: false, subscription: false };
    /// Unified diffs of what one run, or the whole session, changed on disk; or git's view.
    SessionDiff = "session.diff" (SessionDiffParams) -> crate::api_changes::SessionDiff { mcp: true, subscription: false };
    /// Takes back the newest run's file changes that are not undone yet; repeat to go further back.
    SessionUndo = "session.undo" (SessionUndoParams) -> ChangesApplied { mcp: false, subscription: false };
    /// Applies the last undone run's changes again (one level; a new run clears it).
    SessionRedo = "session.redo" (SessionUndoParams) -> ChangesApplied { mcp: false, subscription: false };
    /// A new session with the history up to a message, linked to its parent by `parentId`.
    SessionFork = "session.fork" (SessionForkParams) -> Session { mcp: false, subscription: false };
    /// A new session in a project from exported messages (`totem import`).
    SessionImport = "session.import" (SessionImportParams) -> Session { mcp: false, subscription: false };
    /// Runs a shell command in the project folder for the user (the REPL's `!command`), asking
    /// first as the `bash` tool would; the command's output is the result, not an event.
    SessionShell = "session.shell" (SessionShellParams) -> ShellResult { mcp: false, subscription: false };
    /// The session's background jobs (started by the `job` tool), oldest first.
    JobList = "job.list" (SessionRef) -> crate::api::JobList { mcp: true, subscription: false };
    /// Starts a program on a new pseudo-terminal in the session's project folder, owned by the
    /// daemon: it outlives runs and clients, not its session or the daemon.
    TerminalOpen = "terminal.open" (TerminalOpenParams) -> TerminalInfo { mcp: false, subscription: false };
    /// Types into a terminal: text, control keys and escape sequences, as a keyboard would.
    TerminalWrite = "terminal.write" (TerminalWriteParams) -> TerminalWritten { mcp: false, subscription: false };
    /// Changes a terminal's size; the program gets SIGWINCH and watchers a `resized` event.
    TerminalResize = "terminal.resize" (TerminalResizeParams) -> TerminalInfo { mcp: false, subscription: false };
    /// Shows a user's terminal to the model of its session, or hides it again.
    TerminalShare = "terminal.share" (TerminalShareParams) -> TerminalInfo { mcp: false, subscription: false };
    /// Ends a terminal's program (SIGHUP, then SIGKILL to its whole session) and forgets it.
    TerminalClose = "terminal.close" (TerminalRef) -> TerminalInfo { mcp: false, subscription: false };
    /// The terminals the daemon holds, oldest first, optionally of one session.
    TerminalList = "terminal.list" (TerminalListParams) -> crate::api_terminal::TerminalList { mcp: false, subscription: false };
    /// A terminal's rendered screen as text, with the cursor.
    TerminalScreen = "terminal.screen" (TerminalScreenParams) -> crate::api_terminal::TerminalScreen { mcp: false, subscription: false };
    /// Streams a terminal's output as `terminal.event` notifications, from `afterSeq` or a redraw.
    TerminalSubscribe = "terminal.subscribe" (TerminalSubscribeParams) -> String { mcp: false, subscription: true };
    /// Stops a terminal subscription.
    TerminalUnsubscribe = "terminal.unsubscribe" (TerminalUnsubscribeParams) -> bool { mcp: false, subscription: false };
    /// A run's status, and its final answer once it ended.
    RunGet = "run.get" (RunRef) -> RunOutcome { mcp: true, subscription: false };
    /// Waits until a run ends or `timeoutMs` passes; returns its status and final answer.
    RunWait = "run.wait" (RunWaitParams) -> RunOutcome { mcp: true, subscription: false };
    /// Answers a permission question; the first answer wins and withdraws it everywhere else.
    PermissionReply = "permission.reply" (PermissionReplyParams) -> Ack { mcp: false, subscription: false };
    /// The session's questions still waiting for an answer.
    PermissionList = "permission.list" (SessionRef) -> crate::api::PermissionList { mcp: false, subscription: false };
    /// Adds a model provider to the settings; its key is stored encrypted and never returned.
    ProviderAdd = "provider.add" (ProviderAddParams) -> ProviderInfo { mcp: false, subscription: false };
    /// The configured providers, without keys (`hasKey` says whether one is stored).
    ProviderList = "provider.list" (NoParams) -> crate::api_provider::ProviderList { mcp: false, subscription: false };
    /// Removes a provider and its stored key.
    ProviderRemove = "provider.remove" (ProviderRef) -> ProviderRemoved { mcp: false, subscription: false };
    /// Asks a provider for its model list and says in plain words whether it answered.
    ProviderTest = "provider.test" (ProviderTestParams) -> ProviderTestResult { mcp: false, subscription: false };
    /// Adds (or replaces) an MCP server in the user's settings, with its secrets encrypted.
    McpServerAdd = "mcpServer.add" (McpServerAddParams) -> McpServerInfo { mcp: false, subscription: false };
    /// The MCP servers of the user's settings, without secret values.
    McpServerList = "mcpServer.list" (NoParams) -> crate::api_provider::McpServerList { mcp: false, subscription: false };
    /// Removes an MCP server from the user's settings, with its stored secrets.
    McpServerRemove = "mcpServer.remove" (ProviderRef) -> ProviderRemoved { mcp: false, subscription: false };
    /// Starts an MCP server of the user's settings, lists its tools and stops it.
    McpServerTest = "mcpServer.test" (McpServerTestParams) -> McpServerTestResult { mcp: false, subscription: false };
    /// Starts an OAuth login to a remote MCP server: returns the URL to open in the browser.
    McpServerLogin = "mcpServer.login" (McpServerLoginParams) -> McpServerLoginStarted { mcp: false, subscription: false };
    /// Finishes an OAuth login with the URL the browser came back to; the tokens are stored encrypted.
    McpServerLoginFinish = "mcpServer.loginFinish" (McpServerLoginFinishParams) -> McpServerInfo { mcp: false, subscription: false };
    /// Forgets the OAuth tokens of an MCP server.
    McpServerLogout = "mcpServer.logout" (ProviderRef) -> McpServerLogoutResult { mcp: false, subscription: false };
    /// Models of every configured provider (or of one), as `provider/model`, with context
    /// window, capabilities and prices. With no provider configured, a local Ollama is asked.
    ModelList = "model.list" (ModelListParams) -> crate::api_provider::ModelList { mcp: true, subscription: false };
    /// Creates or replaces the bearer token of the MCP server's HTTP listener and returns it,
    /// once; it is stored encrypted.
    McpTokenRotate = "mcpToken.rotate" (NoParams) -> McpToken { mcp: false, subscription: false };
    /// Starts the HTTP listener if it is not running and returns the web client's URL with a
    /// one-time token (`totem web`).
    WebOpen = "web.open" (NoParams) -> WebOpened { mcp: false, subscription: false };
}

/// Looks a method up by name.
pub fn find(name: &str) -> Option<&'static MethodInfo> {
    METHODS.iter().find(|m| m.name == name)
}
