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

/// The longest cycle of calls looked for (A-B-C-A-B-C).
const MAX_CYCLE: usize = 4;
/// A cycle repeated this many times over ends the run.
const CYCLE_COPIES: usize = 3;

/// Notices a model going round in a cycle: the same few calls with the same results, over and
/// over (A-B-A-B…), which the guard against the same call in a row does not see.
#[derive(Debug, Default)]
pub(super) struct CycleGuard {
    /// Each call of the run as (tool, arguments, a hash of its result).
    calls: Vec<(String, String, u64)>,
}

impl CycleGuard {
    /// Records a call and its result; returns the calls of the cycle (in order, as `name args`)
    /// when the run's last calls are one cycle of 2 to [`MAX_CYCLE`] calls made
    /// [`CYCLE_COPIES`] times with the same results.
    pub(super) fn record(
        &mut self,
        name: &str,
        arguments: &serde_json::Value,
        result: &str,
    ) -> Option<Vec<String>> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        // Digits left out: "up to date in 470ms" and "up to date in 646ms" are the same result
        // (Qwen2.5-Coder 1.5B ran `npm install` and a missing binary in turn 36 times).
        for c in result.chars().filter(|c| !c.is_ascii_digit()) {
            c.hash(&mut hasher);
        }
        self.calls
            .push((name.to_string(), arguments.to_string(), hasher.finish()));
        let n = self.calls.len();
        for period in 2..=MAX_CYCLE {
            let span = period * CYCLE_COPIES;
            if n < span {
                break;
            }
            let tail = &self.calls[n - span..];
            let cycle = &tail[..period];
            // A real cycle: not one call repeated (that is the other guard's).
            if cycle.iter().all(|c| *c == cycle[0]) {
                continue;
            }
            if tail.chunks(period).all(|chunk| chunk == cycle) {
                return Some(
                    cycle
                        .iter()
                        .map(|(name, arguments, _)| {
                            let shown: String = arguments.chars().take(60).collect();
                            let more = if arguments.chars().count() > 60 {
                                "…"
                            } else {
                                ""
                            };
                            format!("{name} {shown}{more}")
                        })
                        .collect(),
                );
            }
        }
        None
    }
}

#[cfg(test)]
mod cycle_tests {
    use super::CycleGuard;
    use serde_json::json;

    #[test]
    fn an_alternation_with_the_same_results_is_a_cycle() {
        let mut guard = CycleGuard::default();
        let lint = json!({"command": "npm run lint"});
        let link = json!({"command": "npm link"});
        let mut found = None;
        for _ in 0..3 {
            assert!(found.is_none());
            guard.record("bash", &lint, "missing script: lint");
            found = guard.record("bash", &link, "linked");
        }
        assert_eq!(
            found,
            Some(vec![
                r#"bash {"command":"npm run lint"}"#.to_string(),
                r#"bash {"command":"npm link"}"#.to_string()
            ])
        );
    }

    #[test]
    fn results_that_differ_only_in_numbers_are_the_same() {
        let mut guard = CycleGuard::default();
        let install = json!({"command": "npm install"});
        let run = json!({"command": "node_modules/.bin/totaljs run"});
        let mut found = None;
        for ms in [470, 646, 1200] {
            assert!(found.is_none());
            guard.record("bash", &run, "No such file or directory\n[exit code 127]");
            found = guard.record("bash", &install, &format!("up to date in {ms}ms"));
        }
        assert!(found.is_some(), "a cycle whatever the timings");
    }

    #[test]
    fn changing_results_or_arguments_are_no_cycle() {
        let mut guard = CycleGuard::default();
        for i in 0..6 {
            let version = ["one", "two", "three", "four", "five", "six"][i];
            let found = guard.record("read", &json!({"path": "a"}), version);
            assert!(found.is_none());
            assert!(guard.record("edit", &json!({"n": i}), "ok").is_none());
        }
    }
}
