//! Syntax highlighting of fenced code blocks, with syntect's bundled Sublime syntaxes and themes.
//! They are loaded on the first code block that names a language, never at start-up: `totem
//! --version` and a REPL that shows no code pay nothing for them.

use std::sync::OnceLock;

use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme, ThemeSet};
use syntect::parsing::SyntaxSet;
use syntect::util::as_24_bit_terminal_escaped;

const THEME: &str = "base16-ocean.dark";

struct Assets {
    syntaxes: SyntaxSet,
    theme: Option<Theme>,
}

fn assets() -> &'static Assets {
    static ASSETS: OnceLock<Assets> = OnceLock::new();
    ASSETS.get_or_init(|| Assets {
        syntaxes: SyntaxSet::load_defaults_newlines(),
        theme: ThemeSet::load_defaults().themes.remove(THEME),
    })
}

/// `code` coloured as `lang` (a fence's info string: `rust`, `py`, `js title="x"`), one string per
/// line without its newline. None when the language is unknown, so the caller draws it plainly.
pub fn highlight(lang: &str, code: &str) -> Option<Vec<String>> {
    let mut lines = LineHighlighter::new(lang)?;
    code.lines().map(|line| lines.line(line)).collect()
}

/// A fenced block's language, highlighted line by line as the lines stream in.
pub struct LineHighlighter(HighlightLines<'static>);

impl LineHighlighter {
    /// None when the language is unknown.
    pub fn new(lang: &str) -> Option<LineHighlighter> {
        let token = lang.split([' ', ',', '{']).next()?.trim();
        if token.is_empty() {
            return None;
        }
        let assets = assets();
        let syntax = assets
            .syntaxes
            .find_syntax_by_token(token)
            .or_else(|| assets.syntaxes.find_syntax_by_token(&token.to_lowercase()))?;
        Some(LineHighlighter(HighlightLines::new(
            syntax,
            assets.theme.as_ref()?,
        )))
    }

    /// One line (without its newline), coloured.
    pub fn line(&mut self, line: &str) -> Option<String> {
        let line = format!("{line}\n");
        let ranges = self.0.highlight_line(&line, &assets().syntaxes).ok()?;
        let drawn = as_24_bit_terminal_escaped(&ranges, false);
        Some(drawn.trim_end_matches(['\n', '\r']).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_languages_are_coloured_and_unknown_ones_are_not() {
        let lines = highlight("rust", "fn main() {\n    let x = 1;\n}\n").expect("rust is known");
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("\x1b[38;2;"), "{:?}", lines[0]);
        assert!(highlight("py", "print('hi')\n").is_some());
        assert!(highlight("no-such-language", "x\n").is_none());
        assert!(highlight("", "x\n").is_none());
    }
}
