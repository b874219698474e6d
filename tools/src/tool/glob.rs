//! `glob`: files whose path matches a pattern, newest first.
//!
//! Sorted by modification time, most recent first: the files being worked on are the ones a model
//! most likely wants, and the cap then drops the stale ones.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::ToolContext;
use crate::fsutil::{self, PathGlob};
use crate::tool::{Access, Plan, Tool, ToolError, ToolMeta, ToolOutput};

/// Paths returned in one call.
pub const MAX_RESULTS: usize = 200;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
/// Arguments of `glob`.
pub struct GlobInput {
    /// Glob, e.g. **/*.js
    pub pattern: String,
    /// Directory to search (default: root)
    pub path: Option<String>,
}

/// The `glob` tool.
pub struct Glob;

impl Tool for Glob {
    const NAME: &'static str = "glob";
    const DESCRIPTION: &'static str = "Find files by name pattern, newest first.";
    type Input = GlobInput;

    fn plan(&self, input: &GlobInput, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let resolved = ctx.resolve(input.path.as_deref().unwrap_or(""))?;
        Ok(Plan {
            access: vec![Access::read(Self::NAME, resolved.rel)],
            writes: Vec::new(),
        })
    }

    async fn run(&self, input: GlobInput, ctx: &ToolContext) -> ToolOutput {
        let ctx = ctx.clone();
        fsutil::blocking(move || glob(&input, &ctx)).await
    }
}

fn glob(input: &GlobInput, ctx: &ToolContext) -> ToolOutput {
    let resolved = match ctx.resolve(input.path.as_deref().unwrap_or("")) {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let pattern = match relative_pattern(&input.pattern, ctx) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let matcher = match PathGlob::new(&pattern) {
        Ok(m) => m,
        Err(e) => return ToolOutput::error(e),
    };
    let mut found: Vec<(std::time::SystemTime, String)> = Vec::new();
    for entry in fsutil::walker(&resolved.abs, None) {
        if ctx.cancel.is_cancelled() {
            return ToolOutput::error("cancelled");
        }
        let Ok(entry) = entry else { continue };
        if entry.file_type().is_some_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(below) = entry.path().strip_prefix(&resolved.abs) else {
            continue;
        };
        let below = below.to_string_lossy().replace('\\', "/");
        if !matcher.is_match(&below) || !fsutil::entry_inside(ctx.boundary(), &entry) {
            continue;
        }
        let Some(rel) = ctx.boundary().relative(entry.path()) else {
            continue;
        };
        let modified = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .unwrap_or(std::time::UNIX_EPOCH);
        found.push((modified, rel));
    }
    if found.is_empty() {
        return ToolOutput::ok(format!("no files match {}", input.pattern));
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let mut out: String = found
        .iter()
        .take(MAX_RESULTS)
        .map(|(_, rel)| format!("{rel}\n"))
        .collect();
    let mut meta = ToolMeta::default();
    if total > MAX_RESULTS {
        out.push_str(&format!(
            "({MAX_RESULTS} of {total} files shown, newest first; narrow the pattern or path)\n"
        ));
        meta.truncated = true;
    }
    ToolOutput::ok(out).with_meta(meta)
}

/// Patterns are relative to the search folder; an absolute pattern inside the project is made
/// relative, one outside is refused.
fn relative_pattern(pattern: &str, ctx: &ToolContext) -> Result<String, String> {
    let pattern = pattern.trim();
    if !pattern.starts_with('/') && !pattern.starts_with('~') {
        if pattern.split('/').any(|part| part == "..") {
            return Err(format!(
                "path is outside the project: {pattern} (patterns may not contain ..)"
            ));
        }
        return Ok(pattern.to_string());
    }
    let root = ctx.root().to_string_lossy();
    match pattern.strip_prefix(root.as_ref()) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            Ok(rest.trim_start_matches('/').to_string())
        }
        _ => Err(format!("path is outside the project: {pattern}")),
    }
}
