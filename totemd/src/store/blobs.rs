//! Content-addressed blobs on disk: file snapshots, attachments, large tool outputs. A blob's id
//! is the SHA-256 of its bytes; it lives at `blobs/ab/cdef…`, written through a temporary file and
//! a rename so a crash never leaves half a blob under a valid name.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The blob folder.
#[derive(Debug, Clone)]
pub struct BlobStore {
    dir: PathBuf,
}

impl BlobStore {
    pub fn open(dir: &Path) -> std::io::Result<BlobStore> {
        std::fs::create_dir_all(dir)?;
        Ok(BlobStore {
            dir: dir.to_path_buf(),
        })
    }

    fn path_of(&self, id: &str) -> Option<PathBuf> {
        if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(self.dir.join(&id[..2]).join(&id[2..]))
    }

    /// Stores bytes and returns their id. Storing the same bytes twice is free.
    pub fn put(&self, bytes: &[u8]) -> std::io::Result<String> {
        let id = hex::encode(Sha256::digest(bytes));
        let dir = self.dir.join(&id[..2]);
        let path = dir.join(&id[2..]);
        if path.exists() {
            return Ok(id);
        }
        std::fs::create_dir_all(&dir)?;
        let mut tmp = tempfile_in(&dir)?;
        tmp.1.write_all(bytes)?;
        tmp.1.sync_all()?;
        std::fs::rename(&tmp.0, &path)?;
        Ok(id)
    }

    /// The bytes of a blob, or None when no blob has that id.
    pub fn get(&self, id: &str) -> std::io::Result<Option<Vec<u8>>> {
        let Some(path) = self.path_of(id) else {
            return Ok(None);
        };
        match std::fs::read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    let name = format!(".tmp-{}-{}", std::process::id(), ulid::Ulid::new());
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    Ok((path, file))
}
