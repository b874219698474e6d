//! Attachments of a prompt (`session.prompt {attachments}`): a file, some lines of it, or an
//! editor's unsaved text for it. Each is checked like a read by the model — the project boundary,
//! the secret-file patterns and the `read` rules of the settings — and becomes an `attachment`
//! part of the user's message, so every client shows it and the model reads it after the prompt.

use std::path::Path;

use totem_permission::{Access, AccessKind, Decision, PermissionState};
use totem_protocol::{Attachment, LineRange, Part};
use totem_tools::Boundary;

use super::DaemonError;
use crate::daemon::Daemon;

/// Bytes of one attachment.
pub const MAX_ATTACHMENT: usize = 100_000;
/// Bytes of every attachment of one prompt.
pub const MAX_ATTACHMENTS: usize = 300_000;

/// The attachments as message parts, or why one cannot be attached (nothing is sent then).
pub fn resolve(
    daemon: &Daemon,
    root: &Path,
    mode: &str,
    attachments: &[Attachment],
) -> Result<Vec<Part>, DaemonError> {
    if attachments.is_empty() {
        return Ok(Vec::new());
    }
    let settings = super::settings::load(daemon).map_err(DaemonError::Invalid)?;
    let policy = settings.policy(mode, &[]).map_err(DaemonError::Invalid)?;
    let boundary = Boundary::new(root).map_err(|e| {
        DaemonError::Invalid(format!(
            "cannot open the project folder {}: {e}",
            root.display()
        ))
    })?;
    let mut total = 0;
    let mut parts = Vec::new();
    for attachment in attachments {
        let why = |why: String| {
            format!(
                "cannot attach `{}`: {why}; nothing was sent",
                attachment.path
            )
        };
        let refuse = |text: String| DaemonError::Invalid(why(text));
        let resolved = boundary.resolve(&attachment.path).map_err(|e| {
            DaemonError::Path(why(match e {
                totem_tools::BoundaryError::Outside(_) => {
                    "it is outside the project; only files inside it can be attached".into()
                }
                other => other.to_string(),
            }))
        })?;
        let rel = resolved.rel;
        if policy.secrets().is_secret(&rel) {
            return Err(refuse(
                "it looks like a secret file (keys, .env…); paste what the model may see".into(),
            ));
        }
        let verdict = policy.evaluate(
            &Access::new(AccessKind::Read, "read", rel.clone()),
            &PermissionState::default(),
        );
        if verdict.decision == Decision::Deny {
            return Err(refuse(format!(
                "the settings do not let it be read ({})",
                verdict.explain()
            )));
        }
        if let Some(range) = attachment.range
            && (range.start_line == 0 || range.end_line < range.start_line)
        {
            return Err(refuse(format!(
                "lines {}–{} are not a range; lines count from 1 and the end is not before the start",
                range.start_line, range.end_line
            )));
        }
        let (text, unsaved) = match &attachment.text {
            Some(text) => (text.clone(), true),
            None => {
                let content = read_file(&resolved.abs).map_err(|e| match e {
                    Missing => DaemonError::Path(why("no such file".into())),
                    Unreadable(text) => refuse(text),
                })?;
                let text = match attachment.range {
                    Some(range) => lines(&content, range),
                    None => content,
                };
                (text, false)
            }
        };
        if text.len() > MAX_ATTACHMENT {
            return Err(refuse(format!(
                "it is too large ({} KB, the limit is {} KB); attach the lines that matter",
                text.len().div_ceil(1000),
                MAX_ATTACHMENT / 1000
            )));
        }
        total += text.len();
        if total > MAX_ATTACHMENTS {
            return Err(refuse(format!(
                "the attachments pass {} KB together; attach fewer or smaller parts",
                MAX_ATTACHMENTS / 1000
            )));
        }
        parts.push(Part::Attachment {
            path: rel,
            range: attachment.range,
            text,
            unsaved,
        });
    }
    Ok(parts)
}

/// Why a file cannot be attached.
enum ReadError {
    Missing,
    Unreadable(String),
}
use ReadError::{Missing, Unreadable};

/// A text file's content, or why it cannot be attached.
fn read_file(path: &Path) -> Result<String, ReadError> {
    let meta = std::fs::metadata(path).map_err(|_| Missing)?;
    read_text(path, meta).map_err(Unreadable)
}

fn read_text(path: &Path, meta: std::fs::Metadata) -> Result<String, String> {
    if meta.is_dir() {
        return Err("it is a folder; name the files in it".into());
    }
    if meta.len() > 10 * MAX_ATTACHMENT as u64 {
        return Err(format!(
            "it is too large ({} KB); attach the lines that matter",
            meta.len().div_ceil(1000)
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.contains(&0) {
        return Err("it is a binary file".into());
    }
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_string())
}

/// Lines `range` of `content` (past the end is cut to the end).
fn lines(content: &str, range: LineRange) -> String {
    let start = range.start_line.saturating_sub(1) as usize;
    let count = (range.end_line - range.start_line) as usize + 1;
    content
        .split_inclusive('\n')
        .skip(start)
        .take(count)
        .collect()
}

/// The text of a user message as the model reads it: its text parts, then each attachment in a
/// fence (longer than any backtick run inside) with its path and lines.
pub fn model_text(parts: &[Part]) -> String {
    let mut text = Part::joined_text(parts);
    for part in parts {
        let Part::Attachment {
            path,
            range,
            text: content,
            unsaved,
            ..
        } = part
        else {
            continue;
        };
        let lines = range
            .map(|r| format!(" (lines {}-{})", r.start_line, r.end_line))
            .unwrap_or_default();
        let unsaved = if *unsaved {
            ", unsaved editor text"
        } else {
            ""
        };
        let fence = fence_for(content);
        let lang = Path::new(path)
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("");
        let newline = if content.ends_with('\n') { "" } else { "\n" };
        text.push_str(&format!(
            "\n\nAttached file `{path}`{lines}{unsaved}:\n{fence}{lang}\n{content}{newline}{fence}"
        ));
    }
    text
}

/// A fence longer than any run of backticks in `content`.
fn fence_for(content: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in content.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat(longest.max(2) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut_from_the_file_and_fenced_for_the_model() {
        let content = "one\ntwo\nthree\nfour\n";
        let range = |start_line, end_line| LineRange {
            start_line,
            end_line,
        };
        assert_eq!(lines(content, range(2, 3)), "two\nthree\n");
        assert_eq!(lines(content, range(4, 9)), "four\n");
        let parts = vec![
            Part::Text {
                text: "explain".into(),
            },
            Part::Attachment {
                path: "src/a.js".into(),
                range: Some(LineRange {
                    start_line: 2,
                    end_line: 3,
                }),
                text: "let x = ```;\n".into(),
                unsaved: true,
            },
        ];
        assert_eq!(
            model_text(&parts),
            "explain\n\nAttached file `src/a.js` (lines 2-3), unsaved editor text:\n````js\nlet x = ```;\n````"
        );
    }
}
