//! The engine: layers of rules, secret files and remembered answers, evaluated for one access.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::bash::{SubCommand, Word, split_commands};
use crate::defaults::default_rules;
use crate::pattern::{exact_command_pattern, exact_path_pattern, normalize_path};
use crate::rules::{Access, AccessKind, Decision, MatchedRule, RuleError, RuleSet, Rules, Source};
use crate::secret::SecretPatterns;
use crate::state::PermissionState;

/// Why a part of an access got its decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Reason {
    /// A configured rule decided.
    Rule {
        /// The rule.
        rule: MatchedRule,
    },
    /// A remembered "always" answer turned a question into an allow.
    Remembered {
        /// The rule the answer left.
        rule: MatchedRule,
    },
    /// The file is a secret (or the command names one); only an explicit answer for it allows it.
    Secret {
        /// The secret pattern that matched.
        pattern: String,
    },
    /// The command line could not be split with confidence.
    Unparsed {
        /// What the splitter could not read.
        error: String,
    },
    /// The command runs code that cannot be seen before it runs (`eval "$x"`, `bash -c "$s"`,
    /// a program name that is an expansion).
    Opaque,
    /// A built-in allow does not cover this use: it reaches outside the project or depends on an
    /// expansion.
    ReachesOutside {
        /// The word that reaches out.
        word: String,
    },
    /// The file has more than one hard link: it may be a secret or a file outside the project
    /// under another name. Only an answer for exactly this file settles it.
    HardLinked {
        /// How many links the file has.
        links: u64,
    },
    /// The tool runs the command outside the kernel sandbox the built-in allows assume.
    Unconfined,
    /// The text holds a command substitution, a process substitution or an arithmetic context
    /// (`$(`, a backtick, `<(`, `>(`, `((`, `let`, `[[ -v …]]`, `test x -eq y` …), quoted or not:
    /// bash can run a command from inside it (`[[ -v 'a[$(cmd)]' ]]`), so no built-in allow
    /// covers it.
    HiddenCode {
        /// What was found.
        found: String,
    },
    /// A write under `.git/` (hooks, config: git runs what they name) or Totem's own `.totem/`
    /// (settings, MCP servers, commands): it asks every time, whatever was allowed (`--allow
    /// edit`, a remembered answer), and "always" does not cover it.
    ControlFolder {
        /// `.git` or `.totem`.
        folder: String,
    },
    /// The command comes from a file in the project (AGENTS.md), not from the user: a built-in
    /// allow does not cover it, and only an answer for exactly this text settles it.
    FromProject {
        /// The file the command comes from.
        origin: String,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Rule { rule } => write!(f, "{rule}"),
            Reason::Remembered { rule } => write!(f, "{rule}"),
            Reason::Secret { pattern } => write!(f, "secret file (matches `{pattern}`)"),
            Reason::Unparsed { error } => write!(f, "the command could not be read: {error}"),
            Reason::Opaque => f.write_str("runs code that cannot be checked before it runs"),
            Reason::ReachesOutside { word } => write!(
                f,
                "`{word}` reaches outside the project or depends on an expansion"
            ),
            Reason::HardLinked { links } => write!(
                f,
                "the file has {links} hard links, so it may be a secret or a file outside the project under another name"
            ),
            Reason::Unconfined => f.write_str(
                "this tool runs commands outside the sandbox, so the built-in allow does not cover it",
            ),
            Reason::ControlFolder { folder } if folder == ".git" => f.write_str(
                "a write under .git/ can make git run code (hooks, core.fsmonitor in config), so it always asks",
            ),
            Reason::ControlFolder { folder } => write!(
                f,
                "a write under {folder}/ changes what Totem itself runs and allows, so it always asks"
            ),
            Reason::FromProject { origin } => {
                write!(f, "the command comes from the project's {origin}")
            }
            Reason::HiddenCode { found } => write!(
                f,
                "`{found}` can run a command hidden inside the text, so it needs a person's look"
            ),
        }
    }
}

/// The control folder (`.git` or `.totem`) a path is under, any component of it (a nested
/// repository's `.git` too), whatever its case (case-insensitive file systems).
pub fn control_folder(path: &str) -> Option<&'static str> {
    path.split(['/', '\\']).find_map(|component| {
        if component.eq_ignore_ascii_case(".git") {
            Some(".git")
        } else if component.eq_ignore_ascii_case(".totem") {
            Some(".totem")
        } else {
            None
        }
    })
}

/// The rule an "always" answer would add for one part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlwaysRule {
    /// The rule key (`bash`, `edit`, `mcp` …).
    pub key: String,
    /// The pattern the rule matches.
    pub pattern: String,
}

/// One decided piece of an access: a sub-command of a command line, a file a redirection writes,
/// or the access itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Read, write, execute or an MCP call.
    pub kind: AccessKind,
    /// The sub-command text or the path.
    pub subject: String,
    /// What this part alone would get.
    pub decision: Decision,
    /// Why it gets that.
    pub reason: Reason,
    /// What answering "always" remembers for this part (only for parts that ask).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always: Option<AlwaysRule>,
}

