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

/// A value that should be a JSON string holding JSON text, read as that text: the string's
/// contents, or any other value (an object sent where a string belongs) as its own JSON text.
/// `null` is `None`.
pub(crate) fn option_json_text<'de: 'a, 'a, D>(
    deserializer: D,
) -> Result<Option<Cow<'a, str>>, D::Error>
where
    D: Deserializer<'de>,
{
    #[derive(Deserialize)]
    struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);
    let Some(raw) = Option::<&'a RawValue>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let text = raw.get();
    if text.starts_with('"') {
        let string: Borrowed<'a> = serde_json::from_str(text).map_err(serde::de::Error::custom)?;
        Ok(Some(string.0))
    } else {
        Ok(Some(Cow::Borrowed(text)))
    }
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
        // Compact JSON, as most servers send it, has none.
        if self.text.as_bytes().get(self.at).is_none_or(|&b| b > b' ') {
            return;
        }
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
        let len = plain_string_len(self.text.as_bytes().get(start..)?)?;
        // Both ends are ASCII quotes, so they lie on character boundaries.
        let text = self.text.get(start..start + len)?;
        self.at = start + len + 1;
        Some(text)
    }

    /// The next byte after any whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.as_bytes().get(self.at).copied()
    }

    /// `word` (after any whitespace), consumed.
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.skip_space();
        let found = self.text.as_bytes().get(self.at..)?.starts_with(word);
        found.then(|| self.at += word.len())
    }

    /// `null`.
    pub(crate) fn null(&mut self) -> Option<()> {
        self.literal(b"null")
    }

    /// A string as [`Scanner::string`] reads it, or `null` (`Some(None)`).
    pub(crate) fn string_or_null(&mut self) -> Option<Option<&'a str>> {
        match self.peek()? {
            b'n' => self.null().map(|()| None),
            _ => self.string().map(Some),
        }
    }

    /// A value the caller ignores: a string, `null`, `true`, `false` or an unsigned integer.
    pub(crate) fn scalar(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'n' => self.null(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            _ => self.uint().map(drop),
        }
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

/// Where the string that `bytes` starts inside ends: the index of the first `"`, or `None` when a
/// backslash or a control character comes first (or no quote does). Eight bytes at a time: a byte
/// test per byte cost more than the rest of the hot path.
fn plain_string_len(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    /// Sets the high bit of the bytes of `word` below `n` (`n` ≤ 0x80). Bits above a byte
    /// below `n` may be false (its borrow runs on), but the lowest bit set is always a true one.
    fn below(word: u64, n: u8) -> u64 {
        word.wrapping_sub(ONES * u64::from(n)) & !word & HIGH
    }
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let word = u64::from_le_bytes(word.try_into().ok()?);
        let found = below(word ^ (ONES * u64::from(b'"')), 1)
            | below(word ^ (ONES * u64::from(b'\\')), 1)
            | below(word, 0x20);
        if found != 0 {
            at += found.trailing_zeros() as usize / 8;
            return (bytes[at] == b'"').then_some(at);
        }
        at += 8;
    }
    at += words
        .remainder()
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    (bytes[at] == b'"').then_some(at)
}

/// Test helpers for the decoders' hot paths: proof that a hot path gives exactly what serde gives.
#[cfg(test)]
pub(crate) mod testing {
    use std::fmt::Debug;

    use crate::body::Decoder;
    use crate::error::ProviderError;
    use crate::event::StreamEvent;

    /// A decoder with a hot path in front of its serde decoder.
    pub(crate) trait HotPath: Decoder {
        /// Everything the decoder carries from one event to the next.
        type State: PartialEq + Debug;

        /// What [`Decoder::feed`] does with the hot path taken out.
        fn feed_serde_only(
            &mut self,
            data: &[u8],
            out: &mut Vec<StreamEvent>,
        ) -> Result<(), ProviderError>;

        fn state(&self) -> Self::State;

        /// Whether the hot path reads `data`.
        fn is_hot(data: &str) -> bool;
    }

