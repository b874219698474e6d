//! A JavaScript syntax check of a file a small model read or changed: `node --check` parses the
//! file without running it, and the model is told the line of the first syntax error. The 1.5B,
//! told the app crashed with a SyntaxError, edited line 4 of a 13-line controller three times
//! while the missing `)` was on line 3.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::time::Duration;

/// How long the parse may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The files a run had checked (path → the hash of the content node parsed, and what it found):
/// a small model reads the same file again and again, and node takes tens of milliseconds a file
/// to start.
#[derive(Default)]
pub(super) struct Checked {
    files: HashMap<String, (u64, Option<String>)>,
    /// How many times node ran.
    runs: usize,
}

impl Checked {
    /// [`node_check`]'s finding for `rel`, node run only when the file's content is not the one
    /// last checked.
    pub(super) async fn note(&mut self, root: &Path, rel: &str) -> Option<String> {
        if !is_javascript(rel) {
            return None;
        }
        let Ok(content) = tokio::fs::read(root.join(rel)).await else {
            self.runs += 1;
            return node_check(root, rel).await;
        };
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        content.hash(&mut hasher);
        let hash = hasher.finish();
        if let Some((checked, found)) = self.files.get(rel)
            && *checked == hash
        {
            return found.clone();
        }
        self.runs += 1;
        let found = node_check(root, rel).await;
        self.files.insert(rel.to_owned(), (hash, found.clone()));
        found
    }
}

fn is_javascript(rel: &str) -> bool {
    Path::new(rel)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|ext| matches!(ext, "js" | "cjs" | "mjs"))
}

/// What `node --check` finds wrong in `rel` (a path inside `root`), as a sentence to add to a
/// tool's result; `None` when the file parses, is not JavaScript, or node is missing. Node gets a
/// clean environment (no `NODE_OPTIONS` from anywhere).
pub(super) async fn node_check(root: &Path, rel: &str) -> Option<String> {
    if !is_javascript(rel) {
        return None;
    }
    let node = crate::boot::find_node()?;
    let run = tokio::process::Command::new(node)
        .arg("--check")
        .arg(root.join(rel))
        .current_dir(root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(CHECK_TIMEOUT, run).await.ok()?.ok()?;
    if out.status.success() {
        return None;
    }
    let said = String::from_utf8_lossy(&out.stderr);
    finding(&said, rel)
}

/// Whether `content` parses as the JavaScript file `rel`; true when nothing can tell (see
/// [`check_content`]).
pub(super) async fn parses(rel: &str, content: &str) -> bool {
    check_content(rel, content).await.is_none()
}

/// [`node_check`]'s finding for `content` as the file `rel` (written to a folder of its own for
/// node to read, named as `rel` in the finding); `None` when it parses, or when node is missing
/// or the folder cannot be made, as nothing can tell.
pub(super) async fn check_content(rel: &str, content: &str) -> Option<String> {
    let name = Path::new(rel)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("file.js");
    let dir = tempfile::tempdir().ok()?;
    tokio::fs::write(dir.path().join(name), content)
        .await
        .ok()?;
    let found = node_check(dir.path(), name).await?;
    Some(found.replacen(&format!(" in {name} at"), &format!(" in {rel} at"), 1))
}

/// The sentence for node's report: its first line ends with `:LINE`, and one line names the error.
fn finding(report: &str, rel: &str) -> Option<String> {
    let line = report
        .lines()
        .next()?
        .rsplit(':')
        .next()?
        .trim()
        .parse::<usize>()
        .ok()?;
    let error = report
        .lines()
        .find(|l| l.starts_with("SyntaxError:"))?
        .trim();
    // The line as node prints it under the location: the 1.5B, told only its number, sent
    // `about` → `about` for it until stopped (c42).
    let code = report
        .lines()
        .nth(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && l.chars().count() <= 120)
        .map(|l| format!(", in `{l}`"))
        .unwrap_or_default();
    Some(format!(
        "\n\nnode --check finds a syntax error in {rel} at line {line}: {error}{code}. Fix that line."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_report_becomes_the_line_and_the_error() {
        let report = "/work/app/controllers/default.js:3\n\tROUTE('GET /about/', about;\n\t                     ^^^^^\n\nSyntaxError: missing ) after argument list\n    at wrapSafe (node:internal/modules/cjs/loader:1464:18)\n";
        assert_eq!(
            finding(report, "controllers/default.js").as_deref(),
            Some(
                "\n\nnode --check finds a syntax error in controllers/default.js at line 3: SyntaxError: missing ) after argument list, in `ROUTE('GET /about/', about;`. Fix that line."
            )
        );
        assert_eq!(finding("node: bad option\n", "a.js"), None);
    }

    #[tokio::test]
    async fn a_broken_file_is_found_and_a_sound_one_is_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("bad.js"), "var a = [1, 2;\n").expect("bad");
        std::fs::write(dir.path().join("good.js"), "var a = [1, 2];\n").expect("good");
        std::fs::write(dir.path().join("notes.txt"), "var a = [1, 2;\n").expect("txt");
        let bad = node_check(dir.path(), "bad.js").await.expect("a finding");
        assert!(bad.contains("in bad.js at line 1: SyntaxError"), "{bad}");
        assert_eq!(node_check(dir.path(), "good.js").await, None);
        assert_eq!(node_check(dir.path(), "notes.txt").await, None);
    }

    #[tokio::test]
    async fn a_file_checked_and_unchanged_is_not_parsed_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("app.js"), "var a = [1, 2;\n").expect("app.js");
        let mut checked = Checked::default();
        let first = checked.note(dir.path(), "app.js").await;
        assert!(
            first.as_deref().is_some_and(|f| f.contains("at line 1")),
            "{first:?}"
        );
        assert_eq!(checked.runs, 1);
        // Read again unchanged: the same finding, node not run.
        assert_eq!(checked.note(dir.path(), "app.js").await, first);
        assert_eq!(checked.runs, 1);
        // Changed: parsed again, and the fixed file has no finding (nor the next read of it).
        std::fs::write(dir.path().join("app.js"), "var a = [1, 2];\n").expect("fixed");
        assert_eq!(checked.note(dir.path(), "app.js").await, None);
        assert_eq!(checked.note(dir.path(), "app.js").await, None);
        assert_eq!(checked.runs, 2);
        // Not JavaScript: never parsed.
        std::fs::write(dir.path().join("notes.txt"), "var a = [1, 2;\n").expect("txt");
        assert_eq!(checked.note(dir.path(), "notes.txt").await, None);
        assert_eq!(checked.runs, 2);
    }
}
