//! `edit`: replace text in a file — the exact text first, then tolerant matches.
//!
//! Small models copy code imperfectly: wrong indentation, trimmed or doubled spaces, `\n` written as
//! an escape. After an exact match fails we try, in order: indentation-flexible (same lines, shifted;
//! the new text is shifted the same way), line-trimmed, whitespace-normalised, escape-normalised,
//! and finally with the line numbers of `read` output removed.
//! Whatever the strategy, more than one match without `replaceAll` is refused with the candidate
//! line numbers: a tolerant match must never pick a place at random.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::ToolContext;
use crate::fsutil;
use crate::tool::{Access, FileChange, Plan, Tool, ToolError, ToolMeta, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
/// Arguments of `edit`.
pub struct EditInput {
    /// File path
    pub path: String,
    /// Exact text to replace
    pub old_string: String,
    /// Replacement text
    pub new_string: String,
    /// Replace every occurrence
    pub replace_all: Option<bool>,
}

/// The `edit` tool.
pub struct Edit;

impl Tool for Edit {
    const NAME: &'static str = "edit";
    const DESCRIPTION: &'static str = "Replace oldString with newString in a file. Copy oldString exactly from the file, without line numbers; it must match one place unless replaceAll.";
    type Input = EditInput;

    fn plan(&self, input: &EditInput, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let resolved = ctx.resolve(&input.path)?;
        let change = Change {
            path: &input.path,
            old: &input.old_string,
            new: &input.new_string,
            replace_all: input.replace_all.unwrap_or(false),
        };
        Ok(Plan {
            access: vec![Access::write(Self::NAME, resolved.rel.clone())],
            writes: vec![resolved],
            diffs: crate::tool::patch::preview(&[change], ctx),
            ..Plan::default()
        })
    }

    async fn run(&self, input: EditInput, ctx: &ToolContext) -> ToolOutput {
        let ctx = ctx.clone();
        fsutil::blocking(move || {
            let change = Change {
                path: &input.path,
                old: &input.old_string,
                new: &input.new_string,
                replace_all: input.replace_all.unwrap_or(false),
            };
            crate::tool::patch::apply_all(&[change], &ctx)
        })
        .await
    }
}

/// One replacement, as `edit` and `patch` take it.
pub(crate) struct Change<'a> {
    pub path: &'a str,
    pub old: &'a str,
    pub new: &'a str,
    pub replace_all: bool,
}

/// A replacement done in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The file's new content.
    pub content: String,
    /// How many places were replaced.
    pub count: usize,
    /// `exact`, `indentation-flexible`, `line-trimmed`, `whitespace-normalised`, `escape-normalised`,
    /// `line-numbers-removed`.
    pub strategy: &'static str,
    /// 1-based line of the first replacement.
    pub line: usize,
}

/// What an edit with an empty `oldString` is told: how to add lines, with a line of the file as
/// the anchor (in a Total.js controller its last `ROUTE(` line, where a new route goes). The 1.5B
/// sent an empty oldString to add a route three times, told only to use write.
fn empty_old_string(content: &str) -> String {
    let lines: Vec<&str> = content.lines().collect();
    let anchor = lines
        .iter()
        .rev()
        .find(|l| l.trim_start().starts_with("ROUTE("))
        .or_else(|| lines.iter().rev().find(|l| !l.trim().is_empty()));
    match anchor {
        Some(line) => format!(
            "oldString is empty. To add lines, set oldString to a line of the file they go after, e.g. {:?}, and newString to that line followed by your new lines; to replace the whole file use write",
            line.trim()
        ),
        None => "oldString is empty and the file is empty; use write to give it content".into(),
    }
}