    /// Feeds `data` to two decoders made by `new` (so in the same state), one that may take the
    /// hot path and one that uses serde only; asserts they give the same result, the same events
    /// and end in the same state. Answers whether the hot path was taken.
    pub(crate) fn agree<D: HotPath>(new: &impl Fn() -> D, data: &str) -> bool {
        let (mut fast, mut slow) = (new(), new());
        let (mut fast_out, mut slow_out) = (Vec::new(), Vec::new());
        let fast_result = fast.feed("", data.as_bytes(), &mut fast_out);
        let slow_result = slow.feed_serde_only(data.as_bytes(), &mut slow_out);
        assert_eq!(fast_result, slow_result, "{data}");
        assert_eq!(fast_out, slow_out, "{data}");
        assert_eq!(fast.state(), slow.state(), "{data}");
        D::is_hot(data)
    }

    /// [`agree`] on every event; answers how many took the hot path.
    pub(crate) fn agree_on_all<D: HotPath>(new: impl Fn() -> D, events: &[String]) -> usize {
        events.iter().filter(|event| agree(&new, event)).count()
    }

    /// `template` with each `@` replaced, in order, by one of the strings of the matching slot:
    /// every combination.
    pub(crate) fn combinations(template: &str, slots: &[&[&str]]) -> Vec<String> {
        let pieces: Vec<&str> = template.split('@').collect();
        assert_eq!(pieces.len(), slots.len() + 1, "one slot per @");
        let mut filled = vec![pieces[0].to_owned()];
        for (slot, piece) in slots.iter().zip(&pieces[1..]) {
            filled = filled
                .iter()
                .flat_map(|start| {
                    slot.iter()
                        .map(move |choice| format!("{start}{choice}{piece}"))
                })
                .collect();
        }
        filled
    }

    /// `sample` cut short at every byte, and with a stray byte inserted at every position.
    pub(crate) fn mutations(sample: &str) -> Vec<String> {
        let mut events = Vec::new();
        for at in 0..=sample.len() {
            events.push(sample[..at].to_owned());
            for stray in [" ", ",", "\"", "}", "]", "0", "\\", "\u{1}", "é", "n"] {
                events.push(format!("{}{stray}{}", &sample[..at], &sample[at..]));
            }
        }
        events
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
    fn plain_string_len_stops_where_a_byte_by_byte_scan_stops() {
        let slow = |bytes: &[u8]| {
            let at = bytes
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
            (bytes[at] == b'"').then_some(at)
        };
        // Every stop byte (and a few near misses) at every position of strings up to 24 bytes,
        // over plain ASCII and over multi-byte characters (bytes with the high bit set).
        for fill in [b'a', 0xc3, 0x7f, 0x21, 0x5b, 0x5d] {
            for len in 0..24 {
                for at in 0..=len {
                    for stop in [b'"', b'\\', 0, 0x1f, 0x20, 0x01, 0x80, 0xff] {
                        let mut bytes = vec![fill; len];
                        if at < len {
                            bytes[at] = stop;
                        }
                        bytes.extend_from_slice(b"tail\"x");
                        assert_eq!(plain_string_len(&bytes), slow(&bytes), "{bytes:?}");
                        bytes.truncate(len);
                        assert_eq!(plain_string_len(&bytes), slow(&bytes), "{bytes:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn scanner_reads_null_and_skips_scalars() {
        let mut s = Scanner::new(r#"{"a":null,"b":"x","c":true,"d":false,"e":12}"#);
        let mut seen = Vec::new();
        s.object(|s, key| {
            seen.push(key);
            if key == "a" {
                s.string_or_null().map(drop)
            } else {
                s.scalar()
            }
        })
        .unwrap();
        assert_eq!(seen, ["a", "b", "c", "d", "e"]);
        for bad in [
            r#"{"a":nul}"#,
            r#"{"a":nullx}"#,
            r#"{"a":tru}"#,
            r#"{"a":-1}"#,
            r#"{"a":[]}"#,
        ] {
            assert!(
                Scanner::new(bad).object(|s, _| s.scalar()).is_none(),
                "{bad}"
            );
        }
    }

    #[test]
    fn parse_event_refuses_bytes_that_are_not_utf8() {
        let error = parse_event::<serde_json::Value>(b"{\"a\":\"\xff\"}").unwrap_err();
        assert!(error.to_string().contains("UTF-8"), "{error}");
        let value: serde_json::Value = parse_event(br#"{"a":"\u00e9"}"#).unwrap();
        assert_eq!(value["a"], "\u{e9}");
    }
}
