//! Recording a run's changes over a real folder, then undoing and redoing them byte for byte.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use totem_snapshot::{
    BlobStore, ConflictReason, DirBlobStore, FileState, RecordOptions, RunChanges, RunRecord,
    ScanOptions, SnapshotError, redo, undo,
};

struct Fixture {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    store: DirBlobStore,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir(&root).unwrap();
    let store = DirBlobStore::new(dir.path().join("blobs"));
    Fixture {
        _dir: dir,
        root,
        store,
    }
}

fn write(root: &Path, path: &str, bytes: &[u8]) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, bytes).unwrap();
}

fn read(root: &Path, path: &str) -> Option<Vec<u8>> {
    std::fs::read(root.join(path)).ok()
}

/// Every file under `root` with its bytes, for byte-exact comparisons of whole trees.
fn tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if path.is_dir() {
                out.push((
                    format!("{}/", path.strip_prefix(root).unwrap().display()),
                    Vec::new(),
                ));
                stack.push(path);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn binary_bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 3) as u8)
        .collect()
}

/// A run made by tools: records each path, applies `change`, finishes.
fn tool_run(f: &Fixture, paths: &[&str], change: impl FnOnce(&Path)) -> RunRecord {
    let mut run = RunChanges::new(&f.root, &f.store, RecordOptions::default());
    for p in paths {
        run.record_before(p).unwrap();
    }
    change(&f.root);
    run.finish().unwrap().0
}

#[test]
fn undo_and_redo_of_a_text_edit_are_byte_exact() {
    let f = fixture();
    let original = b"line 1\r\nline 2\r\nno newline at end";
    write(&f.root, "src/a.txt", original);
    let before = tree(&f.root);
    let record = tool_run(&f, &["src/a.txt"], |r| {
        write(r, "src/a.txt", b"line 1\nchanged\n")
    });
    let after = tree(&f.root);
    assert_eq!(record.changes.len(), 1);

    undo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(tree(&f.root), before);
    redo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(tree(&f.root), after);
}

#[test]
fn undo_and_redo_of_a_binary_file_are_byte_exact() {
    let f = fixture();
    let old = binary_bytes(7, 70_000);
    let new = binary_bytes(99, 65_537);
    write(&f.root, "img.bin", &old);
    let record = tool_run(&f, &["img.bin"], |r| write(r, "img.bin", &new));
    undo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(read(&f.root, "img.bin").unwrap(), old);
    redo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(read(&f.root, "img.bin").unwrap(), new);
}

#[test]
fn undo_removes_a_created_file_and_the_folders_made_for_it() {
    let f = fixture();
    write(&f.root, "keep.txt", b"k");
    let before = tree(&f.root);
    let record = tool_run(&f, &["new/deep/file.txt"], |r| {
        write(r, "new/deep/file.txt", b"fresh")
    });
    assert!(record.changes[0].created());
    assert_eq!(record.created_dirs, ["new", "new/deep"]);
    undo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(tree(&f.root), before);
    redo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(read(&f.root, "new/deep/file.txt").unwrap(), b"fresh");
}

#[test]
fn undo_keeps_a_created_folder_that_holds_other_files() {
    let f = fixture();
    let record = tool_run(&f, &["out/a.txt"], |r| write(r, "out/a.txt", b"a"));
    write(&f.root, "out/mine.txt", b"user file");
    undo(&f.root, &f.store, &record, false).unwrap();
    assert!(read(&f.root, "out/a.txt").is_none());
    assert_eq!(read(&f.root, "out/mine.txt").unwrap(), b"user file");
}

#[test]
fn undo_restores_a_deleted_file() {
    let f = fixture();
    write(&f.root, "docs/gone.md", b"# still here\n");
    let before = tree(&f.root);
    let record = tool_run(&f, &["docs/gone.md"], |r| {
        std::fs::remove_file(r.join("docs/gone.md")).unwrap();
        std::fs::remove_dir(r.join("docs")).unwrap();
    });
    assert!(record.changes[0].deleted());
    undo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(tree(&f.root), before);
    redo(&f.root, &f.store, &record, false).unwrap();
    assert!(read(&f.root, "docs/gone.md").is_none());
}

#[test]
fn undo_reverses_a_rename() {
    let f = fixture();
    write(&f.root, "old.rs", b"fn main() {}\n");
    let before = tree(&f.root);
    let record = tool_run(&f, &["old.rs", "lib/new.rs"], |r| {
        std::fs::create_dir_all(r.join("lib")).unwrap();
        std::fs::rename(r.join("old.rs"), r.join("lib/new.rs")).unwrap();
    });
    assert_eq!(record.changes.len(), 2);
    let after = tree(&f.root);
    undo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(tree(&f.root), before);
    redo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(tree(&f.root), after);
}

