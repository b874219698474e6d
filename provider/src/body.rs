//! A streamed answer's body turned into normalized events: framed by [`crate::frame`], decoded by
//! the provider's [`Decoder`]. [`parse_stream`] is this very code over any byte stream, for
//! fuzzing, replaying a recorded body or checking a server.

use bytes::{Bytes, BytesMut};
use futures::stream::{Stream, StreamExt};

use crate::anthropic::AnthropicDecoder;
use crate::error::ProviderError;
use crate::event::StreamEvent;
use crate::frame::{Frame, Framing, Splitter};
use crate::gemini::GeminiDecoder;
use crate::http::EventStream;
use crate::ollama::OllamaDecoder;
use crate::openai::OpenAiDecoder;
use crate::settings::ProviderKind;

/// Turns one NDJSON line or SSE event into normalized events.
pub(crate) trait Decoder: Send {
    /// How the provider frames its stream.
    const FRAMING: Framing;

    /// `event` is the SSE event name ("" for NDJSON, unnamed SSE events and names that are not
    /// UTF-8); `data` is the line or the event's data.
    fn feed(
        &mut self,
        event: &str,
        data: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError>;

    /// The provider said the answer is complete; the rest of the body is not read.
    fn is_done(&self) -> bool;

    /// The body ended. Flush what is pending, or report a stream that ended early.
    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError>;

    /// What a 200 body that ended cleanly before its first frame means, when it means more than
    /// a broken stream: OpenAI-compatible servers answer that way a streamed request they cannot
    /// stream (llama-cpp-python with tool calls: keep-alive comments, then the end), which
    /// [`ProviderError::CannotStream`] says so the provider can ask again without streaming. A
    /// body cut off by the transport stays a broken stream, retried as before.
    fn empty_body(&self) -> Option<ProviderError> {
        None
    }

    /// Whether a body that is one JSON array, not a stream of events, is read as the array's
    /// elements in turn: Gemini answers that way when a proxy drops `alt=sse` from the URL.
    const ARRAY_BODY: bool = false;
}

/// The most of a JSON-array body that is kept to be read at its end.
const ARRAY_BODY_LIMIT: usize = 64 * 1024 * 1024;

/// The events of one response body. Ends after the first error (the transport's own, passed
/// through unchanged, or the decoder's), or once the decoder says the answer is complete.
pub(crate) fn decode_body<S, D>(
    body: S,
    mut decoder: D,
) -> impl Stream<Item = Result<StreamEvent, ProviderError>> + Send + 'static
where
    S: Stream<Item = Result<Bytes, ProviderError>> + Send + 'static,
    D: Decoder + 'static,
{
    async_stream::stream! {
        let mut splitter = Splitter::new(D::FRAMING);
        // Reused for every chunk: framing and decoding allocate nothing per event beyond the
        // events themselves.
        let mut frames = Vec::new();
        let mut out: Vec<StreamEvent> = Vec::with_capacity(8);
        let mut framed = false;
        // A body that opens with `[` where events were expected: kept whole, read at its end.
        let mut array: Option<BytesMut> = None;
        let mut first = true;
        // A JSON-array body's first bytes while they are only a byte-order mark (or part of one)
        // and blanks: held until a byte decides, so the body reads the same however it was cut.
        let mut lead = BytesMut::new();
        futures::pin_mut!(body);
        loop {
            let next = match body.next().await {
                Some(Ok(chunk)) if first && D::ARRAY_BODY && array.is_none() => {
                    lead.extend_from_slice(&chunk);
                    if undecided(&lead) {
                        continue;
                    }
                    Some(Ok(lead.split().freeze()))
                }
                // Only a mark and blanks came: no event either way.
                other => other,
            };
            let ended = match next {
                Some(Ok(chunk)) if array.is_some() || (first && D::ARRAY_BODY && opens_array(&chunk)) => {
                    first = false;
                    // Kept from its `[`: the blanks before it read the same however the body
                    // was cut (a chunk of blanks alone went to the splitter, which drops them).
                    let chunk = match array {
                        Some(_) => chunk,
                        None => chunk.slice(array_start(&chunk)..),
                    };
                    let kept = array.get_or_insert_with(BytesMut::new);
                    if kept.len() + chunk.len() > ARRAY_BODY_LIMIT {
                        // Too large to be an answer: the decoder says what it makes of it.
                        let whole = array.take().unwrap_or_default().freeze();
                        frames.push(Frame { event: Bytes::new(), data: whole });
                        true
                    } else {
                        kept.extend_from_slice(&chunk);
                        continue;
                    }
                }
                Some(Ok(chunk)) => {
                    first &= chunk.iter().all(u8::is_ascii_whitespace);
                    splitter.push(chunk, &mut frames);
                    false
                }
                Some(Err(error)) => {
                    yield Err(error);
                    return;
                }
                None if array.is_some() => {
                    let kept = array.take().unwrap_or_default();
                    match serde_json::from_slice::<Vec<&serde_json::value::RawValue>>(&kept) {
                        Ok(items) => {
                            for item in items {
                                frames.push(Frame {
                                    event: Bytes::new(),
                                    data: Bytes::copy_from_slice(item.get().as_bytes()),
                                });
                            }
                        }
                        Err(_) => frames.push(Frame {
                            event: Bytes::new(),
                            data: kept.freeze(),
                        }),
                    }
                    true
                }
                None => {
                    splitter.finish(&mut frames);
                    true
                }
            };
            framed |= !frames.is_empty();
            for frame in frames.drain(..) {
                let event = std::str::from_utf8(&frame.event).unwrap_or_default();
                let fed = decoder.feed(event, &frame.data, &mut out);
                for item in out.drain(..) {
                    yield Ok(item);
                }
                if let Err(error) = fed {
                    yield Err(error);
                    return;
                }
                if decoder.is_done() {
                    return;
                }
            }
            if ended {
                if !framed && let Some(error) = decoder.empty_body() {
                    yield Err(error);
                    return;
                }
                let finished = decoder.finish(&mut out);
                for item in out.drain(..) {
                    yield Ok(item);
                }
                if let Err(error) = finished {
                    yield Err(error);
                }
                return;
            }
        }
    }
}

/// A UTF-8 byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Whether a body's first chunk opens a JSON array (after blanks and a byte-order mark).
fn opens_array(chunk: &[u8]) -> bool {
    chunk.get(array_start(chunk)) == Some(&b'[')
}

/// Whether a body's first bytes are still only a byte-order mark (or its start) and blanks.
fn undecided(lead: &[u8]) -> bool {
    let partial_bom = lead.len() < BOM.len() && BOM.starts_with(lead);
    partial_bom || array_start(lead) == lead.len()
}

/// Where a chunk's text starts past a byte-order mark and blanks.
fn array_start(chunk: &[u8]) -> usize {
    let bom = if chunk.starts_with(BOM) { BOM.len() } else { 0 };
    bom + chunk[bom..]
        .iter()
        .take_while(|b| b.is_ascii_whitespace())
        .count()
}

/// The events a provider of `kind` reads from the body of a streamed answer: the framing and
/// decoding [`crate::Provider::stream`] runs on the HTTP response, over any byte stream.
/// `provider` names the provider in errors. Like the provider's stream it ends after the first
/// error, and a body that ends before the provider said it was complete ends with
/// [`ProviderError::StreamBroken`].
pub fn parse_stream<S>(kind: ProviderKind, provider: &str, body: S) -> EventStream
where
    S: Stream<Item = Result<Bytes, ProviderError>> + Send + 'static,
{
    let provider = provider.to_owned();
    match kind {
        ProviderKind::Ollama => decode_body(body, OllamaDecoder::new(provider)).boxed(),
        ProviderKind::Openai => decode_body(body, OpenAiDecoder::new(provider)).boxed(),
        ProviderKind::Anthropic => decode_body(body, AnthropicDecoder::new(provider)).boxed(),
        ProviderKind::Gemini => decode_body(body, GeminiDecoder::new(provider)).boxed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(
        items: Vec<Result<&'static [u8], ProviderError>>,
    ) -> impl Stream<Item = Result<Bytes, ProviderError>> + Send + 'static {
        futures::stream::iter(items.into_iter().map(|c| c.map(Bytes::from_static)))
    }

    #[tokio::test]
    async fn the_transport_error_comes_through_after_what_streamed() {
        let body = chunks(vec![
            Ok(b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"),
            Err(ProviderError::StreamBroken {
                provider: "test".into(),
                message: "connection reset".into(),
            }),
        ]);
        let events: Vec<_> = parse_stream(ProviderKind::Openai, "test", body)
            .collect()
            .await;
        assert!(
            matches!(&events[0], Ok(StreamEvent::TextDelta { text }) if text == "a"),
            "{events:?}"
        );
        assert!(
            matches!(&events[1], Err(ProviderError::StreamBroken { message, .. }) if message == "connection reset"),
            "{events:?}"
        );
        assert_eq!(events.len(), 2);
    }

    /// What a Gemini body cut into `cuts` reads as, once per cut.
    async fn gemini_reads(cuts: Vec<Vec<&'static [u8]>>) -> Vec<String> {
        let mut seen = Vec::new();
        for cut in cuts {
            let body = chunks(cut.into_iter().map(Ok).collect());
            let events: Vec<_> = parse_stream(ProviderKind::Gemini, "test", body)
                .collect()
                .await;
            seen.push(format!("{events:?}"));
        }
        seen
    }

    /// The fuzz test's find: blanks before a JSON-array body read the same whether they came in
    /// a chunk of their own or with the `[`.
    #[tokio::test]
    async fn blanks_before_an_array_body_read_the_same_however_cut() {
        let seen = gemini_reads(vec![
            vec![b"\n[".as_slice()],
            vec![b"\n".as_slice(), b"[".as_slice()],
        ])
        .await;
        assert_eq!(seen[0], seen[1]);
    }

    /// The fuzz test's find: a byte-order mark before a JSON-array body reads the same whether
    /// it came whole with the `[`, alone, or cut in two.
    #[tokio::test]
    async fn a_bom_before_an_array_body_reads_the_same_however_cut() {
        let seen = gemini_reads(vec![
            vec![b"\xEF\xBB\xBF[".as_slice()],
            vec![b"\xEF\xBB\xBF".as_slice(), b"[".as_slice()],
            vec![
                b"\xEF".as_slice(),
                b"\xBB\xBF \n".as_slice(),
                b"[".as_slice(),
            ],
        ])
        .await;
        assert_eq!(seen[0], seen[1]);
        assert_eq!(seen[0], seen[2]);
    }

    #[tokio::test]
    async fn nothing_after_the_end_of_the_answer_is_read() {
        let body = chunks(vec![
            Ok(b"{\"message\":{\"content\":\"a\"},\"done\":false}\n"),
            Ok(b"{\"done\":true,\"done_reason\":\"stop\"}\nnot json\n"),
            Err(ProviderError::StreamBroken {
                provider: "test".into(),
                message: "never read".into(),
            }),
        ]);
        let events: Vec<_> = parse_stream(ProviderKind::Ollama, "test", body)
            .collect()
            .await;
        assert!(events.iter().all(Result::is_ok), "{events:?}");
        assert!(
            matches!(events.last(), Some(Ok(StreamEvent::Finish(_)))),
            "{events:?}"
        );
    }

    #[tokio::test]
    async fn a_body_that_ends_early_is_a_broken_stream() {
        let body = chunks(vec![Ok(
            b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n",
        )]);
        let events: Vec<_> = parse_stream(ProviderKind::Anthropic, "test", body)
            .collect()
            .await;
        assert!(
            matches!(events.last(), Some(Err(ProviderError::StreamBroken { .. }))),
            "{events:?}"
        );
    }
}