/// The outcome of evaluating an access: the strictest decision over its parts (deny over ask over
/// allow), with every part and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The strictest decision of the parts: what the access gets.
    pub decision: Decision,
    /// Every decided piece, in order.
    pub parts: Vec<Part>,
}

impl Verdict {
    /// The part that decided: the first one with the verdict's decision.
    pub fn deciding_part(&self) -> Option<&Part> {
        self.parts.iter().find(|p| p.decision == self.decision)
    }

    /// The reason of the deciding part.
    pub fn reason(&self) -> Option<&Reason> {
        self.deciding_part().map(|p| &p.reason)
    }

    /// One line for a person or a model: "ask: `rm -rf x` (built-in default: bash `*` → ask)".
    pub fn explain(&self) -> String {
        match self.deciding_part() {
            Some(p) => format!("{}: `{}` ({})", self.decision, p.subject, p.reason),
            None => format!("{}: nothing to run", self.decision),
        }
    }

    /// What an "always" answer remembers, in words for the question (every client shows it with
    /// the explanation): `"Always" remembers bash(sed -n 1p a.txt), this exact text only.` or
    /// `"Always" remembers bash(npm test *).`; `None` when nothing asks.
    pub fn always_note(&self) -> Option<String> {
        let asking: Vec<&Part> = self
            .parts
            .iter()
            .filter(|p| p.decision == Decision::Ask)
            .collect();
        if asking.is_empty() {
            return None;
        }
        let every_time = asking
            .iter()
            .any(|p| matches!(p.reason, Reason::ControlFolder { .. }));
        let mut rules = Vec::new();
        let mut widened = false;
        for part in &asking {
            if matches!(part.reason, Reason::ControlFolder { .. }) {
                continue;
            }
            if let Some(a) = &part.always {
                let exact = if part.kind.is_path() {
                    exact_path_pattern(&part.subject)
                } else {
                    exact_command_pattern(&part.subject)
                };
                widened |= a.pattern != exact;
                let rule = format!("{}({})", a.key, a.pattern);
                if !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
        }
        let mut note = match (rules.is_empty(), widened) {
            (true, _) => "\"Always\" remembers nothing here".to_string(),
            (false, true) => format!("\"Always\" remembers {}", rules.join(", ")),
            (false, false) => format!(
                "\"Always\" remembers {}, this exact text only",
                rules.join(", ")
            ),
        };
        if every_time {
            note.push_str("; a write under .git/ or .totem/ asks every time");
        }
        note.push('.');
        Some(note)
    }

    /// The rules an "always" answer adds: one per part that asks.
    pub fn always_rules(&self) -> Rules {
        let mut rules = Rules::new();
        for part in &self.parts {
            if let (Decision::Ask, Some(a)) = (part.decision, &part.always) {
                rules.insert(a.key.clone(), a.pattern.clone(), Decision::Allow);
            }
        }
        rules
    }
}

#[derive(Debug, Clone)]
struct Layer {
    rules: RuleSet,
    /// Rules from a place the user does not control (a file inside the repository) may only make
    /// decisions stricter.
    tighten_only: bool,
}

/// The configured rules and secret patterns. Build one per agent and project; evaluate with the
/// session's [`PermissionState`].
#[derive(Debug, Clone)]
pub struct Policy {
    layers: Vec<Layer>,
    secrets: SecretPatterns,
    environment: crate::env::EnvSettings,
}

impl Default for Policy {
    fn default() -> Self {
        Self::new()
    }
}

impl Policy {
    /// The built-in defaults and secret patterns, nothing else.
    pub fn new() -> Self {
        let defaults = RuleSet::compile(Source::Default, default_rules());
        Policy {
            layers: defaults
                .into_iter()
                .map(|rules| Layer {
                    rules,
                    tighten_only: false,
                })
                .collect(),
            secrets: SecretPatterns::default(),
            environment: crate::env::EnvSettings::default(),
        }
    }

    /// The built-in rules for a machine without a kernel sandbox: commands that read files ask
    /// (see [`crate::defaults::default_rules_without_sandbox`]).
    pub fn without_sandbox() -> Self {
        let mut policy = Self::new();
        policy
            .layers
            .retain(|l| l.rules.source() != Source::Default);
        if let Ok(rules) = RuleSet::compile(
            Source::Default,
            crate::defaults::default_rules_without_sandbox(),
        ) {
            policy.layers.insert(
                0,
                Layer {
                    rules,
                    tighten_only: false,
                },
            );
        }
        policy
    }

