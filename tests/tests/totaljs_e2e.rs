//! Against the real framework: a scripted model builds a small Total.js 5 app through Totem's tools
//! (write, edit, bash in a Build run of the real daemon, allowed by the prompt's `allow` rules) in
//! an empty folder; the test installs `total5` from the npm registry, starts the app with
//! `node index.js` on 127.0.0.1, checks that its routes answer what the controller and the action
//! say, and stops it by pid. A second scripted run writes Total.js 4 code and its tool results
//! carry the conventions findings. A third writes the primer's own example (a view with its
//! layout, a NOSQL-backed API action) and calls it with the envelope the primer shows.

mod agent_common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_common::{Answer, Env, notices, results, text, tool};
use serde_json::json;
use totem_protocol::EventKind;

/// The total5 release the facts in TOTALJS.md were checked against.
const TOTAL5: &str = "total5@0.0.14";

const PACKAGE_JSON: &str = r#"{
	"name": "shop",
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

/// Release mode (one process, no watcher) on 127.0.0.1; the port comes from $PORT.
const INDEX_JS: &str = "require('total5');\n\nTotal.run({ watcher: false, ip: '127.0.0.1' });\n";

const CONTROLLER: &str = "exports.install = function() {
	ROUTE('GET /hello/', hello);
	ROUTE('GET /api/items/ --> Items|list');
};

function hello($) {
	$.plain('Hello from Totem');
}
";

const ACTION: &str = "NEWACTION('Items|list', {
	name: 'List items',
	action: function($) {
		$.success(['apple', 'pear']);
	}
});
";

/// A Total.js 4 controller and schema: a handler that uses `this`, a flags array with a size in
/// kB, the v4 `*Schema --> action` route and v4 schema methods.
const V4_CONTROLLER: &str = "exports.install = function() {
	ROUTE('POST /upload/', upload, ['upload'], 1024);
	ROUTE('GET /api/users/ *Users --> query');
};

function upload() {
	var self = this;
	self.json({ success: true });
}
";

const V4_SCHEMA: &str = "NEWSCHEMA('Users', function(schema) {
	schema.define('name', String, true);
	schema.setQuery(function($) {
		$.callback([]);
	});
});
";

/// The app's process group, killed when the test ends however it ends.
struct App {
    child: Child,
}

