//! `grep`: lines matching a regex (or a literal) in the project, with ripgrep's engine.
//!
//! Results are grouped by file, files in path order with their match counts: deterministic (the
//! same search gives the same answer, which small models and prompt caches both like) and related
//! files stay together. At most `MAX_LINES` lines are shown; files past that still appear with their
//! counts, up to `MAX_FILES`, so the model sees where else to look.

use std::borrow::Cow;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::WalkState;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::ToolContext;
use crate::fsutil::{self, PathGlob};
use crate::tool::{Access, Plan, Tool, ToolError, ToolMeta, ToolOutput};

/// Matching lines shown in one call.
pub const MAX_LINES: usize = 100;
/// Files listed in one call.
pub const MAX_FILES: usize = 200;
/// Matches counted before the search stops.
const MAX_COUNT: usize = 5000;
/// Characters kept of a matching line.
const LINE_CHARS: usize = 200;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
/// Arguments of `grep`.
// Doc comments here become the tool schema the model reads with every request: a field whose
// name says it all stays bare, to keep that schema short for small windows.
#[allow(missing_docs)]
pub struct GrepInput {
    /// Regex (or text if literal)
    pub pattern: String,
    /// Directory or file (default: root)
    pub path: Option<String>,
    /// File glob, e.g. *.ts
    pub include: Option<String>,
    /// Match pattern as plain text
    pub literal: Option<bool>,
    pub ignore_case: Option<bool>,
}

/// The `grep` tool.
pub struct Grep;

impl Tool for Grep {
    const NAME: &'static str = "grep";
    const DESCRIPTION: &'static str = "Search file contents with a regex (literal=true for plain text). Returns matching lines grouped by file.";
    type Input = GrepInput;

    fn plan(&self, input: &GrepInput, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let resolved = ctx.resolve(input.path.as_deref().unwrap_or(""))?;
        Ok(Plan {
            access: vec![Access::read(Self::NAME, resolved.rel)],
            ..Plan::default()
        })
    }

    async fn run(&self, input: GrepInput, ctx: &ToolContext) -> ToolOutput {
        let ctx = ctx.clone();
        fsutil::blocking(move || grep(&input, &ctx)).await
    }
}

/// A file the walk met that may be searched.
struct Searchable<'e> {
    /// Where to read it: the entry's own path, or a symlink's target.
    real: Cow<'e, Path>,
    /// Relative to the project root, `/`-separated.
    rel: Cow<'e, str>,
}

/// Whether `entry` is a regular file (or a link to one) inside the project, not secret, and
/// matching the include glob. Allocates nothing for an ordinary file with a UTF-8 name.
fn searchable<'e>(
    ctx: &ToolContext,
    start: &crate::boundary::Resolved,
    include: Option<&PathGlob>,
    entry: &'e ignore::DirEntry,
) -> Option<Searchable<'e>> {
    let file_type = entry.file_type()?;
    let real = if file_type.is_symlink() {
        if !fsutil::entry_inside(ctx.boundary(), entry) {
            return None;
        }
        let real = std::fs::canonicalize(entry.path()).ok()?;
        // A link to a secret file is as secret as the file.
        let real_rel = ctx.boundary().relative(&real)?;
        if ctx.is_secret(&real_rel) {
            return None;
        }
        Cow::Owned(real.is_file().then_some(real)?)
    } else if file_type.is_file() {
        Cow::Borrowed(entry.path())
    } else {
        return None;
    };
    // The walk starts at a real path inside the root, so every entry's path lies under the root.
    let rel = fsutil::below(ctx.root(), entry.path()).filter(|rel| !rel.is_empty())?;
    if ctx.is_secret(&rel) {
        return None;
    }
    if let Some(include) = include {
        let below = fsutil::below(&start.abs, entry.path())?;
        let below = if below.is_empty() { &rel } else { &below };
        if !include.is_match(below) {
            return None;
        }
    }
    Some(Searchable { real, rel })
}

struct FileHits {
    rel: String,
    count: usize,
    lines: Vec<(u64, String)>,
}

