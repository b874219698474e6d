//! One tool call: repaired and parsed by totem-tools, allowed (or asked, or denied) by the
//! permission engine, snapshotted, run, and followed — when it wrote files — by the formatter,
//! the project's checks and, in Total.js 5 projects, the conventions check. Nested instruction
//! files of the folders it touched are added to its result once per run.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use totem_permission::{Access, AccessKind, Decision, Policy, Verdict};
use totem_protocol::{EventKind, PermissionQuestion, QuestionKind};
use totem_provider::ToolCall;
use totem_snapshot::BlobStore as _;
use totem_tools::recover::RepeatGuard;
use totem_tools::{Registry, ToolContext};

use super::guide;
use super::run::{Changes, Runner};
use super::system::{nested_instructions, root_instructions};
use super::{confine, lock};
use crate::util::{new_id, now_ms};

/// How long a formatter may run.
const FORMAT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a check command may run.
const CHECK_TIMEOUT: Duration = Duration::from_secs(120);
/// How long an aborted tool may take to stop what it started before it is dropped.
const ABORT_GRACE: Duration = Duration::from_secs(3);
/// The text of `old` after the `edit` call, as the edit tool makes it when its oldString is
/// found; `None` when it is not (the tool then refuses the edit itself).
fn edited(call: &ToolCall, old: &str) -> Option<String> {
    let from = call.arguments["oldString"].as_str()?;
    let to = call.arguments["newString"].as_str()?;
    if from.is_empty() || !old.contains(from) {
        return None;
    }
    Some(if call.arguments["replaceAll"].as_bool() == Some(true) {
        old.replace(from, to)
    } else {
        old.replacen(from, to, 1)
    })
}

/// Words with which a task may ask to take code out of a file: a change that removes an action
/// or a route is then not refused.
const REMOVAL_WORDS: &[&str] = &[
    "remove", "delete", "drop", "rename", "replace", "move", "change", "rewrite", "instead",
];
/// The largest file new code written over it is added to (bytes).
const MERGE_BYTES: usize = 64 * 1024;
/// Output of a check shown to the model (its tail).
const CHECK_OUTPUT: usize = 3000;

/// What a run's tool calls use and leave behind.
pub(super) struct ToolState {
    pub(super) policy: Policy,
    pub(super) registry: Registry,
    pub(super) ctx: ToolContext,
    /// The same call made again and again is refused after the third time.
    pub(super) repeats: RepeatGuard,
    /// The same few calls with the same results over and over end the run.
    pub(super) cycles: super::repeat::CycleGuard,
    /// The files this run read or changed (a constrained step may overwrite only those).
    pub(super) seen: super::guide::SeenFiles,
    /// Nested instruction files already added to a result in this run.
    pub(super) seen_instructions: HashSet<PathBuf>,
    /// Formatter and check commands from AGENTS.md (the settings' ones are read from there).
    pub(super) format_commands: Vec<String>,
    pub(super) check_commands: Vec<String>,
    /// Background jobs started in this run, killed when it is aborted.
    pub(super) jobs_started: Vec<String>,
    /// Files the run's tools wrote since the last boot check (Total.js 5 projects).
    pub(super) boot_pending: Vec<String>,
    /// Boot findings already sent back to the model in this run.
    pub(super) boot_rounds: usize,
    /// Every file the run's tools wrote (Total.js 5 projects), with its text before the run's
    /// first edit of it (`None` when it did not exist): the boot check asks only the routes the
    /// run added or changed. A file a command changed is missing here until a tool names it.
    pub(super) boot_before: std::collections::HashMap<String, Option<String>>,
    /// The files the run's tools wrote, in order (keys of `boot_before` and command-changed ones).
    pub(super) boot_edited: Vec<String>,
    /// The requests of the last boot check that failed: the next check asks them again, so a fix
    /// that no longer changes the route (an action put back as it was) is still checked.
    pub(super) boot_failed_requests: Vec<totem_totaljs::BootRequest>,
    /// A command of this run changed files of the project (seen in text mode only).
    pub(super) commands_changed: bool,
    /// What each `read` of this run returned (path → the output's hash), and whether the last
    /// call read a file again with the same result.
    pub(super) reads: std::collections::HashMap<String, u64>,
    pub(super) reread: bool,
    /// The edits of this run that worked: (path, oldString, newString) → the line they changed.
    pub(super) edits_made: std::collections::HashMap<(String, String, String), usize>,
    /// The model sent an edit it had already made, and has changed nothing since: the next
    /// constrained steps leave `edit` out, so it writes the file or does something else (the
    /// 1.5B alternated that edit with reads of the file until the cycle guard).
    pub(super) edit_stuck: bool,
    /// The last call made the change asked for and nothing says it broke the app (constrained
    /// steps): a model that writes code blocks is then offered only the end of the run.
    pub(super) settled: bool,
    /// The files the prompt names (read for a small model at the run's start) that the run has
    /// not changed yet: a change is not called the last while one is left (the 1.5B changed the
    /// action of a two-file task and answered).
    pub(super) named_unchanged: Vec<String>,
    /// Whether a change of an action file was told NEWACTION's options in this run.
    pub(super) action_options_told: bool,
    /// The routes the reads of this question run found, per file (see `Runner::routes_note`).
    pub(super) routes_read: Vec<(String, String)>,
    /// The last step's answer was asked for in plain words after `{"done": true}`: its text is
    /// the answer, never read for calls (the 0.5B's answer held a JSON read, and the run went on).
    pub(super) answered_plainly: bool,
    /// The JavaScript files `node --check` parsed in this run, so one unchanged since is not
    /// parsed again.
    pub(super) syntax: super::syntax::Checked,
}

