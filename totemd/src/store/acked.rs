//! The last stored event of each session, kept outside the journal (`store/acked`), so that a
//! journal that lost its tail is found at the next start. A journal cut at a batch boundary or
//! zeroed from some point on (a power cut, a disk that loses writes) reads as whole: fjall and the
//! journal check keep what is left without a word. This file says how far each session had
//! got; a session whose stored events now end below that lost what came after.
//!
//! The daemon rewrites it (to a temp file, synced, then renamed) about once a second while
//! something new was stored, and when it stops; so a loss of only the last second's writes may
//! go unseen, but a lost tail reaching further back is reported.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::Store;

const FILE: &str = "acked";

fn path(store: &Path) -> PathBuf {
    store.join(FILE)
}

/// The marks as last written: session id → number of its newest stored event.
pub fn read(store: &Path) -> BTreeMap<String, u64> {
    let Ok(text) = std::fs::read_to_string(path(store)) else {
        return BTreeMap::new();
    };
    text.lines()
        .filter_map(|line| {
            let (id, seq) = line.split_once(' ')?;
            Some((id.to_string(), seq.trim().parse().ok()?))
        })
        .collect()
}

/// Writes the marks durably: a crash leaves the old file or the new one.
pub fn write(store: &Path, marks: &BTreeMap<String, u64>) -> std::io::Result<()> {
    let mut text = String::new();
    for (id, seq) in marks {
        text.push_str(&format!("{id} {seq}\n"));
    }
    let temp = store.join(format!("{FILE}.tmp"));
    let mut file = std::fs::File::create(&temp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temp, path(store))
}

/// A session whose stored events end below its mark.
#[derive(Debug, Clone, PartialEq)]
pub struct Lost {
    /// The session.
    pub session_id: String,
    /// Its title, when the store still has the session.
    pub title: Option<String>,
    /// The newest event it had stored.
    pub marked: u64,
    /// The newest event the store holds now.
    pub found: u64,
}

/// The sessions that lost stored events since the marks were written. A session the store no
/// longer has at all is left out: it may have been deleted after the marks were written.
pub fn check(store: &Store, marks: &BTreeMap<String, u64>) -> Vec<Lost> {
    let mut lost = Vec::new();
    for (id, marked) in marks {
        let Ok(Some(record)) = store.get_session(id) else {
            continue;
        };
        let found = store.last_event_seq(id).unwrap_or(0);
        if found < *marked {
            lost.push(Lost {
                session_id: id.clone(),
                title: Some(record.session.title),
                marked: *marked,
                found,
            });
        }
    }
    lost
}

/// What to tell the user about lost tails.
pub fn describe(lost: &[Lost]) -> String {
    let sessions: Vec<String> = lost
        .iter()
        .map(|l| match &l.title {
            Some(title) => format!(
                "\"{title}\" ({}: events up to #{} had been saved, #{} is the last one left)",
                l.session_id, l.marked, l.found
            ),
            None => l.session_id.clone(),
        })
        .collect();
    format!(
        "The store lost the end of what it had saved (its journal was cut short or zeroed, as after a power cut or on a disk that loses writes); the last messages or events of session{} {} are missing. The disk may be failing: take a backup (`totem store backup FILE`).",
        if lost.len() == 1 { "" } else { "s" },
        sessions.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_written_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).is_empty());
        let marks: BTreeMap<String, u64> = [("ses_a".to_string(), 12), ("ses_b".to_string(), 3)]
            .into_iter()
            .collect();
        write(dir.path(), &marks).unwrap();
        assert_eq!(read(dir.path()), marks);
    }
}
