//! `totem run "prompt"`: one prompt, headless. The answer streams to stdout (or every event as one
//! JSON line with `--json`); the exit code says how the run ended.

use std::io::{IsTerminal, Read, Write};

use anyhow::Context;
use serde_json::{Value, json};
use totem_client::{ClientError, EventStream};
use totem_protocol::Method;
use totem_protocol::{Attachment, ErrorCode, PromptAccepted, Session, method};

use crate::cli::RunArgs;
use crate::daemon::{self, Connection, Endpoint};
use crate::exit::{Exit, Unreachable, UsageError};
use crate::format::one_line;
use crate::project::HomeFolder;
use crate::render::{Chunk, Options, Renderer, Style, TextMode};

pub async fn run(endpoint: &Endpoint, args: &RunArgs) -> anyhow::Result<Exit> {
    let prompt = read_prompt(&args.prompt)?;
    // This client answers its run's permission questions: on the terminal when it has one,
    // else with a refusal that says how to allow (`--allow`).
    let connection = daemon::connect_or_start_interactive(endpoint).await?;
    let session = pick_session(&connection, args, &prompt).await?;
    let mut stream = connection
        .client
        .subscribe(&session.id, session.last_seq)
        .await?;
    let accepted = send_prompt(&connection, args, &session, &prompt).await?;
    if args.detach {
        println!(
            "Run {} started in session {}; it goes on in totemd. Follow it with `{}`.",
            accepted.run_id,
            session.id,
            endpoint.reattach_command(&session.id)
        );
        return Ok(Exit::Success);
    }
    follow(
        &connection,
        endpoint,
        args,
        &session,
        &accepted,
        &mut stream,
    )
    .await
}

fn read_prompt(arg: &str) -> anyhow::Result<String> {
    let prompt = match arg {
        "-" => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the prompt from standard input")?;
            text.trim_end().to_string()
        }
        text => text.to_string(),
    };
    if prompt.trim().is_empty() {
        return Err(UsageError(
            "the prompt is empty. Pass it as an argument, or `-` to read it from standard input"
                .into(),
        )
        .into());
    }
    Ok(prompt)
}

async fn pick_session(
    connection: &Connection,
    args: &RunArgs,
    prompt: &str,
) -> anyhow::Result<Session> {
    if let Some(id) = &args.session {
        return crate::project::get_session(connection, id).await;
    }
    let project = crate::project::open(connection, args.dir.as_deref(), HomeFolder::Refuse).await?;
    if args.continue_latest {
        return crate::project::latest_session(connection, &project)
            .await?
            .ok_or_else(|| {
                UsageError(format!(
                    "no session to continue in {}. Drop --continue to start one",
                    project.path
                ))
                .into()
            });
    }
    let title = args.title.clone().unwrap_or_else(|| one_line(prompt, 60));
    crate::project::create_session(connection, &project, Some(title)).await
}

/// Sends the prompt with the run options the user gave. They go to the daemon as they are; a
/// daemon that does not know them yet refuses the params, and the user hears which option.
async fn send_prompt(
    connection: &Connection,
    args: &RunArgs,
    session: &Session,
    prompt: &str,
) -> anyhow::Result<PromptAccepted> {
    let mut params = json!({"sessionId": session.id, "text": prompt});
    let mut extras = Vec::new();
    if let Some(model) = &args.model {
        params["model"] = json!(model);
        extras.push("--model");
    }
    if let Some(mode) = &args.mode {
        params["mode"] = json!(mode);
        extras.push("--mode");
    }
    if let Some(reasoning) = &args.reasoning {
        params["reasoning"] = json!(reasoning);
        extras.push("--reasoning");
    }
    if !args.allow.is_empty() {
        params["allow"] = json!(args.allow);
        extras.push("--allow");
    }
    if !args.files.is_empty() {
        params["attachments"] = json!(attachments(&args.files)?);
    }
    match connection
        .client
        .call_raw(method::SessionPrompt::NAME, params)
        .await
    {
        Ok(value) => Ok(serde_json::from_value(value)?),
        Err(ClientError::Rpc { code, message, .. })
            if code == ErrorCode::INVALID_PARAMS.0 && !extras.is_empty() =>
        {
            Err(UsageError(format!(
                "this totemd does not support {} yet ({message}). Run again without {}",
                extras.join(", "),
                if extras.len() == 1 { "it" } else { "them" }
            ))
            .into())
        }
        Err(e) => Err(anyhow::Error::from(e).context(format!(
            "totemd did not take the prompt for session {}",
            session.id
        ))),
    }
}

