//! The check's settings, file selection and output format.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use totem_totaljs::{
    CheckConfig, ProjectContext, Severity, check, check_edit, check_project, describe_routes,
    format_edit, format_findings, primer, primer_example, reminder, rules,
};

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
    assert!(lines[0].contains("1 error."), "{text}");
    assert!(
        lines[1].starts_with("controllers/default.js:6 error [handler-this] "),
        "{text}"
    );
    assert_eq!(lines.len(), 2);
    assert_eq!(format_findings("x.js", &[]), "");
}

#[test]
fn every_rule_is_documented_and_most_are_on() {
    let all: Vec<_> = rules().collect();
    assert_eq!(all.len(), 32);
    assert!(
        all.iter()
            .all(|r| !r.summary.is_empty() && !r.files.is_empty())
    );
    let off: Vec<_> = all.iter().filter(|r| !r.default_on).map(|r| r.id).collect();
    assert_eq!(off, vec!["process-env"]);
}

/// 1,200 tokens of cl100k_base (the BPE vocabulary Llama 3's tokenizer extends), counted by a
/// real tokenizer.
#[test]
fn primer_covers_the_essentials_within_budget() {
    let p = primer();
    let bpe = tiktoken_rs::cl100k_base().unwrap();
    let tokens = bpe.encode_ordinary(p).len();
    assert!(tokens <= 1200, "primer is {tokens} tokens");
    for needle in [
        "require('total5')",
        "Total.run",
        "node index.js",
        "watcher: false",
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
        "NOSQL(",
        "FILESTORAGE",
        "PATH",
        "CRON",
        "SOCKET",
        "Tabs",
        "-->",
        "@upload",
        "<10MB",
        // What a small model most needs to write a working app.
        "views/layout.html",
        "@{body}",
        "POST /api/",
        "\"schema\"",
        "\"data\"",
        "Content-Type: application/json",
        "needs a database driver",
        "schemas/ loads after actions/",
        "Email",
        "{a|b}",
    ] {
        assert!(p.contains(needle), "primer lacks {needle}");
    }
    // Corrected claims: F.route exists in v5; Ns/name is wrong only with route: 'API ?'.
    assert!(!p.contains("F.route"));
    // A schema in a later actions/ file crashes the boot (#32 item 2).
    assert!(p.contains("goes in modules/ (loads first) or above the action in the same file"));
    assert!(!p.contains("must be in actions/"));
    assert!(!p.contains("DATA.find('tbl_x').where"));
    assert!(!reminder().contains('\n'));
}

/// Every file of the primer's example passes the check with no finding at all.
#[test]
fn primer_example_code_passes_the_check() {
    let cfg = CheckConfig::default();
    let example = primer_example();
    assert!(example.len() >= 4);
    for (path, content) in example.iter().filter(|(p, _)| *p != "client") {
        let f = check(path, content, &cfg);
        assert!(f.is_empty(), "{path}: {f:?}");
    }
}

/// The edit policy: an edit to a file with findings of its own gets no "fix" for them, only a
/// count; what the edit did is reported.
#[test]
fn an_edit_reports_its_own_findings_and_only_counts_older_ones() {
    let cfg = CheckConfig::default();
    let ctx = ProjectContext::default();
    // A clean line added to a file with an older error.
    let after = V4_HANDLER.replace(
        "\tROUTE('GET /', index);\n",
        "\tROUTE('GET /', index);\n\tROUTE('GET /about/', 'about');\n",
    );
    let f = check_edit(
        "controllers/default.js",
        Some(V4_HANDLER),
        &after,
        &cfg,
        &ctx,
    );
    assert!(f.edit.is_empty(), "{f:?}");
    assert_eq!(f.before, 1);
    let text = format_edit("controllers/default.js", &f);
    assert_eq!(
        text,
        "1 finding elsewhere in this file existed before your changes; leave it unless the user asks.\n"
    );
    assert!(!text.contains("Fix"));

    // An edit that brings an error of its own: reported, with the older one still only counted.
    let broken = after.replace("'about'", "about);\n\tROUTE('FETCH /x/', 'x'");
    let f = check_edit(
        "controllers/default.js",
        Some(V4_HANDLER),
        &broken,
        &cfg,
        &ctx,
    );
    assert_eq!(
        f.edit.iter().map(|f| f.rule).collect::<Vec<_>>(),
        vec!["route-method"]
    );
    assert_eq!(f.before, 1);
    let text = format_edit("controllers/default.js", &f);
    assert!(
        text.starts_with(
            "Total.js 5 conventions check of this edit: 1 error. Fix the errors in your change"
        ),
        "{text}"
    );
    assert!(
        text.contains("controllers/default.js:4 error [route-method] 'FETCH'"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "1 finding elsewhere in this file existed before your changes; leave it unless the user asks.\n"
        ),
        "{text}"
    );

    // A new file: everything is the edit's.
    let f = check_edit("controllers/default.js", None, V4_HANDLER, &cfg, &ctx);
    assert_eq!((f.edit.len(), f.before), (1, 0));
}

