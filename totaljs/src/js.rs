//! A small JavaScript lexer for the conventions check.
//!
//! It turns source text into identifiers, punctuation and literals and drops comments, so the rules
//! never match text inside a comment or a string by accident, and every token keeps its line number.
//! It is not a parser: it knows just enough JavaScript to tell a regular expression from a division,
//! to follow `${...}` inside template literals and to survive unterminated literals in half-written
//! files (they end at the end of the line or file instead of swallowing the rest).

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A name or keyword (`ROUTE`, `function`, `$`, `this`).
    Ident,
    /// One punctuation character, or `=>` / `...` as one token.
    Punct,
    /// A quoted string or a template literal without `${...}`; `text` includes the quotes.
    Str,
    /// One piece of a template literal that has `${...}` in it.
    Template,
    /// A number.
    Num,
    /// A regular expression literal.
    Regex,
}

/// One token: a slice of the source and the line it starts on (1-based).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Token<'a> {
    pub kind: Kind,
    pub text: &'a str,
    pub line: usize,
}

impl<'a> Token<'a> {
    pub fn is_ident(&self, name: &str) -> bool {
        self.kind == Kind::Ident && self.text == name
    }

    pub fn is_punct(&self, p: &str) -> bool {
        self.kind == Kind::Punct && self.text == p
    }

    /// The contents of a string literal without its quotes (escapes are left as written).
    pub fn str_value(&self) -> Option<&'a str> {
        if self.kind != Kind::Str || self.text.len() < 2 {
            return None;
        }
        let quote = self.text.as_bytes()[0];
        let inner = &self.text[1..];
        Some(inner.strip_suffix(quote as char).unwrap_or(inner))
    }
}

/// The tokens of one file, plus which lines begin inside a comment or a literal (those lines'
/// leading whitespace is not indentation).
pub(crate) struct Lexed<'a> {
    pub tokens: Vec<Token<'a>>,
    /// Indexed by line number (1-based); `true` when the line starts inside a comment or literal.
    continued: Vec<bool>,
}

impl Lexed<'_> {
    pub fn line_is_continuation(&self, line: usize) -> bool {
        self.continued.get(line).copied().unwrap_or(false)
    }
}

/// Words after which a `/` starts a regular expression rather than a division.
const REGEX_AFTER_WORDS: &[&str] = &[
    "return",
    "typeof",
    "instanceof",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "case",
    "do",
    "else",
    "yield",
    "await",
];

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80
}

fn is_ident_char(c: u8) -> bool {
    is_ident_start(c) || c.is_ascii_digit()
}

struct Lexer<'a> {
    src: &'a str,
    b: &'a [u8],
    i: usize,
    line: usize,
    tokens: Vec<Token<'a>>,
    continued: Vec<bool>,
    /// Brace depth in code; used to find the `}` that closes a template's `${`.
    braces: usize,
    /// Brace depths at which an open `${` returns to its template literal.
    templates: Vec<usize>,
}

pub(crate) fn lex(src: &str) -> Lexed<'_> {
    let lines = src.bytes().filter(|&c| c == b'\n').count() + 2;
    let mut lx = Lexer {
        src,
        b: src.as_bytes(),
        i: 0,
        line: 1,
        tokens: Vec::new(),
        continued: vec![false; lines + 1],
        braces: 0,
        templates: Vec::new(),
    };
    lx.run();
    Lexed {
        tokens: lx.tokens,
        continued: lx.continued,
    }
}

impl<'a> Lexer<'a> {
    fn peek(&self, off: usize) -> u8 {
        self.b.get(self.i + off).copied().unwrap_or(0)
    }

    fn push(&mut self, kind: Kind, start: usize, line: usize) {
        self.tokens.push(Token {
            kind,
            text: &self.src[start..self.i],
            line,
        });
    }

    /// A newline consumed inside a comment or literal: the next line is a continuation.
    fn newline_in_literal(&mut self) {
        self.line += 1;
        if let Some(slot) = self.continued.get_mut(self.line) {
            *slot = true;
        }
    }

    fn regex_allowed(&self) -> bool {
        match self.tokens.last() {
            None => true,
            Some(t) => match t.kind {
                Kind::Punct => !matches!(t.text, ")" | "]" | "}"),
                Kind::Ident => REGEX_AFTER_WORDS.contains(&t.text),
                _ => false,
            },
        }
    }