/// `--file` paths as attachments: absolute, so that they mean what they meant in the user's
/// folder; totemd checks that each is inside the project and not a secret, as for `@path`.
fn attachments(files: &[std::path::PathBuf]) -> anyhow::Result<Vec<Attachment>> {
    files
        .iter()
        .map(|file| {
            let path = std::fs::canonicalize(file)
                .map_err(|e| UsageError(format!("cannot attach {}: {e}", file.display())))?;
            if !path.is_file() {
                return Err(UsageError(format!(
                    "cannot attach {}: it is not a file",
                    file.display()
                ))
                .into());
            }
            Ok(Attachment {
                path: path.to_string_lossy().into_owned(),
                range: None,
                text: None,
            })
        })
        .collect()
}

/// Where the rendered output goes: the answer to stdout; the rest too on a terminal, to stderr
/// when stdout is a pipe, so scripts read the answer alone.
struct Terminal {
    asides_to_stderr: bool,
    at_line_start: bool,
}

impl Terminal {
    fn write(&mut self, chunk: Chunk) {
        let mut stdout = std::io::stdout().lock();
        match chunk {
            Chunk::Answer(text) => {
                let _ = stdout.write_all(text.as_bytes());
                let _ = stdout.flush();
                if !text.is_empty() {
                    self.at_line_start = text.ends_with('\n');
                }
            }
            Chunk::Aside(text) if self.asides_to_stderr => {
                let _ = std::io::stderr().write_all(text.as_bytes());
            }
            Chunk::Aside(text) => {
                if !self.at_line_start {
                    let _ = stdout.write_all(b"\n");
                }
                let _ = stdout.write_all(text.as_bytes());
                let _ = stdout.flush();
                self.at_line_start = true;
            }
        }
    }

    fn finish(&mut self) {
        if !self.at_line_start {
            println!();
            self.at_line_start = true;
        }
    }
}

/// The run an event belongs to, when it belongs to one.
pub fn event_run_id(event: &Value) -> Option<&str> {
    event
        .get("runId")
        .or_else(|| event.pointer("/run/id"))
        .or_else(|| event.pointer("/message/runId"))
        .and_then(Value::as_str)
}

/// Answers one permission question of this run: asks on the terminal when there is one (and the
/// prompt did not come from stdin), else refuses with a note telling how to allow it. An answer
/// given meanwhile in another terminal wins; ours is then refused by the daemon and ignored.
async fn answer_question(
    connection: &Connection,
    session: &Session,
    question: &Value,
    may_ask: bool,
) {
    let Some(question_id) = question.get("id").and_then(Value::as_str) else {
        return;
    };
    let explanation = question
        .get("explanation")
        .and_then(Value::as_str)
        .unwrap_or("a tool needs permission");
    let reply = if may_ask && std::io::stdin().is_terminal() {
        let prompt = format!(
            "\n{explanation}\nAllow? [o]nce, for this [s]ession, for this [p]roject, [d]eny: "
        );
        let line = crate::project::ask_line(prompt).await;
        match line.trim().chars().next() {
            Some('o' | 'O' | 'y' | 'Y') => json!({"type": "once"}),
            Some('s' | 'S') => json!({"type": "alwaysSession"}),
            Some('p' | 'P') => json!({"type": "alwaysProject"}),
            _ => json!({"type": "deny", "note": "the user refused"}),
        }
    } else if is_server_start(question) {
        // Not a denial of anything the model did: the run goes on without that server.
        let name = question
            .get("target")
            .and_then(Value::as_str)
            .unwrap_or("?");
        eprintln!(
            "totem: MCP server `{name}` not started (no terminal to ask on); allow it with {}",
            allow_flags(question)
        );
        json!({"type": "deny", "note": "not started: this headless run cannot ask the user"})
    } else {
        eprintln!(
            "totem: refused ({explanation}): no terminal to ask on. Allow it with {}",
            allow_flags(question)
        );
        json!({"type": "deny", "note": "refused: this headless run cannot ask the user, and no --allow rule covers it"})
    };
    let _ = connection
        .client
        .call_raw(
            "permission.reply",
            json!({"sessionId": session.id, "questionId": question_id, "reply": reply}),
        )
        .await;
}

