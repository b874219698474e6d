//! The check's settings, file selection and output format.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use totem_totaljs::{CheckConfig, Severity, check, format_findings, primer, reminder, rules};

const V4_HANDLER: &str = "exports.install = function() {\n\tROUTE('GET /', index);\n};\n\nfunction index() {\n\tvar self = this;\n\tself.json({});\n}\n";

#[test]
fn disabled_rules_do_not_report() {
    assert!(
        !check(
            "controllers/default.js",
            V4_HANDLER,
            &CheckConfig::default()
        )
        .is_empty()
    );
    let cfg: CheckConfig = serde_json::from_str(r#"{ "disabled": ["handler-this"] }"#).unwrap();
    assert!(check("controllers/default.js", V4_HANDLER, &cfg).is_empty());
}

#[test]
fn severity_overrides_apply() {
    let cfg: CheckConfig =
        serde_json::from_str(r#"{ "severity": { "handler-this": "info" } }"#).unwrap();
    let f = check("controllers/default.js", V4_HANDLER, &cfg);
    assert_eq!(f[0].severity, Severity::Info);
    let f = check(
        "controllers/default.js",
        V4_HANDLER,
        &CheckConfig::default(),
    );
    assert_eq!(f[0].severity, Severity::Error);
}

#[test]
fn settings_reject_unknown_fields_and_unknown_rules() {
    assert!(serde_json::from_str::<CheckConfig>(r#"{ "disable": ["x"] }"#).is_err());
    assert!(serde_json::from_str::<CheckConfig>(r#"{ "severity": { "a": "fatal" } }"#).is_err());
    let cfg: CheckConfig = serde_json::from_str(r#"{ "disabled": ["handler-thus"] }"#).unwrap();
    let err = cfg.validate().unwrap_err().to_string();
    assert!(
        err.contains("handler-thus") && err.contains("handler-this"),
        "{err}"
    );
    let ok: CheckConfig = serde_json::from_str(r#"{ "enabled": ["process-env"] }"#).unwrap();
    assert!(ok.validate().is_ok());
    assert!(CheckConfig::default().validate().is_ok());
}

#[test]
fn files_outside_the_app_are_not_checked() {
    let bad = "var app = require('express')();\napp.get('/', fn);\n";
    assert!(!check("definitions/x.js", bad, &CheckConfig::default()).is_empty());
    for path in [
        "public/js/app.js",
        "node_modules/x/index.js",
        "views/index.html",
        "README.md",
    ] {
        assert!(
            check(path, bad, &CheckConfig::default()).is_empty(),
            "{path}"
        );
    }
}

#[test]
fn findings_format_as_file_line_rule_message() {
    let f = check(
        "controllers\\default.js",
        V4_HANDLER,
        &CheckConfig::default(),
    );
    let text = format_findings("controllers\\default.js", &f);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("1 error(s)"), "{text}");
    assert!(
        lines[1].starts_with("controllers/default.js:6 [handler-this] "),
        "{text}"
    );
    assert_eq!(lines.len(), 2);
    assert_eq!(format_findings("x.js", &[]), "");
}

#[test]
fn every_rule_is_documented_and_most_are_on() {
    let all: Vec<_> = rules().collect();
    assert_eq!(all.len(), 21);
    assert!(
        all.iter()
            .all(|r| !r.summary.is_empty() && !r.files.is_empty())
    );
    let off: Vec<_> = all.iter().filter(|r| !r.default_on).map(|r| r.id).collect();
    assert_eq!(off, vec!["process-env"]);
}

#[test]
fn primer_covers_the_essentials_within_budget() {
    let p = primer();
    assert!(p.len() / 4 <= 1200, "primer is {} bytes", p.len());
    for needle in [
        "require('total5')",
        "Total.run",
        "exports.install",
        "ROUTE(",
        "NEWACTION(",
        "NEWSCHEMA(",
        "schema.action",
        "$.success",
        "$.invalid",
        "$.callback",
        "AUTH(",
        "CONF",
        "FUNC",
        "MAIN",
        "MODS",
        "DATA",
        "NOSQL",
        "FILESTORAGE",
        "PATH",
        "CRON",
        "SOCKET",
        "Tabs",
        "-->",
        "@upload",
        "<10MB",
    ] {
        assert!(p.contains(needle), "primer lacks {needle}");
    }
    assert!(!reminder().contains('\n'));
}

#[test]
fn primer_example_code_passes_the_check() {
    // The example's two files, as the primer shows them.
    let p = primer();
    let controller = p
        .split("controllers/items.js\n")
        .nth(1)
        .and_then(|s| s.split("\nactions/items.js\n").next())
        .unwrap();
    let action = p
        .split("actions/items.js\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap();
    assert!(controller.contains("ROUTE(") && action.contains("NEWACTION("));
    let cfg = CheckConfig::default();
    assert!(check("controllers/items.js", controller, &cfg).is_empty());
    assert!(check("actions/items.js", action, &cfg).is_empty());
}
