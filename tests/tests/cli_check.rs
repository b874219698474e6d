//! `totem check`: the Total.js 5 conventions check as a command, through the real daemon
//! (`project.check`): human `file:line: severity [rule] message` lines, `--json`, exit 1 on
//! errors, 2 on a bad path, and rules switched off inline or in the project's settings.

mod cli_common;

use cli_common::{Cli, assert_exit, stderr, stdout};

fn write(cli: &Cli, rel: &str, content: &str) {
    let path = cli.project.path().join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, content).expect("write");
}

/// A v5 project with one v4 handler (an error: `this` is not the controller) and one lowercase
/// route verb (a note: it works).
fn project(cli: &Cli) {
    write(
        cli,
        "package.json",
        r#"{"name": "app", "dependencies": {"total5": "0.0.14"}}"#,
    );
    write(cli, "index.js", "require('total5');\nTotal.run({});\n");
    write(
        cli,
        "controllers/default.js",
        "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('get /about/', 'about');\n};\n\nfunction index() {\n\tthis.plain('hi');\n}\n",
    );
    write(
        cli,
        "controllers/api.js",
        "exports.install = function() {\n\tROUTE('+API /api/ -items_list --> Items/list');\n};\n",
    );
    write(
        cli,
        "definitions/auth.js",
        "AUTH(function($) {\n\t$.invalid();\n});\n",
    );
    write(cli, "public/js/app.js", "var self = this; app.get('/');\n");
}

