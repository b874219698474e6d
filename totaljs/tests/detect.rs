//! Project detection on real folders.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::fs;
use std::path::Path;

use totem_totaljs::{Evidence, LegacyVersion, Project, detect};

fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

#[test]
fn total5_dependency_makes_a_total5_project() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "package.json",
        r#"{ "dependencies": { "total5": "^0.0.14" } }"#,
    );
    match detect(dir.path()) {
        Project::TotalJs5 { evidence, problems } => {
            assert_eq!(evidence, vec![Evidence::PackageDependency { dev: false }]);
            assert!(problems.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn total5_dev_dependency_counts_too() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "package.json",
        r#"{ "devDependencies": { "total5": "latest" } }"#,
    );
    let p = detect(dir.path());
    assert!(p.is_totaljs5());
    assert!(
        matches!(p, Project::TotalJs5 { ref evidence, .. } if evidence.contains(&Evidence::PackageDependency { dev: true }))
    );
}

#[test]
fn total4_and_total_js_projects_are_legacy_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "package.json",
        r#"{ "dependencies": { "total4": "^0.0.90" } }"#,
    );
    let p = detect(dir.path());
    assert_eq!(
        p,
        Project::Legacy {
            version: LegacyVersion::Total4
        }
    );
    assert!(!p.is_totaljs5());
    let msg = p.message().unwrap();
    assert!(
        msg.contains("Total.js 4") && msg.contains("do not apply"),
        "{msg}"
    );

    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "package.json",
        r#"{ "dependencies": { "total.js": "^3.4.0" } }"#,
    );
    assert_eq!(
        detect(dir.path()),
        Project::Legacy {
            version: LegacyVersion::TotalJs3
        }
    );
}

#[test]
fn legacy_boot_without_package_json_is_legacy() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "index.js",
        "require('total4/debug')({ port: 8000 });\n",
    );
    assert_eq!(
        detect(dir.path()),
        Project::Legacy {
            version: LegacyVersion::Total4
        }
    );
}

#[test]
fn empty_folder_or_only_dotfiles_is_empty_and_counts_as_total5() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(detect(dir.path()), Project::Empty);
    fs::create_dir(dir.path().join(".git")).unwrap();
    write(dir.path(), ".gitignore", "node_modules/\n");
    let p = detect(dir.path());
    assert_eq!(p, Project::Empty);
    assert!(p.is_totaljs5());
}

#[test]
fn secondary_signals_detect_total5_without_package_json() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "index.js",
        "require('total5');\nTotal.run({});\n",
    );
    match detect(dir.path()) {
        Project::TotalJs5 { evidence, .. } => assert_eq!(
            evidence,
            vec![Evidence::IndexRequiresTotal5, Evidence::IndexCallsTotalRun]
        ),
        other => panic!("{other:?}"),
    }

    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "config", "name : App\n");
    write(
        dir.path(),
        "controllers/default.js",
        "exports.install = function() {\n\tROUTE('GET /', $ => $.plain('x'));\n};\n",
    );
    match detect(dir.path()) {
        Project::TotalJs5 { evidence, .. } => assert_eq!(
            evidence,
            vec![Evidence::ConfigFile, Evidence::ControllerInstall]
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_lone_config_file_is_not_enough() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "config", "name : App\n");
    assert_eq!(detect(dir.path()), Project::Other { problems: vec![] });
}

#[test]
fn malformed_package_json_is_reported_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "package.json",
        "{ \"dependencies\": { \"total5\": ",
    );
    let p = detect(dir.path());
    assert!(matches!(p, Project::Other { .. }));
    assert!(
        p.problems()[0].contains("package.json is not valid JSON"),
        "{p:?}"
    );
    assert!(p.message().is_some());

    // Other signals still decide; the problem is kept.
    write(
        dir.path(),
        "index.js",
        "require('total5');\nTotal.run({});\n",
    );
    let p = detect(dir.path());
    assert!(p.is_totaljs5());
    assert_eq!(p.problems().len(), 1);
}

#[test]
fn other_node_projects_and_missing_folders_are_other() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "package.json",
        r#"{ "dependencies": { "express": "^4" } }"#,
    );
    write(
        dir.path(),
        "index.js",
        "require('express')().listen(3000);\n",
    );
    assert_eq!(detect(dir.path()), Project::Other { problems: vec![] });

    let missing = dir.path().join("nope");
    let p = detect(&missing);
    assert!(p.problems()[0].contains("cannot read the folder"));
}