    /// Keeps the configured rules and swaps the built-in ones for those of a machine without a
    /// kernel sandbox.
    pub fn shrink_defaults(&mut self) {
        let shrunk = Self::without_sandbox();
        self.layers.retain(|l| l.rules.source() != Source::Default);
        let defaults = shrunk
            .layers
            .into_iter()
            .filter(|l| l.rules.source() == Source::Default);
        let mut layers: Vec<Layer> = defaults.collect();
        layers.append(&mut self.layers);
        self.layers = layers;
    }

    /// Which environment variables commands inherit.
    pub fn set_environment(&mut self, environment: crate::env::EnvSettings) {
        self.environment = environment;
    }

    /// Which environment variables commands inherit.
    pub fn environment(&self) -> &crate::env::EnvSettings {
        &self.environment
    }

    /// Adds the rules of one source. Layers are ordered by [`Source`] whatever the call order;
    /// among layers of the same source, later calls win.
    pub fn add_layer(&mut self, source: Source, rules: Rules) -> Result<(), RuleError> {
        self.insert(source, rules, false)
    }

    /// Adds rules that may only make decisions stricter (ask or deny where lower layers allow).
    /// Use it for rules read from a file inside the project, which whoever wrote the repository
    /// controls.
    pub fn add_tightening_layer(&mut self, source: Source, rules: Rules) -> Result<(), RuleError> {
        self.insert(source, rules, true)
    }

    fn insert(
        &mut self,
        source: Source,
        rules: Rules,
        tighten_only: bool,
    ) -> Result<(), RuleError> {
        let rules = RuleSet::compile(source, rules)?;
        let at = self
            .layers
            .iter()
            .position(|l| l.rules.source() > source)
            .unwrap_or(self.layers.len());
        self.layers.insert(
            at,
            Layer {
                rules,
                tighten_only,
            },
        );
        Ok(())
    }

    /// Replaces the secret patterns (see [`SecretPatterns::from_settings`]).
    pub fn set_secrets(&mut self, secrets: SecretPatterns) {
        self.secrets = secrets;
    }

    /// The secret patterns in force (built-in ones with the settings' changes).
    pub fn secrets(&self) -> &SecretPatterns {
        &self.secrets
    }

    /// Decides `access` under these rules and the answers remembered in `state`.
    pub fn evaluate(&self, access: &Access, state: &PermissionState) -> Verdict {
        let mut parts = Vec::new();
        match access.kind {
            AccessKind::Execute => self.command_line_parts(access, state, &mut parts),
            AccessKind::Read | AccessKind::Write => {
                parts.push(self.path_part(access.kind, &access.tool, &access.target, state));
            }
            AccessKind::Mcp => {
                let (decision, rule) = self.configured(access.kind, &access.tool, &access.target);
                let always = AlwaysRule {
                    key: AccessKind::Mcp.rule_key().into(),
                    pattern: exact_command_pattern(&access.target),
                };
                let part = Part {
                    kind: access.kind,
                    subject: access.target.clone(),
                    decision,
                    reason: Reason::Rule { rule },
                    always: Some(always),
                };
                parts.push(self.settle(&access.tool, part, state));
            }
        }
        Verdict {
            decision: strictest(&parts),
            parts,
        }
    }

    /// [`Policy::evaluate`] for a file access whose file has `links` names (hard links). A file
    /// with more than one may be a secret, or a file outside the project, under another name: an
    /// allow turns into a question that only an answer for exactly this file settles.
    pub fn evaluate_file(&self, access: &Access, links: u64, state: &PermissionState) -> Verdict {
        let mut verdict = self.evaluate(access, state);
        if links <= 1 || !access.kind.is_path() {
            return verdict;
        }
        for part in &mut verdict.parts {
            if part.kind.is_path() && part.decision == Decision::Allow {
                part.decision = Decision::Ask;
                part.reason = Reason::HardLinked { links };
                part.always = Some(AlwaysRule {
                    key: part.kind.rule_key().into(),
                    pattern: exact_path_pattern(&part.subject),
                });
                *part = self.settle(&access.tool, part.clone(), state);
            }
        }
        verdict.decision = strictest(&verdict.parts);
        verdict
    }

    /// Decides a command line that comes from a file inside the project (`origin`, such as
    /// `AGENTS.md`) rather than from the user or the model's own call. It goes through the same
    /// rules, with two differences: a built-in allow does not cover it (it asks the first time),
    /// and "always" remembers each command's exact text, so a changed command asks again.
    pub fn evaluate_from_project(
        &self,
        access: &Access,
        origin: &str,
        state: &PermissionState,
    ) -> Verdict {
        let reason = Reason::FromProject {
            origin: origin.to_string(),
        };
        self.evaluate_without_built_ins(access, reason, state)
    }

    /// Decides a command that a tool runs outside the kernel sandbox (an interactive terminal):
    /// the built-in allows assume the sandbox, so they do not cover it, and "always" remembers
    /// the exact text.
    pub fn evaluate_unconfined(&self, access: &Access, state: &PermissionState) -> Verdict {
        self.evaluate_without_built_ins(access, Reason::Unconfined, state)
    }