fn grep(input: &GrepInput, ctx: &ToolContext) -> ToolOutput {
    let resolved = match ctx.resolve(input.path.as_deref().unwrap_or("")) {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let matcher = match RegexMatcherBuilder::new()
        .case_insensitive(input.ignore_case.unwrap_or(false))
        .fixed_strings(input.literal.unwrap_or(false))
        .line_terminator(Some(b'\n'))
        .build(&input.pattern)
    {
        Ok(m) => m,
        Err(e) => {
            return ToolOutput::error(format!(
                "invalid regex {:?}: {e}. Set literal=true to search plain text",
                input.pattern
            ));
        }
    };
    let include = match input.include.as_deref().map(PathGlob::new).transpose() {
        Ok(i) => i,
        Err(e) => return ToolOutput::error(e),
    };
    let within = include.as_ref().map_or(&[][..], PathGlob::folders);
    let counted = AtomicUsize::new(0);
    let found: Mutex<Vec<FileHits>> = Mutex::new(Vec::new());
    fsutil::parallel_walker(&resolved.abs, within).run(|| {
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(0))
            .line_number(true)
            .build();
        let (matcher, include, resolved, counted) = (&matcher, &include, &resolved, &counted);
        let mut batch = fsutil::Batch::new(&found);
        let mut seen = 0usize;
        // One file's lines; reused so a file without matches costs no allocation.
        let mut lines: Vec<(u64, String)> = Vec::new();
        Box::new(move |entry| {
            seen += 1;
            // Checking the token takes a lock; once per 256 entries is soon enough.
            if (seen.is_multiple_of(256) && ctx.cancel.is_cancelled())
                || counted.load(Ordering::Relaxed) >= MAX_COUNT
            {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            let Some(file) = searchable(ctx, resolved, include.as_ref(), &entry) else {
                return WalkState::Continue;
            };
            // A file with more than one hard link may be a secret (or a file outside the
            // project) under another name: it is not searched.
            let Ok(handle) = std::fs::File::open(&file.real) else {
                return WalkState::Continue;
            };
            if handle
                .metadata()
                .is_ok_and(|m| !m.is_file() || m.nlink() > 1)
            {
                return WalkState::Continue;
            }
            let mut count = 0usize;
            lines.clear();
            let result = searcher.search_file(
                matcher,
                &handle,
                Lossy(|line_no, line| {
                    count += 1;
                    if lines.len() < MAX_LINES {
                        lines.push((line_no, clip_line(line)));
                    }
                    Ok(counted.fetch_add(1, Ordering::Relaxed) + 1 < MAX_COUNT)
                }),
            );
            if result.is_ok() && count > 0 {
                batch.push(FileHits {
                    rel: file.rel.into_owned(),
                    count,
                    lines: std::mem::take(&mut lines),
                });
            }
            WalkState::Continue
        })
    });
    if ctx.cancel.is_cancelled() {
        return ToolOutput::error("cancelled");
    }
    let mut files = found.into_inner().unwrap_or_default();
    files.sort_unstable_by(|a, b| a.rel.cmp(&b.rel));
    // Lines are shown in path order up to the cap; later files keep only their counts.
    let mut budget = MAX_LINES;
    for file in &mut files {
        file.lines.truncate(budget);
        budget -= file.lines.len();
    }
    let counted = counted.into_inner().min(MAX_COUNT);
    render(&files, counted, input)
}

fn clip_line(line: &str) -> String {
    let line = line.trim();
    if line.chars().count() <= LINE_CHARS {
        return line.to_string();
    }
    let kept: String = line.chars().take(LINE_CHARS).collect();
    format!("{kept}…")
}

fn render(files: &[FileHits], counted: usize, input: &GrepInput) -> ToolOutput {
    if files.is_empty() {
        return ToolOutput::ok(format!("no matches for {}", input.pattern));
    }
    let more = if counted >= MAX_COUNT { "+" } else { "" };
    let mut out = format!("{counted}{more} matches in {} files\n", files.len());
    for file in files.iter().take(MAX_FILES) {
        out.push_str(&format!("{} ({})\n", file.rel, file.count));
        for (line_no, text) in &file.lines {
            out.push_str(&format!("  {line_no}: {text}\n"));
        }
    }
    let shown: usize = files.iter().map(|f| f.lines.len()).sum();
    let mut meta = ToolMeta::default();
    if shown < counted || files.len() > MAX_FILES {
        out.push_str(&format!(
            "({shown} of {counted}{more} matching lines shown; narrow with path or include)\n"
        ));
        meta.truncated = true;
    }
    ToolOutput::ok(out).with_meta(meta)
}