    fn run(&mut self) {
        while self.i < self.b.len() {
            let c = self.b[self.i];
            let start = self.i;
            let line = self.line;
            match c {
                b'\n' => {
                    self.line += 1;
                    self.i += 1;
                }
                b' ' | b'\t' | b'\r' => self.i += 1,
                b'/' if self.peek(1) == b'/' => {
                    while self.i < self.b.len() && self.b[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                b'/' if self.peek(1) == b'*' => {
                    self.i += 2;
                    while self.i < self.b.len() {
                        if self.b[self.i] == b'*' && self.peek(1) == b'/' {
                            self.i += 2;
                            break;
                        }
                        if self.b[self.i] == b'\n' {
                            self.newline_in_literal();
                        }
                        self.i += 1;
                    }
                }
                b'/' if self.regex_allowed() => {
                    if self.regex() {
                        self.push(Kind::Regex, start, line);
                    } else {
                        self.i = start + 1;
                        self.push(Kind::Punct, start, line);
                    }
                }
                b'\'' | b'"' => {
                    self.string(c);
                    self.push(Kind::Str, start, line);
                }
                b'`' => {
                    self.i += 1;
                    self.template(start, line);
                }
                b'}' if self.templates.last() == Some(&self.braces) => {
                    self.templates.pop();
                    self.i += 1;
                    self.template(start, line);
                }
                b'{' => {
                    self.braces += 1;
                    self.i += 1;
                    self.push(Kind::Punct, start, line);
                }
                b'}' => {
                    self.braces = self.braces.saturating_sub(1);
                    self.i += 1;
                    self.push(Kind::Punct, start, line);
                }
                b'0'..=b'9' => {
                    while self.i < self.b.len()
                        && (is_ident_char(self.b[self.i]) || self.b[self.i] == b'.')
                    {
                        self.i += 1;
                    }
                    self.push(Kind::Num, start, line);
                }
                c if is_ident_start(c) => {
                    while self.i < self.b.len() && is_ident_char(self.b[self.i]) {
                        self.i += 1;
                    }
                    self.push(Kind::Ident, start, line);
                }
                b'=' if self.peek(1) == b'>' => {
                    self.i += 2;
                    self.push(Kind::Punct, start, line);
                }
                b'.' if self.peek(1) == b'.' && self.peek(2) == b'.' => {
                    self.i += 3;
                    self.push(Kind::Punct, start, line);
                }
                _ => {
                    self.i += 1;
                    self.push(Kind::Punct, start, line);
                }
            }
        }
    }

    /// Consumes a quoted string starting at `self.i`; an unterminated one ends at the line's end.
    fn string(&mut self, quote: u8) {
        self.i += 1;
        while self.i < self.b.len() {
            match self.b[self.i] {
                b'\\' => {
                    if self.peek(1) == b'\n' {
                        self.newline_in_literal();
                    }
                    self.i += 2;
                }
                b'\n' => return,
                c => {
                    self.i += 1;
                    if c == quote {
                        return;
                    }
                }
            }
        }
        self.i = self.i.min(self.b.len());
    }

    /// Consumes template text after a backtick or after the `}` that closes a `${`. Ends at the
    /// closing backtick (token kind `Str` for a whole simple template) or at the next `${`.
    fn template(&mut self, start: usize, line: usize) {
        let whole = self.b[start] == b'`';
        while self.i < self.b.len() {
            match self.b[self.i] {
                b'\\' => {
                    if self.peek(1) == b'\n' {
                        self.newline_in_literal();
                    }
                    self.i += 2;
                }
                b'\n' => {
                    self.newline_in_literal();
                    self.i += 1;
                }
                b'`' => {
                    self.i += 1;
                    let kind = if whole { Kind::Str } else { Kind::Template };
                    self.push(kind, start, line);
                    return;
                }
                b'$' if self.peek(1) == b'{' => {
                    self.i += 2;
                    self.push(Kind::Template, start, line);
                    self.templates.push(self.braces);
                    return;
                }
                _ => self.i += 1,
            }
        }
        self.i = self.b.len();
        self.push(Kind::Template, start, line);
    }

    /// Consumes a regular expression literal; false (nothing consumed) if the line ends first.
    fn regex(&mut self) -> bool {
        let mut j = self.i + 1;
        let mut class = false;
        while j < self.b.len() {
            match self.b[j] {
                b'\\' => j += 1,
                b'\n' => return false,
                b'[' => class = true,
                b']' => class = false,
                b'/' if !class => {
                    j += 1;
                    while j < self.b.len() && is_ident_char(self.b[j]) {
                        j += 1;
                    }
                    self.i = j;
                    return true;
                }
                _ => {}
            }
            j += 1;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(src: &str) -> Vec<&str> {
        lex(src).tokens.iter().map(|t| t.text).collect()
    }

    #[test]
    fn comments_are_dropped_and_lines_kept() {
        let l = lex("a // ROUTE(\n/* TABLE(\n */ b");
        let t: Vec<_> = l.tokens.iter().map(|t| (t.text, t.line)).collect();
        assert_eq!(t, vec![("a", 1), ("b", 3)]);
        assert!(l.line_is_continuation(3));
        assert!(!l.line_is_continuation(2));
    }

    #[test]
    fn strings_are_single_tokens() {
        let l = lex("x('a // b', \"c\\\"d\")");
        assert_eq!(l.tokens[2].str_value(), Some("a // b"));
        assert_eq!(l.tokens[4].str_value(), Some("c\\\"d"));
    }

    #[test]
    fn regex_and_division_are_told_apart() {
        assert_eq!(
            texts("a = b / c / d"),
            vec!["a", "=", "b", "/", "c", "/", "d"]
        );
        assert_eq!(
            texts("x = /it's\\/[/]/g;"),
            vec!["x", "=", "/it's\\/[/]/g", ";"]
        );
    }

    #[test]
    fn template_substitutions_are_lexed_as_code() {
        let l = lex("`a ${ f({ b: 1 }) } c\nd` + 1");
        let kinds: Vec<_> = l.tokens.iter().map(|t| t.kind).collect();
        assert_eq!(kinds[0], Kind::Template);
        assert!(l.tokens.iter().any(|t| t.is_ident("f")));
        assert!(l.tokens.iter().any(|t| t.text == "} c\nd`"));
        assert!(l.line_is_continuation(2));
        assert_eq!(l.tokens.last().map(|t| t.text), Some("1"));
    }

    #[test]
    fn unterminated_string_stops_at_line_end() {
        let l = lex("x = 'abc\nROUTE('GET /');");
        assert!(l.tokens.iter().any(|t| t.is_ident("ROUTE") && t.line == 2));
    }
}
