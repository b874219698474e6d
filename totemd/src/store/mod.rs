//! The store: every project, session, message, part, run and stored event, in one fjall database.
//! It is the single source of truth; the daemon's in-memory state is rebuilt from it at start.
//!
//! All tables live in one keyspace, each under a one-byte tag (see `table.rs` for why). Tables
//! and their keys (`\0` separates id components; numbers are big-endian so keys sort):
//! - `meta`: `store_version` → the layout version, for migrations.
//! - `projects`: project id → Project. `project_paths`: canonical path → project id.
//! - `sessions`: session id → SessionRecord.
//! - `sessions_by_project`: project id `\0` recency `\0` session id → "" (recency = MAX - updatedAt,
//!   so a forward scan yields the newest first). `sessions_by_recency`: recency `\0` session id → "".
//! - `messages`: session id `\0` seq → MessageRecord (no parts). `message_ids`: message id → session.
//! - `parts`: message id `\0` index → Part.
//! - `events`: session id `\0` seq → SessionEvent (only the non-transient ones).
//! - `runs`: run id → Run. `runs_by_session`: session id `\0` run id → "".
//! - `run_changes`: run id → the run's file changes (a JSON record owned by the snapshot code).
//! - `queued`: run id → the prompt (a Message) of a run that has not started, written with its
//!   `run.queued` event and removed with the prompt's `message.created` or the run's end.

pub mod acked;
mod backup;
mod compaction;
mod handle;
pub mod journal;
mod keys;
mod permissions;
pub mod repair_notice;
mod table;
mod tables;
mod undo_state;

pub use backup::{Summary as BackupSummary, restore};
pub use compaction::Compaction;
pub use handle::{Batch, Health};
pub use undo_state::{Redo, UndoState};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fjall::PersistMode;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use totem_protocol::{
    EventKind, Message, Part, Project, Role, Run, RunStatus, Session, SessionEvent,
};

use handle::Handle;
use keys::{Cursor, recency, seq_key, session_key};
use table::Table;

/// The `meta` key set once every ended run of the store is known to have its end event.
const RUN_ENDS_CHECKED: &str = "run_ends_checked";

/// The layout version this build writes. Older layouts are migrated in [`Store::open`].
pub const STORE_VERSION: u32 = 1;

/// How long nothing is written before the recent writes fjall holds in memory go to a table file
/// ([`Store::flush_when_quiet`]).
const QUIET_FLUSH: std::time::Duration = std::time::Duration::from_secs(5);

/// The `meta` key written after a quiet flush, so that fjall lets go of the flushed memtable
/// ([`Store::flush_when_quiet`]). Its value is empty.
const QUIET_FLUSH_MARK: &str = "quiet_flush";

/// What went wrong inside the store, with the data it concerned.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed.
    #[error("store: {0}")]
    Fjall(#[from] fjall::Error),
    /// A stored record does not decode.
    #[error("store: a stored record is unreadable ({what}): {source}")]
    Corrupt {
        /// Which kind of record, for the message.
        what: String,
        /// The decoding error.
        source: serde_json::Error,
    },
    /// A record could not be encoded as JSON.
    #[error("store: cannot encode a record: {0}")]
    Encode(serde_json::Error),
    /// A file of the store could not be read or written.
    #[error("store: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "the store at {path} has layout version {found}, newer than this totemd understands ({STORE_VERSION}); upgrade Totem"
    )]
    /// The store was written by a newer totemd.
    TooNew {
        /// The store's folder.
        path: PathBuf,
        /// The layout version found in it.
        found: u32,
    },
    /// A page cursor that this store did not hand out.
    #[error("store: bad cursor; pass back the nextCursor of the previous page")]
    BadCursor,
    /// A write failed because the disk is full; the message names the folder and the free space.
    #[error("{message}")]
    Full {
        /// What failed, the folder and its free space, and what to do.
        message: String,
    },
    #[error(
        "the store at {} cannot be written ({reason}); restart the daemon with `totem daemon restart`",
        path.display()
    )]
    /// The database failed and could not be reopened; writes are refused until a restart.
    Closed {
        /// The store's folder.
        path: PathBuf,
        /// Why it closed.
        reason: String,
    },
}

/// Results of store operations.
pub type Result<T> = std::result::Result<T, StoreError>;

