//! From a folder on the command line to the daemon's project and session.

use std::path::{Path, PathBuf};

use anyhow::Context;
use totem_client::ClientError;
use totem_protocol::{
    ErrorCode, Project, ProjectOpenParams, Session, SessionCreateParams, SessionListParams,
    SessionRef, method,
};

use crate::daemon::Connection;
use crate::exit::Usage;

/// The absolute, canonical form of `dir` (default: the current folder).
pub fn folder(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current folder")?,
    };
    std::fs::canonicalize(&dir).map_err(|e| {
        Usage(format!(
            "cannot open folder {}: {e}. Pass an existing folder",
            dir.display()
        ))
        .into()
    })
}

/// Registers (or finds) the project of `dir`.
pub async fn open(connection: &Connection, dir: Option<&Path>) -> anyhow::Result<Project> {
    let path = folder(dir)?;
    connection
        .client
        .call::<method::ProjectOpen>(ProjectOpenParams {
            path: path.display().to_string(),
        })
        .await
        .with_context(|| format!("totemd cannot open the project {}", path.display()))
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
            Err(Usage(format!("no session {id}. List them with `totem sessions`")).into())
        }
        Err(e) => Err(e.into()),
    }
}
