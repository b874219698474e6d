//! Fuzz targets for the four provider stream parsers (issue 9, reliability suite). Each runs
//! `totem_provider::parse_stream`, the framing and decoding a provider runs on a response body,
//! over bodies cut into chunks at arbitrary byte positions (inside lines, CRLF pairs, UTF-8
//! sequences), and checks:
//!
//! - valid streams, rendered here in the provider's wire format from arbitrary answers (any
//!   Unicode, so every JSON escape; reasoning; tool calls; usage): the events say exactly what was
//!   rendered, and cutting the body anywhere changes nothing;
//! - arbitrary bytes, and bytes built from the format's own pieces (field names, line ends,
//!   comments, a BOM, cut UTF-8, real events): never a panic, nothing after the first error, the
//!   same events however the body is cut;
//! - valid streams with bytes flipped, dropped or inserted: the same.
//!
//! Case counts are kept small so every fuzz target together runs in well under a minute in CI.
//! For a longer run set `PROPTEST_CASES`, e.g.
//! `PROPTEST_CASES=5000 cargo test --release -p totem-provider --test fuzz_parsers`.

use bytes::Bytes;
use futures::StreamExt;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};
use totem_provider::{
    AssistantPart, FinishReason, ProviderError, ProviderKind, StreamEvent, TurnBuilder,
    parse_stream,
};

/// `PROPTEST_CASES` when set, else `default`.
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---- what a valid stream says ------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Reasoning(String),
    Call { name: String, arguments: Value },
}

#[derive(Debug, Clone)]
struct Answer {
    /// Text and reasoning first, tool calls last, as the providers stream them.
    pieces: Vec<Piece>,
    input: u64,
    output: u64,
}

impl Answer {
    fn has_calls(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::Call { .. }))
    }
}

/// Any characters but `<`, which starts a `<think>` block in OpenAI-compatible content.
fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>().prop_filter("no <", |c| *c != '<'), 1..8)
        .prop_map(String::from_iter)
}

fn call() -> impl Strategy<Value = Piece> {
    ("[a-z_]{1,12}", text(), any::<u32>(), any::<bool>()).prop_map(|(name, path, n, flag)| {
        Piece::Call {
            name,
            arguments: json!({"path": path, "n": n, "flag": flag, "list": [n, path]}),
        }
    })
}

fn answer() -> impl Strategy<Value = Answer> {
    let spoken = prop::collection::vec(
        prop_oneof![
            3 => text().prop_map(Piece::Text),
            1 => text().prop_map(Piece::Reasoning),
        ],
        0..6,
    );
    let calls = prop::collection::vec(call(), 0..3);
    (spoken, calls, 0..100_000u64, 1..100_000u64)
        .prop_filter("something to say", |(spoken, calls, ..)| {
            !spoken.is_empty() || !calls.is_empty()
        })
        .prop_map(|(mut pieces, calls, input, output)| {
            pieces.extend(calls);
            Answer {
                pieces,
                input,
                output,
            }
        })
}

/// How a body is laid out beyond what it says: line ends, keep-alive comments.
#[derive(Debug, Clone, Copy)]
struct Layout {
    crlf: bool,
    keepalive: bool,
}

fn layout() -> impl Strategy<Value = Layout> {
    (any::<bool>(), any::<bool>()).prop_map(|(crlf, keepalive)| Layout { crlf, keepalive })
}

/// Writes SSE events and NDJSON lines with the layout's line ends.
struct Body {
    layout: Layout,
    bytes: Vec<u8>,
}

impl Body {
    fn new(layout: Layout) -> Self {
        Body {
            layout,
            bytes: Vec::new(),
        }
    }

    fn eol(&mut self) {
        let eol: &[u8] = if self.layout.crlf { b"\r\n" } else { b"\n" };
        self.bytes.extend_from_slice(eol);
    }

    fn line(&mut self, value: &Value) {
        self.bytes.extend_from_slice(value.to_string().as_bytes());
        self.eol();
    }

    fn event(&mut self, name: Option<&str>, data: &str) {
        if self.layout.keepalive {
            self.bytes.extend_from_slice(b": keep-alive");
            self.eol();
            self.eol();
        }
        if let Some(name) = name {
            self.bytes
                .extend_from_slice(format!("event: {name}").as_bytes());
            self.eol();
        }
        self.bytes.extend_from_slice(b"data: ");
        self.bytes.extend_from_slice(data.as_bytes());
        self.eol();
        self.eol();
    }
}