/// A session as stored: the protocol's view plus what only the daemon needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    /// The session as clients see it.
    pub session: Session,
    /// Sequence numbers up to this one may have been handed out (to unstored deltas); after a
    /// restart numbering continues above it so no number is ever reused.
    pub seq_reserved: u64,
}

/// A message header as stored; its parts live in their own keyspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageRecord {
    id: String,
    session_id: String,
    seq: u64,
    role: Role,
    #[serde(default)]
    run_id: Option<String>,
    created_at: u64,
    /// Stored undone: a message imported so, which has no run to redo (see `UndoState::keeps`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    undone: bool,
}

/// The daemon's database. Cheap to clone (handles are reference counted).
#[derive(Clone)]
pub struct Store {
    path: PathBuf,
    handle: Handle,
    meta: Table,
    projects: Table,
    project_paths: Table,
    sessions: Table,
    sessions_by_project: Table,
    sessions_by_recency: Table,
    messages: Table,
    message_ids: Table,
    parts: Table,
    events: Table,
    runs: Table,
    runs_by_session: Table,
    run_changes: Table,
    queued: Table,
    /// Projects and sessions, counted once at open and kept up to date, so `daemon.status` never
    /// scans.
    counts: Arc<Counts>,
    /// The database's sequence number when last looked at, and since when it has not moved:
    /// how long nothing has been written ([`Store::flush_when_quiet`]).
    quiet: Arc<std::sync::Mutex<(u64, std::time::Instant)>>,
    /// What a damaged journal or table file lost, when this open had to repair one.
    repair: Option<Arc<journal::Repair>>,
}

#[derive(Default)]
struct Counts {
    projects: AtomicU64,
    sessions: AtomicU64,
}

/// Seals fjall's memtable and waits (up to 2 s) for its flush worker to write it to a table file;
/// false when there was nothing to seal.
fn rotate_and_wait(open: &handle::Open) -> bool {
    if !open.ks.rotate_memtable().unwrap_or(false) {
        return false;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while open.ks.sealed_memtable_count() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(StoreError::Encode)
}

fn decode<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|source| StoreError::Corrupt {
        what: what.to_string(),
        source,
    })
}

impl Store {
    /// Opens (or creates) the store in `path`, checking and migrating its layout version.
    pub fn open(path: &Path) -> Result<Store> {
        std::fs::create_dir_all(path)?;
        // Before fjall reads the journal: it refuses a damaged one, or cuts it short silently.
        let mut repair = journal::repair(path)?;
        // And before it reads the table files: it refuses a damaged index, and fails every read
        // that reaches a damaged data block.
        tables::repair(path, &mut repair)?;
        let repair = repair.map(Arc::new);
        let handle = Handle::open(path)?;
        let table = |tag: u8| Table::new(&handle, tag);
        // Tags are part of the layout: never renumber one, only add.
        let store = Store {
            path: path.to_path_buf(),
            meta: table(0),
            projects: table(1),
            project_paths: table(2),
            sessions: table(3),
            sessions_by_project: table(4),
            sessions_by_recency: table(5),
            messages: table(6),
            message_ids: table(7),
            parts: table(8),
            events: table(9),
            runs: table(10),
            runs_by_session: table(11),
            run_changes: table(12),
            queued: table(13),
            counts: Arc::default(),
            quiet: Arc::new(std::sync::Mutex::new((u64::MAX, std::time::Instant::now()))),
            handle,
            repair,
        };
        store.migrate()?;
        let projects = store.projects.len()? as u64;
        let sessions = store.sessions.len()? as u64;
        store.counts.projects.store(projects, Ordering::Relaxed);
        store.counts.sessions.store(sessions, Ordering::Relaxed);
        Ok(store)
    }

