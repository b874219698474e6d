//! Serde helpers the stream decoders share, for reading provider events without copying.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

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

/// Decodes one event (an SSE event's data or an NDJSON line). The bytes are checked to be UTF-8
/// once, as a whole, and then parsed as text: `from_slice` checks every string it borrows on its
/// own, which cost more than the rest of the parse for events made of short strings.
pub(crate) fn parse_event<'a, T: Deserialize<'a>>(data: &'a [u8]) -> Result<T, serde_json::Error> {
    let text = std::str::from_utf8(data).map_err(|e| {
        <serde_json::Error as serde::de::Error>::custom(format_args!("not UTF-8: {e}"))
    })?;
    serde_json::from_str(text)
}

/// A part of an event a decoder kept raw (`Option<&RawValue>`, skipped at the speed of
/// `IgnoredAny`), decoded once the event turns out to need it.
pub(crate) fn parse_raw<'a, T: Deserialize<'a>>(
    raw: Option<&'a RawValue>,
) -> Result<Option<T>, serde_json::Error> {
    raw.map(|raw| serde_json::from_str(raw.get())).transpose()
}

/// A JSON array that nearly always holds one element (`choices`, `candidates`, `parts`), decoded
/// without allocating for that one: a `Vec` would cost an allocation per event.
pub(crate) struct Few<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> Default for Few<T> {
    fn default() -> Self {
        Few {
            first: None,
            rest: Vec::new(),
        }
    }
}

impl<T> IntoIterator for Few<T> {
    type Item = T;
    type IntoIter = std::iter::Chain<std::option::IntoIter<T>, std::vec::IntoIter<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Few<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Elements<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for Elements<T> {
            type Value = Few<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Few<T>, A::Error> {
                let mut few = Few {
                    first: seq.next_element()?,
                    rest: Vec::new(),
                };
                if few.first.is_some() {
                    while let Some(element) = seq.next_element()? {
                        few.rest.push(element);
                    }
                }
                Ok(few)
            }
        }

        deserializer.deserialize_seq(Elements(PhantomData))
    }
}

/// A hand-written reader for the one event shape a provider streams for nearly every delta, so the
/// hot path skips serde's generic machinery. It accepts a strict subset of JSON: objects, arrays
/// walked by the caller, strings without escapes or control characters, and unsigned integers.
/// Every method answers `None` for anything else, and the caller then decodes the event with serde
/// as before — so the fast path can only ever agree with serde or step aside.
pub(crate) struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Scanner { text, at: 0 }
    }

    fn skip_space(&mut self) {
        let rest = self.text.as_bytes().get(self.at..).unwrap_or_default();
        self.at += rest
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .unwrap_or(rest.len());
    }

    /// The next byte after any whitespace, consumed.
    pub(crate) fn next(&mut self) -> Option<u8> {
        self.skip_space();
        let byte = *self.text.as_bytes().get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    /// Consumes `byte` (after any whitespace), or answers `None`.
    pub(crate) fn eat(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// A string with no escapes and no control characters, borrowed from the event.
    pub(crate) fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let rest = self.text.as_bytes().get(start..)?;
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        // Both ends are ASCII quotes, so they lie on character boundaries.
        let text = self.text.get(start..start + len)?;
        self.at = start + len + 1;
        Some(text)
    }

    /// An unsigned integer that fits a `u64`, written as JSON writes it (no sign, fraction,
    /// exponent or leading zero).
    pub(crate) fn uint(&mut self) -> Option<u64> {
        self.skip_space();
        let bytes = self.text.as_bytes();
        let start = self.at;
        let mut value: u64 = 0;
        while let Some(&digit @ b'0'..=b'9') = bytes.get(self.at) {
            value = value
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
            self.at += 1;
        }
        let digits = self.at - start;
        let leading_zero = digits > 1 && bytes.get(start) == Some(&b'0');
        let more = matches!(bytes.get(self.at), Some(b'.' | b'e' | b'E'));
        (digits > 0 && !leading_zero && !more).then_some(value)
    }

    /// An object whose every member `field` reads (given the key, positioned at the value).
    pub(crate) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.skip_space();
        if self.text.as_bytes().get(self.at) == Some(&b'}') {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            field(self, key)?;
            match self.next()? {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// An array of exactly one element, read by `element`.
    pub(crate) fn single(&mut self, element: impl FnOnce(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        element(self)?;
        self.eat(b']')
    }

    /// Nothing but whitespace is left.
    pub(crate) fn end(&mut self) -> Option<()> {
        self.skip_space();
        (self.at == self.text.len()).then_some(())
    }
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

    #[test]
    fn few_keeps_every_element_in_order() {
        let none: Few<u8> = serde_json::from_str("[]").unwrap();
        assert_eq!(none.into_iter().count(), 0);
        let one: Few<u8> = serde_json::from_str("[7]").unwrap();
        assert_eq!(one.into_iter().collect::<Vec<_>>(), [7]);
        let three: Few<u8> = serde_json::from_str("[1, 2, 3]").unwrap();
        assert_eq!(three.into_iter().collect::<Vec<_>>(), [1, 2, 3]);
        assert!(serde_json::from_str::<Few<u8>>("null").is_err());
        assert!(serde_json::from_str::<Few<u8>>("{}").is_err());
    }

    #[test]
    fn parse_event_refuses_bytes_that_are_not_utf8() {
        let error = parse_event::<serde_json::Value>(b"{\"a\":\"\xff\"}").unwrap_err();
        assert!(error.to_string().contains("UTF-8"), "{error}");
        let value: serde_json::Value = parse_event(br#"{"a":"\u00e9"}"#).unwrap();
        assert_eq!(value["a"], "\u{e9}");
    }
}
