//! `totem run "prompt"`: one prompt, headless. The answer streams to stdout (or every event as one
//! JSON line with `--json`); the exit code says how the run ended.

use std::io::{IsTerminal, Read, Write};

use anyhow::Context;
use totem_client::{ClientError, EventStream, Received};
use totem_protocol::{
    Attachment, ErrorCode, EventKind, PermissionQuestion, PermissionReply, PermissionReplyParams,
    PromptAccepted, QuestionKind, RunStatus, Session, SessionPromptParams, SessionRef, method,
};

use crate::cli::{RunArgs, reasoning_level};
use crate::daemon::{self, Connection, Endpoint};
use crate::exit::{Exit, Unreachable, UsageError};
use crate::format::one_line;
use crate::project::HomeFolder;
use totem_protocol::display::{displayable, displayable_line};

use crate::render::{Chunk, LiveArea, Options, Renderer, Style, TextMode, ended_how};

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
    let params = SessionPromptParams {
        session_id: session.id.clone(),
        text: prompt.to_string(),
        mode: args.mode.clone(),
        model: args.model.clone(),
        reasoning: args.reasoning.as_deref().and_then(reasoning_level),
        allow: args.allow.clone(),
        attachments: attachments(&args.files)?,
    };
    let extras: Vec<&str> = [
        ("--model", params.model.is_some()),
        ("--mode", params.mode.is_some()),
        ("--reasoning", params.reasoning.is_some()),
        ("--allow", !params.allow.is_empty()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect();
    match connection
        .client
        .call::<method::SessionPrompt>(params)
        .await
    {
        Ok(accepted) => Ok(accepted),
        Err(ClientError::Rpc { code, message, .. }) if code == ErrorCode::INVALID_PARAMS.0 => {
            // Only an unknown field is an older daemon's; any other refusal (an attachment that
            // is a secret file, a bad mode) is said as the daemon said it.
            let unknown: Vec<&str> = extras
                .iter()
                .copied()
                .filter(|flag| {
                    message.contains(&format!("unknown field `{}`", flag.trim_start_matches('-')))
                })
                .collect();
            Err(UsageError(if unknown.is_empty() {
                message
            } else {
                format!(
                    "this totemd does not support {} yet ({message}). Run again without {}",
                    unknown.join(", "),
                    if unknown.len() == 1 { "it" } else { "them" }
                )
            })
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
/// when stdout is a pipe, so scripts read the answer alone. On a colour terminal the unfinished
/// line being streamed is drawn live under what is written, replaced at every delta, so a slow
/// model's words show as they come.
struct Terminal {
    asides_to_stderr: bool,
    /// Unfinished lines are drawn live (a colour terminal).
    live_lines: bool,
    at_line_start: bool,
    /// The live line (empty: none), and the rows it takes on screen now (0: not drawn).
    live: String,
    live_rows: usize,
}

impl Terminal {
    fn new(asides_to_stderr: bool, live_lines: bool) -> Terminal {
        Terminal {
            asides_to_stderr,
            live_lines,
            at_line_start: true,
            live: String::new(),
            live_rows: 0,
        }
    }

    fn write(&mut self, chunk: Chunk) {
        if let Chunk::Aside(text) = &chunk
            && self.asides_to_stderr
        {
            let _ = std::io::stderr().write_all(text.as_bytes());
            return;
        }
        let mut out = self.erase_live();
        match chunk {
            Chunk::Live(line) => self.live = line,
            Chunk::Answer(text) => {
                out.push_str(&text);
                if !text.is_empty() {
                    self.at_line_start = text.ends_with('\n');
                }
            }
            Chunk::Aside(text) => {
                if !self.at_line_start {
                    out.push('\n');
                }
                out.push_str(&text);
                self.at_line_start = true;
            }
        }
        if !self.live.is_empty() && self.at_line_start {
            out.push_str(&self.live);
            self.live_rows = crate::render::rows(&self.live, LiveArea::of_terminal().cols);
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }

    /// Takes the live line off the screen: back to its first row, cleared to the end.
    fn erase_live(&mut self) -> String {
        match std::mem::take(&mut self.live_rows) {
            0 => String::new(),
            1 => "\r\x1b[J".to_string(),
            n => format!("\r\x1b[{}A\x1b[J", n - 1),
        }
    }

    fn finish(&mut self) {
        self.live.clear();
        let erase = self.erase_live();
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(erase.as_bytes());
        if !self.at_line_start {
            let _ = stdout.write_all(b"\n");
            self.at_line_start = true;
        }
        let _ = stdout.flush();
    }
}

/// Answers one permission question of this run: asks on the terminal when there is one (and the
/// prompt did not come from stdin), else refuses with a note telling how to allow it. An answer
/// given meanwhile in another terminal wins; ours is then refused by the daemon and ignored.
async fn answer_question(
    connection: &Connection,
    session: &Session,
    question: &PermissionQuestion,
    may_ask: bool,
) {
    let explanation = match question.explanation.as_str() {
        "" => "a tool needs permission".into(),
        text => displayable(text),
    };
    let deny = |note: &str| PermissionReply::Deny {
        note: Some(note.to_string()),
    };
    let reply = if may_ask && std::io::stdin().is_terminal() {
        let prompt = format!(
            "\n{explanation}\nAllow? [o]nce, for this [s]ession, for this [p]roject, [d]eny: "
        );
        let line = crate::project::ask_line(prompt).await;
        match line.trim().chars().next() {
            Some('o' | 'O' | 'y' | 'Y') => PermissionReply::Once,
            Some('s' | 'S') => PermissionReply::AlwaysSession,
            Some('p' | 'P') => PermissionReply::AlwaysProject,
            _ => deny("the user refused"),
        }
    } else if question.kind == QuestionKind::McpServer {
        // Not a denial of anything the model did: the run goes on without that server.
        eprintln!(
            "totem: MCP server `{}` not started (no terminal to ask on); allow it with {}",
            displayable_line(&question.target),
            allow_flags(question)
        );
        deny("not started: this headless run cannot ask the user")
    } else {
        eprintln!(
            "totem: refused ({explanation}): no terminal to ask on. Allow it with {}",
            allow_flags(question)
        );
        deny("refused: this headless run cannot ask the user, and no --allow rule covers it")
    };
    let _ = connection
        .client
        .call::<method::PermissionReply>(PermissionReplyParams {
            session_id: session.id.clone(),
            question_id: question.id.clone(),
            reply,
        })
        .await;
}

/// The `--allow` flags that would have answered a question: from what an "always" answer would
/// remember (rule key → pattern), else from the tool and its target.
fn allow_flags(question: &PermissionQuestion) -> String {
    let mut flags = Vec::new();
    if let Some(always) = question.always.as_object() {
        for (key, patterns) in always {
            for pattern in patterns.as_object().into_iter().flat_map(|p| p.keys()) {
                flags.push(format!("--allow '{key}({pattern})'"));
            }
        }
    }
    if flags.is_empty() {
        flags.push(format!("--allow '{}({})'", question.tool, question.target));
    }
    displayable_line(&flags.join(" ")).into_owned()
}

/// A permission question of the run about a call the model made was answered with a refusal (a
/// server left unstarted is not one: the exit code says whether the model was refused something).
fn is_denial(kind: &EventKind, server_starts: &[String]) -> bool {
    matches!(
        kind,
        EventKind::PermissionResolved {
            question_id,
            reply: Some(PermissionReply::Deny { .. }),
            ..
        } if !server_starts.contains(question_id)
    )
}

/// The question an event asks or resolves.
fn question_id(kind: &EventKind) -> Option<&str> {
    match kind {
        EventKind::PermissionAsked { question } => Some(&question.id),
        EventKind::PermissionResolved { question_id, .. } => Some(question_id),
        _ => None,
    }
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
        thinking_command: false,
    });
    let mut out = Terminal::new(!tty, tty && style.color && !args.json);
    let mut last_seq = session.last_seq;
    let mut denied = false;
    let mut server_starts = Vec::new();
    let can_ask = args.prompt != "-" && std::io::stdin().is_terminal();
    let mut stop = Stop::new()?;
    let mut aborting = false;
    loop {
        let next = tokio::select! {
            next = stream.next_received() => next,
            signal = stop.next() => {
                if aborting {
                    eprintln!("totem: {signal} again: leaving without waiting for the run to end");
                    return Ok(Exit::Failed);
                }
                // The run stops with this client; its end still comes as events, rendered below.
                aborting = true;
                out.finish();
                eprintln!("totem: {signal}: stopping the run (use --detach to leave runs going)");
                if let Err(e) = abort(connection, session).await {
                    eprintln!("totem: could not stop the run: {e}");
                    return Ok(Exit::Failed);
                }
                continue;
            }
        };
        let Some(received) = next else {
            out.finish();
            return Err(Unreachable(format!(
                "totemd closed the connection during the run. The run may go on: follow it with `{}`",
                endpoint.reattach_command(&session.id)
            ))
            .into());
        };
        // A kind newer than this build is shown (or passed on with --json) and steers nothing.
        let Some(event) = &received.event else {
            let json = &received.json;
            last_seq = last_seq.max(json["seq"].as_u64().unwrap_or(0));
            if json["runId"]
                .as_str()
                .is_none_or(|id| id == accepted.run_id)
            {
                show(&received, &mut renderer, &mut out, args.json)?;
            }
            continue;
        };
        let kind = &event.kind;
        if let EventKind::Lagged {} = kind {
            *stream = connection.client.subscribe(&session.id, last_seq).await?;
            continue;
        }
        last_seq = last_seq.max(event.seq);
        // Another run's question is still shown (someone may answer it elsewhere), not answered.
        if kind.run_id().is_some_and(|id| id != accepted.run_id)
            && !matches!(kind, EventKind::PermissionAsked { .. })
        {
            continue;
        }
        if let EventKind::PermissionAsked { question } = kind
            && question.kind == QuestionKind::McpServer
        {
            server_starts.push(question.id.clone());
        }
        denied |= is_denial(kind, &server_starts);
        if let EventKind::PermissionAsked { question } = kind
            && !aborting
            && question.run_id == accepted.run_id
        {
            let answered = answer_question(connection, session, question, args.prompt != "-");
            tokio::select! {
                () = answered => {}
                signal = stop.next() => {
                    aborting = true;
                    eprintln!("\ntotem: {signal}: stopping the run");
                    let _ = abort(connection, session).await;
                }
            }
        }
        // Without a terminal to ask on, a server left unstarted is the one line printed above.
        let quiet_server_start =
            !can_ask && question_id(kind).is_some_and(|id| server_starts.iter().any(|s| s == id));
        if args.json || !quiet_server_start {
            show(&received, &mut renderer, &mut out, args.json)?;
        }
        let exit = if let Some(run) = kind.ended_run() {
            out.finish();
            match run.status {
                RunStatus::Done => {}
                RunStatus::Aborted => eprintln!("totem: run aborted"),
                status => eprintln!(
                    "totem: run {}: {}",
                    ended_how(status),
                    displayable(run.error.as_deref().unwrap_or("no reason given"))
                ),
            }
            // The run ended, but without something it asked for: say so in the exit code.
            match (run.status, denied) {
                (_, true) => Exit::PermissionDenied,
                (RunStatus::Done, false) => Exit::Success,
                _ => Exit::Failed,
            }
        } else if let EventKind::SessionDeleted {} = kind {
            out.finish();
            eprintln!("totem: the session was deleted during the run");
            Exit::Failed
        } else {
            continue;
        };
        out.finish();
        return Ok(exit);
    }
}

/// Passes an event on: as the JSON the daemon sent with `--json`, else drawn.
fn show(
    received: &Received,
    renderer: &mut Renderer,
    out: &mut Terminal,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(&received.json)?);
    } else {
        if out.live_lines {
            renderer.set_live(Some(LiveArea::of_terminal()));
        }
        for chunk in renderer.event(received) {
            out.write(chunk);
        }
    }
    Ok(())
}

/// Stops the session's run (`session.abort`).
async fn abort(connection: &Connection, session: &Session) -> Result<(), ClientError> {
    connection
        .client
        .call::<method::SessionAbort>(SessionRef {
            session_id: session.id.clone(),
        })
        .await
        .map(drop)
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

    fn resolved(question_id: &str, reply: Option<PermissionReply>) -> EventKind {
        EventKind::PermissionResolved {
            question_id: question_id.to_string(),
            reply,
            reason: None,
        }
    }

    #[test]
    fn a_denied_permission_is_recognised() {
        let none: &[String] = &[];
        let deny = || Some(PermissionReply::Deny { note: None });
        assert!(is_denial(&resolved("q_1", deny()), none));
        assert!(!is_denial(
            &resolved("q_1", Some(PermissionReply::Once)),
            none
        ));
        assert!(!is_denial(&resolved("q_1", None), none));
        // A server left unstarted is not a refusal of anything the model did.
        assert!(!is_denial(&resolved("q_2", deny()), &["q_2".to_string()]));
    }
}
