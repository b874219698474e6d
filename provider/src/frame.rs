//! Framing of a streamed response body: NDJSON lines (Ollama) or server-sent events (the others),
//! cut out of the body's chunks as they arrive. A frame's bytes are a slice of the chunk they
//! arrived in, so the common case (a whole line inside one chunk) neither copies nor allocates;
//! only a line that spans chunks, or an event with several `data` lines, is assembled in a buffer.
//! Each byte is scanned once.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// How a response body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    Ndjson,
    Sse,
}

/// One NDJSON line (without its line end and trailing blanks) or one SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    /// The SSE event name; empty for NDJSON and for unnamed events.
    pub(crate) event: Bytes,
    /// The line, or the event's `data` lines joined with LF.
    pub(crate) data: Bytes,
}

/// Splits a body into [`Frame`]s, one chunk at a time.
///
/// SSE follows the WHATWG event-stream rules: CR, LF and CRLF line ends (a CRLF may be cut
/// between two chunks), a leading byte-order mark skipped, comments ignored, `data` lines joined
/// with LF, the event name reset after each event, an event without `data` dropped, and an event
/// the body ends in the middle of discarded. `id` and `retry` are read past: a provider's answer
/// is never resumed.
#[derive(Debug)]
pub(crate) struct Splitter {
    framing: Framing,
    /// The start of a line that continues in the next chunk.
    partial: BytesMut,
    /// The last chunk ended in CR; an LF opening the next one completes that line end.
    after_cr: bool,
    /// No line has ended yet (a byte-order mark may open the first one).
    first_line: bool,
    /// SSE: the name of the event being read.
    event: Option<Bytes>,
    /// SSE: its data so far.
    data: Data,
}