/// A finding the edit caused away from its lines (a whole-file one) is the edit's too.
#[test]
fn a_finding_caused_elsewhere_by_the_edit_is_reported() {
    let before = "// Boot\nrequire('total5');\nTotal.run({});\n";
    let after = "// Boot\nTotal.run({});\n";
    let f = check_edit(
        "index.js",
        Some(before),
        after,
        &CheckConfig::default(),
        &ProjectContext::default(),
    );
    assert_eq!(f.edit.len(), 1, "{f:?}");
    assert_eq!((f.edit[0].rule, f.edit[0].line), ("boot-total5", 1));
    assert_eq!(f.before, 0);
}

#[test]
fn totem_ignore_comments_switch_rules_off_where_they_are() {
    let cfg = CheckConfig::default();
    let same_line = V4_HANDLER.replace(
        "\tvar self = this;\n",
        "\tvar self = this; // totem-ignore handler-this\n",
    );
    assert!(check("controllers/default.js", &same_line, &cfg).is_empty());
    let line_above = V4_HANDLER.replace(
        "\tvar self = this;\n",
        "\t// totem-ignore handler-this -- a SOCKET handler registered elsewhere\n\tvar self = this;\n",
    );
    assert!(check("controllers/default.js", &line_above, &cfg).is_empty());
    let other_rule = V4_HANDLER.replace(
        "\tvar self = this;\n",
        "\tvar self = this; // totem-ignore v4-global\n",
    );
    assert_eq!(check("controllers/default.js", &other_rule, &cfg).len(), 1);
    let whole_file = format!("// totem-ignore-file handler-this\n{V4_HANDLER}");
    assert!(check("controllers/default.js", &whole_file, &cfg).is_empty());
    assert!(
        check(
            "config",
            "# totem-ignore-file config-format\nname:App\n",
            &cfg
        )
        .is_empty()
    );
}

/// `.totem/settings.json` of the project switches rules off for `totem check` and for edits.
#[test]
fn project_settings_switch_rules_off() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("controllers")).unwrap();
    std::fs::write(dir.path().join("controllers/default.js"), V4_HANDLER).unwrap();
    let report = check_project(dir.path(), &[], &CheckConfig::default());
    assert_eq!(report.files.len(), 1);
    assert_eq!(report.files[0].path, "controllers/default.js");
    assert_eq!(report.files[0].findings[0].rule, "handler-this");

    std::fs::create_dir_all(dir.path().join(".totem")).unwrap();
    std::fs::write(
        dir.path().join(".totem/settings.json"),
        r#"{ "totaljs": { "check": { "disabled": ["handler-this"] } } }"#,
    )
    .unwrap();
    let report = check_project(dir.path(), &[], &CheckConfig::default());
    assert!(report.files.is_empty(), "{report:?}");
    assert!(report.problems.is_empty());

    std::fs::write(
        dir.path().join(".totem/settings.json"),
        r#"{ "totaljs": { "check": { "disabled": ["handler-thus"] } } }"#,
    )
    .unwrap();
    let report = check_project(dir.path(), &[], &CheckConfig::default());
    assert_eq!(report.files.len(), 1);
    assert!(report.problems[0].contains("handler-thus"), "{report:?}");
}

/// The reminder stands in a small model's system prompt in a Total.js 5 project (rules only, no
/// example a model could take for the app's own code, since f07f3e0), so it stays within 120
/// tokens of cl100k_base: a small window pays for it at every step.
#[test]
fn the_reminder_is_within_120_tokens() {
    let bpe = tiktoken_rs::cl100k_base().unwrap();
    let tokens = bpe.encode_ordinary(totem_totaljs::reminder()).len();
    assert!(tokens <= 120, "the reminder is {tokens} tokens");
}

