//! The VS Code extension's protocol client and view state (`editors/vscode/src/client.ts`,
//! `state.ts`): type-checked with `tsc`, bundled with esbuild (both from npm, installed once into
//! the test tools cache) and run by `node --test` (`editors/vscode/test/client.test.mjs`) against the real totemd, which the
//! client starts itself, and the Ollama simulator: connect, list, prompt, stream, answer a
//! question, files changed, undo, the daemon stopping and the client following on after it; the
//! sessions list, its badge and the chat's blocks built from the same events. Then the `.vsix` in a
//! real VS Code (code-server in chromium, `editors/vscode/test/e2e.mjs`), which also takes the
//! README's screenshots of both themes (set `TOTEM_E2E_SHOTS` to keep them).

mod cli_common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use totem_tests::sim::{Reply, Script, SimEvent};

fn vscode_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../editors/vscode")
}

fn run(command: &mut Command, what: &str) {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The extension's build tools and the chat page's libraries (its package.json's
/// devDependencies), installed once.
fn build_tools() -> PathBuf {
    totem_tests::external::npm_install(
        "vscode-ext-2",
        &[
            "esbuild@0.28.2",
            "typescript@5.9.3",
            "@types/node@20.19.25",
            "@types/vscode@1.96.0",
            "@vscode/vsce@3.9.2",
            "markdown-it@14.1.0",
            "@types/markdown-it@14.1.2",
            "highlight.js@11.11.1",
            "@vscode/codicons@0.0.45",
        ],
    )
}

/// The extension's sources copied into `dir` with the build tools as its `node_modules`, as a
/// checkout after `npm install` looks.
fn checkout(dir: &Path, tools: &Path) {
    for name in [
        "package.json",
        "tsconfig.json",
        "build.mjs",
        "README.md",
        "LICENSE",
        ".vscodeignore",
    ] {
        std::fs::copy(vscode_dir().join(name), dir.join(name)).expect(name);
    }
    for folder in ["src", "media", "webview"] {
        std::fs::create_dir_all(dir.join(folder)).expect(folder);
        for entry in std::fs::read_dir(vscode_dir().join(folder)).expect(folder) {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), dir.join(folder).join(entry.file_name())).expect("copy");
        }
    }
    std::os::unix::fs::symlink(tools.join("node_modules"), dir.join("node_modules"))
        .expect("node_modules");
}

/// code-server in its own process group, ended with all of it when the test ends: killing only
/// code-server left its extension host running, which started totemd again in the test's home
/// once the test had stopped it (one daemon left behind per run).
struct CodeServer(std::process::Child);