fn convert(access: &totem_tools::Access) -> Access {
    Access::new(access.kind, access.tool, access.target.clone())
}

fn question_kind(kind: AccessKind) -> QuestionKind {
    match kind {
        AccessKind::Read => QuestionKind::Read,
        AccessKind::Write => QuestionKind::Write,
        AccessKind::Execute => QuestionKind::Execute,
        AccessKind::Mcp => QuestionKind::Mcp,
    }
}

impl Runner {
    /// Runs one call and returns the text for the model and whether it failed. Never fails the
    /// run: every problem becomes a short message the model can act on.
    pub(super) async fn call(
        &mut self,
        call: &ToolCall,
        changes: &mut Changes<'_>,
    ) -> (String, bool) {
        // Counted as the model wrote it, before any validation: a model that sends the same
        // invalid call again and again is stopped like one that repeats a valid call.
        if self.tools.repeats.record(&call.name, &call.arguments) >= 3 {
            return (self.tools.repeats.message(), true);
        }
        if let Some(done) = self.call_mcp(call).await {
            return done;
        }
        let mut prepared = match self.tools.registry.prepare(
            &call.name,
            call.arguments.clone(),
            &self.tools.ctx,
            self.setup.read_only,
        ) {
            Ok(p) => p,
            Err(e @ totem_tools::ToolError::UnknownTool { .. }) => {
                return (self.with_mcp_tools(e.to_string()), true);
            }
            Err(e) => return (e.to_string(), true),
        };
        // The one file a write or edit changes (a rewrite changes its content, not its path).
        let target = match prepared.plan.writes.as_slice() {
            [file] => Some((file.rel.clone(), file.abs.clone())),
            _ => None,
        };
        // A constrained write may be rewritten before it runs: a route whose handler is an
        // action's id gets the action in its route string, a copy of an action another file
        // declares the same is left out, new code written over a whole file is added to it
        // (see `guide::merge_fragment`), and what a whole file left out that the task does not
        // ask to remove is kept. The call that runs, and that the user is asked about,
        // writes the whole file; its result starts with what Totem did.
        let mut rewritten = call.clone();
        let mut merged_note = String::new();
        if let Some((rel, abs)) = &target {
            for step in 0..4 {
                let found = match step {
                    0 => self.action_handlers_fixed(&rewritten, rel),
                    1 => self.without_copies(&rewritten, rel),
                    2 => self.fragment_write(&rewritten, rel, abs).await,
                    _ => self.removed_kept(&rewritten, rel, abs).await,
                };
                if let Some((args, note)) = found
                    && let Ok(again) = self.tools.registry.prepare(
                        &rewritten.name,
                        args.clone(),
                        &self.tools.ctx,
                        self.setup.read_only,
                    )
                {
                    prepared = again;
                    rewritten.arguments = args;
                    merged_note.push_str(&note);
                }
            }
        }
        let call = &rewritten;
        let merged_note = merged_note.as_str();
        if self.setup.tool_offer.constrained && call.name == "write" {
            let told = |refusal: String| {
                if self.setup.tool_offer.writes_code_blocks() {
                    guide::without_edit(refusal)
                } else {
                    refusal
                }
            };
            for file in &prepared.plan.writes {
                if let Some(mut refusal) = self
                    .tools
                    .seen
                    .unseen_overwrite(&file.rel, file.abs.is_file())
                {
                    // The 0.5B, asked for the new file actions/contact.js, wrote its action
                    // over views/layout.html 40 times, told each time to read it first (c41).
                    refusal.push_str(&self.missing_new_file(&file.rel));
                    return (told(refusal), true);
                }
                let content = call.arguments["content"].as_str().unwrap_or("");
                // `…` copied from an example as code: the 0.5B wrote `$.json(…)` over the
                // controller until stopped, refused for the lines it dropped (c41).
                if file.rel.ends_with(".js")
                    && content.contains('…')
                    && let Some(found) = super::syntax::check_content(&file.rel, content).await
                {
                    let refusal = format!(
                        "Not written: `…` in your code stands for code an example left out, and JavaScript cannot run it. Write the real code in its place.{}",
                        found.replace(". Fix that line.", ".")
                    );
                    return (told(refusal), true);
                }
                let old = std::fs::read_to_string(&file.abs);
                // The same content again is no change (the 0.5B wrote the controller back as
                // it was and was told the change was made).
                if old
                    .as_deref()
                    .is_ok_and(|old| guide::same_but_spacing(old, content))
                    && (old.as_deref().is_ok_and(|old| old == content)
                        || !guide::asks_for_spacing(self.prompt().unwrap_or("")))
                {
                    let mut refusal = guide::unchanged_write(&file.rel);
                    if let Ok(old) = &old {
                        refusal.push_str(&self.still_wrong(&file.rel, old));
                    }
                    return (told(refusal), true);
                }
                // A file this run created holds nothing of the project's to keep: the 0.5B
                // wrote the controller's lines into its new actions/contact.js, then its action
                // over them, and was refused until stopped (c30).
                let created_by_run = matches!(self.tools.boot_before.get(&file.rel), Some(None));
                // Code the file holds already, written over it: the 1.5B's new action had been
                // added to actions/products.js, and it wrote the action alone over the file
                // again and again, refused for what that removed (c38).
                // Only for a script that parses: deleting a stray line is how some are fixed.
                if let Ok(old) = &old
                    && !created_by_run
                    && file.rel.ends_with(".js")
                    && guide::already_in(old, content)
                    && !self.asks_removal()
                    && super::syntax::parses(&file.rel, old).await
                {
                    let refusal = format!(
                        "Not written: {} has every line of this already; there is nothing to add to it.{}",
                        file.rel,
                        self.still_wrong(&file.rel, old)
                    );
                    return (told(refusal), true);
                }
                if let Ok(old) = old
                    && !created_by_run
                    && let Some(mut refusal) = guide::dropping_overwrite(
                        &file.rel,
                        &old,
                        content,
                        self.prompt().unwrap_or(""),
                    )
                {
                    // The 0.5B, told to add an action in the new file actions/contact.js, wrote
                    // over actions/products.js again and again (c29).
                    refusal.push_str(&self.missing_new_file(&file.rel));
                    return (told(refusal), true);
                }
            }
        }
        if let Some(refusal) = self.removal_refusal(call, &prepared) {
            return (refusal, true);
        }
        if let Some((rel, abs)) = &target
            && let Some(refusal) = self.unparsable_write(call, rel, abs).await
        {
            return (refusal, true);
        }
        if let Some((rel, abs)) = &target
            && let Some(refusal) = self.error_adding_change(call, rel, abs)
        {
            return (refusal, true);
        }

        // A command only the built-in rules allowed runs confined (see `super::confine`).
        let mut confined = false;
        for access in &prepared.plan.access {
            let diff = prepared.plan.diffs.get(&access.target).map(String::as_str);
            let confinable = !prepared.plan.unconfined;
            match self
                .permit_access(&convert(access), &call.id, diff, confinable)
                .await
            {
                Err(text) => return (text, true),
                Ok(built_in) => {
                    confined |= built_in && access.kind == totem_tools::AccessKind::Execute;
                }
            }
        }

        // What the tool declared decides what follows it, not its name.
        let writes_files = prepared.plan.writes_files();
        let touched: Vec<String> = prepared
            .plan
            .access
            .iter()
            .filter(|a| a.kind != totem_tools::AccessKind::Execute)
            .map(|a| a.target.clone())
            .collect();
        // The conventions check reports what an edit changed, so it needs the file as it was.
        let mut before_edit = std::collections::HashMap::new();
        for file in &prepared.plan.writes {
            if self.setup.totaljs {
                before_edit.insert(file.rel.clone(), std::fs::read_to_string(&file.abs).ok());
            }
            if let Err(e) = changes.record_before(&file.rel) {
                tracing::warn!(path = %file.rel, error = %e, "cannot snapshot a file before a change");
            }
        }
        let unnamed_changes = prepared.plan.changes_unnamed_files();
        if unnamed_changes {
            let previous = lock(&self.agent.last_scan).clone();
            if let Err(e) = tokio::task::block_in_place(|| changes.scan_before(previous.as_ref())) {
                tracing::warn!(error = %e, "cannot scan the project before a command");
            }
        }

        let mut temp = None;
        let ctx = if confined {
            let secrets = self.tools.policy.secrets().settings();
            match confine::confined_spec(
                &self.daemon,
                self.tools.ctx.root(),
                secrets,
                &self.tools.ctx.shell,
            )
            .await
            {
                Ok((spec, folder)) => {
                    temp = Some(folder);
                    self.tools.ctx.clone().with_shell(spec)
                }
                Err(e) => return (e, true),
            }
        } else {
            self.tools.ctx.clone()
        };
        // Every tool ends when the run is aborted, also one stuck in a blocking call: a tool
        // gets a moment to stop what it started (a command's process group), then is dropped.
        let running = prepared.run(&ctx);
        tokio::pin!(running);
        let output = tokio::select! {
            output = &mut running => output,
            _ = self.cancel.cancelled() => {
                match tokio::time::timeout(ABORT_GRACE, &mut running).await {
                    Ok(output) => output,
                    Err(_) => totem_tools::ToolOutput::error("cancelled: the run was aborted"),
                }
            }
        };
        if let (Some(folder), Some(_)) = (temp.as_mut(), &output.meta.job_id) {
            // The job outlives this call; the next start clears its folder.
            folder.keep();
        }
        if let Some(id) = &output.meta.job_id {
            self.tools.jobs_started.push(id.clone());
        }
        let mut text = output.text;
        if !output.is_error && !merged_note.is_empty() {
            text.insert_str(0, merged_note);
        }
        if writes_files && !output.meta.files.is_empty() {
            let mut paths: Vec<String> = output.meta.files.iter().map(|f| f.path.clone()).collect();
            paths.sort();
            let _ = self.emit(EventKind::FilesChanged {
                run_id: Some(self.run_id.clone()),
                paths,
            });
        }
        if writes_files && !output.is_error {
            self.tools
                .named_unchanged
                .retain(|named| !output.meta.files.iter().any(|f| f.path == *named));
            if self.setup.totaljs {
                for file in &output.meta.files {
                    if !self.tools.boot_pending.contains(&file.path) {
                        self.tools.boot_pending.push(file.path.clone());
                    }
                    if !self.tools.boot_edited.contains(&file.path) {
                        self.tools.boot_edited.push(file.path.clone());
                        if let Some(before) = before_edit.get(&file.path) {
                            self.tools
                                .boot_before
                                .insert(file.path.clone(), before.clone());
                        }
                    }
                }
            }
            for file in output.meta.files.iter().filter(|f| f.exists_after) {
                // The conventions check tells apart what the run broke from what was there
                // before the run, not before this edit: the 1.5B wrote `$.view()` into an action,
                // and its next edit was told that finding existed before the edit and to leave it.
                let before = self
                    .tools
                    .boot_before
                    .get(&file.path)
                    .or_else(|| before_edit.get(&file.path))
                    .cloned()
                    .flatten();
                text.push_str(
                    &self
                        .after_edit(&file.path, &call.id, before.as_deref())
                        .await,
                );
            }
        }
        if self.setup.tool_offer.in_text() && unnamed_changes && output.meta.job_id.is_none() {
            text.push_str(&self.commands_changes(changes));
        }
        for target in &touched {
            for (rel, instructions) in nested_instructions(
                self.tools.ctx.root(),
                target,
                &mut self.tools.seen_instructions,
            ) {
                text.push_str(&format!("\n\nInstructions from {rel}:\n{instructions}"));
            }
        }
        if !output.is_error {
            for target in &touched {
                self.tools.seen.record(&call.name, target);
            }
        }
        (text, output.is_error)
    }

