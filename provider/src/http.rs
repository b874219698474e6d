//! The transport every provider shares: the HTTP client, error statuses, timeouts, body framing
//! (NDJSON lines or SSE events) and the retry loop that retries only while nothing has streamed.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::stream::{BoxStream, Stream, StreamExt};
use sse_stream::{Sse, SseByteStream};

use crate::config::ProviderConfig;
use crate::error::{ProviderError, TimeoutPhase, from_status};
use crate::event::StreamEvent;

/// The stream every provider returns.
pub type EventStream = BoxStream<'static, Result<StreamEvent, ProviderError>>;

/// Reads a provider's error body: `(code or type, message)`.
pub(crate) type ErrorBodyParser = fn(&[u8]) -> Option<(Option<String>, String)>;

/// Largest error body read, so a misbehaving server cannot make us buffer without end.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// One provider's HTTP client and configuration.
pub(crate) struct Transport {
    pub(crate) config: ProviderConfig,
    pub(crate) client: reqwest::Client,
}

impl Transport {
    /// The provider's base URL followed by `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.config.base())
    }

    pub(crate) fn new(config: ProviderConfig) -> Result<Arc<Self>, ProviderError> {
        // Installing twice is harmless: a second call only reports that one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .user_agent(concat!("totem/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Config {
                provider: config.name.clone(),
                message: format!("cannot build the HTTP client: {}", error_chain(&e)),
            })?;
        Ok(Arc::new(Transport { config, client }))
    }

    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    /// Sends a request and returns the response when its status is a success; any other status
    /// becomes a typed error carrying the provider's own message.
    pub(crate) async fn send(
        &self,
        request: reqwest::RequestBuilder,
        model: &str,
        parse_error: ErrorBodyParser,
    ) -> Result<reqwest::Response, ProviderError> {
        let request = request.build().map_err(|e| ProviderError::Config {
            provider: self.name().to_owned(),
            message: format!("cannot build the request: {}", error_chain(&e)),
        })?;
        let url = redact_url(request.url());
        let response =
            tokio::time::timeout(self.config.response_timeout, self.client.execute(request))
                .await
                .map_err(|_| ProviderError::Timeout {
                    provider: self.name().to_owned(),
                    phase: TimeoutPhase::Response,
                    after: self.config.response_timeout,
                })?
                .map_err(|e| self.request_error(&e, &url))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let body = read_limited(response).await;
        let (code, message) = parse_error(&body).unwrap_or_else(|| {
            let text = String::from_utf8_lossy(&body).trim().to_owned();
            let text = if text.is_empty() {
                status.canonical_reason().unwrap_or("no message").to_owned()
            } else {
                text
            };
            (None, text)
        });
        Err(from_status(
            self.name(),
            model,
            status.as_u16(),
            code.as_deref(),
            message,
            retry_after,
        ))
    }

    /// GETs or POSTs and reads a whole JSON body, retried like a stream that has not started
    /// when `retries` is set (unset inside a stream's attempt, which has its own retries).
    pub(crate) async fn fetch_json<F>(
        &self,
        make_request: F,
        model: &str,
        parse_error: ErrorBodyParser,
        retries: bool,
    ) -> Result<serde_json::Value, ProviderError>
    where
        F: Fn() -> reqwest::RequestBuilder,
    {
        let mut retry = 0;
        loop {
            let result = async {
                let response = self.send(make_request(), model, parse_error).await?;
                let body = tokio::time::timeout(self.config.idle_timeout, response.bytes())
                    .await
                    .map_err(|_| ProviderError::Timeout {
                        provider: self.name().to_owned(),
                        phase: TimeoutPhase::BetweenChunks,
                        after: self.config.idle_timeout,
                    })?
                    .map_err(|e| ProviderError::StreamBroken {
                        provider: self.name().to_owned(),
                        message: error_chain(&e),
                    })?;
                serde_json::from_slice(&body).map_err(|e| ProviderError::Malformed {
                    provider: self.name().to_owned(),
                    message: format!("invalid JSON body: {e}"),
                })
            }
            .await;
            match result {
                Err(error) if !retries => return Err(error),
                Err(error) => match self.retry_wait(&error, retry) {
                    Some(wait) => {
                        retry += 1;
                        tokio::time::sleep(wait).await;
                    }
                    None => return Err(error),
                },
                ok => return ok,
            }
        }
    }

    /// How long to wait before retry number `retry`, or `None` when the error must go to the caller.
    pub(crate) fn retry_wait(&self, error: &ProviderError, retry: u32) -> Option<Duration> {
        let settings = &self.config.retry;
        if !error.is_retryable() || retry >= settings.max_retries {
            return None;
        }
        match error.retry_after() {
            Some(wait) if wait > settings.max_retry_after => None,
            Some(wait) => Some(wait),
            None => Some(settings.backoff(retry)),
        }
    }

    fn request_error(&self, error: &reqwest::Error, url: &str) -> ProviderError {
        if error.is_timeout() {
            return ProviderError::Timeout {
                provider: self.name().to_owned(),
                phase: TimeoutPhase::Connect,
                after: self.config.connect_timeout,
            };
        }
        if error.is_connect() {
            return ProviderError::Connect {
                provider: self.name().to_owned(),
                url: url.to_owned(),
                message: error_chain(error),
            };
        }
        // Anything else before a response (reset, protocol error) breaks the exchange before output.
        ProviderError::StreamBroken {
            provider: self.name().to_owned(),
            message: error_chain(error),
        }
    }
}

