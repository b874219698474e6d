//! The conventions check: runs the rules of `rules` on one file that a tool wrote into a Total.js 5
//! project and turns what they find into short lines the model can act on.
//!
//! A rule knows which files it applies to (by path relative to the project root), so calling
//! [`check`] on any file is safe: files no rule covers (`public/`, `node_modules/`, images…) give no
//! findings.

mod file;
mod project;
pub(crate) mod report;
pub(crate) mod rules;
pub(crate) mod syntax;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use project::{FileFindings, ProjectReport, check_project};
pub use report::{BREAK_MARKS, EditFindings, format_edit, format_finding};
pub use rules::{
    Rule,
    routes::{describe_routes, fix_action_handlers, route_summary},
    rules,
};

/// How much a finding matters. The model is told all of them; clients may show errors louder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The code will not work on Total.js 5 (crashes, 400s, silently ignored settings).
    Error,
    /// It works, but goes against the framework's conventions in a way that tends to cause bugs.
    Warning,
    /// A style or habit worth fixing when the file is touched anyway.
    Info,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        })
    }
}

/// How sure we are that the rule describes Total.js 5 (TOTALJS.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Confidence {
    /// Verified in the framework5 source or in a live run.
    High,
    /// An official convention that the framework does not enforce.
    Medium,
    /// A style preference.
    Low,
}

/// One problem found in a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// 1-based line the problem is on (1 for whole-file problems).
    pub line: usize,
    /// The rule's stable id, e.g. `handler-this`; the key to switch it off in settings.
    pub rule: &'static str,
    /// An error breaks at run time; the rest are notes.
    pub severity: Severity,
    /// What is wrong and how to fix it, on one line.
    pub message: String,
}

/// Settings of the conventions check. Every field is optional; unknown fields are rejected so a
/// typo in the settings file is reported instead of silently ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CheckConfig {
    /// Rule ids to switch off.
    #[serde(default, skip_serializing_if = "HashSet::is_empty")]
    pub disabled: HashSet<String>,
    /// Rule ids that are off by default (see [`Rule::default_on`]) to switch on.
    #[serde(default, skip_serializing_if = "HashSet::is_empty")]
    pub enabled: HashSet<String>,
    /// Severity to report a rule's findings with, instead of its default.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub severity: HashMap<String, Severity>,
}

/// A settings problem found by [`CheckConfig::validate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckConfigError {
    /// Settings name a rule the check does not have.
    #[error(
        "unknown Total.js check rule {id:?} in settings ({field}); known rules: {known}",
        known = rules().map(|r| r.id).collect::<Vec<_>>().join(", ")
    )]
    UnknownRule {
        /// The name as written.
        id: String,
        /// The settings field it was in.
        field: &'static str,
    },
}

impl CheckConfig {
    /// Checks that every rule id the settings name exists, so a misspelt id is reported when the
    /// settings are loaded rather than silently doing nothing.
    pub fn validate(&self) -> Result<(), CheckConfigError> {
        let known = |id: &str| rules().any(|r| r.id == id);
        let named = [
            ("disabled", self.disabled.iter().collect::<Vec<_>>()),
            ("enabled", self.enabled.iter().collect()),
            ("severity", self.severity.keys().collect()),
        ];
        for (field, ids) in named {
            let mut ids = ids;
            ids.sort();
            if let Some(id) = ids.into_iter().find(|id| !known(id)) {
                return Err(CheckConfigError::UnknownRule {
                    id: id.clone(),
                    field,
                });
            }
        }
        Ok(())
    }

    /// Whether `rule` runs under these settings.
    pub fn is_on(&self, rule: &Rule) -> bool {
        if self.disabled.contains(rule.id) {
            return false;
        }
        rule.default_on || self.enabled.contains(rule.id)
    }

    /// The severity `rule`'s findings are reported with.
    pub fn severity_of(&self, rule: &Rule) -> Severity {
        self.severity.get(rule.id).copied().unwrap_or(rule.severity)
    }
}

