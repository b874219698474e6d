//! Splitting a shell command line into every simple command it would run.
//!
//! A rule such as `git status *` must never let `git status; rm -rf x` through, so the permission
//! engine decides on each simple command separately. This module owns that split. It is a careful
//! tokenizer for the parts of POSIX sh and bash that decide *what runs*, not a full shell parser:
//!
//! - separators: `;`, `&`, `&&`, `||`, `|`, `|&`, newlines;
//! - nesting: `( … )` subshells, `{ …; }` groups, `$( … )`, backticks, `<( … )`, `>( … )`,
//!   command substitutions inside double quotes and unquoted here-documents;
//! - words: single and double quotes, `$'…'`, backslash escapes and line continuations, comments;
//! - redirections (`>`, `>>`, `&>`, `2>&1`, `<`, `<<EOF` …), kept apart from the words so the engine
//!   can treat an output redirection to a file as a write;
//! - leading `NAME=value` assignments, kept apart so the engine can match with and without them;
//! - keywords (`if`, `then`, `while`, `do`, `!`, `{` …) stripped so `if rm x; then …` checks `rm x`;
//! - commands that run other commands: `bash -c '…'`, `sh -c`, `eval`, `sudo`, `env`, `xargs`,
//!   `find -exec`, `timeout`, `nice`, `nohup` … add their inner command as one more sub-command.
//!
//! Whatever it cannot read with confidence (`case`, array assignments, unbalanced quotes or
//! parentheses, command substitutions inside `${…}` or `$((…))`) is a [`ParseError`], which the
//! engine turns into a question: the failure mode is always "ask", never "allow".
//!
//! We considered shell parser crates; a full parser gives an AST whose every node kind the engine
//! would have to walk correctly to stay safe, while this splitter's only job — find every command
//! and refuse what it does not understand — is small enough to audit and test exhaustively.

use std::fmt;

/// Nesting deeper than this (substitutions within substitutions, `bash -c` within `eval` …) is
/// refused rather than followed.
const MAX_DEPTH: usize = 16;

/// One word of a command after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The text with quotes and escapes removed; expansions are kept as written (`$HOME`, `$(…)`).
    pub text: String,
    /// Some part of the word was quoted or escaped (so `"if"` is not a keyword).
    pub quoted: bool,
    /// The word contains an expansion (`$VAR`, `$(…)`, backticks, `$'…'`): its value at run time
    /// is unknown here.
    pub dynamic: bool,
    /// Byte offset in `text` where the first quoted, escaped or expanded character starts.
    first_special: Option<usize>,
}

impl Word {
    #[cfg(test)]
    fn plain(text: &str) -> Self {
        Word {
            text: text.to_string(),
            quoted: false,
            dynamic: false,
            first_special: None,
        }
    }

    /// `NAME=value` or `NAME+=value` with an unquoted, valid name.
    fn is_assignment(&self) -> bool {
        let Some(eq) = self.text.find('=') else {
            return false;
        };
        let name = self.text[..eq]
            .strip_suffix('+')
            .unwrap_or(&self.text[..eq]);
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        valid && self.first_special.is_none_or(|q| q > eq)
    }
}

/// A redirection attached to a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The operator without its file descriptor: `>`, `>>`, `>|`, `&>`, `&>>`, `<`, `<>`, `<&`,
    /// `>&`, `<<`, `<<-`, `<<<`.
    pub op: String,
    /// The file (or descriptor, or here-document delimiter, or here-string).
    pub target: Word,
}

/// Devices that an output redirection may write to without writing a file.
const HARMLESS_DEVICES: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];

impl Redirect {
    /// The file this redirection writes, if it writes one (`/dev/null` and descriptors do not).
    pub fn written_file(&self) -> Option<&str> {
        let target = self.target.text.as_str();
        let writes = match self.op.as_str() {
            ">" | ">>" | ">|" | "&>" | "&>>" | "<>" => true,
            // `>&2` duplicates a descriptor; `>&file` is bash for `&> file`.
            ">&" => !is_descriptor(target),
            _ => false,
        };
        let harmless = HARMLESS_DEVICES.contains(&target) || target.starts_with("/dev/fd/");
        (writes && !harmless).then_some(target)
    }