impl App {
    fn start(root: &Path, port: u16) -> App {
        let log = std::fs::File::create(root.join("app.log")).expect("app log");
        let child = Command::new("node")
            .arg("index.js")
            .current_dir(root)
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start node index.js (is Node.js installed?)");
        App { child }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// SIGTERM to the whole group, then SIGKILL after 10 s; true when the app exited on SIGTERM.
    fn stop(&mut self) -> bool {
        let group = nix::unistd::Pid::from_raw(self.pid());
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
        false
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let group = nix::unistd::Pid::from_raw(self.pid());
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A plain HTTP/1.1 GET: (status, body).
fn get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    request(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"),
    )
}

/// A JSON POST, as a browser's fetch or curl sends it: (status, body).
fn post_json(port: u16, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    request(
        port,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// Sends one raw HTTP/1.1 request and reads the answer: (status, body).
fn request(port: u16, raw: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(raw.as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
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

/// Waits until `path` answers 200 (the server listens before the controllers are loaded).
async fn wait_for(app: &mut App, root: &Path, port: u16, path: &str) -> Option<(u16, String)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = get(port, path);
        if let Ok((200, _)) = answer {
            return answer.ok();
        }
        if let Ok(Some(status)) = app.child.try_wait() {
            panic!(
                "node index.js exited ({status}): {}",
                std::fs::read_to_string(root.join("app.log")).unwrap_or_default()
            );
        }
        if Instant::now() > deadline {
            return answer.ok();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_model_builds_a_total5_app_that_serves_its_routes() {
    // Installed first (once per machine): a registry problem shows before the daemon starts.
    let total5 = totem_tests::external::npm_install("total5", &[TOTAL5]);
    let modules = total5.join("node_modules");
    assert!(
        modules.join("total5/index.js").is_file(),
        "total5 is installed"
    );

    // An empty folder: a new session there is a Total.js 5 project.
    let env = Env::start_in(tempfile::tempdir().expect("app folder")).await;
    let root = env.root();
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "package.json", "content": PACKAGE_JSON}),
    )]);
    env.push(vec![tool(
        "c2",
        "write",
        json!({"path": "index.js", "content": INDEX_JS}),
    )]);
    env.push(vec![tool(
        "c3",
        "write",
        json!({"path": "config", "content": "name : Shop\n"}),
    )]);
    env.push(vec![tool(
        "c4",
        "write",
        json!({"path": "controllers/default.js", "content": CONTROLLER.replace("Hello from Totem", "Hello")}),
    )]);
    env.push(vec![tool(
        "c5",
        "edit",
        json!({"path": "controllers/default.js", "oldString": "$.plain('Hello');", "newString": "$.plain('Hello from Totem');"}),
    )]);
    env.push(vec![tool(
        "c6",
        "write",
        json!({"path": "actions/items.js", "content": ACTION}),
    )]);
    env.push(vec![tool(
        "c7",
        "bash",
        json!({"command": "node --check index.js && node --check controllers/default.js && node --check actions/items.js && echo SYNTAX-OK"}),
    )]);
    env.push(vec![text(
        "The app is ready: GET /hello/ and GET /api/items/.",
    )]);
    let events = env
        .run_done(
            "Create a Total.js 5 app with a hello route and an items action",
            json!({"mode": "build", "allow": ["edit", "bash"]}),
            Answer::None,
        )
        .await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::PermissionAsked { .. })),
        "the prompt's allow rules answered every permission"
    );
    let results = results(&events);
    assert_eq!(results.len(), 7, "{results:#?}");
    for (tool, output, is_error) in &results {
        assert!(!is_error, "{tool} failed: {output}");
        assert!(
            !output.contains("conventions check"),
            "clean Total.js 5 code got findings from {tool}: {output}"
        );
    }
    assert!(results[6].1.contains("SYNTAX-OK"), "{}", results[6].1);
    // The primer went with the requests of a new (empty-folder) project.
    let first = &env.sim.chat_requests()[0].body;
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.contains("Total.js 5"))
    );
    assert_eq!(
        std::fs::read_to_string(root.join("controllers/default.js")).expect("controller"),
        CONTROLLER
    );

    // The framework from the registry, then the app as a person would start it.
    std::os::unix::fs::symlink(&modules, root.join("node_modules")).expect("link node_modules");
    let port = free_port();
    let mut app = App::start(&root, port);
    let hello = wait_for(&mut app, &root, port, "/hello/").await;
    assert_eq!(
        hello,
        Some((200, "Hello from Totem".to_string())),
        "GET /hello/ on port {port}; log: {}",
        std::fs::read_to_string(root.join("app.log")).unwrap_or_default()
    );
    let (status, body) = get(port, "/api/items/").expect("GET /api/items/");
    assert_eq!(status, 200, "{body}");
    let items: serde_json::Value = serde_json::from_str(&body).expect("JSON from the action");
    assert_eq!(items, json!({"success": true, "value": ["apple", "pear"]}));
    let log = std::fs::read_to_string(root.join("app.log")).unwrap_or_default();
    assert!(log.contains("Mode          : release"), "{log}");

    let pid = app.pid();
    assert!(app.stop(), "the app stopped on SIGTERM");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the app's process is gone"
    );
    assert!(get(port, "/hello/").is_err(), "nothing answers any more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn total4_style_code_written_by_the_model_gets_the_findings() {
    let project = tempfile::tempdir().expect("app folder");
    agent_common::write_file(project.path(), "package.json", PACKAGE_JSON);
    agent_common::write_file(project.path(), "index.js", INDEX_JS);
    let env = Env::start_in(project).await;
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "controllers/upload.js", "content": V4_CONTROLLER}),
    )]);
    env.push(vec![tool(
        "c2",
        "write",
        json!({"path": "schemas/users.js", "content": V4_SCHEMA}),
    )]);
    env.push(vec![tool(
        "c3",
        "write",
        json!({"path": "index.js", "content": "require('total4/debug')({ port: 8000 });\n"}),
    )]);
    env.push(vec![text("Done.")]);
    let events = env
        .run_done(
            "Add an upload route and a users schema",
            json!({"allow": ["edit"]}),
            Answer::None,
        )
        .await;
    let results = results(&events);
    assert_eq!(results.len(), 3, "{results:#?}");

    let controller = &results[0].1;
    for rule in ["handler-this", "route-flags-array", "route-v4-schema"] {
        assert!(
            controller.contains(&format!("[{rule}]")),
            "{rule} missing: {controller}"
        );
    }
    assert!(
        controller.contains("controllers/upload.js:7 error [handler-this]"),
        "file:line: {controller}"
    );
    assert!(results[1].1.contains("[schema-v4-api]"), "{}", results[1].1);
    assert!(results[2].1.contains("[boot-total5]"), "{}", results[2].1);
    // The findings went back to the model with the results.
    let last_request = env.sim.chat_requests().pop().expect("a request").body;
    let sent = last_request["messages"].to_string();
    assert!(sent.contains("[handler-this]") && sent.contains("[schema-v4-api]"));
}