    /// Whether the built-in rules alone, with no configured rule and no remembered answer, allow
    /// `access`. A command they allow keeps its sandboxed, hardened path even when a broader rule
    /// of the user (`--allow bash`) also allows it.
    pub fn built_ins_allow(&self, access: &Access) -> bool {
        let mut defaults = self.clone();
        defaults
            .layers
            .retain(|l| l.rules.source() == Source::Default);
        defaults
            .evaluate(access, &PermissionState::default())
            .decision
            == Decision::Allow
    }

    fn evaluate_without_built_ins(
        &self,
        access: &Access,
        reason: Reason,
        state: &PermissionState,
    ) -> Verdict {
        let mut verdict = self.evaluate(access, state);
        for part in &mut verdict.parts {
            let built_in =
                matches!(&part.reason, Reason::Rule { rule } if rule.source == Source::Default);
            if part.decision == Decision::Allow && built_in {
                part.decision = Decision::Ask;
                part.reason = reason.clone();
            }
            if part.decision == Decision::Ask {
                let key = part.kind.rule_key().to_string();
                let pattern = if part.kind.is_path() {
                    exact_path_pattern(&part.subject)
                } else {
                    exact_command_pattern(&part.subject)
                };
                part.always = Some(AlwaysRule { key, pattern });
                *part = self.settle(&access.tool, part.clone(), state);
            }
        }
        verdict.decision = strictest(&verdict.parts);
        verdict
    }

    /// The decision of the configured layers: a deny from any layer wins; otherwise the highest
    /// layer with a matching rule decides, except that a tightening layer only counts where it is
    /// stricter. So an allow granted higher up (an agent's list, `--allow`) answers questions but
    /// never lifts a deny.
    fn configured(&self, kind: AccessKind, tool: &str, subject: &str) -> (Decision, MatchedRule) {
        let mut current: Option<MatchedRule> = None;
        let mut denied: Option<MatchedRule> = None;
        for layer in &self.layers {
            let Some(m) = layer.rules.decide(kind, tool, subject) else {
                continue;
            };
            if m.decision == Decision::Deny && denied.is_none() {
                denied = Some(m.clone());
            }
            let stricter = current.as_ref().is_none_or(|c| m.decision > c.decision);
            if !layer.tighten_only || stricter {
                current = Some(m);
            }
        }
        let rule = denied.or(current).unwrap_or(MatchedRule {
            source: Source::Default,
            key: "*".into(),
            pattern: "*".into(),
            decision: Decision::Ask,
        });
        (rule.decision, rule)
    }

    /// Applies remembered answers to a part that asks. `part.always` holds the rule an "always"
    /// answer would add; it is kept only on a part that still asks.
    fn settle(&self, tool: &str, mut part: Part, state: &PermissionState) -> Part {
        // A write into a control folder is never settled by a remembered answer.
        if part.decision == Decision::Ask && !matches!(part.reason, Reason::ControlFolder { .. }) {
            // A question raised by something specific (a secret, an expansion, an unreadable line)
            // is settled only by an answer for exactly this subject, never by a broad pattern.
            // So is a command "always" would remember only by its exact text (`sed`, `awk`,
            // interpreters …): a broad rule remembered earlier (`sed *`, by an older build) does
            // not cover `sed -n '1e touch X'`.
            let exact_only = !matches!(part.reason, Reason::Rule { .. })
                || (part.kind == AccessKind::Execute
                    && part
                        .always
                        .as_ref()
                        .is_some_and(|a| a.pattern == exact_command_pattern(&part.subject)));
            if let Some(rule) = state.lift(part.kind, tool, &part.subject, exact_only) {
                part.decision = Decision::Allow;
                part.reason = Reason::Remembered { rule };
            }
        }
        if part.decision != Decision::Ask {
            part.always = None;
        }
        part
    }

    fn path_part(&self, kind: AccessKind, tool: &str, path: &str, state: &PermissionState) -> Part {
        let path = normalize_path(path);
        let (mut decision, rule) = self.configured(kind, tool, path);
        let mut reason = Reason::Rule { rule };
        if decision != Decision::Deny
            && let Some(pattern) = self.secrets.matching_pattern(path)
        {
            decision = Decision::Ask;
            reason = Reason::Secret {
                pattern: pattern.to_string(),
            };
        }
        if decision != Decision::Deny
            && kind == AccessKind::Write
            && let Some(folder) = control_folder(path)
        {
            decision = Decision::Ask;
            reason = Reason::ControlFolder {
                folder: folder.to_string(),
            };
        }
        let always = AlwaysRule {
            key: kind.rule_key().into(),
            pattern: exact_path_pattern(path),
        };
        let part = Part {
            kind,
            subject: path.to_string(),
            decision,
            reason,
            always: Some(always),
        };
        self.settle(tool, part, state)
    }

