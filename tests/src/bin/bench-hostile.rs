//! `bench-hostile`: runs the adversarial suite (`totem_tests::hostile`) against the real daemon
//! and prints, per attack, whether it held, then the counts tried / held for BENCHMARKS.md.
//!
//! `cargo run -p totem-tests --bin bench-hostile` (add `-- -v` for each attack's details, and
//! `-- --steps` for only the multi-step attacks, `-- --no-sandbox` to run the daemon as on a machine without Landlock).
//! `TOTEM_TESTS_BIN_DIR=FOLDER` attacks the totemd in that folder instead (an older build, for
//! the counts before a fix); an attack on a tool that build does not have is counted apart.
//!
//! Then the multi-step attacks (`hostile::scenarios`: undo/redo through a swapped link, a diff
//! over a link and a FIFO, the user's terminal, fake sockets, `-f` on a secret), counted apart.
//!
//! Then the sandbox's start-up cost: `bash -c true` as is and through the launcher
//! (`totemd __sandbox … -- bash -c true`: Landlock rules for the hostile project, the seccomp
//! filter, one more exec), 100 runs each, p50/p99.

use std::time::{Duration, Instant};

use totem_tests::hostile::{Suite, attacks, scenarios};

/// p50 and p99 of `runs` runs of `program args`.
fn timed(
    program: &std::ffi::OsStr,
    args: &[std::ffi::OsString],
    runs: usize,
) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let status = std::process::Command::new(program)
                .args(args)
                .status()
                .expect("run");
            assert!(status.success(), "{program:?} {args:?}");
            started.elapsed()
        })
        .collect();
    times.sort();
    let at = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    (at(0.5), at(0.99))
}

fn sandbox_start_up(project: &std::path::Path) {
    let tmp = tempfile::tempdir().expect("tmp");
    let shell: Vec<std::ffi::OsString> = vec!["-c".into(), "true".into()];
    let mut launcher: Vec<std::ffi::OsString> = vec![
        "__sandbox".into(),
        "--project".into(),
        project.into(),
        "--tmp".into(),
        tmp.path().into(),
        "--secrets".into(),
        "{}".into(),
        "--".into(),
        "bash".into(),
    ];
    launcher.extend(shell.iter().cloned());
    let totemd = totem_tests::harness::binary("totemd");
    let (plain50, plain99) = timed("bash".as_ref(), &shell, 100);
    let (boxed50, boxed99) = timed(totemd.as_os_str(), &launcher, 100);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "sandbox start-up: bash -c true p50 {:.2} ms p99 {:.2} ms; through the launcher p50 {:.2} ms p99 {:.2} ms (+{:.2} ms at p50)",
        ms(plain50),
        ms(plain99),
        ms(boxed50),
        ms(boxed99),
        ms(boxed50) - ms(plain50)
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let verbose = std::env::args().any(|a| a == "-v");
    let no_sandbox = std::env::args().any(|a| a == "--no-sandbox");
    let suite = if no_sandbox {
        Suite::start_with(&[("TOTEM_SANDBOX", "off")]).await
    } else {
        Suite::start().await
    };
    let (mut tried, mut held, mut absent) = (0, 0, 0);
    // `--steps` runs only the multi-step attacks.
    let steps_only = std::env::args().any(|a| a == "--steps");
    for attack in attacks().into_iter().filter(|_| !steps_only) {
        let outcome = suite.attack(&attack).await;
        let mark = if !outcome.applicable {
            absent += 1;
            "no tool"
        } else {
            tried += 1;
            if outcome.held {
                held += 1;
            }
            if outcome.held { "held" } else { "GOT THROUGH" }
        };
        println!("{mark:>11}  {}", outcome.name);
        if verbose || !outcome.held {
            println!("             {}", outcome.detail);
        }
    }
    // The multi-step attacks (issue 30, items 8, 9, 11), counted apart.
    let (mut steps_tried, mut steps_held) = (0, 0);
    for (n, (name, scenario)) in scenarios().into_iter().enumerate() {
        let outcome = suite.scenario(n, name, scenario).await;
        steps_tried += 1;
        if outcome.held {
            steps_held += 1;
        }
        let mark = if outcome.held { "held" } else { "GOT THROUGH" };
        println!("{mark:>11}  {}", outcome.name);
        if verbose || !outcome.held {
            println!("             {}", outcome.detail);
        }
    }
    let mode = if no_sandbox { "without" } else { "with" };
    println!("\nhostile tree, {mode} the sandbox: {tried} attacks tried, {held} held");
    println!("multi-step attacks: {steps_tried} tried, {steps_held} held");
    if absent > 0 {
        println!("{absent} attacks not tried: the daemon has no such tool");
    }
    match totem_tests::harness::other_bin_dir() {
        Some(folder) => println!(
            "sandbox start-up: not measured ({} is another build)",
            folder.display()
        ),
        None => sandbox_start_up(&suite.tree.project),
    }
}