/// What the check knows about the rest of the project. Rules that need it stay silent (or
/// generous) when it is unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectContext {
    /// Whether an `AUTH(...)` delegate is defined somewhere the framework loads it.
    pub has_auth: Option<bool>,
    /// Names the project makes global itself (`global.PREF = MEMORIZE(...)` in `definitions/`,
    /// top-level names of `definitions/` and `modules/`): never reported as Total.js 4 globals.
    pub globals: HashSet<String>,
    /// JSON schemas the project defines (`NEWSCHEMA('@Item', 'name:String')`,
    /// `jsonschemas/Item.json`), by name, with the files that define them (relative, with `/`).
    pub json_schemas: HashMap<String, Vec<String>>,
    /// Middleware names the project defines with `MIDDLEWARE('name', fn)`; None when unknown (not
    /// scanned, or a name is computed).
    pub middleware: Option<HashSet<String>>,
    /// The project's `views/`; None when not scanned.
    pub views: Option<Views>,
    /// Folders in `plugins/` without an `index.js` (the boot crashes on them).
    pub plugins_without_index: HashSet<String>,
    /// The folder is no app of its own (a library for Total.js 5 apps, or not detected as
    /// Total.js): the app's boot file and its total5 dependency are not checked.
    pub not_app: bool,
}

/// What the check knows of the project's `views/` folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Views {
    /// Whether `views/layout.html` exists.
    pub has_layout: bool,
    /// View names (`index`, `admin/users`) found.
    pub names: HashSet<String>,
    /// Views that set their own layout (`@{layout('')}`).
    pub set_layout: HashSet<String>,
}

/// Folders the framework auto-loads, scanned for `AUTH()` and the project's own globals.
const LOADED_FOLDERS: &[&str] = &[
    "definitions",
    "modules",
    "extensions",
    "middleware",
    "actions",
    "schemas",
    "models",
    "controllers",
    "plugins",
];

impl ProjectContext {
    /// Reads the project under `root` for the facts the rules need. Unreadable files are skipped.
    pub fn scan(root: &Path) -> ProjectContext {
        let mut files = vec![root.join("index.js")];
        for folder in LOADED_FOLDERS {
            collect_js(&root.join(folder), 0, &mut files);
        }
        let mut has_auth = false;
        let mut globals = HashSet::new();
        let mut json_schemas: HashMap<String, Vec<String>> = HashMap::new();
        let mut middleware = Some(HashSet::new());
        for path in &files {
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            let rel = path
                .strip_prefix(root)
                .unwrap_or(path)
                .to_string_lossy()
                .replace('\\', "/");
            let kind = file::classify(&rel).kind;
            let tokens = crate::js::lex(&text).tokens;
            has_auth |= syntax::defines_auth(&tokens);
            for (name, _) in rules::load::json_schemas(&tokens) {
                json_schemas
                    .entry(name.to_string())
                    .or_default()
                    .push(rel.clone());
            }
            let (names, dynamic) = rules::load::middleware(&tokens);
            if dynamic {
                middleware = None;
            }
            if let Some(m) = middleware.as_mut() {
                m.extend(names.into_iter().map(str::to_string));
            }
            let top_level = matches!(kind, file::Kind::Definition | file::Kind::Module);
            globals.extend(
                syntax::defined_globals(&tokens, top_level)
                    .into_iter()
                    .map(str::to_string),
            );
        }
        for name in list_files(&root.join("jsonschemas"), &["json", "txt"]) {
            let stem = name.rsplit_once('.').map_or(name.as_str(), |(s, _)| s);
            json_schemas
                .entry(stem.to_string())
                .or_default()
                .push(format!("jsonschemas/{name}"));
        }
        let mut views = Views {
            has_layout: root.join("views/layout.html").is_file(),
            ..Views::default()
        };
        for name in list_files(&root.join("views"), &["html"]) {
            let view = name.trim_end_matches(".html").to_string();
            let sets = std::fs::read_to_string(root.join("views").join(&name))
                .is_ok_and(|t| t.contains("layout("));
            if sets {
                views.set_layout.insert(view.clone());
            }
            views.names.insert(view);
        }
        let mut plugins_without_index = HashSet::new();
        if let Ok(entries) = std::fs::read_dir(root.join("plugins")) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                // The framework skips `-bk`/`_bk` folders and `.DS_Store`.
                let skipped = name.contains("-bk")
                    || name.contains("_bk")
                    || name.to_lowercase().contains("ds_store")
                    || name.starts_with('.');
                if !skipped && entry.path().is_dir() && !entry.path().join("index.js").exists() {
                    plugins_without_index.insert(name);
                }
            }
        }
        ProjectContext {
            has_auth: Some(has_auth),
            globals,
            json_schemas,
            middleware,
            views: Some(views),
            plugins_without_index,
            not_app: matches!(
                crate::detect(root),
                crate::Project::Library { .. } | crate::Project::Other { .. }
            ),
        }
    }
}

