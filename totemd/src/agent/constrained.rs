//! The answer of a constrained step, shown as it streams. The server holds each answer to one
//! JSON object: a tool call (`{"name": …, "arguments": …}`, shown as the call part once it is
//! whole) or the final answer (`{"answer": "…"}`), whose text is shown as it arrives, unescaped,
//! without the JSON around it. Anything else (a server that ignored the schema) is shown as it
//! came.

/// Turns the streamed JSON of a constrained answer into the text to show.
#[derive(Debug, Default)]
pub(super) struct AnswerText {
    state: State,
    /// Text seen while the shape is not known yet.
    held: String,
    /// A `\uXXXX` escape being read (the digits so far), or a high surrogate waiting for its
    /// low half.
    escape: Escape,
}

#[derive(Debug, Default, PartialEq)]
enum State {
    /// Before the object's first key is known.
    #[default]
    Opening,
    /// Inside the answer's string.
    Answer,
    /// After the answer's closing quote, or in a call: nothing more to show.
    Quiet,
    /// Not the JSON expected: everything is shown as it came.
    Verbatim,
}

#[derive(Debug, Default)]
enum Escape {
    #[default]
    None,
    /// After a backslash.
    Started,
    /// `\u` and these hex digits.
    Unicode(String),
    /// A high surrogate read; its low half must follow as `\uXXXX`.
    Surrogate(u32, String),
}

/// The opening of an answer object, whitespace removed.
const ANSWER_OPENING: &str = "{\"answer\":\"";

impl AnswerText {
    /// Takes the next piece of the stream; returns the text to show for it.
    pub(super) fn push(&mut self, piece: &str) -> String {
        match self.state {
            State::Verbatim => piece.to_string(),
            State::Quiet => String::new(),
            State::Answer => self.answer_text(piece),
            State::Opening => {
                self.held.push_str(piece);
                let squeezed: String = self.held.chars().filter(|c| !c.is_whitespace()).collect();
                if squeezed.starts_with(ANSWER_OPENING) {
                    // The text after the opening quote is the answer's start.
                    let Some(start) = opening_end(&self.held) else {
                        return String::new();
                    };
                    let rest = self.held[start..].to_string();
                    self.held.clear();
                    self.state = State::Answer;
                    self.answer_text(&rest)
                } else if ANSWER_OPENING.starts_with(&squeezed) {
                    String::new()
                } else if squeezed.starts_with("{\"") {
                    // Another key: a tool call, shown as its part once whole.
                    self.state = State::Quiet;
                    String::new()
                } else if squeezed.is_empty() || squeezed == "{" {
                    String::new()
                } else {
                    self.state = State::Verbatim;
                    std::mem::take(&mut self.held)
                }
            }
        }
    }

    /// Whether the answer is a tool call or an answer object (not shown as it came).
    pub(super) fn is_json(&self) -> bool {
        matches!(self.state, State::Answer | State::Quiet)
    }

    /// The answer string's characters in `piece`, unescaped, up to its closing quote.
    fn answer_text(&mut self, piece: &str) -> String {
        let mut out = String::new();
        for c in piece.chars() {
            if self.state != State::Answer {
                break;
            }
            match std::mem::take(&mut self.escape) {
                Escape::None => match c {
                    '\\' => self.escape = Escape::Started,
                    '"' => self.state = State::Quiet,
                    c => out.push(c),
                },
                Escape::Started => match c {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'u' => self.escape = Escape::Unicode(String::new()),
                    c => out.push(c),
                },
                Escape::Unicode(mut digits) => {
                    digits.push(c);
                    if digits.len() < 4 {
                        self.escape = Escape::Unicode(digits);
                        continue;
                    }
                    match u32::from_str_radix(&digits, 16) {
                        Ok(high @ 0xD800..=0xDBFF) => {
                            self.escape = Escape::Surrogate(high, String::new());
                        }
                        Ok(code) => out.extend(char::from_u32(code)),
                        Err(_) => {}
                    }
                }
                Escape::Surrogate(high, mut seen) => {
                    seen.push(c);
                    // `\u` then four digits.
                    if seen.len() < 6 {
                        self.escape = Escape::Surrogate(high, seen);
                        continue;
                    }
                    let low = seen
                        .strip_prefix("\\u")
                        .and_then(|d| u32::from_str_radix(d, 16).ok())
                        .filter(|l| (0xDC00..=0xDFFF).contains(l));
                    if let Some(low) = low {
                        let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                        out.extend(char::from_u32(code));
                    }
                }
            }
        }
        out
    }
}

/// The byte offset just after the opening quote of the answer's value in `held` (which starts,
/// whitespace aside, with [`ANSWER_OPENING`]).
fn opening_end(held: &str) -> Option<usize> {
    let mut quotes = 0;
    for (i, c) in held.char_indices() {
        if c == '"' {
            quotes += 1;
            // `"answer"` holds two quotes; the third opens the value.
            if quotes == 3 {
                return Some(i + 1);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(pieces: &[&str]) -> (String, bool) {
        let mut answer = AnswerText::default();
        let text: String = pieces.iter().map(|p| answer.push(p)).collect();
        (text, answer.is_json())
    }

    #[test]
    fn the_answer_streams_unescaped_without_its_json() {
        assert_eq!(
            shown(&[
                "{",
                "\"ans",
                "wer\": \"Done",
                ": a \\\"b\\\"\\n",
                "c\\u00e9 \\ud83d",
                "\\ude00\"}"
            ]),
            ("Done: a \"b\"\nc\u{e9} \u{1f600}".to_string(), true)
        );
    }

    #[test]
    fn a_call_shows_nothing() {
        assert_eq!(
            shown(&["{\"name\": \"read\", ", "\"arguments\": {\"path\": \"a\"}}"]),
            (String::new(), true)
        );
    }

    #[test]
    fn text_that_is_not_the_json_shows_as_it_came() {
        assert_eq!(
            shown(&["Sure", ", here"]),
            ("Sure, here".to_string(), false)
        );
        assert_eq!(shown(&["  {", " x"]), ("  { x".to_string(), false));
    }
}
