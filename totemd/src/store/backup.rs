//! Backups: one file holding every record of the store, read from one consistent view while the
//! daemon runs, and every blob. Blobs are written before the records that name them and never
//! change, so copying the blobs after reading the records gives a copy where every record finds
//! its blobs (a few newer blobs may come along; nothing names them yet).
//!
//! The file: `TOTEM-BACKUP 1\n`, then records `[kind u8][key length u32][value length u64][key]
//! [value]` (little-endian; kind 1 a store record, 2 a blob whose key is its path under `blobs/`),
//! then an end record (kind 0, no key) whose value is the SHA-256 of every byte before it.
//! Restoring builds a new store from it beside the old one and swaps them only once the whole file
//! has been read and its digest matches; the old store is kept as `store.before-restore-<time>`.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::handle::Filler;
use super::{Result, Store, StoreError};

const MAGIC: &[u8] = b"TOTEM-BACKUP 1\n";
const END: u8 = 0;
const RECORD: u8 = 1;
const BLOB: u8 = 2;

/// What a backup or a restore held.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Store records (projects, sessions, messages, runs, …) written or read.
    pub records: u64,
    /// Blobs (file snapshots, tool outputs) written or read.
    pub blobs: u64,
    /// Size of the backup file, bytes.
    pub bytes: u64,
}

/// A writer that hashes what passes through it.
struct Hashing<W> {
    inner: W,
    hash: Sha256,
    bytes: u64,
}

impl<W: Write> Hashing<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.hash.update(bytes);
        self.bytes += bytes.len() as u64;
        self.inner.write_all(bytes)
    }

    fn record(&mut self, kind: u8, key: &[u8], value: &[u8]) -> std::io::Result<()> {
        let key_len = u32::try_from(key.len()).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        self.put(&[kind])?;
        self.put(&key_len.to_le_bytes())?;
        self.put(&(value.len() as u64).to_le_bytes())?;
        self.put(key)?;
        self.put(value)
    }
}

impl Store {
    /// Writes a backup of the store and of the blobs in `blobs` to `file` (through a temporary
    /// file beside it, so a failed backup never leaves half a file under that name).
    pub fn backup(&self, blobs: &Path, file: &Path) -> Result<Summary> {
        let partial = file.with_extension("partial");
        let result = self.write_backup(blobs, &partial);
        match result {
            Ok(summary) => {
                std::fs::rename(&partial, file)?;
                Ok(summary)
            }
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                Err(e)
            }
        }
    }

    fn write_backup(&self, blobs: &Path, partial: &Path) -> Result<Summary> {
        let ks = self.handle.keyspace()?;
        let mut out = Hashing {
            inner: BufWriter::new(File::create(partial)?),
            hash: Sha256::new(),
            bytes: 0,
        };
        let mut summary = Summary::default();
        out.put(MAGIC)?;
        // One iterator is one consistent view of the store.
        for guard in ks.iter() {
            let (key, value) = guard.into_inner()?;
            out.record(RECORD, &key, &value)?;
            summary.records += 1;
        }
        for (name, path) in blob_files(blobs)? {
            let bytes = match std::fs::read(&path) {
                Ok(bytes) => bytes,
                // Removed since it was listed.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            out.record(BLOB, name.as_bytes(), &bytes)?;
            summary.blobs += 1;
        }
        let digest = out.hash.clone().finalize();
        out.record(END, b"", &digest)?;
        summary.bytes = out.bytes;
        let file = out.inner.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(summary)
    }
}

