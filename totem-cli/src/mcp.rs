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
    /// Add an MCP server for the model to your settings:
    /// `totem mcp add NAME -- COMMAND ARGS…` or `totem mcp add NAME --url URL`.
    #[command(after_help = ADD_HELP)]
    Add(McpAddArgs),
    /// List the MCP servers of your settings (secret values are never shown).
    List {
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove an MCP server from your settings, with its stored secrets.
    Remove {
        /// The server's name.
        name: String,
    },
    /// Start an MCP server of your settings, list its tools and stop it.
    Test {
        /// The server's name.
        name: String,
    },
    /// Log in to a remote MCP server that wants OAuth: opens its login page in your browser,
    /// which comes back to Totem; the tokens are stored encrypted and refreshed by themselves.
    Login(McpLoginArgs),
    /// Forget the OAuth tokens of an MCP server (`totem mcp login` gets new ones).
    Logout {
        /// The server's name.
        name: String,
    },
}

/// `totem mcp login`.
#[derive(Debug, Args)]
pub struct McpLoginArgs {
    /// The server's name (`totem mcp list` shows them).
    pub name: String,
    /// A client id you registered with the server's authorization server, for one that does
    /// not register clients by itself.
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// Only print the login page's address; do not open a browser.
    #[arg(long)]
    pub no_browser: bool,
}

const ADD_HELP: &str = "\
Secrets: give a header or variable without a value (`--header Authorization`, `--env API_TOKEN`)
and its value is read from standard input with --value-stdin, or asked for without echo on a
terminal. It is stored encrypted like provider keys; settings.json only names it.

Examples:
  totem mcp add fs -- npx -y @modelcontextprotocol/server-filesystem .
  printf 'Bearer %s' \"$TOKEN\" | totem mcp add docs --url https://example.com/mcp --header Authorization --value-stdin";

