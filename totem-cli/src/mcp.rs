//! `totem mcp`: Totem as an MCP server on stdin/stdout, for agents that start their MCP servers
//! as commands, and `totem mcp token` for the daemon's HTTP listener. The bridge starts totemd
//! when nothing answers (and again if it stopped), opens the folder it runs in as a project and
//! tells the client so. Only MCP goes to stdout; anything for a person goes to stderr.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};
use totem_mcp::{Connect, Connector, TotemMcp};
use totem_protocol::{Method, NoParams, ProjectOpenParams, method};

use crate::daemon::{self, Endpoint};
use crate::exit::{Exit, Unreachable};

/// `totem mcp [token]`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: Option<McpCommand>,
    /// The project to open for the client (default: the current folder).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Create (or replace) the bearer token of totemd's MCP HTTP listener and print it, once.
    Token,
}

pub async fn command(endpoint: &Endpoint, args: McpArgs) -> anyhow::Result<Exit> {
    match args.command {
        Some(McpCommand::Token) => token(endpoint).await,
        None => serve(endpoint, args.project).await,
    }
}

async fn serve(endpoint: &Endpoint, project: Option<PathBuf>) -> anyhow::Result<Exit> {
    // Declares that it answers permission questions: it passes on its host's person's answers.
    let connection = daemon::connect_or_start_interactive(endpoint).await?;
    let note = match open_project(&connection.client, project).await {
        Ok(note) => note,
        Err(e) => {
            eprintln!("totem mcp: {e:#}");
            String::new()
        }
    };
    let reconnect = endpoint.clone();
    let connect: Connect = Arc::new(move || {
        let endpoint = reconnect.clone();
        Box::pin(async move {
            Ok(daemon::connect_or_start_interactive(&endpoint)
                .await?
                .client)
        })
    });
    let server = TotemMcp::new(Connector::with_client(connect, connection.client)).with_note(&note);
    totem_mcp::serve_stdio(server).await?;
    Ok(Exit::Success)
}

/// Registers the folder as a project, so the client finds it with `project_list`.
async fn open_project(
    client: &totem_client::Client,
    dir: Option<PathBuf>,
) -> anyhow::Result<String> {
    // A folder named with --project is opened whatever it is; the folder the host started us in
    // is not when it is `/`, holds the home folder or is the home folder (hosts often start
    // servers in `/` or in the home folder).
    let by_name = dir.is_some();
    let dir = match dir {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let dir = std::path::absolute(&dir)?;
    let project = client
        .call::<method::ProjectOpen>(ProjectOpenParams {
            path: dir.display().to_string(),
            by_name,
        })
        .await?;
    Ok(format!(
        "The current project is `{}` (id {}, {}).",
        project.name, project.id, project.path
    ))
}

async fn token(endpoint: &Endpoint) -> anyhow::Result<Exit> {
    let connection = daemon::connect_or_start(endpoint).await?;
    if !connection.has(method::McpTokenRotate::NAME) {
        return Err(Unreachable(
            "this totemd cannot make MCP tokens; update it and run `totem daemon stop`, then try again"
                .into(),
        )
        .into());
    }
    let made = connection
        .client
        .call::<method::McpTokenRotate>(NoParams {})
        .await?;
    // The token alone on stdout, so `TOKEN=$(totem mcp token)` works; the rest for a person.
    println!("{}", made.token);
    eprintln!(
        "This is the bearer token for {} (shown once; running `totem mcp token` again replaces it).\nClients send it as `Authorization: Bearer TOKEN`.",
        made.url
    );
    if !made.enabled {
        eprintln!(
            "The HTTP listener is off: add \"mcpServer\": {{\"http\": {{\"enabled\": true}}}} to settings.json in {}, then restart totemd (`totem daemon stop`).",
            endpoint.home.display()
        );
    }
    Ok(Exit::Success)
}
