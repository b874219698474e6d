//! The sentence that tells the user what a journal or table repair lost: when it was written and which
//! sessions it touched, looked up in the repaired store.

use std::collections::BTreeSet;

use super::Store;
use super::journal::Repair;

/// `2026-12-01 12:03:10 UTC`.
fn when(ms: u64) -> String {
    let format = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&format).ok())
        .map_or_else(|| format!("{ms} ms"), |t| format!("{t} UTC"))
}

impl Store {
    /// The session a message belongs to, from the message index.
    fn session_of_message(&self, message_id: &str) -> Option<String> {
        let value = self.message_ids.get(message_id).ok()??;
        Some(String::from_utf8_lossy(&value).into_owned())
    }
}

/// The sessions the lost writes touched, as `"title" (id)` where the title survived.
fn sessions(store: &Store, repair: &Repair) -> Vec<String> {
    let mut ids = BTreeSet::new();
    for id in &repair.ids {
        let session = if id.starts_with("ses_") {
            Some(id.clone())
        } else if id.starts_with("msg_") {
            store.session_of_message(id)
        } else {
            store.get_run(id).ok().flatten().map(|run| run.session_id)
        };
        ids.extend(session);
    }
    ids.into_iter()
        .map(|id| match store.get_session(&id).ok().flatten() {
            Some(record) => format!("\"{}\" ({id})", record.session.title),
            None => id,
        })
        .collect()
}

/// What to tell the user about a repair at open.
pub fn describe(store: &Store, repair: &Repair) -> String {
    if repair.regions == 0 {
        return format!(
            "A table file of the store ({}) was damaged on disk; the store was rebuilt and nothing was lost. The disk may be failing: take a backup (`totem store backup FILE`). A copy of the damaged files is in {}; delete it once you no longer need it.",
            repair.tables.join(", "),
            repair.copy.display()
        );
    }
    let what = format!(
        "Part of the store ({}) was damaged on disk and could not be read ({} stretch{}, {} bytes); everything readable around it was kept",
        repair.files.join(", "),
        repair.regions,
        if repair.regions == 1 { "" } else { "es" },
        repair.bytes
    );
    let time = match (repair.from, repair.to) {
        (Some(from), Some(to)) if from == to => format!(" It was written at {}.", when(from)),
        (Some(from), Some(to)) => {
            format!(" It was written between {} and {}.", when(from), when(to))
        }
        (Some(from), None) => format!(" It was written after {}.", when(from)),
        (None, Some(to)) => format!(" It was written before {}.", when(to)),
        (None, None) => " When it was written cannot be told.".to_string(),
    };
    let sessions = sessions(store, repair);
    let touched = if sessions.is_empty() {
        " Which sessions it touched cannot be told; check your latest sessions.".to_string()
    } else {
        format!(
            " It touched session{} {}: the last messages or events there may be missing.",
            if sessions.len() == 1 { "" } else { "s" },
            sessions.join(", ")
        )
    };
    format!(
        "{what}.{time}{touched} A copy of the damaged files is in {}; delete it once you no longer need it.",
        repair.copy.display()
    )
}