impl Drop for CodeServer {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn the_extension_packages_into_a_vsix_and_works_in_code_server() {
    let tools = build_tools();
    let dir = tempfile::tempdir().expect("checkout");
    checkout(dir.path(), &tools);
    // What a user runs: `npm run package` type-checks (tsc), bundles (esbuild) and packages (vsce).
    run(
        Command::new("npm")
            .args(["run", "package", "--silent"])
            .current_dir(dir.path()),
        "npm run package",
    );
    let listing = Command::new("python3")
        .args(["-m", "zipfile", "-l"])
        .arg(dir.path().join("totem.vsix"))
        .output()
        .expect("python3 -m zipfile");
    let listing = String::from_utf8_lossy(&listing.stdout);
    for want in [
        "extension/package.json",
        "extension/out/extension.js",
        "extension/out/chat.js",
        "extension/out/chat.css",
        "extension/out/codicon.css",
        "extension/out/codicon.ttf",
        "extension/media/totem.svg",
        "extension/readme.md",
        "extension.vsixmanifest",
    ] {
        assert!(listing.contains(want), "{want} not in the vsix:\n{listing}");
    }
    assert!(
        !listing.contains("extension/src/") && !listing.contains("node_modules"),
        "sources or node_modules packed:\n{listing}"
    );
    // The bundle needs nothing at run time but VS Code's API and Node's own modules.
    let bundle = std::fs::read_to_string(dir.path().join("out/extension.js")).expect("bundle");
    let mut required: Vec<&str> = bundle
        .split("require(\"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(name, _)| name))
        .collect();
    required.sort();
    required.dedup();
    for name in &required {
        assert!(
            *name == "vscode"
                || name.starts_with("node:")
                || ["net", "fs", "path", "os", "child_process"].contains(name),
            "the bundle requires {name} at run time: {required:?}"
        );
    }

    // The .vsix in a real VS Code: code-server, its page driven by chromium.
    let chromium = totem_tests::external::chromium();
    let server = totem_tests::external::code_server();
    let code_server = server.join("node_modules/.bin/code-server");
    let (cli, runtime, sim) = cli_common::editor_project();
    {
        let _guard = runtime.enter();
        sim.push(Reply::stream([
            SimEvent::thinking("Weighing b.", None),
            SimEvent::tool_call(
                "c1",
                "edit",
                json!({"path": "math.js", "oldString": "const b = 2;", "newString": "const b = 3;"}),
            ),
        ]));
        // Far enough apart that a loaded machine still sees the first words alone (700 ms was
        // not, once, in CI: code-server's page is polled, not pushed).
        sim.push(Reply::Stream(Script {
            delay_ms: 2000,
            ..Script::new(vec![
                SimEvent::text("First words. "),
                SimEvent::text("Middle words. "),
                SimEvent::text("Last words."),
            ])
        }));
        sim.push(Reply::stream([SimEvent::text(RICH_ANSWER)]));
        sim.push(Reply::stream([SimEvent::tool_call(
            "c2",
            "edit",
            json!({"path": "math.js", "oldString": "const b = 3;", "newString": "const b = 4;"}),
        )]));
        sim.push(Reply::stream([SimEvent::text("Done again.")]));
        sim.push(Reply::stream([SimEvent::text("Back again.")]));
        // Denied in the chat with a note; the model answers the denial.
        sim.push(Reply::stream([SimEvent::tool_call(
            "c3",
            "edit",
            json!({"path": "math.js", "oldString": "const b = 4;", "newString": "const b = 5;"}),
        )]));
        sim.push(Reply::stream([SimEvent::text("Understood, b stays four.")]));
        // The model cannot be reached; Retry beside the error sends the prompt again.
        sim.push(Reply::Error {
            status: 404,
            message: "model \"llama3.2:latest\" not found, try pulling it first".into(),
            code: None,
            retry_after: None,
        });
        sim.push(Reply::stream([SimEvent::text("Retried and answered.")]));
    }
    let vscode = tempfile::tempdir().expect("code-server's folders");
    let user = vscode.path().join("user");
    let extensions = vscode.path().join("extensions");
    std::fs::create_dir_all(user.join("User")).expect("user folder");
    // `totem.command` as the e2e sets it later: a script that says it was used, then runs totem.
    let wrapper = vscode.path().join("totem-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ntouch '{}'\nexec '{}' \"$@\"\n",
            vscode.path().join("wrapper-used").display(),
            cli_common::binary("totem").display()
        ),
    )
    .expect("totem-wrapper");
    std::fs::set_permissions(
        &wrapper,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .expect("chmod totem-wrapper");
    std::fs::write(
        user.join("User/settings.json"),
        json!({
            "totem.command": cli_common::binary("totem"),
            "totem.defaultMode": "build",
            "security.workspace.trust.enabled": false,
            "workbench.startupEditor": "none",
            "workbench.tips.enabled": false,
            "telemetry.telemetryLevel": "off",
            "extensions.autoCheckUpdates": false,
        })
        .to_string(),
    )
    .expect("settings.json");
    let code = |args: &[&str]| {
        let mut command = Command::new(&code_server);
        command
            .args(args)
            .arg("--user-data-dir")
            .arg(&user)
            .arg("--extensions-dir")
            .arg(&extensions)
            .arg("--config")
            .arg(vscode.path().join("config.yaml"))
            .env("HOME", vscode.path())
            .env("TOTEM_HOME", cli.home())
            .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("TOTEM_LOG");
        command
    };
    let vsix = dir.path().join("totem.vsix");
    run(
        &mut code(&["--install-extension", &vsix.display().to_string()]),
        "code-server --install-extension",
    );
    let port = free_port();
    let _server = CodeServer(
        code(&[
            "--auth",
            "none",
            "--bind-addr",
            &format!("127.0.0.1:{port}"),
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
        ])
        .arg(cli.project.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start code-server"),
    );
    let log = vscode.path().join("e2e.log");
    let mut e2e = Command::new("node")
        .args(["--test", "--test-force-exit", "--test-timeout=240000"])
        .arg(vscode_dir().join("test/e2e.mjs"))
        .env(
            "TOTEM_E2E_URL",
            format!(
                "http://127.0.0.1:{port}/?folder={}",
                cli.project.path().display()
            ),
        )
        .env("TOTEM_E2E_TOOLS", &server)
        .env("TOTEM_E2E_CHROMIUM", &chromium)
        .env(
            "TOTEM_E2E_SHOTS",
            std::env::var_os("TOTEM_E2E_SHOTS").unwrap_or_else(|| vscode.path().into()),
        )
        .env("TOTEM_TEST_PROJECT", cli.project.path())
        .env("TOTEM_HOME", cli.home())
        .env("TOTEM_BIN", cli_common::binary("totem"))
        .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
        .env("TOTEM_E2E_SIGNALS", vscode.path())
        .env("TOTEM_E2E_SETTINGS", user.join("User/settings.json"))
        .env("TOTEM_E2E_WRAPPER", &wrapper)
        .stdout(std::fs::File::create(&log).expect("e2e.log"))
        .stderr(std::process::Stdio::from(
            std::fs::File::options()
                .append(true)
                .open(&log)
                .expect("e2e.log"),
        ))
        .spawn()
        .expect("node --test e2e.mjs");
    // The REPL on the session the extension started: it sees VS Code's prompt and its question,
    // answers it, sees the run end and leaves before the e2e stops the daemon.
    let repl = repl_on_the_extension_session(&cli, vscode.path());
    std::fs::write(vscode.path().join("repl-done"), b"").expect("repl-done");
    let status = e2e.wait().expect("node --test e2e.mjs");
    assert!(
        status.success(),
        "node --test e2e.mjs failed:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    if let Err(e) = repl {
        panic!("the REPL on the extension's session: {e}");
    }
}

/// The answer to the selection: Markdown as models write it, to see it rendered (a table, a quote,
/// links, highlighted code with its Copy button, a word too long for the view).
const RICH_ANSWER: &str = "a is one. It is **declared** in [math.js](math.js) with `const`:\n\n\
| name | value |\n|---|---|\n| a | 1 |\n| b | 2 |\n\n\
> Constants cannot be assigned again.\n\n\
```js\nconst a = 1; // the first\nfunction twice(x) { return 2 * x; }\n```\n\n\
See <https://developer.mozilla.org/docs/Web/JavaScript/Reference/Statements/const>. \
averyveryveryveryveryveryveryveryveryveryveryveryveryveryveryveryveryveryveryveryveryveryverylongidentifier_in_one_word.";

/// `totem attach` in a pty on the project's session once the extension has started one; answers
/// the question of VS Code's second prompt with `o` once the e2e saw it in the chat (`asked` in
/// `signals`).
fn repl_on_the_extension_session(cli: &cli_common::Cli, signals: &Path) -> Result<(), String> {
    use expectrl::{Eof, Expect, Session};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    let session = loop {
        if cli.socket().exists() {
            let out = cli.run(["sessions", "--json"]);
            let page: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            if let Some(id) = page["items"][0]["id"].as_str() {
                break id.to_owned();
            }
        }
        if std::time::Instant::now() > deadline {
            return Err("the extension started no session".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    let mut command = cli.command(["attach", "--session", &session]);
    command.env("TERM", "xterm");
    let mut repl = Session::spawn(command).map_err(|e| format!("spawn totem attach: {e}"))?;
    repl.set_expect_timeout(Some(std::time::Duration::from_secs(120)));
    let mut expect = |text: &str, what: &str| {
        repl.expect(text)
            .map(|_| ())
            .map_err(|e| format!("{what} ({text:?}): {e}"))
    };
    expect("› make b four", "VS Code's prompt in the REPL")?;
    expect("? edit wants to write math.js", "its question")?;
    expect("+const b = 4;", "with its diff")?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !signals.join("asked").exists() {
        if std::time::Instant::now() > deadline {
            return Err("the chat never showed the second question".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Typed again if it went unnoticed: rustyline can swallow a key typed while it redraws its
    // prompt (see cli_common::ctrl_d_until), and the question then stays open.
    repl.set_expect_timeout(Some(std::time::Duration::from_secs(15)));
    let mut granted = false;
    for _ in 0..4 {
        repl.send("o\r").map_err(|e| format!("answer once: {e}"))?;
        if repl.expect("· permission granted").is_ok() {
            granted = true;
            break;
        }
    }
    if !granted {
        return Err("`o` typed 4 times, the REPL never said the permission was granted".into());
    }
    repl.set_expect_timeout(Some(std::time::Duration::from_secs(120)));
    repl.expect("Done again.")
        .map_err(|e| format!("the run's end in the REPL: {e}"))?;
    cli_common::ctrl_d_until(&mut repl, Eof);
    Ok(())
}

#[test]
fn the_extension_client_against_the_real_daemon() {
    let tools = build_tools();
    let bin = tools.join("node_modules/.bin");
    run(
        Command::new(bin.join("tsc"))
            .arg("-p")
            .arg(vscode_dir())
            .arg("--typeRoots")
            .arg(tools.join("node_modules/@types")),
        "tsc",
    );
    let out = tempfile::tempdir().expect("bundle folder");
    run(
        Command::new(bin.join("esbuild"))
            .arg(vscode_dir().join("src/client.ts"))
            .arg(vscode_dir().join("src/state.ts"))
            .arg(vscode_dir().join("src/patch.ts"))
            .args([
                "--bundle",
                "--platform=node",
                "--format=esm",
                "--log-level=warning",
                "--out-extension:.js=.mjs",
            ])
            .arg(format!("--outdir={}", out.path().display())),
        "esbuild",
    );

    let (cli, runtime, sim) = cli_common::editor_project();
    {
        let _guard = runtime.enter();
        // Apart, so that the client sees the answer grow.
        sim.push(Reply::Stream(Script {
            delay_ms: 300,
            ..Script::new(vec![
                SimEvent::text("Hello "),
                SimEvent::text("from "),
                SimEvent::text("the sim."),
            ])
        }));
        sim.push(Reply::stream([SimEvent::tool_call(
            "c1",
            "edit",
            json!({"path": "math.js", "oldString": "const b = 2;", "newString": "const b = 3;"}),
        )]));
        sim.push(Reply::stream([SimEvent::text("Edited.")]));
        sim.push(Reply::stream([SimEvent::text("Back again.")]));
    }
    run(
        Command::new("node")
            // A failed assertion leaves the client's socket open: end the process anyway.
            .args(["--test", "--test-force-exit", "--test-timeout=60000"])
            .arg(vscode_dir().join("test/client.test.mjs"))
            .env("TOTEM_HOME", cli.home())
            .env("TOTEM_BIN", cli_common::binary("totem"))
            .env("TOTEM_TEST_PROJECT", cli.project.path())
            .env("TOTEM_VSCODE_OUT", out.path())
            .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
            .env_remove("TOTEM_LOG")
            .env_remove("XDG_RUNTIME_DIR"),
        "node --test",
    );
}