/// The primer's example, exactly as the primer shows it: a scripted model writes its files (a
/// view with its layout, a NOSQL-backed action behind `route: 'API ?'`), the app starts on the
/// real total5, and the client calls the primer shows (the `{schema, data}` envelope) get the
/// answers it promises.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_primer_example_runs_on_the_real_framework() {
    let total5 = totem_tests::external::npm_install("total5", &[TOTAL5]);
    let modules = total5.join("node_modules");
    let example = totem_totaljs::primer_example();
    let files: Vec<&(&str, String)> = example.iter().filter(|(p, _)| *p != "client").collect();
    let paths: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
    for needed in ["views/layout.html", "views/index.html", "actions/items.js"] {
        assert!(
            paths.contains(&needed),
            "the primer's example lacks {needed}"
        );
    }
    let client = &example
        .iter()
        .find(|(p, _)| *p == "client")
        .expect("the primer shows a client call")
        .1;

    let env = Env::start_in(tempfile::tempdir().expect("app folder")).await;
    let root = env.root();
    let mut calls = vec![
        ("package.json".to_string(), PACKAGE_JSON.to_string()),
        ("index.js".to_string(), INDEX_JS.to_string()),
        ("config".to_string(), "name : Shop\n".to_string()),
    ];
    calls.extend(files.iter().map(|(p, c)| (p.to_string(), c.clone())));
    for (i, (path, content)) in calls.iter().enumerate() {
        env.push(vec![tool(
            &format!("c{i}"),
            "write",
            json!({"path": path, "content": content}),
        )]);
    }
    env.push(vec![text("Done.")]);
    let events = env
        .run_done(
            "Write the example app",
            json!({"mode": "build", "allow": ["edit"]}),
            Answer::None,
        )
        .await;
    for (tool, output, is_error) in &results(&events) {
        assert!(!is_error, "{tool} failed: {output}");
        assert!(
            !output.contains("conventions check"),
            "the primer's own code got findings: {output}"
        );
    }

    // The primer's other lines, in the same app and boot (#32 item 2): a reusable schema in
    // modules/ named by an action's input, a schema action called with ACTION(), the #auth flag
    // with its MIDDLEWARE, .env, a plugin (index.js; its modules/ is not loaded), NOSQL's chain.
    for (path, content) in PRIMER_LINES {
        agent_common::write_file(&root, path, content);
    }
    std::os::unix::fs::symlink(&modules, root.join("node_modules")).expect("link node_modules");
    let port = free_port();
    let mut app = App::start(&root, port);
    let log = || std::fs::read_to_string(root.join("app.log")).unwrap_or_default();

    // The view, rendered inside the layout.
    let (status, page) = wait_for(&mut app, &root, port, "/")
        .await
        .expect("GET / answers");
    assert_eq!(status, 200, "{page}\n{}", log());
    assert!(
        page.contains("<!DOCTYPE html>") && page.contains("<body><h1>Items</h1>"),
        "{page}"
    );

    // Each client call of the primer, sent as it shows it, answers what it says.
    let mut created = None;
    for line in client.lines() {
        let call = line.strip_prefix("POST /api/ ").expect("a POST /api/ call");
        let (body, answer) = call.split_once(" answers ").expect("the call's answer");
        let (status, got) = post_json(port, "/api/", body).expect("POST /api/");
        assert_eq!(status, 200, "{body} -> {got}\n{}", log());
        let got: serde_json::Value = serde_json::from_str(&got).expect("a JSON answer");
        assert_eq!(got["success"], true, "{body} -> {got}");
        if answer.contains("\"<id>\"") {
            created = got["value"].as_str().map(str::to_string);
            assert!(created.as_ref().is_some_and(|id| !id.is_empty()), "{got}");
        } else {
            let items = got["value"].as_array().expect("a list of items");
            assert_eq!(items.len(), 1, "{got}");
            assert_eq!(items[0]["name"], "Pear");
            assert_eq!(items[0]["id"].as_str(), created.as_deref());
        }
    }
    assert!(created.is_some(), "the primer shows a create call");

    // Invalid input is refused before the action runs.
    let (status, got) = post_json(
        port,
        "/api/",
        r#"{"schema": "Items|create", "data": {"price": 2}}"#,
    )
    .expect("POST /api/");
    assert_eq!(status, 400, "{got}");
    assert!(got.contains("\"name\""), "{got}");

    // Release mode (watcher: false) caches views: an edit shows only after a restart.
    agent_common::write_file(&root, "views/index.html", "<h1>Changed</h1>\n");
    let (_, page) = get(port, "/").expect("GET / again");
    assert!(page.contains("<h1>Items</h1>"), "{page}");

    // .env fills process.env; a plugin's modules/ is not loaded; the reusable @Item schema in
    // modules/ validates an action's input; schema.action registers Users/list for ACTION().
    let (status, got) = get(port, "/facts/").expect("GET /facts/");
    assert_eq!(
        (status, got.as_str()),
        (200, "abc123|plugin|no-plugin-module|users:0|first:Pear"),
        "{}",
        log()
    );
    let (status, got) = post_json(
        port,
        "/api/",
        r#"{"schema": "Items|check", "data": {"price": 1}}"#,
    )
    .expect("POST /api/");
    assert_eq!(status, 400, "@Item requires name: {got}");
    assert!(got.contains("\"name\""), "{got}");

    // #auth runs MIDDLEWARE('auth', ...): without the token the route answers 401.
    let (status, _) = get(port, "/admin/").expect("GET /admin/");
    assert_eq!(status, 401);
    let (status, got) = get(port, "/admin/?token=1").expect("GET /admin/?token=1");
    assert_eq!((status, got.as_str()), (200, "admin"));
    assert!(app.stop(), "the app stopped on SIGTERM");
}