/// Replaces `old` with `new` in `content`. The error is a message for the model.
pub fn apply_edit(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Applied, String> {
    if old.is_empty() {
        return Err(empty_old_string(content));
    }
    let crlf = content.contains("\r\n");
    let text = content.replace("\r\n", "\n");
    let old_lf = old.replace("\r\n", "\n");
    let new_lf = new.replace("\r\n", "\n");
    // The same text as both strings changes nothing, whether or not it is in the file: told it
    // was "already made", the 1.5B sent `about` → `about` for a line still broken until stopped
    // (issue 34, c42).
    if old == new {
        return Err(
            "oldString and newString are the same, so this edit changes nothing; put the corrected text in newString to change it"
                .to_string(),
        );
    }
    // The same edit made twice (small models repeat their last call): the file has the new text
    // and not the old, and the model is told so rather than "not found".
    // An edit that only removes characters (its new text inside its old) is not recognised
    // this way: its short new text is often in the file anyway (the 1.5B turned `about;` into
    // `about`, then was told that change was made when `about` was found on the line).
    if !new_lf.trim().is_empty()
        && !text.contains(&old_lf)
        && !old_lf.contains(&new_lf)
        && let Some(at) = text.find(&new_lf)
    {
        let line = text[..at].matches('\n').count() + 1;
        return Err(format!(
            "this change is already made (do not make it again; go on with the next change, or answer if the task is done): newString is at line {line}"
        ));
    }
    let mut applied = find_and_replace(&text, &old_lf, &new_lf, replace_all)?;
    if applied.is_none() {
        let (old_u, new_u) = (unescape(&old_lf), unescape(&new_lf));
        if old_u != old_lf {
            applied = find_and_replace(&text, &old_u, &new_u, replace_all)?.map(|mut a| {
                a.strategy = "escape-normalised";
                a
            });
        }
    }
    if applied.is_none()
        && let Some(old_n) = strip_line_numbers(&old_lf)
    {
        // Copied from `read` output with its line numbers.
        let new_n = strip_line_numbers(&new_lf).unwrap_or_else(|| new_lf.clone());
        applied = find_and_replace(&text, &old_n, &new_n, replace_all)?.map(|mut a| {
            a.strategy = "line-numbers-removed";
            a
        });
    }
    let Some(mut applied) = applied else {
        return Err(not_found(&text, &old_lf));
    };
    if crlf {
        applied.content = applied.content.replace('\n', "\r\n");
    }
    Ok(applied)
}

fn find_and_replace(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Option<Applied>, String> {
    let starts: Vec<usize> = text.match_indices(old).map(|(i, _)| i).collect();
    if !starts.is_empty() {
        // Line numbers counted once through the text, not from its start for each match.
        let mut lines = Vec::with_capacity(starts.len());
        let (mut at, mut line) = (0, 1);
        for &start in &starts {
            line += text.as_bytes()[at..start]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            at = start;
            lines.push(line);
        }
        if starts.len() > 1 && !replace_all {
            return Err(ambiguous(&lines));
        }
        return Ok(Some(Applied {
            content: text.replace(old, new),
            count: starts.len(),
            strategy: "exact",
            line: lines[0],
        }));
    }
    for strategy in STRATEGIES {
        if let Some(applied) = line_match(text, old, new, replace_all, strategy)? {
            return Ok(Some(applied));
        }
    }
    Ok(None)
}

#[derive(Clone, Copy)]
enum Strategy {
    Indentation,
    Trimmed,
    Whitespace,
}

const STRATEGIES: [Strategy; 3] = [
    Strategy::Indentation,
    Strategy::Trimmed,
    Strategy::Whitespace,
];

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Strategy::Indentation => "indentation-flexible",
            Strategy::Trimmed => "line-trimmed",
            Strategy::Whitespace => "whitespace-normalised",
        }
    }

    /// What a line must equal for a match to start there (equal keys are necessary, not
    /// sufficient).
    fn key(self, line: &str) -> std::borrow::Cow<'_, str> {
        match self {
            Strategy::Indentation | Strategy::Trimmed => std::borrow::Cow::Borrowed(line.trim()),
            Strategy::Whitespace => std::borrow::Cow::Owned(squash(line)),
        }
    }

    fn same(self, file: &[&str], old: &[&str]) -> bool {
        match self {
            Strategy::Indentation => {
                let (fi, oi) = (min_indent(file), min_indent(old));
                file.iter().zip(old).all(|(f, o)| {
                    if f.trim().is_empty() && o.trim().is_empty() {
                        return true;
                    }
                    strip_chars(f, fi).trim_end() == strip_chars(o, oi).trim_end()
                })
            }
            Strategy::Trimmed => file.iter().zip(old).all(|(f, o)| f.trim() == o.trim()),
            Strategy::Whitespace => file.iter().zip(old).all(|(f, o)| squash(f) == squash(o)),
        }
    }
}

