//! `patch`: several edits over several files, all or nothing.
//!
//! Every edit is applied in memory first, in order (later edits of a file see the earlier ones); if
//! any fails, nothing is written and the model is told which edit and why. Files are then written
//! one by one (each atomically); should a write fail, the files already written are put back.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::ToolContext;
use crate::fsutil;
use crate::tool::edit::{Change, apply_edit, read_for_edit};
use crate::tool::{Access, FileChange, Plan, Tool, ToolError, ToolMeta, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
/// Arguments of `patch`.
pub struct PatchInput {
    /// Applied in order
    pub edits: Vec<PatchEdit>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
/// One edit of a patch (the fields of `edit`).
// Doc comments here become the tool schema the model reads with every request: a field whose
// name says it all stays bare, to keep that schema short for small windows.
#[allow(missing_docs)]
pub struct PatchEdit {
    pub path: String,
    /// Empty to create a new file
    pub old_string: String,
    pub new_string: String,
    pub replace_all: Option<bool>,
}

/// The `patch` tool.
pub struct Patch;

impl Tool for Patch {
    const NAME: &'static str = "patch";
    const DESCRIPTION: &'static str =
        "Apply several edits (same rules as edit) across files at once; all or nothing.";
    type Input = PatchInput;

    fn plan(&self, input: &PatchInput, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let mut plan = Plan::default();
        for edit in &input.edits {
            let resolved = ctx.resolve(&edit.path)?;
            if !plan.writes.contains(&resolved) {
                plan.access
                    .push(Access::write(Self::NAME, resolved.rel.clone()));
                plan.writes.push(resolved);
            }
        }
        plan.diffs = preview(&changes_of(input), ctx);
        Ok(plan)
    }

    async fn run(&self, input: PatchInput, ctx: &ToolContext) -> ToolOutput {
        let ctx = ctx.clone();
        fsutil::blocking(move || apply_all(&changes_of(&input), &ctx)).await
    }
}

fn changes_of(input: &PatchInput) -> Vec<Change<'_>> {
    input
        .edits
        .iter()
        .map(|e| Change {
            path: &e.path,
            old: &e.old_string,
            new: &e.new_string,
            replace_all: e.replace_all.unwrap_or(false),
        })
        .collect()
}

struct FileState {
    rel: String,
    before: Option<String>,
    after: Option<String>,
}

/// The files `changes` would leave behind, in the order first named.
struct Worked {
    order: Vec<std::path::PathBuf>,
    files: BTreeMap<std::path::PathBuf, FileState>,
    summary: Vec<String>,
}

/// What `changes` would do, as one unified diff per file keyed by its relative path; empty
/// when they cannot be applied (the run says why). Nothing is written. Shared with `edit`.
pub(crate) fn preview(changes: &[Change<'_>], ctx: &ToolContext) -> BTreeMap<String, String> {
    let Ok(worked) = work_out(changes, ctx) else {
        return BTreeMap::new();
    };
    worked
        .files
        .into_values()
        .filter(|state| state.after != state.before)
        .map(|state| {
            let after = state.after.as_deref().unwrap_or("");
            let diff =
                fsutil::unified_diff(&state.rel, state.before.as_deref().unwrap_or(""), after);
            (state.rel, diff)
        })
        .collect()
}

/// Applies `changes` to the files they name, all or nothing. Shared with `edit`.
pub(crate) fn apply_all(changes: &[Change<'_>], ctx: &ToolContext) -> ToolOutput {
    let Worked {
        order,
        files,
        summary,
    } = match work_out(changes, ctx) {
        Ok(w) => w,
        Err(failed) => return ToolOutput::error(failed),
    };
    let several = changes.len() > 1;
    if let Err(e) = write_all(&order, &files) {
        return ToolOutput::error(e);
    }
    let mut meta = ToolMeta::default();
    let mut diff = String::new();
    for abs in &order {
        let Some(state) = files.get(abs) else {
            continue;
        };
        let after = state.after.as_deref().unwrap_or("");
        meta.files.push(FileChange {
            path: state.rel.clone(),
            existed_before: state.before.is_some(),
            exists_after: true,
        });
        diff.push_str(&fsutil::unified_diff(
            &state.rel,
            state.before.as_deref().unwrap_or(""),
            after,
        ));
    }
    meta.diff = Some(diff);
    let text = if several {
        format!("Applied {} edits:\n{}", changes.len(), summary.join("\n"))
    } else {
        format!("Edited {}", summary.join(""))
    };
    ToolOutput::ok(text).with_meta(meta)
}

/// Applies every change in memory, in order; the error is the message for the model.
fn work_out(changes: &[Change<'_>], ctx: &ToolContext) -> Result<Worked, String> {
    if changes.is_empty() {
        return Err("no edits given".into());
    }
    let several = changes.len() > 1;
    let mut files: BTreeMap<std::path::PathBuf, FileState> = BTreeMap::new();
    let mut order = Vec::new();
    let mut summary = Vec::new();
    for (index, change) in changes.iter().enumerate() {
        let which = if several {
            format!("edit {} ({}): ", index + 1, change.path)
        } else {
            String::new()
        };
        let resolved = match ctx.resolve(change.path) {
            Ok(r) => r,
            Err(e) => return Err(format!("{which}{e}")),
        };
        if !files.contains_key(&resolved.abs) {
            let before = match read_for_edit(&resolved.abs, &resolved.rel) {
                Ok(b) => b,
                Err(e) => return Err(format!("{which}{e}")),
            };
            order.push(resolved.abs.clone());
            files.insert(
                resolved.abs.clone(),
                FileState {
                    rel: resolved.rel.clone(),
                    after: before.clone(),
                    before,
                },
            );
        }
        let Some(state) = files.get_mut(&resolved.abs) else {
            continue;
        };
        let current = state.after.as_deref();
        let done = match current {
            None | Some("") if change.old.is_empty() => {
                state.after = Some(change.new.to_string());
                format!("{}: created", state.rel)
            }
            None => {
                let hints = fsutil::suggestions(ctx.boundary(), &resolved.abs);
                let hint = if hints.is_empty() {
                    " (use an empty oldString to create it)".to_string()
                } else {
                    format!(" Did you mean: {}?", hints.join(", "))
                };
                return Err(format!("{which}file not found: {}.{hint}", state.rel));
            }
            Some(text) => match apply_edit(text, change.old, change.new, change.replace_all) {
                Ok(applied) => {
                    state.after = Some(applied.content);
                    let how = if applied.strategy == "exact" {
                        String::new()
                    } else {
                        format!(", matched {}", applied.strategy)
                    };
                    let times = if applied.count == 1 {
                        String::new()
                    } else {
                        format!(", {} places", applied.count)
                    };
                    let mut done = format!("{}: line {}{times}{how}", state.rel, applied.line);
                    if !several && let Some(after) = &state.after {
                        // The lines as they are now: a model sees what its edit made.
                        done.push_str(&lines_now(after, applied.line, change.new));
                    }
                    done
                }
                Err(e) => {
                    let nothing = if several { " Nothing was changed." } else { "" };
                    return Err(format!("{which}{e} in {}.{nothing}", state.rel));
                }
            },
        };
        summary.push(done);
    }
    Ok(Worked {
        order,
        files,
        summary,
    })
}

/// The lines an edit's `new` text took from `line` (1-based) in `content`, with a line of context
/// each side, numbered as `read` numbers them.
fn lines_now(content: &str, line: usize, new: &str) -> String {
    crate::lines_now(content, line, line + new.lines().count().max(1) - 1)
}

fn write_all(
    order: &[std::path::PathBuf],
    files: &BTreeMap<std::path::PathBuf, FileState>,
) -> Result<(), String> {
    let mut written: Vec<&std::path::PathBuf> = Vec::new();
    for abs in order {
        let Some(state) = files.get(abs) else {
            continue;
        };
        if state.after == state.before {
            continue;
        }
        let after = state.after.as_deref().unwrap_or("");
        if let Err(e) = fsutil::write_atomic(abs, after.as_bytes()) {
            // Put back what was already written so the patch stays all or nothing.
            for done in written {
                if let Some(prev) = files.get(done) {
                    match &prev.before {
                        Some(text) => {
                            let _ = fsutil::write_atomic(done, text.as_bytes());
                        }
                        None => {
                            let _ = std::fs::remove_file(done);
                        }
                    }
                }
            }
            return Err(format!(
                "cannot write {}: {e}. Nothing was changed.",
                state.rel
            ));
        }
        written.push(abs);
    }
    Ok(())
}
