//! The command line's shape: every command, option and help text, declared once for clap (and for
//! the shell completions generated from it).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Exit codes, as `--help` documents them.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  the run failed, was aborted or interrupted, or the command failed
  2  bad usage (unknown option, missing prompt, conflicting flags)
  3  totemd is unreachable (it could not be started or stopped answering)
  4  a permission the run needed was denied";

/// Totem, a coding agent. `totem` alone attaches to the latest session of the current folder.
#[derive(Debug, Parser)]
#[command(name = "totem", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// The daemon's socket (default: $TOTEM_HOME/run/totemd.sock when TOTEM_HOME is set, else
    /// $XDG_RUNTIME_DIR/totem/totemd.sock, else ~/.totem/run/totemd.sock).
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Attach to a session in an interactive prompt (the default command).
    #[command(after_help = ATTACH_HELP)]
    Attach(AttachArgs),
    /// Send one prompt, stream the answer to stdout and exit when the run ends.
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// List sessions, newest activity first; `totem sessions rm ID` deletes one.
    Sessions(SessionsArgs),
    /// Write a session as Markdown (to read or share) or JSON (to keep, or `totem import` elsewhere).
    Export(ExportArgs),
    /// Read a session written by `totem export --format json` back as a new session of a project.
    Import(ImportArgs),
    /// Write AGENTS.md for a project (in an empty or new folder, a Total.js 5 project first), as
    /// `/init` does in the prompt.
    Init {
        /// The project folder (default: the current folder); created when missing.
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Check a Total.js 5 project (or some of its files and folders) against the framework's
    /// conventions: `file:line: severity [rule] message` per finding; exit 1 on errors.
    #[command(after_help = CHECK_HELP)]
    Check(CheckArgs),
    /// Start, stop, inspect or install (systemd) the daemon.
    #[command(subcommand)]
    Daemon(DaemonCommand),
    /// Print a shell completion script: `totem completions bash > ~/.local/share/bash-completion/completions/totem`.
    Completions {
        /// The shell to generate for.
        shell: clap_complete::Shell,
    },
    /// Add, list, remove or test the model providers in Totem's settings.
    #[command(subcommand)]
    Provider(ProviderCommand),
    /// List the models of every provider with context window, capabilities and prices.
    Models(ModelsArgs),
    /// Check the daemon, socket, store, providers, rg and MCP servers, and say what to fix.
    Doctor,
    /// Back up the store and blobs to one file while the daemon runs, or restore one.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Serve Totem as an MCP server on stdin/stdout for another agent; `totem mcp token` makes
    /// the bearer token of totemd's MCP HTTP listener.
    Mcp(crate::mcp::McpArgs),
    /// Print (and on a desktop, open) the address of the web client totemd serves, with a
    /// one-time token.
    Web(crate::web::WebArgs),
    /// Print the man page (`totem man > totem.1`), or write one page per command with `--out DIR`.
    #[command(hide = true)]
    Man {
        /// Write totem.1, totem-run.1, … into this folder instead.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

const ATTACH_HELP: &str = "\
Inside the prompt: /help lists the commands, Enter sends, a line ending in \\ or Alt-Enter continues
on the next line, Ctrl-C aborts the running run (twice within a second leaves), Ctrl-D leaves.
Leaving never stops a run: reattach with `totem attach --session ID`.
Notices (a run longer than TOTEM_NOTIFY_AFTER seconds, default 10, ends; a question waits):
TOTEM_NOTIFY=osc9 (default: bell + OSC 9), osc777 (bell + OSC 777), bell, or off.";

const CHECK_HELP: &str = "\
Errors are code that breaks at run time on Total.js 5; warnings and notes are conventions.
Switch a rule off on one line with `// totem-ignore RULE` (alone on a line: the next line), in a
whole file with `// totem-ignore-file RULE`, or for the project in .totem/settings.json:
{\"totaljs\": {\"check\": {\"disabled\": [\"RULE\"]}}}
On a Total.js 3/4 project the check does not apply: it exits 0 and lists the changes Total.js 5
would need only with --migrate. --boot starts the app in the sandbox (node index.js, a free
loopback port), asks its GET routes without parameters and stops it; runs do this after edits
unless {\"totaljs\": {\"boot\": {\"enabled\": false}}}.

Exit codes:
  0  no errors
  1  errors were found, or the check failed
  2  bad usage (a path that does not exist, paths in two projects)
  3  totemd is unreachable";

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Files or folders to check (default: the whole project of the current folder). The
    /// project is the nearest folder above them with a package.json, index.js or config.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Print the result as JSON (`{findings, filesChecked, errors, warnings, notes, notices,
    /// kind, boot}`).
    #[arg(long)]
    pub json: bool,
    /// Also start the app (`node index.js` on a free loopback port), ask its GET routes without
    /// parameters and stop it; a boot error, a 500 or a request that hangs is an error.
    #[arg(long)]
    pub boot: bool,
    /// On a Total.js 3/4 project, list what would have to change for Total.js 5 (otherwise the
    /// check does not apply there and exits 0).
    #[arg(long)]
    pub migrate: bool,
}

#[derive(Debug, Args, Default)]
pub struct AttachArgs {
    /// Attach to this session (see `totem sessions`).
    #[arg(long, value_name = "ID", conflicts_with = "new")]
    pub session: Option<String>,
    /// Start a new session instead of attaching to the latest one.
    #[arg(long)]
    pub new: bool,
    /// The project folder (default: the current folder).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Attach this terminal raw to one of the daemon's terminals (an id from `/terminals`)
    /// instead; Ctrl-] detaches, the program keeps running.
    #[arg(long, value_name = "ID", conflicts_with_all = ["session", "new"])]
    pub terminal: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The prompt; `-` reads it from standard input.
    #[arg(value_name = "PROMPT")]
    pub prompt: String,
    /// Continue this session instead of starting a new one.
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    pub session: Option<String>,
    /// Continue the latest session of the project.
    #[arg(long = "continue", short = 'c')]
    pub continue_latest: bool,
    /// Print every event as one JSON object per line instead of the rendered answer.
    #[arg(long)]
    pub json: bool,
    /// Start the run and return at once, leaving it running in totemd; prints how to follow it.
    /// Without it, Ctrl-C (or SIGTERM) stops the run.
    #[arg(long, conflicts_with = "json")]
    pub detach: bool,
    /// The model, as `provider/model` (e.g. `ollama/qwen3:8b`; `totem models` lists them).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The mode: `build` (all tools), `plan` (read-only tools) or an agent from settings.
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// How hard the model should think, for models that can.
    #[arg(long, value_name = "LEVEL", value_parser = ["off", "low", "medium", "high"])]
    pub reasoning: Option<String>,
    /// A permission rule granted for this run: a tool alone (`edit`) or with a pattern
    /// (`bash(cargo test*)`). Repeatable. Without a terminal to ask on, anything else is refused.
    #[arg(long, value_name = "RULE")]
    pub allow: Vec<String>,
    /// Attach a file of the project to the prompt, as `@path` does in the prompt. Repeatable.
    #[arg(long = "file", short = 'f', value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The new session's title (default: the prompt's first words).
    #[arg(long, value_name = "TITLE", conflicts_with_all = ["session", "continue_latest"])]
    pub title: Option<String>,
    /// The project folder (default: the current folder).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// A reasoning level by its name (`--reasoning`, `/reasoning`): `off`, `low`, `medium`, `high`.
pub fn reasoning_level(word: &str) -> Option<totem_protocol::ReasoningLevel> {
    use totem_protocol::ReasoningLevel;
    match word {
        "off" => Some(ReasoningLevel::Off),
        "low" => Some(ReasoningLevel::Low),
        "medium" => Some(ReasoningLevel::Medium),
        "high" => Some(ReasoningLevel::High),
        _ => None,
    }
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub command: Option<SessionsCommand>,
    /// Only sessions of the project in this folder.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Print the page as JSON (`{items, nextCursor}`) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// At most this many sessions (the daemon caps it at 500).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: u32,
    /// Only sessions whose title or messages contain this text (case does not matter).
    #[arg(long, value_name = "TEXT")]
    pub search: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Delete a session: its messages, runs and undo history (its file changes stay). Asks first.
    #[command(visible_alias = "delete")]
    Rm {
        /// The session (see `totem sessions`).
        #[arg(value_name = "SESSION")]
        session: String,
        /// Delete without asking (needed when standard input is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The session (see `totem sessions`).
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// `md` to read, `json` to keep or import.
    #[arg(long, value_enum, default_value_t = ExportFormat::Md)]
    pub format: ExportFormat,
    /// Write to this file instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The form `totem export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Markdown: a heading per message, tool calls and results in code blocks.
    Md,
    /// JSON: the session and its messages, as `totem import` reads them.
    Json,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A file written by `totem export --format json`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The new session's title (default: the exported one).
    #[arg(long, value_name = "TITLE")]
    pub title: Option<String>,
    /// The project folder the session joins (default: the current folder).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum DaemonCommand {
    /// Start totemd in the background and wait until it answers.
    Start,
    /// Ask totemd to stop and wait until its socket is gone.
    Stop,
    /// Print the daemon's version, pid, uptime, socket, store and counts.
    Status {
        /// Print the status as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Install the systemd user units and enable totemd.socket (totemd then starts on demand).
    Install {
        /// Print the units and commands instead of installing them.
        #[arg(long)]
        print: bool,
    },
}

/// `totem store …`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Write a consistent copy of the store and blobs to FILE (the daemon keeps running; it is
    /// started when it is not).
    Backup {
        /// The backup file to write; an existing one is replaced.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Put back the store and blobs from FILE. Stop the daemon first (`totem daemon stop`); the
    /// current store is kept beside the restored one.
    Restore {
        /// A file written by `totem store backup`.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
}

/// `totem provider …`.
#[derive(Debug, Subcommand)]
pub enum ProviderCommand {
    /// Add a provider (asks for its API key without echo; `--key-stdin` reads it from stdin).
    Add(ProviderAddArgs),
    /// List the providers (keys are never shown, only whether one is set).
    List {
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a provider and its stored key.
    Remove {
        /// The provider's name.
        name: String,
    },
    /// Check that a provider answers and count its models.
    Test {
        /// The provider's name.
        name: String,
    },
}

/// The wire format a provider speaks, as typed on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum KindArg {
    /// Ollama's native API.
    Ollama,
    /// OpenAI-compatible chat completions (OpenAI, OpenRouter, LM Studio, llama.cpp, vLLM).
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini.
    Gemini,
}

impl From<KindArg> for totem_protocol::ProviderKind {
    fn from(kind: KindArg) -> Self {
        match kind {
            KindArg::Ollama => totem_protocol::ProviderKind::Ollama,
            KindArg::Openai => totem_protocol::ProviderKind::Openai,
            KindArg::Anthropic => totem_protocol::ProviderKind::Anthropic,
            KindArg::Gemini => totem_protocol::ProviderKind::Gemini,
        }
    }
}

#[derive(Debug, Args)]
pub struct ProviderAddArgs {
    /// A name for the provider; models are then named `NAME/model`.
    pub name: String,
    /// The wire format it speaks.
    #[arg(long, value_enum)]
    pub kind: KindArg,
    /// Its base URL (default per kind: http://127.0.0.1:11434, https://api.openai.com/v1,
    /// https://api.anthropic.com, https://generativelanguage.googleapis.com).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Read the API key from the first line of stdin instead of asking.
    #[arg(long)]
    pub key_stdin: bool,
    /// The model to use when only the provider is named.
    #[arg(long, value_name = "MODEL")]
    pub default_model: Option<String>,
    /// Replace a provider of the same name.
    #[arg(long)]
    pub replace: bool,
}

#[derive(Debug, Args)]
pub struct ModelsArgs {
    /// Only this provider's models.
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
    /// Ask each model (or this one, as provider/model) a tiny scripted question set and say
    /// whether it calls tools natively or in text, streams tool calls, its window and speed;
    /// what it finds is saved as the model's settings.
    #[arg(long, value_name = "MODEL", num_args = 0..=1, default_missing_value = "")]
    pub probe: Option<String>,
}
