//! `list`: a directory tree that honours ignore files, capped.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::ToolContext;
use crate::fsutil;
use crate::tool::{Access, Plan, Tool, ToolError, ToolMeta, ToolOutput};

/// Entries shown in one call.
pub const MAX_ENTRIES: usize = 400;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
/// Arguments of `list`.
pub struct ListInput {
    /// Directory (default: project root)
    pub path: Option<String>,
    /// Max depth
    pub depth: Option<usize>,
}

/// The `list` tool.
pub struct List;

impl Tool for List {
    const NAME: &'static str = "list";
    const DESCRIPTION: &'static str = "List a directory as a tree (ignored files skipped).";
    type Input = ListInput;

    fn plan(&self, input: &ListInput, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let resolved = ctx.resolve(input.path.as_deref().unwrap_or(""))?;
        Ok(Plan {
            access: vec![Access::read(Self::NAME, resolved.rel)],
            ..Plan::default()
        })
    }

    async fn run(&self, input: ListInput, ctx: &ToolContext) -> ToolOutput {
        let ctx = ctx.clone();
        fsutil::blocking(move || list(&input, &ctx)).await
    }
}

fn list(input: &ListInput, ctx: &ToolContext) -> ToolOutput {
    let resolved = match ctx.resolve(input.path.as_deref().unwrap_or("")) {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    if !resolved.abs.is_dir() {
        if resolved.abs.exists() {
            return ToolOutput::error(format!("{} is not a directory; use read", resolved.rel));
        }
        let hint = fsutil::not_found_hint(ctx, &resolved.abs);
        return ToolOutput::error(format!("{} does not exist.{hint}", resolved.rel));
    }
    let mut out = String::new();
    let mut shown = 0usize;
    let mut capped = false;
    for entry in fsutil::shallow_walker(&resolved.abs, input.depth.map(|d| d.max(1))) {
        if ctx.cancel.is_cancelled() {
            return ToolOutput::error("cancelled");
        }
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        if shown >= MAX_ENTRIES {
            capped = true;
            break;
        }
        let name = entry.file_name().to_string_lossy();
        let indent = "  ".repeat(entry.depth() - 1);
        let suffix = if entry.path_is_symlink() {
            if fsutil::entry_inside(ctx.boundary(), &entry) {
                "@"
            } else {
                "@ (link outside the project)"
            }
        } else if entry.file_type().is_some_and(|t| t.is_dir()) {
            if fsutil::is_dependency_dir(entry.path()) && entry.depth() > 0 {
                "/ (not expanded)"
            } else {
                "/"
            }
        } else {
            ""
        };
        out.push_str(&format!("{indent}{name}{suffix}\n"));
        shown += 1;
    }
    if shown == 0 {
        return ToolOutput::ok(format!("{} is empty", resolved.rel));
    }
    let mut meta = ToolMeta::default();
    if capped {
        out.push_str(&format!(
            "(stopped at {MAX_ENTRIES} entries; list a subdirectory or use glob)\n"
        ));
        meta.truncated = true;
    }
    ToolOutput::ok(out).with_meta(meta)
}
