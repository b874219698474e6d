//! The fixture corpus (`totaljs/tests/corpus/`): small projects that reproduce what real apps do,
//! and how the check scores on them. Shared by the corpus test and `bench-totaljs`.
//!
//! `corpus/v5/<set>/` reproduce patterns of official Total.js 5 apps; they must give no error.
//! `corpus/v4/<set>/` hold Total.js 4 code the check must find. `corpus/broken/<case>/` are
//! Total.js 5 apps with one real mistake each, verified live on total5 0.0.14 (`broken.txt`: how
//! it breaks, `crash`, `hang` or `silent`, and what was seen); `bench-totaljs` boots them. A finding is expected where a
//! line ends with `// expect: rule-id[, rule-id]`, or where the set's `expected.txt` has a
//! `path:line rule-id` line (for files without comments: config, package.json).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use totem_totaljs::{CheckConfig, Finding, Severity, check_project};

/// (path, line, rule).
pub type Key = (String, usize, String);

/// One fixture set: a small project.
pub struct Set {
    /// `v5` or `v4`.
    pub version: String,
    pub name: String,
    pub root: PathBuf,
}

/// The sets under `corpus`, v5 first, then v4 and broken, by name.
pub fn sets(corpus: &Path) -> Vec<Set> {
    let mut out = Vec::new();
    for version in ["v5", "v4", "broken"] {
        let Ok(entries) = std::fs::read_dir(corpus.join(version)) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            out.push(Set {
                version: version.to_string(),
                root: corpus.join(version).join(&name),
                name,
            });
        }
    }
    out
}

fn files(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            files(&path, root, out);
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, text));
        }
    }
}

/// The findings the set's annotations expect.
pub fn expected(set: &Set) -> BTreeSet<Key> {
    let mut out = BTreeSet::new();
    let mut all = Vec::new();
    files(&set.root, &set.root, &mut all);
    for (rel, text) in &all {
        if rel == "broken.txt" {
            continue;
        }
        if rel == "expected.txt" {
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let mut parts = line.split_whitespace();
                let (Some(at), Some(rule)) = (parts.next(), parts.next()) else {
                    continue;
                };
                if let Some((path, n)) = at.rsplit_once(':')
                    && let Ok(n) = n.parse()
                {
                    out.insert((path.to_string(), n, rule.to_string()));
                }
            }
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if let Some((_, rules)) = line.split_once("// expect: ") {
                for rule in rules.split(',').map(str::trim).filter(|r| !r.is_empty()) {
                    out.insert((rel.clone(), n + 1, rule.to_string()));
                }
            }
        }
    }
    out
}

/// What the check finds in the set, run as `totem check` runs it.
pub fn findings(set: &Set) -> Vec<(String, Finding)> {
    check_project(&set.root, &[], &CheckConfig::default())
        .files
        .into_iter()
        .flat_map(|f| {
            let path = f.path;
            f.findings.into_iter().map(move |x| (path.clone(), x))
        })
        .collect()
}

/// True and false positives and false negatives of one rule.
#[derive(Debug, Default, Clone, Copy)]
pub struct Score {
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
}

impl Score {
    pub fn precision(&self) -> Option<f64> {
        let found = self.tp + self.fp;
        (found > 0).then(|| self.tp as f64 / found as f64)
    }

    pub fn recall(&self) -> Option<f64> {
        let wanted = self.tp + self.fn_;
        (wanted > 0).then(|| self.tp as f64 / wanted as f64)
    }
}

/// The corpus's score per rule, with the unexpected and the missed findings.
pub struct Report {
    pub by_rule: BTreeMap<String, Score>,
    pub unexpected: Vec<(String, Key, Severity)>,
    pub missed: Vec<(String, Key)>,
    /// Errors in the v5 sets, which must be none.
    pub v5_errors: Vec<(String, Key)>,
    /// (set, findings, errors) per set.
    pub per_set: Vec<(String, usize, usize)>,
}

pub fn score(corpus: &Path) -> Report {
    let mut report = Report {
        by_rule: BTreeMap::new(),
        unexpected: Vec::new(),
        missed: Vec::new(),
        v5_errors: Vec::new(),
        per_set: Vec::new(),
    };
    for set in sets(corpus) {
        let label = format!("{}/{}", set.version, set.name);
        let mut wanted = expected(&set);
        let found = findings(&set);
        let errors = found
            .iter()
            .filter(|(_, f)| f.severity == Severity::Error)
            .count();
        report.per_set.push((label.clone(), found.len(), errors));
        for (path, f) in found {
            let key = (path, f.line, f.rule.to_string());
            let score = report.by_rule.entry(f.rule.to_string()).or_default();
            if set.version == "v5" && f.severity == Severity::Error {
                report.v5_errors.push((label.clone(), key.clone()));
            }
            if wanted.remove(&key) {
                score.tp += 1;
            } else {
                score.fp += 1;
                report.unexpected.push((label.clone(), key, f.severity));
            }
        }
        for key in wanted {
            report.by_rule.entry(key.2.clone()).or_default().fn_ += 1;
            report.missed.push((label.clone(), key));
        }
    }
    report
}
