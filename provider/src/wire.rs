//! Serde helpers the stream decoders share, for reading provider events without copying.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};

/// An optional string borrowed from the event when it has no escapes. Serde borrows only a bare
/// `Cow<str>` field; inside an `Option` it copies every string, one allocation per field per
/// event (`"object":"chat.completion.chunk"`, `"type":"text_delta"`) on the hot path.
pub(crate) fn option_cow<'de: 'a, 'a, D>(deserializer: D) -> Result<Option<Cow<'a, str>>, D::Error>
where
    D: Deserializer<'de>,
{
    #[derive(Deserialize)]
    struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(Option::<Borrowed<'a>>::deserialize(deserializer)?.map(|text| text.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Event<'a> {
        #[serde(borrow, default, deserialize_with = "option_cow")]
        text: Option<Cow<'a, str>>,
    }

    #[test]
    fn option_cow_borrows_plain_strings_and_unescapes_others() {
        let plain: Event<'_> = serde_json::from_str(r#"{"text":"tok"}"#).unwrap();
        assert!(matches!(plain.text, Some(Cow::Borrowed("tok"))));
        let escaped: Event<'_> = serde_json::from_str(r#"{"text":"a\nb"}"#).unwrap();
        assert!(matches!(escaped.text.as_deref(), Some("a\nb")));
        let null: Event<'_> = serde_json::from_str(r#"{"text":null}"#).unwrap();
        assert!(null.text.is_none());
        let missing: Event<'_> = serde_json::from_str("{}").unwrap();
        assert!(missing.text.is_none());
    }
}