/// Halves of a string cut on a char boundary.
fn halves(text: &str) -> (&str, &str) {
    text.split_at(text.ceil_char_boundary(text.len() / 2))
}

fn render(kind: ProviderKind, answer: &Answer, layout: Layout) -> Vec<u8> {
    let mut body = Body::new(layout);
    match kind {
        ProviderKind::Ollama => render_ollama(answer, &mut body),
        ProviderKind::Openai => render_openai(answer, &mut body),
        ProviderKind::Anthropic => render_anthropic(answer, &mut body),
        ProviderKind::Gemini => render_gemini(answer, &mut body),
    }
    body.bytes
}

fn render_ollama(answer: &Answer, body: &mut Body) {
    let line = |message: Value, done: bool| {
        json!({"model": "qwen3:8b", "created_at": "2026-01-01T00:00:00Z",
            "message": message, "done": done})
    };
    for piece in &answer.pieces {
        let message = match piece {
            Piece::Text(text) => json!({"role": "assistant", "content": text}),
            Piece::Reasoning(text) => {
                json!({"role": "assistant", "content": "", "thinking": text})
            }
            Piece::Call { name, arguments } => json!({"role": "assistant", "content": "",
                "tool_calls": [{"function": {"name": name, "arguments": arguments}}]}),
        };
        body.line(&line(message, false));
    }
    let mut last = line(json!({"role": "assistant", "content": ""}), true);
    last["done_reason"] = "stop".into();
    last["prompt_eval_count"] = answer.input.into();
    last["eval_count"] = answer.output.into();
    body.line(&last);
}

fn render_openai(answer: &Answer, body: &mut Body) {
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1735000000,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    body.event(
        None,
        &chunk(json!({"role": "assistant", "content": ""}), None),
    );
    let mut index = 0;
    for piece in &answer.pieces {
        match piece {
            Piece::Text(text) => body.event(None, &chunk(json!({"content": text}), None)),
            Piece::Reasoning(text) => body.event(None, &chunk(json!({"reasoning": text}), None)),
            Piece::Call { name, arguments } => {
                let arguments = arguments.to_string();
                let (first, second) = halves(&arguments);
                body.event(
                    None,
                    &chunk(
                        json!({"tool_calls": [{"index": index, "id": format!("call_{index}"),
                            "type": "function", "function": {"name": name, "arguments": first}}]}),
                        None,
                    ),
                );
                body.event(
                    None,
                    &chunk(
                        json!({"tool_calls": [{"index": index, "function": {"arguments": second}}]}),
                        None,
                    ),
                );
                index += 1;
            }
        }
    }
    let finish = if answer.has_calls() {
        "tool_calls"
    } else {
        "stop"
    };
    body.event(None, &chunk(json!({}), Some(finish)));
    body.event(
        None,
        &json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1735000000,
            "model": "gpt-4o-mini", "choices": [],
            "usage": {"prompt_tokens": answer.input, "completion_tokens": answer.output,
                "total_tokens": answer.input + answer.output}})
        .to_string(),
    );
    body.event(None, "[DONE]");
}

/// The OpenAI-compatible stream of a server that puts reasoning in `content` between `<think>`
/// tags (llama.cpp with reasoning format `none`), its content cut into deltas at `cuts` (any
/// character boundary, so inside a tag too). Tool calls as [`render_openai`] sends them.
fn render_openai_think_tags(answer: &Answer, layout: Layout, cuts: &[usize]) -> Vec<u8> {
    let mut content = String::new();
    for piece in &answer.pieces {
        match piece {
            Piece::Text(text) => content.push_str(text),
            Piece::Reasoning(text) => {
                content.push_str("<think>");
                content.push_str(text);
                content.push_str("</think>");
            }
            Piece::Call { .. } => {}
        }
    }
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|c| c % (content.len() + 1))
        .filter(|c| content.is_char_boundary(*c))
        .chain([0, content.len()])
        .collect();
    at.sort_unstable();
    at.dedup();
    let deltas: Vec<Piece> = at
        .windows(2)
        .map(|w| Piece::Text(content[w[0]..w[1]].to_owned()))
        .collect();
    let calls = answer
        .pieces
        .iter()
        .filter(|p| matches!(p, Piece::Call { .. }))
        .cloned();
    let as_deltas = Answer {
        pieces: deltas.into_iter().chain(calls).collect(),
        ..answer.clone()
    };
    let mut body = Body::new(layout);
    render_openai(&as_deltas, &mut body);
    body.bytes
}

