//! The web client against the real totemd: the door of its HTTP side (one-time token, cookie,
//! Host and Origin, the Content-Security-Policy, the WebSocket's own checks), the protocol over
//! the WebSocket being the socket's (same methods, events and errors, a question answered there
//! withdrawn for a client on the socket), then the page itself in Debian's chromium driven by
//! playwright-core (`web/test/e2e.mjs`): streaming, a question answered while `totem attach`
//! watches, undo and redo, hostile text shown as text, a notification, a terminal taken over, the
//! run timeline, the phone layout — in the installed chromium and in the version before it; and a
//! shorter walk in Firefox ESR (`web/test/e2e-firefox.mjs`) and in WebKitGTK, the engine Safari is
//! built on (`web/test/e2e-webkit.mjs`).

mod agent_common;

use std::time::Duration;

use agent_common::{Env, text};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, Message, client::IntoClientRequest};
use totem_tests::harness::TestDaemon;
use totem_tests::setup::plain_project;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// totemd whose HTTP listener (`mcpServer.http`) is on a free port, with the simulator, a
/// project and a session; `mcp` turns the MCP endpoint on too.
async fn web_env(mcp: bool, bind: &str) -> (tempfile::TempDir, Env) {
    let home = tempfile::tempdir().expect("home");
    let port = free_port();
    std::fs::write(
        home.path().join("settings.json"),
        json!({"version": 1, "mcpServer": {"http": {"enabled": mcp, "port": port, "bind": bind}}})
            .to_string(),
    )
    .expect("settings.json");
    let env = Env::start_on(TestDaemon::start_in(home.path()), plain_project()).await;
    (home, env)
}

/// `web.open`: the page's URL with its one-time token.
async fn open(env: &Env) -> (String, String) {
    let opened = env
        .client
        .call_raw("web.open", json!({}))
        .await
        .expect("web.open");
    assert_eq!(opened["remote"], false, "{opened}");
    let url = opened["url"].as_str().expect("url").to_string();
    let (base, token) = url.split_once("/?token=").expect("a token in the URL");
    (base.to_string(), token.to_string())
}

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// Trades a fresh one-time token for the cookie.
async fn cookie(env: &Env) -> (String, String) {
    let (base, token) = open(env).await;
    let answer = http()
        .get(format!("{base}/?token={token}"))
        .send()
        .await
        .expect("GET");
    assert_eq!(answer.status().as_u16(), 200);
    let set = answer.headers()["set-cookie"]
        .to_str()
        .expect("cookie")
        .to_string();
    let value = set.split(';').next().expect("name=value").to_string();
    (base, value)
}

async fn ws(
    base: &str,
    cookie: Option<&str>,
    origin: Option<&str>,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    tungstenite::Error,
> {
    let mut request = format!("{}/rpc", base.replace("http://", "ws://"))
        .into_client_request()
        .expect("request");
    if let Some(cookie) = cookie {
        request
            .headers_mut()
            .insert("cookie", cookie.parse().expect("header"));
    }
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().expect("header"));
    }
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(stream, _)| stream)
}

