//! `write`: create a file or replace its whole content.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::ToolContext;
use crate::fsutil;
use crate::tool::edit::{change_meta, read_text};
use crate::tool::{Access, Plan, Tool, ToolError, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
/// Arguments of `write`.
pub struct WriteInput {
    /// File path
    pub path: String,
    /// Full new content
    pub content: String,
}

/// The `write` tool.
pub struct Write;

impl Tool for Write {
    const NAME: &'static str = "write";
    const DESCRIPTION: &'static str =
        "Create or overwrite a file. Prefer edit to change part of a file.";
    type Input = WriteInput;

    fn plan(&self, input: &WriteInput, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let resolved = ctx.resolve(&input.path)?;
        let mut diffs = std::collections::BTreeMap::new();
        if !resolved.abs.is_dir()
            && let Ok(before) = read_text(&resolved.abs, &resolved.rel)
        {
            let before = before.unwrap_or_default();
            let diff = fsutil::unified_diff(&resolved.rel, &before, &input.content);
            diffs.insert(resolved.rel.clone(), diff);
        }
        Ok(Plan {
            access: vec![Access::write(Self::NAME, resolved.rel.clone())],
            writes: vec![resolved],
            diffs,
            ..Plan::default()
        })
    }

    async fn run(&self, input: WriteInput, ctx: &ToolContext) -> ToolOutput {
        let ctx = ctx.clone();
        fsutil::blocking(move || write(&input, &ctx)).await
    }
}

fn write(input: &WriteInput, ctx: &ToolContext) -> ToolOutput {
    let resolved = match ctx.resolve(&input.path) {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let rel = &resolved.rel;
    if resolved.abs.is_dir() {
        return ToolOutput::error(format!("{rel} is a directory"));
    }
    // A binary file that is overwritten has no text "before"; it still existed.
    let before = match read_text(&resolved.abs, rel) {
        Ok(b) => b,
        Err(_) => Some(String::new()),
    };
    if let Err(e) = fsutil::write_atomic(&resolved.abs, input.content.as_bytes()) {
        return ToolOutput::error(format!("cannot write {rel}: {e}"));
    }
    let lines = input.content.lines().count();
    let verb = if before.is_some() {
        "Overwrote"
    } else {
        "Created"
    };
    ToolOutput::ok(format!("{verb} {rel} ({lines} lines)")).with_meta(change_meta(
        rel,
        before.as_deref(),
        &input.content,
    ))
}
