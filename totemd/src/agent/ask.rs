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
use totem_permission::{Answer, Reply, Scope, Verdict};
use totem_protocol::{EventKind, PermissionQuestion, PermissionReplyParams};

use super::{AgentError, SessionAgent, lock};
use crate::daemon::Daemon;
use crate::session::LiveSession;

/// A question waiting for its first answer.
pub struct Pending {
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
    ) -> Result<Option<Answer>, AgentError> {
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
                            reason: Some("aborted".into()),
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
    pub fn reply(&self, daemon: &Daemon, p: PermissionReplyParams) -> Result<(), AgentError> {
        let reply: Reply = serde_json::to_value(&p.reply)
            .and_then(serde_json::from_value)
            .map_err(|e| AgentError::Invalid(format!("invalid reply: {e}")))?;
        let pending = {
            let mut questions = lock(&self.questions);
            let Some(at) = questions
                .iter()
                .position(|q| q.question.id == p.question_id)
            else {
                return Err(AgentError::Conflict(format!(
                    "question {} is not pending: it was already answered or withdrawn; `permission.list` shows the open ones",
                    p.question_id
                )));
            };
            questions.remove(at)
        };
        let answer = {
            let mut state = lock(&self.permissions);
            let answer = state
                .answer(&pending.verdict, &reply)
                .map_err(|e| AgentError::Invalid(e.to_string()))?;
            if answer.remembered == Some(Scope::Project) {
                let rules = serde_json::to_value(state.project_rules())
                    .map_err(|e| AgentError::Invalid(e.to_string()))?;
                daemon
                    .store()
                    .put_project_permissions(&self.project_id, &rules)?;
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
