//! Content-addressed blobs: file contents kept by the SHA-256 of their bytes.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::SnapshotError;

/// The id of a blob: the lowercase hex SHA-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BlobId(String);

impl BlobId {
    /// The id `bytes` have in any store.
    pub fn of(bytes: &[u8]) -> Self {
        BlobId(hex::encode(Sha256::digest(bytes)))
    }

    /// The hex SHA-256 of the content.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for BlobId {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        if s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(BlobId(s))
        } else {
            Err(format!("`{s}` is not a blob id (64 lowercase hex digits)"))
        }
    }
}

impl From<BlobId> for String {
    fn from(id: BlobId) -> String {
        id.0
    }
}

impl fmt::Display for BlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where snapshots keep file contents. The daemon may pass its own store; [`DirBlobStore`] is the
/// plain implementation.
pub trait BlobStore {
    /// Stores `bytes` (a no-op when they are already stored) and returns their id.
    fn put(&self, bytes: &[u8]) -> Result<BlobId, SnapshotError>;
    /// The bytes stored under `id`.
    fn get(&self, id: &BlobId) -> Result<Vec<u8>, SnapshotError>;
}

/// Blobs as files under a directory: `<dir>/ab/cdef…` for id `abcdef…`, each written to a temporary
/// file in the same folder and renamed into place, so a reader never sees half a blob.
#[derive(Debug, Clone)]
pub struct DirBlobStore {
    dir: PathBuf,
}

impl DirBlobStore {
    /// A store rooted at `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DirBlobStore { dir: dir.into() }
    }

    /// The folder the blobs are kept in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds blob `id`.
    pub fn path_of(&self, id: &BlobId) -> PathBuf {
        let (prefix, rest) = id.as_str().split_at(2);
        self.dir.join(prefix).join(rest)
    }
}

impl BlobStore for DirBlobStore {
    fn put(&self, bytes: &[u8]) -> Result<BlobId, SnapshotError> {
        let id = BlobId::of(bytes);
        let path = self.path_of(&id);
        if path.is_file() {
            return Ok(id);
        }
        let folder = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(folder).map_err(|e| SnapshotError::io(folder, e))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(folder)
            .map_err(|e| SnapshotError::io(folder, e))?;
        tmp.write_all(bytes)
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| SnapshotError::io(tmp.path(), e))?;
        tmp.persist(&path)
            .map_err(|e| SnapshotError::io(&path, e.error))?;
        Ok(id)
    }

    fn get(&self, id: &BlobId) -> Result<Vec<u8>, SnapshotError> {
        let path = self.path_of(id);
        let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
            ErrorKind::NotFound => SnapshotError::MissingBlob { id: id.clone() },
            _ => SnapshotError::io(&path, e),
        })?;
        if BlobId::of(&bytes) != *id {
            return Err(SnapshotError::CorruptBlob {
                id: id.clone(),
                path,
            });
        }
        Ok(bytes)
    }
}