/// Turns one NDJSON line or SSE event into normalized events.
pub(crate) trait Decoder: Send {
    /// `event` is the SSE event name ("" for NDJSON and unnamed SSE events); `data` is the line or
    /// the event's data.
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
}

/// How a response body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    Ndjson,
    Sse,
}

/// Prepares one attempt: the request to send and a fresh decoder for its body.
pub(crate) type Prepare<D> = Box<
    dyn FnMut() -> BoxFuture<'static, Result<(reqwest::RequestBuilder, D), ProviderError>> + Send,
>;

/// Runs a streaming call with retries. Failures before any output (refused connection, 429, 5xx,
/// overload, a stream that broke before its first delta) are retried with backoff; after output
/// has streamed, the error ends the stream, so nothing is ever sent twice.
pub(crate) fn run_stream<D: Decoder + 'static>(
    transport: Arc<Transport>,
    model: String,
    framing: Framing,
    parse_error: ErrorBodyParser,
    mut prepare: Prepare<D>,
) -> EventStream {
    let stream = async_stream::stream! {
        let mut retry: u32 = 0;
        let mut emitted = false;
        let mut out: Vec<StreamEvent> = Vec::with_capacity(8);
        'attempts: loop {
            let error = 'attempt: {
                let (request, mut decoder) = match prepare().await {
                    Ok(prepared) => prepared,
                    Err(error) => break 'attempt error,
                };
                let response = match transport.send(request, &model, parse_error).await {
                    Ok(response) => response,
                    Err(error) => break 'attempt error,
                };
                let mut framer = Framer::spawn(&transport, response, framing);
                loop {
                    let Some(batch) = framer.batches.recv().await else {
                        let finished = decoder.finish(&mut out);
                        for item in out.drain(..) {
                            emitted |= is_output(&item);
                            yield Ok(item);
                        }
                        match finished {
                            Ok(()) => return,
                            Err(error) => break 'attempt error,
                        }
                    };
                    for frame in batch {
                        let (event, data) = match frame {
                            Ok(frame) => frame,
                            Err(error) => break 'attempt error,
                        };
                        let fed = decoder.feed(&event, &data, &mut out);
                        for item in out.drain(..) {
                            emitted |= is_output(&item);
                            yield Ok(item);
                        }
                        if let Err(error) = fed {
                            break 'attempt error;
                        }
                        if decoder.is_done() {
                            return;
                        }
                    }
                }
            };
            if !emitted && let Some(wait) = transport.retry_wait(&error, retry) {
                tracing::warn!(
                    provider = transport.name(),
                    retry = retry + 1,
                    wait_ms = wait.as_millis() as u64,
                    "provider call failed before any output; retrying: {error}"
                );
                retry += 1;
                tokio::time::sleep(wait).await;
                continue 'attempts;
            }
            yield Err(error);
            return;
        }
    };
    stream.boxed()
}

