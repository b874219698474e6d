//! Permission questions of a run an MCP client started, asked of the person at that client's
//! host through `elicitation/create` when the client declared it can show forms: allow once,
//! always for the session, or deny, with the diff or the command in the message (as Codex's MCP
//! server does). The daemon keeps the first answer from any client: when another one (`totem
//! attach`) answers first, the elicitation is withdrawn with `notifications/cancelled`, and an
//! answer that still comes meets `conflict` and is dropped. When the call that asked ends first
//! (its `timeoutMs` passed, or the host gave up on it), the form is withdrawn too, and an answer
//! the host still sends is passed on while the question waits.

use rmcp::RoleServer;
use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    ServerNotification, ServerRequest,
};
use rmcp::service::{ElicitationMode, Peer, PeerRequestOptions};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use totem_client::{Client, EventStream};
use totem_protocol::display::displayable;
use totem_protocol::{
    ErrorCode, EventKind, PermissionQuestion, PermissionReply, PermissionReplyParams, QuestionKind,
    SessionRef, method,
};

/// Whether the client can show a form to its person (the 2025-11-25 revision's elicitation).
pub fn supported(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// How a question ended for this client.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// The person at the host answered, and the daemon took the answer.
    Answered,
    /// Another client answered first (or the question went away): nothing to do.
    AnsweredElsewhere,
    /// The person dismissed the form, or the client could not show it: the question still waits
    /// for someone (`totem attach`).
    Dismissed,
}

/// A form on the host's screen: its question is put to the person on a task of its own, so that
/// the call that opened it can end (its `timeoutMs` passed, the host gave up on it) while the
/// form's answer still reaches the daemon.
pub struct Form {
    outcome: tokio::sync::oneshot::Receiver<Asked>,
    withdraw: CancellationToken,
}

impl Form {
    /// Puts `question` to the person at the host and passes the answer on to the daemon.
    pub fn open(client: Client, question: PermissionQuestion, peer: Peer<RoleServer>) -> Form {
        let (tx, outcome) = tokio::sync::oneshot::channel();
        let withdraw = CancellationToken::new();
        let withdrawn = withdraw.clone();
        tokio::spawn(async move {
            let asked = ask(&client, &question, &peer, withdrawn).await;
            tracing::debug!(question = %question.id, ?asked, "asked the MCP client's person");
            let _ = tx.send(asked);
        });
        Form { outcome, withdraw }
    }

    /// How the question ended for this client.
    pub async fn answered(&mut self) -> Asked {
        (&mut self.outcome).await.unwrap_or(Asked::Dismissed)
    }

    /// Takes the form back from the host's screen when the guard goes (the call that opened it
    /// ended); an answer the host still sends is passed on all the same.
    pub fn withdraw_on_drop(&self) -> tokio_util::sync::DropGuard {
        self.withdraw.clone().drop_guard()
    }
}

/// Asks the person at the host `question` and passes the answer on to the daemon; once
/// `withdraw` fires, the form is taken back (`notifications/cancelled`), and an answer that comes
/// anyway is passed on while the question still waits.
async fn ask(
    client: &Client,
    question: &PermissionQuestion,
    peer: &Peer<RoleServer>,
    withdraw: CancellationToken,
) -> Asked {
    // Subscribed before looking, so an answer from elsewhere after the look cannot slip past.
    let Some(mut events) = subscribe(client, &question.session_id).await else {
        return Asked::Dismissed;
    };
    let asked = ask_while_waiting(client, question, peer, &mut events, withdraw).await;
    let _ = client.unsubscribe(&events.subscription).await;
    asked
}

