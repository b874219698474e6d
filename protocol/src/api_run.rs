//! Params and results of the methods that follow a run to its end (`run.get`, `run.wait`,
//! `session.ask`) — what other agents use through Totem's MCP server — and of `mcpToken.rotate`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::ReasoningLevel;
use crate::types::{PermissionQuestion, Run};

/// `run.get`: one run by its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunRef {
    /// The run's id.
    pub run_id: String,
}

/// How long `run.wait` and `session.ask` wait when `timeoutMs` is not given, milliseconds.
pub const DEFAULT_WAIT_MS: u64 = 45_000;
/// The longest `timeoutMs` `run.wait` and `session.ask` take, milliseconds.
pub const MAX_WAIT_MS: u64 = 600_000;

/// `run.wait`: wait until a run ends, or for at most `timeoutMs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunWaitParams {
    /// The run to wait for.
    pub run_id: String,
    /// Longest wait in milliseconds (default 45000, at most 600000); 0 answers at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `session.ask`: prompt a session and wait for the run's outcome in one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionAskParams {
    /// The session to prompt.
    pub session_id: String,
    /// What the agent should do.
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
    /// Files or selections to give the model with the prompt, as in `session.prompt`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::api::Attachment>,
    /// Longest wait in milliseconds (default 45000, at most 600000); a run still going after it
    /// keeps going: follow it with `run.wait`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// A run as far as it got: its status and, once it ended, the agent's final answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunOutcome {
    /// The run: `id`, `status` (`running`, `done`, `failed`, `aborted`, `interrupted`), `error`.
    pub run: Run,
    /// The text of the run's last answer; absent while it runs or when it wrote none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Permission questions the run waits on; a person answers them (`totem attach`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<PermissionQuestion>,
}

/// The new bearer token of the MCP server's HTTP listener.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToken {
    /// Shown this once; only its encrypted form is kept.
    pub token: String,
    /// Where the listener answers (`http://127.0.0.1:7311/mcp`), from settings.
    pub url: String,
    /// `mcpServer.http.enabled` in settings.json.
    pub enabled: bool,
}

/// `web.open`: where the web client answers, with a one-time token in the URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebOpened {
    /// `http://127.0.0.1:7311/?token=…`: opening it once trades the token for a cookie; the token
    /// then no longer works (it also expires after five minutes).
    pub url: String,
    /// The listener is bound to an address other machines can reach.
    pub remote: bool,
}
