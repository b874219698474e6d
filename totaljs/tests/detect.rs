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
    write(
        dir.path(),
        "index.js",
        "require('total5');\nTotal.run({ watcher: false });\n",
    );
    let p = detect(dir.path());
    assert!(p.is_totaljs5());
    assert!(
        matches!(p, Project::TotalJs5 { ref evidence, .. } if evidence.contains(&Evidence::PackageDependency { dev: true }))
    );
}

/// #32 item 4: a package for Total.js 5 apps (total5 as a peer or dev dependency, nothing that
/// boots it, like the npm packages querybuilderpg and dbms) is a library, not an app.
#[test]
fn a_package_with_total5_as_peer_or_dev_dependency_is_a_library() {
    for section in ["peerDependencies", "devDependencies"] {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "package.json",
            &format!(
                r#"{{ "name": "querybuilderx", "main": "index.js", "{section}": {{ "total5": "*" }} }}"#
            ),
        );
        write(
            dir.path(),
            "index.js",
            "exports.init = function(name, connection) {\n\tNEWDB(name, connection);\n};\n",
        );
        let p = detect(dir.path());
        assert!(matches!(p, Project::Library { .. }), "{section}: {p:?}");
        assert_eq!(p.kind(), "library");
        assert!(p.is_totaljs5());
        assert!(p.message().unwrap().contains("library"));
    }
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
fn the_v5_boot_detects_total5_without_package_json() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "index.js",
        "require('total5');\nTotal.run({});\n",
    );
    match detect(dir.path()) {
        Project::TotalJs5 { evidence, .. } => assert_eq!(
            evidence,
            vec![
                Evidence::RequiresTotal5 {
                    file: "index.js".into()
                },
                Evidence::CallsRun {
                    file: "index.js".into()
                }
            ]
        ),
        other => panic!("{other:?}"),
    }
}

/// The official v5 apps (flow, cms, openplatform...): `total5` dependency, `require('total5')`
/// and `F.run(options)` in index.js.
#[test]
fn official_v5_layout_is_total5() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "package.json",
        r#"{ "main": "index.js", "dependencies": { "total5": "latest" } }"#,
    );
    write(
        dir.path(),
        "index.js",
        "require('total5');\n\nconst options = {};\nF.run(options);\n",
    );
    write(dir.path(), "config", "name : Flow\n");
    let p = detect(dir.path());
    assert!(
        matches!(&p, Project::TotalJs5 { evidence, .. } if evidence.len() == 3 && evidence[0] == Evidence::PackageDependency { dev: false }),
        "{p:?}"
    );
}

/// totaljs/openfiles: package.json still says total4, index.js boots total5. What runs wins.
#[test]
fn a_total5_boot_wins_over_a_stale_total4_dependency() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "package.json",
        r#"{ "dependencies": { "total4": "latest" } }"#,
    );
    write(dir.path(), "index.js", "require('total5');\nF.run({});\n");
    assert!(detect(dir.path()).is_totaljs5());
}

/// totaljs/admin and older community apps: `debug.js` requires `total.js/debug`, package.json
/// lists no framework, and there is a `config` and controllers with `exports.install`.
#[test]
fn a_v3_app_booting_from_debug_js_is_legacy() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "package.json", r#"{ "name": "admin" }"#);
    write(
        dir.path(),
        "debug.js",
        "const options = {};\nrequire('total.js/debug')(options);\n",
    );
    write(dir.path(), "config", "name : Admin\n");
    write(
        dir.path(),
        "controllers/default.js",
        "exports.install = function() {\n\tROUTE('/', 'index');\n};\n",
    );
    let p = detect(dir.path());
    assert_eq!(
        p,
        Project::Legacy {
            version: LegacyVersion::TotalJs3
        }
    );
    assert!(!p.is_totaljs5());

    write(dir.path(), "release.js", "require('total4/release')({});\n");
    std::fs::remove_file(dir.path().join("debug.js")).unwrap();
    assert_eq!(
        detect(dir.path()),
        Project::Legacy {
            version: LegacyVersion::Total4
        }
    );
}

/// package.json's `main` names the boot file when it is not index.js.
#[test]
fn the_boot_file_named_by_main_is_read() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "package.json", r#"{ "main": "./server.js" }"#);
    write(
        dir.path(),
        "server.js",
        "require('total5');\nTotal.run({ port: 8000 });\n",
    );
    assert!(detect(dir.path()).is_totaljs5());
}

/// A Total.js layout with no sign of any version is not taken for Total.js 5.
#[test]
fn a_total_js_layout_without_version_signs_is_not_total5() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "config", "name : App\n");
    write(
        dir.path(),
        "controllers/default.js",
        "exports.install = function() {\n\tROUTE('GET /', $ => $.plain('x'));\n};\n",
    );
    let p = detect(dir.path());
    assert_eq!(
        p,
        Project::Legacy {
            version: LegacyVersion::Unknown
        }
    );
    let msg = p.message().unwrap();
    assert!(msg.contains("nothing says it is Total.js 5"), "{msg}");

    // A v5-only API in the app's code is a positive sign.
    write(
        dir.path(),
        "definitions/jobs.js",
        "CRON('*/5 * * * *', function() {\n\tconsole.log('tick');\n});\n",
    );
    match detect(dir.path()) {
        Project::TotalJs5 { evidence, .. } => assert_eq!(
            evidence,
            vec![Evidence::V5Api {
                file: "definitions/jobs.js".into(),
                name: "CRON".into()
            }]
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