/// The `--allow` flags that would have answered a question: from what an "always" answer would
/// remember (rule key → pattern), else from the tool and its target.
fn allow_flags(question: &Value) -> String {
    let mut flags = Vec::new();
    if let Some(always) = question.get("always").and_then(Value::as_object) {
        for (key, patterns) in always {
            for pattern in patterns.as_object().into_iter().flat_map(|p| p.keys()) {
                flags.push(format!("--allow '{key}({pattern})'"));
            }
        }
    }
    if flags.is_empty() {
        let tool = question
            .get("tool")
            .and_then(Value::as_str)
            .unwrap_or("tool");
        let target = question
            .get("target")
            .and_then(Value::as_str)
            .unwrap_or("*");
        flags.push(format!("--allow '{tool}({target})'"));
    }
    flags.join(" ")
}

/// A question about starting an MCP server, not about a call the model made.
fn is_server_start(question: &Value) -> bool {
    question.get("kind").and_then(Value::as_str) == Some("mcpServer")
}

/// A permission question of the run about a call the model made was answered with a refusal (a
/// server left unstarted is not one: the exit code says whether the model was refused something).
fn is_denial(event: &Value, server_starts: &[String]) -> bool {
    event.get("type").and_then(Value::as_str) == Some("permission.resolved")
        && event.pointer("/reply/type").and_then(Value::as_str) == Some("deny")
        && !event
            .get("questionId")
            .and_then(Value::as_str)
            .is_some_and(|id| server_starts.iter().any(|s| s == id))
}