/// One `(event name, data)` frame of a response body.
type Frame = (String, Bytes);

/// Reads and frames a response body on a task of its own and hands the frames over in batches
/// (all that were ready at once), so framing and decoding run on two cores and the hand-over
/// costs little per frame. Dropping the `Framer` stops the task.
struct Framer {
    batches: tokio::sync::mpsc::Receiver<Vec<Result<Frame, ProviderError>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Framer {
    fn spawn(transport: &Transport, response: reqwest::Response, framing: Framing) -> Framer {
        let mut frames = frames(transport, response, framing).ready_chunks(256);
        let (sender, batches) = tokio::sync::mpsc::channel(8);
        let task = tokio::spawn(async move {
            while let Some(batch) = frames.next().await {
                let failed = batch.iter().any(Result::is_err);
                if sender.send(batch).await.is_err() || failed {
                    return;
                }
            }
        });
        Framer { batches, task }
    }
}

impl Drop for Framer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn is_output(event: &StreamEvent) -> bool {
    !matches!(event, StreamEvent::Usage(_) | StreamEvent::Finish(_))
}

/// The body as `(event name, data)` frames, with the between-chunk timeout applied to the raw bytes
/// (so SSE keep-alive comments count as life).
fn frames(
    transport: &Transport,
    response: reqwest::Response,
    framing: Framing,
) -> BoxStream<'static, Result<Frame, ProviderError>> {
    let bytes = guarded_body(
        response,
        transport.name().to_owned(),
        transport.config.idle_timeout,
    );
    match framing {
        Framing::Ndjson => split_lines(bytes)
            .filter_map(|line| async move {
                match line {
                    Ok(line) => {
                        let trimmed = trim_line(&line);
                        (!trimmed.is_empty()).then(|| Ok((String::new(), line.slice_ref(trimmed))))
                    }
                    Err(error) => Some(Err(error)),
                }
            })
            .boxed(),
        Framing::Sse => sse_frames(bytes, transport.name().to_owned()).boxed(),
    }
}

/// SSE events as `(event name, data)` frames, parsed by `sse-stream` straight from the body's
/// chunks (it scans lines with memchr and hands each event's data over without further copies).
fn sse_frames<S>(
    bytes: S,
    provider: String,
) -> impl Stream<Item = Result<Frame, ProviderError>> + Send + 'static
where
    S: Stream<Item = Result<Bytes, ProviderError>> + Send + 'static,
{
    SseByteStream::new(bytes).filter_map(move |event| {
        let frame = match event {
            // No data means no event (WHATWG: "if the data buffer is an empty string").
            Ok(Sse { data: None, .. }) => None,
            Ok(Sse {
                event,
                data: Some(data),
                ..
            }) => Some(Ok((event.unwrap_or_default(), Bytes::from(data)))),
            Err(error) => Some(Err(sse_error(&provider, error))),
        };
        std::future::ready(frame)
    })
}