/// Every blob under `dir` (`ab/cdef…`) with its name relative to `dir`.
fn blob_files(dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let Ok(prefixes) = std::fs::read_dir(dir) else {
        return Ok(out);
    };
    for prefix in prefixes {
        let prefix = prefix?;
        if !prefix.file_type()?.is_dir() {
            continue;
        }
        for blob in std::fs::read_dir(prefix.path())? {
            let blob = blob?;
            let name = blob.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !blob.file_type()?.is_file() {
                continue;
            }
            let relative = format!("{}/{name}", prefix.file_name().to_string_lossy());
            out.push((relative, blob.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn bad(file: &Path, why: &str) -> StoreError {
    StoreError::Io(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{} is not a whole Totem backup: {why}", file.display()),
    ))
}

/// A reader that hashes what passes through it.
struct Reading<R> {
    inner: R,
    hash: Sha256,
}

impl<R: Read> Reading<R> {
    fn take(&mut self, n: usize, file: &Path) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        (&mut self.inner)
            .take(n as u64)
            .read_to_end(&mut buf)
            .map_err(StoreError::Io)?;
        if buf.len() != n {
            return Err(bad(file, "it ends early"));
        }
        self.hash.update(&buf);
        Ok(buf)
    }
}

/// Restores the backup `file` into `home` (the daemon must be stopped: the caller holds the home
/// lock). The current store is kept as `store.before-restore-<unix seconds>`.
pub fn restore(home: &Path, file: &Path) -> Result<(Summary, Option<PathBuf>)> {
    let store = home.join("store");
    let building = home.join("store.restoring");
    if building.exists() {
        std::fs::remove_dir_all(&building)?;
    }
    let blobs = home.join("blobs");
    let summary = match read_backup(file, &building, &blobs) {
        Ok(summary) => summary,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&building);
            return Err(e);
        }
    };
    let kept = if store.exists() {
        let kept = home.join(format!(
            "store.before-restore-{}",
            crate::util::now_ms() / 1000
        ));
        std::fs::rename(&store, &kept)?;
        Some(kept)
    } else {
        None
    };
    std::fs::rename(&building, &store)?;
    Ok((summary, kept))
}

fn read_backup(file: &Path, building: &Path, blobs: &Path) -> Result<Summary> {
    let mut input = Reading {
        inner: BufReader::new(File::open(file)?),
        hash: Sha256::new(),
    };
    if input.take(MAGIC.len(), file)? != MAGIC {
        return Err(bad(file, "it does not start like one"));
    }
    let mut fill = Filler::new(building)?;
    let mut summary = Summary::default();
    loop {
        let before = input.hash.clone();
        let head = input.take(13, file)?;
        let kind = head[0];
        let key_len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut value_len = [0u8; 8];
        value_len.copy_from_slice(&head[5..13]);
        let value_len = usize::try_from(u64::from_le_bytes(value_len))
            .map_err(|_| bad(file, "a record is too large"))?;
        if kind == END {
            let digest = input.take(value_len, file)?;
            if digest.as_slice() != before.finalize().as_slice() {
                return Err(bad(
                    file,
                    "its checksum does not match (damaged or cut short)",
                ));
            }
            break;
        }
        let key = input.take(key_len, file)?;
        let value = input.take(value_len, file)?;
        match kind {
            RECORD => {
                fill.put(key, value)?;
                summary.records += 1;
            }
            BLOB => {
                restore_blob(blobs, &key, &value, file)?;
                summary.blobs += 1;
            }
            _ => return Err(bad(file, "it holds a record of an unknown kind")),
        }
    }
    fill.finish()?;
    summary.bytes = std::fs::metadata(file)?.len();
    Ok(summary)
}

/// Writes one blob back unless it is there already; its name must be the hash of its bytes.
fn restore_blob(blobs: &Path, name: &[u8], bytes: &[u8], file: &Path) -> Result<()> {
    let name = std::str::from_utf8(name).map_err(|_| bad(file, "a blob has a bad name"))?;
    let id = hex::encode(Sha256::digest(bytes));
    if name.replace('/', "") != id {
        return Err(bad(file, "a blob does not match its name"));
    }
    let path = blobs.join(name);
    if path.is_file() {
        return Ok(());
    }
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder)?;
    }
    let tmp = path.with_extension("restoring");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, &path)?;
    Ok(())
}