/// The primer's lines beyond its example, as an app writes them (see the primer test).
const PRIMER_LINES: &[(&str, &str)] = &[
    (".env", "SHOP_KEY=abc123\n"),
    (
        "modules/schemas.js",
        "NEWSCHEMA('@Item', '*name:String, price:Number');\n",
    ),
    (
        "actions/check.js",
        "NEWACTION('Items|check', {\n\tinput: '@Item',\n\troute: 'API ?',\n\taction: function($, model) {\n\t\t$.success(model.name);\n\t}\n});\n",
    ),
    (
        "schemas/users.js",
        "NEWSCHEMA('Users', function(schema) {\n\tschema.action('list', { action: $ => $.success([]) });\n});\n",
    ),
    (
        "definitions/auth.js",
        "MIDDLEWARE('auth', function($, next) {\n\tif ($.query.token === '1')\n\t\tnext();\n\telse\n\t\t$.invalid(401);\n});\n",
    ),
    ("plugins/shop/index.js", "exports.name = 'Shop';\n"),
    (
        "plugins/shop/modules/shop.js",
        "global.SHOP_MODULE = true;\n",
    ),
    (
        "controllers/facts.js",
        "exports.install = function() {\n\tROUTE('GET /facts/', facts);\n\tROUTE('GET /admin/ #auth', admin);\n};\n\nasync function facts($) {\n\tvar users = await ACTION('Users/list').promise($);\n\tvar first = await NOSQL('items').find().where('name', 'Pear').sort('name').take(10).first().promise($);\n\t$.plain([process.env.SHOP_KEY, F.plugins.shop ? 'plugin' : 'no-plugin', global.SHOP_MODULE ? 'plugin-module' : 'no-plugin-module', 'users:' + users.value.length, 'first:' + (first ? first.name : '')].join('|'));\n}\n\nfunction admin($) {\n\t$.plain('admin');\n}\n",
    ),
];

