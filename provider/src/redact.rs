//! Keeping keys out of text: a provider that echoes the key it was sent (a 401 body that quotes
//! the `Authorization` header) must not put it in an error message, the store or a log.

use std::borrow::Cow;

/// Secrets shorter than this are not looked for: a short string matches ordinary text.
pub const MIN_SECRET_LEN: usize = 8;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// `text` with every occurrence of each secret (at least [`MIN_SECRET_LEN`] bytes) replaced by
/// [`REDACTED`]. Borrows when nothing matched.
pub fn redact<'t, S: AsRef<str>>(text: &'t str, secrets: &[S]) -> Cow<'t, str> {
    let mut out = Cow::Borrowed(text);
    for secret in secrets {
        let secret = secret.as_ref().trim();
        if secret.len() < MIN_SECRET_LEN || !out.contains(secret) {
            continue;
        }
        out = Cow::Owned(out.replace(secret, REDACTED));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_replaced_and_short_strings_ignored() {
        let text = "invalid key sk-live-1234567890 (sk-live-1234567890)";
        assert_eq!(
            redact(text, &["sk-live-1234567890"]),
            "invalid key [redacted] ([redacted])"
        );
        assert!(matches!(redact(text, &["live"]), Cow::Borrowed(_)));
        assert!(matches!(redact(text, &[""; 0]), Cow::Borrowed(_)));
    }
}
