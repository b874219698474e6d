//! `totem sessions`: a table (or the JSON page) of sessions, newest activity first;
//! `totem sessions rm`: deletes one, after a question.

use std::io::IsTerminal;

use totem_protocol::{SessionListParams, SessionRef, method};

use crate::cli::SessionsArgs;
use crate::daemon::{self, Endpoint};
use crate::exit::Exit;
use crate::format;
use crate::project::HomeFolder;

pub async fn list(endpoint: &Endpoint, args: &SessionsArgs) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start(endpoint).await?;
    let project_id = match &args.project {
        Some(dir) => Some(
            crate::project::open(&connection, Some(dir), HomeFolder::Refuse)
                .await?
                .id,
        ),
        None => None,
    };
    let page = connection
        .client
        .call::<method::SessionList>(SessionListParams {
            project_id,
            cursor: None,
            limit: Some(args.limit),
            search: args.search.clone(),
        })
        .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&page)?);
        return Ok(Exit::Success);
    }
    if page.items.is_empty()
        && let Some(search) = &args.search
    {
        println!("No sessions match \"{search}\".");
        return Ok(Exit::Success);
    }
    if page.items.is_empty() {
        println!("No sessions yet. Start one with `totem` (interactive) or `totem run \"…\"`.");
        return Ok(Exit::Success);
    }
    let id_width = page
        .items
        .iter()
        .map(|s| s.id.len())
        .max()
        .unwrap_or(2)
        .max(2);
    println!(
        "{:<id_width$}  {:<40}  {:<10}  MESSAGES",
        "ID", "TITLE", "UPDATED"
    );
    for s in &page.items {
        let title = if s.title.is_empty() {
            "(untitled)"
        } else {
            &s.title
        };
        println!(
            "{:<id_width$}  {:<40}  {:<10}  {}",
            s.id,
            format::one_line(title, 40),
            format::age(s.updated_at),
            s.message_count
        );
    }
    if page.next_cursor.is_some() {
        println!("(more: raise --limit)");
    }
    Ok(Exit::Success)
}

/// `totem sessions rm SESSION`: asks (unless `yes`), then deletes the session.
pub async fn remove(endpoint: &Endpoint, id: &str, yes: bool) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start(endpoint).await?;
    let session = crate::project::get_session(&connection, id).await?;
    let title = format::one_line(
        if session.title.is_empty() {
            "(untitled)"
        } else {
            &session.title
        },
        60,
    );
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(crate::exit::UsageError(format!(
                "not deleting session {id} without a question: run it in a terminal, or add --yes"
            ))
            .into());
        }
        let question = format!(
            "Delete the session “{title}” ({} messages, {})? Its messages and undo history go; files stay as they are. [y/N] ",
            session.message_count,
            format::age(session.updated_at)
        );
        let line = crate::project::ask_line(question).await;
        if !crate::project::said_yes(&line) {
            println!("Kept the session.");
            return Ok(Exit::Success);
        }
    }
    connection
        .client
        .call::<method::SessionDelete>(SessionRef {
            session_id: session.id.clone(),
        })
        .await?;
    println!("Deleted the session “{title}” ({}).", session.id);
    Ok(Exit::Success)
}