/// A copy of the framework inside the project (the sandbox follows no link out of it).
fn install_total5(root: &Path) {
    let total5 = totem_tests::external::npm_install("total5", &[TOTAL5]);
    std::fs::create_dir_all(root.join("node_modules")).expect("node_modules");
    let status = Command::new("cp")
        .arg("-r")
        .arg(total5.join("node_modules/total5"))
        .arg(root.join("node_modules/"))
        .status()
        .expect("cp");
    assert!(status.success(), "copy total5 into the project");
}

/// A Total.js 5 app that starts with `Total.run({})`, holding `files` and a copy of the
/// framework, with a daemon started on it; and its root.
async fn boot_app(files: &[(&str, &str)]) -> (Env, std::path::PathBuf) {
    let project = tempfile::tempdir().expect("app folder");
    let root = project.path().to_path_buf();
    agent_common::write_file(&root, "package.json", PACKAGE_JSON);
    agent_common::write_file(&root, "index.js", "require('total5');\n\nTotal.run({});\n");
    agent_common::write_file(&root, "config", "name : Shop\n");
    for (path, content) in files {
        agent_common::write_file(&root, path, content);
    }
    install_total5(&root);
    (Env::start_in(project).await, root)
}

/// Queues the model's steps: each writes `path` with `content`, then answers `answer`.
fn write_then_answer(env: &Env, steps: &[(&str, &str, &str)]) {
    for (i, (path, content, answer)) in steps.iter().enumerate() {
        env.push(vec![tool(
            &format!("w{i}"),
            "write",
            json!({"path": path, "content": content}),
        )]);
        env.push(vec![text(answer)]);
    }
}

/// Whether the boot check was skipped for want of a kernel sandbox (said on stderr).
fn no_sandbox<'a>(mut notices: impl Iterator<Item = &'a str>) -> bool {
    let skipped = notices.any(|n| n.contains("no kernel sandbox"));
    if skipped {
        eprintln!("skipped: this kernel has no Landlock, so the boot check does not run in runs");
    }
    skipped
}

/// A build run of `prompt` that may write files, to its end.
async fn build_run(env: &Env, prompt: &str) -> Vec<totem_protocol::SessionEvent> {
    env.run_done(
        prompt,
        json!({"mode": "build", "allow": ["edit"]}),
        Answer::None,
    )
    .await
}

/// The boot check (#32 item 1): the model answers after writing an action whose `input: '@Item'`
/// names a schema defined nowhere; Totem starts the app (`Total.run({})`, debug mode as written)
/// in the sandbox, sees the boot fail, and sends the finding with the project's own line back to
/// the model, which fixes it; the second answer boots, its route answers, and the run is done.
/// Nothing is written into the project.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boot_check_sends_what_broke_back_to_the_model() {
    let (env, root) = boot_app(&[("controllers/default.js", CONTROLLER)]).await;
    let broken = "NEWACTION('Items|list', {\n\tinput: '@Item',\n\troute: 'GET /api/list/',\n\taction: function($) {\n\t\t$.success([]);\n\t}\n});\n";
    let fixed = format!("NEWSCHEMA('@Item', '*name:String');\n\n{broken}");
    write_then_answer(
        &env,
        &[
            ("actions/items.js", broken, "Added the list action."),
            (
                "actions/items.js",
                &fixed,
                "Defined the schema above the action.",
            ),
        ],
    );
    let events = build_run(&env, "Add an items list action").await;
    let notices = notices(&events);
    if no_sandbox(notices.iter().map(String::as_str)) {
        return;
    }
    let failed = "Boot check failed: the app did not start: Error: JSON Schema \"Item\" not found (actions/items.js:1)";
    assert_eq!(
        notices.first().map(String::as_str),
        Some(failed),
        "{notices:#?}"
    );
    let passed = notices.get(1).expect("a second boot check");
    assert!(
        // 400: the action's input is required; a 4xx is an answer, not a failure. The
        // controller's GET /api/items/ runs the action the run created, so it is asked too.
        passed.starts_with(
            "Boot check: the app started and answered GET /api/list/ 400, GET /api/items/ 400 ("
        ),
        "{passed}"
    );
    // The model's third request carries the finding, after its own first answer.
    let requests = env.sim.chat_requests();
    assert_eq!(requests.len(), 4);
    let third = requests[2].body.to_string();
    assert!(
        third.contains("and it broke: the app did not start: Error: JSON Schema \\\"Item\\\" not found (actions/items.js:1)"),
        "{third}"
    );
    assert!(!requests[1].body.to_string().contains("it broke"));
    // The app ran with its folders in Totem's temp folder.
    for folder in ["tmp", "logs", "databases"] {
        assert!(
            !root.join(folder).exists(),
            "{folder}/ was created in the project"
        );
    }
    assert!(!root.join("index.pid").exists());
}

