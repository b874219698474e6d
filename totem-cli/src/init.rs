//! `totem init [DIR]`: the command-line twin of `/init`. The daemon's `session.command init` does
//! the work (AGENTS.md from a look at the project; a Total.js 5 scaffold first in an empty
//! folder), run in the folder's latest session — or a new one — so there is one implementation.

use std::path::Path;

use totem_protocol::{CommandResult, Method, SessionCommandParams, method};

use crate::daemon::{self, Endpoint};
use crate::exit::{Exit, UsageError};
use crate::project::HomeFolder;

pub async fn init(endpoint: &Endpoint, dir: Option<&Path>) -> anyhow::Result<Exit> {
    // `totem init new-app` starts a project in a folder that does not exist yet.
    if let Some(dir) = dir
        && !dir.exists()
    {
        std::fs::create_dir_all(dir).map_err(|e| {
            UsageError(format!(
                "cannot create the folder {}: {e}. Pass a folder you can write to",
                dir.display()
            ))
        })?;
    }
    let connection = daemon::connect_or_start_interactive(endpoint).await?;
    if !connection.has(method::SessionCommand::NAME) {
        anyhow::bail!(
            "this totemd cannot run /init (it has no session.command); update it and run `totem daemon stop` so the new one starts"
        );
    }
    let project = crate::project::open(&connection, dir, HomeFolder::Ask).await?;
    let session = match crate::project::latest_session(&connection, &project).await? {
        Some(session) => session,
        None => crate::project::create_session(&connection, &project, None).await?,
    };
    let result: CommandResult = connection
        .client
        .call::<method::SessionCommand>(SessionCommandParams {
            session_id: session.id,
            command: "init".into(),
            args: None,
            mode: None,
        })
        .await
        .map_err(|e| anyhow::anyhow!("/init failed in {}: {e}", project.path))?;
    println!("{}", result.text);
    println!("Next: `totem` in {} attaches to it.", project.path);
    Ok(Exit::Success)
}
