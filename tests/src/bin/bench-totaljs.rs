//! The Total.js 5 conventions check on the fixture corpus (`totaljs/tests/corpus`): findings and
//! errors per fixture set, precision and recall per rule, and the primer's size in real tokens.
//! Folders given as arguments (real apps, e.g. official Total.js apps checked out elsewhere) are
//! checked too, as `totem check` would, with their detection and counts.
//!
//! The broken cases (`corpus/broken/`, one real mistake each, verified live on total5 0.0.14)
//! give recall and precision per app: statically, and with the boot check (`totem check --boot`
//! through a daemon of its own, the app started on total5 from the test tools cache). The clean
//! apps for precision are the v5 sets and the `/init` scaffold. Without `node` or the built
//! `totem`, the boot half is skipped with a line saying so.
//!
//! Run: `cargo build --workspace --bins && cargo run -p totem-tests --bin bench-totaljs [APP_DIR...]`.

#[path = "../../../totaljs/tests/support/corpus.rs"]
mod corpus;

use std::path::{Path, PathBuf};

use std::process::Command;
use std::time::Instant;

use totem_totaljs::{CheckConfig, Project, Severity, check_project, detect, primer};

fn percent(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{:.0}%", v * 100.0))
}

fn main() -> anyhow::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../totaljs/tests/corpus");
    let report = corpus::score(&dir);

    println!("Fixture sets (v5: patterns of official apps, 0 errors wanted; v4: code to find):\n");
    println!("{:<20} {:>9} {:>7}", "set", "findings", "errors");
    for (set, findings, errors) in &report.per_set {
        println!("{set:<20} {findings:>9} {errors:>7}");
    }

    println!("\nPer rule (expected findings are the fixtures' `// expect:` annotations):\n");
    println!(
        "{:<25} {:>4} {:>4} {:>4} {:>10} {:>7}",
        "rule", "tp", "fp", "fn", "precision", "recall"
    );
    for rule in totem_totaljs::rules() {
        let s = report.by_rule.get(rule.id).copied().unwrap_or_default();
        println!(
            "{:<25} {:>4} {:>4} {:>4} {:>10} {:>7}",
            rule.id,
            s.tp,
            s.fp,
            s.fn_,
            percent(s.precision()),
            percent(s.recall())
        );
    }
    for (set, key, severity) in &report.unexpected {
        println!(
            "unexpected in {set}: {}:{} [{}] {severity}",
            key.0, key.1, key.2
        );
    }
    for (set, key) in &report.missed {
        println!("missed in {set}: {}:{} [{}]", key.0, key.1, key.2);
    }
    println!("errors in v5 sets: {}", report.v5_errors.len());

    apps_recall(&dir)?;

    let bpe = tiktoken_rs::cl100k_base()?;
    println!(
        "\nPrimer: {} bytes, {} tokens (cl100k_base), budget 1,200.",
        primer().len(),
        bpe.encode_ordinary(primer()).len()
    );

    let apps: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if !apps.is_empty() {
        println!("\nApps:\n");
        println!(
            "{:<28} {:<12} {:>6} {:>7} {:>9} {:>6}",
            "app", "detected", "files", "errors", "warnings", "notes"
        );
    }
    for app in apps {
        let detected = match detect(&app) {
            Project::TotalJs5 { .. } => "Total.js 5".to_string(),
            Project::Library { .. } => "library".to_string(),
            Project::Legacy { version } => format!("legacy {}", version.package()),
            Project::Empty => "empty".to_string(),
            Project::Other { .. } => "other".to_string(),
        };
        let r = check_project(&app, &[], &CheckConfig::default());
        let count = |s: Severity| {
            r.files
                .iter()
                .flat_map(|f| &f.findings)
                .filter(|f| f.severity == s)
                .count()
        };
        let name = app
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!(
            "{name:<28} {detected:<12} {:>6} {:>7} {:>9} {:>6}",
            r.files_checked,
            count(Severity::Error),
            count(Severity::Warning),
            count(Severity::Info)
        );
    }
    Ok(())
}

/// One app of the recall/precision table.
struct App {
    name: String,
    /// `crash`, `hang`, `silent` for a broken case; empty for a working app.
    broken: String,
    root: PathBuf,
}