fn line_match(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    strategy: Strategy,
) -> Result<Option<Applied>, String> {
    let file: Vec<&str> = text.split('\n').collect();
    let old_lines = trim_blank_edges(old.split('\n').collect());
    if old_lines.is_empty() || old_lines.len() > file.len() {
        return Ok(None);
    }
    let k = old_lines.len();
    // Only lines whose first line already agrees are compared in full: one pass over the file
    // instead of one comparison of `k` lines per line.
    let first = strategy.key(old_lines[0]);
    let mut starts = Vec::new();
    let mut i = 0;
    while i + k <= file.len() {
        if strategy.key(file[i]) == first && strategy.same(&file[i..i + k], &old_lines) {
            starts.push(i);
            i += k;
        } else {
            i += 1;
        }
    }
    if starts.is_empty() {
        return Ok(None);
    }
    let lines: Vec<usize> = starts.iter().map(|s| s + 1).collect();
    if starts.len() > 1 && !replace_all {
        return Err(ambiguous(&lines));
    }
    let new_lines = trim_blank_edges(new.split('\n').collect());
    let mut result: Vec<String> = Vec::with_capacity(file.len());
    let mut next = 0;
    for &start in &starts {
        result.extend(file[next..start].iter().map(|s| s.to_string()));
        result.extend(reindent(&new_lines, &old_lines, &file[start..start + k]));
        next = start + k;
    }
    result.extend(file[next..].iter().map(|s| s.to_string()));
    Ok(Some(Applied {
        content: result.join("\n"),
        count: starts.len(),
        strategy: strategy.name(),
        line: lines[0],
    }))
}

/// Shifts the new lines by the difference between how the model indented the old text and how
/// the file really has it.
fn reindent(new: &[&str], old: &[&str], file: &[&str]) -> Vec<String> {
    let first = old.iter().position(|l| !l.trim().is_empty()).unwrap_or(0);
    let old_indent = indent(old.get(first).copied().unwrap_or(""));
    let file_indent = indent(file.get(first).copied().unwrap_or(""));
    new.iter()
        .map(|line| {
            if line.trim().is_empty() || old_indent == file_indent {
                return line.to_string();
            }
            if let Some(rest) = line.strip_prefix(old_indent) {
                format!("{file_indent}{rest}")
            } else if let Some(extra) = file_indent.strip_prefix(old_indent) {
                format!("{extra}{line}")
            } else {
                // Less indented than the old text's first line: remove what can be removed.
                let drop = old_indent
                    .chars()
                    .count()
                    .saturating_sub(file_indent.chars().count());
                let own = indent(line).chars().count();
                strip_chars(line, own.min(drop)).to_string()
            }
        })
        .collect()
}

fn trim_blank_edges(mut lines: Vec<&str>) -> Vec<&str> {
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let lead = lines.iter().take_while(|l| l.trim().is_empty()).count();
    lines.drain(..lead);
    lines
}

fn indent(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

fn min_indent(lines: &[&str]) -> usize {
    lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent(l).chars().count())
        .min()
        .unwrap_or(0)
}

