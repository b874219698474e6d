//! Notices a model that streams the same span of text over and over (small models fall into
//! such loops and would otherwise write until their context is full).

/// The longest span looked for, in bytes.
const MAX_SPAN: usize = 1024;
/// A loop is this many bytes of one span repeated, at least.
const MIN_LOOP_BYTES: usize = 400;
/// And at least this many copies of it.
const MIN_COPIES: usize = 4;

/// When `text` ends in one span repeated at least [`MIN_COPIES`] times over at least
/// [`MIN_LOOP_BYTES`] bytes, the length to keep: the text before the loop and one copy of the span.
///
/// Costs little on ordinary text: each candidate span length fails at its first differing byte
/// from the end.
pub(super) fn looping_tail(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let len = bytes.len();
    if len < MIN_LOOP_BYTES {
        return None;
    }
    for span in 1..=MAX_SPAN.min(len / MIN_COPIES) {
        // The tail has period `span` as far back as this many bytes.
        let mut periodic = 0;
        while periodic + span < len && bytes[len - 1 - periodic] == bytes[len - 1 - periodic - span]
        {
            periodic += 1;
        }
        let covered = periodic + span;
        let copies = covered / span;
        if copies >= MIN_COPIES && covered >= MIN_LOOP_BYTES {
            // Whole copies counted from the end go, but the first.
            return Some(text.ceil_char_boundary(len - (copies - 1) * span));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_repeated_over_and_over_is_a_loop_and_one_copy_is_kept() {
        let text = format!("Here is the plan. {}", "I will read the file. ".repeat(30));
        let keep = looping_tail(&text).expect("a loop");
        assert_eq!(&text[..keep], "Here is the plan. I will read the file. ");
    }

    #[test]
    fn a_single_word_loop_is_found() {
        let text = format!("ok {}", "the ".repeat(200));
        assert!(looping_tail(&text).is_some());
    }

    #[test]
    fn ordinary_text_and_code_are_not_loops() {
        let code = (0..60)
            .map(|i| format!("    let value_{i} = compute({i});\n"))
            .collect::<String>();
        assert_eq!(looping_tail(&code), None);
        let prose = "The quick brown fox jumps over the lazy dog while the cat watches. ".repeat(3);
        assert_eq!(looping_tail(&prose), None, "three copies are not a loop");
        assert_eq!(looping_tail("}\n}\n}\n}\n"), None, "too short to matter");
    }

    #[test]
    fn multibyte_text_is_cut_on_a_character_boundary() {
        let text = "é loop ".repeat(100);
        let keep = looping_tail(&text).expect("a loop");
        assert!(text.is_char_boundary(keep));
    }
}
