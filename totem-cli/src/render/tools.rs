//! Tool calls as one line each, and their results as a short line (or a coloured diff).

use serde_json::Value;

use super::Style;
use crate::format::one_line;

/// Input fields that say best what a call does, in order of preference.
const TELLING_FIELDS: &[&str] = &[
    "command",
    "cmd",
    "path",
    "filePath",
    "file_path",
    "pattern",
    "url",
    "query",
    "description",
];

/// Lines of a diff shown before it is cut.
const DIFF_LINES: usize = 30;

/// `⚙ bash  cargo test`.
pub fn call_line(tool: &str, input: &Value, s: Style) -> String {
    let detail = TELLING_FIELDS
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| match input {
            Value::Object(map) if map.is_empty() => String::new(),
            other => other.to_string(),
        });
    // A command of several lines says so: its first line alone is not what runs.
    let lines = detail.lines().filter(|l| !l.trim().is_empty()).count();
    let more = match lines {
        0 | 1 => String::new(),
        n => s.dim(&format!(" (+{} lines)", n - 1)),
    };
    format!(
        "{} {}{more}",
        s.cyan(&format!("⚙ {}", one_line(tool, 40))),
        one_line(&detail, 100)
    )
}

/// `  ↳ first line (+12 lines)`, red for an error, or the diff it returned.
pub fn result_lines(output: &str, is_error: bool, s: Style) -> String {
    if !is_error && looks_like_diff(output) {
        return diff_lines(output, s, DIFF_LINES, "");
    }
    let total = output.lines().count();
    let first = one_line(output, 100);
    let more = match total {
        0 | 1 => String::new(),
        n => format!(" (+{} lines)", n - 1),
    };
    let line = format!(
        "  ↳ {}{more}",
        if first.is_empty() {
            "(no output)"
        } else {
            &first
        }
    );
    match is_error {
        true => format!("{}\n", s.red(&line)),
        false => format!("{}\n", s.dim(&line)),
    }
}

fn looks_like_diff(output: &str) -> bool {
    output.starts_with("--- ") || output.starts_with("diff --git") || output.contains("\n@@ ")
}

/// A diff coloured line by line, indented, its first `limit` lines and then how many more
/// (followed by `hint`).
pub fn diff_lines(output: &str, s: Style, limit: usize, hint: &str) -> String {
    let output = totem_protocol::display::displayable(output);
    let mut out = String::new();
    let lines: Vec<&str> = output.lines().collect();
    for line in lines.iter().take(limit) {
        let drawn = if line.starts_with("+++") || line.starts_with("---") {
            s.bold(line)
        } else if line.starts_with('+') {
            s.green(line)
        } else if line.starts_with('-') {
            s.red(line)
        } else if line.starts_with("@@") {
            s.cyan(line)
        } else {
            line.to_string()
        };
        out.push_str("    ");
        out.push_str(&drawn);
        out.push('\n');
    }
    if lines.len() > limit {
        let more = lines.len() - limit;
        out.push_str(&s.dim(&format!("    … {more} more lines{hint}")));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PLAIN: Style = Style { color: false };

    #[test]
    fn a_call_shows_its_most_telling_field() {
        let line = call_line(
            "bash",
            &json!({"command": "cargo test", "timeout": 5}),
            PLAIN,
        );
        assert_eq!(line, "⚙ bash cargo test");
    }

    #[test]
    fn a_result_is_one_line_with_a_count() {
        assert_eq!(
            result_lines("ok\nline 2\nline 3", false, PLAIN),
            "  ↳ ok (+2 lines)\n"
        );
        assert_eq!(result_lines("", false, PLAIN), "  ↳ (no output)\n");
    }

    #[test]
    fn a_diff_is_shown_as_a_diff() {
        let out = result_lines("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n", false, PLAIN);
        assert!(
            out.contains("    -old\n") && out.contains("    +new\n"),
            "{out}"
        );
    }
}
