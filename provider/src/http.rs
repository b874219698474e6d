//! The transport every provider shares: the HTTP client, error statuses, timeouts and the retry
//! loop that retries only while nothing has streamed. The body itself is read by [`crate::body`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{BoxStream, Stream, StreamExt};

use crate::body::{Decoder, decode_body};
use crate::error::{ProviderError, TimeoutPhase, from_status, with_context_counts};
use crate::event::{RetryNotice, StreamEvent};
use crate::settings::ProviderConfig;

/// The stream every provider returns.
pub type EventStream = BoxStream<'static, Result<StreamEvent, ProviderError>>;

/// Reads a provider's error body: `(code or type, message)`.
pub(crate) type ErrorBodyParser = fn(&[u8]) -> Option<(Option<String>, String)>;

/// Largest error body read, so a misbehaving server cannot make us buffer without end.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// How long a pooled connection to a provider is kept unused, and how long a provider's HTTP
/// client is kept unused (with its root certificates) before an idle daemon lets go of it: reqwest's
/// own default for the pool, so letting go of the client never closes a connection the pool would
/// still have reused. Building the client again costs about 3 ms (the system's certificates are
/// read and parsed; BENCHMARKS.md, "Soak").
pub const CLIENT_IDLE: Duration = Duration::from_secs(90);

/// One provider's HTTP client and configuration.
pub(crate) struct Transport {
    pub(crate) config: ProviderConfig,
    /// The client and when it was last handed out; `None` once let go of after [`CLIENT_IDLE`]
    /// unused, built again on the next request.
    client: Mutex<Option<(reqwest::Client, Instant)>>,
}

