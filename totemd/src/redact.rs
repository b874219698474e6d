//! Configured keys and tokens never reach a client, the store or the log, even when a provider
//! or a server echoes one back (a 401 body that quotes the key).
//!
//! Every key the daemon decrypts or reads from settings (provider keys, MCP headers and
//! environment values, its own MCP token) is registered here; [`text`] replaces each with
//! `[redacted]`. Events are redacted as they are emitted (the one path to clients and the
//! store), and the log through [`Writer`].

use std::borrow::Cow;
use std::sync::RwLock;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remembers `secret` so it is redacted from now on (short strings are ignored).
pub fn register(secret: &str) {
    let secret = secret.trim();
    if secret.len() < totem_provider::redact::MIN_SECRET_LEN {
        return;
    }
    let mut secrets = crate::util::write_lock(&SECRETS);
    if !secrets.iter().any(|s| s == secret) {
        secrets.push(secret.to_string());
    }
}

/// `text` without any registered secret.
pub fn text(text: &str) -> Cow<'_, str> {
    let secrets = crate::util::read_lock(&SECRETS);
    if secrets.is_empty() {
        return Cow::Borrowed(text);
    }
    match totem_provider::redact::redact(text, &secrets) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(s) => Cow::Owned(s),
    }
}

/// An event without registered secrets. Only events that carry text from outside (errors,
/// notices, finished parts) are looked at; deltas are covered by the part they end in.
pub fn event(kind: totem_protocol::EventKind) -> totem_protocol::EventKind {
    use totem_protocol::EventKind;
    let carries_text = matches!(
        kind,
        EventKind::RunFailed { .. } | EventKind::Notice { .. } | EventKind::PartDone { .. }
    );
    if !carries_text || SECRETS.read().map_or(true, |s| s.is_empty()) {
        return kind;
    }
    let Ok(json) = serde_json::to_string(&kind) else {
        return kind;
    };
    match text(&json) {
        Cow::Borrowed(_) => kind,
        Cow::Owned(clean) => serde_json::from_str(&clean).unwrap_or(kind),
    }
}

/// A part without registered secrets, before it is stored.
pub fn part(part: totem_protocol::Part) -> totem_protocol::Part {
    if SECRETS.read().map_or(true, |s| s.is_empty()) {
        return part;
    }
    let Ok(json) = serde_json::to_string(&part) else {
        return part;
    };
    match text(&json) {
        Cow::Borrowed(_) => part,
        Cow::Owned(clean) => serde_json::from_str(&clean).unwrap_or(part),
    }
}

/// A log writer that redacts each line before it reaches the file.
pub struct Writer<W>(pub W);

impl<W: std::io::Write> std::io::Write for Writer<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = String::from_utf8_lossy(buf);
        match text(&line) {
            Cow::Borrowed(_) => self.0.write_all(buf)?,
            Cow::Owned(clean) => self.0.write_all(clean.as_bytes())?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Makes a [`Writer`] around each writer `M` makes.
pub struct MakeWriter<M>(pub M);

impl<'a, M: tracing_subscriber::fmt::MakeWriter<'a>> tracing_subscriber::fmt::MakeWriter<'a>
    for MakeWriter<M>
{
    type Writer = Writer<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        Writer(self.0.make_writer())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secrets_leave_text_events_and_log_lines() {
        register("sk-test-redact-0123456789");
        assert_eq!(
            text("bad key sk-test-redact-0123456789"),
            "bad key [redacted]"
        );
        let notice = event(totem_protocol::EventKind::Notice {
            run_id: None,
            level: totem_protocol::NoticeLevel::Error,
            text: "echo: sk-test-redact-0123456789".into(),
        });
        assert!(
            matches!(notice, totem_protocol::EventKind::Notice { text, .. } if text == "echo: [redacted]")
        );
        let mut out = Vec::new();
        std::io::Write::write_all(&mut Writer(&mut out), b"x sk-test-redact-0123456789\n")
            .unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&out), "x [redacted]\n");
    }
}
