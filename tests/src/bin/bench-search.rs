//! Totem's `grep` and `glob` tools against the `rg` binary on a generated tree of 100,000 files.
//!
//! `cargo run --release -p totem-tests --bin bench-search`
//!
//! The tree is generated once into `~/.cache/totem-bench/tree-100k` (1,000 folders of 100 source
//! files, about 1 KiB each, with a `.gitignore` both sides honour). The tools are called as the
//! agent calls them (`Registry::builtin().prepare(..).run(..)`), `rg` as a child process whose
//! output is drained. After one warm-up each, 7 runs of Totem and rg alternate (so load from
//! elsewhere falls on both); prints the medians of wall-clock time and of CPU time (user + system,
//! from `getrusage`) and the ratios Totem/rg (target ≤ 1.1). On a busy machine the CPU ratio is
//! the steadier one. Uses `rg` from PATH, else `~/.cache/totem-bench/rg/bin/rg`, else installs it
//! there once with `cargo install ripgrep --root ~/.cache/totem-bench/rg`.
//!
//! `bench-search grep-regex glob-name` runs only those cases; `--profile N` runs only Totem's tool
//! N times (no rg), for `perf record` or `strace -c`.

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

/// User plus system CPU time used so far by this process (`RUSAGE_SELF`) or by its waited-for
/// children (`RUSAGE_CHILDREN`).
fn cpu(who: libc::c_int) -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut usage);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// One timed run: wall-clock time and CPU time.
#[derive(Clone, Copy)]
struct Sample {
    wall: Duration,
    cpu: Duration,
}

fn run_rg(rg: &Path, root: &Path, args: &[&str]) -> (Sample, usize) {
    let (started, cpu_before) = (Instant::now(), cpu(libc::RUSAGE_CHILDREN));
    let out = Command::new(rg)
        .args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("run rg");
    let sample = Sample {
        wall: started.elapsed(),
        cpu: cpu(libc::RUSAGE_CHILDREN) - cpu_before,
    };
    (sample, out.stdout.iter().filter(|b| **b == b'\n').count())
}

/// Runs the tool as the agent does. Its CPU time is the whole process's, which is idle otherwise.
fn run_tool(
    runtime: &tokio::runtime::Runtime,
    ctx: &ToolContext,
    tool: &str,
    args: &Value,
) -> (Sample, String) {
    let registry = Registry::builtin();
    let (started, cpu_before) = (Instant::now(), cpu(libc::RUSAGE_SELF));
    let out = runtime.block_on(async {
        let call = match registry.prepare(tool, args.clone(), ctx, false) {
            Ok(call) => call,
            Err(e) => panic!("{tool} refused its arguments: {e}"),
        };
        call.run(ctx).await
    });
    assert!(!out.is_error, "{tool} failed: {}", out.text);
    let sample = Sample {
        wall: started.elapsed(),
        cpu: cpu(libc::RUSAGE_SELF) - cpu_before,
    };
    (sample, out.text)
}

fn row(label: &str, totem: &[Sample], rg: &[Sample]) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let wall = |s: &[Sample]| median(s.iter().map(|s| s.wall).collect());
    let cpu = |s: &[Sample]| median(s.iter().map(|s| s.cpu).collect());
    println!(
        "{label:<28} wall: totem {:>7.1} ms  rg {:>7.1} ms  ratio {:>5.2}   cpu: totem {:>7.1} ms  rg {:>7.1} ms  ratio {:>5.2}",
        ms(wall(totem)),
        ms(wall(rg)),
        wall(totem).as_secs_f64() / wall(rg).as_secs_f64(),
        ms(cpu(totem)),
        ms(cpu(rg)),
        cpu(totem).as_secs_f64() / cpu(rg).as_secs_f64(),
    );
}

