//! Rules as they appear in settings, and their compiled form.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::pattern::{PathPattern, Wildcard, specificity};

/// What a rule says about an access. Ordered from the most to the least permissive, so the
/// stricter of two decisions is their `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Decision {
    /// Go ahead without asking.
    Allow,
    /// Ask a person first.
    Ask,
    /// Refuse.
    Deny,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        })
    }
}

/// The kind of an access, which picks the rule key that covers every tool of that kind and the
/// pattern language used for its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AccessKind {
    /// Reading a file or listing a folder; target is a project-relative path. Rule key `read`.
    Read,
    /// Creating, changing or deleting a file; target is a project-relative path. Rule key `edit`.
    Write,
    /// Running a shell command line; target is the command line. Rule key `bash`.
    Execute,
    /// Calling a tool of a configured MCP server; target is `server/tool`. Rule key `mcp`.
    Mcp,
}

impl AccessKind {
    /// The rule key that covers every tool of this kind.
    pub fn rule_key(self) -> &'static str {
        match self {
            AccessKind::Read => "read",
            AccessKind::Write => "edit",
            AccessKind::Execute => "bash",
            AccessKind::Mcp => "mcp",
        }
    }

    /// Targets are paths (globs) rather than command lines or names (wildcards).
    pub fn is_path(self) -> bool {
        matches!(self, AccessKind::Read | AccessKind::Write)
    }
}

/// One thing a tool call will do, to be allowed, asked about or denied.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Access {
    /// Read, write, execute or an MCP call.
    pub kind: AccessKind,
    /// The tool asking (`read`, `write`, `bash`, `job`, `github/create_issue` …).
    pub tool: String,
    /// A project-relative path (already resolved inside the project boundary), the shell command
    /// line, or the MCP tool's `server/tool` name.
    pub target: String,
}

impl Access {
    /// An access of `kind` by `tool` to `target`.
    pub fn new(kind: AccessKind, tool: impl Into<String>, target: impl Into<String>) -> Self {
        Access {
            kind,
            tool: tool.into(),
            target: target.into(),
        }
    }

    /// `tool` reads `path`.
    pub fn read(tool: impl Into<String>, path: impl Into<String>) -> Self {
        Self::new(AccessKind::Read, tool, path)
    }

    /// `tool` changes `path`.
    pub fn write(tool: impl Into<String>, path: impl Into<String>) -> Self {
        Self::new(AccessKind::Write, tool, path)
    }

    /// `tool` runs the command line `command`.
    pub fn execute(tool: impl Into<String>, command: impl Into<String>) -> Self {
        Self::new(AccessKind::Execute, tool, command)
    }

    /// A call of MCP tool `tool` (`server/tool`), its own target.
    pub fn mcp(tool: impl Into<String>) -> Self {
        let tool = tool.into();
        Self::new(AccessKind::Mcp, tool.clone(), tool)
    }
}

/// Rules as written in a settings file: rule key → pattern → decision.
///
/// ```json
/// { "bash": { "git status *": "allow", "git push *": "ask", "rm -rf *": "deny" },
///   "edit": { "src/**": "allow", "*.lock": "deny" },
///   "read": { "secrets/": "deny" },
///   "mcp":  { "github/*": "ask" } }
/// ```
///
/// See the crate documentation for keys, patterns and precedence.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rules(pub BTreeMap<String, BTreeMap<String, Decision>>);

impl Rules {
    /// No rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) one rule.
    pub fn insert(
        &mut self,
        key: impl Into<String>,
        pattern: impl Into<String>,
        decision: Decision,
    ) {
        self.0
            .entry(key.into())
            .or_default()
            .insert(pattern.into(), decision);
    }

    /// Adds every rule of `other`, replacing rules with the same key and pattern.
    pub fn extend(&mut self, other: &Rules) {
        for (key, patterns) in &other.0 {
            for (pattern, decision) in patterns {
                self.insert(key.clone(), pattern.clone(), *decision);
            }
        }
    }

    /// No key holds a pattern.
    pub fn is_empty(&self) -> bool {
        self.0.values().all(BTreeMap::is_empty)
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.0.values().map(BTreeMap::len).sum()
    }

    /// Rules from an agent's `allow:` and `deny:` lists. Each entry is a rule key alone (`read`,
    /// `bash`, `webfetch`: every target) or a key with a pattern in parentheses (`bash(git *)`,
    /// `edit(src/**)`). An entry in both lists is denied.
    pub fn from_lists(allow: &[String], deny: &[String]) -> Result<Rules, RuleError> {
        let mut rules = Rules::new();
        for (entries, decision) in [(allow, Decision::Allow), (deny, Decision::Deny)] {
            for entry in entries {
                let (key, pattern) = parse_list_entry(entry)?;
                rules.insert(key, pattern, decision);
            }
        }
        Ok(rules)
    }
}

fn parse_list_entry(entry: &str) -> Result<(String, String), RuleError> {
    let entry = entry.trim();
    let invalid = || RuleError::InvalidEntry {
        entry: entry.to_string(),
    };
    match entry.split_once('(') {
        None if !entry.is_empty() && !entry.contains(')') => Ok((entry.to_string(), "*".into())),
        None => Err(invalid()),
        Some((key, rest)) => {
            let pattern = rest.strip_suffix(')').ok_or_else(invalid)?;
            let key = key.trim();
            if key.is_empty() || pattern.is_empty() {
                return Err(invalid());
            }
            Ok((key.to_string(), pattern.to_string()))
        }
    }
}

