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
fn permission_replies_have_a_stable_wire_form() {
    let cases = [
        (totem_protocol::PermissionReply::Once, r#"{"type":"once"}"#),
        (
            totem_protocol::PermissionReply::AlwaysSession,
            r#"{"type":"alwaysSession"}"#,
        ),
        (
            totem_protocol::PermissionReply::AlwaysProject,
            r#"{"type":"alwaysProject"}"#,
        ),
        (
            totem_protocol::PermissionReply::Deny {
                note: Some("no".into()),
            },
            r#"{"type":"deny","note":"no"}"#,
        ),
        (
            totem_protocol::PermissionReply::Deny { note: None },
            r#"{"type":"deny"}"#,
        ),
    ];
    for (reply, json) in cases {
        assert_eq!(serde_json::to_string(&reply).unwrap(), json);
        assert_eq!(
            serde_json::from_str::<totem_protocol::PermissionReply>(json).unwrap(),
            reply
        );
    }
    assert!(
        serde_json::from_str::<totem_protocol::PermissionReply>(r#"{"type":"once","x":1}"#)
            .is_err()
    );
    assert!(
        serde_json::from_str::<totem_protocol::PermissionReply>(r#"{"type":"once","note":"n"}"#)
            .is_err()
    );
    assert!(
        serde_json::from_str::<totem_protocol::PermissionReply>(r#"{"type":"maybe"}"#).is_err()
    );
}

#[test]
fn provider_info_is_the_stored_entry_beside_has_key() {
    let json = r#"{"name":"lms","kind":"openai","url":"http://127.0.0.1:1234/v1","defaultModel":"qwen","maxRetries":2,"models":{"qwen":{"contextWindow":8192}},"hasKey":false}"#;
    let info: totem_protocol::ProviderInfo = serde_json::from_str(json).unwrap();
    assert_eq!(info.settings.name, "lms");
    assert_eq!(info.settings.max_retries, Some(2));
    assert_eq!(info.settings.models["qwen"].context_window, Some(8192));
    assert!(!info.has_key);
    let back: serde_json::Value = serde_json::to_value(&info).unwrap();
    assert_eq!(
        back,
        serde_json::from_str::<serde_json::Value>(json).unwrap()
    );
}

/// Which variant an event is. The match has no wildcard: a new kind of event does not compile
/// until it is added here, and then the test fails until it is in the list below.
fn variant(kind: &totem_protocol::EventKind) -> usize {
    use totem_protocol::EventKind as E;
    match kind {
        E::MessageCreated { .. } => 0,
        E::RunStarted { .. } => 1,
        E::PartStarted { .. } => 2,
        E::PartDelta { .. } => 3,
        E::PartDone { .. } => 4,
        E::Notice { .. } => 5,
        E::DocsFound { .. } => 6,
        E::SessionUpdated { .. } => 7,
        E::RunDone { .. } => 8,
        E::RunFailed { .. } => 9,
        E::RunAborted { .. } => 10,
        E::Usage { .. } => 11,
        E::Todo { .. } => 12,
        E::PermissionAsked { .. } => 13,
        E::PermissionResolved { .. } => 14,
        E::ChangesUndone { .. } => 15,
        E::ChangesRedone { .. } => 16,
        E::RunInterrupted { .. } => 17,
        E::SessionDeleted {} => 18,
        E::Lagged {} => 19,
        E::FilesChanged { .. } => 20,
        E::RunQueued { .. } => 21,
    }
}
const VARIANTS: usize = 22;

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
        prompt_blocked: false,
    };
    let session = Session {
        id: "ses_1".into(),
        project_id: "prj_1".into(),
        title: "t".into(),
        created_at: 1,
        updated_at: 2,
        last_seq: 3,
        status: SessionStatus::Idle,
        message_count: 1,
        parent_id: None,
        usage: None,
    };
    let message = Message {
        id: "msg_1".into(),
        session_id: "ses_1".into(),
        seq: 1,
        role: Role::User,
        run_id: Some("run_1".into()),
        created_at: 1,
        undone: false,
        compacted: false,
        parts: vec![Part::Text { text: "hi".into() }],
    };
    // Each event, and a piece of its JSON: the closed-set fields keep their wire strings.
    let kinds = vec![
        (
            EventKind::RunQueued {
                run: run.clone(),
                message: message.clone(),
            },
            r#""type":"run.queued""#,
        ),
        (EventKind::MessageCreated { message }, r#""role":"user""#),
        (
            EventKind::RunStarted { run: run.clone() },
            r#""type":"run.started""#,
        ),
        (
            EventKind::PartStarted {
                run_id: "run_1".into(),
                message_id: "msg_1".into(),
                index: 0,
                part_type: PartType::ToolResult,
            },
            r#""partType":"toolResult""#,
        ),
        (
            EventKind::PartDelta {
                run_id: "run_1".into(),
                message_id: "msg_1".into(),
                index: 0,
                text: "hi".into(),
            },
            r#""text":"hi""#,
        ),
        (
            EventKind::PartDone {
                run_id: "run_1".into(),
                message_id: "msg_1".into(),
                index: 0,
                part: Part::Text { text: "hi".into() },
            },
            r#""part":{"type":"text""#,
        ),
        (
            EventKind::Notice {
                run_id: None,
                level: NoticeLevel::Warning,
                text: "x".into(),
            },
            r#""level":"warning""#,
        ),
        (
            EventKind::DocsFound {
                run_id: "run_1".into(),
                server: "docs".into(),
                titles: vec!["Routing".into()],
            },
            r#""titles":["Routing"]"#,
        ),
        (EventKind::SessionUpdated { session }, r#""status":"idle""#),
        (
            EventKind::RunDone { run: run.clone() },
            r#""type":"run.done""#,
        ),
        (
            EventKind::RunFailed { run: run.clone() },
            r#""type":"run.failed""#,
        ),
        (
            EventKind::RunAborted { run: run.clone() },
            r#""type":"run.aborted""#,
        ),
        (
            EventKind::Usage {
                run_id: "run_1".into(),
                message_id: "msg_1".into(),
                usage: Usage::default(),
                run: Usage::default(),
                session: Usage::default(),
                context_tokens: Some(100),
                context_window: None,
            },
            r#""contextTokens":100"#,
        ),
        (
            EventKind::Todo {
                run_id: "run_1".into(),
                todos: vec![TodoItem {
                    content: "x".into(),
                    status: TodoStatus::InProgress,
                }],
            },
            r#""status":"in_progress""#,
        ),
        (
            EventKind::PermissionAsked {
                question: PermissionQuestion {
                    id: "perm_1".into(),
                    session_id: "ses_1".into(),
                    run_id: "run_1".into(),
                    call_id: String::new(),
                    tool: "mcp_server".into(),
                    kind: QuestionKind::McpServer,
                    target: "docs".into(),
                    explanation: "ask".into(),
                    always: serde_json::json!({"mcp_server": {"docs": "allow"}}),
                    asked_at: 3,
                    diff: None,
                    truncated: false,
                    subcommand: None,
                },
            },
            r#""kind":"mcpServer""#,
        ),
        (
            EventKind::PermissionAsked {
                question: PermissionQuestion {
                    id: "perm_3".into(),
                    session_id: "ses_1".into(),
                    run_id: "run_1".into(),
                    call_id: "c2".into(),
                    tool: "edit".into(),
                    kind: QuestionKind::Write,
                    target: "a.txt".into(),
                    explanation: "ask".into(),
                    always: serde_json::json!({}),
                    asked_at: 3,
                    diff: Some("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n".into()),
                    truncated: true,
                    subcommand: None,
                },
            },
            r#""truncated":true"#,
        ),
        (
            EventKind::PermissionAsked {
                question: PermissionQuestion {
                    id: "perm_4".into(),
                    session_id: "ses_1".into(),
                    run_id: "run_1".into(),
                    call_id: "c1".into(),
                    tool: "bash".into(),
                    kind: QuestionKind::Execute,
                    target: "ls".into(),
                    explanation: "ask".into(),
                    always: serde_json::json!({"bash": {"ls *": "allow"}}),
                    asked_at: 3,
                    diff: None,
                    truncated: false,
                    subcommand: Some("ls".into()),
                },
            },
            r#""kind":"execute""#,
        ),
        (
            EventKind::FilesChanged {
                run_id: Some("run_1".into()),
                paths: vec!["a.txt".into()],
            },
            r#""type":"files.changed""#,
        ),
        (
            EventKind::MessageCreated {
                message: Message {
                    id: "msg_2".into(),
                    session_id: "ses_1".into(),
                    seq: 1,
                    role: Role::User,
                    run_id: None,
                    created_at: 1,
                    undone: false,
                    compacted: false,
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
            r#""type":"attachment""#,
        ),
        (
            EventKind::PermissionResolved {
                question_id: "perm_2".into(),
                reply: None,
                reason: Some(WithdrawnReason::Interrupted),
            },
            r#""reason":"interrupted""#,
        ),
        (
            EventKind::ChangesUndone {
                run_id: "run_1".into(),
                files: vec!["a.txt".into()],
                message_ids: vec!["msg_1".into()],
            },
            r#""type":"changes.undone""#,
        ),
        (
            EventKind::ChangesRedone {
                run_id: "run_1".into(),
                files: vec!["a.txt".into()],
                message_ids: Vec::new(),
            },
            r#""type":"changes.redone""#,
        ),
        (
            EventKind::RunInterrupted { run },
            r#""type":"run.interrupted""#,
        ),
        (EventKind::SessionDeleted {}, r#""type":"session.deleted""#),
        (EventKind::Lagged {}, r#""type":"lagged""#),
    ];
    let mut seen = [false; VARIANTS];
    for (kind, wire) in kinds {
        seen[variant(&kind)] = true;
        let ev = SessionEvent {
            session_id: "ses_1".into(),
            seq: 7,
            at: 9,
            kind,
        };
        let text = serde_json::to_string(&ev).unwrap();
        assert!(text.contains(wire), "{text} lacks {wire}");
        let back: SessionEvent = serde_json::from_str(&text).unwrap();
        assert_eq!(back, ev, "{text}");
        // `run_id()` names the run the wire names, wherever the kind keeps it.
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let on_wire = ["/runId", "/run/id", "/message/runId", "/question/runId"]
            .iter()
            .find_map(|p| json.pointer(p).and_then(|v| v.as_str()));
        assert_eq!(back.kind.run_id(), on_wire, "{text}");
    }
    let missing: Vec<usize> = (0..VARIANTS).filter(|i| !seen[*i]).collect();
    assert!(
        missing.is_empty(),
        "event variants not round-tripped: {missing:?}"
    );
}

#[test]
fn ended_run_is_the_four_ends_of_a_run() {
    use totem_protocol::*;
    let run = Run {
        id: "run_1".into(),
        session_id: "ses_1".into(),
        status: RunStatus::Done,
        started_at: 1,
        ended_at: None,
        error: None,
        model: None,
        mode: None,
        usage: None,
        prompt_blocked: false,
    };
    for kind in [
        EventKind::RunDone { run: run.clone() },
        EventKind::RunFailed { run: run.clone() },
        EventKind::RunAborted { run: run.clone() },
        EventKind::RunInterrupted { run: run.clone() },
    ] {
        assert_eq!(kind.ended_run().map(|r| r.id.as_str()), Some("run_1"));
    }
    assert!(EventKind::RunStarted { run }.ended_run().is_none());
    assert!(EventKind::Lagged {}.ended_run().is_none());
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