    /// Brings an older layout up to [`STORE_VERSION`]. Version 1 is the first layout, so the only
    /// step today is stamping a new store; later versions add their steps here, in order.
    fn migrate(&self) -> Result<()> {
        let found = match self.meta.get("store_version")? {
            Some(v) => decode::<u32>("store_version", &v)?,
            None => 0,
        };
        if found > STORE_VERSION {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found,
            });
        }
        if found == 0 {
            // A new store: its runs are written with their ends from the start.
            self.set_run_ends_checked()?;
        }
        if found < STORE_VERSION {
            self.meta.insert("store_version", encode(&STORE_VERSION)?)?;
            self.persist()?;
        }
        Ok(())
    }

    /// The store's folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Forces everything written so far to disk.
    pub fn persist(&self) -> Result<()> {
        self.handle
            .write(|open| open.db.persist(PersistMode::SyncAll))
    }

    /// When nothing has been written for [`QUIET_FLUSH`] (called every second while no run is
    /// active): writes the recent writes fjall holds in memory (its memtable, up to 2 MiB) out to
    /// a table file, and has fjall let go of them; returns whether it did (the caller then gives
    /// the freed memory back to the system).
    ///
    /// Whatever their size (until issue 37 item 3, only past 256 KiB): the memtable is thousands
    /// of small blocks allocated during the runs among their short-lived memory, and each one
    /// kept pins a page that the allocator cannot give back; at the soak's idle end they pinned
    /// 11.6 of the heap's 14.4 MiB (BENCHMARKS.md, "Soak"). A small table file per quiet moment
    /// is cheap next to that, and compaction merges them.
    ///
    /// fjall keeps the version from before a flush, and with it the flushed memtable, until a
    /// rotation after a later write moves its garbage-collection watermark past the flush: so a
    /// one-key write (`QUIET_FLUSH_MARK`) and a second rotation follow the flush. Each waits up
    /// to 2 s for fjall's flush worker. `rotate_memtable` is fjall's experimental (hidden) API,
    /// pinned by Cargo.lock; the store's tests use the same rotation.
    pub fn flush_when_quiet(&self) -> bool {
        self.flush_when_quiet_for(QUIET_FLUSH)
    }

    fn flush_when_quiet_for(&self, quiet_for: std::time::Duration) -> bool {
        let Ok(open) = self.handle.current() else {
            return false;
        };
        let seqno = open.db.seqno();
        {
            let mut quiet = crate::util::lock(&self.quiet);
            if quiet.0 != seqno {
                *quiet = (seqno, std::time::Instant::now());
                return false;
            }
            if quiet.1.elapsed() < quiet_for {
                return false;
            }
        }
        if self.health() != Health::Ok || open.db.write_buffer_size() == 0 {
            return false;
        }
        if !rotate_and_wait(&open) {
            return false;
        }
        if self.meta.insert(QUIET_FLUSH_MARK, b"").is_ok() {
            rotate_and_wait(&open);
        }
        true
    }

    /// What the journal repair at open lost, when there was one.
    pub fn repair(&self) -> Option<&journal::Repair> {
        self.repair.as_deref()
    }

    /// Whether the store can write now.
    pub fn health(&self) -> Health {
        self.handle.health()
    }

    /// Makes the store writable again after a failed write when it can be (the disk has room
    /// again); the error says why not.
    pub fn recover(&self) -> Result<()> {
        self.handle.recover()
    }

    fn batch(&self) -> Result<Batch> {
        self.handle.batch()
    }

    /// Commits a batch (from [`Store::begin`]) as one write, like every single record's write.
    pub(crate) fn commit(&self, batch: Batch) -> Result<()> {
        self.handle.commit(batch)
    }

    /// The layout version written in the store; 0 for a store that has none yet.
    pub fn store_version(&self) -> Result<u32> {
        match self.meta.get("store_version")? {
            Some(v) => decode("store_version", &v),
            None => Ok(0),
        }
    }

    // ---- projects ----

    /// The project opened at the canonical folder `path`, if any.
    pub fn project_by_path(&self, path: &str) -> Result<Option<Project>> {
        match self.project_paths.get(path)? {
            Some(id) => self.get_project(&String::from_utf8_lossy(&id)),
            None => Ok(None),
        }
    }

    /// The project with this id (`prj_…`), if any.
    pub fn get_project(&self, id: &str) -> Result<Option<Project>> {
        match self.projects.get(id)? {
            Some(v) => Ok(Some(decode("project", &v)?)),
            None => Ok(None),
        }
    }

    /// Stores a new project.
    pub fn put_project(&self, project: &Project) -> Result<()> {
        let mut batch = self.batch()?;
        self.projects
            .batch_insert(&mut batch, project.id.as_str(), encode(project)?);
        self.project_paths
            .batch_insert(&mut batch, project.path.as_str(), project.id.as_str());
        self.commit(batch)?;
        self.counts.projects.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Projects in id order (ids grow with time, so oldest first).
    pub fn list_projects(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Project>, Option<String>)> {
        let start = Cursor::decode_opt(cursor)?;
        let mut items = Vec::new();
        let mut last_key = None;
        for entry in self.projects.after(start.as_deref()) {
            let (key, value) = entry?;
            if items.len() == limit {
                return Ok((items, last_key.map(|k: Vec<u8>| Cursor::encode(&k))));
            }
            items.push(decode("project", &value)?);
            last_key = Some(key);
        }
        Ok((items, None))
    }

    /// How many projects the store holds.
    pub fn count_projects(&self) -> u64 {
        self.counts.projects.load(Ordering::Relaxed)
    }

    // ---- sessions ----

    /// The session with this id (`ses_…`), if any.
    pub fn get_session(&self, id: &str) -> Result<Option<SessionRecord>> {
        match self.sessions.get(id)? {
            Some(v) => Ok(Some(decode("session", &v)?)),
            None => Ok(None),
        }
    }

    /// Writes a session and moves its recency index entries, atomically. `previous` is the record
    /// as stored before (None for a new session).
    pub fn put_session(
        &self,
        record: &SessionRecord,
        previous: Option<&SessionRecord>,
    ) -> Result<()> {
        let mut batch = self.batch()?;
        self.batch_session(&mut batch, record, previous)?;
        self.commit(batch)?;
        if previous.is_none() {
            self.counts.sessions.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Adds a session's record and its moved index entries to `batch` (an existing session: a new
    /// one is stored with [`Store::put_session`], which counts it).
    pub(crate) fn batch_session(
        &self,
        batch: &mut Batch,
        record: &SessionRecord,
        previous: Option<&SessionRecord>,
    ) -> Result<()> {
        let s = &record.session;
        if let Some(old) = previous {
            let o = &old.session;
            self.sessions_by_project
                .batch_remove(batch, session_key(&o.project_id, o.updated_at, &o.id));
            self.sessions_by_recency
                .batch_remove(batch, recency_key(o.updated_at, &o.id));
        }
        self.sessions
            .batch_insert(batch, s.id.as_str(), encode(record)?);
        self.sessions_by_project.batch_insert(
            batch,
            session_key(&s.project_id, s.updated_at, &s.id),
            "",
        );
        self.sessions_by_recency
            .batch_insert(batch, recency_key(s.updated_at, &s.id), "");
        Ok(())
    }

    /// Sessions, newest activity first, optionally of one project.
    pub fn list_sessions(
        &self,
        project_id: Option<&str>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<SessionRecord>, Option<String>)> {
        self.list_sessions_where(project_id, cursor, limit, |_| Ok(true))
    }

    /// [`Store::list_sessions`], keeping only the sessions `keep` accepts; the cursor is that of
    /// the last session looked at, so a page can hold fewer than `limit` only at the end.
    pub fn list_sessions_where(
        &self,
        project_id: Option<&str>,
        cursor: Option<&str>,
        limit: usize,
        mut keep: impl FnMut(&SessionRecord) -> Result<bool>,
    ) -> Result<(Vec<SessionRecord>, Option<String>)> {
        let (keyspace, prefix) = match project_id {
            Some(p) => (&self.sessions_by_project, keys::id_prefix(p)),
            None => (&self.sessions_by_recency, Vec::new()),
        };
        let after = Cursor::decode_opt(cursor)?;
        if let Some(after) = &after
            && !after.starts_with(&prefix)
        {
            return Err(StoreError::BadCursor);
        }
        let iter = match &after {
            Some(after) => keyspace.after(Some(after)),
            None => keyspace.prefix(&prefix),
        };
        let mut items = Vec::new();
        let mut last_key: Option<Vec<u8>> = None;
        for entry in iter {
            let (key, _) = entry?;
            if !key.starts_with(&prefix) {
                break;
            }
            if items.len() == limit {
                return Ok((items, last_key.map(|k| Cursor::encode(&k))));
            }
            let id = keys::last_component(&key);
            if let Some(record) = self.get_session(&id)?
                && keep(&record)?
            {
                items.push(record);
            }
            last_key = Some(key);
        }
        Ok((items, None))
    }

    /// Whether a session's title, or the text of one of its messages, contains `needle`, which
    /// must be lower case already (`session.list {search}`).
    pub fn session_mentions(&self, record: &SessionRecord, needle: &str) -> Result<bool> {
        if record.session.title.to_lowercase().contains(needle) {
            return Ok(true);
        }
        let mut after = 0;
        loop {
            let (page, more) = self.messages_after(&record.session.id, after, 500)?;
            for message in &page {
                let found = message.parts.iter().any(|part| match part {
                    Part::Text { text } => text.to_lowercase().contains(needle),
                    Part::Attachment { path, .. } => path.to_lowercase().contains(needle),
                    _ => false,
                });
                if found {
                    return Ok(true);
                }
            }
            match page.last() {
                Some(last) if more => after = last.seq,
                _ => return Ok(false),
            }
        }
    }

    /// How many sessions the store holds.
    pub fn count_sessions(&self) -> u64 {
        self.counts.sessions.load(Ordering::Relaxed)
    }

    /// Removes a session with its messages, parts, events, runs and index entries.
    pub fn delete_session(&self, record: &SessionRecord) -> Result<()> {
        let s = &record.session;
        let prefix = keys::id_prefix(&s.id);
        let mut batch = self.batch()?;
        for entry in self.messages.prefix(&prefix) {
            let (key, value) = entry?;
            let message: MessageRecord = decode("message", &value)?;
            for part in self.parts.prefix(&keys::id_prefix(&message.id)) {
                self.parts.batch_remove(&mut batch, part?.0);
            }
            self.message_ids
                .batch_remove(&mut batch, message.id.as_str());
            self.messages.batch_remove(&mut batch, key);
        }
        for entry in self.events.prefix(&prefix) {
            self.events.batch_remove(&mut batch, entry?.0);
        }
        for entry in self.runs_by_session.prefix(&prefix) {
            let (key, _) = entry?;
            let run_id = keys::last_component(&key);
            self.runs.batch_remove(&mut batch, run_id.as_str());
            self.run_changes.batch_remove(&mut batch, run_id.as_str());
            self.queued.batch_remove(&mut batch, run_id.as_str());
            self.runs_by_session.batch_remove(&mut batch, key);
        }
        self.sessions_by_project
            .batch_remove(&mut batch, session_key(&s.project_id, s.updated_at, &s.id));
        self.sessions_by_recency
            .batch_remove(&mut batch, recency_key(s.updated_at, &s.id));
        self.sessions.batch_remove(&mut batch, s.id.as_str());
        self.meta.batch_remove(&mut batch, undo_state::key(&s.id));
        self.meta.batch_remove(&mut batch, compaction::key(&s.id));
        self.meta
            .batch_remove(&mut batch, permissions::session_key(&s.id));
        self.commit(batch)?;
        self.counts.sessions.fetch_sub(1, Ordering::Relaxed);
        Ok(())
    }

    // ---- messages and parts ----
    //
    // Messages and parts are written only with the event that announces them (see
    // [`Store::append_event`]), so the message tables and the replay never disagree.

    /// Adds a message and all its parts to `batch`.
    fn batch_message(&self, batch: &mut Batch, message: &Message) -> Result<()> {
        let record = MessageRecord {
            id: message.id.clone(),
            session_id: message.session_id.clone(),
            seq: message.seq,
            role: message.role,
            run_id: message.run_id.clone(),
            created_at: message.created_at,
            undone: message.undone && message.run_id.is_none(),
        };
        self.messages.batch_insert(
            batch,
            seq_key(&message.session_id, message.seq),
            encode(&record)?,
        );
        self.message_ids
            .batch_insert(batch, message.id.as_str(), message.session_id.as_str());
        for (index, part) in message.parts.iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            self.parts
                .batch_insert(batch, keys::part_key(&message.id, index), encode(part)?);
        }
        Ok(())
    }

    /// Messages of a session created after `after_seq`, oldest first, with their parts; the second
    /// value is true when more follow.
    pub fn messages_after(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<(Vec<Message>, bool)> {
        let start = seq_key(session_id, after_seq.saturating_add(1));
        let end = seq_key(session_id, u64::MAX);
        let mut out = Vec::new();
        for entry in self.messages.range(&start, &end) {
            let (_, value) = entry?;
            if out.len() == limit {
                return Ok((out, true));
            }
            out.push(self.message(&value)?);
        }
        Ok((out, false))
    }

    /// The newest `limit` messages of a session created after `after_seq`, oldest first.
    pub fn newest_messages(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<Message>> {
        let start = seq_key(session_id, after_seq.saturating_add(1));
        let end = seq_key(session_id, u64::MAX);
        let mut out = Vec::new();
        for entry in self.messages.range(&start, &end).rev().take(limit) {
            out.push(self.message(&entry?.1)?);
        }
        out.reverse();
        Ok(out)
    }

    /// A stored message record with its parts.
    fn message(&self, value: &[u8]) -> Result<Message> {
        let record: MessageRecord = decode("message", value)?;
        let mut parts = Vec::new();
        for part in self.parts.prefix(&keys::id_prefix(&record.id)) {
            parts.push(decode("part", &part?.1)?);
        }
        Ok(Message {
            id: record.id,
            session_id: record.session_id,
            seq: record.seq,
            role: record.role,
            run_id: record.run_id,
            created_at: record.created_at,
            undone: record.undone,
            compacted: false,
            parts,
        })
    }

    // ---- events ----

    /// Stores an event. An event that announces something now stored — the message of
    /// `message.created`, the finished part of `part.done` — writes it in the same batch, so a
    /// crash keeps both or neither and `session.messages` never disagrees with the replay.
    pub fn append_event(&self, event: &SessionEvent) -> Result<()> {
        let mut batch = self.batch()?;
        self.batch_event(&mut batch, event)?;
        self.commit(batch)?;
        Ok(())
    }

    /// A write batch, for several records that must be stored together (and cost one write).
    pub(crate) fn begin(&self) -> Result<Batch> {
        self.batch()
    }

    /// Commits a batch from [`Store::begin`] and makes it durable (one fsync).
    pub(crate) fn commit_durably(&self, batch: Batch) -> Result<()> {
        self.commit(batch)?;
        self.persist()
    }

    /// Adds an event, and what it announces, to `batch` (see [`Store::append_event`]).
    pub(crate) fn batch_event(&self, batch: &mut Batch, event: &SessionEvent) -> Result<()> {
        match &event.kind {
            EventKind::RunQueued { run, message } => {
                // The prompt is stored when it is acknowledged, apart from the conversation.
                self.batch_run(batch, run)?;
                self.queued
                    .batch_insert(batch, run.id.as_str(), encode(message)?);
            }
            EventKind::MessageCreated { message } => {
                self.batch_message(batch, message)?;
                if let Some(run_id) = &message.run_id {
                    self.queued.batch_remove(batch, run_id.as_str());
                }
            }
            EventKind::PartDone {
                message_id,
                index,
                part,
                ..
            } => self
                .parts
                .batch_insert(batch, keys::part_key(message_id, *index), encode(part)?),
            kind => {
                // A run's end and its stored status are one write: a crash keeps both or
                // neither, so a run whose status says it ended always has its end event, and one
                // still `running` is found and marked interrupted at the next start.
                if let Some(run) = kind.ended_run() {
                    self.batch_run(batch, run)?;
                    self.queued.batch_remove(batch, run.id.as_str());
                }
            }
        }
        self.events
            .batch_insert(batch, seq_key(&event.session_id, event.seq), encode(event)?);
        Ok(())
    }

    /// Stored events of a session after `after_seq`, in order.
    pub fn events_after(&self, session_id: &str, after_seq: u64) -> Result<Vec<SessionEvent>> {
        let start = seq_key(session_id, after_seq.saturating_add(1));
        let end = seq_key(session_id, u64::MAX);
        let mut out = Vec::new();
        for entry in self.events.range(&start, &end) {
            out.push(decode("event", &entry?.1)?);
        }
        Ok(out)
    }

    /// The highest stored event number of a session (0 when none).
    pub fn last_event_seq(&self, session_id: &str) -> Result<u64> {
        match self.events.prefix(&keys::id_prefix(session_id)).next_back() {
            Some(entry) => Ok(keys::trailing_u64(&entry?.0)),
            None => Ok(0),
        }
    }

    // ---- runs ----

    /// Stores a new run (queued, `running`) and indexes it under its session. A run's end is
    /// stored with its end event instead ([`Store::append_event`]).
    pub fn put_run(&self, run: &Run) -> Result<()> {
        let mut batch = self.batch()?;
        self.batch_run(&mut batch, run)?;
        self.commit(batch)?;
        Ok(())
    }

    /// Adds a run to `batch` (see [`Store::put_run`]).
    pub(crate) fn batch_put_run(&self, batch: &mut Batch, run: &Run) -> Result<()> {
        self.batch_run(batch, run)
    }

    fn batch_run(&self, batch: &mut Batch, run: &Run) -> Result<()> {
        self.runs.batch_insert(batch, run.id.as_str(), encode(run)?);
        self.runs_by_session
            .batch_insert(batch, keys::pair_key(&run.session_id, &run.id), "");
        Ok(())
    }

    /// The run with this id (`run_…`), if any.
    pub fn get_run(&self, id: &str) -> Result<Option<Run>> {
        match self.runs.get(id)? {
            Some(v) => Ok(Some(decode("run", &v)?)),
            None => Ok(None),
        }
    }

    /// Stores what a run changed on disk (an opaque JSON record of the snapshot code).
    pub fn put_run_changes(&self, run_id: &str, record: &[u8]) -> Result<()> {
        self.run_changes.insert(run_id, record)?;
        Ok(())
    }

    /// What a run changed on disk, as stored by `put_run_changes`; absent when none was stored.
    pub fn get_run_changes(&self, run_id: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.run_changes.get(run_id)?.map(|v| v.to_vec()))
    }

    /// Runs of a session, oldest first (run ids grow with time).
    pub fn session_runs(&self, session_id: &str) -> Result<Vec<Run>> {
        let mut out = Vec::new();
        for entry in self.runs_by_session.prefix(&keys::id_prefix(session_id)) {
            let (key, _) = entry?;
            if let Some(run) = self.get_run(&keys::last_component(&key))? {
                out.push(run);
            }
        }
        Ok(out)
    }

    /// The prompt of a run that was queued and has not started (nor ended).
    pub fn queued_prompt(&self, run_id: &str) -> Result<Option<Message>> {
        match self.queued.get(run_id)? {
            Some(v) => Ok(Some(decode("queued prompt", &v)?)),
            None => Ok(None),
        }
    }

    /// Whether the runs of this store were checked for an end event (see
    /// [`Store::runs_without_end`]); stores written before a run's end and status were one write
    /// were not.
    pub fn run_ends_checked(&self) -> Result<bool> {
        Ok(self.meta.get(RUN_ENDS_CHECKED)?.is_some())
    }

    /// Records that every ended run of the store has its end event.
    pub fn set_run_ends_checked(&self) -> Result<()> {
        self.meta.insert(RUN_ENDS_CHECKED, "1")?;
        Ok(())
    }

    /// Makes the store look as one an older daemon wrote (tests of the repair).
    #[cfg(test)]
    pub(crate) fn forget_run_ends_checked(&self) -> Result<()> {
        let mut batch = self.batch()?;
        self.meta.batch_remove(&mut batch, RUN_ENDS_CHECKED);
        self.commit(batch)
    }

    /// Runs whose stored status says they ended but whose session holds no end event for them:
    /// an older daemon stored the status and the end event in two writes, and a crash between
    /// them left the run so. Reads every run and every stored run event once.
    pub fn runs_without_end(&self) -> Result<Vec<Run>> {
        let mut ended: BTreeMap<String, Vec<Run>> = BTreeMap::new();
        for entry in self.runs.after(None) {
            let run: Run = decode("run", &entry?.1)?;
            if run.status != RunStatus::Running {
                ended.entry(run.session_id.clone()).or_default().push(run);
            }
        }
        let mut out = Vec::new();
        for (session_id, runs) in ended {
            let mut seen = std::collections::HashSet::new();
            for entry in self.events.prefix(&keys::id_prefix(&session_id)) {
                let (_, value) = entry?;
                // Only a run's events can end one; the rest are not decoded.
                if memchr::memmem::find(&value, b"\"type\":\"run.").is_none() {
                    continue;
                }
                let event: SessionEvent = decode("event", &value)?;
                if let Some(run) = event.kind.ended_run() {
                    seen.insert(run.id.clone());
                }
            }
            out.extend(runs.into_iter().filter(|r| !seen.contains(&r.id)));
        }
        Ok(out)
    }

    /// Runs still marked running: after a crash these were interrupted.
    pub fn running_runs(&self) -> Result<Vec<Run>> {
        let mut out = Vec::new();
        for entry in self.runs.after(None) {
            let run: Run = decode("run", &entry?.1)?;
            if run.status == RunStatus::Running {
                out.push(run);
            }
        }
        Ok(out)
    }
}

fn recency_key(updated_at: u64, session_id: &str) -> Vec<u8> {
    let mut key = recency(updated_at).to_vec();
    key.push(0);
    key.extend_from_slice(session_id.as_bytes());
    key
}

#[cfg(test)]
mod tests;