    /// What the command just run changed in the project, for a model in text mode: which files,
    /// and the changed lines as they are now. A small model ran `sed -i` and, told only "[no
    /// output]", ran it again after every read (the heading became "Welcome to Welcome to …").
    /// The files count as the run's changes (the answer, the boot check).
    fn commands_changes(&mut self, changes: &mut Changes<'_>) -> String {
        let found = match tokio::task::block_in_place(|| changes.changed_by_last_command()) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "cannot scan the project after a command");
                return String::new();
            }
        };
        if found.is_empty() {
            return String::new();
        }
        self.tools.commands_changed = true;
        let text_of = |state: &totem_snapshot::FileState| match state {
            totem_snapshot::FileState::File { blob, .. } => self
                .daemon
                .blobs
                .get(blob)
                .ok()
                .and_then(|b| String::from_utf8(b).ok()),
            _ => None,
        };
        let mut out = String::new();
        for change in found.iter().take(guide::CHANGES_SHOWN) {
            let (before, after) = (text_of(&change.before), text_of(&change.after));
            out.push_str(&guide::command_change(
                &change.path,
                before.as_deref(),
                after.as_deref(),
                change.deleted(),
            ));
            if self.setup.totaljs && !change.deleted() {
                if !self.tools.boot_pending.contains(&change.path) {
                    self.tools.boot_pending.push(change.path.clone());
                }
                if !self.tools.boot_edited.contains(&change.path) {
                    self.tools.boot_edited.push(change.path.clone());
                    self.tools.boot_before.insert(change.path.clone(), before);
                }
            }
        }
        if found.len() > guide::CHANGES_SHOWN {
            out.push_str(&format!(
                "\n\nIt changed {} more files.",
                found.len() - guide::CHANGES_SHOWN
            ));
        }
        out
    }

    /// Decides one access under the run's policy and the session's remembered answers, asking
    /// the clients when the rules say ask. `Err` is the text for the model when it may not go on.
    pub(super) async fn permit(&self, access: &Access, call_id: &str) -> Result<(), String> {
        self.permit_access(access, call_id, None, true)
            .await
            .map(|_| ())
    }

    /// [`Runner::permit`], saying whether only a built-in rule allowed it (nobody was asked and
    /// no rule of the user decided). A file with more than one hard link asks like a secret.
    /// `diff`, the proposed change of a write, goes with the question. A command that is not
    /// `confinable` (the tool's plan says it runs outside the sandbox, as a terminal's does) is
    /// not covered by a built-in allow.
    async fn permit_access(
        &self,
        access: &Access,
        call_id: &str,
        diff: Option<&str>,
        confinable: bool,
    ) -> Result<bool, String> {
        let links = match access.kind {
            AccessKind::Read | AccessKind::Write => {
                hard_links(self.tools.ctx.root(), &access.target)
            }
            _ => 1,
        };
        let verdict = {
            let state = lock(&self.agent.permissions);
            if access.kind == AccessKind::Execute && !confinable {
                self.tools.policy.evaluate_unconfined(access, &state)
            } else {
                self.tools.policy.evaluate_file(access, links, &state)
            }
        };
        // A command the built-in rules alone allow runs sandboxed, also when a broader rule of
        // the user (`--allow bash`) decided; a line with any part the built-ins do not allow
        // (`cd x && npm test` under `--allow 'npm test *'`) runs as the user allowed it.
        let built_in = access.kind == AccessKind::Execute
            && confinable
            && verdict.decision == Decision::Allow
            && self.tools.policy.built_ins_allow(access);
        self.settle(
            access,
            call_id,
            question_kind(access.kind),
            None,
            verdict,
            diff,
        )
        .await?;
        Ok(built_in)
    }

    /// Acts on a verdict: allow, deny, or ask with a question of `kind` (and `explanation`, else
    /// the verdict's own; `diff`, the proposed change of a write).
    pub(super) async fn settle(
        &self,
        access: &Access,
        call_id: &str,
        kind: QuestionKind,
        explanation: Option<String>,
        verdict: Verdict,
        diff: Option<&str>,
    ) -> Result<(), String> {
        match verdict.decision {
            Decision::Allow => Ok(()),
            Decision::Deny => Err(format!(
                "permission denied ({}). Do not retry this; find another way or ask the user.",
                verdict.explain()
            )),
            Decision::Ask => {
                let (diff, truncated) = match diff {
                    Some(d) => {
                        let (d, cut) = super::ask::cap_diff(d);
                        (Some(d), cut)
                    }
                    None => (None, false),
                };
                let question = PermissionQuestion {
                    id: new_id("perm"),
                    session_id: self.agent.session_id.clone(),
                    run_id: self.run_id.clone(),
                    call_id: call_id.to_string(),
                    tool: access.tool.clone(),
                    kind,
                    target: access.target.clone(),
                    explanation: explanation.unwrap_or_else(|| verdict.explain()),
                    always: serde_json::to_value(verdict.always_rules())
                        .unwrap_or(serde_json::Value::Null),
                    asked_at: now_ms(),
                    diff,
                    truncated,
                    subcommand: super::ask::subcommand(access, &verdict),
                };
                let answer = self
                    .agent
                    .ask(&self.daemon, &self.live, question, verdict, &self.cancel)
                    .await;
                match answer {
                    Ok(Some(a)) if a.allowed => Ok(()),
                    Ok(Some(a)) => {
                        let mut text = format!(
                            "The user denied permission for {} `{}`.",
                            access.tool, access.target
                        );
                        if let Some(note) = a.note.filter(|n| !n.trim().is_empty()) {
                            // A sentence of its own: "Do not retry" is not part of the note.
                            let note = note.trim();
                            let stop = match note.ends_with(['.', '!', '?']) {
                                true => "",
                                false => ".",
                            };
                            text.push_str(&format!(" The user says: {note}{stop}"));
                        }
                        text.push_str(" Do not retry the same call.");
                        Err(text)
                    }
                    Ok(None) => Err("cancelled: the run was aborted".into()),
                    Err(e) => Err(format!("cannot ask for permission: {e}")),
                }
            }
        }
    }

    /// Findings of the formatter, the checks and the Total.js conventions check for one changed
    /// file, as text to append to the tool result (empty when there is nothing to say).
    /// Commands from the user's settings run as they are; commands from the project's AGENTS.md
    /// go through the `bash` rules first (see [`Runner::permit_project_command`]). `before` is the
    /// file's text before the edit: the conventions check reports only what the edit did.
    async fn after_edit(&self, rel: &str, call_id: &str, before: Option<&str>) -> String {
        let root = self.tools.ctx.root().to_path_buf();
        let mut out = String::new();
        let ext = Path::new(rel)
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("");
        let formatters = self
            .settings
            .format
            .get(ext)
            .map(|c| (c.clone(), false))
            .into_iter()
            .chain(
                self.tools
                    .format_commands
                    .iter()
                    .filter(|c| c.contains("{file}"))
                    .map(|c| (c.clone(), true)),
            );
        for (command, from_project) in formatters {
            let command = with_file(&command, rel);
            if from_project
                && let Err(refused) = self
                    .permit_project_command(&command, "format", call_id)
                    .await
            {
                out.push_str(&format!("\n\nFormatter `{command}` was not run: {refused}"));
                continue;
            }
            let (ok, output) =
                run_command(&root, &command, FORMAT_TIMEOUT, &self.tools.ctx.shell).await;
            if !ok {
                out.push_str(&format!("\n\nFormatter `{command}` failed:\n{output}"));
            }
        }
        let checks = self
            .settings
            .check
            .iter()
            .map(|c| (c, false))
            .chain(self.tools.check_commands.iter().map(|c| (c, true)));
        for (command, from_project) in checks {
            let command = with_file(command, rel);
            if from_project
                && let Err(refused) = self
                    .permit_project_command(&command, "check", call_id)
                    .await
            {
                out.push_str(&format!("\n\nCheck `{command}` was not run: {refused}"));
                continue;
            }
            let (ok, output) =
                run_command(&root, &command, CHECK_TIMEOUT, &self.tools.ctx.shell).await;
            if ok {
                out.push_str(&format!("\n\nCheck `{command}` passed."));
            } else {
                out.push_str(&format!("\n\nCheck `{command}` failed:\n{output}"));
            }
        }
        if self.setup.totaljs
            && let Ok(content) = std::fs::read_to_string(root.join(rel))
        {
            let findings = tokio::task::block_in_place(|| {
                // The project's own `.totem/settings.json` can switch rules off.
                let (config, _) = self.settings.totaljs_check().with_project(&root);
                let project = totem_totaljs::ProjectContext::scan(&root);
                totem_totaljs::check_edit(rel, before, &content, &config, &project)
            });
            let text = totem_totaljs::format_edit(rel, &findings);
            if !text.is_empty() {
                out.push_str("\n\n");
                out.push_str(&text);
            }
        }
        out
    }
}

