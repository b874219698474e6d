//! `glob`: files whose path matches a pattern, newest first.
//!
//! Sorted by modification time, most recent first: the files being worked on are the ones a model
//! most likely wants, and the cap then drops the stale ones.

use std::sync::Mutex;
use std::time::SystemTime;

use ignore::WalkState;
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
            ..Plan::default()
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
    let found: Mutex<Vec<(SystemTime, String)>> = Mutex::new(Vec::new());
    // On every core like `rg --files`, only into the pattern's literal folders; only matches are
    // stat'ed (for their modification time).
    fsutil::parallel_walker(&resolved.abs, matcher.folders()).run(|| {
        let (matcher, resolved, found) = (&matcher, &resolved, &found);
        let mut seen = 0usize;
        let mut batch = fsutil::Batch::new(found);
        let mut mtimes = fsutil::Mtimes::default();
        Box::new(move |entry| {
            seen += 1;
            if seen.is_multiple_of(256) && ctx.cancel.is_cancelled() {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if entry.file_type().is_none_or(|t| t.is_dir()) {
                return WalkState::Continue;
            }
            let Some(below) = fsutil::below(&resolved.abs, entry.path()) else {
                return WalkState::Continue;
            };
            if !matcher.is_match(&below) || !fsutil::entry_inside(ctx.boundary(), &entry) {
                return WalkState::Continue;
            }
            let Some(rel) = fsutil::below(ctx.root(), entry.path()) else {
                return WalkState::Continue;
            };
            batch.push((mtimes.of(&entry), rel.into_owned()));
            WalkState::Continue
        })
    });
    if ctx.cancel.is_cancelled() {
        return ToolOutput::error("cancelled");
    }
    let mut found = found.into_inner().unwrap_or_default();
    if found.is_empty() {
        return ToolOutput::ok(format!("no files match {}", input.pattern));
    }
    let total = found.len();
    let newest_first = |a: &(SystemTime, String), b: &(SystemTime, String)| {
        b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1))
    };
    if total > MAX_RESULTS {
        found.select_nth_unstable_by(MAX_RESULTS, newest_first);
        found.truncate(MAX_RESULTS);
    }
    found.sort_unstable_by(newest_first);
    let mut out = String::new();
    for (_, rel) in &found {
        out.push_str(rel);
        out.push('\n');
    }
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
