//! Params and results of the methods that look at and take back what runs changed on disk
//! (`session.diff`, `session.undo`, `session.redo`) and of `session.fork`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn is_false(b: &bool) -> bool {
    !*b
}

/// `session.diff`: what runs of a session changed on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionDiffParams {
    /// The session whose changes to show.
    pub session_id: String,
    /// Only this run's changes (shown even when the run was undone). Default: every run of the
    /// session that is not undone, combined: each file from before the first run that touched it
    /// to after the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// git's view of the project instead (`git diff HEAD`: tracked files against the last commit,
    /// untracked files not included). Only in a git repository; not with `runId`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub git: bool,
}

/// What happened to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FileStatus {
    /// The file did not exist before.
    Added,
    /// The file's content or mode changed.
    Modified,
    /// The file is gone.
    Deleted,
}

/// One changed file of a diff. A rename is a deleted file plus an added one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangedFile {
    /// Project-relative, `/`-separated.
    pub path: String,
    /// Added, modified or deleted.
    pub status: FileStatus,
    /// The unified diff (`--- a/…`/`+++ b/…` headers, `/dev/null` for an added or deleted file);
    /// absent for a binary file or one too large to keep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Either side is not text.
    #[serde(default, skip_serializing_if = "is_false")]
    pub binary: bool,
    /// A side was too large to keep a copy of, so there is no diff (and no undo) for it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub not_kept: bool,
}

/// What `session.diff` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionDiff {
    /// Changed files, in path order.
    pub files: Vec<ChangedFile>,
    /// Every file's diff in one text, ready to show; binary files as a line saying they differ.
    pub diff: String,
    /// The runs the diff covers, oldest first (empty for git's view).
    pub run_ids: Vec<String>,
}

/// `session.undo` and `session.redo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionUndoParams {
    /// The session whose last run to take back (or apply again).
    pub session_id: String,
    /// Overwrite files changed since the run (or since the undo, for redo) instead of refusing.
    #[serde(default, skip_serializing_if = "is_false")]
    pub force: bool,
}

/// What `session.undo` or `session.redo` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangesApplied {
    /// The run whose changes were taken back (undo) or applied again (redo).
    pub run_id: String,
    /// Files written or removed, in path order.
    pub files: Vec<String>,
    /// Files that had changed since and were overwritten because of `force`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overwritten: Vec<String>,
    /// Another `session.undo` has a run to take back.
    pub can_undo: bool,
    /// `session.redo` has a run to apply again.
    pub can_redo: bool,
    /// Undo only: the text of the undone run's prompt, for the client to offer it again (the
    /// REPL puts it back in the input line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

/// `session.fork`: a new session that starts with a copy of another's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionForkParams {
    /// The session to copy.
    pub session_id: String,
    /// The last message the fork keeps (it and every earlier one). Default: the newest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// `session.import`: a new session in a project from messages written elsewhere (`totem export
/// --format json` writes them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionImportParams {
    /// The project the new session belongs to.
    pub project_id: String,
    /// Default: "Imported session".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Oldest first.
    pub messages: Vec<ImportedMessage>,
    /// The summary that stands in for the messages marked `compacted` (`session.messages` gives
    /// it); needed when any message is marked so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<crate::api::CompactionSummary>,
}

/// One message of an imported session: what `session.messages` returns, without the ids and
/// sequence numbers the daemon gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportedMessage {
    /// Who wrote it.
    pub role: crate::types::Role,
    /// Unix milliseconds; default: the time of the import.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<u64>,
    /// Its content, in order.
    pub parts: Vec<crate::types::Part>,
    /// Undone where it was exported: stored and shown as undone, never sent to the model, and
    /// not redoable here (its run's file changes stayed behind).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undone: bool,
    /// Covered by the compaction summary where it was exported: the summary (`compaction`) is
    /// sent in its place.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compacted: bool,
}