fn strip_chars(line: &str, n: usize) -> &str {
    match line.char_indices().nth(n) {
        Some((i, _)) => &line[i..],
        None => "",
    }
}

fn squash(line: &str) -> String {
    line.chars().filter(|c| !c.is_whitespace()).collect()
}

/// `\n`, `\t`, `\"`, `\'`, `\\` written as escapes by a model that double-encoded its text.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => {}
            Some('"') => out.push('"'),
            Some('\'') => out.push('\''),
            Some('\\') => out.push('\\'),
            Some('`') => out.push('`'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// The text without the `   12\t` prefixes `read` puts before each line, when every non-blank line
/// has one.
fn strip_line_numbers(text: &str) -> Option<String> {
    let mut out = Vec::new();
    for line in text.split('\n') {
        if line.trim().is_empty() {
            out.push(line);
            continue;
        }
        let (number, rest) = line.split_once('\t')?;
        let number = number.trim();
        if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        out.push(rest);
    }
    Some(out.join("\n"))
}

fn ambiguous(lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().take(10).map(usize::to_string).collect();
    format!(
        "oldString matches {} places (lines {}); include more surrounding lines to pick one, or set replaceAll",
        lines.len(),
        shown.join(", ")
    )
}

fn not_found(text: &str, old: &str) -> String {
    let mut message =
        "oldString not found. Read the file again and copy the text exactly".to_string();
    let Some(first) = old.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return message;
    };
    if text.len() > 2_000_000 {
        return message;
    }
    let best = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let ratio = similar::TextDiff::from_chars(first, l.trim()).ratio();
            (ratio, i + 1, l.trim())
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((ratio, line, content)) = best
        && ratio >= 0.6
    {
        let content: String = content.chars().take(120).collect();
        message.push_str(&format!(" (closest: line {line}: {content})"));
    }
    message
}

/// Largest file `edit` and `patch` change: past this, the model is told to use a command.
pub const MAX_EDIT_BYTES: u64 = 10 << 20;

/// [`read_text`] for `edit` and `patch`: only files up to [`MAX_EDIT_BYTES`] (a huge file
/// would take minutes to search).
pub(crate) fn read_for_edit(abs: &std::path::Path, rel: &str) -> Result<Option<String>, String> {
    match std::fs::metadata(abs) {
        Ok(meta) if meta.is_file() && meta.len() > MAX_EDIT_BYTES => Err(format!(
            "{rel} is {:.1} MB; edit and patch change files up to {} MB. Use a command (sed, a script) for this file, or write it whole",
            meta.len() as f64 / 1_048_576.0,
            MAX_EDIT_BYTES >> 20
        )),
        _ => read_text(abs, rel),
    }
}

/// Reads a file for changing it: missing files are `None`. Only regular files are read (a FIFO
/// would block the call).
pub(crate) fn read_text(abs: &std::path::Path, rel: &str) -> Result<Option<String>, String> {
    match std::fs::metadata(abs) {
        Ok(meta) if meta.is_dir() => return Err(format!("{rel} is a directory")),
        Ok(meta) if !meta.is_file() => {
            return Err(format!(
                "{rel} is not a regular file (a FIFO, socket or device); it cannot be changed"
            ));
        }
        _ => {}
    }
    match std::fs::read(abs) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| format!("{rel} is not UTF-8 text; it cannot be edited")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => {
            Err(format!("{rel} is a directory"))
        }
        Err(e) => Err(format!("cannot read {rel}: {e}")),
    }
}

/// The metadata of a single-file change.
pub(crate) fn change_meta(rel: &str, before: Option<&str>, after: &str) -> ToolMeta {
    ToolMeta {
        files: vec![FileChange {
            path: rel.to_string(),
            existed_before: before.is_some(),
            exists_after: true,
        }],
        diff: Some(fsutil::unified_diff(rel, before.unwrap_or(""), after)),
        ..ToolMeta::default()
    }
}