    /// The file this redirection reads, if it reads one.
    pub fn read_file(&self) -> Option<&str> {
        let target = self.target.text.as_str();
        match self.op.as_str() {
            "<" | "<>" => Some(target),
            "<&" if !is_descriptor(target) => Some(target),
            _ => None,
        }
    }
}

fn is_descriptor(s: &str) -> bool {
    s == "-" || (!s.is_empty() && s.trim_end_matches('-').chars().all(|c| c.is_ascii_digit()))
}

/// One simple command found in a command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubCommand {
    /// Leading `NAME=value` words.
    pub assignments: Vec<Word>,
    /// The program and its arguments.
    pub words: Vec<Word>,
    /// Redirections, in order (`> out.txt`, `2>&1`).
    pub redirects: Vec<Redirect>,
    /// The command runs code this splitter cannot see (`eval "$x"`, `bash -c "$script"`,
    /// `env -S …`): it can never be allowed by a pattern alone.
    pub opaque: bool,
}

impl SubCommand {
    /// What rules match: assignments and words joined by single spaces (`FOO=1 npm test`).
    pub fn text(&self) -> String {
        join(self.assignments.iter().chain(&self.words))
    }

    /// The words alone, without leading assignments (`npm test`).
    pub fn command_text(&self) -> String {
        join(&self.words)
    }

    /// The program name, if there is one.
    pub fn program(&self) -> Option<&str> {
        self.words.first().map(|w| w.text.as_str())
    }

    /// The program name is an expansion (`$CMD`, `$(…)`): what runs is unknown.
    pub fn program_is_dynamic(&self) -> bool {
        self.words.first().is_some_and(|w| w.dynamic)
    }

    /// The program is a shell that reads its script from standard input (`… | bash`, `sh -s`,
    /// `bash <<EOF`): the code it runs is not among its words.
    pub fn reads_script_from_stdin(&self) -> bool {
        let Some(program) = self.words.first() else {
            return false;
        };
        let name = program.text.rsplit('/').next().unwrap_or(&program.text);
        if !SHELLS.contains(&name) || name == "su" {
            return false;
        }
        let args = &self.words[1..];
        let has_c = args.iter().any(|w| {
            let t = w.text.as_str();
            (t.starts_with('-') && !t.starts_with("--") && t.contains('c')) || t == "--command"
        });
        let script_file = args.iter().any(|w| !w.text.starts_with('-'));
        let dash_s = args.iter().any(|w| {
            let t = w.text.as_str();
            t == "-" || (t.starts_with('-') && !t.starts_with("--") && t.contains('s'))
        });
        !has_c && (!script_file || dash_s)
    }

    /// The text with the program named by its file name (`/bin/rm x` → `rm x`), for deny rules.
    pub fn text_with_program_name(&self) -> Option<String> {
        let program = self.words.first()?;
        let name = program.text.rsplit('/').next().unwrap_or(&program.text);
        if name == program.text || name.is_empty() || program.dynamic {
            return None;
        }
        let mut words = self.words.clone();
        words[0].text = name.to_string();
        Some(join(self.assignments.iter().chain(&words)))
    }

    fn from_words(words: Vec<Word>) -> Self {
        let split = words
            .iter()
            .position(|w| !w.is_assignment())
            .unwrap_or(words.len());
        let mut words = words;
        let rest = words.split_off(split);
        SubCommand {
            assignments: words,
            words: rest,
            redirects: Vec::new(),
            opaque: false,
        }
    }

    fn is_empty(&self) -> bool {
        self.assignments.is_empty() && self.words.is_empty() && self.redirects.is_empty()
    }
}

impl fmt::Display for SubCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

fn join<'a>(words: impl IntoIterator<Item = &'a Word>) -> String {
    let mut out = String::new();
    for w in words {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&w.text);
    }
    out
}