impl Runner {
    /// Whether Totem may rewrite this call before it runs: a constrained `write` of a script in a
    /// Total.js project, in a run that asks for changes.
    fn rewrites(&self, call: &ToolCall, rel: &str) -> bool {
        self.setup.tool_offer.constrained
            && self.setup.totaljs
            && self.setup.changes_asked
            && call.name == "write"
            && rel.ends_with(".js")
    }

    /// A constrained write of a whole Total.js script that leaves out routes, actions or
    /// declarations the file still uses, in a task that asks to remove nothing, with them put
    /// back (see [`guide::put_back`]), and the note for its result; only when that parses and
    /// keeps most of the file. The 1.5B, refused for leaving out GET /api/products/ and given
    /// the write with it kept to copy, sent its own write back until stopped (c34, c45).
    async fn removed_kept(
        &self,
        call: &ToolCall,
        rel: &str,
        abs: &std::path::Path,
    ) -> Option<(serde_json::Value, String)> {
        if !self.rewrites(call, rel)
            || self.asks_removal()
            || self.tools.seen.unseen_overwrite(rel, true).is_some()
            || matches!(self.tools.boot_before.get(rel), Some(None))
        {
            return None;
        }
        let new = call.arguments["content"].as_str()?;
        let old = std::fs::read_to_string(abs).ok()?;
        let removed = guide::removed_parts(&old, new, "");
        if removed.is_empty() || guide::dropping_overwrite(rel, &old, new, "").is_some() {
            return None;
        }
        let kept = guide::put_back(&old, new)?;
        if !super::syntax::parses(rel, &kept).await {
            return None;
        }
        let mut args = call.arguments.clone();
        args["content"] = serde_json::Value::String(kept);
        Some((
            args,
            format!(
                "Your write left out {} of {rel}, which the task does not ask to remove, so Totem kept {}.\n",
                removed.join(", "),
                if removed.len() == 1 { "it" } else { "them" }
            ),
        ))
    }

