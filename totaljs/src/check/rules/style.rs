//! #18: indentation with tabs, as in the framework's own sources (35k tab-indented lines to 163).

use super::{Hits, Source};
use crate::check::ProjectContext;

/// One finding per file, at the first line indented with spaces, counting the others.
pub(crate) fn indent_tabs(src: &Source, _: &ProjectContext) -> Hits {
    let mut first = None;
    let mut count = 0usize;
    for (n, raw) in src.text.lines().enumerate() {
        let line = n + 1;
        if src.lexed.line_is_continuation(line) {
            continue;
        }
        let indent: &str = &raw[..raw.len() - raw.trim_start_matches([' ', '\t']).len()];
        if indent.len() == raw.len() {
            continue; // blank line
        }
        // Indentation that starts with two or more spaces. A single space, or spaces after tabs,
        // is alignment (JSDoc, wrapped conditions), not indentation.
        if indent.starts_with("  ") {
            count += 1;
            first.get_or_insert(line);
        }
    }
    match first {
        Some(line) => vec![(
            line,
            format!(
                "{count} line(s) indented with spaces (first here): Total.js code indents with tabs, one tab per level"
            ),
        )],
        None => Hits::new(),
    }
}