fn render_anthropic(answer: &Answer, body: &mut Body) {
    let send = |body: &mut Body, value: Value| {
        let name = value["type"].as_str().unwrap_or_default().to_owned();
        body.event(Some(&name), &value.to_string());
    };
    send(
        body,
        json!({"type": "message_start", "message": {"id": "msg_01", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": answer.input, "output_tokens": 1}}}),
    );
    send(body, json!({"type": "ping"}));
    let mut index = 0;
    let mut text_open = false;
    for piece in &answer.pieces {
        if text_open && !matches!(piece, Piece::Text(_)) {
            send(body, json!({"type": "content_block_stop", "index": index}));
            index += 1;
            text_open = false;
        }
        let delta =
            |delta: Value| json!({"type": "content_block_delta", "index": index, "delta": delta});
        match piece {
            Piece::Text(text) => {
                if !text_open {
                    send(
                        body,
                        json!({"type": "content_block_start", "index": index,
                            "content_block": {"type": "text", "text": ""}}),
                    );
                    text_open = true;
                }
                send(body, delta(json!({"type": "text_delta", "text": text})));
            }
            Piece::Reasoning(text) => {
                send(
                    body,
                    json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
                );
                let (first, second) = halves(text);
                send(
                    body,
                    delta(json!({"type": "thinking_delta", "thinking": first})),
                );
                send(
                    body,
                    delta(json!({"type": "thinking_delta", "thinking": second})),
                );
                send(
                    body,
                    delta(json!({"type": "signature_delta", "signature": format!("sig{index}")})),
                );
                send(body, json!({"type": "content_block_stop", "index": index}));
                index += 1;
            }
            Piece::Call { name, arguments } => {
                send(
                    body,
                    json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "tool_use", "id": format!("toolu_{index}"),
                            "name": name, "input": {}}}),
                );
                let arguments = arguments.to_string();
                let (first, second) = halves(&arguments);
                for part in ["", first, second] {
                    send(
                        body,
                        delta(json!({"type": "input_json_delta", "partial_json": part})),
                    );
                }
                send(body, json!({"type": "content_block_stop", "index": index}));
                index += 1;
            }
        }
    }
    if text_open {
        send(body, json!({"type": "content_block_stop", "index": index}));
    }
    let stop = if answer.has_calls() {
        "tool_use"
    } else {
        "end_turn"
    };
    send(
        body,
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": answer.output}}),
    );
    send(body, json!({"type": "message_stop"}));
}

fn render_gemini(answer: &Answer, body: &mut Body) {
    let mut chunks: Vec<Vec<Value>> = Vec::new();
    let mut calls = Vec::new();
    for piece in &answer.pieces {
        match piece {
            Piece::Text(text) => chunks.push(vec![json!({"text": text})]),
            Piece::Reasoning(text) => chunks.push(vec![json!({"text": text, "thought": true})]),
            Piece::Call { name, arguments } => {
                calls.push(json!({"functionCall": {"name": name, "args": arguments}}));
            }
        }
    }
    if !calls.is_empty() {
        chunks.push(calls);
    }
    let count = chunks.len() as u64;
    for (i, parts) in chunks.into_iter().enumerate() {
        let last = i as u64 + 1 == count;
        let so_far = answer.output * (i as u64 + 1) / count;
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if last {
            candidate["finishReason"] = "STOP".into();
        }
        body.event(
            None,
            &json!({"candidates": [candidate],
                "usageMetadata": {"promptTokenCount": answer.input,
                    "candidatesTokenCount": so_far, "thoughtsTokenCount": 0,
                    "totalTokenCount": answer.input + so_far},
                "modelVersion": "gemini-2.5-flash", "responseId": "r1"})
            .to_string(),
        );
    }
}

// ---- running the parser ------------------------------------------------------------------

type Outcome = Vec<Result<StreamEvent, String>>;

/// Everything the parser yields for `body` cut at `cuts` (byte positions, any order).
fn parse(kind: ProviderKind, body: &[u8], cuts: &[usize]) -> Outcome {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    cuts.push(0);
    cuts.push(body.len());
    cuts.sort_unstable();
    cuts.dedup();
    let chunks: Vec<Result<Bytes, ProviderError>> = cuts
        .windows(2)
        .map(|w| Ok(Bytes::copy_from_slice(&body[w[0]..w[1]])))
        .collect();
    futures::executor::block_on(
        parse_stream(kind, "fuzz", futures::stream::iter(chunks))
            .map(|item| item.map_err(|e| e.to_string()))
            .collect(),
    )
}