    /// A constrained write of a Total.js script with each route whose handler is an action's id
    /// (`ROUTE('GET /x/', Products|count)`, a ReferenceError when the app starts) written with
    /// the action in its route string, and the note for its result: the 1.5B wrote that route,
    /// was told the fix by the conventions check, and could not make it (c42).
    fn action_handlers_fixed(
        &self,
        call: &ToolCall,
        rel: &str,
    ) -> Option<(serde_json::Value, String)> {
        if !self.rewrites(call, rel) {
            return None;
        }
        let (fixed, routes) =
            totem_totaljs::fix_action_handlers(call.arguments["content"].as_str()?)?;
        let mut args = call.arguments.clone();
        args["content"] = serde_json::Value::String(fixed);
        Some((
            args,
            format!(
                "An action is named in its route string, not as a handler, so Totem wrote {}\n",
                routes.join(" ")
            ),
        ))
    }

    /// A constrained write of a Total.js script without the copies it holds of actions another
    /// project file declares with the same code, and the note for its result: the 1.5B wrote
    /// the controller with its route and a copy of the Products|count it had added to
    /// actions/products.js, refused each time with the write without it to copy, until stopped
    /// (c38, c41). A copy that differs is left to [`Self::second_action`] to refuse.
    fn without_copies(&self, call: &ToolCall, rel: &str) -> Option<(serde_json::Value, String)> {
        if !self.rewrites(call, rel) {
            return None;
        }
        let content = call.arguments["content"].as_str()?;
        let project = totem_totaljs::route_files(self.tools.ctx.root());
        let mut kept = content.to_string();
        let mut left_out = Vec::new();
        for id in guide::declared_actions(content) {
            let Some(block) = totem_totaljs::action_block(&kept, &id) else {
                continue;
            };
            let elsewhere = project.iter().find(|(p, text)| {
                p != rel
                    && totem_totaljs::action_block(text, &id)
                        .is_some_and(|theirs| guide::same_code(&theirs, &block))
            });
            if let Some((path, _)) = elsewhere {
                kept = guide::without_block(&kept, &block);
                left_out.push(format!("NEWACTION('{id}') ({path} declares it, the same)"));
            }
        }
        if left_out.is_empty() || kept.trim().is_empty() {
            return None;
        }
        let mut args = call.arguments.clone();
        args["content"] = serde_json::Value::String(kept);
        Some((
            args,
            format!(
                "Totem left out of {rel} your copy of {}: one declaration is enough.\n",
                left_out.join(", ")
            ),
        ))
    }

