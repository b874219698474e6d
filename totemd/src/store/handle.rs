//! The open database behind the store, and what happens when writing to it fails.
//!
//! fjall refuses every write after one failed (it "poisons" the database), even once the disk has
//! room again. So a failed write marks the store unwritable (full, or failed for another reason),
//! reads go on from the same database, and the next write — or the daemon's watch — reopens the
//! database once there is room: the journal is replayed up to the last whole batch and writing
//! resumes, without a restart. When reopening does not work the store is closed for good and the
//! daemon exits, so that a fresh one starts; it never stays up unable to write.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, OwnedWriteBatch};

use super::{Result, StoreError};
use crate::disk;
use crate::util::lock;

/// Block cache. fjall's default (32 MiB) is sized for servers; a session's recent history fits in
/// far less, and reads that miss go to the OS page cache. A long-lived daemon fills whatever it
/// is given (8 MiB until issue 37, more than a third of the idle daemon's memory after a soak),
/// and keeps it at idle: each ~4 KiB block sits on two pages of its own among the freed memory
/// of the runs that read it, so 1 MiB (273 blocks) held 2 MiB of pages at the soak's idle end.
/// 256 KiB since issue 37 item 3: `bench-store`, `bench-runs` and a session's replay were no
/// slower (BENCHMARKS.md, "Soak").
const CACHE_BYTES: u64 = 256 * 1024;
/// Writes kept in memory before they are flushed to a table file. fjall's default (64 MiB) made
/// the daemon's memory grow with every run until the first flush; a run writes about 20 KiB, so
/// 2 MiB is a flush every hundred runs or so. fjall records this with the keyspace when it is
/// created, so it applies to stores created from now on (4 MiB before issue 37, 64 before that).
const MEMTABLE_BYTES: u64 = 2 * 1024 * 1024;
/// How long a reopen waits for the old database's last handles (in-flight reads) to let go.
const REOPEN_WAIT: Duration = Duration::from_secs(3);

/// Whether the store can write, as `daemon.status` and `totem doctor` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Writes succeed.
    Ok,
    /// A write failed for lack of space; writing resumes once there is room.
    Full,
    /// A write failed for another reason; the next write reopens the database.
    Failed(String),
    /// Reopening failed: nothing can be written until the daemon restarts.
    Closed(String),
}

/// The database and its one keyspace, as opened.
#[derive(Clone)]
pub(super) struct Open {
    pub db: Database,
    pub ks: Keyspace,
}

/// Shared by the store and all its tables; cheap to clone.
#[derive(Clone)]
pub(super) struct Handle(Arc<Inner>);

struct Inner {
    path: PathBuf,
    /// None only after a reopen failed (the store is closed).
    open: RwLock<Option<Open>>,
    health: Mutex<Health>,
}

/// A write batch bound to the database it was made from.
pub struct Batch {
    pub(super) inner: OwnedWriteBatch,
    pub(super) ks: Keyspace,
}

pub(super) fn open_db(path: &Path) -> fjall::Result<Open> {
    let db = Database::builder(path).cache_size(CACHE_BYTES).open()?;
    let ks = db.keyspace("totem", || {
        KeyspaceCreateOptions::default().max_memtable_size(MEMTABLE_BYTES)
    })?;
    Ok(Open { db, ks })
}

impl Handle {
    pub fn open(path: &Path) -> Result<Handle> {
        let open = open_db(path).map_err(|e| opening_error(path, e))?;
        Ok(Handle(Arc::new(Inner {
            path: path.to_path_buf(),
            open: RwLock::new(Some(open)),
            health: Mutex::new(Health::Ok),
        })))
    }

    pub fn health(&self) -> Health {
        lock(&self.0.health).clone()
    }

    /// The database as open now, for reading.
    pub fn current(&self) -> Result<Open> {
        let slot = crate::util::read_lock(&self.0.open);
        match slot.as_ref() {
            Some(open) => Ok(open.clone()),
            None => Err(self.closed_error()),
        }
    }

    pub fn keyspace(&self) -> Result<Keyspace> {
        Ok(self.current()?.ks)
    }

    fn closed_error(&self) -> StoreError {
        let reason = match self.health() {
            Health::Closed(reason) => reason,
            _ => "it is being reopened".to_string(),
        };
        StoreError::Closed {
            path: self.0.path.clone(),
            reason,
        }
    }

    /// The database for a write: reopened first when an earlier write failed and it can be.
    pub fn writable(&self) -> Result<Open> {
        self.recover()?;
        self.current()
    }

    /// Runs one write, marking the store unwritable when it fails.
    pub fn write<T>(&self, write: impl FnOnce(&Open) -> fjall::Result<T>) -> Result<T> {
        let open = self.writable()?;
        write(&open).map_err(|e| self.failed(e))
    }

