//! The Total.js 5 conventions check on the fixture corpus (`totaljs/tests/corpus`): findings and
//! errors per fixture set, precision and recall per rule, and the primer's size in real tokens.
//! Folders given as arguments (real apps, e.g. official Total.js apps checked out elsewhere) are
//! checked too, as `totem check` would, with their detection and counts.
//!
//! Run: `cargo run -p totem-tests --bin bench-totaljs [APP_DIR...]`.

#[path = "../../../totaljs/tests/support/corpus.rs"]
mod corpus;

use std::path::{Path, PathBuf};

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