#[test]
fn first_record_of_a_path_wins_within_a_run() {
    let f = fixture();
    write(&f.root, "a.txt", b"v1");
    let mut run = RunChanges::new(&f.root, &f.store, RecordOptions::default());
    run.record_before("a.txt").unwrap();
    write(&f.root, "a.txt", b"v2");
    run.record_before("a.txt").unwrap();
    write(&f.root, "a.txt", b"v3");
    let (record, _) = run.finish().unwrap();
    undo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(read(&f.root, "a.txt").unwrap(), b"v1");
}

#[test]
fn a_file_written_back_unchanged_is_not_a_change() {
    let f = fixture();
    write(&f.root, "same.txt", b"same");
    let record = tool_run(&f, &["same.txt"], |r| write(r, "same.txt", b"same"));
    assert!(record.is_empty());
}

#[test]
fn undo_refuses_a_file_edited_after_the_run_and_names_it() {
    let f = fixture();
    write(&f.root, "a.txt", b"a0");
    write(&f.root, "b.txt", b"b0");
    let record = tool_run(&f, &["a.txt", "b.txt"], |r| {
        write(r, "a.txt", b"a1");
        write(r, "b.txt", b"b1");
    });
    write(&f.root, "b.txt", b"b1 plus my edit");

    let err = undo(&f.root, &f.store, &record, false).unwrap_err();
    match &err {
        SnapshotError::Conflicts { conflicts } => {
            assert_eq!(conflicts.len(), 1);
            assert_eq!(conflicts[0].path, "b.txt");
            assert_eq!(conflicts[0].reason, ConflictReason::ChangedSince);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("b.txt"), "{err}");
    // Nothing was touched.
    assert_eq!(read(&f.root, "a.txt").unwrap(), b"a1");
    assert_eq!(read(&f.root, "b.txt").unwrap(), b"b1 plus my edit");

    let done = undo(&f.root, &f.store, &record, true).unwrap();
    assert_eq!(done.overwritten, ["b.txt"]);
    assert_eq!(read(&f.root, "a.txt").unwrap(), b"a0");
    assert_eq!(read(&f.root, "b.txt").unwrap(), b"b0");
}

#[test]
fn undo_refuses_when_the_user_recreated_a_deleted_file() {
    let f = fixture();
    write(&f.root, "x.txt", b"x");
    let record = tool_run(&f, &["x.txt"], |r| {
        std::fs::remove_file(r.join("x.txt")).unwrap()
    });
    write(&f.root, "x.txt", b"mine now");
    assert!(matches!(
        undo(&f.root, &f.store, &record, false),
        Err(SnapshotError::Conflicts { .. })
    ));
    assert_eq!(read(&f.root, "x.txt").unwrap(), b"mine now");
}

#[test]
fn undo_refuses_when_the_user_deleted_a_created_file_edit() {
    let f = fixture();
    let record = tool_run(&f, &["c.txt"], |r| write(r, "c.txt", b"made"));
    write(&f.root, "c.txt", b"made, then edited");
    assert!(undo(&f.root, &f.store, &record, false).is_err());
    assert!(read(&f.root, "c.txt").is_some());
}

#[test]
fn redo_refuses_a_file_edited_after_the_undo() {
    let f = fixture();
    write(&f.root, "a.txt", b"before");
    let record = tool_run(&f, &["a.txt"], |r| write(r, "a.txt", b"after"));
    undo(&f.root, &f.store, &record, false).unwrap();
    write(&f.root, "a.txt", b"edited after undo");
    assert!(matches!(
        redo(&f.root, &f.store, &record, false),
        Err(SnapshotError::Conflicts { .. })
    ));
    assert_eq!(read(&f.root, "a.txt").unwrap(), b"edited after undo");
}

#[test]
fn undo_run_by_run_back_to_the_start() {
    let f = fixture();
    write(&f.root, "f.txt", b"0");
    let start = tree(&f.root);
    let r1 = tool_run(&f, &["f.txt"], |r| write(r, "f.txt", b"1"));
    let r2 = tool_run(&f, &["f.txt", "g.txt"], |r| {
        write(r, "f.txt", b"2");
        write(r, "g.txt", b"g");
    });
    undo(&f.root, &f.store, &r2, false).unwrap();
    assert_eq!(read(&f.root, "f.txt").unwrap(), b"1");
    undo(&f.root, &f.store, &r1, false).unwrap();
    assert_eq!(tree(&f.root), start);
}

#[cfg(unix)]
#[test]
fn permission_bits_are_restored() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    write(&f.root, "run.sh", b"#!/bin/sh\necho hi\n");
    std::fs::set_permissions(
        f.root.join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let record = tool_run(&f, &["run.sh"], |r| {
        std::fs::remove_file(r.join("run.sh")).unwrap()
    });
    undo(&f.root, &f.store, &record, false).unwrap();
    let mode = std::fs::metadata(f.root.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
}

fn sh(root: &Path, script: &str) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn changes_made_by_a_shell_command_are_captured_by_the_scan() {
    let f = fixture();
    write(&f.root, "edit.txt", b"old\n");
    write(&f.root, "delete.txt", b"bye\n");
    write(&f.root, "move.txt", b"moving\n");
    write(&f.root, "untouched.txt", b"same\n");
    let before = tree(&f.root);

    let mut run = RunChanges::new(&f.root, &f.store, RecordOptions::default());
    run.scan_before(None).unwrap();
    sh(
        &f.root,
        "echo new > edit.txt && rm delete.txt && mkdir -p sub && mv move.txt sub/moved.txt \
         && printf 'a\\0b' > created.bin",
    );
    let (record, after_scan) = run.finish().unwrap();
    let paths: Vec<_> = record.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "created.bin",
            "delete.txt",
            "edit.txt",
            "move.txt",
            "sub/moved.txt"
        ]
    );
    assert!(after_scan.is_some());
    let after = tree(&f.root);

    undo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(tree(&f.root), before);
    redo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(tree(&f.root), after);
}

