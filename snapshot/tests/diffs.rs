//! Unified diffs of recorded changes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use totem_snapshot::{
    DirBlobStore, FileDiff, RecordOptions, RunChanges, RunRecord, diff, unified_diff,
};

#[test]
fn changed_text_file_gives_a_unified_diff() {
    let d = unified_diff(
        "src/a.rs",
        Some(b"one\ntwo\nthree\n"),
        Some(b"one\n2\nthree\n"),
    );
    let FileDiff::Text { path, diff } = d else {
        panic!("{d:?}")
    };
    assert_eq!(path, "src/a.rs");
    assert!(
        diff.starts_with("--- a/src/a.rs\n+++ b/src/a.rs\n"),
        "{diff}"
    );
    assert!(diff.contains("\n-two\n+2\n"), "{diff}");
}

#[test]
fn created_and_deleted_files_diff_against_dev_null() {
    let FileDiff::Text { diff, .. } = unified_diff("new.txt", None, Some(b"hi\n")) else {
        panic!()
    };
    assert!(diff.starts_with("--- /dev/null\n+++ b/new.txt\n"), "{diff}");
    assert!(diff.contains("+hi"));
    let FileDiff::Text { diff, .. } = unified_diff("old.txt", Some(b"bye\n"), None) else {
        panic!()
    };
    assert!(diff.starts_with("--- a/old.txt\n+++ /dev/null\n"), "{diff}");
}

#[test]
fn binary_files_are_reported_as_binary() {
    let d = unified_diff(
        "img.png",
        Some(b"\x89PNG\0\x01"),
        Some(b"\x89PNG\0\x02\x03"),
    );
    assert_eq!(
        d,
        FileDiff::Binary {
            path: "img.png".into(),
            before_size: Some(6),
            after_size: Some(7)
        }
    );
    assert!(matches!(
        unified_diff("x", Some(b"text\n"), Some(&[0xff, 0xfe])),
        FileDiff::Binary { .. }
    ));
}

#[test]
fn diff_of_a_run_covers_every_file_in_path_order() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("b.txt"), "b\n").unwrap();
    let store = DirBlobStore::new(dir.path().join("blobs"));
    let mut run = RunChanges::new(&root, &store, RecordOptions::default());
    run.record_before("b.txt").unwrap();
    run.record_before("a.bin").unwrap();
    std::fs::write(root.join("b.txt"), "B\n").unwrap();
    std::fs::write(root.join("a.bin"), [0u8, 1, 2]).unwrap();
    let (record, _) = run.finish().unwrap();
    let diffs = diff(&store, &record).unwrap();
    let paths: Vec<_> = diffs.iter().map(FileDiff::path).collect();
    assert_eq!(paths, ["a.bin", "b.txt"]);
    assert!(matches!(
        diffs[0],
        FileDiff::Binary {
            before_size: None,
            ..
        }
    ));
    assert!(matches!(&diffs[1], FileDiff::Text { diff, .. } if diff.contains("-b\n+B")));
}

#[test]
fn session_diff_combines_runs_from_first_before_to_last_after() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("f.txt"), "v0\n").unwrap();
    let store = DirBlobStore::new(dir.path().join("blobs"));
    let mut records = Vec::new();
    for (path, content) in [("f.txt", "v1\n"), ("f.txt", "v2\n"), ("t.txt", "tmp\n")] {
        let mut run = RunChanges::new(&root, &store, RecordOptions::default());
        run.record_before(path).unwrap();
        std::fs::write(root.join(path), content).unwrap();
        records.push(run.finish().unwrap().0);
    }
    // A fourth run removes the temporary file again: it drops out of the session diff.
    let mut run = RunChanges::new(&root, &store, RecordOptions::default());
    run.record_before("t.txt").unwrap();
    std::fs::remove_file(root.join("t.txt")).unwrap();
    records.push(run.finish().unwrap().0);

    let session = RunRecord::combine(&records);
    let diffs = diff(&store, &session).unwrap();
    assert_eq!(diffs.len(), 1);
    let FileDiff::Text { diff, .. } = &diffs[0] else {
        panic!()
    };
    assert!(diff.contains("-v0\n+v2\n"), "{diff}");
}