impl Transport {
    /// The provider's base URL followed by `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.config.base())
    }

    pub(crate) fn new(config: ProviderConfig) -> Result<Arc<Self>, ProviderError> {
        // Built once here so that a provider that cannot have a client fails when it is built.
        let client = build_client(&config)?;
        Ok(Arc::new(Transport {
            config,
            client: Mutex::new(Some((client, Instant::now()))),
        }))
    }

    /// The HTTP client, built again when it was let go of.
    pub(crate) fn client(&self) -> Result<reqwest::Client, ProviderError> {
        let mut slot = self.client.lock().unwrap_or_else(|e| e.into_inner());
        let client = match slot.take() {
            Some((client, _)) => client,
            None => build_client(&self.config)?,
        };
        *slot = Some((client.clone(), Instant::now()));
        Ok(client)
    }

    /// Lets go of the HTTP client (its root certificates, and its pool with any connection still
    /// in it) when it was not handed out for `unused`; returns whether it did. Requests under
    /// way keep their own handle and finish.
    pub(crate) fn release_idle(&self, unused: Duration) -> bool {
        let mut slot = self.client.lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            Some((_, used)) if used.elapsed() >= unused => {
                *slot = None;
                true
            }
            _ => false,
        }
    }

    /// Whether the HTTP client is held now (for tests).
    #[cfg(test)]
    pub(crate) fn holds_client(&self) -> bool {
        self.client
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
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
        // Sent by the client it was made with (see `Transport::client`).
        let (client, request) = request.build_split();
        let request = request.map_err(|e| ProviderError::Config {
            provider: self.name().to_owned(),
            message: format!("cannot build the request: {}", error_chain(&e)),
        })?;
        let url = redact_url(request.url());
        let response = tokio::time::timeout(self.config.response_timeout, client.execute(request))
            .await
            .map_err(|_| ProviderError::Timeout {
                provider: self.name().to_owned(),
                phase: TimeoutPhase::Response,
                after: self.config.response_timeout,
            })?
            .map_err(|e| self.request_error(&e, &url))?;
        let status = response.status();
        let html = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.to_ascii_lowercase().starts_with("text/html"));
        if status.is_success() && html {
            // A proxy's sign-in page where the API should be: one line, never the page.
            let body = read_limited(response).await;
            let text = String::from_utf8_lossy(&body);
            let page = crate::error::html_page(text.trim()).unwrap_or_else(|| {
                "the server answered with an HTML page, not the API (a proxy or sign-in page in the way?)".into()
            });
            return Err(ProviderError::Config {
                provider: self.name().to_owned(),
                message: format!("{page}; check the provider's URL"),
            });
        }
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let body = read_limited(response).await;
        let retry_after = retry_after.or_else(|| retry_delay_in_body(&body));
        let (code, message) = parse_error(&body).unwrap_or_else(|| {
            let text = String::from_utf8_lossy(&body).trim().to_owned();
            let text = if text.is_empty() {
                status.canonical_reason().unwrap_or("no message").to_owned()
            } else if let Some(page) = crate::error::html_page(&text) {
                // A proxy's sign-in page or nginx's 502: named, never printed whole.
                page
            } else {
                text
            };
            (None, text)
        });
        // A server may echo the key it was sent; it never reaches a message.
        let keys: Vec<&str> = self.config.api_key.iter().map(String::as_str).collect();
        let message = crate::redact::redact(&message, &keys).into_owned();
        let code = code.map(|c| crate::redact::redact(&c, &keys).into_owned());
        Err(with_context_counts(
            from_status(
                self.name(),
                model,
                status.as_u16(),
                code.as_deref(),
                message,
                retry_after,
            ),
            &body,
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
        F: Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    {
        let mut retry = 0;
        loop {
            let result = async {
                let client = self.client()?;
                let response = self.send(make_request(&client), model, parse_error).await?;
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
                    None => return Err(self.give_up(error)),
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

    /// The error that goes to the caller: when the server asked for a wait longer than Totem
    /// waits, it says how long.
    pub(crate) fn give_up(&self, error: ProviderError) -> ProviderError {
        match error.retry_after() {
            Some(wait) if wait > self.config.retry.max_retry_after => error.with_wait_note(wait),
            _ => error,
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

/// The client a provider's requests go through: TLS by rustls (ring), the system's root
/// certificates, reqwest's pool with [`CLIENT_IDLE`].
fn build_client(config: &ProviderConfig) -> Result<reqwest::Client, ProviderError> {
    // Installing twice is harmless: a second call only reports that one is installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .pool_idle_timeout(CLIENT_IDLE)
        .user_agent(concat!("totem/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ProviderError::Config {
            provider: config.name.clone(),
            message: format!("cannot build the HTTP client: {}", error_chain(&e)),
        })
}

/// Prepares one attempt: the request to send and a fresh decoder for its body.
pub(crate) type Prepare<D> = Box<
    dyn FnMut() -> BoxFuture<'static, Result<(reqwest::RequestBuilder, D), ProviderError>> + Send,
>;

/// Runs a streaming call with retries. Failures before any output (refused connection, 429, 5xx,
/// overload, a stream that broke before its first delta) are retried with backoff; after output
/// has streamed, the error ends the stream, so nothing is ever sent twice.
///
/// The body is framed and decoded on the task that polls the stream, as it arrives: handing
/// frames to another task cost more (allocations freed on another core, a channel per batch) than
/// the framing itself.
pub(crate) fn run_stream<D: Decoder + 'static>(
    transport: Arc<Transport>,
    model: String,
    parse_error: ErrorBodyParser,
    prepare: Prepare<D>,
) -> EventStream {
    run_stream_with(transport, model, parse_error, prepare, Box::new(|_| false))
}

/// Says whether an error before any output means "send it again at once, phrased the other way"
/// (and remembers that for the next [`Prepare`]); asked once per error, before the retries.
pub(crate) type Rephrase = Box<dyn FnMut(&ProviderError) -> bool + Send>;

/// [`run_stream`] with a provider's own second chance for errors a plain retry cannot fix.
pub(crate) fn run_stream_with<D: Decoder + 'static>(
    transport: Arc<Transport>,
    model: String,
    parse_error: ErrorBodyParser,
    mut prepare: Prepare<D>,
    mut rephrase: Rephrase,
) -> EventStream {
    let stream = async_stream::stream! {
        let mut retry: u32 = 0;
        let mut emitted = false;
        'attempts: loop {
            let error = 'attempt: {
                let (request, decoder) = match prepare().await {
                    Ok(prepared) => prepared,
                    Err(error) => break 'attempt error,
                };
                let response = match transport.send(request, &model, parse_error).await {
                    Ok(response) => response,
                    Err(error) => break 'attempt error,
                };
                let body = guarded_body(
                    response,
                    transport.name().to_owned(),
                    transport.config.idle_timeout,
                );
                let events = decode_body(body, decoder);
                futures::pin_mut!(events);
                while let Some(item) = events.next().await {
                    match item {
                        Ok(event) => {
                            emitted |= is_output(&event);
                            yield Ok(event);
                        }
                        Err(error) => break 'attempt error,
                    }
                }
                return;
            };
            if !emitted && rephrase(&error) {
                tracing::info!(provider = transport.name(), "sending again, phrased the other way: {error}");
                continue 'attempts;
            }
            if !emitted && let Some(wait) = transport.retry_wait(&error, retry) {
                retry += 1;
                let notice = RetryNotice::new(&error, wait, retry, transport.config.retry.max_retries);
                tracing::warn!(provider = transport.name(), "{notice}");
                yield Ok(StreamEvent::Retry(notice));
                tokio::time::sleep(wait).await;
                continue 'attempts;
            }
            yield Err(transport.give_up(error));
            return;
        }
    };
    stream.boxed()
}

fn is_output(event: &StreamEvent) -> bool {
    !matches!(
        event,
        StreamEvent::Usage(_) | StreamEvent::Finish(_) | StreamEvent::Retry(_)
    )
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

/// Google's `RetryInfo` in an error body: `{"error":{"details":[{"@type":"….RetryInfo",
/// "retryDelay":"0.55s"}]}}` (a JSON protobuf duration).
fn retry_delay_in_body(body: &[u8]) -> Option<Duration> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let value = value.as_array().and_then(|a| a.first()).unwrap_or(&value);
    value["error"]["details"]
        .as_array()?
        .iter()
        .filter(|detail| {
            detail["@type"]
                .as_str()
                .is_some_and(|t| t.ends_with("RetryInfo"))
        })
        .find_map(|detail| parse_retry_after(detail["retryDelay"].as_str()?.strip_suffix('s')?))
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

    /// A keep-alive HTTP/1.1 server answering every request with `{"models":[]}`; it counts
    /// the connections it accepted and reports each one the client closed.
    async fn keep_alive_server() -> (
        String,
        Arc<std::sync::atomic::AtomicUsize>,
        tokio::sync::mpsc::UnboundedReceiver<()>,
    ) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (closed_tx, closed) = tokio::sync::mpsc::unbounded_channel();
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let closed_tx = closed_tx.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let mut seen = Vec::new();
                    loop {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => {
                                let _ = closed_tx.send(());
                                return;
                            }
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            seen.drain(..end + 4);
                            let body = br#"{"models":[]}"#;
                            let head = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                                body.len()
                            );
                            let _ = socket.write_all(head.as_bytes()).await;
                            let _ = socket.write_all(body).await;
                        }
                    }
                });
            }
        });
        (url, accepted, closed)
    }

    #[tokio::test]
    async fn an_idle_client_is_let_go_of_with_its_connection_and_built_again_on_the_next_request() {
        use std::sync::atomic::Ordering;
        let (url, accepted, mut closed) = keep_alive_server().await;
        let config = ProviderConfig::new("local", crate::ProviderKind::Ollama).with_base_url(url);
        let transport = Transport::new(config.clone()).unwrap();
        let tags = || async {
            transport
                .fetch_json(
                    |client| client.get(transport.url("/api/tags")),
                    "",
                    |_| None,
                    false,
                )
                .await
                .unwrap()
        };
        tags().await;
        tags().await;
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "the connection is pooled"
        );

        // Used just now: kept, with its connection.
        assert!(!transport.release_idle(Duration::from_secs(3600)));
        assert!(transport.holds_client());
        // Unused for long enough: the client goes, and its pooled connection is closed.
        assert!(transport.release_idle(Duration::ZERO));
        assert!(!transport.holds_client());
        tokio::time::timeout(Duration::from_secs(5), closed.recv())
            .await
            .expect("the pooled connection is closed once the client is let go of");

        // The next request builds the client again.
        assert_eq!(tags().await["models"], serde_json::json!([]));
        assert!(transport.holds_client());
        assert_eq!(accepted.load(Ordering::SeqCst), 2);

        // The same through a provider, as the daemon's idle sweep calls it.
        let provider = crate::build(config).unwrap();
        assert!(provider.list_models().await.unwrap().is_empty());
        assert!(!provider.release_idle_client(Duration::from_secs(3600)));
        assert!(provider.release_idle_client(Duration::ZERO));
        tokio::time::timeout(Duration::from_secs(5), closed.recv())
            .await
            .expect("the provider's pooled connection is closed");
        assert!(provider.list_models().await.unwrap().is_empty());
    }

    #[test]
    fn retry_delay_is_read_from_googles_retry_info() {
        let body =
            br#"{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED",
            "details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},
            {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.55s"}]}}"#;
        assert_eq!(retry_delay_in_body(body), Some(Duration::from_millis(550)));
        assert_eq!(
            retry_delay_in_body(
                br#"[{"error":{"details":[{"@type":"x.RetryInfo","retryDelay":"3s"}]}}]"#
            ),
            Some(Duration::from_secs(3))
        );
        assert_eq!(retry_delay_in_body(br#"{"error":{"message":"x"}}"#), None);
        assert_eq!(retry_delay_in_body(b"not json"), None);
    }

    #[test]
    fn retry_after_reads_seconds() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }
}
