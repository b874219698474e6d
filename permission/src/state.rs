//! Answers to permission questions, and the "always" rules they leave behind.

use serde::{Deserialize, Serialize};
use totem_protocol::PermissionReply;

use crate::policy::Verdict;
use crate::rules::{AccessKind, Decision, MatchedRule, RuleError, RuleSet, Rules, Source};

/// Where an "always" answer is remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Scope {
    /// For this session only.
    Session,
    /// For the project, kept in the store.
    Project,
}

/// What an answer means for the waiting tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The call may go ahead.
    pub allowed: bool,
    /// The person's note for the model, on a deny.
    pub note: Option<String>,
    /// Rules were remembered here; on `Project` the daemon persists
    /// [`PermissionState::project_rules`].
    pub remembered: Option<Scope>,
}

/// The rules remembered from "always" answers: for the session (in memory) and for the project
/// (persisted by the daemon). Serializes as `{"session": Rules, "project": Rules}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "StateFile", into = "StateFile")]
pub struct PermissionState {
    session: RuleSet,
    project: RuleSet,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    #[serde(default)]
    session: Rules,
    #[serde(default)]
    project: Rules,
}

impl TryFrom<StateFile> for PermissionState {
    type Error = RuleError;

    fn try_from(file: StateFile) -> Result<Self, RuleError> {
        Ok(PermissionState {
            session: RuleSet::compile(Source::SessionAnswer, file.session)?,
            project: RuleSet::compile(Source::ProjectAnswer, file.project)?,
        })
    }
}

impl From<PermissionState> for StateFile {
    fn from(state: PermissionState) -> Self {
        StateFile {
            session: state.session.rules().clone(),
            project: state.project.rules().clone(),
        }
    }
}

impl Default for PermissionState {
    fn default() -> Self {
        Self::new()
    }
}

impl PermissionState {
    /// Nothing remembered.
    pub fn new() -> Self {
        PermissionState {
            session: RuleSet::empty(Source::SessionAnswer),
            project: RuleSet::empty(Source::ProjectAnswer),
        }
    }

    /// A session's state starting from the project's persisted rules.
    pub fn with_project_rules(project: Rules) -> Result<Self, RuleError> {
        Ok(PermissionState {
            project: RuleSet::compile(Source::ProjectAnswer, project)?,
            ..Self::new()
        })
    }

    /// The rules "always for this session" answers added.
    pub fn session_rules(&self) -> &Rules {
        self.session.rules()
    }

    /// The rules to persist for the project.
    pub fn project_rules(&self) -> &Rules {
        self.project.rules()
    }

    /// Remembers `rules` (allow rules, as made by [`Verdict::always_rules`]) in `scope`.
    pub fn remember(&mut self, scope: Scope, rules: &Rules) -> Result<(), RuleError> {
        let (set, source) = match scope {
            Scope::Session => (&mut self.session, Source::SessionAnswer),
            Scope::Project => (&mut self.project, Source::ProjectAnswer),
        };
        let mut merged = set.rules().clone();
        merged.extend(rules);
        *set = RuleSet::compile(source, merged)?;
        Ok(())
    }

    /// Applies a person's reply to the question `verdict` raised: remembers the "always" rules in
    /// the chosen scope and says whether the call may go ahead. A verdict that denies stays denied.
    pub fn answer(
        &mut self,
        verdict: &Verdict,
        reply: &PermissionReply,
    ) -> Result<Answer, RuleError> {
        let denied = verdict.decision == Decision::Deny;
        let (scope, allowed, note) = match reply {
            PermissionReply::Once => (None, !denied, None),
            PermissionReply::AlwaysSession => (Some(Scope::Session), !denied, None),
            PermissionReply::AlwaysProject => (Some(Scope::Project), !denied, None),
            PermissionReply::Deny { note } => (None, false, note.clone()),
        };
        let remembered = match scope {
            Some(scope) if allowed => {
                self.remember(scope, &verdict.always_rules())?;
                Some(scope)
            }
            _ => None,
        };
        Ok(Answer {
            allowed,
            note,
            remembered,
        })
    }

    /// The remembered allow rule that settles a question about `subject`, if any. With
    /// `exact_only`, only a rule naming exactly this subject counts.
    pub(crate) fn lift(
        &self,
        kind: AccessKind,
        tool: &str,
        subject: &str,
        exact_only: bool,
    ) -> Option<MatchedRule> {
        [&self.session, &self.project].into_iter().find_map(|set| {
            let rule = if exact_only {
                set.decide_exact(kind, tool, subject)
            } else {
                set.decide(kind, tool, subject)
            };
            rule.filter(|r| r.decision == Decision::Allow)
        })
    }
}