    /// The arguments of a constrained `write` whose content is only new code for a file the run
    /// read, with that code added to the file (see [`guide::merge_fragment`]), and the note for
    /// its result. Not for a file the run created, a prompt that asks for a rewrite, or a
    /// merged file node cannot parse.
    async fn fragment_write(
        &self,
        call: &ToolCall,
        rel: &str,
        abs: &std::path::Path,
    ) -> Option<(serde_json::Value, String)> {
        if !self.setup.tool_offer.constrained || !self.setup.changes_asked || call.name != "write" {
            return None;
        }
        let prompt = self.prompt().unwrap_or("").to_lowercase();
        if !rel.ends_with(".js")
            || guide::WHOLE_REWRITE.iter().any(|w| prompt.contains(w))
            || self.tools.seen.unseen_overwrite(rel, true).is_some()
            || matches!(self.tools.boot_before.get(rel), Some(None))
        {
            return None;
        }
        // New code for a new file the task names belongs there (the 0.5B, told to add an action
        // in the new file actions/contact.js, wrote it over actions/products.js, c29).
        if !self.missing_new_file(rel).is_empty() {
            return None;
        }
        let content = call.arguments["content"].as_str()?;
        let old = std::fs::read_to_string(abs).ok()?;
        if old.len() > MERGE_BYTES {
            return None;
        }
        // An action another file declares is no code to add here: the 1.5B wrote the
        // Contact|create of its new actions/contact.js over the controller too (c36).
        if self
            .declared_in_project(&guide::declared_actions(content), None)
            .is_some()
        {
            return None;
        }
        let (whole, placed) = guide::merge_fragment(&old, content)?;
        if !super::syntax::parses(rel, &whole).await {
            return None;
        }
        let mut args = call.arguments.clone();
        args["content"] = serde_json::Value::String(whole);
        Some((args, guide::merged_note(rel, &placed)))
    }

    /// The refusal of a constrained change of a Total.js script that would remove an action or
    /// a route the file declares, when the task asks for no removal: the 1.5B, asked to add
    /// Contact|create in a new file, renamed Products|list to it, then wrote its action over
    /// the file's products (c33). Told afterwards, small models rarely put such code back.
    /// Also of one that declares an action another file declares (see [`Self::second_action`]).
    fn removal_refusal(
        &self,
        call: &ToolCall,
        prepared: &totem_tools::PreparedCall,
    ) -> Option<String> {
        if !self.setup.tool_offer.constrained
            || !self.setup.totaljs
            || !self.setup.changes_asked
            || !matches!(call.name.as_str(), "write" | "edit")
        {
            return None;
        }
        let [file] = prepared.plan.writes.as_slice() else {
            return None;
        };
        if !file.rel.ends_with(".js") {
            return None;
        }
        let old = std::fs::read_to_string(&file.abs).unwrap_or_default();
        let new = if call.name == "write" {
            call.arguments["content"].as_str()?.to_string()
        } else {
            edited(call, &old)?
        };
        if let Some(refusal) = self.second_action(call, &file.rel, &old, &new) {
            return Some(refusal);
        }
        if old.is_empty() || self.asks_removal() {
            return None;
        }
        // A function or variable the file still uses: the 1.5B wrote the controller's install
        // block alone over it, without index and about (c35).
        let removed = guide::removed_parts(&old, &new, " (still used)");
        if removed.is_empty() {
            return None;
        }
        let it = if removed.len() == 1 { "it" } else { "them" };
        let mut refusal = format!(
            "Not changed: this would remove {} from {}, and the task does not ask to remove {it}. Keep {it}, and add your code beside {it}.",
            removed.join(", "),
            file.rel
        );
        // A whole file with one route left out: the 1.5B wrote the controller with its new
        // route and without GET /api/products/ six times, told each time to keep it (c34).
        if call.name == "write"
            && !self.setup.tool_offer.writes_code_blocks()
            && new.len() <= guide::WHOLE_FILE_CALL_BYTES
            && let Some(kept) = guide::put_back(&old, &new)
        {
            let copy = serde_json::json!({"name": "write", "arguments": {"path": file.rel, "content": kept}});
            refusal.push_str(&format!("\n\nYour write with {it} kept, to copy: {copy}"));
        }
        refusal.push_str(&self.missing_new_file(&file.rel));
        Some(refusal)
    }

