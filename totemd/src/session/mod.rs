//! Live sessions: event numbering, fan-out to subscribers and replay for clients that reattach.
//!
//! Each session loaded into memory is a [`LiveSession`]. Every event gets the next sequence number
//! under the session's lock, is stored (unless transient) before it is announced, joins a ring of
//! recent events and goes out on a broadcast channel. A subscriber takes its replay and its live
//! receiver under the same lock, so it sees every event exactly once, in order.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use totem_protocol::{
    DaemonEvent, DaemonEventKind, EventKind, PermissionQuestion, Session, SessionActivity,
    SessionEvent, SessionStatus,
};

use crate::store::{SessionRecord, Store, StoreError};
use crate::util::{lock, now_ms};

/// Events kept in memory per session for replay (deltas included).
const RECENT_EVENTS: usize = 4096;
/// Events a subscriber may fall behind the broadcast before it is told it lagged.
const BROADCAST_CAPACITY: usize = 4096;
/// Sequence numbers reserved ahead in the store, so a restart never reuses one.
const SEQ_RESERVATION: u64 = 1024;
/// Daemon events a `daemon.subscribe` subscriber may fall behind before it is told it lagged.
const DAEMON_CAPACITY: usize = 1024;

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No session has this id.
    #[error("no session {0}; list sessions with `session.list`")]
    NotFound(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Results of session operations.
pub type Result<T> = std::result::Result<T, SessionError>;

/// The title of a session not named yet.
pub const UNTITLED: &str = "New session";

/// The sessions currently in memory.
pub struct SessionHub {
    store: Store,
    live: Mutex<HashMap<String, Arc<LiveSession>>>,
    /// The daemon's own stream (`daemon.subscribe`): what happens across sessions.
    daemon_events: broadcast::Sender<Arc<DaemonEvent>>,
    /// Some session holds run ends the store could not write (a full disk).
    unstored: Arc<std::sync::atomic::AtomicBool>,
}

/// One session in memory.
pub struct LiveSession {
    id: String,
    state: Mutex<State>,
    events: broadcast::Sender<Arc<SessionEvent>>,
    daemon_events: broadcast::Sender<Arc<DaemonEvent>>,
    unstored_flag: Arc<std::sync::atomic::AtomicBool>,
}

struct State {
    record: SessionRecord,
    /// Numbers up to this one may have gone out before the daemon stopped without giving its
    /// reservation back (a crash): the next event is numbered above it. `last_seq` stays the
    /// newest event that happened, so clients counting back from it find the session's history.
    numbered_upto: u64,
    recent: VecDeque<Arc<SessionEvent>>,
    deleted: bool,
    /// Permission questions asked and not yet resolved, oldest first.
    asking: Vec<PermissionQuestion>,
    /// What the daemon stream last said the session was doing.
    activity: SessionActivity,
    /// Run ends announced while the store could not write, kept to be stored (same numbers)
    /// once it can; `record` then differs from the store in status too.
    unstored: Vec<Arc<SessionEvent>>,
    /// The newest event this daemon stored for the session (0: none yet), for `store/acked`.
    stored_upto: u64,
}

impl State {
    /// The number of the next event.
    fn next_seq(&self) -> u64 {
        self.record.session.last_seq.max(self.numbered_upto) + 1
    }

    fn activity(&self) -> SessionActivity {
        if !self.asking.is_empty() {
            SessionActivity::Waiting
        } else if self.record.session.status == SessionStatus::Running {
            SessionActivity::Running
        } else {
            SessionActivity::Idle
        }
    }
}

/// Stores `state`'s session without the sequence numbers it reserved ahead; false when it cannot
/// be stored (the reservation stays, which only skips numbers).
fn give_back_reserved(store: &Store, id: &str, state: &mut State) -> bool {
    if state.record.seq_reserved <= state.record.session.last_seq {
        return true;
    }
    let previous = state.record.clone();
    state.record.seq_reserved = state.record.session.last_seq;
    if let Err(e) = store.put_session(&state.record, Some(&previous)) {
        tracing::warn!(error = %e, session = %id, "cannot store a session; it stays in memory");
        state.record = previous;
        return false;
    }
    state.numbered_upto = state.record.session.last_seq;
    true
}

fn daemon_event(kind: DaemonEventKind) -> Arc<DaemonEvent> {
    Arc::new(DaemonEvent { at: now_ms(), kind })
}

/// Events and a session record added to a write batch, to take into memory once it is committed.
pub struct Staged {
    record: SessionRecord,
    events: Vec<Arc<SessionEvent>>,
}

/// What a new subscriber receives: the events it missed, then the live stream.
pub struct Subscription {
    /// Events after the subscriber's cursor, already stored, oldest first.
    pub replay: Vec<Arc<SessionEvent>>,
    /// Events from now on.
    pub live: broadcast::Receiver<Arc<SessionEvent>>,
}

impl SessionHub {
    /// A hub over `store`, with no session loaded yet.
    pub fn new(store: Store) -> SessionHub {
        let (daemon_events, _) = broadcast::channel(DAEMON_CAPACITY);
        SessionHub {
            store,
            live: Mutex::new(HashMap::new()),
            daemon_events,
            unstored: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }

    /// The daemon's stream, and what it would have said so far about sessions that are not idle:
    /// their status and their open questions (a subscriber may see one of these twice).
    pub fn subscribe_daemon(
        &self,
    ) -> (Vec<Arc<DaemonEvent>>, broadcast::Receiver<Arc<DaemonEvent>>) {
        let receiver = self.daemon_events.subscribe();
        let mut current = Vec::new();
        let sessions: Vec<Arc<LiveSession>> = lock(&self.live).values().cloned().collect();
        for session in sessions {
            let state = lock(&session.state);
            if state.deleted || state.activity == SessionActivity::Idle {
                continue;
            }
            current.push(daemon_event(DaemonEventKind::SessionStatus {
                session_id: session.id.clone(),
                project_id: state.record.session.project_id.clone(),
                status: state.activity,
            }));
            for question in &state.asking {
                current.push(daemon_event(DaemonEventKind::PermissionAsked {
                    question: question.clone(),
                }));
            }
        }
        (current, receiver)
    }

    /// The store the sessions are kept in.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Creates and stores a new session (titled [`UNTITLED`] when no title is given: its first
    /// prompt names it).
    pub fn create(&self, project_id: &str, title: Option<String>) -> Result<Session> {
        let now = crate::util::tick_ms();
        let id = crate::util::new_id("ses");
        let session = Session {
            title: title.unwrap_or_else(|| UNTITLED.to_string()),
            id,
            project_id: project_id.to_string(),
            created_at: now,
            updated_at: now,
            last_seq: 0,
            status: SessionStatus::Idle,
            message_count: 0,
            parent_id: None,
            usage: None,
        };
        let record = SessionRecord {
            session: session.clone(),
            seq_reserved: 0,
        };
        self.store.put_session(&record, None)?;
        let _ = self
            .daemon_events
            .send(daemon_event(DaemonEventKind::SessionCreated {
                session: session.clone(),
            }));
        Ok(session)
    }

    /// The session, loaded into memory if it is not yet.
    pub fn get(&self, id: &str) -> Result<Arc<LiveSession>> {
        let mut live = lock(&self.live);
        if let Some(session) = live.get(id) {
            return Ok(session.clone());
        }
        let Some(mut record) = self.store.get_session(id)? else {
            return Err(SessionError::NotFound(id.to_string()));
        };
        Self::release_idle(&self.store, &mut live);
        let stored = self.store.last_event_seq(id)?;
        record.session.last_seq = record.session.last_seq.max(stored);
        let numbered_upto = record.session.last_seq.max(record.seq_reserved);
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        let session = Arc::new(LiveSession {
            id: id.to_string(),
            state: Mutex::new(State {
                record,
                numbered_upto,
                recent: VecDeque::new(),
                deleted: false,
                asking: Vec::new(),
                activity: SessionActivity::Idle,
                unstored: Vec::new(),
                stored_upto: 0,
            }),
            events,
            daemon_events: self.daemon_events.clone(),
            unstored_flag: self.unstored.clone(),
        });
        live.insert(id.to_string(), session.clone());
        Ok(session)
    }

    /// Lets go of the sessions nobody uses: no run or task holds them and no client watches them.
    /// Each costs its broadcast buffer and its recent events; the next use loads it again from
    /// the store. Called under the map lock, so nobody can take a new handle meanwhile. The
    /// sequence numbers reserved ahead are given back first, so the numbering goes on without a
    /// gap.
    fn release_idle(store: &Store, live: &mut HashMap<String, Arc<LiveSession>>) {
        live.retain(|_, session| {
            if Arc::strong_count(session) > 1 || session.events.receiver_count() > 0 {
                return true;
            }
            let mut state = lock(&session.state);
            if state.deleted || state.record.session.status == SessionStatus::Running {
                return true;
            }
            !give_back_reserved(store, &session.id, &mut state)
        });
    }

    /// Before the daemon stops: gives back the sequence numbers every session in memory reserved
    /// ahead, so that after the restart its numbering goes on from its last event.
    pub fn give_back_reserved(&self) {
        let sessions: Vec<Arc<LiveSession>> = lock(&self.live).values().cloned().collect();
        for session in sessions {
            let mut state = lock(&session.state);
            if !state.deleted {
                give_back_reserved(&self.store, &session.id, &mut state);
            }
        }
    }

    /// Sessions in memory (loaded and not yet let go).
    pub fn loaded(&self) -> usize {
        lock(&self.live).len()
    }

    /// A session as clients see it, with its live sequence number.
    pub fn snapshot(&self, id: &str) -> Result<Session> {
        let session = self.get(id)?;
        let state = lock(&session.state);
        Ok(state.record.session.clone())
    }

    /// Sessions of a page, with the live numbers of those in memory.
    pub fn refresh(&self, mut record: SessionRecord) -> Session {
        if let Some(live) = lock(&self.live).get(&record.session.id) {
            record.session = lock(&live.state).record.session.clone();
        }
        record.session
    }

    /// Sets the title of session `id` and tells its subscribers.
    pub fn rename(&self, id: &str, title: String) -> Result<Session> {
        let session = self.get(id)?;
        let updated = session.update(&self.store, |s| s.title = title)?;
        session.emit(
            &self.store,
            EventKind::SessionUpdated {
                session: updated.clone(),
            },
        )?;
        Ok(updated)
    }

    /// Renames a session only while its title is still `expected`, so a title someone gave it
    /// meanwhile wins; None when it was left alone.
    pub fn retitle(&self, id: &str, expected: &str, title: String) -> Result<Option<Session>> {
        let session = self.get(id)?;
        if lock(&session.state).record.session.title != expected {
            return Ok(None);
        }
        let mut renamed = false;
        let updated = session.update(&self.store, |s| {
            if s.title == expected {
                s.title = title;
                renamed = true;
            }
        })?;
        if !renamed {
            return Ok(None);
        }
        session.emit(
            &self.store,
            EventKind::SessionUpdated {
                session: updated.clone(),
            },
        )?;
        Ok(Some(updated))
    }

    /// Deletes a session; its subscribers get `session.deleted` and their streams end.
    pub fn delete(&self, id: &str) -> Result<()> {
        let session = self.get(id)?;
        {
            let mut state = lock(&session.state);
            if state.deleted {
                return Err(SessionError::NotFound(id.to_string()));
            }
            self.store.delete_session(&state.record)?;
            state.deleted = true;
        }
        lock(&self.live).remove(id);
        let event = SessionEvent {
            session_id: id.to_string(),
            seq: lock(&session.state).record.session.last_seq,
            at: now_ms(),
            kind: EventKind::SessionDeleted {},
        };
        let _ = session.events.send(Arc::new(event));
        let _ = self
            .daemon_events
            .send(daemon_event(DaemonEventKind::SessionDeleted {
                session_id: id.to_string(),
            }));
        Ok(())
    }

    /// Stores the run ends that were announced while the store could not write (a full disk),
    /// now that it can. Cheap when there are none.
    pub fn store_unstored(&self) {
        use std::sync::atomic::Ordering;
        if !self.unstored.swap(false, Ordering::AcqRel) {
            return;
        }
        let sessions: Vec<Arc<LiveSession>> = lock(&self.live).values().cloned().collect();
        for session in sessions {
            if let Err(e) = session.store_unstored(&self.store) {
                tracing::warn!(session = %session.id, error = %e, "cannot store the end of a run yet");
                self.unstored.store(true, Ordering::Release);
            }
        }
    }

    /// Lets go of the sessions nobody uses now (see `release_idle`); returns how many.
    pub fn release_unused(&self) -> usize {
        let mut live = lock(&self.live);
        let before = live.len();
        Self::release_idle(&self.store, &mut live);
        before - live.len()
    }

    /// The newest event stored by this daemon of each session in memory that stored any.
    pub fn stored_marks(&self) -> Vec<(String, u64)> {
        let sessions: Vec<Arc<LiveSession>> = lock(&self.live).values().cloned().collect();
        sessions
            .iter()
            .filter_map(|s| {
                let state = lock(&s.state);
                (state.stored_upto > 0 && !state.deleted).then(|| (s.id.clone(), state.stored_upto))
            })
            .collect()
    }

    /// The end of run `run_id` of session `session_id` when it was announced but not stored yet.
    pub fn unstored_end(&self, session_id: &str, run_id: &str) -> Option<totem_protocol::Run> {
        let session = lock(&self.live).get(session_id).cloned()?;
        let state = lock(&session.state);
        state
            .unstored
            .iter()
            .filter_map(|e| e.kind.ended_run())
            .find(|run| run.id == run_id)
            .cloned()
    }

    /// Number of sessions with a run going.
    pub fn running(&self) -> u64 {
        lock(&self.live)
            .values()
            .filter(|s| lock(&s.state).record.session.status == SessionStatus::Running)
            .count() as u64
    }
}

impl LiveSession {
    /// The session's id (`ses_…`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Applies a change to the session's fields, stamps `updatedAt` and stores it.
    pub fn update(&self, store: &Store, change: impl FnOnce(&mut Session)) -> Result<Session> {
        let mut state = lock(&self.state);
        if state.deleted {
            return Err(SessionError::NotFound(self.id.clone()));
        }
        let previous = state.record.clone();
        change(&mut state.record.session);
        state.record.session.updated_at = crate::util::tick_ms().max(previous.session.updated_at);
        if let Err(e) = store.put_session(&state.record, Some(&previous)) {
            // Memory stays what the store holds, so the next write moves the right index keys.
            state.record = previous;
            return Err(e.into());
        }
        self.announce_activity(&mut state);
        Ok(state.record.session.clone())
    }

    /// Tells the daemon's stream about a session event that matters across sessions.
    fn announce(&self, state: &mut State, event: &SessionEvent) {
        let kind = match &event.kind {
            EventKind::SessionUpdated { session } => DaemonEventKind::SessionUpdated {
                session: session.clone(),
            },
            EventKind::PermissionAsked { question } => {
                state.asking.push(question.clone());
                DaemonEventKind::PermissionAsked {
                    question: question.clone(),
                }
            }
            EventKind::PermissionResolved {
                question_id,
                reply,
                reason,
            } => {
                state.asking.retain(|q| &q.id != question_id);
                DaemonEventKind::PermissionResolved {
                    session_id: self.id.clone(),
                    question_id: question_id.clone(),
                    reply: reply.clone(),
                    reason: *reason,
                }
            }
            other => match other.ended_run() {
                Some(run) => DaemonEventKind::RunEnded { run: run.clone() },
                None => return,
            },
        };
        let _ = self.daemon_events.send(daemon_event(kind));
        self.announce_activity(state);
    }

    /// A `session.status` daemon event when what the session does changed.
    fn announce_activity(&self, state: &mut State) {
        let now = state.activity();
        if now == state.activity {
            return;
        }
        state.activity = now;
        let _ = self
            .daemon_events
            .send(daemon_event(DaemonEventKind::SessionStatus {
                session_id: self.id.clone(),
                project_id: state.record.session.project_id.clone(),
                status: now,
            }));
    }

    /// Numbers, stores (unless transient) and announces one event.
    pub fn emit(&self, store: &Store, kind: EventKind) -> Result<Arc<SessionEvent>> {
        self.emit_with(store, |_| Ok(kind))
    }

    /// Like [`LiveSession::emit`], for events that must know their own number (a message's seq).
    /// `make` runs under the session lock; keep it short.
    pub fn emit_with(
        &self,
        store: &Store,
        make: impl FnOnce(u64) -> std::result::Result<EventKind, StoreError>,
    ) -> Result<Arc<SessionEvent>> {
        let mut state = lock(&self.state);
        if state.deleted {
            return Err(SessionError::NotFound(self.id.clone()));
        }
        let seq = state.next_seq();
        let kind = crate::redact::event(make(seq)?);
        let event = Arc::new(SessionEvent {
            session_id: self.id.clone(),
            seq,
            at: now_ms(),
            kind,
        });
        if seq > state.record.seq_reserved {
            let previous = state.record.clone();
            state.record.seq_reserved = seq + SEQ_RESERVATION;
            state.record.session.last_seq = seq;
            if let Err(e) = store.put_session(&state.record, Some(&previous)) {
                state.record = previous;
                return Err(e.into());
            }
        }
        if !event.kind.is_transient() {
            store.append_event(&event)?;
            state.stored_upto = state.stored_upto.max(event.seq);
        }
        self.publish(&mut state, event.clone());
        Ok(event)
    }

    /// Ends a run: stores its end event (`end`, which stores the run's status too) and, when
    /// `idle`, the session's idle status with its `session.updated` just before it, in one write,
    /// then announces both under one hold of the session's lock. So whoever sees the session idle
    /// (`session.get`, the daemon's stream, a `session.updated`) finds the run's end stored
    /// (`run.get`) and numbered before anything it does next, such as a rename.
    ///
    /// When the store cannot write (a full disk), the session is idle in memory and the end is
    /// announced all the same, to be stored with its number once the store writes again; the
    /// error is returned to be logged.
    pub fn end_run(&self, store: &Store, end: EventKind, idle: bool) -> Result<()> {
        let mut state = lock(&self.state);
        if state.deleted {
            return Err(SessionError::NotFound(self.id.clone()));
        }
        let end = crate::redact::event(end);
        let previous = state.record.clone();
        let mut record = previous.clone();
        let mut kinds = Vec::with_capacity(2);
        if idle {
            record.session.status = SessionStatus::Idle;
            record.session.updated_at = crate::util::tick_ms().max(previous.session.updated_at);
            kinds.push(EventKind::SessionUpdated {
                session: record.session.clone(),
            });
        }
        kinds.push(end);
        let first = state.next_seq();
        let events: Vec<Arc<SessionEvent>> = (first..)
            .zip(kinds)
            .map(|(seq, kind)| {
                Arc::new(SessionEvent {
                    session_id: self.id.clone(),
                    seq,
                    at: now_ms(),
                    kind,
                })
            })
            .collect();
        let newest = first + events.len() as u64 - 1;
        record.session.last_seq = newest;
        if newest > record.seq_reserved {
            record.seq_reserved = newest + SEQ_RESERVATION;
        }
        let written = (|| {
            let mut batch = store.begin()?;
            for event in &events {
                store.batch_event(&mut batch, event)?;
            }
            store.batch_session(&mut batch, &record, Some(&previous))?;
            store.commit(batch)
        })();
        match written {
            Ok(()) => {
                state.record = record;
                state.stored_upto = state.stored_upto.max(newest);
                for event in events {
                    self.publish(&mut state, event);
                }
                self.announce_activity(&mut state);
                Ok(())
            }
            Err(e) => {
                if idle {
                    state.record.session.status = SessionStatus::Idle;
                }
                // Only the end is announced: the idle status is stored with it later.
                if let Some(end) = events.into_iter().next_back() {
                    let end = Arc::new(SessionEvent {
                        seq: state.next_seq(),
                        ..(*end).clone()
                    });
                    state.unstored.push(end.clone());
                    self.unstored_flag
                        .store(true, std::sync::atomic::Ordering::Release);
                    self.publish(&mut state, end);
                }
                self.announce_activity(&mut state);
                Err(e.into())
            }
        }
    }

    /// Keeps an event among the recent ones, sends it to the session's followers and tells the
    /// daemon's stream what matters across sessions.
    fn publish(&self, state: &mut State, event: Arc<SessionEvent>) {
        state.record.session.last_seq = event.seq;
        if state.recent.len() == RECENT_EVENTS {
            state.recent.pop_front();
        }
        state.recent.push_back(event.clone());
        // No receivers is fine: nobody is watching.
        let _ = self.events.send(event.clone());
        self.announce(state, &event);
    }

    /// Adds events and a change of the session's fields to `batch` without touching memory, for
    /// start-up repairs that write many sessions in one batch: [`LiveSession::publish_staged`]
    /// follows once the batch is committed. Nothing else may emit on the session in between.
    /// Each of `makes` gets its event's number (a message's seq).
    pub fn stage(
        &self,
        store: &Store,
        batch: &mut crate::store::Batch,
        change: impl FnOnce(&mut Session),
        makes: Vec<Box<dyn FnOnce(u64) -> EventKind + '_>>,
    ) -> Result<Staged> {
        let state = lock(&self.state);
        if state.deleted {
            return Err(SessionError::NotFound(self.id.clone()));
        }
        let mut record = state.record.clone();
        change(&mut record.session);
        record.session.updated_at = crate::util::tick_ms().max(state.record.session.updated_at);
        let mut events = Vec::with_capacity(makes.len());
        for (seq, make) in (state.next_seq()..).zip(makes) {
            let event = Arc::new(SessionEvent {
                session_id: self.id.clone(),
                seq,
                at: now_ms(),
                kind: crate::redact::event(make(seq)),
            });
            if !event.kind.is_transient() {
                store.batch_event(batch, &event)?;
            }
            events.push(event);
        }
        if let Some(last) = events.last() {
            record.session.last_seq = last.seq;
            if last.seq > record.seq_reserved {
                record.seq_reserved = last.seq + SEQ_RESERVATION;
            }
        }
        store.batch_session(batch, &record, Some(&state.record))?;
        Ok(Staged { record, events })
    }

    /// Takes into memory and announces what [`LiveSession::stage`] wrote, once it is stored.
    pub fn publish_staged(&self, staged: Staged) {
        let mut state = lock(&self.state);
        state.record = staged.record;
        if let Some(newest) = staged
            .events
            .iter()
            .filter(|e| !e.kind.is_transient())
            .map(|e| e.seq)
            .max()
        {
            state.stored_upto = state.stored_upto.max(newest);
        }
        for event in staged.events {
            self.publish(&mut state, event);
        }
        self.announce_activity(&mut state);
    }

    /// Stores, in one write and with their own numbers, the events announced while the store
    /// could not write, with the session's record as memory holds it.
    fn store_unstored(&self, store: &Store) -> Result<()> {
        let mut state = lock(&self.state);
        if state.deleted || state.unstored.is_empty() {
            state.unstored.clear();
            return Ok(());
        }
        let mut batch = store.begin()?;
        for event in &state.unstored {
            store.batch_event(&mut batch, event)?;
        }
        let mut record = state.record.clone();
        let newest = state.unstored.iter().map(|e| e.seq).max().unwrap_or(0);
        if newest > record.seq_reserved {
            record.seq_reserved = newest + SEQ_RESERVATION;
        }
        store.batch_session(&mut batch, &record, Some(&state.record))?;
        store.commit_durably(batch)?;
        tracing::info!(session = %self.id, events = state.unstored.len(), "stored the run ends announced while the disk was full");
        state.record = record;
        state.stored_upto = state.stored_upto.max(newest);
        state.unstored.clear();
        Ok(())
    }

    /// Every stored event after `after_seq` (older ones from the store, recent ones from memory,
    /// plus the deltas a client catching up on a streaming part missed) and a receiver for what
    /// follows.
    pub fn subscribe(&self, store: &Store, after_seq: u64) -> Result<Subscription> {
        let state = lock(&self.state);
        if state.deleted {
            return Err(SessionError::NotFound(self.id.clone()));
        }
        let oldest_recent = state.recent.front().map_or(u64::MAX, |e| e.seq);
        let mut replay: Vec<Arc<SessionEvent>> = Vec::new();
        if after_seq + 1 < oldest_recent {
            replay.extend(
                store
                    .events_after(&self.id, after_seq)?
                    .into_iter()
                    .filter(|e| e.seq < oldest_recent)
                    .map(Arc::new),
            );
        }
        replay.extend(state.recent.iter().filter(|e| e.seq > after_seq).cloned());
        // Only stored events are replayed, so a replay from 0 reads the same before and after a
        // restart. Deltas are kept only for a client catching up on a part it was already
        // following (its `part.started` is not in the replay) or on a part still streaming (no
        // `part.done` yet): they are exactly what it missed.
        let mut started = std::collections::HashSet::new();
        let mut finished = std::collections::HashSet::new();
        for event in &replay {
            match &event.kind {
                EventKind::PartStarted {
                    message_id, index, ..
                } => {
                    started.insert((message_id.clone(), *index));
                }
                EventKind::PartDone {
                    message_id, index, ..
                } => {
                    finished.insert((message_id.clone(), *index));
                }
                _ => {}
            }
        }
        replay.retain(|e| match &e.kind {
            EventKind::PartDelta {
                message_id, index, ..
            } => {
                let part = (message_id.clone(), *index);
                !(started.contains(&part) && finished.contains(&part))
            }
            kind => !kind.is_transient(),
        });
        Ok(Subscription {
            replay,
            live: self.events.subscribe(),
        })
    }

    /// The session's status now (idle, busy, …).
    pub fn status(&self) -> SessionStatus {
        lock(&self.state).record.session.status
    }
}

#[cfg(test)]
mod tests;