    fn command_line_parts(&self, access: &Access, state: &PermissionState, parts: &mut Vec<Part>) {
        let tool = access.tool.as_str();
        let line = access.target.as_str();
        let commands = match split_commands(line) {
            Ok(commands) => commands,
            Err(error) => {
                let (decision, rule) = self.configured(AccessKind::Execute, tool, line);
                let (decision, reason) = if decision == Decision::Deny {
                    (decision, Reason::Rule { rule })
                } else {
                    let error = error.to_string();
                    (Decision::Ask, Reason::Unparsed { error })
                };
                let always = AlwaysRule {
                    key: AccessKind::Execute.rule_key().into(),
                    pattern: exact_command_pattern(line),
                };
                let part = Part {
                    kind: AccessKind::Execute,
                    subject: line.to_string(),
                    decision,
                    reason,
                    always: Some(always),
                };
                parts.push(self.settle(tool, part, state));
                return;
            }
        };
        let hidden = hidden_code(line, &commands);
        if hidden.is_some()
            || commands.iter().any(|c| {
                c.opaque || c.reads_script_from_stdin() || c.words.iter().any(|w| w.dynamic)
            })
        {
            // Code a shell reads from a pipe or a here-document (`echo 'rm x' | bash`), or from
            // a quoted array subscript (`[[ -v 'a[$(rm x)]' ]]`), is not among the commands; a
            // deny still catches it in any literal text of the line.
            parts.extend(self.hidden_denies(tool, line, &commands));
        }
        let first = parts.len();
        for cmd in &commands {
            if !cmd.words.is_empty() || !cmd.assignments.is_empty() {
                parts.push(self.command_part(tool, cmd, state));
            }
            for redirect in &cmd.redirects {
                if let Some(file) = redirect.read_file() {
                    // `$(< .env)` reads a file with no command at all.
                    let part = self.path_part(AccessKind::Read, tool, file, state);
                    if part.decision != Decision::Allow {
                        parts.push(part);
                    }
                }
                let Some(file) = redirect.written_file() else {
                    continue;
                };
                let mut part = self.path_part(AccessKind::Write, tool, file, state);
                if redirect.target.dynamic && part.decision == Decision::Allow {
                    part.decision = Decision::Ask;
                    part.reason = Reason::ReachesOutside {
                        word: redirect.target.text.clone(),
                    };
                }
                parts.push(part);
            }
        }
        if let Some(found) = hidden {
            // What runs is not only what the words say: no built-in allow covers the line.
            for part in &mut parts[first..] {
                let built_in = matches!(&part.reason,
                    Reason::Rule { rule } if rule.source == Source::Default);
                if part.decision == Decision::Allow && built_in {
                    part.decision = Decision::Ask;
                    part.reason = Reason::HiddenCode {
                        found: found.clone(),
                    };
                    let pattern = if part.kind.is_path() {
                        exact_path_pattern(&part.subject)
                    } else {
                        exact_command_pattern(&part.subject)
                    };
                    part.always = Some(AlwaysRule {
                        key: part.kind.rule_key().to_string(),
                        pattern,
                    });
                    *part = self.settle(tool, part.clone(), state);
                }
            }
        }
    }

    fn command_part(&self, tool: &str, cmd: &SubCommand, state: &PermissionState) -> Part {
        let kind = AccessKind::Execute;
        let text = cmd.text();
        let (mut decision, rule) = self.configured(kind, tool, &text);
        let mut reason = Reason::Rule { rule };
        // `FOO=1 rm x` and `/bin/rm x` must not escape a deny on `rm *`; an allow must name the
        // assignment and the path.
        let mut variants = Vec::new();
        if !cmd.assignments.is_empty() && !cmd.words.is_empty() {
            variants.push(cmd.command_text());
        }
        if let Some(named) = cmd.text_with_program_name() {
            let bare = SubCommand {
                assignments: Vec::new(),
                ..cmd.clone()
            };
            variants.extend(bare.text_with_program_name());
            variants.push(named);
        }
        if decision != Decision::Deny {
            for variant in variants {
                let (bare, bare_rule) = self.configured(kind, tool, &variant);
                if bare == Decision::Deny {
                    decision = bare;
                    reason = Reason::Rule { rule: bare_rule };
                    break;
                }
            }
        }
        let mut exact = false;
        if decision != Decision::Deny {
            if cmd.opaque || cmd.program_is_dynamic() {
                decision = Decision::Ask;
                reason = Reason::Opaque;
                exact = true;
            } else if let Some(pattern) = self.secret_named_by(cmd) {
                decision = Decision::Ask;
                reason = Reason::Secret { pattern };
                exact = true;
            } else if decision == Decision::Allow
                && matches!(&reason, Reason::Rule { rule } if rule.source == Source::Default)
                && let Some(word) = reaches_outside(cmd)
            {
                decision = Decision::Ask;
                reason = Reason::ReachesOutside { word };
                exact = true;
            }
        }
        let always = AlwaysRule {
            key: kind.rule_key().into(),
            pattern: if exact {
                exact_command_pattern(&text)
            } else {
                prefix_pattern(cmd)
            },
        };
        let part = Part {
            kind,
            subject: text,
            decision,
            reason,
            always: Some(always),
        };
        self.settle(tool, part, state)
    }

