//! From a folder on the command line to the daemon's project and session.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use totem_client::ClientError;
use totem_protocol::{
    ErrorCode, ListParams, Project, ProjectOpenParams, Session, SessionCreateParams,
    SessionListParams, SessionRef, method,
};

use crate::daemon::Connection;
use crate::exit::UsageError;

/// The absolute, canonical form of `dir` (default: the current folder).
pub fn folder(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current folder")?,
    };
    std::fs::canonicalize(&dir).map_err(|e| {
        UsageError(format!(
            "cannot open folder {}: {e}. Pass an existing folder",
            dir.display()
        ))
        .into()
    })
}

/// What to do when the current folder is the home folder (`/` and folders holding the home are
/// refused unless named with `--project`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomeFolder {
    /// Ask on the terminal whether to open it (the REPL).
    Ask,
    /// Refuse: a headless command needs `--project`.
    Refuse,
}

/// Registers (or finds) the project of `dir` (default: the current folder). A folder given on
/// the command line is taken as named on purpose; the current folder is not, so `/`, a folder
/// holding the home folder and the home folder itself are refused (or, for the home folder,
/// asked about when `home` says so).
pub async fn open(
    connection: &Connection,
    dir: Option<&Path>,
    home: HomeFolder,
) -> anyhow::Result<Project> {
    let path = folder(dir)?;
    let mut by_name = dir.is_some();
    let is_home = std::env::var_os("HOME")
        .and_then(|h| std::fs::canonicalize(h).ok())
        .is_some_and(|h| h == path);
    if !by_name && is_home && home == HomeFolder::Ask && std::io::stdin().is_terminal() {
        by_name = confirm_home(&path).await;
        if !by_name {
            return Err(UsageError(
                "not opened. Start Totem in your project's folder, or pass --project DIR".into(),
            )
            .into());
        }
    }
    let opened = connection
        .client
        .call::<method::ProjectOpen>(ProjectOpenParams {
            path: path.display().to_string(),
            by_name,
        })
        .await;
    match opened {
        Ok(project) => Ok(project),
        // Too broad a folder: the daemon's sentence says what to do.
        Err(ClientError::Rpc { message, .. }) if message.contains("--project") => {
            Err(UsageError(message).into())
        }
        Err(e) => Err(anyhow::Error::from(e))
            .with_context(|| format!("totemd cannot open the project {}", path.display())),
    }
}

/// Asks whether to work in the whole home folder; no by default.
async fn confirm_home(path: &Path) -> bool {
    let prompt = format!(
        "{} is your home folder: the model could read and change anything in it.\nOpen it as a project anyway? [y/N] ",
        path.display()
    );
    said_yes(&ask_line(prompt).await)
}

/// Whether an answer to a `[y/N]` question is yes.
pub fn said_yes(answer: &str) -> bool {
    matches!(answer.trim(), "y" | "Y" | "yes" | "Yes")
}

/// Asks on the terminal (the question on stderr) and returns the line typed, empty if none.
pub async fn ask_line(prompt: String) -> String {
    tokio::task::spawn_blocking(move || {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        line
    })
    .await
    .unwrap_or_default()
}

/// The project a session belongs to.
pub async fn of_session(connection: &Connection, session: &Session) -> anyhow::Result<Project> {
    let mut cursor = None;
    loop {
        let page = connection
            .client
            .call::<method::ProjectList>(ListParams {
                cursor,
                limit: Some(500),
            })
            .await?;
        if let Some(project) = page.items.into_iter().find(|p| p.id == session.project_id) {
            return Ok(project);
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => anyhow::bail!("the project of session {} is gone", session.id),
        }
    }
}

/// The project's session with the newest activity, if any.
pub async fn latest_session(
    connection: &Connection,
    project: &Project,
) -> anyhow::Result<Option<Session>> {
    let page = connection
        .client
        .call::<method::SessionList>(SessionListParams {
            project_id: Some(project.id.clone()),
            cursor: None,
            limit: Some(1),
            search: None,
        })
        .await?;
    Ok(page.items.into_iter().next())
}

pub async fn create_session(
    connection: &Connection,
    project: &Project,
    title: Option<String>,
) -> anyhow::Result<Session> {
    Ok(connection
        .client
        .call::<method::SessionCreate>(SessionCreateParams {
            project_id: project.id.clone(),
            title,
        })
        .await?)
}

/// A session by id, with an error that says how to find the right one.
pub async fn get_session(connection: &Connection, id: &str) -> anyhow::Result<Session> {
    match connection
        .client
        .call::<method::SessionGet>(SessionRef {
            session_id: id.to_string(),
        })
        .await
    {
        Ok(session) => Ok(session),
        Err(ClientError::Rpc { code, .. }) if code == ErrorCode::NOT_FOUND.0 => {
            Err(UsageError(format!("no session {id}. List them with `totem sessions`")).into())
        }
        Err(e) => Err(e.into()),
    }
}