async fn ask_while_waiting(
    client: &Client,
    question: &PermissionQuestion,
    peer: &Peer<RoleServer>,
    events: &mut EventStream,
    withdraw: CancellationToken,
) -> Asked {
    let session = SessionRef {
        session_id: question.session_id.clone(),
    };
    match client.call::<method::PermissionList>(session).await {
        Ok(list) if list.questions.iter().any(|q| q.id == question.id) => {}
        Ok(_) => return Asked::AnsweredElsewhere,
        Err(_) => return Asked::Dismissed,
    }
    if withdraw.is_cancelled() {
        return Asked::Dismissed;
    }
    let Some(form) = form(question) else {
        return Asked::Dismissed;
    };
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(form));
    let mut handle = match peer
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
    {
        Ok(handle) => handle,
        Err(e) => {
            tracing::debug!(error = %e, "the MCP client was not asked");
            return Asked::Dismissed;
        }
    };
    let mut following = true;
    let mut withdrawn = false;
    let response = loop {
        tokio::select! {
            response = &mut handle.rx => break response,
            _ = withdraw.cancelled(), if !withdrawn => {
                withdrawn = true;
                take_back(peer, &handle.id).await;
            }
            event = events.next(), if following => match event {
                Some(Ok(event)) => {
                    let settled = match &event.kind {
                        EventKind::PermissionResolved { question_id, .. } => {
                            *question_id == question.id
                        }
                        kind => kind.ended_run().is_some_and(|run| run.id == question.run_id),
                    };
                    if settled {
                        if !withdrawn {
                            let _ = handle.cancel(Some("answered in another client".into())).await;
                        }
                        return Asked::AnsweredElsewhere;
                    }
                }
                Some(Err(_)) => {}
                // The subscription ended: the answer, if any, still goes to the daemon.
                None => following = false,
            },
        }
    };
    let reply = match response {
        Ok(Ok(ClientResult::ElicitResult(result))) => {
            reply(&result.action, result.content.as_ref())
        }
        _ => None,
    };
    let Some(reply) = reply else {
        return Asked::Dismissed;
    };
    if withdrawn {
        tracing::info!(question = %question.id, "an answer came from a form already taken back; passing it on");
    }
    let params = PermissionReplyParams {
        session_id: question.session_id.clone(),
        question_id: question.id.clone(),
        reply,
    };
    match client.call::<method::PermissionReply>(params).await {
        Ok(_) => Asked::Answered,
        // The first answer won; this one came late.
        Err(e) if e.code() == Some(ErrorCode::CONFLICT.0) => Asked::AnsweredElsewhere,
        Err(e) => {
            tracing::warn!(error = %e, "the answer from the MCP client was not taken");
            Asked::Dismissed
        }
    }
}

/// Tells the host to take the form `id` back (`notifications/cancelled`). Sent as the plain
/// notification rather than through rmcp's own cancel, which would also forget the request, so
/// that an answer the host sends anyway (the person clicked as the form went) still arrives.
async fn take_back(peer: &Peer<RoleServer>, id: &rmcp::model::RequestId) {
    let params = json!({
        "requestId": id,
        "reason": "The call that asked ended; the question waits in `totem attach`.",
    });
    let notification =
        rmcp::model::CustomNotification::new("notifications/cancelled", Some(params));
    if let Err(e) = peer
        .send_notification(ServerNotification::CustomNotification(notification))
        .await
    {
        tracing::debug!(error = %e, "the form could not be taken back");
    }
}

/// The session's events from its newest on.
async fn subscribe(client: &Client, session_id: &str) -> Option<EventStream> {
    let session = client
        .call::<method::SessionGet>(SessionRef {
            session_id: session_id.to_string(),
        })
        .await
        .ok()?;
    client.subscribe(session_id, session.last_seq).await.ok()
}

/// The choices, as values of the form's one field.
const ONCE: &str = "once";
const ALWAYS_SESSION: &str = "alwaysSession";
const DENY: &str = "deny";

/// The daemon's reply for what the person did with the form; `None` when they dismissed it.
fn reply(action: &ElicitationAction, content: Option<&Value>) -> Option<PermissionReply> {
    match action {
        ElicitationAction::Accept => {
            match content
                .and_then(|c| c.get("answer"))
                .and_then(Value::as_str)
            {
                Some(ONCE) => Some(PermissionReply::Once),
                Some(ALWAYS_SESSION) => Some(PermissionReply::AlwaysSession),
                Some(DENY) => Some(PermissionReply::Deny { note: None }),
                _ => None,
            }
        }
        ElicitationAction::Decline => Some(PermissionReply::Deny { note: None }),
        _ => None,
    }
}

/// The form: the question in words, with the diff or the command, and one choice to make.
fn form(question: &PermissionQuestion) -> Option<ElicitRequestParams> {
    let schema = json!({
        "type": "object",
        "properties": {
            "answer": {
                "type": "string",
                "title": "Allow?",
                "oneOf": [
                    {"const": ONCE, "title": "Allow once"},
                    {"const": ALWAYS_SESSION, "title": "Always in this session"},
                    {"const": DENY, "title": "Deny"}
                ]
            }
        },
        "required": ["answer"]
    });
    // A fixed schema: the tests check that rmcp takes it.
    let requested_schema: ElicitationSchema = serde_json::from_value(schema).ok()?;
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(question),
        requested_schema,
    })
}