#[test]
fn tool_record_and_scan_combine_in_one_run() {
    let f = fixture();
    write(&f.root, "a.txt", b"a0");
    let before = tree(&f.root);
    let mut run = RunChanges::new(&f.root, &f.store, RecordOptions::default());
    run.record_before("a.txt").unwrap();
    write(&f.root, "a.txt", b"a1"); // the edit tool
    run.scan_before(None).unwrap();
    sh(&f.root, "echo more >> a.txt; echo b > b.txt");
    let (record, _) = run.finish().unwrap();
    assert_eq!(record.changes.len(), 2);
    undo(&f.root, &f.store, &record, false).unwrap();
    assert_eq!(tree(&f.root), before);
}

#[test]
fn scan_ignores_gitignored_files_and_the_git_folder() {
    let f = fixture();
    write(&f.root, ".gitignore", b"target/\n*.log\n");
    write(&f.root, "target/old.o", b"o");
    write(&f.root, ".git/HEAD", b"ref: refs/heads/main\n");
    let mut run = RunChanges::new(&f.root, &f.store, RecordOptions::default());
    run.scan_before(None).unwrap();
    sh(
        &f.root,
        "echo x > target/new.o; echo y > build.log; echo z > .git/HEAD; echo w > kept.txt",
    );
    let (record, _) = run.finish().unwrap();
    let paths: Vec<_> = record.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["kept.txt"]);
}

#[test]
fn hidden_files_are_tracked() {
    let f = fixture();
    write(&f.root, ".config/app.toml", b"a = 1\n");
    let mut run = RunChanges::new(&f.root, &f.store, RecordOptions::default());
    run.scan_before(None).unwrap();
    sh(&f.root, "echo 'a = 2' > .config/app.toml");
    let (record, _) = run.finish().unwrap();
    assert_eq!(record.changes[0].path, ".config/app.toml");
}