/// The transport's own error comes back out of the SSE parser unchanged; anything else is a
/// body that is not an event stream.
fn sse_error(provider: &str, error: sse_stream::Error) -> ProviderError {
    match error {
        sse_stream::Error::Body(inner) => match inner.downcast::<ProviderError>() {
            Ok(error) => *error,
            Err(other) => ProviderError::StreamBroken {
                provider: provider.to_owned(),
                message: error_chain(other.as_ref()),
            },
        },
        other => ProviderError::Malformed {
            provider: provider.to_owned(),
            message: format!(
                "the event stream could not be parsed: {}",
                error_chain(&other)
            ),
        },
    }
}

fn trim_line(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\n' | b'\r' | b' ' | b'\t') {
        end -= 1;
    }
    &line[..end]
}

/// The response body, each chunk awaited at most `idle` long; a transport failure mid-body is a
/// broken stream.
fn guarded_body(
    response: reqwest::Response,
    provider: String,
    idle: Duration,
) -> impl Stream<Item = Result<Bytes, ProviderError>> + Send + 'static {
    async_stream::stream! {
        let mut body = response.bytes_stream();
        loop {
            match tokio::time::timeout(idle, body.next()).await {
                Err(_) => {
                    yield Err(ProviderError::Timeout {
                        provider: provider.clone(),
                        phase: TimeoutPhase::BetweenChunks,
                        after: idle,
                    });
                    return;
                }
                Ok(None) => return,
                Ok(Some(Ok(chunk))) => yield Ok(chunk),
                Ok(Some(Err(error))) => {
                    yield Err(ProviderError::StreamBroken {
                        provider: provider.clone(),
                        message: error_chain(&error),
                    });
                    return;
                }
            }
        }
    }
}

/// Re-chunks a byte stream into NDJSON lines without copying: a line is a slice of the chunk it
/// arrived in unless it spans chunks.
fn split_lines<S>(bytes: S) -> impl Stream<Item = Result<Bytes, ProviderError>> + Send + 'static
where
    S: Stream<Item = Result<Bytes, ProviderError>> + Send + 'static,
{
    async_stream::stream! {
        let mut pending = BytesMut::new();
        futures::pin_mut!(bytes);
        while let Some(chunk) = bytes.next().await {
            let mut chunk = match chunk {
                Ok(chunk) => chunk,
                Err(error) => {
                    yield Err(error);
                    return;
                }
            };
            while let Some(at) = memchr::memchr(b'\n', &chunk) {
                let line = chunk.split_to(at + 1);
                if pending.is_empty() {
                    yield Ok(line);
                } else {
                    pending.extend_from_slice(&line);
                    yield Ok(pending.split().freeze());
                }
            }
            if !chunk.is_empty() {
                pending.extend_from_slice(&chunk);
            }
        }
        if !pending.is_empty() {
            yield Ok(pending.split().freeze());
        }
    }
}

async fn read_limited(response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Ok(Some(Ok(chunk))) =
        tokio::time::timeout(Duration::from_secs(10), stream.next()).await
    {
        let room = MAX_ERROR_BODY.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_ERROR_BODY {
            break;
        }
    }
    body
}

/// `Retry-After` as seconds (integer or decimal). HTTP dates are rare from model APIs and are left
/// to the backoff.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

/// The URL without its query, which is where a careless configuration could hold a key.
fn redact_url(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    url.set_query(None);
    url.to_string()
}

