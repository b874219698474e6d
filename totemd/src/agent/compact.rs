//! Compaction before a request: the estimated size of each request is compared with the model's
//! window; past the threshold (default 80 %), the older turns — the session before this run and
//! this run's own earlier steps — are summarised by a model (the session's, or `compaction.model`)
//! and the summary replaces them in this and later requests. This run's prompt and its most recent
//! steps (up to [`KEEP_SHARE`] of the window) stay as they are, so the model still sees the task
//! and the results it just asked for. The store keeps every message; the compaction record says
//! up to which seq the summary reaches.

use totem_provider::{ChatRequest, Message as ModelMessage, estimate_tokens};

use super::history::summarise;
use super::run::Runner;
use super::settings::provider_for;
use crate::store::Compaction;
use crate::util::now_ms;

/// Compact when the request passes this share of the model's window (settings may change it).
const DEFAULT_THRESHOLD: f64 = 0.8;
/// The run's most recent steps kept as they are after a compaction, as a share of the window.
const KEEP_SHARE: f64 = 0.3;

/// The conversation a run's requests carry, and what compaction needs to shorten it.
pub(super) struct Conversation {
    /// The session before this run (after the compaction point) as model messages.
    pub(super) prior: Vec<ModelMessage>,
    /// This run's turns: its prompt, then each answer followed by its tool results.
    pub(super) current: Vec<ModelMessage>,
    /// The stored seq of each answer in `current`, in order.
    pub(super) turn_seqs: Vec<u64>,
    /// The stored seq of the answer the last step created.
    pub(super) step_seq: u64,
    /// The highest seq among the stored messages in `prior`.
    pub(super) prior_upto: u64,
    /// Stored messages left out of `prior`: this run's prompt and the prompts queued behind it.
    pub(super) excluded: Vec<String>,
    /// The session's summary in force, if any.
    pub(super) compaction: Option<Compaction>,
    /// A summary request failed in this run; it is not tried again at every step.
    pub(super) compaction_failed: bool,
}

impl Conversation {
    /// The positions in `current` where this run's steps start (each at its answer).
    fn step_starts(&self) -> Vec<usize> {
        self.current
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(m, ModelMessage::Assistant { .. }))
            .map(|(i, _)| i)
            .collect()
    }

    /// How many of this run's steps, oldest first, go into the summary: the newest ones stay as
    /// long as together they fit `budget` tokens.
    fn steps_to_summarise(&self, starts: &[usize], budget: u64) -> usize {
        let mut kept_tokens = 0u64;
        let mut kept = 0;
        for (n, start) in starts.iter().enumerate().rev() {
            let end = starts.get(n + 1).copied().unwrap_or(self.current.len());
            let step = ChatRequest {
                messages: self.current[*start..end].to_vec(),
                ..ChatRequest::default()
            };
            kept_tokens += u64::from(estimate_tokens(&step));
            if kept_tokens > budget {
                break;
            }
            kept += 1;
        }
        starts.len() - kept
    }

    /// Undoes the start of a compaction that did not happen: `messages` is `prior` followed by
    /// `appended` messages copied from `current`.
    fn restore_prior(&mut self, mut messages: Vec<ModelMessage>, appended: usize) {
        messages.truncate(messages.len() - appended);
        self.prior = messages;
    }
}

impl Runner {
    /// The request for the next step, after compacting the conversation when the request would
    /// pass the threshold and there are older turns to summarise. When the summary fails the run
    /// goes on with the full conversation (and does not ask for a summary again).
    pub(super) async fn fit_request(&mut self) -> ChatRequest {
        let request = self.request();
        if self.turns.compaction_failed || !self.over_threshold(&request) {
            return request;
        }
        let tokens = estimate_tokens(&request);
        match self.compact(self.keep_budget(), tokens).await {
            Ok(true) => self.request(),
            Ok(false) => request,
            Err(e) => {
                self.turns.compaction_failed = true;
                self.notice(
                    totem_protocol::NoticeLevel::Warning,
                    format!("{e}; the run goes on with the full conversation"),
                );
                request
            }
        }
    }

    /// Whether anything could be summarised: turns before this run or steps of this run.
    pub(super) fn has_older_turns(&self) -> bool {
        !self.turns.prior.is_empty() || !self.turns.turn_seqs.is_empty()
    }

    /// After the provider said the request does not fit: summarises everything but the prompt.
    pub(super) async fn compact_all(&mut self) -> Result<(), String> {
        let tokens = estimate_tokens(&self.request());
        match self.compact(0, tokens).await? {
            true => Ok(()),
            false => Err("nothing to compact".into()),
        }
    }

    fn over_threshold(&self, request: &ChatRequest) -> bool {
        let Some(window) = self.window() else {
            return false;
        };
        let threshold = self
            .settings
            .compaction
            .as_ref()
            .and_then(|c| c.threshold)
            .unwrap_or(DEFAULT_THRESHOLD);
        f64::from(estimate_tokens(request)) > threshold * window as f64
    }

    /// Tokens of recent steps kept as they are.
    fn keep_budget(&self) -> u64 {
        self.window().map_or(0, |w| (w as f64 * KEEP_SHARE) as u64)
    }