#[test]
fn files_over_the_size_cap_are_tracked_but_cannot_be_undone() {
    let f = fixture();
    write(&f.root, "big.dat", &vec![1u8; 4096]);
    let options = RecordOptions {
        max_file_size: 1024,
        scan: ScanOptions {
            max_file_size: 1024,
            ..ScanOptions::default()
        },
    };
    let mut run = RunChanges::new(&f.root, &f.store, options);
    run.scan_before(None).unwrap();
    sh(&f.root, "head -c 5000 /dev/zero > big.dat");
    let (record, _) = run.finish().unwrap();
    assert!(matches!(
        record.changes[0].before,
        FileState::NotKept { .. }
    ));
    match undo(&f.root, &f.store, &record, true) {
        Err(SnapshotError::Conflicts { conflicts }) => {
            assert_eq!(conflicts[0].reason, ConflictReason::NotKept);
            assert!(
                SnapshotError::Conflicts { conflicts }
                    .to_string()
                    .contains("big.dat")
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Counts blob writes, to show the fast path.
struct Counting<'a> {
    inner: &'a DirBlobStore,
    puts: std::cell::Cell<usize>,
}

impl BlobStore for Counting<'_> {
    fn put(&self, bytes: &[u8]) -> Result<totem_snapshot::BlobId, SnapshotError> {
        self.puts.set(self.puts.get() + 1);
        self.inner.put(bytes)
    }
    fn get(&self, id: &totem_snapshot::BlobId) -> Result<Vec<u8>, SnapshotError> {
        self.inner.get(id)
    }
}

#[test]
fn unchanged_files_are_not_read_again_when_a_previous_scan_is_given() {
    let f = fixture();
    for i in 0..20 {
        write(&f.root, &format!("f{i}.txt"), format!("{i}").as_bytes());
    }
    let counting = Counting {
        inner: &f.store,
        puts: std::cell::Cell::new(0),
    };
    let mut first = RunChanges::new(&f.root, &counting, RecordOptions::default());
    first.scan_before(None).unwrap();
    let (_, scan) = first.finish().unwrap();
    let after_first = counting.puts.get();
    assert_eq!(after_first, 20); // the closing scan reused every entry

    let mut second = RunChanges::new(&f.root, &counting, RecordOptions::default());
    second.scan_before(scan.as_ref()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(&f.root, "f3.txt", b"changed");
    let (record, _) = second.finish().unwrap();
    assert_eq!(counting.puts.get(), after_first + 1);
    assert_eq!(record.changes.len(), 1);
}

#[test]
fn scan_stops_at_the_file_limit_and_says_so() {
    let f = fixture();
    for i in 0..5 {
        write(&f.root, &format!("f{i}.txt"), b"x");
    }
    let scan = totem_snapshot::TreeScan::take(
        &f.root,
        &f.store,
        ScanOptions {
            max_files: 3,
            ..ScanOptions::default()
        },
        None,
    )
    .unwrap();
    assert!(scan.truncated());
    assert_eq!(scan.len(), 3);
}

#[test]
fn a_record_with_a_path_outside_the_project_is_refused() {
    let f = fixture();
    let json = r#"{"changes":[{"path":"../escape.txt","before":{"type":"absent"},
        "after":{"type":"absent"}}]}"#;
    let record: RunRecord = serde_json::from_str(json).unwrap();
    assert!(matches!(
        undo(&f.root, &f.store, &record, true),
        Err(SnapshotError::BadPath { .. })
    ));
    assert!(!f.root.parent().unwrap().join("escape.txt").exists());
}

#[test]
fn run_record_round_trips_through_json() {
    let f = fixture();
    write(&f.root, "a.txt", b"a");
    let record = tool_run(&f, &["a.txt", "n/b.txt"], |r| {
        write(r, "a.txt", b"b");
        write(r, "n/b.txt", b"c");
    });
    let json = serde_json::to_string(&record).unwrap();
    assert_eq!(serde_json::from_str::<RunRecord>(&json).unwrap(), record);
}

#[test]
fn each_command_is_told_what_it_changed_and_the_run_keeps_all_of_it() {
    let f = fixture();
    write(&f.root, "a.txt", b"one\n");
    write(&f.root, "b.txt", b"two\n");
    let mut run = RunChanges::new(&f.root, &f.store, RecordOptions::default());
    assert!(
        run.changed_by_last_command().unwrap().is_empty(),
        "no scan before: nothing to compare"
    );
    run.scan_before(None).unwrap();

    // A first command changes a.txt and creates c.txt.
    write(&f.root, "a.txt", b"one, changed\n");
    write(&f.root, "c.txt", b"three\n");
    let first = run.changed_by_last_command().unwrap();
    let paths: Vec<&str> = first.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "c.txt"]);
    assert!(first[1].created());
    let FileState::File { blob, .. } = &first[0].before else {
        panic!("a.txt was a file: {:?}", first[0].before)
    };
    assert_eq!(f.store.get(blob).unwrap(), b"one\n");

    // A second command sees only its own change, not the first one's again.
    std::fs::remove_file(f.root.join("b.txt")).unwrap();
    let second = run.changed_by_last_command().unwrap();
    assert_eq!(second.len(), 1);
    assert!(second[0].deleted() && second[0].path == "b.txt");
    assert!(run.changed_by_last_command().unwrap().is_empty());

    // The run's record still goes from before the first command to the end.
    let record = run.finish().unwrap().0;
    let paths: Vec<&str> = record.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "b.txt", "c.txt"]);
}
