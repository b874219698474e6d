//! The new-project scaffold: its files, that they pass the check, and that it never overwrites.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::fs;

use totem_totaljs::{
    CheckConfig, Evidence, Project, ScaffoldError, check, detect, scaffold, write_scaffold,
};

#[test]
fn scaffold_has_the_files_of_a_total5_project() {
    let paths: Vec<&str> = scaffold().iter().map(|(p, _)| *p).collect();
    assert_eq!(
        paths,
        vec![
            "package.json",
            "index.js",
            "config",
            "controllers/default.js",
            "definitions/init.js",
            ".gitignore"
        ]
    );
    let files = scaffold();
    let get = |name: &str| &files.iter().find(|(p, _)| *p == name).unwrap().1;
    assert!(get("config").lines().any(|l| l == "name : App"));
    assert!(get("index.js").contains("require('total5');"));
    assert!(get("index.js").contains("Total.run("));
    for ignored in ["node_modules/", "tmp/", "*.pid", "logs/", "databases/"] {
        assert!(get(".gitignore").lines().any(|l| l == ignored), "{ignored}");
    }
}

#[test]
fn scaffolded_files_pass_every_rule() {
    let mut cfg = CheckConfig::default();
    for rule in totem_totaljs::rules() {
        cfg.enabled.insert(rule.id.to_string());
    }
    for (path, content) in scaffold() {
        let findings = check(path, &content, &cfg);
        assert!(findings.is_empty(), "{path}: {findings:#?}");
    }
}

#[test]
fn scaffolded_package_json_depends_on_total5_and_is_detected() {
    let files = scaffold();
    let pkg = &files.iter().find(|(p, _)| *p == "package.json").unwrap().1;
    let json: serde_json::Value = serde_json::from_str(pkg).unwrap();
    assert!(json["dependencies"]["total5"].is_string());

    let dir = tempfile::tempdir().unwrap();
    write_scaffold(dir.path()).unwrap();
    match detect(dir.path()) {
        Project::TotalJs5 { evidence, problems } => {
            assert!(evidence.contains(&Evidence::PackageDependency { dev: false }));
            assert!(evidence.contains(&Evidence::RequiresTotal5 {
                file: "index.js".into()
            }));
            assert!(problems.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn write_scaffold_creates_files_in_an_empty_folder() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_scaffold(dir.path()).unwrap();
    assert_eq!(written.len(), scaffold().len());
    for (rel, content) in scaffold() {
        assert_eq!(fs::read_to_string(dir.path().join(rel)).unwrap(), content);
    }
}

#[test]
fn write_scaffold_refuses_to_overwrite_and_lists_the_files() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("index.js"), "// mine\n").unwrap();
    fs::write(dir.path().join("config"), "name : Mine\n").unwrap();
    let err = write_scaffold(dir.path()).unwrap_err();
    match &err {
        ScaffoldError::WouldOverwrite { existing, .. } => {
            assert_eq!(
                existing,
                &vec!["index.js".to_string(), "config".to_string()]
            )
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("index.js, config"), "{msg}");
    // Nothing was written, and the user's files are untouched.
    assert!(!dir.path().join("package.json").exists());
    assert_eq!(
        fs::read_to_string(dir.path().join("index.js")).unwrap(),
        "// mine\n"
    );
}

#[test]
fn existing_gitignore_gets_missing_entries_appended() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(".gitignore"), "node_modules/\n.env").unwrap();
    let written = write_scaffold(dir.path()).unwrap();
    assert!(written.contains(&dir.path().join(".gitignore")));
    let text = fs::read_to_string(dir.path().join(".gitignore")).unwrap();
    assert!(text.starts_with("node_modules/\n.env\n"), "{text}");
    assert_eq!(text.matches("node_modules/").count(), 1, "{text}");
    for entry in ["tmp/", "*.pid", "logs/", "databases/"] {
        assert!(text.lines().any(|l| l == entry), "{text}");
    }
}
