//! The fixture corpus: v5 patterns from official apps give no error, v4 code is found where the
//! annotations say (see `support/corpus.rs`). `bench-totaljs` prints the same score per rule.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

#[path = "support/corpus.rs"]
mod corpus;

use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

#[test]
fn the_corpus_has_the_patterns_of_real_apps() {
    let names: Vec<String> = corpus::sets(&dir())
        .iter()
        .map(|s| format!("{}/{}", s.version, s.name))
        .collect();
    for set in [
        "v5/app-globals",
        "v5/http-boot",
        "v5/api-routes",
        "v5/plugins",
        "v5/views",
        "v5/shared-state",
        "v5/flowstream",
        "v4/boot",
        "v4/controllers",
        "v4/schemas",
        "v4/globals",
        "v4/actions",
        "v4/express",
        "v4/style",
    ] {
        assert!(names.contains(&set.to_string()), "{set} missing: {names:?}");
    }
}

#[test]
fn v5_patterns_give_no_error() {
    let report = corpus::score(&dir());
    assert!(
        report.v5_errors.is_empty(),
        "errors on working v5 code: {:#?}",
        report.v5_errors
    );
}

#[test]
fn every_expected_finding_is_found_and_nothing_else() {
    let report = corpus::score(&dir());
    assert!(report.missed.is_empty(), "missed: {:#?}", report.missed);
    assert!(
        report.unexpected.is_empty(),
        "unexpected: {:#?}",
        report.unexpected
    );
    // Every rule that is on by default is exercised by some fixture.
    for rule in totem_totaljs::rules().filter(|r| r.default_on) {
        let tp = report.by_rule.get(rule.id).map_or(0, |s| s.tp);
        assert!(tp > 0, "no fixture finds {}", rule.id);
    }
}
