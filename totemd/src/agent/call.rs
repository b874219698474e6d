//! One tool call: repaired and parsed by totem-tools, allowed (or asked, or denied) by the
//! permission engine, snapshotted, run, and followed — after write/edit/patch — by the formatter,
//! the project's checks and, in Total.js 5 projects, the conventions check. Nested instruction
//! files of the folders it touched are added to its result once per run.

use std::path::Path;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use totem_permission::{Access, AccessKind, Decision, Verdict};
use totem_protocol::PermissionQuestion;
use totem_provider::ToolCall;

use super::lock;
use super::run::{Changes, Runner};
use super::system::nested_instructions;
use crate::util::{new_id, now_ms};

/// How long a formatter may run.
const FORMAT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a check command may run.
const CHECK_TIMEOUT: Duration = Duration::from_secs(120);
/// Output of a check shown to the model (its tail).
const CHECK_OUTPUT: usize = 3000;

const WRITING_TOOLS: &[&str] = &["write", "edit", "patch"];

fn convert(access: &totem_tools::Access) -> Access {
    let kind = match access.kind {
        totem_tools::AccessKind::Read => AccessKind::Read,
        totem_tools::AccessKind::Write => AccessKind::Write,
        totem_tools::AccessKind::Execute => AccessKind::Execute,
    };
    Access::new(kind, access.tool, access.target.clone())
}

fn kind_name(kind: AccessKind) -> &'static str {
    match kind {
        AccessKind::Read => "read",
        AccessKind::Write => "write",
        AccessKind::Execute => "execute",
        AccessKind::Mcp => "mcp",
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
        if let Some(done) = self.call_mcp(call).await {
            return done;
        }
        let prepared = match self.registry.prepare(
            &call.name,
            call.arguments.clone(),
            &self.ctx,
            self.read_only,
        ) {
            Ok(p) => p,
            Err(e) => return (e.to_string(), true),
        };
        if self.repeats.record(&prepared.name, &prepared.arguments) >= 3 {
            return (self.repeats.message(), true);
        }

        for access in &prepared.plan.access {
            if let Err(text) = self.permit(&convert(access), &call.id).await {
                return (text, true);
            }
        }

        let name = prepared.name.clone();
        let touched: Vec<String> = prepared
            .plan
            .access
            .iter()
            .filter(|a| a.kind != totem_tools::AccessKind::Execute)
            .map(|a| a.target.clone())
            .collect();
        for file in &prepared.plan.writes {
            if let Err(e) = changes.record_before(&file.rel) {
                tracing::warn!(path = %file.rel, error = %e, "cannot snapshot a file before a change");
            }
        }
        if name == "bash" || name == "job" {
            let previous = lock(&self.agent.last_scan).clone();
            if let Err(e) = tokio::task::block_in_place(|| changes.scan_before(previous.as_ref())) {
                tracing::warn!(error = %e, "cannot scan the project before a command");
            }
        }

        let output = prepared.run(&self.ctx).await;
        if let Some(id) = &output.meta.job_id {
            self.jobs_started.push(id.clone());
        }
        let mut text = output.text;
        if WRITING_TOOLS.contains(&name.as_str()) && !output.is_error {
            for file in output.meta.files.iter().filter(|f| f.exists_after) {
                text.push_str(&self.after_edit(&file.path).await);
            }
        }
        for target in touched {
            for (rel, instructions) in
                nested_instructions(self.ctx.root(), &target, &mut self.seen_instructions)
            {
                text.push_str(&format!("\n\nInstructions from {rel}:\n{instructions}"));
            }
        }
        (text, output.is_error)
    }

    /// Decides one access under the run's policy and the session's remembered answers, asking
    /// the clients when the rules say ask. `Err` is the text for the model when it may not go on.
    pub(super) async fn permit(&self, access: &Access, call_id: &str) -> Result<(), String> {
        let verdict = {
            let state = lock(&self.agent.permissions);
            self.policy.evaluate(access, &state)
        };
        self.settle(access, call_id, kind_name(access.kind), None, verdict)
            .await
    }

    /// Acts on a verdict: allow, deny, or ask with a question of `kind` (and `explanation`, else
    /// the verdict's own).
    pub(super) async fn settle(
        &self,
        access: &Access,
        call_id: &str,
        kind: &str,
        explanation: Option<String>,
        verdict: Verdict,
    ) -> Result<(), String> {
        match verdict.decision {
            Decision::Allow => Ok(()),
            Decision::Deny => Err(format!(
                "permission denied ({}). Do not retry this; find another way or ask the user.",
                verdict.explain()
            )),
            Decision::Ask => {
                let question = PermissionQuestion {
                    id: new_id("perm"),
                    session_id: self.agent.session_id.clone(),
                    run_id: self.run_id.clone(),
                    call_id: call_id.to_string(),
                    tool: access.tool.clone(),
                    kind: kind.into(),
                    target: access.target.clone(),
                    explanation: explanation.unwrap_or_else(|| verdict.explain()),
                    always: serde_json::to_value(verdict.always_rules())
                        .unwrap_or(serde_json::Value::Null),
                    asked_at: now_ms(),
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
                            text.push_str(&format!(" The user says: {}", note.trim()));
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
    async fn after_edit(&self, rel: &str) -> String {
        let root = self.ctx.root().to_path_buf();
        let mut out = String::new();
        let ext = Path::new(rel)
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("");
        let formatters: Vec<String> = self
            .settings
            .format
            .get(ext)
            .cloned()
            .into_iter()
            .chain(
                self.format_commands
                    .iter()
                    .filter(|c| c.contains("{file}"))
                    .cloned(),
            )
            .collect();
        for command in formatters {
            let command = with_file(&command, rel);
            let (ok, output) = run_command(&root, &command, FORMAT_TIMEOUT).await;
            if !ok {
                out.push_str(&format!("\n\nFormatter `{command}` failed:\n{output}"));
            }
        }
        for command in &self.check_commands {
            let command = with_file(command, rel);
            let (ok, output) = run_command(&root, &command, CHECK_TIMEOUT).await;
            if ok {
                out.push_str(&format!("\n\nCheck `{command}` passed."));
            } else {
                out.push_str(&format!("\n\nCheck `{command}` failed:\n{output}"));
            }
        }
        if self.totaljs
            && let Ok(content) = std::fs::read_to_string(root.join(rel))
        {
            let config = &self.settings.totaljs_check();
            let findings = tokio::task::block_in_place(|| {
                let project = totem_totaljs::ProjectContext::scan(&root);
                totem_totaljs::check_in_project(rel, &content, config, &project)
            });
            let text = totem_totaljs::format_findings(rel, &findings);
            if !text.is_empty() {
                out.push_str("\n\n");
                out.push_str(&text);
            }
        }
        out
    }
}

/// `{file}` in a command is the changed file; a shell-quoted project-relative path.
fn with_file(command: &str, rel: &str) -> String {
    let quoted = format!("'{}'", rel.replace('\'', r"'\''"));
    command.replace("{file}", &quoted)
}

/// Runs a formatter or check in the project root in its own process group, killed on timeout.
/// Returns whether it succeeded and the tail of its output.
async fn run_command(root: &Path, command: &str, timeout: Duration) -> (bool, String) {
    let mut cmd = tokio::process::Command::new("bash");
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
    let mut start = text.len() - CHECK_OUTPUT;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}
