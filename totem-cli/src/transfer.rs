//! `totem export` and `totem import`: a session written out as Markdown (to read or share) or as
//! JSON (to keep, move to another machine, and read back as a new session).
//!
//! The JSON form is `{format: "totem-session", version: 2, session, messages, compaction?}`,
//! where `session`, `messages` and `compaction` are what `session.get` and `session.messages`
//! return: messages keep their marks (`undone`, `compacted`) and `compaction` is the summary the
//! model is sent in place of the compacted ones. `totem import` sends the messages' roles, times,
//! parts and marks with the summary to `session.import` and leaves the ids to the daemon, so the
//! new session's model sees the conversation the old one's did. Version 1 (before the marks) is
//! still read.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use totem_protocol::{
    CompactionSummary, ImportedMessage, Message, Part, Role, Session, SessionImportParams,
    SessionMessagesParams, method,
};

use crate::cli::{ExportArgs, ExportFormat, ImportArgs};
use crate::daemon::{self, Connection, Endpoint};
use crate::exit::{Exit, UsageError};
use crate::project::HomeFolder;

/// The `format` field of the JSON form, so that another file is refused with a clear sentence.
const FORMAT: &str = "totem-session";
const VERSION: u32 = 2;

#[derive(Serialize, Deserialize)]
struct Exported {
    format: String,
    version: u32,
    session: serde_json::Value,
    messages: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    compaction: Option<CompactionSummary>,
}

/// `totem export SESSION`.
pub async fn export(endpoint: &Endpoint, args: &ExportArgs) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start(endpoint).await?;
    let session = crate::project::get_session(&connection, &args.session).await?;
    let (messages, compaction) = all_messages(&connection, &session.id).await?;
    let text = match args.format {
        ExportFormat::Json => {
            let exported = Exported {
                format: FORMAT.into(),
                version: VERSION,
                session: serde_json::to_value(&session)?,
                messages: messages
                    .iter()
                    .map(serde_json::to_value)
                    .collect::<Result<_, _>>()?,
                compaction,
            };
            serde_json::to_string_pretty(&exported)? + "\n"
        }
        ExportFormat::Md => markdown(&session, &messages, compaction.as_ref()),
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "Wrote session {} ({} messages) to {}.",
                session.id,
                messages.len(),
                path.display()
            );
        }
        None => print!("{text}"),
    }
    Ok(Exit::Success)
}

