//! `read`: a file's lines, numbered, a window at a time.

use std::io::{BufRead, BufReader, Read as _};
use std::os::unix::fs::OpenOptionsExt;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::ToolContext;
use crate::fsutil;
use crate::tool::{Access, Plan, Tool, ToolError, ToolMeta, ToolOutput};

/// Lines shown when no limit is given.
pub const DEFAULT_LIMIT: usize = 2000;
/// Characters kept of one line.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes of text returned in one call.
pub const MAX_BYTES: usize = 50_000;
/// Images larger than this are described, not stored.
const MAX_IMAGE_BYTES: u64 = 10 << 20;
/// Files up to this size are read to the end to count their lines.
const COUNT_LIMIT: u64 = 32 << 20;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
/// Arguments of `read`.
pub struct ReadInput {
    /// File path
    pub path: String,
    /// First line (1-based)
    pub offset: Option<usize>,
    /// Max lines (0 or none: the default)
    pub limit: Option<usize>,
}

/// The `read` tool.
pub struct Read;

impl Tool for Read {
    const NAME: &'static str = "read";
    const DESCRIPTION: &'static str =
        "Read a text file; lines are numbered. Use offset/limit for long files.";
    type Input = ReadInput;

    fn plan(&self, input: &ReadInput, ctx: &ToolContext) -> Result<Plan, ToolError> {
        let resolved = ctx.resolve(&input.path)?;
        Ok(Plan {
            access: vec![Access::read(Self::NAME, resolved.rel)],
            ..Plan::default()
        })
    }

    async fn run(&self, input: ReadInput, ctx: &ToolContext) -> ToolOutput {
        let ctx = ctx.clone();
        fsutil::blocking(move || read(&input, &ctx)).await
    }
}

fn read(input: &ReadInput, ctx: &ToolContext) -> ToolOutput {
    let resolved = match ctx.resolve(&input.path) {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let rel = &resolved.rel;
    let meta = match std::fs::metadata(&resolved.abs) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let hint = fsutil::not_found_hint(ctx, &resolved.abs);
            return ToolOutput::error(format!(
                "file not found: {rel}.{hint} To create it, use write."
            ));
        }
        Err(e) => return ToolOutput::error(format!("cannot read {rel}: {e}")),
    };
    if meta.is_dir() {
        return ToolOutput::error(format!("{rel} is a directory; use list to see its files"));
    }
    if !meta.is_file() {
        return ToolOutput::error(format!(
            "{rel} is not a regular file (a FIFO, socket or device); read only reads files"
        ));
    }
    // Non-blocking open: a file swapped for a FIFO after the check above must not block.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(&resolved.abs);
    let mut file = match opened {
        Ok(f) => f,
        Err(e) => return ToolOutput::error(format!("cannot read {rel}: {e}")),
    };
    let mut head = vec![0u8; 8192];
    let n = match read_up_to(&mut file, &mut head) {
        Ok(n) => n,
        Err(e) => return ToolOutput::error(format!("cannot read {rel}: {e}")),
    };
    head.truncate(n);
    if let Some(mime) = image_type(&head) {
        return image(ctx, rel, &resolved.abs, mime, meta.len());
    }
    if head.contains(&0) {
        return ToolOutput::error(format!(
            "{rel} is a binary file ({} bytes); it cannot be shown as text",
            meta.len()
        ));
    }
    let reader = BufReader::new(std::io::Cursor::new(head).chain(file));
    numbered(reader, rel, input, meta.len())
}

fn read_up_to(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

fn image_type(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn image(ctx: &ToolContext, rel: &str, abs: &std::path::Path, mime: &str, size: u64) -> ToolOutput {
    let text = format!("{rel} is an image ({mime}, {size} bytes); it cannot be shown as text");
    if size > MAX_IMAGE_BYTES {
        return ToolOutput::ok(text);
    }
    match std::fs::read(abs) {
        Ok(bytes) => ToolOutput::ok(text).with_meta(ToolMeta {
            blob: Some(ctx.blobs.put(&bytes)),
            image: Some(mime.to_string()),
            ..ToolMeta::default()
        }),
        Err(e) => ToolOutput::error(format!("cannot read {rel}: {e}")),
    }
}

fn numbered(mut reader: impl BufRead, rel: &str, input: &ReadInput, size: u64) -> ToolOutput {
    let first = input.offset.unwrap_or(1).max(1);
    // `limit: 0` is no limit given: small models send it for "all of it".
    let limit = input.limit.filter(|l| *l > 0).unwrap_or(DEFAULT_LIMIT);
    let mut out = String::new();
    let mut line_no = 0usize;
    let mut last_shown = 0usize;
    let mut cut_lines = false;
    let mut capped = false;
    let mut raw = Vec::new();
    loop {
        raw.clear();
        match reader.read_until(b'\n', &mut raw) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return ToolOutput::error(format!("cannot read {rel}: {e}")),
        }
        line_no += 1;
        if line_no < first {
            continue;
        }
        let done = capped || line_no >= first + limit;
        if done {
            // Keep counting lines for the footer, but not through a huge file.
            if size > COUNT_LIMIT {
                line_no = 0;
                break;
            }
            continue;
        }
        let text = String::from_utf8_lossy(&raw);
        let text = text.trim_end_matches(['\n', '\r']);
        let line = if text.chars().count() > MAX_LINE_CHARS {
            cut_lines = true;
            let kept: String = text.chars().take(MAX_LINE_CHARS).collect();
            format!("{kept}… (line cut)")
        } else {
            text.to_string()
        };
        let entry = format!("{line_no:>5}\t{line}\n");
        if out.len() + entry.len() > MAX_BYTES && last_shown > 0 {
            capped = true;
            continue;
        }
        out.push_str(&entry);
        last_shown = line_no;
    }
    let total = line_no;
    if total == 0 && size == 0 {
        return ToolOutput::ok(format!("{rel} is empty"));
    }
    if last_shown == 0 {
        return ToolOutput::error(format!(
            "offset {first} is past the end of {rel} ({total} lines)"
        ));
    }
    let more = total == 0 || last_shown < total;
    let mut meta = ToolMeta::default();
    if more || first > 1 {
        let of = if total == 0 {
            "more".to_string()
        } else {
            total.to_string()
        };
        out.push_str(&format!("(lines {first}-{last_shown} of {of}"));
        if capped {
            out.push_str(&format!("; output capped at {} KB", MAX_BYTES / 1000));
        }
        if more {
            out.push_str(&format!("; continue with offset={}", last_shown + 1));
            meta.truncated = true;
        }
        out.push_str(")\n");
    }
    if cut_lines {
        out.push_str(&format!(
            "(lines longer than {MAX_LINE_CHARS} characters were cut)\n"
        ));
        meta.truncated = true;
    }
    ToolOutput::ok(out).with_meta(meta)
}