#[derive(Debug, Default)]
enum Data {
    /// No `data` line yet: a blank line dispatches nothing.
    #[default]
    None,
    /// One `data` line, still a slice of its chunk.
    One(Bytes),
    /// Several, joined with LF.
    Joined(BytesMut),
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl Splitter {
    pub(crate) fn new(framing: Framing) -> Self {
        Splitter {
            framing,
            partial: BytesMut::new(),
            after_cr: false,
            first_line: true,
            event: None,
            data: Data::None,
        }
    }

    /// Appends the frames `chunk` completes to `out`.
    pub(crate) fn push(&mut self, chunk: Bytes, out: &mut Vec<Frame>) {
        match self.framing {
            Framing::Ndjson => self.push_ndjson(chunk, out),
            Framing::Sse => self.push_sse(chunk, out),
        }
    }

    /// The body ended: an NDJSON line without its line end still counts; an SSE event that was
    /// not closed by a blank line is dropped, as the event-stream rules say.
    pub(crate) fn finish(&mut self, out: &mut Vec<Frame>) {
        match self.framing {
            Framing::Ndjson if !self.partial.is_empty() => {
                let line = self.partial.split().freeze();
                ndjson_line(line, out);
            }
            Framing::Ndjson => {}
            Framing::Sse => {
                self.partial.clear();
                self.event = None;
                self.data = Data::None;
            }
        }
    }

    fn push_ndjson(&mut self, mut chunk: Bytes, out: &mut Vec<Frame>) {
        while let Some(at) = memchr::memchr(b'\n', &chunk) {
            let line = chunk.split_to(at + 1);
            let line = self.complete(line);
            ndjson_line(line, out);
        }
        if !chunk.is_empty() {
            self.partial.extend_from_slice(&chunk);
        }
    }

    fn push_sse(&mut self, mut chunk: Bytes, out: &mut Vec<Frame>) {
        if chunk.is_empty() {
            return;
        }
        if std::mem::take(&mut self.after_cr) && chunk[0] == b'\n' {
            chunk.advance(1);
        }
        while let Some(at) = memchr::memchr2(b'\n', b'\r', &chunk) {
            let line = chunk.split_to(at);
            let end = chunk[0];
            chunk.advance(1);
            if end == b'\r' {
                match chunk.first() {
                    Some(b'\n') => chunk.advance(1),
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            let mut line = self.complete(line);
            if std::mem::take(&mut self.first_line) && line.starts_with(BOM) {
                line.advance(BOM.len());
            }
            self.sse_line(line, out);
        }
        if !chunk.is_empty() {
            self.partial.extend_from_slice(&chunk);
        }
    }

    /// The whole line: `tail` itself, or what the earlier chunks held followed by `tail`.
    fn complete(&mut self, tail: Bytes) -> Bytes {
        if self.partial.is_empty() {
            tail
        } else {
            self.partial.extend_from_slice(&tail);
            self.partial.split().freeze()
        }
    }

    fn sse_line(&mut self, line: Bytes, out: &mut Vec<Frame>) {
        if line.is_empty() {
            let event = self.event.take();
            match std::mem::take(&mut self.data) {
                Data::None => {}
                Data::One(data) => out.push(Frame {
                    event: event.unwrap_or_default(),
                    data,
                }),
                Data::Joined(data) => out.push(Frame {
                    event: event.unwrap_or_default(),
                    data: data.freeze(),
                }),
            }
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match memchr::memchr(b':', &line) {
            Some(colon) => {
                let mut value = line.slice(colon + 1..);
                if value.first() == Some(&b' ') {
                    value.advance(1);
                }
                (&line[..colon], value)
            }
            None => (&line[..], Bytes::new()),
        };
        match name {
            b"data" => {
                self.data = match std::mem::take(&mut self.data) {
                    Data::None => Data::One(value),
                    Data::One(first) => {
                        let mut joined = BytesMut::with_capacity(first.len() + 1 + value.len());
                        joined.extend_from_slice(&first);
                        joined.put_u8(b'\n');
                        joined.extend_from_slice(&value);
                        Data::Joined(joined)
                    }
                    Data::Joined(mut joined) => {
                        joined.put_u8(b'\n');
                        joined.extend_from_slice(&value);
                        Data::Joined(joined)
                    }
                }
            }
            b"event" => self.event = Some(value),
            _ => {}
        }
    }
}

/// An NDJSON line without its line end and trailing blanks; blank lines are skipped.
fn ndjson_line(mut line: Bytes, out: &mut Vec<Frame>) {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\n' | b'\r' | b' ' | b'\t') {
        end -= 1;
    }
    if end > 0 {
        line.truncate(end);
        out.push(Frame {
            event: Bytes::new(),
            data: line,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn split(framing: Framing, chunks: &[&[u8]]) -> Vec<(String, String)> {
        let mut splitter = Splitter::new(framing);
        let mut out = Vec::new();
        for chunk in chunks {
            splitter.push(Bytes::copy_from_slice(chunk), &mut out);
        }
        splitter.finish(&mut out);
        out.into_iter()
            .map(|f| {
                (
                    String::from_utf8(f.event.to_vec()).unwrap(),
                    String::from_utf8(f.data.to_vec()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn ndjson_lines_are_trimmed_joined_across_chunks_and_kept_at_the_end() {
        let frames = split(
            Framing::Ndjson,
            &[b"{\"a\":1}\r\n\n  \n{\"b\"", b":2} \n{\"c\":3}"],
        );
        let data: Vec<&str> = frames.iter().map(|(_, d)| d.as_str()).collect();
        assert_eq!(data, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }

    #[test]
    fn a_data_slice_shares_its_chunk() {
        let chunk = Bytes::from_static(b"event: x\ndata: {\"a\":1}\n\n");
        let mut splitter = Splitter::new(Framing::Sse);
        let mut out = Vec::new();
        splitter.push(chunk.clone(), &mut out);
        assert_eq!(out.len(), 1);
        let inside = chunk.as_ptr_range();
        assert!(inside.contains(&out[0].data.as_ptr()));
        assert!(inside.contains(&out[0].event.as_ptr()));
    }

    #[test]
    fn sse_cr_at_a_chunk_end_is_one_line_end_with_the_lf_after_it() {
        let frames = split(Framing::Sse, &[b"data: a\r", b"\ndata: b\r", b"\r"]);
        assert_eq!(frames, [(String::new(), "a\nb".to_owned())]);
    }

    #[test]
    fn sse_event_cut_off_by_the_end_of_the_body_is_dropped() {
        let frames = split(Framing::Sse, &[b"data: a\n\ndata: b\n"]);
        assert_eq!(frames, [(String::new(), "a".to_owned())]);
    }

    /// Bodies covering the event-stream rules the providers rely on: comments and keep-alives,
    /// named events, multi-line data, CR, LF and CRLF line ends, `id`/`retry` fields,
    /// a field without a colon, no space after the colon, an event cut off at the end. (A body
    /// ending in a lone CR is left out: eventsource-stream waits for an LF that never comes,
    /// where the spec and sse-stream end the line.)
    const SSE_BODIES: &[&[u8]] = &[
        b"data: a\n\ndata: b\n\n",
        b": keep-alive\n\nevent: content_block_delta\ndata: {\"x\":1}\n\n: ping\n\n",
        b"data: a\r\n\r\nevent: x\r\ndata: b\r\ndata: c\r\n\r\n",
        b"data: cr\r\rdata:nospace\r\rdata: lf\n\n",
        b"id: 7\nretry: 1000\ndata: first\ndata: second\n\n",
        b"data\n\ndata:\n\nevent: only-name\n\ndata: after\n\n",
        b"data:  two spaces\nunknown: field\n\ndata: [DONE]\n\n",
        b"data: {\"text\":\"\xC3\xA9t\xC3\xA9\"}\n\ndata: cut off",
    ];

    async fn ours(chunks: Vec<Bytes>) -> Vec<(String, String)> {
        let chunks: Vec<&[u8]> = chunks.iter().map(|c| c.as_ref()).collect();
        split(Framing::Sse, &chunks)
    }

    async fn reference(chunks: Vec<Bytes>) -> Vec<(String, String)> {
        let chunks = chunks.into_iter().map(Ok::<_, std::io::Error>);
        eventsource_stream::Eventsource::eventsource(futures::stream::iter(chunks))
            .map(|event| {
                let event = event.unwrap();
                // eventsource-stream names unnamed events "message"; ours leave them unnamed.
                let name = if event.event == "message" {
                    String::new()
                } else {
                    event.event
                };
                (name, event.data)
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn sse_frames_match_eventsource_stream_at_every_split() {
        for body in SSE_BODIES {
            let whole = vec![Bytes::from_static(body)];
            let expected = reference(whole.clone()).await;
            assert!(!expected.is_empty(), "{body:?}");
            assert_eq!(ours(whole).await, expected, "whole {body:?}");
            // Two chunks cut at every byte, so lines, CRLF pairs, field names and UTF-8
            // sequences are split at every place.
            for at in 1..body.len() {
                let chunks = vec![
                    Bytes::from_static(&body[..at]),
                    Bytes::from_static(&body[at..]),
                ];
                assert_eq!(ours(chunks).await, expected, "split at {at}: {body:?}");
            }
            let bytewise: Vec<Bytes> = body.iter().map(|b| Bytes::copy_from_slice(&[*b])).collect();
            assert_eq!(ours(bytewise).await, expected, "byte by byte {body:?}");
        }
    }

    /// eventsource-stream panics on a byte-order mark, so this one is checked on its own.
    #[tokio::test]
    async fn sse_frames_skip_a_leading_bom_however_it_is_cut() {
        let body: &[u8] = b"\xEF\xBB\xBFdata: bom\n\n";
        let expected = vec![(String::new(), "bom".to_owned())];
        for at in 1..body.len() {
            let chunks = vec![
                Bytes::from_static(&body[..at]),
                Bytes::from_static(&body[at..]),
            ];
            assert_eq!(ours(chunks).await, expected, "split at {at}");
        }
    }
}
