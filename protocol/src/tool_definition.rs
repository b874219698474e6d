//! A tool as the model sees it. Not part of the socket protocol: it is here so that the crates
//! that declare tools (totem-tools, the MCP client) and the one that sends them to a model
//! (totem-provider) share one definition.

use serde::{Deserialize, Serialize};

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name the model calls.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// A JSON Schema object describing the arguments (flat for the built-in tools: no `$ref`, no
    /// titles).
    pub parameters: serde_json::Value,
}
