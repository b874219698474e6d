//! `todo`: the model's plan for the run, shown to clients as an event.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::{ToolContext, ToolEvent};
use crate::tool::{Plan, Tool, ToolError, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
/// Arguments of `todo`.
pub struct TodoInput {
    /// The whole list, replacing the previous one
    pub todos: Vec<TodoItem>,
}

/// One step of the plan as the model writes it: strict about its fields (the protocol's
/// `TodoItem`, which the daemon announces, is not, as an output type).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// Doc comments here become the tool schema the model reads with every request: a field whose
// name says it all stays bare, to keep that schema short for small windows.
#[allow(missing_docs)]
pub struct TodoItem {
    pub content: String,
    pub status: TodoStatus,
}

/// Where a step stands: the protocol's enum, which accepts the words models use.
pub use totem_protocol::TodoStatus;

/// The `todo` tool.
pub struct Todo;

impl Tool for Todo {
    const NAME: &'static str = "todo";
    const DESCRIPTION: &'static str =
        "Write your task list for multi-step work; update it as steps finish.";
    type Input = TodoInput;

    fn plan(&self, _input: &TodoInput, _ctx: &ToolContext) -> Result<Plan, ToolError> {
        Ok(Plan::default())
    }

    async fn run(&self, input: TodoInput, ctx: &ToolContext) -> ToolOutput {
        let text: String = input
            .todos
            .iter()
            .map(|t| {
                let mark = match t.status {
                    TodoStatus::Pending => "[ ]",
                    TodoStatus::InProgress => "[>]",
                    TodoStatus::Done => "[x]",
                };
                format!("{mark} {}\n", t.content)
            })
            .collect();
        ctx.events.emit(ToolEvent::Todos { todos: input.todos });
        if text.is_empty() {
            ToolOutput::ok("todo list cleared")
        } else {
            ToolOutput::ok(text)
        }
    }
}
