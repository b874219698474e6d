//! The check over a whole project or some of its files (`totem check`, `project.check`), and the
//! project's own check settings in `.totem/settings.json`.

use std::path::{Path, PathBuf};

use super::{CheckConfig, Finding, ProjectContext, check_in_project};

/// Folders never walked: dependencies, data, client-side code, generated files.
const SKIPPED_DIRS: &[&str] = &[
    "node_modules",
    "public",
    "tmp",
    "logs",
    "databases",
    "bundles",
    "views",
    "private",
];
/// Largest file checked; bigger ones are generated or vendored.
const MAX_BYTES: u64 = 1 << 20;
/// Most files one check reads.
const MAX_FILES: usize = 5000;

/// The findings of one file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileFindings {
    /// Relative to the project root, with `/`.
    pub path: String,
    /// What the check found in it, by line.
    pub findings: Vec<Finding>,
}

/// What [`check_project`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectReport {
    /// Files with findings, in path order.
    pub files: Vec<FileFindings>,
    /// How many files were read.
    pub files_checked: usize,
    /// What could not be done (a missing path, an unreadable file, bad project settings).
    pub problems: Vec<String>,
}

impl CheckConfig {
    /// These settings with the project's own `totaljs.check` section of `.totem/settings.json`
    /// over them: its `disabled` and `enabled` ids are added, its `severity` wins. The section can
    /// only change what the check reports, so it needs no trust. A section that does not parse, or
    /// names an unknown rule, is left out and reported in the second value.
    pub fn with_project(&self, root: &Path) -> (CheckConfig, Option<String>) {
        let path = root.join(".totem/settings.json");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (self.clone(), None),
            Err(e) => {
                return (
                    self.clone(),
                    Some(format!("cannot read .totem/settings.json: {e}")),
                );
            }
        };
        let parsed = serde_json::from_str::<serde_json::Value>(&text)
            .map_err(|e| e.to_string())
            .and_then(|v| match v.get("totaljs").and_then(|t| t.get("check")) {
                Some(c) => serde_json::from_value::<CheckConfig>(c.clone())
                    .map(Some)
                    .map_err(|e| e.to_string()),
                None => Ok(None),
            })
            .and_then(|c| match c {
                Some(c) => c.validate().map(|()| Some(c)).map_err(|e| e.to_string()),
                None => Ok(None),
            });
        match parsed {
            Ok(None) => (self.clone(), None),
            Ok(Some(project)) => {
                let mut out = self.clone();
                out.disabled.extend(project.disabled);
                out.enabled.extend(project.enabled);
                out.severity.extend(project.severity);
                (out, None)
            }
            Err(e) => (
                self.clone(),
                Some(format!(
                    "the project's .totem/settings.json has an invalid totaljs.check section ({e}); it was left out"
                )),
            ),
        }
    }
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 8 || out.len() >= MAX_FILES {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            // `plugins/x/public/` is as client-side as `public/`.
            if !SKIPPED_DIRS.contains(&name.as_ref()) {
                walk(&path, depth + 1, out);
            }
        } else if kind.is_file() && out.len() < MAX_FILES {
            out.push(path);
        }
    }
}

/// Runs the check on `paths` (files or folders, relative to `root` or absolute inside it; none
/// means the whole project) with the project's context and settings. Files no rule covers are
/// skipped silently; missing paths and unreadable files are reported in `problems`.
pub fn check_project(root: &Path, paths: &[PathBuf], cfg: &CheckConfig) -> ProjectReport {
    let mut report = ProjectReport::default();
    let (cfg, problem) = cfg.with_project(root);
    report.problems.extend(problem);
    let mut files = Vec::new();
    let root = &std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let wanted: Vec<PathBuf> = if paths.is_empty() {
        vec![root.to_path_buf()]
    } else {
        paths.iter().map(|p| root.join(p)).collect()
    };
    for path in wanted {
        let Ok(path) = std::fs::canonicalize(&path) else {
            report
                .problems
                .push(format!("{} does not exist", path.display()));
            continue;
        };
        if !path.starts_with(root) {
            report.problems.push(format!(
                "{} is outside the project {}",
                path.display(),
                root.display()
            ));
        } else if path.is_dir() {
            walk(&path, 0, &mut files);
        } else {
            files.push(path);
        }
    }
    files.sort();
    files.dedup();
    let ctx = ProjectContext::scan(root);
    for file in files {
        let rel = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        if !super::file::classify(&rel).is_checked() {
            continue;
        }
        let text = match std::fs::metadata(&file) {
            Ok(m) if m.len() > MAX_BYTES => continue,
            _ => std::fs::read(&file),
        };
        let text = match text {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                report.problems.push(format!("cannot read {rel}: {e}"));
                continue;
            }
        };
        report.files_checked += 1;
        let findings = check_in_project(&rel, &text, &cfg, &ctx);
        if !findings.is_empty() {
            report.files.push(FileFindings {
                path: rel,
                findings,
            });
        }
    }
    report
}