    /// Whether the task's words ask to remove or replace something (see [`REMOVAL_WORDS`]).
    fn asks_removal(&self) -> bool {
        let prompt = self.prompt().unwrap_or("").to_lowercase();
        REMOVAL_WORDS.iter().any(|w| prompt.contains(w))
    }

    /// The errors the conventions check finds in `content` as the project's file `rel`, each as
    /// one line (`file:line: error [rule] message`).
    fn check_errors(&self, rel: &str, content: &str) -> Vec<String> {
        let root = self.tools.ctx.root();
        let findings = tokio::task::block_in_place(|| {
            let (config, _) = self.settings.totaljs_check().with_project(root);
            let project = totem_totaljs::ProjectContext::scan(root);
            totem_totaljs::check_in_project(rel, content, &config, &project)
        });
        findings
            .iter()
            .filter(|f| f.severity == totem_totaljs::Severity::Error)
            .map(|f| totem_totaljs::format_finding(rel, f))
            .collect()
    }

    /// The refusal of a constrained change of a Total.js script the conventions check finds no
    /// error in that would add one: the 1.5B had the task's action right, then edited
    /// `$.success()` into `$.view()` and back and forth until stopped (c44).
    fn error_adding_change(
        &self,
        call: &ToolCall,
        rel: &str,
        abs: &std::path::Path,
    ) -> Option<String> {
        if !self.setup.tool_offer.constrained
            || !self.setup.totaljs
            || !self.setup.changes_asked
            || !rel.ends_with(".js")
        {
            return None;
        }
        let old = std::fs::read_to_string(abs).ok()?;
        let new = match call.name.as_str() {
            "write" => call.arguments["content"].as_str()?.to_string(),
            "edit" => edited(call, &old)?,
            _ => return None,
        };
        // The change's errors first: most changes add none, and the file is not checked then.
        let errors = self.check_errors(rel, &new);
        if errors.is_empty() || !self.check_errors(rel, &old).is_empty() {
            return None;
        }
        Some(format!(
            "Not changed: the conventions check finds no error in {rel} now, and this change would add one that breaks the app at run time:\n{}\nKeep {rel} as it is, or change it without that.{}",
            errors.join("\n"),
            self.missing_new_file(rel)
        ))
    }

    /// The refusal of a constrained `write` or `edit` that would turn a JavaScript file that
    /// parses into one that does not (node's error, with its line): the 1.5B wrote the
    /// controller's install block alone over it, its closing `};` missing (c35), and edited its
    /// new action into `}}` (c37). A file that does not parse before (a syntax fix in progress)
    /// may be changed.
    async fn unparsable_write(
        &self,
        call: &ToolCall,
        rel: &str,
        abs: &std::path::Path,
    ) -> Option<String> {
        if !self.setup.tool_offer.constrained || !abs.is_file() {
            return None;
        }
        let content = match call.name.as_str() {
            "write" => call.arguments["content"].as_str()?.to_string(),
            "edit" => edited(call, &std::fs::read_to_string(abs).ok()?)?,
            _ => return None,
        };
        let found = super::syntax::check_content(rel, &content).await?;
        let (what, again) = if call.name == "write" {
            ("Not written", "Write it again")
        } else {
            ("Not edited", "Send the edit again")
        };
        super::syntax::node_check(self.tools.ctx.root(), rel)
            .await
            .is_none()
            .then(|| {
                // The 1.5B, asked for an action in the new file actions/contact.js, edited
                // actions/products.js into a syntax error six times (c41).
                format!(
                    "{what}: {rel} parses now, and this change would make it fail to parse.{}{}",
                    found.replace(
                        ". Fix that line.",
                        &format!(". {again} with that line fixed.")
                    ),
                    self.missing_new_file(rel)
                )
            })
    }

    /// The refusal of a change of `rel` that declares an action another project file declares:
    /// a second NEWACTION of the same id replaces the first, wherever it is. The 1.5B wrote
    /// the controller with its new route and a copy of the Products|count it had just added to
    /// actions/products.js, then edited the copy into a loop (c36). A JSON write comes back
    /// without the copy, to send again.
    fn second_action(&self, call: &ToolCall, rel: &str, old: &str, new: &str) -> Option<String> {
        let before = guide::declared_actions(old);
        let added: Vec<String> = guide::declared_actions(new)
            .into_iter()
            .filter(|id| !before.contains(id))
            .collect();
        if added.is_empty() {
            return None;
        }
        let (id, elsewhere) = self.declared_in_project(&added, Some(rel))?;
        let mut refusal = format!(
            "Not changed: {elsewhere} declares {id} already, and a second NEWACTION('{id}') in {rel} would replace it. Leave it out of {rel}."
        );
        if call.name == "write"
            && !self.setup.tool_offer.writes_code_blocks()
            && new.len() <= guide::WHOLE_FILE_CALL_BYTES
            && let Some(block) = totem_totaljs::action_block(new, &id)
        {
            let without = guide::without_block(new, &block);
            let copy = serde_json::json!({"name": "write", "arguments": {"path": rel, "content": without}});
            refusal.push_str(&format!("\n\nYour write without it, to copy: {copy}"));
        }
        Some(refusal)
    }

