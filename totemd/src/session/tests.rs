use super::*;

fn delta(text: &str) -> EventKind {
    EventKind::PartDelta {
        run_id: "run_1".into(),
        message_id: "msg_1".into(),
        index: 0,
        text: text.into(),
    }
}

fn notice(text: &str) -> EventKind {
    EventKind::Notice {
        run_id: None,
        level: totem_protocol::NoticeLevel::Info,
        text: text.into(),
    }
}

fn hub() -> (tempfile::TempDir, SessionHub) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    (dir, SessionHub::new(store))
}

#[test]
fn an_idle_unwatched_session_is_let_go_and_numbering_goes_on_without_a_gap() {
    let (_dir, hub) = hub();
    let first = hub.create("prj_1", None).unwrap();
    let second = hub.create("prj_1", None).unwrap();
    let live = hub.get(&first.id).unwrap();
    live.emit(hub.store(), notice("one")).unwrap();
    live.emit(hub.store(), delta("two")).unwrap();
    drop(live);
    assert_eq!(hub.loaded(), 1);

    // Loading another session lets the first go: nobody holds or watches it.
    hub.get(&second.id).unwrap();
    assert_eq!(hub.loaded(), 1, "only the second session stays in memory");

    // Back in memory, it numbers on from where it was, and its stored events replay.
    let live = hub.get(&first.id).unwrap();
    let next = live.emit(hub.store(), notice("three")).unwrap();
    assert_eq!(next.seq, 3, "no sequence number is skipped or reused");
    let replay = live.subscribe(hub.store(), 0).unwrap().replay;
    let seqs: Vec<u64> = replay.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        vec![1, 3],
        "stored events replay; the old delta was never stored"
    );
}

#[test]
fn a_held_or_watched_session_stays_in_memory() {
    let (_dir, hub) = hub();
    let held = hub.create("prj_1", None).unwrap();
    let watched = hub.create("prj_1", None).unwrap();
    let other = hub.create("prj_1", None).unwrap();
    let handle = hub.get(&held.id).unwrap();
    handle.emit(hub.store(), delta("kept")).unwrap();
    let subscription = hub
        .get(&watched.id)
        .unwrap()
        .subscribe(hub.store(), 0)
        .unwrap();
    hub.get(&other.id).unwrap();
    assert_eq!(hub.loaded(), 3);

    // The recent delta is still there for a client that reattaches.
    let replay = handle.subscribe(hub.store(), 0).unwrap().replay;
    assert_eq!(replay.len(), 1);
    drop(subscription);
}