fn refused_status(result: Result<impl Sized, tungstenite::Error>) -> u16 {
    match result {
        Err(tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("refused without an HTTP answer: {e}"),
        Ok(_) => panic!("the WebSocket was accepted"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_door_needs_the_one_time_token_or_its_cookie() {
    let (_home, env) = web_env(false, "127.0.0.1").await;
    let (base, token) = open(&env).await;
    let client = http();
    let get = |path: &str, headers: &[(&str, &str)]| {
        let mut request = client.get(format!("{base}{path}"));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send()
    };

    // 1–3: nothing, a wrong token, a wrong cookie.
    for (path, headers) in [
        ("/", vec![]),
        ("/app.js", vec![]),
        ("/?token=totally-wrong", vec![]),
        ("/", vec![("cookie", "totem_web=forged")]),
    ] {
        let answer = get(path, &headers).await.expect("GET");
        assert_eq!(answer.status().as_u16(), 401, "{path} {headers:?}");
        let policy = answer.headers()["content-security-policy"]
            .to_str()
            .expect("policy")
            .to_string();
        assert!(policy.contains("default-src 'none'"), "{policy}");
        let body = answer.text().await.expect("body");
        assert!(body.contains("totem web"), "{body}");
    }

    // 4: the token, once: the page, a strict cookie, a strict policy.
    let first = get(&format!("/?token={token}"), &[]).await.expect("GET");
    assert_eq!(first.status().as_u16(), 200);
    let set = first.headers()["set-cookie"].to_str().expect("cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(flag), "{set}");
    }
    let cookie = set.split(';').next().expect("cookie").to_string();
    let policy = first.headers()["content-security-policy"]
        .to_str()
        .expect("policy")
        .to_string();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'none'",
    ] {
        assert!(policy.contains(part), "{policy}");
    }
    assert!(!policy.contains("unsafe"), "{policy}");
    assert!(
        !policy.contains("http:") && !policy.contains("https:"),
        "{policy}"
    );
    assert_eq!(first.headers()["x-content-type-options"], "nosniff");
    let html = first.text().await.expect("page");
    assert!(html.contains(r#"<script src="/app.js" defer></script>"#));
    assert_eq!(html.matches("<script").count(), 1, "no inline script");
    assert!(!html.contains("style="), "no inline style");
    // The one `<style>` source besides the stylesheet: elements bearing this answer's nonce
    // (xterm.js makes its own), named in the page for the script to set.
    let nonce = policy
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("a style nonce in the policy");
    assert!(nonce.len() >= 32, "{policy}");
    assert!(
        html.contains(&format!(
            r#"<meta name="totem-style-nonce" content="{nonce}">"#
        )),
        "{html}"
    );
    assert!(!policy.contains("script-src 'self' 'nonce"), "{policy}");

    // 5: the same token again.
    let again = get(&format!("/?token={token}"), &[]).await.expect("GET");
    assert_eq!(again.status().as_u16(), 401);
    assert!(again.text().await.expect("body").contains("used already"));

    // 6: the cookie opens the page and its assets.
    for (path, kind) in [
        ("/", "text/html"),
        ("/app.js", "text/javascript"),
        ("/app.css", "text/css"),
    ] {
        let answer = get(path, &[("cookie", &cookie)]).await.expect("GET");
        assert_eq!(answer.status().as_u16(), 200, "{path}");
        let content_type = answer.headers()["content-type"].to_str().expect("type");
        assert!(content_type.starts_with(kind), "{path}: {content_type}");
        assert!(answer.headers().contains_key("content-security-policy"));
    }
    // No remote resource in the bundle: no CDN, no remote font.
    let js = get("/app.js", &[("cookie", &cookie)])
        .await
        .expect("GET")
        .text()
        .await
        .expect("js");
    assert!(!js.contains("cdn."), "a CDN address in the bundle");
    let css = get("/app.css", &[("cookie", &cookie)])
        .await
        .expect("GET")
        .text()
        .await
        .expect("css");
    assert!(
        !css.contains("url("),
        "a remote resource in the style: {css}"
    );

    // 7: a rebinding page's Host, with a stolen cookie even.
    let port = base.rsplit(':').next().expect("port");
    let rebound = get(
        "/",
        &[
            ("cookie", &cookie),
            ("host", &format!("evil.example:{port}")),
        ],
    )
    .await
    .expect("GET");
    assert_eq!(rebound.status().as_u16(), 421);
    // 8: another site's Origin.
    let foreign = get(
        "/app.js",
        &[("cookie", &cookie), ("origin", "http://evil.example")],
    )
    .await
    .expect("GET");
    assert_eq!(foreign.status().as_u16(), 403);
    // 9: the page's own Origin passes; localhost is a loopback name too.
    let own = get("/app.js", &[("cookie", &cookie), ("origin", base.as_str())])
        .await
        .expect("GET");
    assert_eq!(own.status().as_u16(), 200);
    let localhost = get(
        "/",
        &[("cookie", &cookie), ("host", &format!("localhost:{port}"))],
    )
    .await
    .expect("GET");
    assert_eq!(localhost.status().as_u16(), 200);
    // 10: other methods and paths.
    let post = client
        .post(format!("{base}/"))
        .header("cookie", &cookie)
        .body("x")
        .send()
        .await
        .expect("POST");
    assert_eq!(post.status().as_u16(), 405);
    let missing = get("/../../etc/passwd", &[("cookie", &cookie)])
        .await
        .expect("GET");
    assert_eq!(missing.status().as_u16(), 404);
    // 11: the MCP endpoint is not served while it is off in settings.
    let mcp = get("/mcp", &[("cookie", &cookie)]).await.expect("GET");
    assert_eq!(mcp.status().as_u16(), 404);

    // 12–14: the WebSocket needs the cookie and the page's Origin.
    assert_eq!(refused_status(ws(&base, None, Some(&base)).await), 401);
    assert_eq!(refused_status(ws(&base, Some(&cookie), None).await), 403);
    assert_eq!(
        refused_status(ws(&base, Some(&cookie), Some("http://evil.example")).await),
        403
    );
    assert_eq!(
        refused_status(ws(&base, Some("totem_web=forged"), Some(&base)).await),
        401
    );
    // 15: with both it speaks the protocol.
    let mut socket = ws(&base, Some(&cookie), Some(&base))
        .await
        .expect("the WebSocket");
    let answer = rpc(&mut socket, 1, "daemon.status", json!({})).await;
    assert_eq!(
        answer["error"]["message"]
            .as_str()
            .expect("not initialized"),
        "call initialize first: {\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"client\":{\"name\":\"…\",\"version\":\"…\"}}}"
    );
    // The daemon keeps serving everyone.
    env.client
        .call_raw("daemon.status", json!({}))
        .await
        .expect("status");
}

async fn rpc<S>(socket: &mut S, id: u64, method: &str, params: Value) -> Value
where
    S: futures::Sink<Message, Error = tungstenite::Error>
        + futures::Stream<Item = Result<Message, tungstenite::Error>>
        + Unpin,
{
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    socket.send(Message::text(line)).await.expect("send");
    answer(socket, id).await
}

/// Reads until the answer with `id`, skipping notifications.
async fn answer<S>(socket: &mut S, id: u64) -> Value
where
    S: futures::Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .expect("an answer in time")
            .expect("open")
            .expect("a message");
        if let Message::Text(text) = message {
            let value: Value = serde_json::from_str(&text).expect("JSON");
            if value["id"] == json!(id) {
                return value;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_websocket_is_the_protocol_and_a_question_answered_there_is_withdrawn_elsewhere() {
    let (_home, env) = web_env(true, "127.0.0.1").await;
    let (base, cookie) = cookie(&env).await;
    // The MCP endpoint shares the listener, behind its own door.
    let mcp = http()
        .post(format!("{base}/mcp"))
        .header("cookie", &cookie)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .expect("POST");
    assert_eq!(
        mcp.status().as_u16(),
        401,
        "the cookie is not the MCP token"
    );

    let mut socket = ws(&base, Some(&cookie), Some(&base))
        .await
        .expect("the WebSocket");
    let init = rpc(
        &mut socket,
        1,
        "initialize",
        json!({"protocolVersion": 1, "client": {"name": "test", "version": "1"},
               "capabilities": {"permissions": true}}),
    )
    .await;
    let methods = init["result"]["capabilities"]["methods"]
        .as_array()
        .expect("methods");
    assert!(methods.contains(&json!("session.prompt")), "{init}");
    // Bad input gets the socket's answers and the connection stays.
    socket.send(Message::text("{not json")).await.expect("send");
    let parse = answer_null(&mut socket).await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    socket
        .send(Message::text(
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"daemon.status\"}\n{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"daemon.status\"}",
        ))
        .await
        .expect("send");
    let newline = answer_null(&mut socket).await;
    assert!(
        newline["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("no raw newline"),
        "{newline}"
    );
    let unknown = rpc(&mut socket, 2, "no.such", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");

    // A run that asks: the page subscribes, the socket client watches the same session.
    let mut watcher = env.subscribe().await;
    let sub = rpc(
        &mut socket,
        3,
        "session.subscribe",
        json!({"sessionId": env.session, "afterSeq": 0}),
    )
    .await;
    assert!(sub["result"].is_string(), "{sub}");
    env.push(vec![agent_common::tool(
        "c1",
        "write",
        json!({"path": "<img src=x onerror=alert(1)>.txt", "content": "hi\n"}),
    )]);
    env.push(vec![text("Written.")]);
    let prompt = rpc(
        &mut socket,
        4,
        "session.prompt",
        json!({"sessionId": env.session, "text": "write it"}),
    )
    .await;
    assert!(prompt["result"]["runId"].is_string(), "{prompt}");
    let question = loop {
        let event = next_event(&mut socket).await;
        if event["type"] == "permission.asked" {
            break event["question"].clone();
        }
    };
    assert_eq!(question["target"], "<img src=x onerror=alert(1)>.txt");
    let reply = rpc(
        &mut socket,
        5,
        "permission.reply",
        json!({"sessionId": env.session, "questionId": question["id"], "reply": {"type": "once"}}),
    )
    .await;
    assert_eq!(reply["result"], json!({}), "{reply}");
    // The socket client sees the question withdrawn, and the run end.
    let mut resolved = false;
    loop {
        let event = agent_common::next_event(&mut watcher, 20).await;
        let value = serde_json::to_value(&event).expect("event");
        if value["type"] == "permission.resolved" {
            assert_eq!(value["reply"]["type"], "once");
            resolved = true;
        }
        if agent_common::is_run_end(&event.kind) {
            break;
        }
    }
    assert!(resolved, "the socket client saw the answer");
    assert_eq!(
        std::fs::read_to_string(env.root().join("<img src=x onerror=alert(1)>.txt"))
            .expect("the file"),
        "hi\n"
    );
}

async fn answer_null<S>(socket: &mut S) -> Value
where
    S: futures::Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    next_matching(socket, |value| {
        (value.get("id") == Some(&Value::Null)).then(|| value.clone())
    })
    .await
}

async fn next_event<S>(socket: &mut S) -> Value
where
    S: futures::Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    next_matching(socket, |value| {
        (value["method"] == "session.event").then(|| value["params"]["result"].clone())
    })
    .await
}

/// The first JSON text message `pick` takes, within 20 s.
async fn next_matching<S>(socket: &mut S, pick: impl Fn(&Value) -> Option<Value>) -> Value
where
    S: futures::Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .expect("a message in time")
            .expect("open")
            .expect("a message");
        if let Message::Text(text) = message {
            let value: Value = serde_json::from_str(&text).expect("JSON");
            if let Some(found) = pick(&value) {
                return found;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_address_needs_a_configured_token() {
    let (_home, env) = web_env(false, "0.0.0.0").await;
    let refused = env
        .client
        .call_raw("web.open", json!({}))
        .await
        .expect_err("no listener on 0.0.0.0 without a token");
    assert!(refused.to_string().contains("totem mcp token"), "{refused}");
    env.client
        .call_raw("mcpToken.rotate", json!({}))
        .await
        .expect("token");
    let opened = env
        .client
        .call_raw("web.open", json!({}))
        .await
        .expect("web.open");
    assert_eq!(opened["remote"], true, "{opened}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_in_chromium() {
    chromium_walk(totem_tests::external::chromium()).await;
}

/// The same walk in the chromium before (the last two versions are what the web client supports).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_in_the_chromium_before() {
    chromium_walk(totem_tests::external::previous_chromium()).await;
}

/// `web/test/e2e.mjs` in `chromium`, with the model's answers it expects and a second client.
async fn chromium_walk(chromium: std::path::PathBuf) {
    use totem_tests::sim::{Reply, Script};
    let tools = totem_tests::external::npm_install("playwright", &["playwright-core@1.65.1"]);
    let (home, env) = web_env(false, "127.0.0.1").await;
    // 1: an answer in slow chunks, with code, hostile HTML, and a bidi override and an OSC title
    // (shown as escapes).
    let chunks = [
        "First words, ",
        "then code:\n\n```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n\n",
        "<img src=x onerror=window.__xss=1><script>window.__xss=2</script>",
        "[link](javascript:window.__xss=5)\n\n",
        "Named \u{202e}txt.exe \x1b]0;pwned\x07 here.\n\n",
        "Last words.",
    ];
    env.sim.push(Reply::Stream(Script {
        delay_ms: 600,
        ..Script::new(chunks.iter().map(|c| text(c)))
    }));
    // 2: two writes that ask, then an answer.
    let hostile = "<img src=x onerror=window.__xss=3>.md";
    env.push(vec![agent_common::tool(
        "c1",
        "write",
        json!({"path": hostile, "content": "<script>window.__xss=4</script>\n"}),
    )]);
    env.push(vec![agent_common::tool(
        "c2",
        "write",
        json!({"path": "docs/second.txt", "content": "two\n"}),
    )]);
    env.push(vec![text("Both written.")]);
    // 3: a shell on the model's terminal (the page answers its question while hidden, then
    // takes the terminal over).
    env.push(vec![agent_common::tool(
        "c3",
        "terminal",
        json!({"action": "start", "command": "bash --norc --noprofile -i"}),
    )]);
    env.push(vec![text("A shell is running.")]);

    let mut watcher = env.subscribe().await;
    // `totem attach` watches the session in a terminal of its own: it shows the first question,
    // then sees it answered (by the page).
    let attach = {
        let mut command = std::process::Command::new(totem_tests::harness::binary("totem"));
        command
            .args(["attach", "--session", &env.session])
            .current_dir(env.root())
            .env("TOTEM_HOME", home.path())
            .env("NO_COLOR", "1")
            .env("TERM", "xterm")
            .env_remove("TOTEM_LOG");
        std::thread::spawn(move || -> Result<(), String> {
            use expectrl::Expect;
            let mut repl = expectrl::Session::spawn(command).map_err(|e| e.to_string())?;
            repl.set_expect_timeout(Some(Duration::from_secs(90)));
            repl.expect("? write wants to")
                .map_err(|e| format!("no question in `totem attach`: {e}"))?;
            repl.expect("· permission granted")
                .map_err(|e| format!("`totem attach` never saw the question answered: {e}"))?;
            let _ = repl.send(expectrl::ControlCode::EndOfTransmission);
            Ok(())
        })
    };
    let opened = env
        .client
        .call_raw("web.open", json!({}))
        .await
        .expect("web.open");
    let signals = tempfile::tempdir().expect("signals");
    let shots = std::env::var_os("TOTEM_WEB_SHOTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| signals.path().to_path_buf());
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../web/test/e2e.mjs");
    let mut node = tokio::process::Command::new("node")
        .arg("--test")
        .arg("--test-reporter=spec")
        .arg(&script)
        .env("TOTEM_E2E_URL", opened["url"].as_str().expect("url"))
        .env("TOTEM_E2E_TOOLS", &tools)
        .env("TOTEM_E2E_CHROMIUM", &chromium)
        .env("TOTEM_TEST_PROJECT", env.root())
        .env("TOTEM_E2E_SIGNALS", signals.path())
        .env("TOTEM_E2E_SHOTS", &shots)
        .kill_on_drop(true)
        .spawn()
        .expect("node");
    // The second question is answered from the socket, as another client would.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(150);
    let mut answered = false;
    let status = loop {
        if let Ok(Some(status)) = node.try_wait() {
            break status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the browser test took too long"
        );
        if !answered && signals.path().join("asked2").exists() {
            let open = env
                .client
                .call_raw("permission.list", json!({"sessionId": env.session}))
                .await
                .expect("permission.list");
            // A question is open in the daemon before any client is told of it: the one the
            // page shows is listed (in the page's session, the test's).
            let question = &open["questions"][0];
            assert_eq!(question["target"], "docs/second.txt", "{open}");
            env.reply(
                question["id"].as_str().expect("id"),
                json!({"type": "once"}),
            )
            .await;
            answered = true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        status.success(),
        "the browser test failed (its output is above); the second question was {}answered \
         from the socket",
        if answered { "" } else { "not " }
    );
    assert!(answered, "the page showed the second question");
    // The socket client saw the question the page answered, answered.
    let mut replies = Vec::new();
    while let Ok(Some(Ok(event))) =
        tokio::time::timeout(Duration::from_millis(500), watcher.next()).await
    {
        let value = serde_json::to_value(&event).expect("event");
        if value["type"] == "permission.resolved" {
            replies.push(value["reply"]["type"].clone());
        }
    }
    assert_eq!(replies, vec![json!("once"), json!("once"), json!("once")]);
    attach
        .join()
        .expect("the attach thread")
        .expect("`totem attach` watched the question answered in the page");
    // What the page typed reached the shell: the daemon's own screen of it shows the answer.
    let list = env
        .client
        .call_raw("terminal.list", json!({"sessionId": env.session}))
        .await
        .expect("terminal.list");
    let id = list["terminals"][0]["id"].as_str().expect("a terminal");
    let screen = env
        .client
        .call_raw("terminal.screen", json!({"id": id}))
        .await
        .expect("terminal.screen");
    let text = screen["text"].as_str().expect("text");
    assert!(text.contains("echo taken-$((6*7))\ntaken-42"), "{text}");
}

/// The page in Firefox (Debian's ESR over WebDriver BiDi, `web/test/e2e-firefox.mjs`): what
/// differs between engines — the policy's styles, Markdown, questions with a diff and a command,
/// xterm.js taken over, the timeline's SVG, the phone layout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_in_firefox() {
    let firefox = totem_tests::external::firefox();
    let tools = totem_tests::external::npm_install("playwright-bidi", &["playwright-core@1.54.2"]);
    engine_walk(
        "e2e-firefox.mjs",
        "firefox-42",
        &tools,
        &[("TOTEM_E2E_FIREFOX", firefox.into_os_string())],
    )
    .await;
}

/// The page in WebKit, the engine Safari is built on (WebKitGTK's MiniBrowser over WebDriver,
/// `web/test/e2e-webkit.mjs`): the same walk as in Firefox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_in_webkit() {
    let tools = totem_tests::external::npm_install("selenium", &["selenium-webdriver@4.40.0"]);
    let webkit = totem_tests::external::webkit();
    engine_walk(
        "e2e-webkit.mjs",
        "webkit-42",
        &tools,
        &[
            ("TOTEM_E2E_WEBDRIVER", webkit.url.clone().into()),
            (
                "TOTEM_E2E_MINIBROWSER",
                webkit.minibrowser.clone().into_os_string(),
            ),
        ],
    )
    .await;
}

/// The shorter walk of another engine: `script` (in web/test) against a session whose model
/// streams an answer, writes a file with a hostile name, then starts a shell; the shell's screen shows `typed` afterwards (what the
/// page typed into it after taking it over). `browser` names the browser to the script.
async fn engine_walk(
    script: &str,
    typed: &str,
    tools: &std::path::Path,
    browser: &[(&str, std::ffi::OsString)],
) {
    use totem_tests::sim::{Reply, Script};
    let (_home, env) = web_env(false, "127.0.0.1").await;
    let chunks = [
        "First words, ",
        "then code:\n\n```rust\nfn main() {}\n```\n\n",
        "<img src=x onerror=window.__xss=1>Last words.",
    ];
    env.sim.push(Reply::Stream(Script {
        delay_ms: 400,
        ..Script::new(chunks.iter().map(|c| text(c)))
    }));
    let hostile = "<img src=x onerror=window.__xss=3>.md";
    env.push(vec![agent_common::tool(
        "c1",
        "write",
        json!({"path": hostile, "content": "<script>window.__xss=4</script>\n"}),
    )]);
    env.push(vec![text("Written.")]);
    env.push(vec![agent_common::tool(
        "c2",
        "terminal",
        json!({"action": "start", "command": "bash --norc --noprofile -i"}),
    )]);
    env.push(vec![text("A shell is running.")]);
    let opened = env
        .client
        .call_raw("web.open", json!({}))
        .await
        .expect("web.open");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../web/test")
        .join(script);
    let mut node = tokio::process::Command::new("node");
    node.arg("--test")
        .arg("--test-reporter=spec")
        .arg(&script)
        .env("TOTEM_E2E_URL", opened["url"].as_str().expect("url"))
        .env("TOTEM_E2E_TOOLS", tools)
        .envs(browser.iter().map(|(name, value)| (name, value)))
        .kill_on_drop(true);
    if let Some(shots) = std::env::var_os("TOTEM_WEB_SHOTS") {
        node.env("TOTEM_E2E_SHOTS", shots);
    }
    let status = tokio::time::timeout(Duration::from_secs(120), node.status())
        .await
        .unwrap_or_else(|_| panic!("{} took too long", script.display()))
        .expect("node");
    assert!(
        status.success(),
        "{} failed (its output is above)",
        script.display()
    );
    assert_eq!(
        std::fs::read_to_string(env.root().join(hostile)).expect("the file the page let write"),
        "<script>window.__xss=4</script>\n"
    );
    let list = env
        .client
        .call_raw("terminal.list", json!({"sessionId": env.session}))
        .await
        .expect("terminal.list");
    let id = list["terminals"][0]["id"].as_str().expect("a terminal");
    let screen = env
        .client
        .call_raw("terminal.screen", json!({"id": id}))
        .await
        .expect("terminal.screen");
    let text = screen["text"].as_str().expect("text");
    assert!(text.contains(typed), "{text}");
}