/// Why a command line could not be split with confidence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A quote is opened and never closed.
    #[error("unterminated {0} quote")]
    UnterminatedQuote(char),
    /// A bracket, brace or parenthesis is not closed (or closed without opening).
    #[error("unbalanced `{0}`")]
    Unbalanced(char),
    /// A here-document has no terminating line.
    #[error("here-document `{0}` is not terminated")]
    UnterminatedHeredoc(String),
    /// A redirection operator has no file after it.
    #[error("a redirection `{0}` has no target")]
    MissingRedirectTarget(String),
    /// Shell syntax this splitter does not read.
    #[error("{0} is not supported; the command needs a person's look")]
    Unsupported(&'static str),
    /// The command nests too deep to follow.
    #[error("the command nests more than {MAX_DEPTH} levels deep")]
    TooDeep,
}

/// Splits `line` into every simple command it runs, in the order they appear (substitutions
/// before the command that uses them), including the inner commands of `bash -c`, `eval`,
/// `sudo`, `xargs`, `find -exec` and the like.
pub fn split_commands(line: &str) -> Result<Vec<SubCommand>, ParseError> {
    split_at_depth(line, 0)
}

fn split_at_depth(line: &str, depth: usize) -> Result<Vec<SubCommand>, ParseError> {
    let mut all = Vec::new();
    for cmd in parse_raw(line, depth)? {
        expand_inner(cmd, depth, &mut all)?;
    }
    Ok(all)
}

/// The commands of `line` without the inner commands of wrappers.
fn parse_raw(line: &str, depth: usize) -> Result<Vec<SubCommand>, ParseError> {
    if depth > MAX_DEPTH {
        return Err(ParseError::TooDeep);
    }
    let mut parser = Parser {
        chars: line.chars().collect(),
        pos: 0,
        depth,
        heredocs: Vec::new(),
        out: Vec::new(),
    };
    parser.parse_list(None)?;
    if let Some(h) = parser.heredocs.first() {
        return Err(ParseError::UnterminatedHeredoc(h.delimiter.clone()));
    }
    Ok(parser.out)
}

struct PendingHeredoc {
    delimiter: String,
    /// A quoted delimiter (`<<'EOF'`) means the body is literal; otherwise it is expanded.
    literal: bool,
    strip_tabs: bool,
}

#[derive(Default)]
struct WordBuf {
    text: String,
    quoted: bool,
    dynamic: bool,
    first_special: Option<usize>,
    started: bool,
}

impl WordBuf {
    fn push(&mut self, c: char) {
        self.started = true;
        self.text.push(c);
    }

    fn push_special(&mut self, s: &str, quoted: bool, dynamic: bool) {
        self.started = true;
        if self.first_special.is_none() {
            self.first_special = Some(self.text.len());
        }
        self.quoted |= quoted;
        self.dynamic |= dynamic;
        self.text.push_str(s);
    }

    fn mark_quoted(&mut self) {
        self.started = true;
        self.quoted = true;
        if self.first_special.is_none() {
            self.first_special = Some(self.text.len());
        }
    }

    fn take(&mut self) -> Option<Word> {
        if !self.started {
            return None;
        }
        let buf = std::mem::take(self);
        Some(Word {
            text: buf.text,
            quoted: buf.quoted,
            dynamic: buf.dynamic,
            first_special: buf.first_special,
        })
    }
}

