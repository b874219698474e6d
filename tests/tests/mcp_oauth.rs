//! `totem mcp login`: OAuth for remote MCP servers, against a real authorization server written
//! with the official MCP Python SDK (`tests/mcp/oauth_server.py`: metadata, dynamic client
//! registration, authorization code with PKCE, refresh tokens; it approves at once). The test
//! plays the browser: it opens the page `totem mcp login` prints and follows the redirect back
//! to Totem's loopback address.

mod cli_common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cli_common::{Cli, assert_exit, stderr, stdout};
use serde_json::{Value, json};
use totem_tests::sim::{Reply, Script, SimEvent};

fn python() -> PathBuf {
    totem_tests::external::python_venv("mcp", &["mcp==2.3.0"]).join("python")
}

/// The OAuth-protected server on a free port, stopped when dropped.
struct OAuthServer {
    child: Child,
    port: u16,
    runtime: tokio::runtime::Runtime,
}

impl OAuthServer {
    fn start(extra: &[&str]) -> OAuthServer {
        let port = cli_common::free_port();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/oauth_server.py");
        let child = Command::new(python())
            .arg(script)
            .arg(port.to_string())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the OAuth server");
        cli_common::wait_until_listening(port);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        OAuthServer {
            child,
            port,
            runtime,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// One of the server's test hooks (`/test/…`).
    fn hook(&self, method: &str, path: &str) -> Value {
        let url = format!("http://127.0.0.1:{}/test/{path}", self.port);
        self.runtime.block_on(async {
            let client = browser();
            let request = match method {
                "POST" => client.post(&url),
                _ => client.get(&url),
            };
            let answer = request.send().await.expect("test hook");
            answer.json().await.expect("test hook JSON")
        })
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP client that, like a person's browser here, does not follow redirects by itself.
fn browser() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// `totem mcp login NAME EXTRA… --no-browser`, with the test as the browser: it opens the page
/// Totem prints, the server approves and redirects to Totem's loopback address, which the test
/// follows. Returns the command's output and the page the loopback address showed.
fn log_in(cli: &Cli, server: &OAuthServer, name: &str, extra: &[&str]) -> (Output, String) {
    let mut args = vec!["mcp", "login", name, "--no-browser"];
    args.extend(extra);
    let mut child = cli
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("totem mcp login");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"));
    let mut shown = String::new();
    let mut page_url = None;
    let mut line = String::new();
    while page_url.is_none() && lines.read_line(&mut line).unwrap_or(0) > 0 {
        shown.push_str(&line);
        if let Some(url) = line.trim().strip_prefix("http") {
            page_url = Some(format!("http{url}"));
        }
        line.clear();
    }
    let page = page_url.map(|url| {
        server.runtime.block_on(async {
            let client = browser();
            let approved = client.get(&url).send().await.expect("authorization page");
            assert_eq!(approved.status().as_u16(), 302, "{url}");
            let back = approved
                .headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .expect("redirect")
                .to_string();
            assert!(back.starts_with("http://127.0.0.1:"), "{back}");
            let page = client.get(&back).send().await.expect("Totem's loopback");
            page.text().await.unwrap_or_default()
        })
    });
    let mut rest = String::new();
    let _ = lines.read_to_string(&mut rest);
    shown.push_str(&rest);
    let status = child.wait().expect("wait");
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (
        Output {
            code: status.code(),
            stdout: shown,
            stderr: err,
        },
        page.unwrap_or_default(),
    )
}

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Every file under Totem's home, as text: where a token must never be found.
fn home_text(home: &Path) -> String {
    let mut out = String::new();
    let mut dirs = vec![home.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    out
}

fn list(cli: &Cli) -> Value {
    let out = cli.run(["mcp", "list", "--json"]);
    assert_exit(&out, 0);
    serde_json::from_str(&stdout(&out)).expect("mcp list JSON")
}

/// A headless run whose model calls the server's tool once, then answers.
fn script_tool_call(runtime: &tokio::runtime::Runtime, sim: &totem_tests::sim::Sim) {
    {
        let _guard = runtime.enter();
        sim.push(Reply::Stream(Script::new(vec![SimEvent::tool_call(
            "c1",
            "remote_secret_word",
            json!({}),
        )])));
        sim.push(Reply::Stream(Script::new(vec![SimEvent::text("Done.")])));
    }
}

fn headless(cli: &Cli) -> std::process::Output {
    cli.run([
        "run",
        "--model",
        totem_tests::setup::MODEL,
        "--allow",
        "mcp_server(remote)",
        "--allow",
        "remote_secret_word",
        "say the secret word",
    ])
}

/// `totem mcp test remote` fails and says what to do: log in.
fn test_says_to_log_in(cli: &Cli) {
    let out = cli.run(["mcp", "test", "remote"]);
    assert_exit(&out, 1);
    let said = stderr(&out);
    assert!(said.contains("`totem mcp login remote`"), "{said}");
}

/// A headless run whose tool call gets the answer only a valid token gets.
fn run_uses_the_tool(cli: &Cli, runtime: &tokio::runtime::Runtime, sim: &totem_tests::sim::Sim) {
    script_tool_call(runtime, sim);
    let out = headless(cli);
    assert_exit(&out, 0);
    // What the model was told the tool returned, in its last request.
    let told = sim
        .chat_requests()
        .last()
        .map(|r| r.body.to_string())
        .unwrap_or_default();
    assert!(told.contains("swordfish"), "the tool's answer: {told}");
}

#[test]
fn login_then_runs_use_the_tool_refresh_a_refused_token_and_say_to_log_in_when_revoked() {
    let cli = Cli::new();
    let (runtime, sim) = cli_common::sim_settings(&cli);
    let server = OAuthServer::start(&[]);
    let url = server.url();
    assert_exit(&cli.run(["mcp", "add", "remote", "--url", &url]), 0);

    // Before the login the server answers 401 with OAuth metadata: the hint is the login.
    test_says_to_log_in(&cli);

    let (login, page) = log_in(&cli, &server, "remote", &[]);
    assert_eq!(login.code, Some(0), "{} {}", login.stdout, login.stderr);
    assert!(
        login.stdout.contains("Logged in to MCP server remote"),
        "{}",
        login.stdout
    );
    assert!(page.contains("logged in to MCP server remote"), "{page}");
    let stats = server.hook("GET", "stats");
    assert_eq!(stats["registered"], 1, "dynamic registration: {stats}");
    assert_eq!(stats["authorized"], 1, "{stats}");
    assert_eq!(list(&cli)["servers"][0]["loggedIn"], true);
    let out = cli.run(["mcp", "list"]);
    assert!(stdout(&out).contains("logged in"), "{}", stdout(&out));

    // A run uses the tool, which works only with a valid token.
    run_uses_the_tool(&cli, &runtime, &sim);

    // Nothing in plain text at rest: neither token is anywhere under the home.
    let tokens = server.hook("GET", "tokens");
    let at_rest = home_text(cli.home());
    for token in tokens["access"]
        .as_array()
        .into_iter()
        .chain(tokens["refresh"].as_array())
        .flatten()
    {
        let token = token.as_str().expect("token");
        assert!(!at_rest.contains(token), "a token in plain text at rest");
    }
    assert!(
        at_rest.contains("mcp/remote/oauth"),
        "sealed in secrets.json"
    );

    // The server stops taking the access token: the next call refreshes it without asking.
    server.hook("POST", "expire");
    run_uses_the_tool(&cli, &runtime, &sim);
    let stats = server.hook("GET", "stats");
    assert_eq!(stats["refreshed"], 1, "{stats}");
    assert_eq!(stats["authorized"], 1, "no new login: {stats}");

    // Every token revoked: the refresh fails, and the notice says to log in again.
    server.hook("POST", "revoke");
    script_tool_call(&runtime, &sim);
    let out = headless(&cli);
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(said.contains("`totem mcp login remote`"), "{said}");
    test_says_to_log_in(&cli);

    // Logging out forgets the tokens.
    let out = cli.run(["mcp", "logout", "remote"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("Logged out"), "{}", stdout(&out));
    assert_eq!(list(&cli)["servers"][0].get("loggedIn"), None);
    let at_rest = home_text(cli.home());
    assert!(
        !at_rest.contains("\"mcp/remote/oauth\""),
        "the tokens are gone"
    );
    assert!(
        at_rest.contains("\"mcp/remote/oauth-client\""),
        "the registration stays for the next login"
    );
}

#[test]
fn an_expired_access_token_is_refreshed_and_the_new_tokens_are_stored() {
    let cli = Cli::new();
    let server = OAuthServer::start(&["--lifetime", "2"]);
    assert_exit(
        &cli.run(["mcp", "add", "remote", "--url", &server.url()]),
        0,
    );
    let (login, _) = log_in(&cli, &server, "remote", &[]);
    assert_eq!(login.code, Some(0), "{} {}", login.stdout, login.stderr);
    // Each test starts the server afresh from the stored tokens; the server takes every refresh
    // token once, so the second refresh works only if the first one's tokens were stored.
    for refreshes in 1..=2 {
        std::thread::sleep(Duration::from_secs(3));
        let out = cli.run(["mcp", "test", "remote"]);
        assert_exit(&out, 0);
        assert!(stdout(&out).contains("secret_word"), "{}", stdout(&out));
        let stats = server.hook("GET", "stats");
        assert_eq!(stats["refreshed"], refreshes, "{stats}");
        assert_eq!(stats["authorized"], 1, "{stats}");
    }
    // The server goes down: the test blames the refused connection, not the OAuth metadata
    // (issue 35 item 5).
    drop(server);
    let out = cli.run(["mcp", "test", "remote"]);
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        said.contains("refused the connection") && !said.contains("metadata"),
        "{said}"
    );
}

#[test]
fn a_server_that_registers_no_clients_takes_a_client_id() {
    let cli = Cli::new();
    let server = OAuthServer::start(&["--no-registration"]);
    assert_exit(
        &cli.run(["mcp", "add", "remote", "--url", &server.url()]),
        0,
    );
    let (login, _) = log_in(&cli, &server, "remote", &[]);
    assert_ne!(login.code, Some(0));
    assert!(login.stderr.contains("--client-id"), "{}", login.stderr);
    let (login, _) = log_in(&cli, &server, "remote", &["--client-id", "totem-by-hand"]);
    assert_eq!(login.code, Some(0), "{} {}", login.stdout, login.stderr);
    let out = cli.run(["mcp", "test", "remote"]);
    assert_exit(&out, 0);
    assert_eq!(server.hook("GET", "stats")["registered"], 0);

    // A command server has nothing to log in to.
    assert_exit(&cli.run(["mcp", "add", "local", "--", "true"]), 0);
    let out = cli.run(["mcp", "login", "local", "--no-browser"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("only remote servers"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_refused_refresh_says_the_login_expired_until_the_next_login() {
    let cli = Cli::new();
    let (runtime, sim) = cli_common::sim_settings(&cli);
    let server = OAuthServer::start(&[]);
    assert_exit(
        &cli.run(["mcp", "add", "remote", "--url", &server.url()]),
        0,
    );
    let (login, _) = log_in(&cli, &server, "remote", &[]);
    assert_eq!(login.code, Some(0), "{} {}", login.stdout, login.stderr);

    // The authorization server takes back every token: the access token gets 401, the refresh
    // that follows gets 400 invalid_grant.
    server.hook("POST", "revoke");
    let out = cli.run(["mcp", "test", "remote"]);
    assert_exit(&out, 1);
    let said = stderr(&out);
    assert!(
        said.contains("login expired") && said.contains("`totem mcp login remote`"),
        "{said}"
    );

    // The stored state says so: the list no longer says logged in, and says what to do.
    let out = cli.run(["mcp", "list"]);
    assert_exit(&out, 0);
    let listed = stdout(&out);
    assert!(!listed.contains("logged in"), "{listed}");
    assert!(
        listed.contains("login expired (the authorization server refused to renew it): run `totem mcp login remote` again"),
        "{listed}"
    );
    let entry = &list(&cli)["servers"][0];
    assert_eq!(entry.get("loggedIn"), None, "{entry}");
    assert!(entry["loginRefused"].is_string(), "{entry}");

    // A run says it too.
    script_tool_call(&runtime, &sim);
    let out = headless(&cli);
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        said.contains("login expired") && said.contains("`totem mcp login remote`"),
        "{said}"
    );

    // Logging in again ends it.
    let (login, _) = log_in(&cli, &server, "remote", &[]);
    assert_eq!(login.code, Some(0), "{} {}", login.stdout, login.stderr);
    let entry = &list(&cli)["servers"][0];
    assert_eq!(entry["loggedIn"], true, "{entry}");
    assert_eq!(entry.get("loginRefused"), None, "{entry}");
    run_uses_the_tool(&cli, &runtime, &sim);
}

#[test]
fn a_second_login_reuses_the_registration_and_registers_again_when_the_server_forgot_it() {
    let cli = Cli::new();
    let server = OAuthServer::start(&[]);
    assert_exit(
        &cli.run(["mcp", "add", "remote", "--url", &server.url()]),
        0,
    );
    let (login, _) = log_in(&cli, &server, "remote", &[]);
    assert_eq!(login.code, Some(0), "{} {}", login.stdout, login.stderr);
    let redirect = list(&cli)["servers"][0]["loginRedirectUri"].clone();
    assert!(redirect.is_string(), "{redirect}");

    // Logged out and in again: the registration of the first login serves (a logout keeps it).
    assert_exit(&cli.run(["mcp", "logout", "remote"]), 0);
    let (login, _) = log_in(&cli, &server, "remote", &[]);
    assert_eq!(login.code, Some(0), "{} {}", login.stdout, login.stderr);
    let stats = server.hook("GET", "stats");
    assert_eq!(
        stats["registered"], 1,
        "one registration for two logins: {stats}"
    );
    assert_eq!(stats["authorized"], 2, "{stats}");
    assert_eq!(list(&cli)["servers"][0]["loginRedirectUri"], redirect);
    assert_exit(&cli.run(["mcp", "test", "remote"]), 0);

    // The authorization server forgets its clients: the next refresh is refused (401
    // invalid_client), the list says the login expired, and the next login registers again.
    server.hook("POST", "forget-clients");
    server.hook("POST", "expire");
    let out = cli.run(["mcp", "test", "remote"]);
    let said = stderr(&out);
    assert!(
        said.contains("login expired") && said.contains("`totem mcp login remote`"),
        "{said}"
    );
    let entry = &list(&cli)["servers"][0];
    assert!(entry["loginRefused"].is_string(), "{entry}");
    let (login, _) = log_in(&cli, &server, "remote", &[]);
    assert_eq!(login.code, Some(0), "{} {}", login.stdout, login.stderr);
    let stats = server.hook("GET", "stats");
    assert_eq!(stats["registered"], 2, "{stats}");
    assert_exit(&cli.run(["mcp", "test", "remote"]), 0);

    // It forgets them again, this time before a login: the stored registration is refused at
    // the authorization page, so Totem registers again rather than send the browser there.
    server.hook("POST", "forget-clients");
    assert_exit(&cli.run(["mcp", "logout", "remote"]), 0);
    let (login, _) = log_in(&cli, &server, "remote", &[]);
    assert_eq!(login.code, Some(0), "{} {}", login.stdout, login.stderr);
    let stats = server.hook("GET", "stats");
    assert_eq!(stats["registered"], 3, "{stats}");
    assert_exit(&cli.run(["mcp", "test", "remote"]), 0);
}