    /// Deny parts for commands hidden in the literal text of a line: every word, and every line
    /// of the text, read as a command line of its own.
    fn hidden_denies(&self, tool: &str, line: &str, commands: &[SubCommand]) -> Vec<Part> {
        let decoded = decode_escapes(line);
        let texts = commands
            .iter()
            .flat_map(|c| c.words.iter().chain(&c.assignments))
            .map(|w| w.text.clone())
            .chain(line.lines().map(str::to_string))
            .chain(decoded.lines().map(str::to_string))
            .chain(
                split_commands(&decoded)
                    .unwrap_or_default()
                    .into_iter()
                    .flat_map(|c| c.words.into_iter().chain(c.assignments))
                    .map(|w| w.text),
            );
        let mut parts = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for text in texts {
            if !seen.insert(text.clone()) {
                continue;
            }
            let text = text.as_str();
            let Ok(inner) = split_commands(text) else {
                continue;
            };
            for cmd in inner.iter().filter(|c| !c.words.is_empty()) {
                let mut candidates = vec![cmd.text(), cmd.command_text()];
                candidates.extend(cmd.text_with_program_name());
                let denied = candidates
                    .iter()
                    .map(|t| self.configured(AccessKind::Execute, tool, t))
                    .find(|(d, _)| *d == Decision::Deny);
                if let Some((decision, rule)) = denied {
                    parts.push(Part {
                        kind: AccessKind::Execute,
                        subject: cmd.text(),
                        decision,
                        reason: Reason::Rule { rule },
                        always: None,
                    });
                }
            }
        }
        parts
    }

