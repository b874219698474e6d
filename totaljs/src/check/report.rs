//! What the model is told after an edit, and inline `totem-ignore` comments.
//!
//! **The edit policy.** A tool result must never push the model to rewrite code it did not touch:
//! a working app "fixed" on the word of a check is a broken app. So after an edit, [`check_edit`]
//! keeps the findings on the lines the edit changed, plus the findings it caused elsewhere (a
//! finding whose rule and message the file did not have before, e.g. `index.js` no longer loading
//! the framework); every other finding existed before the edit and is only counted, as "N findings
//! elsewhere in this file existed before your changes". Only errors (rules verified to break at run
//! time) ask the model to fix anything, and only in its own change.
//!
//! **Inline ignores.** `// totem-ignore rule-id[, rule-id]` (or `# totem-ignore ...` in `config`)
//! at the end of a line silences those rules on that line; alone on its line, on the next line.
//! `totem-ignore-file rule-id` silences them in the whole file. Without ids, every rule.

use std::collections::{HashMap, HashSet};

use super::{Finding, Severity};

/// Rules an inline comment silences.
enum Scope {
    All,
    Rules(HashSet<String>),
}

impl Scope {
    fn covers(&self, rule: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Rules(ids) => ids.contains(rule),
        }
    }
}

/// The `totem-ignore` comments of a file.
#[derive(Default)]
pub(crate) struct Ignores {
    file: Vec<Scope>,
    lines: HashMap<usize, Vec<Scope>>,
}

impl Ignores {
    pub fn parse(text: &str) -> Ignores {
        let mut out = Ignores::default();
        for (n, raw) in text.lines().enumerate() {
            let Some(at) = raw.find("totem-ignore") else {
                continue;
            };
            let before = &raw[..at];
            let Some(marker) = ["//", "/*", "#"]
                .iter()
                .filter_map(|m| before.rfind(m))
                .max()
            else {
                continue;
            };
            let mut rest = &raw[at + "totem-ignore".len()..];
            let whole_file = rest.starts_with("-file");
            if whole_file {
                rest = &rest["-file".len()..];
            } else if rest.starts_with('-') {
                continue;
            }
            let ids: HashSet<String> = rest
                .split([',', ' ', '\t'])
                .filter(|w| !w.is_empty())
                .take_while(|w| {
                    w.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                        && *w != "--"
                })
                .map(str::to_string)
                .collect();
            let scope = if ids.is_empty() {
                Scope::All
            } else {
                Scope::Rules(ids)
            };
            let line = n + 1;
            if whole_file {
                out.file.push(scope);
            } else if raw[..marker].trim().is_empty() {
                out.lines.entry(line + 1).or_default().push(scope);
            } else {
                out.lines.entry(line).or_default().push(scope);
            }
        }
        out
    }

    pub fn silences(&self, f: &Finding) -> bool {
        self.file.iter().any(|s| s.covers(f.rule))
            || self
                .lines
                .get(&f.line)
                .is_some_and(|v| v.iter().any(|s| s.covers(f.rule)))
    }
}

/// The findings of one edit, split by the edit policy (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EditFindings {
    /// Findings on the lines the edit changed, and the ones it caused elsewhere in the file.
    pub edit: Vec<Finding>,
    /// How many other findings the file has; all of them were there before the edit.
    pub before: usize,
    /// Routes the file declared before the edit and no longer does (`GET /api/items/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_routes: Vec<String>,
    /// Top-level names the file declared before the edit that it no longer declares but still
    /// uses, with the line of each declaration before (`PRODUCTS`, 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_declarations: Vec<(String, usize)>,
    /// Actions the file declared before the edit and no longer does (`Products|list`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_actions: Vec<String>,
    /// The edit left the file empty (or only whitespace) where it had code.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub emptied: bool,
}

/// 1-based lines of `after` that the edit from `before` inserted or changed. A pure deletion marks
/// the line that now stands where the deleted lines were.
pub(crate) fn changed_lines(before: &str, after: &str) -> HashSet<usize> {
    let diff = similar::TextDiff::from_lines(before, after);
    let mut out = HashSet::new();
    for op in diff.ops() {
        match op.tag() {
            similar::DiffTag::Equal => {}
            similar::DiffTag::Delete => {
                out.insert(op.new_range().start + 1);
            }
            similar::DiffTag::Insert | similar::DiffTag::Replace => {
                out.extend(op.new_range().map(|i| i + 1));
            }
        }
    }
    out
}

