//! The VS Code extension's protocol client and view state (`editors/vscode/src/client.ts`,
//! `state.ts`): type-checked with `tsc`, bundled with esbuild (both from npm, installed once into
//! the test tools cache) and run by `node --test` (`editors/vscode/test/client.test.mjs`) against the real totemd, which the
//! client starts itself, and the Ollama simulator: connect, list, prompt, stream, answer a
//! question, files changed, undo, the daemon stopping and the client following on after it; the
//! sessions list, its badge and the chat's blocks built from the same events.

mod cli_common;

use std::path::PathBuf;
use std::process::Command;

use cli_common::Cli;
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

#[test]
fn the_extension_client_against_the_real_daemon() {
    let tools = totem_tests::external::npm_install(
        "vscode-build",
        &["esbuild@0.28.2", "typescript@5.9.3", "@types/node@20"],
    );
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

    let cli = Cli::new();
    let (runtime, sim) = cli_common::sim_settings(&cli);
    std::fs::write(
        cli.project.path().join("math.js"),
        "const a = 1;\nconst b = 2;\n",
    )
    .expect("math.js");
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
            .env_remove("TOTEM_LOG")
            .env_remove("XDG_RUNTIME_DIR"),
        "node --test",
    );
}
