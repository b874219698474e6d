use super::*;
use totem_protocol::{EventKind, Part, SessionStatus};

fn session(id: &str, project: &str, updated_at: u64) -> SessionRecord {
    SessionRecord {
        session: Session {
            id: id.into(),
            project_id: project.into(),
            title: id.into(),
            created_at: 1,
            updated_at,
            last_seq: 0,
            status: SessionStatus::Idle,
            message_count: 0,
            parent_id: None,
            usage: None,
        },
        seq_reserved: 0,
    }
}

#[test]
fn new_store_is_stamped_with_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.store_version().unwrap(), STORE_VERSION);
}

#[test]
fn a_quiet_flush_writes_the_memtable_out_and_fjall_lets_go_of_it() {
    use lsm_tree::AbstractTree as _;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 0..500 {
        store
            .meta
            .insert(format!("k{i:04}"), "x".repeat(200))
            .unwrap();
    }
    let open = store.handle.current().unwrap();
    let held = |open: &handle::Open| open.ks.tree.get_version_history_lock().memtable_size_sum();
    assert!(held(&open) > 100_000, "{}", held(&open));
    // The first look only notes the sequence number: nothing is known to be quiet yet.
    assert!(!store.flush_when_quiet_for(std::time::Duration::ZERO));
    assert!(store.flush_when_quiet_for(std::time::Duration::ZERO));
    assert_eq!(open.ks.sealed_memtable_count(), 0);
    // Not only written out: no version keeps the flushed memtable (the mark's one key remains).
    assert!(held(&open) < 1_000, "{}", held(&open));
    // Nothing written since: nothing more to do.
    assert!(!store.flush_when_quiet_for(std::time::Duration::ZERO));
    assert!(!store.flush_when_quiet_for(std::time::Duration::ZERO));
    assert_eq!(
        store.meta.get("k0499").unwrap().as_deref(),
        Some("x".repeat(200).as_bytes())
    );
}

#[test]
fn newer_store_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        store
            .meta
            .insert("store_version", encode(&99u32).unwrap())
            .unwrap();
        store.persist().unwrap();
    }
    let err = Store::open(dir.path()).err().unwrap();
    assert!(err.to_string().contains("newer"), "{err}");
}

#[test]
fn sessions_list_newest_first_with_cursor_pages() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 0..5u64 {
        store
            .put_session(&session(&format!("s{i}"), "p1", 100 + i), None)
            .unwrap();
    }
    store
        .put_session(&session("other", "p2", 50), None)
        .unwrap();
    let (page1, cursor) = store.list_sessions(Some("p1"), None, 2).unwrap();
    let ids: Vec<_> = page1.iter().map(|r| r.session.id.clone()).collect();
    assert_eq!(ids, ["s4", "s3"]);
    let (page2, cursor) = store
        .list_sessions(Some("p1"), cursor.as_deref(), 2)
        .unwrap();
    let ids: Vec<_> = page2.iter().map(|r| r.session.id.clone()).collect();
    assert_eq!(ids, ["s2", "s1"]);
    let (page3, cursor) = store
        .list_sessions(Some("p1"), cursor.as_deref(), 2)
        .unwrap();
    assert_eq!(page3.len(), 1);
    assert!(cursor.is_none());
    let (all, _) = store.list_sessions(None, None, 100).unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(all.last().unwrap().session.id, "other");
}

#[test]
fn updating_a_session_moves_it_to_the_front() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = session("a", "p", 10);
    store.put_session(&a, None).unwrap();
    store.put_session(&session("b", "p", 20), None).unwrap();
    let mut a2 = a.clone();
    a2.session.updated_at = 30;
    store.put_session(&a2, Some(&a)).unwrap();
    let (all, _) = store.list_sessions(Some("p"), None, 10).unwrap();
    let ids: Vec<_> = all.iter().map(|r| r.session.id.clone()).collect();
    assert_eq!(ids, ["a", "b"], "no stale index entry may remain");
}

#[test]
fn delete_removes_messages_parts_and_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let rec = session("s", "p", 1);
    store.put_session(&rec, None).unwrap();
    let message = Message {
        id: "m1".into(),
        session_id: "s".into(),
        seq: 1,
        role: Role::User,
        run_id: None,
        created_at: 1,
        undone: false,
        compacted: false,
        parts: vec![Part::Text { text: "hi".into() }],
    };
    store
        .append_event(&SessionEvent {
            session_id: "s".into(),
            seq: 1,
            at: 1,
            kind: EventKind::MessageCreated {
                message: message.clone(),
            },
        })
        .unwrap();
    assert_eq!(store.messages_after("s", 0, 10).unwrap().0, vec![message]);
    store
        .put_compaction(
            "s",
            &Compaction {
                upto_seq: 1,
                summary: "x".into(),
                at: 1,
                keep: Vec::new(),
            },
        )
        .unwrap();
    store.delete_session(&rec).unwrap();
    assert!(
        store.compaction("s").unwrap().is_none(),
        "the compaction goes with its session"
    );
    assert!(store.get_session("s").unwrap().is_none());
    assert!(store.messages_after("s", 0, 10).unwrap().0.is_empty());
    assert!(store.events_after("s", 0).unwrap().is_empty());
    assert_eq!(store.parts.len().unwrap(), 0);
    assert_eq!(store.list_sessions(None, None, 10).unwrap().0.len(), 0);
}

#[test]
fn events_after_and_last_seq() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for seq in [1u64, 2, 5, 300] {
        store
            .append_event(&SessionEvent {
                session_id: "s".into(),
                seq,
                at: 0,
                kind: EventKind::Lagged {},
            })
            .unwrap();
    }
    let seqs: Vec<_> = store
        .events_after("s", 2)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [5, 300]);
    assert_eq!(store.last_event_seq("s").unwrap(), 300);
    assert_eq!(store.last_event_seq("t").unwrap(), 0);
}

#[test]
fn an_event_stores_the_message_and_part_it_announces() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.put_session(&session("s", "p", 1), None).unwrap();
    let mut message = Message {
        id: "m1".into(),
        session_id: "s".into(),
        seq: 1,
        role: Role::Assistant,
        run_id: Some("r".into()),
        created_at: 1,
        undone: false,
        compacted: false,
        parts: Vec::new(),
    };
    let event = |seq, kind| SessionEvent {
        session_id: "s".into(),
        seq,
        at: 1,
        kind,
    };
    store
        .append_event(&event(
            1,
            EventKind::MessageCreated {
                message: message.clone(),
            },
        ))
        .unwrap();
    assert_eq!(
        store.messages_after("s", 0, 10).unwrap().0,
        vec![message.clone()]
    );
    let part = Part::Text {
        text: "done".into(),
    };
    store
        .append_event(&event(
            2,
            EventKind::PartDone {
                run_id: "r".into(),
                message_id: "m1".into(),
                index: 0,
                part: part.clone(),
            },
        ))
        .unwrap();
    message.parts.push(part);
    assert_eq!(store.messages_after("s", 0, 10).unwrap().0, vec![message]);
    assert_eq!(store.events_after("s", 0).unwrap().len(), 2);
}