    /// Summarises the turns before this run and this run's steps beyond the newest ones that fit
    /// `keep` tokens. `Ok(false)` when there was nothing to summarise. `tokens` is the size of
    /// the request that called for it, for the notice.
    async fn compact(&mut self, keep: u64, tokens: u32) -> Result<bool, String> {
        let starts = self.turns.step_starts();
        // `turn_seqs` has one seq per answer; they only disagree if a step was recorded without
        // its answer, and then nothing of this run is summarised.
        let steps = if starts.len() == self.turns.turn_seqs.len() {
            self.turns.steps_to_summarise(&starts, keep)
        } else {
            0
        };
        if steps == 0 && self.turns.prior.is_empty() {
            return Ok(false);
        }
        let cut = starts
            .get(steps)
            .copied()
            .unwrap_or(self.turns.current.len());
        let mut messages = std::mem::take(&mut self.turns.prior);
        if steps > 0 {
            // The prompt goes into the summary too, for context; it also stays as itself.
            messages.extend(self.turns.current[..cut].iter().cloned());
        }

        let summary_model = self
            .settings
            .compaction
            .as_ref()
            .and_then(|c| c.model.clone());
        let model = match &summary_model {
            Some(name) => provider_for(&self.daemon, Some(name)).await,
            None => Ok(self.model.clone()),
        };
        let previous = self.turns.compaction.as_ref().map(|c| c.summary.clone());
        let cancel = self.cancel.clone();
        let summary = match model {
            Ok(model) => tokio::select! {
                summary = summarise(&model, previous.as_deref(), &messages) => {
                    summary.map(|summary| Some((summary, model.name)))
                }
                _ = cancel.cancelled() => Ok(None),
            },
            Err(e) => Err(format!("compaction failed: {e}")),
        };
        let (summary, model_name) = match summary {
            Ok(Some(done)) => done,
            failed_or_aborted => {
                self.turns
                    .restore_prior(messages, if steps > 0 { cut } else { 0 });
                return failed_or_aborted.map(|_| false);
            }
        };

        let upto_seq = match steps {
            0 => self.turns.prior_upto,
            n => self.turns.turn_seqs[n - 1].max(self.turns.prior_upto),
        };
        // Stored messages at or below `upto_seq` that the summary does not cover: this run's
        // prompt (it stays in requests as itself). A message an earlier summary kept is in
        // `prior` now, so it is covered.
        let keep_ids = self.turns.excluded.clone();
        let compaction = Compaction {
            upto_seq,
            summary,
            at: now_ms(),
            keep: keep_ids,
        };
        if let Err(e) = self
            .daemon
            .store()
            .put_compaction(&self.agent.session_id, &compaction)
        {
            self.turns
                .restore_prior(messages, if steps > 0 { cut } else { 0 });
            return Err(format!("compaction failed: cannot store the summary: {e}"));
        }
        self.turns.compaction = Some(compaction);
        self.turns.prior_upto = upto_seq;
        self.turns.current.drain(1..cut.max(1));
        self.turns.turn_seqs.drain(..steps);
        self.setup.system = self.render_system();
        let window = self
            .window()
            .map_or_else(String::new, |w| format!(" of the model's {w}"));
        self.notice(
            totem_protocol::NoticeLevel::Info,
            format!(
                "Compacted the conversation (about {tokens}{window} tokens): {} earlier messages were summarised by {model_name}; the run goes on with the summary.",
                messages.len()
            ),
        );
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use totem_provider::{AssistantPart, ToolResult};

    use super::*;

    fn answer(text: &str) -> ModelMessage {
        ModelMessage::Assistant {
            parts: vec![AssistantPart::Text {
                text: text.into(),
                signature: None,
            }],
        }
    }

    fn result(content: &str) -> ModelMessage {
        ModelMessage::ToolResult(ToolResult {
            call_id: "c".into(),
            tool_name: "read".into(),
            content: content.into(),
            is_error: false,
        })
    }

    /// A prompt, then three steps of an answer and a result each; the oldest steps are long.
    fn conversation() -> Conversation {
        let long = "x".repeat(4000);
        Conversation {
            prior: vec![ModelMessage::user("before")],
            current: vec![
                ModelMessage::user("prompt"),
                answer(&long),
                result(&long),
                answer(&long),
                result("short"),
                answer("short"),
                result("short"),
            ],
            turn_seqs: vec![5, 7, 9],
            step_seq: 9,
            prior_upto: 3,
            excluded: Vec::new(),
            compaction: None,
            compaction_failed: false,
        }
    }

    #[test]
    fn steps_start_at_each_answer() {
        assert_eq!(conversation().step_starts(), vec![1, 3, 5]);
    }

    #[test]
    fn the_newest_steps_that_fit_the_budget_are_kept() {
        let turns = conversation();
        let starts = turns.step_starts();
        assert_eq!(turns.steps_to_summarise(&starts, 0), 3, "nothing fits 0");
        assert_eq!(
            turns.steps_to_summarise(&starts, 100),
            2,
            "only the short step fits"
        );
        assert_eq!(
            turns.steps_to_summarise(&starts, 1_000_000),
            0,
            "everything fits"
        );
    }

    #[test]
    fn a_compaction_that_did_not_happen_restores_prior() {
        let mut turns = conversation();
        let mut taken = std::mem::take(&mut turns.prior);
        taken.extend(turns.current[..3].iter().cloned());
        turns.restore_prior(taken, 3);
        assert_eq!(turns.prior, vec![ModelMessage::user("before")]);
    }
}