/// An edit that empties a controller is not waved through: the result says the file is empty
/// and names the routes that no longer exist (issue 39 item 3).
#[test]
fn an_emptied_controller_names_the_routes_it_removed() {
    let before = "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('+GET /api/ping/', ping);\n};\n\nfunction index($) {\n\t$.plain('hi');\n}\n\nfunction ping($) {\n\t$.success();\n}\n";
    let cfg = CheckConfig::default();
    let ctx = ProjectContext::default();
    let f = check_edit("controllers/default.js", Some(before), "\n", &cfg, &ctx);
    assert!(f.emptied);
    assert_eq!(f.removed_routes, ["GET /", "GET /api/ping/"]);
    let text = format_edit("controllers/default.js", &f);
    assert!(text.starts_with("This edit emptied the file.\n"), "{text}");
    assert!(
        text.contains("This edit removed routes that no longer exist: GET /, GET /api/ping/."),
        "{text}"
    );
    assert!(!text.contains("breaks"), "{text}");

    // Moving a route within the file removes nothing.
    let moved = before.replace("\tROUTE('GET /', index);\n", "") + "ROUTE('GET /', index);\n";
    let f = check_edit("controllers/default.js", Some(before), &moved, &cfg, &ctx);
    assert!(f.removed_routes.is_empty() && !f.emptied, "{f:?}");
}

/// An edit that renames an action instead of adding one says the old one is gone (issue 34: the
/// 1.5B renamed Products|list to Products|count, and the route that listed products now counted).
#[test]
fn an_edit_that_renames_an_action_names_the_action_it_removed() {
    let before = "var PRODUCTS = [];\n\nNEWACTION('Products|list', {\n\tname: 'List products',\n\taction: function($) {\n\t\t$.callback(PRODUCTS);\n\t}\n});\n";
    let after = "var PRODUCTS = [];\n\nNEWACTION('Products|count', {\n\tname: 'Count products',\n\taction: function($) {\n\t\t$.callback(PRODUCTS.length);\n\t}\n});\n";
    let cfg = CheckConfig::default();
    let ctx = ProjectContext::default();
    let f = check_edit("actions/products.js", Some(before), after, &cfg, &ctx);
    assert_eq!(f.removed_actions, ["Products|list"]);
    let text = format_edit("actions/products.js", &f);
    assert!(
        text.contains("This edit removed an action that no longer exists: Products|list. Put it back unless the task is to remove it."),
        "{text}"
    );
    let added = format!(
        "{before}\n{}",
        &after[after.find("NEWACTION").unwrap_or(0)..]
    );
    let f = check_edit("actions/products.js", Some(before), &added, &cfg, &ctx);
    assert!(f.removed_actions.is_empty(), "{f:?}");
    assert!(!format_edit("actions/products.js", &f).contains("removed"));
}

/// A controller read by a small model gets its routes in one plain line: the 1.5B did not take
/// `ROUTE('GET /api/products/ --> Products|list')` for a route (issue 34).
#[test]
fn the_routes_of_a_file_are_described_in_one_line() {
    let controller = "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET  /about/', about);\n\tROUTE('GET /api/products/ --> Products|list');\n\tROUTE('POST /api/x/', function($) { $.success(); });\n};\n\nfunction index($) {\n\t$.view('index');\n}\n";
    assert_eq!(
        describe_routes(controller).as_deref(),
        Some(
            "Routes this file declares: GET / (function index), GET /about/ (function about), GET /api/products/ (action Products|list), POST /api/x/ (inline function)."
        )
    );
    let action = "NEWACTION('Contact|create', {\n\troute: 'POST /api/contact/',\n\tinput: '*email:Email',\n\taction: function($) {\n\t\t$.success();\n\t}\n});\n";
    assert_eq!(
        describe_routes(action).as_deref(),
        Some("Routes this file declares: POST /api/contact/ (action Contact|create).")
    );
    assert_eq!(describe_routes("var a = 1;\n"), None);
}

/// A write that keeps an action but drops the data it returns says so: the 1.5B wrote its new
/// action over actions/products.js without `var PRODUCTS = [...]` (issue 34, c28).
#[test]
fn an_edit_that_drops_a_declaration_the_file_still_uses_says_so() {
    let before = "var PRODUCTS = [\n\t{ id: 1, name: 'Hammer' }\n];\n\nNEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS);\n\t}\n});\n";
    let after = "NEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS);\n\t}\n});\n";
    let f = check_edit(
        "actions/products.js",
        Some(before),
        after,
        &CheckConfig::default(),
        &ProjectContext::default(),
    );
    let text = format_edit("actions/products.js", &f);
    assert!(
        text.contains("This edit removed the declaration of PRODUCTS (line 1 before), which the file still uses: it fails when it runs. Put the declaration back."),
        "{text}"
    );
}
