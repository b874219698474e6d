//! A pending permission question, as the daemon keeps it and clients are shown it.

use serde::{Deserialize, Serialize};

use crate::policy::Verdict;
use crate::rules::{Access, Decision, Rules};

/// The data of a `permission.asked` event. It is plain data so the daemon can persist it: a
/// question outlives the clients that saw it and is answered with
/// [`PermissionState::answer`](crate::PermissionState::answer)`(&question.verdict, reply)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Question {
    /// The access asked about.
    pub access: Access,
    /// One line for a person: what is asked and why.
    pub explanation: String,
    /// What an "always" answer would remember, to show beside the choices.
    pub always: Rules,
    /// The full evaluation, every part with its reason.
    pub verdict: Verdict,
}

impl Question {
    /// The question `verdict` raises about `access`; `None` when it does not ask.
    pub fn new(access: &Access, verdict: &Verdict) -> Option<Question> {
        (verdict.decision == Decision::Ask).then(|| Question {
            access: access.clone(),
            explanation: verdict.explain(),
            always: verdict.always_rules(),
            verdict: verdict.clone(),
        })
    }
}