/// The command being read: its words, its redirections and a redirection waiting for a target.
#[derive(Default)]
struct Builder {
    word: WordBuf,
    words: Vec<Word>,
    redirects: Vec<Redirect>,
    pending_redirect: Option<String>,
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
    heredocs: Vec<PendingHeredoc>,
    out: Vec<SubCommand>,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    /// Reads commands until the end of input or, with `terminator`, until the matching `)`.
    fn parse_list(&mut self, terminator: Option<char>) -> Result<(), ParseError> {
        let mut b = Builder::default();
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\r' => {
                    self.pos += 1;
                    self.end_word(&mut b)?;
                }
                '\n' => {
                    self.pos += 1;
                    self.finish(&mut b)?;
                    self.read_heredocs()?;
                }
                ';' => {
                    if self.peek_at(1) == Some(';') {
                        return Err(ParseError::Unsupported("`;;` (case)"));
                    }
                    self.pos += 1;
                    self.finish(&mut b)?;
                }
                '&' => match self.peek_at(1) {
                    Some('&') => {
                        self.pos += 2;
                        self.finish(&mut b)?;
                    }
                    Some('>') => {
                        self.end_word(&mut b)?;
                        let op = if self.peek_at(2) == Some('>') {
                            "&>>"
                        } else {
                            "&>"
                        };
                        self.pos += op.len();
                        self.set_redirect(&mut b, op)?;
                    }
                    _ => {
                        self.pos += 1;
                        self.finish(&mut b)?;
                    }
                },
                '|' => {
                    self.pos += if matches!(self.peek_at(1), Some('|' | '&')) {
                        2
                    } else {
                        1
                    };
                    self.finish(&mut b)?;
                }
                '(' => self.open_paren(&mut b)?,
                ')' => {
                    if terminator == Some(')') {
                        self.pos += 1;
                        self.finish(&mut b)?;
                        return Ok(());
                    }
                    return Err(ParseError::Unbalanced(')'));
                }
                '<' | '>' => {
                    if self.peek_at(1) == Some('(') {
                        // Process substitution: a word whose command runs alongside.
                        self.pos += 2;
                        self.nested(|p| p.parse_list(Some(')')))?;
                        b.word.push_special(&format!("{c}(…)"), false, true);
                    } else {
                        self.redirect(&mut b)?;
                    }
                }
                '\'' => {
                    self.pos += 1;
                    b.word.mark_quoted();
                    self.single_quoted(&mut b.word)?;
                }
                '"' => {
                    self.pos += 1;
                    b.word.mark_quoted();
                    self.double_quoted(&mut b.word, Some('"'))?;
                }
                '\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some('\n') => self.pos += 1,
                        Some(n) => {
                            self.pos += 1;
                            b.word.push_special(&n.to_string(), true, false);
                        }
                        None => return Err(ParseError::UnterminatedQuote('\\')),
                    }
                }
                '$' => self.dollar(&mut b.word, false)?,
                '`' => self.backtick(&mut b.word)?,
                '#' if !b.word.started => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                _ => {
                    self.pos += 1;
                    b.word.push(c);
                }
            }
        }
        if terminator.is_some() {
            return Err(ParseError::Unbalanced('('));
        }
        self.finish(&mut b)
    }

    fn nested(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<(), ParseError>,
    ) -> Result<(), ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(ParseError::TooDeep);
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    fn open_paren(&mut self, b: &mut Builder) -> Result<(), ParseError> {
        if b.word.started {
            // `name()` starts a function definition; anything else (`a=(1 2)`, `x(`) we refuse.
            if self.peek_at(1) == Some(')') && b.words.is_empty() {
                self.pos += 2;
                b.word = WordBuf::default();
                return Ok(());
            }
            return Err(ParseError::Unsupported("a parenthesis inside a word"));
        }
        if !b.words.is_empty() || b.pending_redirect.is_some() {
            // `f ()` — a definition with a space — or a stray parenthesis.
            if self.peek_at(1) == Some(')') && b.words.len() == 1 {
                self.pos += 2;
                b.words.clear();
                return Ok(());
            }
            return Err(ParseError::Unsupported(
                "a parenthesis after a command word",
            ));
        }
        if self.peek_at(1) == Some('(') {
            // `(( arithmetic ))`: kept as one word so no rule but an explicit one allows it.
            self.pos += 2;
            let body = self.arithmetic_body()?;
            b.word.push_special(&format!("(({body}))"), false, false);
            return Ok(());
        }
        self.pos += 1;
        self.nested(|p| p.parse_list(Some(')')))
    }

    /// Reads the inside of `((…))` or `$((…))`, after the opening parentheses, through the closing
    /// `))`.
    fn arithmetic_body(&mut self) -> Result<String, ParseError> {
        let mut depth = 0usize;
        let mut body = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(ParseError::Unbalanced('('));
            };
            self.pos += 1;
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    if self.peek() == Some(')') {
                        self.pos += 1;
                        break;
                    }
                    return Err(ParseError::Unbalanced(')'));
                }
                ')' => depth -= 1,
                '$' if self.peek() == Some('(') => {
                    return Err(ParseError::Unsupported(
                        "a command substitution inside arithmetic",
                    ));
                }
                '`' => {
                    return Err(ParseError::Unsupported(
                        "a command substitution inside arithmetic",
                    ));
                }
                _ => {}
            }
            body.push(c);
        }
        Ok(body)
    }

    fn redirect(&mut self, b: &mut Builder) -> Result<(), ParseError> {
        // A word of digits right before the operator is its file descriptor (`2>`), not an
        // argument; any other word ends here (`echo a>b` is `echo a` writing `b`).
        if b.word.started
            && !b.word.quoted
            && !b.word.text.is_empty()
            && b.word.text.chars().all(|c| c.is_ascii_digit())
        {
            b.word = WordBuf::default();
        } else {
            self.end_word(b)?;
        }
        const OPS: &[&str] = &["<<<", "<<-", "<<", "<>", "<&", "<", ">>", ">|", ">&", ">"];
        let op = OPS
            .iter()
            .find(|op| {
                op.chars()
                    .enumerate()
                    .all(|(i, c)| self.peek_at(i) == Some(c))
            })
            .copied()
            .unwrap_or(">");
        self.pos += op.len();
        self.set_redirect(b, op)
    }

    fn set_redirect(&mut self, b: &mut Builder, op: &str) -> Result<(), ParseError> {
        if let Some(prev) = b.pending_redirect.take() {
            return Err(ParseError::MissingRedirectTarget(prev));
        }
        b.pending_redirect = Some(op.to_string());
        Ok(())
    }

    fn single_quoted(&mut self, word: &mut WordBuf) -> Result<(), ParseError> {
        loop {
            match self.peek() {
                None => return Err(ParseError::UnterminatedQuote('\'')),
                Some('\'') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(c) => {
                    self.pos += 1;
                    word.text.push(c);
                }
            }
        }
    }

    /// Reads double-quoted text up to `end` (or to the end of input for a here-document body),
    /// following the substitutions inside it.
    fn double_quoted(&mut self, word: &mut WordBuf, end: Option<char>) -> Result<(), ParseError> {
        loop {
            let Some(c) = self.peek() else {
                return match end {
                    Some(e) => Err(ParseError::UnterminatedQuote(e)),
                    None => Ok(()),
                };
            };
            if Some(c) == end {
                self.pos += 1;
                return Ok(());
            }
            match c {
                '\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some('\n') => self.pos += 1,
                        Some(n @ ('$' | '`' | '"' | '\\')) => {
                            self.pos += 1;
                            word.text.push(n);
                        }
                        Some(n) => {
                            self.pos += 1;
                            word.text.push('\\');
                            word.text.push(n);
                        }
                        None => return Err(ParseError::UnterminatedQuote('"')),
                    }
                }
                '$' => self.dollar(word, true)?,
                '`' => self.backtick(word)?,
                _ => {
                    self.pos += 1;
                    word.text.push(c);
                }
            }
        }
    }

    /// Handles a `$`: command substitution, arithmetic, parameter expansion, `$'…'` or a literal.
    fn dollar(&mut self, word: &mut WordBuf, in_double_quotes: bool) -> Result<(), ParseError> {
        self.pos += 1;
        match self.peek() {
            Some('(') if self.peek_at(1) == Some('(') => {
                self.pos += 2;
                let body = self.arithmetic_body()?;
                word.push_special(&format!("$(({body}))"), false, true);
            }
            Some('(') => {
                self.pos += 1;
                self.nested(|p| p.parse_list(Some(')')))?;
                word.push_special("$(…)", false, true);
            }
            Some('{') => {
                self.pos += 1;
                let mut depth = 0usize;
                let mut body = String::new();
                loop {
                    let Some(c) = self.peek() else {
                        return Err(ParseError::Unbalanced('{'));
                    };
                    self.pos += 1;
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        '`' | '\'' | '"' | '\\' => {
                            return Err(ParseError::Unsupported(
                                "quotes or substitutions inside `${…}`",
                            ));
                        }
                        '$' if self.peek() == Some('(') => {
                            return Err(ParseError::Unsupported(
                                "a command substitution inside `${…}`",
                            ));
                        }
                        _ => {}
                    }
                    body.push(c);
                }
                word.push_special(&format!("${{{body}}}"), false, true);
            }
            Some('\'') if !in_double_quotes => {
                // ANSI-C quoting can spell any program name (`$'\x72m'` is `rm`): the word counts
                // as an expansion so it is never matched as plain text.
                self.pos += 1;
                let mut body = String::new();
                loop {
                    match self.peek() {
                        None => return Err(ParseError::UnterminatedQuote('\'')),
                        Some('\\') => {
                            body.push('\\');
                            self.pos += 1;
                            if let Some(n) = self.peek() {
                                body.push(n);
                                self.pos += 1;
                            }
                        }
                        Some('\'') => {
                            self.pos += 1;
                            break;
                        }
                        Some(c) => {
                            body.push(c);
                            self.pos += 1;
                        }
                    }
                }
                word.push_special(&body, true, true);
            }
            Some('"') if !in_double_quotes => {
                // `$"…"` is a translatable string: read it as an ordinary double-quoted one.
                self.pos += 1;
                word.mark_quoted();
                self.double_quoted(word, Some('"'))?;
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let mut name = String::from("$");
                while let Some(c) = self
                    .peek()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    name.push(c);
                    self.pos += 1;
                }
                word.push_special(&name, false, true);
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.pos += 1;
                word.push_special(&format!("${c}"), false, true);
            }
            _ => word.push('$'),
        }
        Ok(())
    }

    fn backtick(&mut self, word: &mut WordBuf) -> Result<(), ParseError> {
        self.pos += 1;
        let mut inner = String::new();
        loop {
            match self.peek() {
                None => return Err(ParseError::UnterminatedQuote('`')),
                Some('`') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(n @ ('`' | '\\' | '$')) => inner.push(n),
                        Some(n) => {
                            inner.push('\\');
                            inner.push(n);
                        }
                        None => return Err(ParseError::UnterminatedQuote('`')),
                    }
                    self.pos += 1;
                }
                Some(c) => {
                    self.pos += 1;
                    inner.push(c);
                }
            }
        }
        let cmds = parse_raw(&inner, self.depth + 1)?;
        self.out.extend(cmds);
        word.push_special("`…`", false, true);
        Ok(())
    }

    /// Ends the current word, giving it to a waiting redirection or to the command.
    fn end_word(&mut self, b: &mut Builder) -> Result<(), ParseError> {
        let Some(word) = b.word.take() else {
            return Ok(());
        };
        match b.pending_redirect.take() {
            Some(op) => {
                if op == "<<" || op == "<<-" {
                    self.heredocs.push(PendingHeredoc {
                        delimiter: word.text.clone(),
                        literal: word.quoted,
                        strip_tabs: op == "<<-",
                    });
                }
                b.redirects.push(Redirect { op, target: word });
            }
            None => b.words.push(word),
        }
        Ok(())
    }

    /// Ends the current command at a separator.
    fn finish(&mut self, b: &mut Builder) -> Result<(), ParseError> {
        self.end_word(b)?;
        if let Some(op) = b.pending_redirect.take() {
            return Err(ParseError::MissingRedirectTarget(op));
        }
        let words = std::mem::take(&mut b.words);
        let redirects = std::mem::take(&mut b.redirects);
        if let Some(mut cmd) = strip_keywords(words)? {
            cmd.redirects = redirects;
            if !cmd.is_empty() {
                self.out.push(cmd);
            }
        } else if !redirects.is_empty() {
            self.out.push(SubCommand {
                redirects,
                ..SubCommand::default()
            });
        }
        Ok(())
    }

    /// Reads the bodies of the here-documents opened on the line that just ended.
    fn read_heredocs(&mut self) -> Result<(), ParseError> {
        for doc in std::mem::take(&mut self.heredocs) {
            let mut body = String::new();
            let mut terminated = false;
            while self.pos < self.chars.len() {
                let start = self.pos;
                while self.peek().is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
                let line: String = self.chars[start..self.pos].iter().collect();
                if self.peek() == Some('\n') {
                    self.pos += 1;
                }
                let candidate = if doc.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if candidate == doc.delimiter {
                    terminated = true;
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            if !terminated {
                return Err(ParseError::UnterminatedHeredoc(doc.delimiter));
            }
            if !doc.literal {
                // An unquoted here-document expands `$(…)` and backticks like double quotes do.
                let mut inner = Parser {
                    chars: body.chars().collect(),
                    pos: 0,
                    depth: self.depth + 1,
                    heredocs: Vec::new(),
                    out: Vec::new(),
                };
                let mut sink = WordBuf::default();
                inner.double_quoted(&mut sink, None)?;
                self.out.extend(inner.out);
            }
        }
        Ok(())
    }
}

/// Words that open or close a compound command. They are dropped so the command inside is what
/// gets checked (`if ! grep -q x f; then rm f; fi` checks `grep -q x f` and `rm f`).
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "coproc",
];

