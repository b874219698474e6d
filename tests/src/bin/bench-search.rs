//! Totem's `grep` and `glob` tools against the `rg` binary on a generated tree of 100,000 files.
//!
//! `cargo run --release -p totem-tests --bin bench-search`
//!
//! The tree is generated once into `~/.cache/totem-bench/tree-100k` (1,000 folders of 100 source
//! files, about 1 KiB each, with a `.gitignore` both sides honour). The tools are called as the
//! agent calls them (`Registry::builtin().prepare(..).run(..)`), `rg` as a child process whose
//! output is drained. Prints the median of 7 runs after one warm-up and the ratio Totem/rg
//! (target ≤ 1.1). Uses `rg` from PATH, else `~/.cache/totem-bench/rg/bin/rg`, else installs it
//! there once with `cargo install ripgrep --root ~/.cache/totem-bench/rg`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use totem_tools::{Registry, ToolContext};

const FOLDERS: usize = 1_000;
const FILES_PER_FOLDER: usize = 100;
const RUNS: usize = 7;

fn cache() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache/totem-bench")
}

/// The generated tree, made once; a `complete` marker says it was written to the end.
fn tree() -> PathBuf {
    let root = cache().join("tree-100k");
    let marker = root.join(".complete");
    if marker.exists() {
        return root;
    }
    println!(
        "generating {} files in {} …",
        FOLDERS * FILES_PER_FOLDER,
        root.display()
    );
    let _ = std::fs::remove_dir_all(&root);
    let started = Instant::now();
    std::fs::create_dir_all(&root).expect("create the tree folder");
    std::fs::write(root.join(".gitignore"), "target/\n*.log\n").expect("write .gitignore");
    let extensions = ["rs", "js", "ts", "md", "json"];
    for folder in 0..FOLDERS {
        let dir = root
            .join(format!("pkg{:02}", folder / 100))
            .join(format!("mod{folder:04}"));
        std::fs::create_dir_all(&dir).expect("create a folder");
        for file in 0..FILES_PER_FOLDER {
            let n = folder * FILES_PER_FOLDER + file;
            let ext = extensions[n % extensions.len()];
            let mut text = String::with_capacity(1200);
            for line in 0..30 {
                text.push_str(&format!(
                    "let value_{line} = compute(item_{n}, {line}); // ordinary line of code\n"
                ));
            }
            // One file in 50 holds the needle: 2,000 matching lines in all.
            if n.is_multiple_of(50) {
                text.push_str(&format!("fn needle_handler_{n}() {{ return {n}; }}\n"));
            }
            std::fs::write(dir.join(format!("file{file:03}.{ext}")), text).expect("write a file");
        }
    }
    // Ignored files both sides skip.
    let ignored = root.join("target");
    std::fs::create_dir_all(&ignored).expect("create target");
    for i in 0..1000 {
        std::fs::write(
            ignored.join(format!("out{i}.rs")),
            "fn needle_handler_0() {}\n",
        )
        .expect("write an ignored file");
    }
    std::fs::write(&marker, "").expect("write the marker");
    println!("generated in {:.1} s", started.elapsed().as_secs_f64());
    root
}

