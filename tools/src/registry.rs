//! The set of tools a run offers, and the one place that says which are read-only.

use serde_json::Value;

use crate::context::ToolContext;
use crate::recover;
use crate::tool::{
    DynTool, PreparedCall, ToolDefinition, ToolError, Typed, bash, edit, glob, grep, job, list,
    patch, read, todo, write,
};

/// The tools Plan mode offers: they read the project, never change it or run commands. `todo` only
/// records the model's plan.
pub const READ_ONLY: &[&str] = &["read", "list", "glob", "grep", "todo"];

/// The tools of a session, in the order the model sees them.
pub struct Registry {
    tools: Vec<Box<dyn DynTool>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Registry {
    /// Every built-in tool. Adding a tool: a file under `tool/` and one line here.
    pub fn builtin() -> Self {
        let mut registry = Self { tools: Vec::new() };
        registry.register(Typed::new(read::Read));
        registry.register(Typed::new(list::List));
        registry.register(Typed::new(glob::Glob));
        registry.register(Typed::new(grep::Grep));
        registry.register(Typed::new(write::Write));
        registry.register(Typed::new(edit::Edit));
        registry.register(Typed::new(patch::Patch));
        registry.register(Typed::new(bash::Bash));
        registry.register(Typed::new(job::Job));
        registry.register(Typed::new(todo::Todo));
        registry
    }

    /// Adds a tool (an MCP tool, say); a tool with the same name is replaced.
    pub fn register(&mut self, tool: impl DynTool + 'static) {
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(Box::new(tool));
    }

    /// Whether `name` may run in a read-only mode.
    pub fn is_read_only(name: &str) -> bool {
        READ_ONLY.contains(&name)
    }

    /// The names on offer in this mode.
    pub fn names(&self, read_only: bool) -> Vec<&str> {
        self.tools
            .iter()
            .map(|t| t.name())
            .filter(|n| !read_only || Self::is_read_only(n))
            .collect()
    }

    /// The definitions the model sees in this mode.
    pub fn definitions(&self, read_only: bool) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .filter(|t| !read_only || Self::is_read_only(t.name()))
            .map(|t| t.definition().clone())
            .collect()
    }

    /// The tool called `name` exactly.
    pub fn get(&self, name: &str) -> Option<&dyn DynTool> {
        self.tools
            .iter()
            .find(|t| t.name() == name)
            .map(|t| t.as_ref())
    }

    /// Turns a model's call into a prepared call: finds the tool (repairing its name), repairs the
    /// arguments, parses them, checks the mode and the project boundary, and plans the permissions.
    /// Every `Err` is a short message to hand back to the model as the tool's result.
    pub fn prepare(
        &self,
        name: &str,
        arguments: Value,
        ctx: &ToolContext,
        read_only: bool,
    ) -> Result<PreparedCall, ToolError> {
        let all = self.names(false);
        let Some(found) = recover::normalize_tool_name(name, &all) else {
            return Err(ToolError::UnknownTool {
                name: name.to_string(),
                available: self.names(read_only).join(", "),
            });
        };
        if read_only && !Self::is_read_only(found) {
            return Err(ToolError::NotAllowed(found.to_string()));
        }
        let tool = self.get(found).ok_or_else(|| ToolError::UnknownTool {
            name: name.to_string(),
            available: self.names(read_only).join(", "),
        })?;
        let parameters = &tool.definition().parameters;
        let arguments = recover::repair_arguments(arguments, parameters).map_err(|reason| {
            ToolError::InvalidArguments {
                tool: found.to_string(),
                reason,
                expected: crate::schema::signature(parameters),
            }
        })?;
        tool.prepare(arguments, ctx)
    }

    /// Tool calls written as JSON in the text of a model without native tool calling.
    pub fn calls_from_text(&self, text: &str) -> Vec<recover::TextCall> {
        recover::calls_from_text(text, &self.names(false))
    }
}
