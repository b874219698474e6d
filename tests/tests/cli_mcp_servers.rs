//! `totem mcp add|list|remove|test`: MCP servers managed without editing JSON, with their secret
//! header and environment values stored encrypted. The server is a real one written with the
//! official MCP Python SDK (`tests/mcp/token_server.py`) that refuses to work without its secret,
//! so a passing `totem mcp test` proves the secret reached it.

mod cli_common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use cli_common::{Cli, assert_exit, stderr, stdout};
use serde_json::Value;

fn python() -> PathBuf {
    totem_tests::external::python_venv("mcp", &["mcp==2.3.0"]).join("python")
}

fn script() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp/token_server.py")
        .display()
        .to_string()
}

/// What a person would look for in Totem's files when checking that a secret is not there.
fn files_at_rest(cli: &Cli) -> String {
    ["settings.json", "secrets.json"]
        .iter()
        .map(|f| std::fs::read_to_string(cli.home().join(f)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

fn list(cli: &Cli) -> Value {
    let out = cli.run(["mcp", "list", "--json"]);
    assert_exit(&out, 0);
    serde_json::from_str(&stdout(&out)).expect("mcp list JSON")
}

#[test]
fn a_stdio_server_with_a_secret_variable_is_added_tested_listed_and_removed() {
    let cli = Cli::new();
    let python = python();
    let python = python.to_str().expect("utf-8");
    let script = script();
    let add = |value: &str, replace: bool| {
        let mut args = vec![
            "mcp",
            "add",
            "tok",
            "--env",
            "TOKEN_FOR_TEST",
            "--value-stdin",
        ];
        if replace {
            args.push("--replace");
        }
        // The server is told the value reversed, so that its command line does not hold it.
        args.extend(["--", python, &script, "--stdio", "eulav-terc3s"]);
        cli.run_with_input(&args, &format!("{value}\n"))
    };
    let out = add("s3cret-value", false);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("1 secret stored encrypted"),
        "{}",
        stdout(&out)
    );
    let at_rest = files_at_rest(&cli);
    assert!(
        at_rest.contains("TOKEN_FOR_TEST"),
        "settings.json names the secret"
    );
    assert!(
        !at_rest.contains("s3cret-value"),
        "never in plain text: {at_rest}"
    );

    // The daemon gives the stored value to the server, which answers only with it.
    let out = cli.run(["mcp", "test", "tok"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("whoami"), "{}", stdout(&out));
    let out = cli.run(["mcp", "list"]);
    assert!(
        stdout(&out).contains("TOKEN_FOR_TEST (secret)"),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("s3cret-value"));

    // A second add of the name is refused unless it replaces; a wrong value makes the server
    // exit, and the test says so with the server's own words.
    let out = add("other", false);
    assert_exit(&out, 1);
    assert!(stderr(&out).contains("exists already"), "{}", stderr(&out));
    assert_exit(&add("wrong-value", true), 0);
    let out = cli.run(["mcp", "test", "tok"]);
    assert_exit(&out, 1);
    assert!(
        stderr(&out).contains("wrong token in TOKEN_FOR_TEST"),
        "the server's last output: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("exited with status 3"),
        "how it ended: {}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("rmcp::"), "{}", stderr(&out));

    let out = cli.run(["mcp", "remove", "tok"]);
    assert_exit(&out, 0);
    assert_eq!(list(&cli)["servers"], Value::Array(Vec::new()));
    assert!(
        !files_at_rest(&cli).contains("mcp/tok/"),
        "the sealed value goes with the server"
    );
    let out = cli.run(["mcp", "remove", "tok"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no MCP server named `tok`"),
        "{}",
        stderr(&out)
    );
}

/// The HTTP server on a free port, stopped when dropped.
struct HttpServer {
    child: Child,
    port: u16,
}

impl HttpServer {
    fn start(token: &str) -> HttpServer {
        let port = cli_common::free_port();
        let child = Command::new(python())
            .args([&script(), "--http", &port.to_string(), token])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the token server");
        cli_common::wait_until_listening(port);
        HttpServer { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_remote_server_gets_its_secret_header_and_without_it_the_refusal_is_plain() {
    let cli = Cli::new();
    let server = HttpServer::start("bearer-secret-123");
    let url = server.url();
    let out = cli.run_with_input(
        &[
            "mcp",
            "add",
            "web",
            "--url",
            &url,
            "--header",
            "Authorization",
            "--value-stdin",
        ],
        "Bearer bearer-secret-123\n",
    );
    assert_exit(&out, 0);
    assert!(!files_at_rest(&cli).contains("bearer-secret-123"));
    let out = cli.run(["mcp", "test", "web"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("whoami"), "{}", stdout(&out));
    let listed = list(&cli);
    assert_eq!(listed["servers"][0]["secrets"][0], "header Authorization");

    // Without the header the server answers 401; the test says it did not start, in words.
    let out = cli.run(["mcp", "add", "web", "--replace", "--url", &url]);
    assert_exit(&out, 0);
    let out = cli.run(["mcp", "test", "web"]);
    assert_exit(&out, 1);
    let said = stderr(&out);
    assert!(said.contains("did not start"), "{said}");
    assert!(said.contains("401"), "the server's answer: {said}");
    assert!(said.contains("--value-stdin"), "what to do next: {said}");
    assert!(
        !said.contains("rmcp::") && !said.contains("reqwest"),
        "{said}"
    );
    assert!(!said.contains("bearer-secret-123"));

    // Bad usage is refused before the daemon is asked.
    let out = cli.run(["mcp", "add", "x"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("after `--`"), "{}", stderr(&out));
    let out = cli.run([
        "mcp",
        "add",
        "x",
        "--header",
        "Authorization",
        "--url",
        &url,
    ]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("--value-stdin"), "{}", stderr(&out));
}