fn rg() -> PathBuf {
    if let Ok(out) = Command::new("which").arg("rg").output()
        && out.status.success()
    {
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !path.is_empty() {
            return PathBuf::from(path);
        }
    }
    let cached = cache().join("rg/bin/rg");
    if cached.exists() {
        return cached;
    }
    println!(
        "rg is not on PATH: installing it with `cargo install ripgrep --root ~/.cache/totem-bench/rg` …"
    );
    let status = Command::new("cargo")
        .args(["install", "ripgrep", "--root"])
        .arg(cache().join("rg"))
        .status();
    if !matches!(status, Ok(s) if s.success()) || !cached.exists() {
        eprintln!("could not install rg: install it with `cargo install ripgrep` and run again");
        std::process::exit(2);
    }
    cached
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time_rg(rg: &Path, root: &Path, args: &[&str]) -> (Duration, usize) {
    let run = || {
        let started = Instant::now();
        let out = Command::new(rg)
            .args(args)
            .current_dir(root)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .expect("run rg");
        (
            started.elapsed(),
            out.stdout.iter().filter(|b| **b == b'\n').count(),
        )
    };
    let (_, lines) = run();
    (median((0..RUNS).map(|_| run().0).collect()), lines)
}

fn time_tool(
    runtime: &tokio::runtime::Runtime,
    ctx: &ToolContext,
    tool: &str,
    args: Value,
) -> (Duration, String) {
    let registry = Registry::builtin();
    let run = || {
        runtime.block_on(async {
            let started = Instant::now();
            let call = match registry.prepare(tool, args.clone(), ctx, false) {
                Ok(call) => call,
                Err(e) => panic!("{tool} refused its arguments: {e}"),
            };
            let out = call.run(ctx).await;
            assert!(!out.is_error, "{tool} failed: {}", out.text);
            (started.elapsed(), out.text)
        })
    };
    let (_, text) = run();
    (median((0..RUNS).map(|_| run().0).collect()), text)
}

fn row(label: &str, totem: Duration, rg: Duration) {
    println!(
        "{label:<34} totem {:>8.1} ms   rg {:>8.1} ms   ratio {:>5.2}",
        totem.as_secs_f64() * 1e3,
        rg.as_secs_f64() * 1e3,
        totem.as_secs_f64() / rg.as_secs_f64()
    );
}

fn main() {
    println!(
        "# bench-search ({} cores), median of {RUNS} after a warm-up",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let root = tree();
    let rg = rg();
    let version = Command::new(&rg)
        .arg("--version")
        .output()
        .expect("rg --version");
    println!(
        "rg: {} ({})",
        rg.display(),
        String::from_utf8_lossy(&version.stdout)
            .lines()
            .next()
            .unwrap_or("")
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let ctx = ToolContext::new(&root).expect("tool context");

    let (totem, text) = time_tool(
        &runtime,
        &ctx,
        "grep",
        json!({"pattern": "fn needle_handler_\\d+"}),
    );
    let (theirs, lines) = time_rg(
        &rg,
        &root,
        &["--no-require-git", "--hidden", "fn needle_handler_\\d+"],
    );
    println!(
        "grep: totem says \"{}\"; rg printed {lines} lines",
        text.lines().next().unwrap_or("")
    );
    row("grep regex, 2,000 matches", totem, theirs);

    let (totem, text) = time_tool(
        &runtime,
        &ctx,
        "grep",
        json!({"pattern": "no_such_token_anywhere", "literal": true}),
    );
    let (theirs, lines) = time_rg(
        &rg,
        &root,
        &[
            "--no-require-git",
            "--hidden",
            "-F",
            "no_such_token_anywhere",
        ],
    );
    println!(
        "grep: totem says \"{}\"; rg printed {lines} lines",
        text.lines().next().unwrap_or("")
    );
    row("grep literal, no match", totem, theirs);

    let (totem, text) = time_tool(&runtime, &ctx, "glob", json!({"pattern": "*.rs"}));
    let (theirs, lines) = time_rg(
        &rg,
        &root,
        &["--no-require-git", "--hidden", "--files", "-g", "*.rs"],
    );
    println!(
        "glob: totem says \"{}\"; rg listed {lines} files",
        text.lines().last().unwrap_or("")
    );
    row("glob *.rs (20,000 files)", totem, theirs);

    let (totem, text) = time_tool(
        &runtime,
        &ctx,
        "glob",
        json!({"pattern": "pkg03/**/file00*.ts"}),
    );
    let (theirs, lines) = time_rg(
        &rg,
        &root,
        &[
            "--no-require-git",
            "--hidden",
            "--files",
            "-g",
            "pkg03/**/file00*.ts",
        ],
    );
    println!(
        "glob: totem says \"{}\"; rg listed {lines} files",
        text.lines().last().unwrap_or("")
    );
    row("glob pkg03/**/file00*.ts", totem, theirs);
}
