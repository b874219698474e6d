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
fn the_sweep_lets_go_of_unused_sessions_only() {
    let (_dir, hub) = hub();
    let unused = hub.create("prj_1", None).unwrap();
    let watched = hub.create("prj_1", None).unwrap();
    let subscription = hub
        .get(&watched.id)
        .unwrap()
        .subscribe(hub.store(), 0)
        .unwrap();
    let live = hub.get(&unused.id).unwrap();
    live.emit(hub.store(), notice("one")).unwrap();
    drop(live);
    assert_eq!(hub.loaded(), 2);

    // No other session is loaded: the sweep alone lets the unused one go.
    assert_eq!(hub.release_unused(), 1);
    assert_eq!(hub.loaded(), 1, "the watched session stays");
    drop(subscription);
    assert_eq!(hub.release_unused(), 1);
    assert_eq!(hub.loaded(), 0);

    // Loaded again, it numbers on without a gap.
    let live = hub.get(&unused.id).unwrap();
    assert_eq!(live.emit(hub.store(), notice("two")).unwrap().seq, 2);
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

#[test]
fn after_a_restart_last_seq_is_the_last_event_and_numbering_never_reuses_a_number() {
    let dir = tempfile::tempdir().unwrap();
    let (id, crash_id) = {
        let hub = SessionHub::new(Store::open(dir.path()).unwrap());
        let clean = hub.create("prj_1", None).unwrap();
        let crashed = hub.create("prj_1", None).unwrap();
        for id in [&clean.id, &crashed.id] {
            let live = hub.get(id).unwrap();
            live.emit(hub.store(), notice("one")).unwrap();
            live.emit(hub.store(), delta("two")).unwrap();
            live.emit(hub.store(), notice("three")).unwrap();
        }
        // A clean stop gives the reservation back; a crash (here: a record stored as it was
        // mid-run) keeps it.
        let crashed_record = hub.store().get_session(&crashed.id).unwrap().unwrap();
        hub.give_back_reserved();
        let previous = hub.store().get_session(&crashed.id).unwrap().unwrap();
        hub.store()
            .put_session(&crashed_record, Some(&previous))
            .unwrap();
        hub.store().persist().unwrap();
        (clean.id, crashed.id)
    };
    let hub = SessionHub::new(Store::open(dir.path()).unwrap());

    let clean = hub.get(&id).unwrap();
    assert_eq!(hub.snapshot(&id).unwrap().last_seq, 3);
    assert_eq!(clean.emit(hub.store(), notice("four")).unwrap().seq, 4);

    // After a crash the numbers reserved may have gone out as deltas: the next one is above
    // them, but clients still learn where the history ends.
    let crashed = hub.get(&crash_id).unwrap();
    assert_eq!(hub.snapshot(&crash_id).unwrap().last_seq, 3);
    let next = crashed.emit(hub.store(), notice("four")).unwrap().seq;
    assert!(next > SEQ_RESERVATION, "{next}");
    let replay = crashed.subscribe(hub.store(), 0).unwrap().replay;
    let seqs: Vec<u64> = replay.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 3, next]);
}
