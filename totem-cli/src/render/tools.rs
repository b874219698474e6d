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
    let terminal = match tool {
        "terminal" => terminal_detail(input),
        _ => None,
    };
    let detail = terminal
        .or_else(|| {
            TELLING_FIELDS
                .iter()
                .find_map(|k| input.get(*k).and_then(Value::as_str))
                .map(str::to_string)
        })
        .unwrap_or_else(|| match input {
            Value::Object(map) if map.is_empty() => String::new(),
            other => other.to_string(),
        });
    // A command of several lines says so: its first line alone is not what runs.
    let lines = detail.lines().filter(|l| !l.trim().is_empty()).count();
    let more = match lines {
        0 | 1 => String::new(),
        n => s.dim(&format!(" (+{} more lines in the command)", n - 1)),
    };
    format!(
        "{} {}{more}",
        s.cyan(&format!("⚙ {}", one_line(tool, 40))),
        one_line(&detail, 100)
    )
}

/// What a `terminal` call does: what it types and into which terminal (`send to t1: npm init`,
/// keys after), what it starts, what it waits for. None for an input of another shape.
fn terminal_detail(input: &Value) -> Option<String> {
    let field = |k: &str| input.get(k).and_then(Value::as_str);
    let id = field("id").unwrap_or("?");
    let until = field("pattern").map(|p| format!(" until /{p}/"));
    let detail = match field("action")? {
        "send" => {
            let keys: Vec<&str> = input
                .get("keys")
                .and_then(Value::as_array)
                .map(|keys| keys.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut typed = field("text").unwrap_or("").to_string();
            if input.get("enter").and_then(Value::as_bool) != Some(false) && !typed.is_empty() {
                typed.push_str(" ⏎");
            }
            if !keys.is_empty() {
                if !typed.is_empty() {
                    typed.push(' ');
                }
                typed.push_str(&format!("[{}]", keys.join(" ")));
            }
            format!("send to {id}: {typed}")
        }
        "start" => format!("start {}", field("command").unwrap_or("")),
        "wait" => format!("wait on {id}{}", until.unwrap_or_default()),
        other => format!("{other} {id}"),
    };
    Some(detail)
}

/// `  ↳ first line (+12 more lines of output)`, red for an error, or the diff it returned.
pub fn result_lines(output: &str, is_error: bool, s: Style) -> String {
    if !is_error && looks_like_diff(output) {
        return diff_lines(output, s, DIFF_LINES, "");
    }
    let total = output.lines().count();
    let first = one_line(output, 100);
    let more = match total {
        0 | 1 => String::new(),
        n => format!(" (+{} more lines of output)", n - 1),
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
            "  ↳ ok (+2 more lines of output)\n"
        );
        assert_eq!(result_lines("", false, PLAIN), "  ↳ (no output)\n");
    }

    #[test]
    fn a_terminal_call_shows_what_it_types_not_what_it_waits_for() {
        let send = json!({"action": "send", "id": "t1", "text": "npm init", "pattern": "name:"});
        assert_eq!(
            call_line("terminal", &send, PLAIN),
            "⚙ terminal send to t1: npm init ⏎"
        );
        let keys = json!({"action": "send", "id": "t2", "keys": ["down", "enter"]});
        assert_eq!(
            call_line("terminal", &keys, PLAIN),
            "⚙ terminal send to t2: [down enter]"
        );
        let wait = json!({"action": "wait", "id": "t1", "pattern": "ready"});
        assert_eq!(
            call_line("terminal", &wait, PLAIN),
            "⚙ terminal wait on t1 until /ready/"
        );
        let script = json!({"command": "cd x\nmake\nmake test"});
        assert_eq!(
            call_line("bash", &script, PLAIN),
            "⚙ bash cd x (+2 more lines in the command)"
        );
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