/// Splits `after_findings` (the file after the edit) into the edit's and the ones that existed
/// before it. `before` is the file's text before the edit (None for a new file), and
/// `before_findings` the check's findings on it.
pub(crate) fn split(
    before: Option<(&str, &[Finding])>,
    after: &str,
    after_findings: Vec<Finding>,
) -> EditFindings {
    let Some((before_text, before_findings)) = before else {
        return EditFindings {
            edit: after_findings,
            ..EditFindings::default()
        };
    };
    let changed = changed_lines(before_text, after);
    let mut old: HashMap<(&str, String), usize> = HashMap::new();
    for f in before_findings {
        *old.entry((f.rule, f.message.clone())).or_default() += 1;
    }
    let mut out = EditFindings::default();
    for f in after_findings {
        let existed = old
            .get_mut(&(f.rule, f.message.clone()))
            .filter(|n| **n > 0)
            .map(|n| *n -= 1)
            .is_some();
        if changed.contains(&f.line) || !existed {
            out.edit.push(f);
        } else {
            out.before += 1;
        }
    }
    out
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// The word a finding's severity is shown with: errors are errors, the rest are notes the model
/// may leave alone.
fn label(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// One finding as `path:line severity [rule] message`.
pub fn format_finding(path: &str, f: &Finding) -> String {
    format!(
        "{}:{} {} [{}] {}",
        path.replace('\\', "/"),
        f.line,
        label(f.severity),
        f.rule,
        f.message
    )
}

/// How [`format_edit`] starts the lines that say an edit broke the app (emptied the file, removed
/// a route, added an error): a change with one of them is not a place to stop.
pub const BREAK_MARKS: &[&str] = &[
    "This edit emptied the file.",
    "This edit removed ",
    "Fix the errors in your change",
];

/// "This edit removed a route that no longer exists: GET /a/. Put it back unless …", empty for none.
fn removed(one: &str, many: &str, names: &[String]) -> String {
    let (what, s, it) = match names.len() {
        0 => return String::new(),
        1 => (one, "s", "it"),
        _ => (many, "", "them"),
    };
    format!(
        "This edit removed {what} that no longer exist{s}: {}. Put {it} back unless the task is to remove {it}.\n",
        names.join(", ")
    )
}

/// Renders the findings of an edit as text to append to the tool result (empty when there is
/// nothing to say): the edit's own findings, one per line, then one line counting the rest.
pub fn format_edit(path: &str, findings: &EditFindings) -> String {
    let mut out = String::new();
    let edit = &findings.edit;
    if findings.emptied {
        out.push_str("This edit emptied the file.\n");
    }
    out.push_str(&removed("a route", "routes", &findings.removed_routes));
    out.push_str(&removed("an action", "actions", &findings.removed_actions));
    for (name, line) in &findings.removed_declarations {
        out.push_str(&format!(
            "This edit removed the declaration of {name} (line {line} before), which the file still uses: it fails when it runs. Put the declaration back.\n"
        ));
    }
    if !edit.is_empty() {
        let count = |s: Severity| edit.iter().filter(|f| f.severity == s).count();
        let errors = count(Severity::Error);
        let advice = if errors > 0 {
            "Fix the errors in your change; they break the app at run time."
        } else {
            "No errors among them; change them only if it helps the task."
        };
        out.push_str(&format!(
            "Total.js 5 conventions check of this edit: {}. {advice}\n",
            counts(errors, count(Severity::Warning), count(Severity::Info))
        ));
        for f in edit {
            out.push_str(&format_finding(path, f));
            out.push('\n');
        }
    }
    if findings.before > 0 {
        out.push_str(&format!(
            "{} elsewhere in this file existed before your changes; leave {} unless the user asks.\n",
            if findings.before == 1 {
                "1 finding".to_string()
            } else {
                format!("{} findings", findings.before)
            },
            if findings.before == 1 { "it" } else { "them" }
        ));
    }
    out
}

/// `1 error, 2 warnings, 1 note`, leaving out the kinds there are none of (`0 errors` when
/// there are none at all).
pub(crate) fn counts(errors: usize, warnings: usize, notes: usize) -> String {
    let mut parts = vec![plural(errors, "error")];
    if warnings > 0 {
        parts.push(plural(warnings, "warning"));
    }
    if notes > 0 {
        parts.push(plural(notes, "note"));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_lines_cover_inserts_replacements_and_deletions() {
        let before = "a\nb\nc\nd\n";
        assert_eq!(changed_lines(before, "a\nB\nc\nd\n"), HashSet::from([2]));
        assert_eq!(
            changed_lines(before, "a\nb\nx\ny\nc\nd\n"),
            HashSet::from([3, 4])
        );
        assert_eq!(changed_lines(before, "a\nc\nd\n"), HashSet::from([2]));
    }

    #[test]
    fn ignore_comments_cover_their_line_the_next_line_or_the_file() {
        let text = "a(); // totem-ignore v4-global\n// totem-ignore handler-this, no-express -- reason\nb();\n# totem-ignore-file indent-tabs\n";
        let ig = Ignores::parse(text);
        let f = |line, rule| Finding {
            line,
            rule,
            severity: Severity::Error,
            message: String::new(),
        };
        assert!(ig.silences(&f(1, "v4-global")));
        assert!(!ig.silences(&f(1, "handler-this")));
        assert!(ig.silences(&f(3, "handler-this")));
        assert!(ig.silences(&f(3, "no-express")));
        assert!(!ig.silences(&f(2, "handler-this")));
        assert!(ig.silences(&f(9, "indent-tabs")));
        assert!(Ignores::parse("x(); // totem-ignore\n").silences(&f(1, "anything")));
        assert!(!Ignores::parse("var s = 'totem-ignore';\n").silences(&f(1, "anything")));
    }
}