    /// The secret pattern matched by a file the command names in an argument, an assignment or an
    /// input redirection (`cat .env`, `--file=id_rsa`, `< secrets/.env`).
    fn secret_named_by(&self, cmd: &SubCommand) -> Option<String> {
        let words = cmd
            .words
            .iter()
            .skip(1)
            .chain(&cmd.assignments)
            .chain(cmd.redirects.iter().map(|r| &r.target));
        for word in words {
            for candidate in word_paths(word) {
                if let Some(p) = self.secrets.matching_pattern(candidate) {
                    return Some(p.to_string());
                }
            }
        }
        None
    }
}

/// Programs that evaluate their arguments as arithmetic (array subscripts in it run `$(…)`).
const ARITHMETIC_PROGRAMS: &[&str] = &["let", "declare", "typeset", "local", "readonly", "export"];

/// Operators of `[[ … ]]`, `test` and `[` whose operands bash evaluates as arithmetic (or, for
/// `-v`/`-R`, as a variable name whose subscript is arithmetic).
const ARITHMETIC_TESTS: &[&str] = &["-v", "-R", "-eq", "-ne", "-lt", "-le", "-gt", "-ge"];

/// Text that makes bash run code the words do not show: a command or process substitution, or
/// an arithmetic context, anywhere in the line, quoted or not (bash evaluates an array subscript
/// inside single quotes when it reaches an arithmetic context: `[[ -v 'a[$(cmd)]' ]]`). What was
/// found, or `None`.
pub fn hidden_code(line: &str, commands: &[SubCommand]) -> Option<String> {
    const MARKERS: &[&str] = &["$(", "`", "<(", ">(", "((", "$["];
    if let Some(marker) = MARKERS.iter().find(|m| line.contains(*m)) {
        return Some(marker.to_string());
    }
    let decoded = decode_escapes(line);
    if let Some(marker) = MARKERS.iter().find(|m| decoded.contains(*m)) {
        return Some(marker.to_string());
    }
    for cmd in commands {
        let Some(program) = cmd.words.first() else {
            continue;
        };
        let name = program.text.rsplit('/').next().unwrap_or(&program.text);
        if ARITHMETIC_PROGRAMS.contains(&name) {
            return Some(name.to_string());
        }
        if matches!(name, "[[" | "test" | "[")
            && let Some(op) = cmd
                .words
                .iter()
                .skip(1)
                .find(|w| ARITHMETIC_TESTS.contains(&w.text.as_str()))
        {
            return Some(format!("{name} {}", op.text));
        }
        let text = cmd.text();
        if let Some(marker) = MARKERS.iter().find(|m| text.contains(*m)) {
            return Some(marker.to_string());
        }
    }
    None
}

/// `line` with the escapes of ANSI-C quoting (`\x24`, `\044`, `\u0024`) decoded wherever they
/// are, so a deny finds `$'a[\x24(rm x)]'`'s command.
fn decode_escapes(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' || i + 1 >= chars.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let (radix, start, max) = match chars[i + 1] {
            'x' => (16, i + 2, 2),
            'u' => (16, i + 2, 4),
            'U' => (16, i + 2, 8),
            '0'..='7' => (8, i + 1, 3),
            _ => {
                out.push(c);
                i += 1;
                continue;
            }
        };
        let digits: String = chars[start..]
            .iter()
            .take(max)
            .take_while(|d| d.is_digit(radix))
            .collect();
        match u32::from_str_radix(&digits, radix)
            .ok()
            .and_then(char::from_u32)
        {
            Some(decoded) if !digits.is_empty() => {
                out.push(decoded);
                i = start + digits.chars().count();
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Deny over ask over allow; nothing to decide is an allow.
fn strictest(parts: &[Part]) -> Decision {
    parts
        .iter()
        .map(|p| p.decision)
        .max()
        .unwrap_or(Decision::Allow)
}

/// The texts of a word that may be paths: the word itself and what follows a `=` in it.
fn word_paths(word: &Word) -> impl Iterator<Item = &str> {
    let text = word.text.as_str();
    let value = text.split_once('=').map(|(_, v)| v);
    std::iter::once(text).chain(value).filter(|s| !s.is_empty())
}

const DEVICES: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];

/// The first argument of `cmd` that reaches outside the project or is an expansion.
fn reaches_outside(cmd: &SubCommand) -> Option<String> {
    let words = cmd.words.iter().skip(1).chain(
        cmd.redirects
            .iter()
            .filter(|r| r.read_file().is_some())
            .map(|r| &r.target),
    );
    for word in words {
        if word.dynamic {
            return Some(word.text.clone());
        }
        for path in word_paths(word) {
            let outside = (path.starts_with('/') && !DEVICES.contains(&path))
                || path.starts_with('~')
                || path.split('/').any(|seg| seg == "..");
            if outside {
                return Some(word.text.clone());
            }
        }
    }
    None
}

/// Commands whose subcommand (second word) says what they do: `npm test`, `git push`.
const TWO_WORD_COMMANDS: &[&str] = &[
    "git",
    "npm",
    "npx",
    "pnpm",
    "yarn",
    "bun",
    "bunx",
    "cargo",
    "go",
    "docker",
    "podman",
    "kubectl",
    "make",
    "just",
    "gh",
    "rustup",
    "deno",
    "dotnet",
    "mvn",
    "gradle",
    "composer",
    "bundle",
    "rake",
    "poetry",
    "uv",
    "pip",
    "pip3",
    "brew",
    "apt",
    "systemctl",
    "total5",
];

/// Programs that only read what they are given and that no option turns into one that runs a
/// command or writes a file: "always" may remember them with any arguments (`wc *`). Every other
/// single-word program (`sed`, `awk`, `find`, `xargs`, `env`, `tee`, `cp`, interpreters, and
/// anything not listed) is remembered by its exact text: `sed -n 1p a.txt` must not become
/// `sed *`, which covers `sed -n '1e touch X'`.
const WIDENABLE_PROGRAMS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "diff",
    "cmp",
    "comm",
    "stat",
    "du",
    "df",
    "echo",
    "printf",
    "pwd",
    "cut",
    "tr",
    "nl",
    "rev",
    "fold",
    "paste",
    "join",
    "column",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "which",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "base64",
    "od",
    "hexdump",
    "strings",
    "jq",
    "true",
    "false",
    "whoami",
    "id",
    "uname",
];

/// Subcommands of the [`TWO_WORD_COMMANDS`] that run any program, package or code the arguments
/// name (`npm exec`, `npx`, `cargo install`, `go run pkg@latest`, `docker run`, `git config`
/// and the git commands with options that run a program or write anywhere): remembered exactly.
const RUNS_WHAT_IT_IS_GIVEN: &[(&str, &[&str])] = &[
    (
        "npm",
        &[
            "exec", "x", "install", "i", "add", "init", "create", "explore", "config",
        ],
    ),
    (
        "pnpm",
        &[
            "exec", "dlx", "x", "install", "i", "add", "create", "init", "config",
        ],
    ),
    (
        "yarn",
        &["exec", "dlx", "add", "create", "init", "config", "node"],
    ),
    (
        "bun",
        &[
            "x", "exec", "add", "install", "i", "create", "init", "-e", "--eval",
        ],
    ),
    ("cargo", &["install", "run-script", "config", "script"]),
    ("go", &["run", "install", "get", "tool", "env"]),
    ("deno", &["run", "eval", "install", "x", "repl", "task"]),
    ("uv", &["run", "tool", "pip", "add"]),
    ("poetry", &["run", "add", "shell", "self"]),
    ("pip", &["install", "download"]),
    ("pip3", &["install", "download"]),
    ("bundle", &["exec", "add", "install"]),
    (
        "docker",
        &[
            "run",
            "exec",
            "create",
            "build",
            "compose",
            "cp",
            "container",
        ],
    ),
    (
        "podman",
        &[
            "run",
            "exec",
            "create",
            "build",
            "compose",
            "cp",
            "container",
        ],
    ),
    (
        "kubectl",
        &["exec", "run", "cp", "debug", "apply", "create", "plugin"],
    ),
    ("gh", &["extension", "api", "alias", "codespace"]),
    ("dotnet", &["tool", "exec", "add"]),
    ("mvn", &["exec:exec", "exec:java"]),
    ("composer", &["exec", "require", "run-script", "config"]),
    ("rustup", &["run", "toolchain"]),
    ("brew", &["install", "tap", "bundle", "sh"]),
    ("apt", &["install"]),
];

/// git's subcommands "always" may remember with any arguments: they change only the repository
/// and its work tree, and none of their options runs a program or writes elsewhere. Others
/// (`git log --output=…`, `git diff --ext-diff`, `git config`, `git rebase --exec`, `git clone`,
/// `git fetch --upload-pack`, `git -c …`) are remembered by their exact text.
const WIDENABLE_GIT: &[&str] = &[
    "add",
    "commit",
    "status",
    "branch",
    "switch",
    "checkout",
    "restore",
    "stash",
    "tag",
    "mv",
    "rm",
    "reset",
    "merge",
    "cherry-pick",
    "revert",
];

/// Options that make a build or package tool run a program, load configuration or write a file
/// the arguments name (`cargo test --config 'target.….runner=…'`, `npm test --script-shell=…`,
/// `make -f /tmp/x`, `git commit --template=…`): with one, the command is remembered exactly.
const RUNS_OR_WRITES_OPTIONS: &[&str] = &[
    "--config",
    "--script-shell",
    "--shell",
    "--exec",
    "--eval",
    "--upload-pack",
    "--receive-pack",
    "--output",
    "--template",
    "--rcfile",
    "--init-file",
    "--pre",
    "--file",
    "--makefile",
    "--directory",
    "--exec-path",
    "--git-dir",
    "--work-tree",
    "--ext-diff",
    "--gpg-sign",
    "--global",
    "--system",
    "--prefix",
    "--registry",
    "--userconfig",
    "--globalconfig",
    "--node-options",
    "--require",
    "--loader",
    "--import",
    "--manifest-path",
    "--target-dir",
    "--out-dir",
    "--artifact-dir",
];

/// How many leading words of `cmd` an "always" answer may keep, with ` *` after them (`npm test
/// *`, `ls *`); `None` when only the exact text is safe to remember: the program can run a command
/// or write a file its arguments name, an argument reaches outside the project, or the command
/// has leading assignments (`GIT_EXTERNAL_DIFF=… git diff`).
fn widenable_words(cmd: &SubCommand) -> Option<usize> {
    let program = cmd.words.first()?;
    if !cmd.assignments.is_empty()
        || cmd.opaque
        || cmd.program_is_dynamic()
        || program.text.contains('/')
        || reaches_outside(cmd).is_some()
    {
        return None;
    }
    let name = program.text.as_str();
    let risky_option = |w: &Word| {
        let text = w.text.as_str();
        let option = text.split('=').next().unwrap_or(text);
        RUNS_OR_WRITES_OPTIONS.contains(&option)
            // `make -f x`, `make -C dir`, `make SHELL=…`, `git -c k=v`.
            || matches!(option, "-c" | "-C" | "-f" | "-E" | "-I" | "-o")
            || (name == "make" && text.contains('='))
    };
    if WIDENABLE_PROGRAMS.contains(&name) {
        return Some(1);
    }
    if !TWO_WORD_COMMANDS.contains(&name) || name == "npx" || name == "bunx" {
        return None;
    }
    let take = match cmd.words.get(1) {
        // `git -C x push`: the subcommand is not where we expect.
        Some(w) if w.text.starts_with('-') || w.dynamic => return None,
        Some(_) => 2,
        None => 1,
    };
    let sub = cmd.words.get(1).map(|w| w.text.as_str()).unwrap_or("");
    if name == "git" && !WIDENABLE_GIT.contains(&sub) {
        return None;
    }
    if RUNS_WHAT_IT_IS_GIVEN
        .iter()
        .any(|(p, subs)| *p == name && subs.contains(&sub))
    {
        return None;
    }
    if cmd.words.iter().skip(1).any(risky_option) {
        return None;
    }
    Some(take)
}

/// The pattern an "always" answer remembers for a command: its program (and subcommand for tools
/// like `git` and `npm`) followed by ` *` where [`widenable_words`] allows it, else the exact
/// command.
fn prefix_pattern(cmd: &SubCommand) -> String {
    let Some(take) = widenable_words(cmd) else {
        return exact_command_pattern(&cmd.text());
    };
    let head: Vec<&str> = cmd
        .words
        .iter()
        .take(take)
        .map(|w| w.text.as_str())
        .collect();
    format!("{} *", exact_command_pattern(&head.join(" ")))
}
