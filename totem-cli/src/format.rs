//! Small text helpers shared by the commands: durations, ages, truncation.

use std::time::{SystemTime, UNIX_EPOCH};

/// `1h 02m`, `3m 12s`, `4.2s`, `35ms`.
pub fn duration_ms(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..60 => format!("{:.1}s", ms as f64 / 1000.0),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {:02}h", s / 86400, (s % 86400) / 3600),
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How long ago a Unix-millisecond time was: `just now`, `5m ago`, `3h ago`, `2d ago`.
pub fn age(at_ms: u64) -> String {
    let s = now_ms().saturating_sub(at_ms) / 1000;
    match s {
        0..60 => "just now".to_string(),
        60..3600 => format!("{}m ago", s / 60),
        3600..86400 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86400),
    }
}

/// The first line of `text`, cut to `max` characters with an ellipsis, made displayable (control
/// and bidi characters shown as escapes, see [`totem_protocol::display`]).
pub fn one_line(text: &str, max: usize) -> String {
    let text = totem_protocol::display::displayable(text);
    let text = text.replace('\t', "\\t");
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() <= max {
        return line.to_string();
    }
    let cut: String = line.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration_ms(35), "35ms");
        assert_eq!(duration_ms(4200), "4.2s");
        assert_eq!(duration_ms(192_000), "3m 12s");
        assert_eq!(duration_ms(3_720_000), "1h 02m");
    }

    #[test]
    fn one_line_cuts_long_text() {
        assert_eq!(one_line("\n  hello\nworld", 10), "hello");
        assert_eq!(one_line("abcdefghijkl", 5), "abcd…");
        assert_eq!(
            one_line("a\x1b]0;x\x07\tb\rc\nd", 40),
            "a\\x1b]0;x\\x07\\tb\\rc"
        );
    }
}