/// Files under `dir` (up to 4 folders deep, at most 2,000) whose extension is one of `exts`, as
/// paths relative to `dir` with `/`.
fn list_files(dir: &Path, exts: &[&str]) -> Vec<String> {
    fn walk(dir: &Path, prefix: &str, depth: usize, exts: &[&str], out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            if out.len() >= 2000 {
                return;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let rel = format!("{prefix}{name}");
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && depth < 4 {
                walk(&entry.path(), &format!("{rel}/"), depth + 1, exts, out);
            } else if kind.is_file()
                && name
                    .rsplit_once('.')
                    .is_some_and(|(_, e)| exts.contains(&e))
            {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", 0, exts, &mut out);
    out
}

/// Largest file the context scan reads; bigger ones are generated or vendored.
const SCAN_MAX_BYTES: u64 = 1 << 20;

fn collect_js(dir: &Path, depth: usize, out: &mut Vec<std::path::PathBuf>) {
    if depth > 4 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "node_modules" || name == "public" {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            collect_js(&path, depth + 1, out);
        } else if name.ends_with(".js") && meta.len() <= SCAN_MAX_BYTES {
            out.push(path);
        }
    }
}

/// Checks one file against the Total.js 5 conventions, without knowledge of the rest of the
/// project. `path` is relative to the project root (`controllers/users.js`), with `/` or `\`.
pub fn check(path: &str, content: &str, cfg: &CheckConfig) -> Vec<Finding> {
    check_in_project(path, content, cfg, &ProjectContext::default())
}

/// Like [`check`], with facts about the rest of the project (see [`ProjectContext::scan`]).
pub fn check_in_project(
    path: &str,
    content: &str,
    cfg: &CheckConfig,
    ctx: &ProjectContext,
) -> Vec<Finding> {
    let file = file::classify(path);
    if !file.is_checked() {
        return Vec::new();
    }
    let source = rules::Source::new(file, path, content);
    let mut findings = Vec::new();
    for def in rules::DEFS {
        if !cfg.is_on(&def.rule) || !(def.applies)(&file) {
            continue;
        }
        let severity = cfg.severity_of(&def.rule);
        for (line, message) in (def.run)(&source, ctx) {
            findings.push(Finding {
                line,
                rule: def.rule.id,
                severity,
                message,
            });
        }
    }
    let ignores = report::Ignores::parse(content);
    findings.retain(|f| !ignores.silences(f));
    findings.sort_by(|a, b| a.line.cmp(&b.line).then(a.rule.cmp(b.rule)));
    findings.dedup();
    findings
}

/// Checks a file a tool just changed and splits the findings by the edit policy (module docs of
/// `report`): the edit's own findings are reported, the ones that were already in the file are
/// only counted. `before` is the file's text before the edit, None when the edit created it.
pub fn check_edit(
    path: &str,
    before: Option<&str>,
    after: &str,
    cfg: &CheckConfig,
    ctx: &ProjectContext,
) -> EditFindings {
    let after_findings = check_in_project(path, after, cfg, ctx);
    let before_findings = before.map(|b| check_in_project(path, b, cfg, ctx));
    let mut out = report::split(
        before.zip(before_findings.as_deref()),
        after,
        after_findings,
    );
    if let Some(before) = before
        && file::classify(path).is_js()
    {
        out.removed_routes = crate::boot::routes_removed(before, after);
        out.removed_actions = crate::boot::actions_removed(before, after);
        out.removed_declarations = crate::boot::declarations_removed(before, after);
        out.emptied = !before.trim().is_empty() && after.trim().is_empty();
    }
    out
}

/// Renders findings as text: a header counting errors and notes, then one
/// `file:line severity [rule] message` line per finding. Empty when there are none. For the result
/// of an edit, use [`check_edit`] and [`format_edit`], which keep to the edit's own lines.
pub fn format_findings(path: &str, findings: &[Finding]) -> String {
    if findings.is_empty() {
        return String::new();
    }
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    let mut out = format!(
        "Total.js 5 conventions check: {}.\n",
        report::counts(
            count(Severity::Error),
            count(Severity::Warning),
            count(Severity::Info)
        )
    );
    for f in findings {
        out.push_str(&format_finding(path, f));
        out.push('\n');
    }
    out
}