async fn follow(
    connection: &Connection,
    endpoint: &Endpoint,
    args: &RunArgs,
    session: &Session,
    accepted: &PromptAccepted,
    stream: &mut EventStream,
) -> anyhow::Result<Exit> {
    let style = Style::for_stdout();
    let tty = std::io::stdout().is_terminal();
    let mut renderer = Renderer::new(Options {
        style,
        text: if style.color {
            TextMode::Markdown
        } else {
            TextMode::Raw
        },
        reasoning: tty,
        user_messages: false,
        run_ends: false,
    });
    let mut out = Terminal {
        asides_to_stderr: !tty,
        at_line_start: true,
    };
    let mut last_seq = session.last_seq;
    let mut denied = false;
    let mut server_starts = Vec::new();
    let can_ask = args.prompt != "-" && std::io::stdin().is_terminal();
    let mut stop = Stop::new()?;
    let mut aborting = false;
    loop {
        let next = tokio::select! {
            next = stream.next_value() => next,
            signal = stop.next() => {
                if aborting {
                    eprintln!("totem: {signal} again: leaving without waiting for the run to end");
                    return Ok(Exit::Failed);
                }
                // The run stops with this client; its end still comes as events, rendered below.
                aborting = true;
                out.finish();
                eprintln!("totem: {signal}: stopping the run (use --detach to leave runs going)");
                if let Err(e) = connection
                    .client
                    .call_raw(method::SessionAbort::NAME, json!({"sessionId": session.id}))
                    .await
                {
                    eprintln!("totem: could not stop the run: {e}");
                    return Ok(Exit::Failed);
                }
                continue;
            }
        };
        let Some(event) = next else {
            out.finish();
            return Err(Unreachable(format!(
                "totemd closed the connection during the run. The run may go on: follow it with `{}`",
                endpoint.reattach_command(&session.id)
            ))
            .into());
        };
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "lagged" {
            *stream = connection.client.subscribe(&session.id, last_seq).await?;
            continue;
        }
        if let Some(seq) = event.get("seq").and_then(Value::as_u64) {
            last_seq = last_seq.max(seq);
        }
        if event_run_id(&event).is_some_and(|id| id != accepted.run_id) {
            continue;
        }
        if kind == "permission.asked"
            && is_server_start(&event["question"])
            && let Some(id) = event.pointer("/question/id").and_then(Value::as_str)
        {
            server_starts.push(id.to_string());
        }
        denied |= is_denial(&event, &server_starts);
        if kind == "permission.asked"
            && !aborting
            && event.pointer("/question/runId").and_then(Value::as_str) == Some(&accepted.run_id)
        {
            let answered =
                answer_question(connection, session, &event["question"], args.prompt != "-");
            tokio::select! {
                () = answered => {}
                signal = stop.next() => {
                    aborting = true;
                    eprintln!("\ntotem: {signal}: stopping the run");
                    let _ = connection
                        .client
                        .call_raw(method::SessionAbort::NAME, json!({"sessionId": session.id}))
                        .await;
                }
            }
        }
        // Without a terminal to ask on, a server left unstarted is the one line printed above.
        let quiet_server_start = !can_ask
            && ["permission.asked", "permission.resolved"].contains(&kind)
            && event
                .pointer("/question/id")
                .or_else(|| event.get("questionId"))
                .and_then(Value::as_str)
                .is_some_and(|id| server_starts.iter().any(|s| s == id));
        if args.json {
            println!("{}", serde_json::to_string(&event)?);
        } else if !quiet_server_start {
            for chunk in renderer.event(&event) {
                out.write(chunk);
            }
        }
        let error = || {
            event
                .pointer("/run/error")
                .and_then(Value::as_str)
                .unwrap_or("no reason given")
                .to_string()
        };
        let ended = match kind {
            // The run ended, but without something it asked for: say so in the exit code.
            "run.done" if denied => Some(Exit::PermissionDenied),
            "run.done" => Some(Exit::Success),
            "run.failed" | "run.interrupted" => {
                out.finish();
                eprintln!("totem: run {}: {}", &kind[4..], error());
                Some(if denied {
                    Exit::PermissionDenied
                } else {
                    Exit::Failed
                })
            }
            "run.aborted" => {
                out.finish();
                eprintln!("totem: run aborted");
                Some(if denied {
                    Exit::PermissionDenied
                } else {
                    Exit::Failed
                })
            }
            "session.deleted" => {
                out.finish();
                eprintln!("totem: the session was deleted during the run");
                Some(Exit::Failed)
            }
            _ => None,
        };
        if let Some(exit) = ended {
            out.finish();
            return Ok(exit);
        }
    }
}

/// Ctrl-C and SIGTERM, which stop a followed run.
struct Stop {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Stop {
    fn new() -> anyhow::Result<Stop> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Stop {
            interrupt: signal(SignalKind::interrupt()).context("cannot watch for Ctrl-C")?,
            terminate: signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?,
        })
    }

    /// Waits for the next signal and names it.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "interrupted",
            _ = self.terminate.recv() => "terminated",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_found_wherever_the_event_keeps_them() {
        assert_eq!(event_run_id(&json!({"runId": "run_1"})), Some("run_1"));
        assert_eq!(
            event_run_id(&json!({"run": {"id": "run_2"}})),
            Some("run_2")
        );
        assert_eq!(
            event_run_id(&json!({"message": {"runId": "run_3"}})),
            Some("run_3")
        );
        assert_eq!(event_run_id(&json!({"type": "notice"})), None);
    }

    #[test]
    fn a_denied_permission_is_recognised() {
        let none: &[String] = &[];
        assert!(is_denial(
            &json!({"type": "permission.resolved", "reply": {"type": "deny"}}),
            none
        ));
        assert!(!is_denial(
            &json!({"type": "permission.resolved", "reply": {"type": "once"}}),
            none
        ));
        assert!(!is_denial(
            &json!({"type": "permission.resolved", "questionId": "q_1"}),
            none
        ));
        // A server left unstarted is not a refusal of anything the model did.
        assert!(!is_denial(
            &json!({"type": "permission.resolved", "questionId": "q_2", "reply": {"type": "deny"}}),
            &["q_2".to_string()]
        ));
    }
}