/// An error and its sources on one line ("error sending request: connection refused").
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let chunks = chunks.into_iter().map(Ok::<_, ProviderError>);
        sse_frames(futures::stream::iter(chunks), "test".into())
            .map(|frame| {
                let (event, data) = frame.unwrap();
                (event, String::from_utf8(data.to_vec()).unwrap())
            })
            .collect()
            .await
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

    #[tokio::test]
    async fn sse_frames_pass_the_transport_error_through() {
        let chunks = vec![
            Ok(Bytes::from_static(b"data: a\n\n")),
            Err(ProviderError::StreamBroken {
                provider: "test".into(),
                message: "connection reset".into(),
            }),
        ];
        let frames: Vec<_> = sse_frames(futures::stream::iter(chunks), "test".into())
            .collect()
            .await;
        assert!(matches!(&frames[0], Ok((_, data)) if data.as_ref() == b"a"));
        assert!(
            matches!(&frames[1], Err(ProviderError::StreamBroken { message, .. }) if message == "connection reset"),
            "{:?}",
            frames[1]
        );
    }

    #[test]
    fn retry_after_reads_seconds() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }

    #[tokio::test]
    async fn split_lines_joins_lines_across_chunks() {
        let chunks: Vec<Result<Bytes, ProviderError>> = vec![
            Ok(Bytes::from_static(b"{\"a\":1}\n{\"b\"")),
            Ok(Bytes::from_static(b":2}\n")),
            Ok(Bytes::from_static(b"{\"c\":3}")),
        ];
        let lines: Vec<Bytes> = split_lines(futures::stream::iter(chunks))
            .map(|l| l.unwrap())
            .collect()
            .await;
        assert_eq!(
            lines,
            vec![
                Bytes::from_static(b"{\"a\":1}\n"),
                Bytes::from_static(b"{\"b\":2}\n"),
                Bytes::from_static(b"{\"c\":3}"),
            ]
        );
    }
}

#[cfg(test)]
mod bench {
    //! `cargo test --release -p totem-provider --lib bench_ -- --ignored --nocapture`
    use super::*;
    use crate::openai::OpenAiDecoder;
    use std::time::Instant;

    fn body(n: usize) -> Vec<Bytes> {
        let mut all = Vec::new();
        for _ in 0..n {
            all.extend_from_slice(br#"data: {"id":"chatcmpl-sim1","object":"chat.completion.chunk","created":1735000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}],"usage":null}"#);
            all.extend_from_slice(b"\n\n");
        }
        all.chunks(64 * 1024).map(Bytes::copy_from_slice).collect()
    }

    #[tokio::test]
    #[ignore]
    async fn bench_sse_stages() {
        let n = 100_000;
        let chunks = body(n);
        let source =
            || futures::stream::iter(chunks.clone().into_iter().map(Ok::<_, ProviderError>));

        let t = Instant::now();
        let events = SseByteStream::new(source()).count().await;
        println!("sse-stream on 64k chunks: {events} in {:?}", t.elapsed());

        let t = Instant::now();
        let events = eventsource_stream::Eventsource::eventsource(source())
            .count()
            .await;
        println!(
            "eventsource-stream on 64k chunks: {events} in {:?}",
            t.elapsed()
        );

        let t = Instant::now();
        let mut decoder = OpenAiDecoder::new("x".into());
        let mut out = Vec::new();
        let mut stream = Box::pin(SseByteStream::new(source()));
        let mut count = 0;
        while let Some(Ok(event)) = stream.next().await {
            let data = event.data.unwrap_or_default();
            decoder.feed("", data.as_bytes(), &mut out).unwrap();
            count += out.drain(..).count();
        }
        println!("+decoder: {count} in {:?}", t.elapsed());

        let line = br#"{"id":"chatcmpl-sim1","object":"chat.completion.chunk","created":1735000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}],"usage":null}"#;
        let t = Instant::now();
        let mut decoder = OpenAiDecoder::new("x".into());
        for _ in 0..n {
            decoder.feed("", line, &mut out).unwrap();
            out.clear();
        }
        println!("decoder alone: {n} in {:?}", t.elapsed());

        let t = Instant::now();
        for _ in 0..n {
            let v: serde::de::IgnoredAny = serde_json::from_slice(line).unwrap();
            std::hint::black_box(v);
        }
        println!("IgnoredAny: {n} in {:?}", t.elapsed());

        let t = Instant::now();
        for _ in 0..n {
            let v: crate::openai::Chunk<'_> = serde_json::from_slice(line).unwrap();
            std::hint::black_box(v);
        }
        println!("serde_json Chunk: {n} in {:?}", t.elapsed());
    }
}