fn bytewise(kind: ProviderKind, body: &[u8]) -> Outcome {
    let cuts: Vec<usize> = (0..body.len()).collect();
    parse(kind, body, &cuts)
}

/// The stream ends at its first error.
fn ends_at_first_error(outcome: &Outcome) -> Result<(), TestCaseError> {
    if let Some(at) = outcome.iter().position(Result::is_err) {
        prop_assert_eq!(
            at + 1,
            outcome.len(),
            "events after an error: {:?}",
            outcome
        );
    }
    Ok(())
}

/// The answer's parts as one comparable list: adjacent text (or reasoning) joined, empty parts
/// left out, tool calls by name and arguments.
fn shape(parts: impl IntoIterator<Item = Piece>) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    for piece in parts {
        match (out.last_mut(), piece) {
            (_, Piece::Text(t) | Piece::Reasoning(t)) if t.is_empty() => {}
            (Some(Piece::Text(last)), Piece::Text(t)) => last.push_str(&t),
            (Some(Piece::Reasoning(last)), Piece::Reasoning(t)) => last.push_str(&t),
            (_, piece) => out.push(piece),
        }
    }
    out
}

fn check_valid(
    kind: ProviderKind,
    answer: &Answer,
    layout: Layout,
    cuts: &[usize],
) -> Result<(), TestCaseError> {
    let body = render(kind, answer, layout);
    let whole = parse(kind, &body, &[]);
    let mut turn = TurnBuilder::new();
    for event in &whole {
        match event {
            Ok(event) => turn.push(event.clone()),
            Err(error) => {
                return Err(TestCaseError::fail(format!(
                    "valid stream refused: {error}\n{}",
                    String::from_utf8_lossy(&body)
                )));
            }
        }
    }
    let completion = turn.finish();
    let got = shape(completion.parts.iter().map(|part| match part {
        AssistantPart::Text { text, .. } => Piece::Text(text.clone()),
        AssistantPart::Reasoning { text, .. } => Piece::Reasoning(text.clone()),
        AssistantPart::RedactedReasoning { data } => Piece::Text(format!("redacted {data}")),
        AssistantPart::ToolCall(call) => Piece::Call {
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        },
    }));
    prop_assert_eq!(got, shape(answer.pieces.clone()));
    let finish = if answer.has_calls() {
        FinishReason::ToolCalls
    } else {
        FinishReason::Stop
    };
    prop_assert_eq!(completion.finish, Some(finish));
    prop_assert_eq!(
        completion.usage.map(|u| u.output_tokens),
        Some(answer.output)
    );
    prop_assert_eq!(
        completion.usage.map(|u| u.total_input()),
        Some(answer.input)
    );

    let split = parse(kind, &body, cuts);
    prop_assert_eq!(&split, &whole, "cut at {:?}", cuts);
    Ok(())
}

fn check_any(kind: ProviderKind, body: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
    let whole = parse(kind, body, &[]);
    ends_at_first_error(&whole)?;
    let split = parse(kind, body, cuts);
    prop_assert_eq!(&split, &whole, "cut at {:?}", cuts);
    Ok(())
}

// ---- inputs ------------------------------------------------------------------------------

fn cuts() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(any::<usize>(), 0..16)
}

/// Pieces of the provider's own format, to be strung together in any order.
fn pieces(kind: ProviderKind) -> Vec<Vec<u8>> {
    let mut pieces: Vec<Vec<u8>> = [
        &b"data: "[..],
        b"data:",
        b"data",
        b"event: ",
        b"event: message_stop",
        b"id: 7",
        b"retry: 10",
        b": keep-alive",
        b"\n",
        b"\r",
        b"\r\n",
        b"\n\n",
        b"\xEF\xBB\xBF",
        b"\xC3",
        b"\xA9",
        b"\xFF",
        b"{",
        b"}",
        b"[",
        b"]",
        b"\"",
        b",",
        b":",
        b"\\",
        b"\\u00e9",
        b"\\ud800",
        b"null",
        b"1e999",
        b"[DONE]",
        b" ",
    ]
    .iter()
    .map(|p| p.to_vec())
    .collect();
    let sample = Answer {
        pieces: vec![
            Piece::Reasoning("hm".into()),
            Piece::Text("hi \"there\"\n".into()),
            Piece::Call {
                name: "read".into(),
                arguments: json!({"path": "a.rs"}),
            },
        ],
        input: 3,
        output: 4,
    };
    let body = render(
        kind,
        &sample,
        Layout {
            crlf: false,
            keepalive: false,
        },
    );
    for line in body.split(|b| *b == b'\n') {
        pieces.push(line.to_vec());
    }
    pieces
}