/// `totem mcp add`.
#[derive(Debug, Args)]
pub struct McpAddArgs {
    /// The server's name (it prefixes its tools: NAME_TOOL).
    pub name: String,
    /// A streamable HTTP endpoint, instead of a command after `--`.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// `VAR=VALUE` for the command's environment; `VAR` alone for a secret. Repeatable.
    #[arg(long = "env", value_name = "VAR[=VALUE]")]
    pub env: Vec<String>,
    /// `'Name: value'` for each HTTP request; `Name` alone for a secret. Repeatable.
    #[arg(long = "header", value_name = "NAME[: VALUE]")]
    pub headers: Vec<String>,
    /// Read the secret values from standard input, one line each (variables first, in the order
    /// given, then headers).
    #[arg(long)]
    pub value_stdin: bool,
    /// Only this tool of the server reaches the model. Repeatable (default: all of them).
    #[arg(long = "tool", value_name = "TOOL")]
    pub tools: Vec<String>,
    /// Replace a server of the same name.
    #[arg(long)]
    pub replace: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub async fn command(endpoint: &Endpoint, args: McpArgs) -> anyhow::Result<Exit> {
    match args.command {
        Some(McpCommand::Token) => token(endpoint).await,
        Some(McpCommand::Add(add)) => crate::mcp_servers::add(endpoint, add).await,
        Some(McpCommand::List { json }) => crate::mcp_servers::list(endpoint, json).await,
        Some(McpCommand::Remove { name }) => crate::mcp_servers::remove(endpoint, &name).await,
        Some(McpCommand::Test { name }) => crate::mcp_servers::test(endpoint, &name).await,
        Some(McpCommand::Login(login)) => crate::mcp_login::login(endpoint, login).await,
        Some(McpCommand::Logout { name }) => crate::mcp_login::logout(endpoint, &name).await,
        None => serve(endpoint, args.project).await,
    }
}

async fn serve(endpoint: &Endpoint, project: Option<PathBuf>) -> anyhow::Result<Exit> {
    // Declares that it answers permission questions: it passes on its host's person's answers.
    let (connection, started) = daemon::connect_or_start_noting(endpoint).await?;
    let note = match open_project(&connection.client, project).await {
        Ok(note) => note,
        Err(e) => {
            eprintln!("totem mcp: {e:#}");
            // The host's model hears it too: it is the one to pick a project or tell the user.
            format!(
                "No project is open: {}. Use project_list for the open ones, or ask the user to add `--project DIR` to this server's arguments in the host's settings.",
                totem_mcp::tools::in_tool_words(&format!("{e:#}")).trim_end_matches('.')
            )
        }
    };
    // A host that trims the environment drops TOTEM_HOME: then this started an empty totemd of
    // its own beside the user's. Say so where the host's model reads it.
    let fresh = match started && std::env::var_os("TOTEM_HOME").is_none() {
        true => Some(fresh_daemon_note(&endpoint.home)),
        false => None,
    };
    let reconnect = endpoint.clone();
    let connect: Connect = Arc::new(move || {
        let endpoint = reconnect.clone();
        Box::pin(async move { Ok(daemon::connect_or_start_noting(&endpoint).await?.0.client) })
    });
    let mut server =
        TotemMcp::new(Connector::with_client(connect, connection.client)).with_note(&note);
    if let Some(fresh) = &fresh {
        server = server.with_fresh_daemon_note(fresh);
    }
    totem_mcp::serve_stdio(server).await?;
    Ok(Exit::Success)
}

/// What the host's model hears when this server started a new totemd with no TOTEM_HOME (a host
/// that trims the environment drops it): where that totemd keeps its data, that it stops once
/// unused, and where the user's sessions may be instead.
fn fresh_daemon_note(home: &std::path::Path) -> String {
    let mut note = format!(
        "This server started a new totemd with its data in {} (it stops once unused for a while).",
        home.display()
    );
    let others = other_daemon_homes(home);
    match others.first() {
        Some(first) => note.push_str(&format!(
            " Other totemd processes of this user keep their data in {}: if the user's sessions are there, the host did not pass TOTEM_HOME on; set TOTEM_HOME (e.g. to {}) in this server's `env` in the host's settings.",
            others
                .iter()
                .take(3)
                .map(|h| h.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            first.display()
        )),
        None => note.push_str(
            " If Totem keeps the user's sessions elsewhere (TOTEM_HOME), the host did not pass that variable on: set TOTEM_HOME in this server's `env` in the host's settings.",
        ),
    }
    note
}

/// The homes of the other totemd processes of this user (from their `--home` argument or
/// `TOTEM_HOME`), besides `mine`: where the user's sessions may be when the host dropped
/// TOTEM_HOME. Linux only (it reads /proc); empty elsewhere.
fn other_daemon_homes(mine: &std::path::Path) -> Vec<PathBuf> {
    let mut homes = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return homes;
    };
    for entry in entries.flatten() {
        let proc_dir = entry.path();
        let is_totemd = std::fs::read_link(proc_dir.join("exe")).is_ok_and(|exe| {
            exe.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "totemd" || n.starts_with("totemd "))
        });
        if !is_totemd {
            continue;
        }
        let words = |file: &str| -> Vec<String> {
            std::fs::read(proc_dir.join(file))
                .map(|bytes| {
                    bytes
                        .split(|b| *b == 0)
                        .map(|w| String::from_utf8_lossy(w).into_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        let args = words("cmdline");
        if args.get(1).is_some_and(|a| a.starts_with("__")) {
            continue;
        }
        let by_flag = args
            .iter()
            .position(|a| a == "--home")
            .and_then(|i| args.get(i + 1).cloned())
            .or_else(|| {
                args.iter()
                    .find_map(|a| a.strip_prefix("--home=").map(String::from))
            });
        let home = by_flag.or_else(|| {
            words("environ")
                .into_iter()
                .find_map(|v| v.strip_prefix("TOTEM_HOME=").map(String::from))
        });
        let Some(home) = home.filter(|h| !h.is_empty()).map(PathBuf::from) else {
            continue;
        };
        let home = match home.is_absolute() {
            true => home,
            false => std::fs::read_link(proc_dir.join("cwd"))
                .map(|cwd| cwd.join(&home))
                .unwrap_or(home),
        };
        if home != mine && !homes.contains(&home) {
            homes.push(home);
        }
    }
    // Those under the user's home folder first: the likelier place for the user's own.
    if let Some(user_home) = std::env::var_os("HOME").map(PathBuf::from) {
        homes.sort_by_key(|h| !h.starts_with(&user_home));
    }
    homes
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
