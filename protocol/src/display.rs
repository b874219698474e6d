//! Untrusted text made safe to show: the one place that decides how model, project and tool text
//! reaches a terminal, an editor's message line or a dialog.
//!
//! Terminals obey what is in the text they print: ESC starts colour, cursor moves, screen clears,
//! window titles (OSC 0/2) and clipboard writes (OSC 52); CR returns to the start of the line and
//! lets later text paint over earlier text; BEL rings; bidi controls (U+202E and its kin) reorder
//! what is shown so `txt.exe` reads as `exe.txt`. So every such character becomes a visible escape
//! (`\x1b`, `\r`, `\x07`, `<U+202E>`) that shows it was there and what it was. Newlines and tabs stay
//! in [`displayable`] (the layout needs them); [`displayable_line`] escapes them too, for text that
//! must stay on one line.
//!
//! The mapping goes character by character, so text streamed in pieces gives the same result piece
//! by piece as whole, and it is idempotent: what it returns has nothing left to escape.

use std::borrow::Cow;

/// `text` with control characters (but newline and tab), CR, ESC, DEL, C1 controls, bidi controls
/// and the line and paragraph separators shown as visible escapes.
pub fn displayable(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// As [`displayable`], and newlines and tabs also escaped (`\n`, `\t`): the text stays on one line.
pub fn displayable_line(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// Whether `c` is not shown as itself by [`displayable`] (`line`: by [`displayable_line`]).
pub fn needs_escape(c: char, line: bool) -> bool {
    match c {
        '\n' | '\t' => line,
        _ => escaped(c).is_some(),
    }
}

/// Whether every string in `value` (object keys too) is already [`displayable`].
pub fn is_displayable_json(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    let plain = |s: &str| !s.chars().any(|c| needs_escape(c, false));
    match value {
        Value::String(s) => plain(s),
        Value::Array(items) => items.iter().all(is_displayable_json),
        Value::Object(map) => map.iter().all(|(k, v)| plain(k) && is_displayable_json(v)),
        _ => true,
    }
}

/// Every string in `value` (object keys too) made [`displayable`]; true when one changed.
pub fn displayable_json(value: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::String(s) => match displayable(s) {
            Cow::Borrowed(_) => false,
            Cow::Owned(safe) => {
                *s = safe;
                true
            }
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |changed, item| displayable_json(item) | changed),
        Value::Object(map) => {
            let unsafe_keys = map
                .keys()
                .any(|k| k.chars().any(|c| needs_escape(c, false)));
            if unsafe_keys {
                let old = std::mem::take(map);
                for (key, mut item) in old {
                    displayable_json(&mut item);
                    map.insert(displayable(&key).into_owned(), item);
                }
                return true;
            }
            map.values_mut()
                .fold(false, |changed, item| displayable_json(item) | changed)
        }
        _ => false,
    }
}

fn escape(text: &str, line: bool) -> Cow<'_, str> {
    let Some(first) = text.find(|c| needs_escape(c, line)) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        match (c, line) {
            ('\n', true) => out.push_str("\\n"),
            ('\t', true) => out.push_str("\\t"),
            _ => match escaped(c) {
                Some(shown) => out.push_str(&shown),
                None => out.push(c),
            },
        }
    }
    Cow::Owned(out)
}

/// How `c` is shown when it cannot be shown as itself (newline and tab aside).
fn escaped(c: char) -> Option<String> {
    let code = u32::from(c);
    match c {
        '\n' | '\t' => None,
        '\r' => Some("\\r".to_string()),
        '\0'..='\x1f' | '\x7f' => Some(format!("\\x{code:02x}")),
        // C1 controls: U+009B is CSI and U+009D is OSC on terminals that take 8-bit controls.
        '\u{80}'..='\u{9f}'
        // Bidi embeddings, overrides and isolates, the marks, the Arabic letter mark.
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{061c}'
        // Line and paragraph separators: some terminals and editors break lines on them.
        | '\u{2028}'
        | '\u{2029}' => Some(format!("<U+{code:04X}>")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_become_visible_escapes() {
        assert_eq!(
            displayable("touch PWN '\r\x1b[2K  asks for: echo hello'"),
            "touch PWN '\\r\\x1b[2K  asks for: echo hello'"
        );
        assert_eq!(
            displayable("\x1b]0;title\x07\x1b]52;c;aGk=\x1b\\\x1b[2J"),
            "\\x1b]0;title\\x07\\x1b]52;c;aGk=\\x1b\\\\x1b[2J"
        );
        assert_eq!(displayable("a\u{9b}31m"), "a<U+009B>31m");
        assert_eq!(displayable("\x7f\0"), "\\x7f\\x00");
    }

    #[test]
    fn bidi_controls_are_named() {
        assert_eq!(displayable("file\u{202e}txt.exe"), "file<U+202E>txt.exe");
        for c in [
            '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{2066}', '\u{2067}', '\u{2068}',
            '\u{2069}', '\u{200e}', '\u{200f}', '\u{061c}',
        ] {
            assert!(needs_escape(c, false), "{c:?}");
        }
    }

    #[test]
    fn newlines_and_tabs_stay_unless_one_line_is_asked() {
        assert!(matches!(displayable("a\n\tb ünï 中 👍"), Cow::Borrowed(_)));
        assert_eq!(displayable_line("a\n\tb\r"), "a\\n\\tb\\r");
    }

    #[test]
    fn it_is_idempotent_and_piecewise() {
        let text = "x\x1b[31m\u{202e}\r\ny";
        let once = displayable(text).into_owned();
        assert_eq!(displayable(&once), once);
        let pieces: String = ["x\x1b", "[31m\u{202e}", "\r\ny"]
            .iter()
            .map(|p| displayable(p).into_owned())
            .collect();
        assert_eq!(pieces, once);
    }

    #[test]
    fn json_strings_and_keys_are_made_displayable() {
        let mut value = serde_json::json!({"a\x1b": ["\x07", 1, {"b": "ok"}], "c": "fine"});
        assert!(displayable_json(&mut value));
        assert_eq!(
            value,
            serde_json::json!({"a\\x1b": ["\\x07", 1, {"b": "ok"}], "c": "fine"})
        );
        assert!(!displayable_json(&mut value));
        assert!(is_displayable_json(&value));
        assert!(!is_displayable_json(
            &serde_json::json!([{"k": "\u{202e}"}])
        ));
    }
}
