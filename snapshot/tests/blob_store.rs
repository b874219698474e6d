//! The content-addressed blob directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use totem_snapshot::{BlobId, BlobStore, DirBlobStore, SnapshotError};

#[test]
fn put_then_get_returns_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirBlobStore::new(dir.path().join("blobs"));
    let bytes = b"hello\0world\xff".to_vec();
    let id = store.put(&bytes).unwrap();
    assert_eq!(store.get(&id).unwrap(), bytes);
}

#[test]
fn id_is_the_sha256_and_files_are_sharded_by_its_first_two_digits() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirBlobStore::new(dir.path());
    let id = store.put(b"abc").unwrap();
    assert_eq!(
        id.as_str(),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let file = dir
        .path()
        .join("ba")
        .join("7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_eq!(std::fs::read(file).unwrap(), b"abc");
}

#[test]
fn same_content_is_stored_once_and_no_temp_files_remain() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirBlobStore::new(dir.path());
    let a = store.put(b"same").unwrap();
    let b = store.put(b"same").unwrap();
    assert_eq!(a, b);
    let shard = store.path_of(&a).parent().unwrap().to_path_buf();
    let names: Vec<_> = std::fs::read_dir(shard)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn empty_content_is_a_blob_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirBlobStore::new(dir.path());
    let id = store.put(b"").unwrap();
    assert_eq!(store.get(&id).unwrap(), b"");
}

#[test]
fn missing_blob_is_a_named_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirBlobStore::new(dir.path());
    let id = BlobId::of(b"never stored");
    match store.get(&id) {
        Err(SnapshotError::MissingBlob { id: missing }) => assert_eq!(missing, id),
        other => panic!("{other:?}"),
    }
}

#[test]
fn damaged_blob_is_detected_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirBlobStore::new(dir.path());
    let id = store.put(b"original").unwrap();
    std::fs::write(store.path_of(&id), b"tampered").unwrap();
    assert!(matches!(
        store.get(&id),
        Err(SnapshotError::CorruptBlob { .. })
    ));
}

#[test]
fn blob_ids_are_validated_when_read_from_json() {
    let id = BlobId::of(b"x");
    let json = serde_json::to_string(&id).unwrap();
    assert_eq!(serde_json::from_str::<BlobId>(&json).unwrap(), id);
    assert!(serde_json::from_str::<BlobId>("\"../../etc/passwd\"").is_err());
    assert!(serde_json::from_str::<BlobId>("\"ABC\"").is_err());
}