/// The notices of the run `events` ends with (the stream holds the session's earlier runs too).
fn last_run_notices(
    events: &[totem_protocol::SessionEvent],
) -> Vec<(totem_protocol::NoticeLevel, String)> {
    let run_id = match events.last().map(|e| &e.kind) {
        Some(EventKind::RunDone { run }) => run.id.clone(),
        other => panic!("the run did not end done: {other:?}"),
    };
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Notice {
                run_id: Some(id),
                level,
                text,
            } if *id == run_id => Some((*level, text.clone())),
            _ => None,
        })
        .collect()
}

/// The texts of the notices of a build run of `prompt`; `None` when the kernel has no sandbox
/// for the boot check (said on stderr).
async fn boot_notices(env: &Env, prompt: &str) -> Option<Vec<String>> {
    let events = build_run(env, prompt).await;
    let notices = last_run_notices(&events);
    if no_sandbox(notices.iter().map(|(_, n)| n.as_str())) {
        return None;
    }
    Some(notices.into_iter().map(|(_, n)| n).collect())
}

/// The boot check asks the routes the run's edits added or changed (#32 item 1): a route that
/// answers 500 but that the edit left alone is not asked, the changed and the added ones are.
/// Then a run whose every fix still fails ends saying, at error level, that the app does not
/// boot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boot_check_asks_changed_routes_and_says_when_the_app_does_not_boot() {
    use totem_protocol::NoticeLevel;
    let before = "exports.install = function() {\n\tROUTE('GET /broken/', $ => $.plain(nosuch));\n\tROUTE('GET /hello/', $ => $.plain('hello'));\n};\n";
    let (env, _) = boot_app(&[("controllers/default.js", before)]).await;
    let after = "exports.install = function() {\n\tROUTE('GET /broken/', $ => $.plain(nosuch));\n\tROUTE('GET /hello/', $ => $.plain('hello again'));\n\tROUTE('GET /new/', $ => $.plain('new'));\n};\n";
    write_then_answer(
        &env,
        &[(
            "controllers/default.js",
            after,
            "Changed the greeting and added /new/.",
        )],
    );
    let events = build_run(&env, "Change the greeting").await;
    let notices = last_run_notices(&events);
    if no_sandbox(notices.iter().map(|(_, n)| n.as_str())) {
        return;
    }
    assert_eq!(notices.len(), 1, "{notices:#?}");
    assert_eq!(notices[0].0, NoticeLevel::Info, "{notices:#?}");
    assert!(
        notices[0].1.starts_with(
            "Boot check: the app started and answered GET /hello/ 200, GET /new/ 200 ("
        ),
        "{notices:#?}"
    );

    // Every fix the model tries still names a schema defined nowhere.
    let fixes: Vec<String> = ["", "// fixed\n", "// fixed again\n"]
        .iter()
        .map(|note| format!(
            "{note}NEWACTION('Items|list', {{\n\tinput: '@Item',\n\troute: 'GET /api/list/',\n\taction: $ => $.success([])\n}});\n"
        ))
        .collect();
    let steps: Vec<(&str, &str, &str)> = fixes
        .iter()
        .map(|fix| ("actions/items.js", fix.as_str(), "Done."))
        .collect();
    write_then_answer(&env, &steps);
    let events = build_run(&env, "Add an items list action").await;
    let notices = last_run_notices(&events);
    let levels: Vec<NoticeLevel> = notices.iter().map(|(l, _)| *l).collect();
    assert_eq!(
        levels,
        [
            NoticeLevel::Warning,
            NoticeLevel::Warning,
            NoticeLevel::Error
        ],
        "{notices:#?}"
    );
    let last = &notices[2].1;
    assert!(
        last.starts_with("The app does not boot: the app did not start: Error: JSON Schema \"Item\" not found (actions/items.js:"),
        "{last}"
    );
    // Two findings went back to the model; the third failure ends the run.
    assert_eq!(env.sim.chat_requests().len(), 2 + 6);
}