fn is_keyword(word: &Word, keyword: &str) -> bool {
    !word.quoted && !word.dynamic && word.text == keyword
}

/// Turns the words of one command into a [`SubCommand`], dropping compound-command keywords.
/// `None` when nothing runs (a `for` header, a lone `fi`).
fn strip_keywords(mut words: Vec<Word>) -> Result<Option<SubCommand>, ParseError> {
    while let Some(first) = words.first() {
        if KEYWORDS.iter().any(|k| is_keyword(first, k)) {
            words.remove(0);
        } else if is_keyword(first, "time") {
            words.remove(0);
            if words.first().is_some_and(|w| is_keyword(w, "-p")) {
                words.remove(0);
            }
        } else if is_keyword(first, "function") {
            // `function name { … }` / `function name() { … }`: the definition runs nothing.
            words.drain(..words.len().min(2));
        } else if is_keyword(first, "for") || is_keyword(first, "select") {
            // `for x in a b c`: a loop header; substitutions in it were already collected.
            return Ok(None);
        } else if is_keyword(first, "case") {
            return Err(ParseError::Unsupported("`case`"));
        } else {
            break;
        }
    }
    Ok(Some(SubCommand::from_words(words)))
}

/// Shells whose `-c` argument is a script.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "su"];

/// Pushes `cmd` and, for commands that run another command, that inner command too (recursively).
fn expand_inner(
    cmd: SubCommand,
    depth: usize,
    out: &mut Vec<SubCommand>,
) -> Result<(), ParseError> {
    if depth > MAX_DEPTH {
        return Err(ParseError::TooDeep);
    }
    let inner = inner_commands(&cmd, depth)?;
    out.push(cmd);
    for c in inner {
        expand_inner(c, depth + 1, out)?;
    }
    Ok(())
}