#[test]
fn check_reports_file_line_rule_and_exits_1_on_errors() {
    let cli = Cli::new();
    project(&cli);
    let out = cli.run(["check"]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "controllers/default.js:3: note [route-method-case] route method 'get' works, but Total.js code writes it in uppercase: 'GET'",
        "{text}"
    );
    assert!(
        lines[1].starts_with(
            "controllers/default.js:7: error [handler-this] this.plain in a route handler"
        ),
        "{text}"
    );
    assert_eq!(
        lines[2], "1 error, 0 warnings, 1 note in 5 files.",
        "{text}"
    );
    assert!(lines[3].contains("totem-ignore"), "{text}");
    assert!(
        !text.contains("public/"),
        "client-side code is not checked: {text}"
    );

    // --json: the same findings, machine-readable.
    let out = cli.run(["check", "--json"]);
    assert_exit(&out, 1);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(json["errors"], 1, "{json}");
    assert_eq!(json["notes"], 1, "{json}");
    assert_eq!(json["filesChecked"], 5, "{json}");
    assert_eq!(json["findings"][1]["rule"], "handler-this", "{json}");
    assert_eq!(json["findings"][1]["path"], "controllers/default.js");
    assert_eq!(json["findings"][1]["line"], 7);

    // Some files only: a clean one exits 0.
    let out = cli.run(["check", "controllers/api.js", "index.js"]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "0 errors, 0 warnings, 0 notes in 2 files.\n");

    // A path that does not exist is a usage error.
    let out = cli.run(["check", "controllers/nope.js"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("controllers/nope.js"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn check_honours_inline_ignores_and_project_settings() {
    let cli = Cli::new();
    project(&cli);
    write(
        &cli,
        "controllers/default.js",
        "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('get /about/', 'about'); // totem-ignore route-method-case\n};\n\nfunction index() {\n\tthis.plain('hi');\n}\n",
    );
    write(
        &cli,
        ".totem/settings.json",
        r#"{"totaljs": {"check": {"disabled": ["handler-this"]}}}"#,
    );
    let out = cli.run(["check"]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "0 errors, 0 warnings, 0 notes in 5 files.\n");

    // A misspelt rule in the project's settings is said, not silently ignored.
    write(
        &cli,
        ".totem/settings.json",
        r#"{"totaljs": {"check": {"disabled": ["handler-thiss"]}}}"#,
    );
    let out = cli.run(["check", "--json"]);
    assert_exit(&out, 1);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert!(
        json["notices"][0]
            .as_str()
            .is_some_and(|n| n.contains("handler-thiss")),
        "{json}"
    );
}

/// A Total.js 3/4 folder gets one answer (#32 item 5): the check does not apply, finds nothing
/// and exits 0, with a notice; its v5 migration findings come only with `--migrate`.
#[test]
fn check_of_a_folder_that_is_not_total5_says_so() {
    let cli = Cli::new();
    write(&cli, "debug.js", "require('total.js/debug')({});\n");
    write(&cli, "config", "name : Old\n");
    write(
        &cli,
        "package.json",
        "{\"name\": \"old\", \"dependencies\": {\"total.js\": \"^3.4.0\"}}\n",
    );
    write(
        &cli,
        "controllers/default.js",
        "exports.install = function() {\n\tROUTE('GET /', index);\n};\n\nfunction index() {\n\tvar self = this;\n\tself.plain('old');\n}\n",
    );
    let out = cli.run(["check"]);
    assert_exit(&out, 0);
    assert!(stderr(&out).contains("not Total.js 5"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--migrate"), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("0 errors"), "{}", stdout(&out));

    let out = cli.run(["check", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(json["kind"], "totaljs3", "{json}");
    assert_eq!(json["errors"], 0, "{json}");

    let out = cli.run(["check", "--migrate"]);
    assert_exit(&out, 1);
    assert!(stdout(&out).contains("[handler-this]"), "{}", stdout(&out));
}

/// #32 items 4 and 5: a package for Total.js 5 apps (total5 a peer dependency, an index.js that
/// exports, nothing boots it, like the npm packages querybuilderpg and dbms) gets no boot-file or
/// dependency errors, and its kind shows in `totem check --json`, `totem doctor` and the
/// `project.open` answer.
#[test]
fn a_library_for_total5_apps_is_checked_as_a_library() {
    let cli = Cli::new();
    write(
        &cli,
        "package.json",
        "{\n\t\"name\": \"querybuilderx\",\n\t\"main\": \"index.js\",\n\t\"peerDependencies\": {\n\t\t\"total5\": \"*\"\n\t}\n}\n",
    );
    write(
        &cli,
        "index.js",
        "exports.init = function(name, connection) {\n\tNEWDB(name, function(filter, callback) {\n\t\tcallback(null, connection);\n\t});\n};\n",
    );
    let out = cli.run(["check", "--json"]);
    assert_exit(&out, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(json["kind"], "library", "{json}");
    assert_eq!(json["errors"], 0, "{json}");

    let out = cli.run(["doctor"]);
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("project"))
        .unwrap_or_else(|| panic!("no project line: {text}"));
    assert!(
        line.contains("library for Total.js 5 apps (library)"),
        "{line}"
    );

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let (client, _) = totem_client::Client::connect(
            &cli.socket(),
            "check-test",
            totem_protocol::ClientCapabilities::default(),
        )
        .await
        .expect("connect");
        let project = client
            .call_raw(
                "project.open",
                serde_json::json!({"path": cli.project.path()}),
            )
            .await
            .expect("project.open");
        assert_eq!(project["kind"], "library", "{project}");
        // The kind is detected at each answer: the folder becomes an app.
        write(
            &cli,
            "package.json",
            "{\"name\": \"app\", \"dependencies\": {\"total5\": \"0.0.14\"}}\n",
        );
        write(&cli, "index.js", "require('total5');\nTotal.run({});\n");
        let list = client
            .call_raw("project.list", serde_json::json!({}))
            .await
            .expect("project.list");
        assert_eq!(list["items"][0]["kind"], "totaljs5", "{list}");
    });
}

/// A file name is the project's text: one with an OSC title, BEL and a clear screen in it is
/// printed as visible escapes, with no raw ESC or BEL byte.
#[test]
fn a_hostile_file_name_is_printed_as_escapes() {
    let cli = Cli::new();
    project(&cli);
    write(
        &cli,
        "controllers/\x1b]0;pwned\x07\x1b[2J.js",
        "exports.install = function() {\n\tROUTE('GET /x/', x);\n};\n\nfunction x() {\n\tthis.plain('hi');\n}\n",
    );
    let out = cli.run(["check"]);
    assert_exit(&out, 1);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("controllers/\\x1b]0;pwned\\x07\\x1b[2J.js:6: error [handler-this]"),
        "{text:?}"
    );
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
}
