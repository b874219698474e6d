//! Permission questions across clients.
//!
//! A question is stored as a `permission.asked` event (so a client that attaches later replays it)
//! and kept pending in memory until the first `permission.reply`; that answer wins, is applied to
//! the session's remembered rules (persisted when it is "always for this project"), and a
//! `permission.resolved` event withdraws the question from every other client. When the run ends
//! first (abort), the question is withdrawn without an answer (reason `aborted`); when the daemon
//! stopped while it waited, the next start withdraws it (reason `interrupted`, see
//! `Daemon::mark_interrupted_runs`).

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use totem_permission::{Access, AccessKind, Answer, Scope, Verdict};
use totem_protocol::{EventKind, PermissionQuestion, PermissionReplyParams};

use super::{DaemonError, SessionAgent, lock};
use crate::daemon::Daemon;
use crate::session::LiveSession;

/// Lines of a proposed diff a question carries.
const DIFF_LINES: usize = 400;
/// Bytes of a proposed diff a question carries.
const DIFF_BYTES: usize = 32 * 1024;

/// A write's proposed diff as a question carries it: at most [`DIFF_LINES`] lines and
/// [`DIFF_BYTES`] bytes, cut at a line's end; `true` when it was cut.
pub(super) fn cap_diff(diff: &str) -> (String, bool) {
    let mut end = 0;
    for (n, line) in diff.split_inclusive('\n').enumerate() {
        if n == DIFF_LINES || end + line.len() > DIFF_BYTES {
            return (diff[..end].to_string(), true);
        }
        end += line.len();
    }
    (diff.to_string(), false)
}

/// For a command line, the part that needed asking (the deciding one).
pub(super) fn subcommand(access: &Access, verdict: &Verdict) -> Option<String> {
    if access.kind != AccessKind::Execute {
        return None;
    }
    verdict.deciding_part().map(|p| p.subject.clone())
}

/// A question waiting for its first answer.
pub struct Pending {
    /// What the user is asked, as sent in the `permission.asked` event.
    pub question: PermissionQuestion,
    verdict: Verdict,
    answer: oneshot::Sender<Answer>,
}

impl SessionAgent {
    /// Asks the clients and waits for the first answer; `None` when the run was aborted first.
    pub(super) async fn ask(
        &self,
        daemon: &Daemon,
        live: &LiveSession,
        question: PermissionQuestion,
        verdict: Verdict,
        cancel: &CancellationToken,
    ) -> Result<Option<Answer>, DaemonError> {
        // Every client shows the explanation: it says what "always" would remember, so the
        // person sees the rule they grant (`sed -n 1p a.txt` exactly, not `sed *`).
        let mut question = question;
        if let Some(note) = verdict.always_note() {
            if question.explanation.is_empty() {
                question.explanation = note;
            } else {
                let stop = match question.explanation.trim_end().ends_with(['.', '?', '!']) {
                    true => "",
                    false => ".",
                };
                question.explanation = format!("{}{stop} {note}", question.explanation.trim_end());
            }
        }
        let (tx, rx) = oneshot::channel();
        let id = question.id.clone();
        lock(&self.questions).push(Pending {
            question: question.clone(),
            verdict,
            answer: tx,
        });
        live.emit(daemon.store(), EventKind::PermissionAsked { question })?;
        tokio::select! {
            answer = rx => Ok(answer.ok()),
            _ = cancel.cancelled() => {
                let withdrawn = {
                    let mut questions = lock(&self.questions);
                    let before = questions.len();
                    questions.retain(|p| p.question.id != id);
                    questions.len() != before
                };
                if withdrawn {
                    live.emit(
                        daemon.store(),
                        EventKind::PermissionResolved {
                            question_id: id,
                            reply: None,
                            reason: Some(totem_protocol::WithdrawnReason::Aborted),
                        },
                    )?;
                }
                Ok(None)
            }
        }
    }

    /// Questions waiting for an answer, oldest first.
    pub fn pending_questions(&self) -> Vec<PermissionQuestion> {
        lock(&self.questions)
            .iter()
            .map(|p| p.question.clone())
            .collect()
    }

    /// `permission.reply`: the first answer to a question wins.
    pub fn reply(&self, daemon: &Daemon, p: PermissionReplyParams) -> Result<(), DaemonError> {
        let pending = {
            let mut questions = lock(&self.questions);
            let Some(at) = questions
                .iter()
                .position(|q| q.question.id == p.question_id)
            else {
                return Err(DaemonError::Busy(format!(
                    "question {} is not pending: it was already answered or withdrawn; `permission.list` shows the open ones",
                    p.question_id
                )));
            };
            questions.remove(at)
        };
        let answer = {
            let mut state = lock(&self.permissions);
            let answer = state
                .answer(&pending.verdict, &p.reply)
                .map_err(|e| DaemonError::Invalid(e.to_string()))?;
            match answer.remembered {
                Some(Scope::Project) => {
                    let rules = serde_json::to_value(state.project_rules())
                        .map_err(|e| DaemonError::Invalid(e.to_string()))?;
                    daemon
                        .store()
                        .put_project_permissions(&self.project_id, &rules)?;
                }
                // Stored with the session: a restart keeps what the person said.
                Some(Scope::Session) => {
                    let rules = serde_json::to_value(state.session_rules())
                        .map_err(|e| DaemonError::Invalid(e.to_string()))?;
                    daemon
                        .store()
                        .put_session_permissions(&self.session_id, &rules)?;
                }
                None => {}
            }
            answer
        };
        let live = daemon.sessions.get(&self.session_id)?;
        live.emit(
            daemon.store(),
            EventKind::PermissionResolved {
                question_id: p.question_id,
                reply: Some(p.reply),
                reason: None,
            },
        )?;
        // The run may have ended meanwhile; then nobody waits.
        let _ = pending.answer.send(answer);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_diff_is_cut_at_a_line_end_and_flagged() {
        let short = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(cap_diff(short), (short.to_string(), false));
        let long: String = (0..1000).map(|i| format!("+line {i}\n")).collect();
        let (cut, truncated) = cap_diff(&long);
        assert!(truncated);
        assert_eq!(cut.lines().count(), DIFF_LINES);
        assert!(cut.ends_with("+line 399\n"));
        let wide: String = (0..100)
            .map(|_| format!("+{}\n", "x".repeat(1000)))
            .collect();
        let (cut, truncated) = cap_diff(&wide);
        assert!(truncated && cut.len() <= DIFF_BYTES && cut.ends_with('\n'));
    }
}