/// The question as a sentence ("Totem wants to change a.txt:"), then the diff or the command;
/// the model's and the project's text in it (paths, the diff, the command are theirs) made
/// displayable: control and bidi characters shown as escapes, so the host shows the command that
/// runs. The rule that asked is not said: the person decides, not the rule.
fn message(question: &PermissionQuestion) -> String {
    let target = displayable(&question.target);
    let mut text = match question.kind {
        QuestionKind::Write if question.diff.is_some() => {
            format!("Totem wants to change {target}:")
        }
        QuestionKind::Write => format!("Totem wants to change {target}."),
        QuestionKind::Execute => "Totem wants to run this command:".to_string(),
        QuestionKind::Read => format!("Totem wants to read {target}."),
        QuestionKind::Mcp => format!("Totem wants to use the MCP tool {target}."),
        QuestionKind::McpServer => displayable(&question.explanation).into_owned(),
    };
    if let Some(diff) = &question.diff {
        text.push_str("\n\n");
        text.push_str(&displayable(diff.trim_end()));
        if question.truncated {
            text.push_str("\n(the diff is cut here; `totem attach` shows it whole)");
        }
    } else if question.kind == QuestionKind::Execute {
        text.push_str(&format!("\n\n$ {target}"));
        if let Some(sub) = question
            .subcommand
            .as_deref()
            .filter(|sub| !sub.is_empty() && *sub != question.target)
        {
            text.push_str(&format!("\n(asks for: {})", displayable(sub)));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(kind: QuestionKind, target: &str, diff: Option<&str>) -> PermissionQuestion {
        PermissionQuestion {
            id: "q1".into(),
            session_id: "ses_1".into(),
            run_id: "run_1".into(),
            call_id: "c1".into(),
            tool: "write".into(),
            kind,
            target: target.into(),
            explanation: format!("change {target}"),
            always: json!({}),
            asked_at: 0,
            diff: diff.map(str::to_string),
            truncated: false,
            subcommand: None,
        }
    }

    #[test]
    fn the_form_offers_three_choices_and_shows_the_change() {
        let q = question(
            QuestionKind::Write,
            "a.txt",
            Some("--- a/a.txt\n+++ b/a.txt\n+hi\n"),
        );
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = form(&q).expect("a form")
        else {
            panic!("a form");
        };
        assert!(
            message.starts_with("Totem wants to change a.txt:\n\n") && message.contains("+hi"),
            "{message}"
        );
        let schema = serde_json::to_value(&requested_schema).expect("encode");
        let choices: Vec<&str> = schema["properties"]["answer"]["oneOf"]
            .as_array()
            .expect("choices")
            .iter()
            .filter_map(|c| c["const"].as_str())
            .collect();
        assert_eq!(choices, [ONCE, ALWAYS_SESSION, DENY]);
        let run = question(QuestionKind::Execute, "rm -rf build", None);
        let ElicitRequestParams::FormElicitationParams { message, .. } =
            form(&run).expect("a form")
        else {
            panic!("a form");
        };
        assert!(message.ends_with("$ rm -rf build"), "{message}");
    }

    #[test]
    fn the_message_shows_hostile_text_as_escapes() {
        let mut run = question(
            QuestionKind::Execute,
            "touch PWN '\r\x1b[2K  asks for: echo hello'",
            None,
        );
        run.subcommand = Some("\u{202e}txt.exe\x1b]0;T\x07".into());
        let write = question(
            QuestionKind::Write,
            "a.txt",
            Some("+ok\r\x1b[2K\x1b]52;c;aGk=\x07\n"),
        );
        for (q, shown) in [
            (&run, "$ touch PWN '\\r\\x1b[2K  asks for: echo hello'"),
            (&run, "(asks for: <U+202E>txt.exe\\x1b]0;T\\x07)"),
            (&write, "+ok\\r\\x1b[2K\\x1b]52;c;aGk=\\x07"),
        ] {
            let ElicitRequestParams::FormElicitationParams { message, .. } =
                form(q).expect("a form")
            else {
                panic!("a form");
            };
            assert!(message.contains(shown), "{message:?}");
            assert!(
                !message.contains(['\x1b', '\r', '\x07', '\u{202e}']),
                "{message:?}"
            );
        }
    }

    #[test]
    fn what_the_person_did_becomes_the_reply() {
        let accept = ElicitationAction::Accept;
        let answer = |a: &str| json!({ "answer": a });
        assert_eq!(
            reply(&accept, Some(&answer(ONCE))),
            Some(PermissionReply::Once)
        );
        assert_eq!(
            reply(&accept, Some(&answer(ALWAYS_SESSION))),
            Some(PermissionReply::AlwaysSession)
        );
        assert_eq!(
            reply(&accept, Some(&answer(DENY))),
            Some(PermissionReply::Deny { note: None })
        );
        // Nothing the client sends can make a project-wide rule.
        assert_eq!(reply(&accept, Some(&answer("alwaysProject"))), None);
        assert_eq!(
            reply(&ElicitationAction::Decline, None),
            Some(PermissionReply::Deny { note: None })
        );
        assert_eq!(reply(&ElicitationAction::Cancel, None), None);
    }
}