    pub fn batch(&self) -> Result<Batch> {
        let open = self.writable()?;
        Ok(Batch {
            inner: open.db.batch(),
            ks: open.ks,
        })
    }

    pub fn commit(&self, batch: Batch) -> Result<()> {
        batch.inner.commit().map_err(|e| self.failed(e))
    }

    /// Classifies a failed write: out of space, or another failure. Either way fjall will refuse
    /// further writes, so the store is marked for a reopen.
    pub fn failed(&self, error: fjall::Error) -> StoreError {
        let free = disk::free_bytes(&self.0.path);
        let full = disk::is_no_space(&error)
            || (matches!(error, fjall::Error::Poisoned)
                && free.is_some_and(|f| f < disk::LOW_SPACE));
        let mut health = lock(&self.0.health);
        if full {
            if *health != Health::Full {
                tracing::error!(store = %self.0.path.display(), free, error = %error, "the disk is full: writes stop until there is room");
            }
            *health = Health::Full;
            return StoreError::Full {
                message: disk::full_message(&self.0.path),
            };
        }
        if matches!(*health, Health::Closed(_)) {
            return StoreError::Fjall(error);
        }
        if *health == Health::Full && matches!(error, fjall::Error::Poisoned) {
            // Still the same full disk; it is reopened once there is room.
            return StoreError::Full {
                message: disk::full_message(&self.0.path),
            };
        }
        tracing::error!(store = %self.0.path.display(), error = %error, "a write failed; the store is reopened before the next one");
        *health = Health::Failed(error.to_string());
        StoreError::Fjall(error)
    }

    /// Makes the store writable again when an earlier write failed: reopens the database once
    /// the disk has room (or at once after another failure). Returns the error a write would meet
    /// when it cannot.
    pub fn recover(&self) -> Result<()> {
        match self.health() {
            Health::Ok => Ok(()),
            Health::Closed(_) => Err(self.closed_error()),
            Health::Full => {
                if disk::free_bytes(&self.0.path).is_some_and(|f| f < disk::LOW_SPACE) {
                    return Err(StoreError::Full {
                        message: disk::full_message(&self.0.path),
                    });
                }
                self.reopen()
            }
            Health::Failed(_) => self.reopen(),
        }
    }

    fn reopen(&self) -> Result<()> {
        let mut slot = crate::util::write_lock(&self.0.open);
        if self.health() == Health::Ok {
            // Another write reopened it while this one waited.
            return Ok(());
        }
        // The old database lets go of its lock once its last handle (a read still in flight on
        // another thread) is dropped; fjall retries for a moment, and so do we.
        drop(slot.take());
        let started = std::time::Instant::now();
        let reason = loop {
            match open_db(&self.0.path) {
                Ok(open) => {
                    *slot = Some(open);
                    *lock(&self.0.health) = Health::Ok;
                    tracing::info!(store = %self.0.path.display(), "store reopened: writing again");
                    return Ok(());
                }
                Err(fjall::Error::Locked) if started.elapsed() < REOPEN_WAIT => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) if disk::is_no_space(&e) && started.elapsed() < REOPEN_WAIT => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => break e.to_string(),
            }
        };
        tracing::error!(store = %self.0.path.display(), error = %reason, "cannot reopen the store; the daemon stops so that a fresh one can start");
        *lock(&self.0.health) = Health::Closed(reason);
        Err(self.closed_error())
    }
}

/// The error for a store that does not open, naming the folder and the likely fix.
fn opening_error(path: &Path, error: fjall::Error) -> StoreError {
    if disk::is_no_space(&error) {
        return StoreError::Full {
            message: disk::full_message(path),
        };
    }
    StoreError::Fjall(error)
}

/// Records per write batch while filling a new store.
const FILL_BATCH: usize = 1000;

/// Fills a new store (a restore, a rebuild) in batches, and makes it durable at the end.
pub(super) struct Filler {
    open: Open,
    batch: OwnedWriteBatch,
    in_batch: usize,
}

impl Filler {
    pub fn new(folder: &Path) -> fjall::Result<Filler> {
        std::fs::create_dir_all(folder)?;
        let open = open_db(folder)?;
        let batch = open.db.batch();
        Ok(Filler {
            open,
            batch,
            in_batch: 0,
        })
    }

    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> fjall::Result<()> {
        self.batch.insert(&self.open.ks, key, value);
        self.in_batch += 1;
        if self.in_batch == FILL_BATCH {
            let full = std::mem::replace(&mut self.batch, self.open.db.batch());
            full.commit()?;
            self.in_batch = 0;
        }
        Ok(())
    }

    pub fn finish(self) -> fjall::Result<()> {
        self.batch.commit()?;
        self.open.db.persist(fjall::PersistMode::SyncAll)
    }
}