fn built_from(kind: ProviderKind) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(pieces(kind)), 0..48).prop_map(|p| p.concat())
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(Index, u8),
    Drop(Index, usize),
    Insert(Index, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Flip(at, byte)),
        (any::<Index>(), 1..16usize).prop_map(|(at, n)| Mutation::Drop(at, n)),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
    ]
}

fn mutate(mut body: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for mutation in mutations {
        if body.is_empty() {
            break;
        }
        match mutation {
            Mutation::Flip(at, byte) => {
                let at = at.index(body.len());
                body[at] ^= byte | 1;
            }
            Mutation::Drop(at, n) => {
                let at = at.index(body.len());
                let end = (at + n).min(body.len());
                body.drain(at..end);
            }
            Mutation::Insert(at, bytes) => {
                let at = at.index(body.len());
                body.splice(at..at, bytes.iter().copied());
            }
        }
    }
    body
}

// ---- the targets -------------------------------------------------------------------------

macro_rules! fuzz_provider {
    ($module:ident, $kind:expr) => {
        mod $module {
            use super::*;

            proptest! {
                #![proptest_config(config(256))]

                #[test]
                fn valid_streams_say_what_was_sent_however_they_are_cut(
                    answer in answer(), layout in layout(), cuts in cuts()
                ) {
                    check_valid($kind, &answer, layout, &cuts)?;
                }

                #[test]
                fn arbitrary_bytes_never_panic_and_cut_anywhere_read_the_same(
                    body in prop::collection::vec(any::<u8>(), 0..1024), cuts in cuts()
                ) {
                    check_any($kind, &body, &cuts)?;
                }

                #[test]
                fn the_formats_own_pieces_in_any_order_read_the_same_however_cut(
                    body in built_from($kind), cuts in cuts()
                ) {
                    check_any($kind, &body, &cuts)?;
                }

                #[test]
                fn damaged_valid_streams_never_panic_and_read_the_same_however_cut(
                    answer in answer(),
                    layout in layout(),
                    mutations in prop::collection::vec(mutation(), 1..4),
                    cuts in cuts(),
                ) {
                    let body = mutate(render($kind, &answer, layout), &mutations);
                    check_any($kind, &body, &cuts)?;
                }
            }

            proptest! {
                #![proptest_config(config(32))]

                /// Every line end, CRLF pair and UTF-8 sequence cut: one byte per chunk.
                #[test]
                fn valid_streams_read_the_same_one_byte_at_a_time(
                    answer in answer(), layout in layout()
                ) {
                    let body = render($kind, &answer, layout);
                    prop_assert_eq!(bytewise($kind, &body), parse($kind, &body, &[]));
                }
            }
        }
    };
}

proptest! {
    #![proptest_config(config(256))]

    /// `<think>` tags in the content, cut at any byte across deltas and the body cut anywhere:
    /// the reasoning and the text read exactly as they were written.
    #[test]
    fn openai_think_tags_split_anywhere_say_what_was_sent(
        answer in answer(), layout in layout(), deltas in cuts(), cuts in cuts()
    ) {
        let body = render_openai_think_tags(&answer, layout, &deltas);
        let mut turn = TurnBuilder::new();
        for event in parse(ProviderKind::Openai, &body, &cuts) {
            match event {
                Ok(event) => turn.push(event),
                Err(error) => return Err(TestCaseError::fail(format!("refused: {error}"))),
            }
        }
        let got = shape(turn.finish().parts.iter().map(|part| match part {
            AssistantPart::Text { text, .. } => Piece::Text(text.clone()),
            AssistantPart::Reasoning { text, .. } => Piece::Reasoning(text.clone()),
            AssistantPart::RedactedReasoning { data } => Piece::Text(data.clone()),
            AssistantPart::ToolCall(call) => Piece::Call {
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            },
        }));
        prop_assert_eq!(got, shape(answer.pieces.clone()));
    }
}

fuzz_provider!(ollama, ProviderKind::Ollama);
fuzz_provider!(openai, ProviderKind::Openai);
fuzz_provider!(anthropic, ProviderKind::Anthropic);
fuzz_provider!(gemini, ProviderKind::Gemini);