/// An edit in actions/ that renames the action a controller's route runs (Qwen2.5-Coder 1.5B did,
/// in bench-tasks): the boot check asks that route although its controller was not touched, and
/// the framework's 400 "action not found" is a failure sent back to the model, not an answer.
/// The model puts the action back and the route answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boot_check_asks_the_routes_of_an_action_the_edit_renamed() {
    let action = "NEWACTION('Products|list', {\n\tname: 'List products',\n\taction: function($) {\n\t\t$.callback(['Hammer']);\n\t}\n});\n";
    let (env, _) = boot_app(&[
        (
            "controllers/default.js",
            "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n\tROUTE('GET /about/', $ => $.plain('about'));\n};\n",
        ),
        ("actions/products.js", action),
    ])
    .await;
    let renamed = action.replace("Products|list", "Contact|create");
    write_then_answer(
        &env,
        &[
            ("actions/products.js", &renamed, "Added the contact action."),
            (
                "actions/products.js",
                action,
                "Put the products action back.",
            ),
        ],
    );
    let Some(texts) = boot_notices(&env, "Add an action Contact|create").await else {
        return;
    };
    assert_eq!(
        texts.first().map(String::as_str),
        Some(
            "Boot check failed: GET /api/products/ answered 400: the action Products|list it runs is not declared (no NEWACTION('Products|list') in actions/)"
        ),
        "{texts:#?}"
    );
    assert!(
        texts
            .get(1)
            .is_some_and(|n| n
                .starts_with("Boot check: the app started and answered GET /api/products/ 200 (")),
        "{texts:#?}"
    );
    let third = env.sim.chat_requests()[2].body.to_string();
    assert!(
        third.contains("the action Products|list it runs is not declared"),
        "{third}"
    );
}

/// A new POST route whose action throws on a valid request (Qwen2.5-Coder 0.5B wrote
/// `model.products.push` into Contact|create and said it was done, c37 and c38): the boot check
/// asks the route the run added with a body its `input` accepts, the action's error goes back to
/// the model with the body sent, and the fixed action answers 200. A POST route the run did not
/// add is not asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boot_check_posts_a_valid_body_to_a_route_the_run_added() {
    let untouched =
        "exports.install = function() {\n\tROUTE('POST /api/reset/', $ => $.plain(nosuch));\n};\n";
    let (env, _) = boot_app(&[("controllers/admin.js", untouched)]).await;
    let broken = "NEWACTION('Contact|create', {\n\troute: 'POST /api/contact/',\n\tinput: '*name:String, *email:Email',\n\taction: function($, model) {\n\t\tmodel.products.push(model.name);\n\t\t$.success();\n\t}\n});\n";
    let fixed = broken.replace("\t\tmodel.products.push(model.name);\n", "");
    write_then_answer(
        &env,
        &[
            ("actions/contact.js", broken, "Added the contact action."),
            ("actions/contact.js", &fixed, "Removed the line that threw."),
        ],
    );
    let Some(texts) = boot_notices(&env, "Add an action Contact|create").await else {
        return;
    };
    assert_eq!(
        texts.first().map(String::as_str),
        Some(
            r#"Boot check failed: POST /api/contact/ with {"name":"Test","email":"test@example.com"} threw TypeError: Cannot read properties of undefined (reading 'push') (actions/contact.js:5) and never answered"#
        ),
        "{texts:#?}"
    );
    assert!(
        texts
            .get(1)
            .is_some_and(|n| n
                .starts_with("Boot check: the app started and answered POST /api/contact/ 200 (")),
        "{texts:#?}"
    );
    let third = env.sim.chat_requests()[2].body.to_string();
    assert!(
        third.contains("threw TypeError: Cannot read properties of undefined (reading 'push') (actions/contact.js:5)"),
        "{third}"
    );
}