fn opaque(words: &[Word]) -> SubCommand {
    SubCommand {
        opaque: true,
        ..SubCommand::from_words(words.to_vec())
    }
}

/// The commands `cmd` runs on its behalf.
fn inner_commands(cmd: &SubCommand, depth: usize) -> Result<Vec<SubCommand>, ParseError> {
    let Some(program) = cmd.words.first() else {
        return Ok(Vec::new());
    };
    if program.dynamic {
        return Ok(Vec::new());
    }
    let name = program.text.rsplit('/').next().unwrap_or(&program.text);
    let args = &cmd.words[1..];
    let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
    let after = |i: usize| -> Vec<SubCommand> {
        if i < args.len() {
            vec![SubCommand::from_words(args[i..].to_vec())]
        } else {
            Vec::new()
        }
    };
    let script = |word: &Word| -> Result<Vec<SubCommand>, ParseError> {
        if word.dynamic {
            Ok(vec![opaque(std::slice::from_ref(word))])
        } else {
            parse_raw(&word.text, depth + 1)
        }
    };
    Ok(match name {
        "eval" => {
            if args.iter().any(|w| w.dynamic) {
                vec![opaque(args)]
            } else {
                parse_raw(&texts.join(" "), depth + 1)?
            }
        }
        "watch" => {
            let i = skip_options(&texts, &["-n", "--interval", "-d"]);
            if args[i.min(args.len())..].iter().any(|w| w.dynamic) {
                vec![opaque(&args[i.min(args.len())..])]
            } else if i < texts.len() {
                parse_raw(&texts[i..].join(" "), depth + 1)?
            } else {
                Vec::new()
            }
        }
        _ if SHELLS.contains(&name) => {
            // `bash -c 'script'`, `bash -lc '…'`, `bash -c -e '…'`, `su -c '…'`: the script is
            // the first word after the option that is not itself an option.
            let c = texts.iter().position(|t| {
                t.starts_with('-') && !t.starts_with("--") && t.contains('c') || *t == "--command"
            });
            let script_word = c.and_then(|i| {
                args.iter()
                    .skip(i + 1)
                    .find(|w| w.dynamic || !w.text.starts_with('-'))
            });
            match script_word {
                Some(word) => script(word)?,
                None => Vec::new(),
            }
        }
        "sudo" | "doas" => {
            let i = skip_options(
                &texts,
                &["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U"],
            );
            after(skip_assignments(args, i))
        }
        "env" => {
            if texts
                .iter()
                .any(|t| *t == "-S" || t.starts_with("--split-string") || t.starts_with("-S"))
            {
                vec![opaque(args)]
            } else {
                let i = skip_options(&texts, &["-u", "--unset", "-C", "--chdir"]);
                // `env FOO=1 cmd` runs `FOO=1 cmd`: keep the assignments with it.
                after(i)
            }
        }
        "nice" => after(skip_options(&texts, &["-n", "--adjustment"])),
        "ionice" => after(skip_options(
            &texts,
            &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
        )),
        "stdbuf" => after(skip_options(&texts, &["-i", "-o", "-e"])),
        "nohup" | "setsid" | "builtin" | "unbuffer" => after(skip_options(&texts, &[])),
        "exec" => after(skip_options(&texts, &["-a"])),
        "command" => {
            if texts.iter().any(|t| *t == "-v" || *t == "-V") {
                Vec::new()
            } else {
                after(skip_options(&texts, &[]))
            }
        }
        "timeout" => {
            let i = skip_options(&texts, &["-s", "--signal", "-k", "--kill-after"]);
            after(i + 1) // the duration
        }
        "xargs" => after(skip_options(
            &texts,
            &[
                "-I",
                "-n",
                "-L",
                "-P",
                "-s",
                "-d",
                "-E",
                "-a",
                "--max-args",
                "--max-lines",
                "--max-procs",
                "--max-chars",
                "--delimiter",
                "--arg-file",
                "--replace",
                "--eof",
            ],
        )),
        "find" => {
            let mut inner = Vec::new();
            let mut i = 0;
            while i < args.len() {
                if matches!(texts[i], "-exec" | "-execdir" | "-ok" | "-okdir") {
                    let start = i + 1;
                    let end = (start..args.len())
                        .find(|&j| texts[j] == ";" || texts[j] == "+")
                        .unwrap_or(args.len());
                    if start < end {
                        inner.push(SubCommand::from_words(args[start..end].to_vec()));
                    }
                    i = end;
                }
                i += 1;
            }
            inner
        }
        _ => Vec::new(),
    })
}

/// Index of the first word after the options (`-x`, `--long`, `--long=v`, and the values of the
/// options named in `with_value`), stopping after `--`.
fn skip_options(words: &[&str], with_value: &[&str]) -> usize {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        if *w == "--" {
            return i + 1;
        }
        if !w.starts_with('-') || *w == "-" {
            break;
        }
        i += 1;
        if with_value.contains(w) {
            i += 1;
        }
    }
    i
}

fn skip_assignments(words: &[Word], mut i: usize) -> usize {
    while words.get(i).is_some_and(Word::is_assignment) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_are_not_assignments() {
        assert!(Word::plain("A=1").is_assignment());
        assert!(Word::plain("A+=1").is_assignment());
        assert!(!Word::plain("=1").is_assignment());
        assert!(!Word::plain("1A=1").is_assignment());
        assert!(!Word::plain("a-b=1").is_assignment());
    }
}