/// What `totem check --boot --json` said of an app: (static errors, boot status, boot message,
/// milliseconds).
fn boot_check(home: &Path, root: &Path) -> anyhow::Result<(u64, String, String, Option<u64>)> {
    let out = Command::new(totem_tests::harness::binary("totem"))
        .args(["check", "--boot", "--json"])
        .current_dir(root)
        .env("TOTEM_HOME", home)
        .env("NO_COLOR", "1")
        .output()?;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        anyhow::anyhow!(
            "totem check --json: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let boot = &json["boot"];
    Ok((
        json["errors"].as_u64().unwrap_or(0),
        boot["status"].as_str().unwrap_or("none").to_string(),
        boot["message"].as_str().unwrap_or("").to_string(),
        boot["millis"].as_u64(),
    ))
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

fn apps_recall(corpus: &Path) -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let mut apps = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(corpus.join("broken"))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let src = corpus.join("broken").join(&name);
        let broken = std::fs::read_to_string(src.join("broken.txt"))?
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        let root = work.path().join(&name);
        copy_dir(&src, &root)?;
        apps.push(App { name, broken, root });
    }
    let scaffold = work.path().join("scaffold");
    totem_totaljs::write_scaffold(&scaffold)?;
    apps.push(App {
        name: "scaffold (/init)".into(),
        broken: String::new(),
        root: scaffold,
    });
    for set in corpus::sets(corpus)
        .into_iter()
        .filter(|s| s.version == "v5")
    {
        let root = work.path().join(format!("v5-{}", set.name));
        copy_dir(&set.root, &root)?;
        apps.push(App {
            name: format!("v5/{}", set.name),
            broken: String::new(),
            root,
        });
    }

    let node = Command::new("node").arg("--version").output().is_ok();
    let totem = totem_tests::harness::binary("totem").is_file();
    let boot = node && totem;
    let home = tempfile::tempdir()?;
    if boot {
        let total5 = totem_tests::external::npm_install("total5", &["total5@0.0.14"]);
        for app in &apps {
            // A copy inside the app: the sandbox follows no link out of the project.
            let modules = app.root.join("node_modules");
            std::fs::create_dir_all(&modules)?;
            copy_dir(&total5.join("node_modules/total5"), &modules.join("total5"))?;
        }
    } else {
        println!(
            "\nBoot check skipped: {}.",
            if node {
                "build totem first (cargo build --workspace --bins)"
            } else {
                "node is not on PATH"
            }
        );
    }

    println!(
        "\nApps with one real mistake each (corpus/broken, verified live on total5 0.0.14) and working apps:\n"
    );
    println!(
        "{:<26} {:<7} {:>13} {:<8} {:>8}  boot message",
        "app", "breaks", "static errors", "boot", "boot ms"
    );
    // (found statically, found with boot) per broken app; flagged per working app.
    let mut rows = Vec::new();
    for app in &apps {
        let r = check_project(&app.root, &[], &CheckConfig::default());
        let errors = r
            .files
            .iter()
            .flat_map(|f| &f.findings)
            .filter(|f| f.severity == Severity::Error)
            .count();
        let (status, message, millis) = if boot {
            let started = Instant::now();
            let (_, status, message, millis) = boot_check(home.path(), &app.root)?;
            let millis = millis.unwrap_or_else(|| started.elapsed().as_millis() as u64);
            (status, message, Some(millis))
        } else {
            ("-".to_string(), String::new(), None)
        };
        let short: String = message.chars().take(90).collect();
        println!(
            "{:<26} {:<7} {:>13} {:<8} {:>8}  {short}",
            app.name,
            if app.broken.is_empty() {
                "no"
            } else {
                &app.broken
            },
            errors,
            status,
            millis.map_or("-".into(), |m| m.to_string()),
        );
        rows.push((app, errors > 0, status == "failed", millis));
    }
    let score = |with_boot: bool| {
        let flagged = |s: &bool, b: &bool| *s || (with_boot && *b);
        let broken: Vec<_> = rows.iter().filter(|r| !r.0.broken.is_empty()).collect();
        let hard: Vec<_> = broken
            .iter()
            .filter(|r| r.0.broken == "crash" || r.0.broken == "hang")
            .collect();
        let tp = broken.iter().filter(|r| flagged(&r.1, &r.2)).count();
        let hard_tp = hard.iter().filter(|r| flagged(&r.1, &r.2)).count();
        let fp = rows
            .iter()
            .filter(|r| r.0.broken.is_empty() && flagged(&r.1, &r.2))
            .count();
        let precision = if tp + fp == 0 {
            0.0
        } else {
            tp as f64 / (tp + fp) as f64
        };
        println!(
            "{:<22} recall {}/{} ({:.0}%), crash/hang {}/{}, false errors on {} of {} working apps, precision {:.0}%",
            if with_boot {
                "static + boot check:"
            } else {
                "static check only:"
            },
            tp,
            broken.len(),
            100.0 * tp as f64 / broken.len().max(1) as f64,
            hard_tp,
            hard.len(),
            fp,
            rows.iter().filter(|r| r.0.broken.is_empty()).count(),
            precision * 100.0
        );
    };
    println!();
    score(false);
    if boot {
        score(true);
        if let Some(ms) = rows
            .iter()
            .find(|r| r.0.name.starts_with("scaffold"))
            .and_then(|r| r.3)
        {
            println!("boot check on the scaffold: {ms} ms (target: under 2,000)");
        }
        let _ = Command::new(totem_tests::harness::binary("totem"))
            .args(["daemon", "stop"])
            .env("TOTEM_HOME", home.path())
            .output();
    }
    Ok(())
}