    /// The first of `ids` that a project file (other than `except`) declares, with that file.
    fn declared_in_project(
        &self,
        ids: &[String],
        except: Option<&str>,
    ) -> Option<(String, String)> {
        if ids.is_empty() {
            return None;
        }
        let project = totem_totaljs::route_files(self.tools.ctx.root());
        ids.iter().find_map(|id| {
            project
                .iter()
                .find(|(p, text)| {
                    Some(p.as_str()) != except && totem_totaljs::action_block(text, id).is_some()
                })
                .map(|(p, _)| (id.clone(), p.clone()))
        })
    }

    /// What a write that changed nothing is told is still to do in a Total.js project: the task
    /// again, the errors the conventions check finds in the file as it is, and the routes the task
    /// names that no file declares. The 1.5B was told of `$.view()` in its new action, then wrote
    /// the same content back five times, told only that nothing changed (c32).
    fn still_wrong(&self, rel: &str, content: &str) -> String {
        let prompt = self.prompt().unwrap_or("").trim();
        if !self.setup.changes_asked || prompt.is_empty() {
            return String::new();
        }
        let mut out = format!("\nThe task: {}", guide::cut(prompt, guide::TASK_IN_REQUEST));
        if !self.setup.totaljs {
            return out;
        }
        let root = self.tools.ctx.root();
        let errors = self.check_errors(rel, content);
        if !errors.is_empty() {
            out.push_str(&format!(
                "\n\nStill wrong in {rel} (fix it in your write):\n{}",
                errors.join("\n")
            ));
        }
        let project = totem_totaljs::route_files(root);
        for route in totem_totaljs::undeclared_routes(&project, &guide::named_routes(prompt)) {
            out.push_str(&guide::undeclared_route(&route, prompt));
        }
        out.push_str(&self.missing_new_file(rel));
        out
    }

    /// A new file the task names that does not exist yet (other than `rel`), as a sentence that
    /// says how to create it; empty when there is none. The 0.5B, told to add an action in the
    /// new file actions/contact.js, wrote over actions/products.js again and again (c29).
    fn missing_new_file(&self, rel: &str) -> String {
        let root = self.tools.ctx.root();
        self.tools
            .named_unchanged
            .iter()
            .find(|f| *f != rel && !root.join(f.as_str()).exists())
            .map(|new| {
                format!(
                    "\n\nThe task names {new}, which does not exist yet: to create it, write to that path."
                )
            })
            .unwrap_or_default()
    }

    /// Decides a `format:` or `check:` command from the project's instruction file before it
    /// runs: the `bash` rules apply, a built-in allow does not cover it, and the question says
    /// where it comes from. "Always" remembers its exact text. `Err` says why it did not run.
    async fn permit_project_command(
        &self,
        command: &str,
        label: &str,
        call_id: &str,
    ) -> Result<(), String> {
        let origin = root_instructions(self.tools.ctx.root())
            .map(|(name, _)| name)
            .unwrap_or_else(|| "AGENTS.md".into());
        let access = Access::execute("bash", command);
        let verdict = {
            let state = lock(&self.agent.permissions);
            self.tools
                .policy
                .evaluate_from_project(&access, &origin, &state)
        };
        let explanation = format!(
            "`{label}:` command from the project's {origin}, to run after an edit; it was written in the repository, not by you ({})",
            verdict.explain()
        );
        self.settle(
            &access,
            call_id,
            QuestionKind::Execute,
            Some(explanation),
            verdict,
            None,
        )
        .await
    }
}

/// How many names a regular file in the project has (1 for anything else).
fn hard_links(root: &Path, rel: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(root.join(rel))
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map_or(1, |m| m.nlink())
}

/// `{file}` in a command is the changed file; a shell-quoted project-relative path.
fn with_file(command: &str, rel: &str) -> String {
    let quoted = format!("'{}'", rel.replace('\'', r"'\''"));
    command.replace("{file}", &quoted)
}

/// Runs a formatter or check in the project root in its own process group, killed on timeout.
/// Returns whether it succeeded and the tail of its output.
async fn run_command(
    root: &Path,
    command: &str,
    timeout: Duration,
    spec: &totem_tools::ShellSpec,
) -> (bool, String) {
    let mut cmd = tokio::process::Command::new("bash");
    spec.apply_env(&mut cmd);
    cmd.arg("-c")
        .arg(command)
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .env("NO_COLOR", "1")
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return (false, format!("cannot start it: {e}")),
    };
    let pid = child.id();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let collect = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            if let Some(s) = stdout.as_mut() {
                let _ = s.read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(s) = stderr.as_mut() {
                let _ = s.read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = child.wait().await;
        out.extend_from_slice(&err);
        (status, out)
    };
    match tokio::time::timeout(timeout, collect).await {
        Ok((status, output)) => {
            let ok = status.is_ok_and(|s| s.success());
            (ok, tail(&String::from_utf8_lossy(&output)))
        }
        Err(_) => {
            if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            (
                false,
                format!("timed out after {} s and was stopped", timeout.as_secs()),
            )
        }
    }
}

fn tail(text: &str) -> String {
    let text = text.trim();
    if text.len() <= CHECK_OUTPUT {
        return text.to_string();
    }
    let start = text.ceil_char_boundary(text.len() - CHECK_OUTPUT);
    format!("…{}", &text[start..])
}