/// One comparison: the tool's call and the `rg` command that does the same work.
struct Case {
    name: &'static str,
    label: &'static str,
    tool: &'static str,
    args: Value,
    rg: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "grep-regex",
            label: "grep regex, 2,000 matches",
            tool: "grep",
            args: json!({"pattern": "fn needle_handler_\\d+"}),
            rg: &["--no-require-git", "--hidden", "fn needle_handler_\\d+"],
        },
        Case {
            name: "grep-literal",
            label: "grep literal, no match",
            tool: "grep",
            args: json!({"pattern": "no_such_token_anywhere", "literal": true}),
            rg: &[
                "--no-require-git",
                "--hidden",
                "-F",
                "no_such_token_anywhere",
            ],
        },
        Case {
            name: "glob-name",
            label: "glob *.rs (20,000 files)",
            tool: "glob",
            args: json!({"pattern": "*.rs"}),
            rg: &["--no-require-git", "--hidden", "--files", "-g", "*.rs"],
        },
        // The tool lists newest first, so it stats every match; this is rg asked for that order.
        Case {
            name: "glob-name-newest",
            label: "glob *.rs, rg --sortr modified",
            tool: "glob",
            args: json!({"pattern": "*.rs"}),
            rg: &[
                "--no-require-git",
                "--hidden",
                "--files",
                "--sortr",
                "modified",
                "-g",
                "*.rs",
            ],
        },
        Case {
            name: "glob-path",
            label: "glob pkg03/**/file00*.ts",
            tool: "glob",
            args: json!({"pattern": "pkg03/**/file00*.ts"}),
            rg: &[
                "--no-require-git",
                "--hidden",
                "--files",
                "-g",
                "pkg03/**/file00*.ts",
            ],
        },
    ]
}

const USAGE: &str = "usage: bench-search [CASE…] [--profile N]
  CASE         grep-regex, grep-literal, glob-name, glob-name-newest or glob-path (default: all)
  --profile N  run only Totem's tool N times and print each time (for perf/strace)";

fn main() {
    let mut only: Vec<String> = Vec::new();
    let mut profile: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--profile" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => profile = Some(n),
                None => {
                    eprintln!("{USAGE}");
                    std::process::exit(2);
                }
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            _ if cases().iter().any(|c| c.name == arg) => only.push(arg),
            _ => {
                eprintln!("unknown argument {arg:?}\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    let selected: Vec<Case> = cases()
        .into_iter()
        .filter(|c| only.is_empty() || only.iter().any(|o| o == c.name))
        .collect();
    println!(
        "# bench-search ({} cores), median of {RUNS} alternating runs after a warm-up",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let root = tree();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let ctx = ToolContext::new(&root).expect("tool context");

    if let Some(times) = profile {
        let registry = Registry::builtin();
        for case in &selected {
            for _ in 0..times {
                let started = Instant::now();
                let out = runtime.block_on(async {
                    match registry.prepare(case.tool, case.args.clone(), &ctx, false) {
                        Ok(call) => call.run(&ctx).await,
                        Err(e) => panic!("{} refused its arguments: {e}", case.tool),
                    }
                });
                println!(
                    "{:<34} {:>8.1} ms  {}",
                    case.label,
                    started.elapsed().as_secs_f64() * 1e3,
                    out.text.lines().next().unwrap_or("")
                );
            }
        }
        return;
    }

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
    for case in &selected {
        // One warm-up each, then Totem and rg alternate so that load from elsewhere falls on both.
        let (_, text) = run_tool(&runtime, &ctx, case.tool, &case.args);
        let (_, lines) = run_rg(&rg, &root, case.rg);
        let (mut totem, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            totem.push(run_tool(&runtime, &ctx, case.tool, &case.args).0);
            theirs.push(run_rg(&rg, &root, case.rg).0);
        }
        let summary = if case.tool == "grep" {
            text.lines().next()
        } else {
            text.lines().last()
        };
        println!(
            "{}: totem says \"{}\"; rg printed {lines} lines",
            case.tool,
            summary.unwrap_or("")
        );
        row(case.label, &totem, &theirs);
    }
}
