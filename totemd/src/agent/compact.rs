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

impl Runner {
    /// The request for the next step, after compacting the conversation when the request would
    /// pass the threshold and there are older turns to summarise. When the summary fails the run
    /// goes on with the full conversation (and does not ask for a summary again).
    pub(super) async fn fit_request(&mut self) -> ChatRequest {
        let request = self.request();
        if self.compaction_failed || !self.over_threshold(&request) {
            return request;
        }
        let tokens = estimate_tokens(&request);
        match self.compact(self.keep_budget(), tokens).await {
            Ok(true) => self.request(),
            Ok(false) => request,
            Err(e) => {
                self.compaction_failed = true;
                self.notice(
                    "warning",
                    format!("{e}; the run goes on with the full conversation"),
                );
                request
            }
        }
    }

    /// Whether anything could be summarised: turns before this run or steps of this run.
    pub(super) fn has_older_turns(&self) -> bool {
        !self.prior.is_empty() || !self.turn_seqs.is_empty()
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

    /// Summarises the turns before this run and this run's steps beyond the newest ones that fit
    /// `keep` tokens. `Ok(false)` when there was nothing to summarise. `tokens` is the size of
    /// the request that called for it, for the notice.
    async fn compact(&mut self, keep: u64, tokens: u32) -> Result<bool, String> {
        let starts = self.step_starts();
        // `turn_seqs` has one seq per answer; they only disagree if a step was recorded without
        // its answer, and then nothing of this run is summarised.
        let steps = if starts.len() == self.turn_seqs.len() {
            self.steps_to_summarise(&starts, keep)
        } else {
            0
        };
        if steps == 0 && self.prior.is_empty() {
            return Ok(false);
        }
        let cut = starts.get(steps).copied().unwrap_or(self.current.len());
        let mut messages = std::mem::take(&mut self.prior);
        if steps > 0 {
            // The prompt goes into the summary too, for context; it also stays as itself.
            messages.extend(self.current[..cut].iter().cloned());
        }

        let model = match &self.compaction_model {
            Some(name) => provider_for(&self.daemon, Some(name)).await,
            None => Ok(self.model.clone()),
        };
        let previous = self.compaction.as_ref().map(|c| c.summary.clone());
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
                self.restore_prior(messages, if steps > 0 { cut } else { 0 });
                return failed_or_aborted.map(|_| false);
            }
        };

        let upto_seq = match steps {
            0 => self.prior_upto,
            n => self.turn_seqs[n - 1].max(self.prior_upto),
        };
        // Stored messages at or below `upto_seq` that the summary does not cover: this run's
        // prompt (it stays in requests as itself) and the prompts queued behind this run. A
        // message an earlier summary kept is in `prior` now, so it is covered.
        let mut keep_ids = self.excluded.clone();
        for id in self.agent.queued_messages() {
            if !keep_ids.contains(&id) {
                keep_ids.push(id);
            }
        }
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
            self.restore_prior(messages, if steps > 0 { cut } else { 0 });
            return Err(format!("compaction failed: cannot store the summary: {e}"));
        }
        self.compaction = Some(compaction);
        self.prior_upto = upto_seq;
        self.current.drain(1..cut.max(1));
        self.turn_seqs.drain(..steps);
        self.system = self.render_system();
        let window = self
            .window()
            .map_or_else(String::new, |w| format!(" of the model's {w}"));
        self.notice(
            "info",
            format!(
                "Compacted the conversation (about {tokens}{window} tokens): {} earlier messages were summarised by {model_name}; the run goes on with the summary.",
                messages.len()
            ),
        );
        Ok(true)
    }
}
