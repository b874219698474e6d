//! Syntax highlighting of fenced code blocks, with syntect's bundled Sublime syntaxes and themes.
//! They are loaded on the first code block that names a language, never at start-up: `totem
//! --version` and a REPL that shows no code pay nothing for them.

use std::sync::OnceLock;

use syntect::easy::HighlightLines;
use syntect::highlighting::{Color, Theme, ThemeSet};
use syntect::parsing::SyntaxSet;

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
        let mut drawn = String::new();
        for (style, text) in ranges {
            drawn.push_str(&foreground(style.foreground, truecolor()));
            drawn.push_str(text);
        }
        Some(drawn.trim_end_matches(['\n', '\r']).to_string())
    }
}

/// The terminal takes 24-bit colours: `COLORTERM` says `truecolor` or `24bit` (as terminals that
/// do set it). Else the 256-colour palette, which every colour terminal of today has.
fn truecolor() -> bool {
    static TRUECOLOR: OnceLock<bool> = OnceLock::new();
    *TRUECOLOR.get_or_init(|| {
        std::env::var("COLORTERM").is_ok_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            v == "truecolor" || v == "24bit"
        })
    })
}

/// The escape that sets the foreground to `color`: 24-bit, or the nearest of the 256-colour
/// palette.
fn foreground(color: Color, truecolor: bool) -> String {
    match truecolor {
        true => format!("\x1b[38;2;{};{};{}m", color.r, color.g, color.b),
        false => format!("\x1b[38;5;{}m", palette_index(color.r, color.g, color.b)),
    }
}

/// The xterm 256-colour index nearest to an RGB colour: the 6×6×6 cube (16–231) or the grey
/// ramp (232–255), whichever is closer. (The crate for this, ansi_colours, is LGPL-3.0; this is
/// the palette's published formula.)
fn palette_index(r: u8, g: u8, b: u8) -> u8 {
    const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    let nearest = |v: u8| {
        LEVELS
            .iter()
            .enumerate()
            .min_by_key(|(_, l)| l.abs_diff(v))
            .map_or(0, |(i, _)| i)
    };
    let (ri, gi, bi) = (nearest(r), nearest(g), nearest(b));
    let distance = |(x, y, z): (u8, u8, u8)| {
        let d = |a: u8, b: u8| u32::from(a.abs_diff(b)).pow(2);
        d(x, r) + d(y, g) + d(z, b)
    };
    let cube = (LEVELS[ri], LEVELS[gi], LEVELS[bi]);
    let mean = (u32::from(r) + u32::from(g) + u32::from(b)) / 3;
    let step = u8::try_from(mean.saturating_sub(3) / 10)
        .unwrap_or(23)
        .min(23);
    let level = 8 + 10 * step;
    let grey = (level, level, level);
    match distance(grey) < distance(cube) {
        true => 232 + step,
        false => u8::try_from(16 + 36 * ri + 6 * gi + bi).unwrap_or(16),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_languages_are_coloured_and_unknown_ones_are_not() {
        let lines = highlight("rust", "fn main() {\n    let x = 1;\n}\n").expect("rust is known");
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("\x1b[38;"), "{:?}", lines[0]);
        assert!(highlight("py", "print('hi')\n").is_some());
        assert!(highlight("no-such-language", "x\n").is_none());
        assert!(highlight("", "x\n").is_none());
    }

    #[test]
    fn colours_are_24_bit_only_when_the_terminal_says_so() {
        let orange = Color {
            r: 0xd0,
            g: 0x87,
            b: 0x70,
            a: 0xff,
        };
        assert_eq!(foreground(orange, true), "\x1b[38;2;208;135;112m");
        assert_eq!(foreground(orange, false), "\x1b[38;5;173m");
        assert_eq!(palette_index(0, 0, 0), 16);
        assert_eq!(palette_index(255, 255, 255), 231);
        assert_eq!(palette_index(0x80, 0x80, 0x80), 244);
        assert_eq!(palette_index(0xff, 0, 0), 196);
    }
}