/// A rule that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// A pattern is not a glob.
    #[error("rule `{key}`: pattern `{pattern}` is not a valid glob: {message}")]
    InvalidGlob {
        /// The rule key.
        key: String,
        /// The pattern as written.
        pattern: String,
        /// What the glob parser said.
        message: String,
    },
    #[error(
        "`{entry}` is not a rule; write a key (`bash`) or a key with a pattern (`bash(git status *)`)"
    )]
    /// An entry is neither a key nor a key with a pattern.
    InvalidEntry {
        /// The entry as written.
        entry: String,
    },
    /// A secret pattern to remove is not a built-in one.
    #[error("`{pattern}` is not a built-in secret pattern, so it cannot be removed")]
    UnknownSecretPattern {
        /// The pattern as written.
        pattern: String,
    },
}

/// Where a rule came from, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// Totem's built-in defaults.
    Default,
    /// The user's settings file.
    User,
    /// The running agent's `allow:`/`deny:` lists.
    Agent,
    /// Rules for this project.
    Project,
    /// Rules granted for one run by whoever started it (`totem run --allow`).
    Run,
    /// An "always for this session" answer.
    SessionAnswer,
    /// An "always for this project" answer.
    ProjectAnswer,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Default => "built-in default",
            Source::User => "user settings",
            Source::Agent => "agent rules",
            Source::Project => "project rules",
            Source::Run => "allowed for this run (--allow)",
            Source::SessionAnswer => "answered always for this session",
            Source::ProjectAnswer => "answered always for this project",
        })
    }
}

/// The rule that decided, for explanations ("allowed by user settings: bash `git status *`").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchedRule {
    /// Which settings the rule came from.
    pub source: Source,
    /// The rule key.
    pub key: String,
    /// The pattern that matched.
    pub pattern: String,
    /// What the rule says.
    pub decision: Decision,
}

impl fmt::Display for MatchedRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} `{}` → {}",
            self.source, self.key, self.pattern, self.decision
        )
    }
}

#[derive(Debug, Clone)]
struct Entry {
    key: String,
    pattern: String,
    decision: Decision,
    specificity: usize,
    /// `None` for keys whose targets are never paths (`bash`, `mcp`).
    path: Option<PathPattern>,
    words: Wildcard,
}

/// Compiled [`Rules`] from one source.
#[derive(Debug, Clone)]
pub struct RuleSet {
    source: Source,
    rules: Rules,
    entries: Vec<Entry>,
}

impl RuleSet {
    /// Compiles `rules`; an invalid path glob is an error naming its key and pattern.
    pub fn compile(source: Source, rules: Rules) -> Result<Self, RuleError> {
        let mut entries = Vec::new();
        for (key, patterns) in &rules.0 {
            for (pattern, decision) in patterns {
                // `read` and `edit` rules are always paths, so a bad glob there is an error. Other
                // keys (a tool's own name, `*`) may hold command patterns that are not globs.
                let path = match PathPattern::new(pattern, false) {
                    _ if key == "bash" || key == "mcp" => None,
                    Ok(p) => Some(p),
                    Err(e) if key == "read" || key == "edit" => {
                        return Err(RuleError::InvalidGlob {
                            key: key.clone(),
                            pattern: pattern.clone(),
                            message: e.kind().to_string(),
                        });
                    }
                    Err(_) => None,
                };
                entries.push(Entry {
                    key: key.clone(),
                    pattern: pattern.clone(),
                    decision: *decision,
                    specificity: specificity(pattern),
                    path,
                    words: Wildcard::new(pattern),
                });
            }
        }
        Ok(RuleSet {
            source,
            rules,
            entries,
        })
    }

    /// A set without rules.
    pub fn empty(source: Source) -> Self {
        RuleSet {
            source,
            rules: Rules::new(),
            entries: Vec::new(),
        }
    }

    /// Which settings these rules came from.
    pub fn source(&self) -> Source {
        self.source
    }

    /// The rules themselves.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The rule of this set that decides `target` for `tool` of `kind`: rules under the tool's own
    /// name first, then under the kind's key, then under `*`; among those that match, the most
    /// specific pattern, and on a tie the strictest decision.
    pub fn decide(&self, kind: AccessKind, tool: &str, target: &str) -> Option<MatchedRule> {
        self.best(kind, tool, target, |_| true)
    }

    /// Like [`RuleSet::decide`] but only among rules that name `target` exactly (no wildcard).
    pub(crate) fn decide_exact(
        &self,
        kind: AccessKind,
        tool: &str,
        target: &str,
    ) -> Option<MatchedRule> {
        let exact_path = crate::pattern::exact_path_pattern(target);
        self.best(kind, tool, target, |e| {
            if kind.is_path() {
                e.pattern == exact_path
            } else {
                e.words.is_exact()
            }
        })
    }

    fn best(
        &self,
        kind: AccessKind,
        tool: &str,
        target: &str,
        filter: impl Fn(&Entry) -> bool,
    ) -> Option<MatchedRule> {
        for key in [tool, kind.rule_key(), "*"] {
            let best = self
                .entries
                .iter()
                .filter(|e| e.key == key && filter(e))
                .filter(|e| {
                    if kind.is_path() {
                        e.path.as_ref().is_some_and(|p| p.is_match(target))
                    } else {
                        e.words.is_match(target)
                    }
                })
                .max_by_key(|e| (e.specificity, e.decision));
            if let Some(e) = best {
                return Some(MatchedRule {
                    source: self.source,
                    key: e.key.clone(),
                    pattern: e.pattern.clone(),
                    decision: e.decision,
                });
            }
        }
        None
    }
}