/// `totem import FILE`.
pub async fn import(endpoint: &Endpoint, args: &ImportArgs) -> anyhow::Result<Exit> {
    let exported = read_export(&args.file)?;
    let title = args.title.clone().or_else(|| {
        exported
            .session
            .get("title")
            .and_then(|t| t.as_str())
            .map(str::to_string)
    });
    let messages = exported
        .messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            serde_json::from_value::<ImportedMessage>(m).map_err(|e| {
                UsageError(format!(
                    "message {} of {} is not a Totem message: {e}",
                    i + 1,
                    args.file.display()
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let connection = daemon::connect_or_start(endpoint).await?;
    let project =
        crate::project::open(&connection, args.dir.as_deref(), HomeFolder::Refuse).await?;
    let session = connection
        .client
        .call::<method::SessionImport>(SessionImportParams {
            project_id: project.id.clone(),
            title,
            messages,
            compaction: exported.compaction,
        })
        .await?;
    println!(
        "Imported {} messages into session {} (\"{}\") in {}. Continue it with `totem attach --session {}`.",
        session.message_count,
        session.id,
        crate::format::one_line(&session.title, 80),
        project.path,
        session.id
    );
    Ok(Exit::Success)
}

fn read_export(file: &Path) -> anyhow::Result<Exported> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| UsageError(format!("cannot read {}: {e}", file.display())))?;
    let exported: Exported = serde_json::from_str(&text).map_err(|e| {
        UsageError(format!(
            "{} is not a session written by `totem export --format json`: {e}",
            file.display()
        ))
    })?;
    if exported.format != FORMAT {
        return Err(UsageError(format!(
            "{} is not a Totem session (its format is \"{}\")",
            file.display(),
            exported.format
        ))
        .into());
    }
    if exported.version > VERSION {
        return Err(UsageError(format!(
            "{} was written by a newer Totem (format version {}); update totem to import it",
            file.display(),
            exported.version
        ))
        .into());
    }
    Ok(exported)
}

/// Every stored message of a session, oldest first, with the compaction summary in force.
async fn all_messages(
    connection: &Connection,
    session_id: &str,
) -> anyhow::Result<(Vec<Message>, Option<CompactionSummary>)> {
    let mut out = Vec::new();
    let mut compaction = None;
    let mut after_seq = 0;
    loop {
        let page = connection
            .client
            .call::<method::SessionMessages>(SessionMessagesParams {
                session_id: session_id.to_string(),
                after_seq,
                limit: Some(1000),
                newest: false,
            })
            .await?;
        out.extend(page.messages);
        compaction = compaction.or(page.compaction);
        match page.next_after_seq {
            Some(next) => after_seq = next,
            None => return Ok((out, compaction)),
        }
    }
}

/// The session as a Markdown document: a heading per message (saying when it is undone or
/// summarised), tool calls and results in fenced blocks, reasoning quoted, and the compaction
/// summary before the first message it does not cover.
fn markdown(
    session: &Session,
    messages: &[Message],
    compaction: Option<&CompactionSummary>,
) -> String {
    let mut out = format!(
        "# {}\n\nSession `{}`, {} messages, started {}.\n",
        session.title,
        session.id,
        messages.len(),
        date_time(session.created_at)
    );
    let mut summary = compaction;
    for message in messages {
        if !message.compacted
            && let Some(compaction) = summary.take()
        {
            out.push_str(&summary_section(compaction));
        }
        let who = match message.role {
            Role::User => "User",
            Role::Assistant => "Assistant",
        };
        let mark = match (message.undone, message.compacted) {
            (true, _) => " · undone",
            (false, true) => " · summarised",
            (false, false) => "",
        };
        out.push_str(&format!(
            "\n## {who} · {}{mark}\n",
            date_time(message.created_at)
        ));
        for part in &message.parts {
            out.push('\n');
            match part {
                Part::Text { text } => out.push_str(text.trim_end()),
                Part::Reasoning { text } => {
                    for line in text.trim_end().lines() {
                        out.push_str(&format!("> {line}\n"));
                    }
                    out.pop();
                }
                Part::ToolCall { tool, input, .. } => {
                    let input = serde_json::to_string_pretty(input).unwrap_or_default();
                    out.push_str(&format!(
                        "Tool call `{tool}`:\n\n{}",
                        fenced("json", &input)
                    ));
                }
                Part::ToolResult {
                    tool,
                    output,
                    is_error,
                    ..
                } => {
                    let what = if *is_error { "failed" } else { "result" };
                    out.push_str(&format!("`{tool}` {what}:\n\n{}", fenced("", output)));
                }
                Part::Attachment {
                    path, range, text, ..
                } => {
                    let lines = range
                        .map(|r| format!(" (lines {}–{})", r.start_line, r.end_line))
                        .unwrap_or_default();
                    out.push_str(&format!(
                        "Attached `{path}`{lines}:\n\n{}",
                        fenced("", text)
                    ));
                }
            }
            out.push('\n');
        }
    }
    if let Some(compaction) = summary {
        out.push_str(&summary_section(compaction));
    }
    out
}

fn summary_section(compaction: &CompactionSummary) -> String {
    format!(
        "\n## Summary of the earlier conversation\n\nThe model is sent this in place of the messages marked summarised.\n\n{}\n",
        compaction.summary.trim_end()
    )
}

/// `text` in a fenced block whose fence is longer than any backtick run inside it.
fn fenced(language: &str, text: &str) -> String {
    let longest = text
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or(0)
        .max(2);
    let fence = "`".repeat(longest + 1);
    format!("{fence}{language}\n{}\n{fence}", text.trim_end())
}

/// Unix milliseconds as `2026-12-01 18:30 UTC`.
fn date_time(ms: u64) -> String {
    let format = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute] UTC");
    i64::try_from(ms / 1000)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| t.format(format).ok())
        .unwrap_or_else(|| ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_longer_than_any_backtick_run_inside() {
        assert_eq!(fenced("", "a"), "```\na\n```");
        assert_eq!(fenced("js", "```x```"), "````js\n```x```\n````");
    }

    #[test]
    fn times_read_as_utc_dates() {
        assert_eq!(date_time(1_764_612_600_000), "2025-12-01 18:10 UTC");
    }
}
