//! The checked-in schema must be exactly what the code generates. Regenerate with
//! `UPDATE_SCHEMA=1 cargo test -p totem-protocol --test schema`.

use std::path::PathBuf;

#[test]
fn checked_in_schema_matches_the_code() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema/protocol.json");
    let generated = totem_protocol::schema::protocol_schema_text();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "protocol/schema/protocol.json is out of date with the protocol types; \
         run `UPDATE_SCHEMA=1 cargo test -p totem-protocol --test schema` and commit the result"
    );
}

#[test]
fn every_method_name_is_unique_and_resource_dot_verb() {
    let mut seen = std::collections::HashSet::new();
    for m in totem_protocol::METHODS {
        assert!(seen.insert(m.name), "duplicate method {}", m.name);
        assert!(
            m.name == "initialize" || m.name.split('.').count() == 2,
            "{} is not resource.verb",
            m.name
        );
    }
}

#[test]
fn params_reject_unknown_fields() {
    let err = serde_json::from_str::<totem_protocol::SessionRef>(
        r#"{"sessionId":"ses_1","sesionId":"typo"}"#,
    )
    .unwrap_err();
    assert!(err.to_string().contains("unknown field"), "{err}");
}

#[test]
fn every_event_kind_round_trips() {
    use totem_protocol::*;
    let run = Run {
        id: "run_1".into(),
        session_id: "ses_1".into(),
        status: RunStatus::Done,
        started_at: 1,
        ended_at: Some(2),
        error: None,
        model: Some("ollama/qwen3:8b".into()),
        mode: Some("build".into()),
        usage: Some(Usage {
            input_tokens: 10,
            output_tokens: 2,
            cost_usd: Some(0.5),
            ..Usage::default()
        }),
    };
    let kinds = vec![
        EventKind::RunStarted { run: run.clone() },
        EventKind::PartStarted {
            run_id: "run_1".into(),
            message_id: "msg_1".into(),
            index: 0,
            part_type: "text".into(),
        },
        EventKind::PartDelta {
            run_id: "run_1".into(),
            message_id: "msg_1".into(),
            index: 0,
            text: "hi".into(),
        },
        EventKind::PartDone {
            run_id: "run_1".into(),
            message_id: "msg_1".into(),
            index: 0,
            part: Part::Text { text: "hi".into() },
        },
        EventKind::Notice {
            run_id: None,
            level: "info".into(),
            text: "x".into(),
        },
        EventKind::RunDone { run: run.clone() },
        EventKind::RunFailed { run: run.clone() },
        EventKind::Usage {
            run_id: "run_1".into(),
            message_id: "msg_1".into(),
            usage: Usage::default(),
            run: Usage::default(),
            session: Usage::default(),
            context_tokens: Some(100),
            context_window: None,
        },
        EventKind::Todo {
            run_id: "run_1".into(),
            todos: vec![TodoItem {
                content: "x".into(),
                status: "pending".into(),
            }],
        },
        EventKind::PermissionAsked {
            question: PermissionQuestion {
                id: "perm_1".into(),
                session_id: "ses_1".into(),
                run_id: "run_1".into(),
                call_id: "c1".into(),
                tool: "bash".into(),
                kind: "execute".into(),
                target: "ls".into(),
                explanation: "ask".into(),
                always: serde_json::json!({"bash": {"ls *": "allow"}}),
                asked_at: 3,
                diff: None,
                truncated: false,
                subcommand: Some("ls".into()),
            },
        },
        EventKind::PermissionAsked {
            question: PermissionQuestion {
                id: "perm_3".into(),
                session_id: "ses_1".into(),
                run_id: "run_1".into(),
                call_id: "c2".into(),
                tool: "edit".into(),
                kind: "write".into(),
                target: "a.txt".into(),
                explanation: "ask".into(),
                always: serde_json::json!({}),
                asked_at: 3,
                diff: Some("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n".into()),
                truncated: true,
                subcommand: None,
            },
        },
        EventKind::FilesChanged {
            run_id: Some("run_1".into()),
            paths: vec!["a.txt".into()],
        },
        EventKind::MessageCreated {
            message: Message {
                id: "msg_2".into(),
                session_id: "ses_1".into(),
                seq: 1,
                role: Role::User,
                run_id: None,
                created_at: 1,
                parts: vec![
                    Part::Text { text: "see".into() },
                    Part::Attachment {
                        path: "a.js".into(),
                        range: Some(LineRange {
                            start_line: 2,
                            end_line: 4,
                        }),
                        text: "x\n".into(),
                        unsaved: true,
                    },
                ],
            },
        },
        EventKind::PermissionResolved {
            question_id: "perm_1".into(),
            reply: Some(PermissionReply::Deny {
                note: Some("no".into()),
            }),
            reason: None,
        },
        EventKind::PermissionResolved {
            question_id: "perm_2".into(),
            reply: None,
            reason: Some("interrupted".into()),
        },
        EventKind::ChangesUndone {
            run_id: "run_1".into(),
            files: vec!["a.txt".into()],
        },
        EventKind::ChangesRedone {
            run_id: "run_1".into(),
            files: vec!["a.txt".into()],
        },
        EventKind::RunAborted { run },
        EventKind::Lagged {},
    ];
    for kind in kinds {
        let ev = SessionEvent {
            session_id: "ses_1".into(),
            seq: 7,
            at: 9,
            kind,
        };
        let text = serde_json::to_string(&ev).unwrap();
        let back: SessionEvent = serde_json::from_str(&text).unwrap();
        assert_eq!(back, ev, "{text}");
    }
}

#[test]
fn every_daemon_event_kind_round_trips() {
    use totem_protocol::*;
    let kinds = vec![
        DaemonEventKind::SessionDeleted {
            session_id: "ses_1".into(),
        },
        DaemonEventKind::SessionStatus {
            session_id: "ses_1".into(),
            project_id: "prj_1".into(),
            status: SessionActivity::Waiting,
        },
        DaemonEventKind::PermissionResolved {
            session_id: "ses_1".into(),
            question_id: "perm_1".into(),
            reply: Some(PermissionReply::Once),
            reason: None,
        },
        DaemonEventKind::Lagged {},
    ];
    for kind in kinds {
        let ev = DaemonEvent { at: 9, kind };
        let text = serde_json::to_string(&ev).unwrap();
        let back: DaemonEvent = serde_json::from_str(&text).unwrap();
        assert_eq!(back, ev, "{text}");
    }
}

#[test]
fn the_spec_documents_every_method_event_and_error() {
    let spec = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .unwrap();
    for m in totem_protocol::METHODS {
        assert!(
            spec.contains(&format!("`{}`", m.name)),
            "protocol/README.md does not document {}",
            m.name
        );
    }
    for e in totem_protocol::ERROR_CODES {
        assert!(
            spec.contains(&e.code.0.to_string()),
            "protocol/README.md does not list error {}",
            e.code.0
        );
    }
    let schema = totem_protocol::schema::protocol_schema();
    for events in ["SessionEvent", "DaemonEvent"] {
        let kinds = schema["$defs"][events].to_string();
        for cap in kinds.split("\"const\":\"").skip(1) {
            let kind = cap.split('"').next().unwrap();
            assert!(
                spec.contains(&format!("`{kind}`")),
                "protocol/README.md does not document event {kind}"
            );
        }
    }
}
