//! `totem`, the command line of Totem: attach to sessions, run prompts headless, manage the daemon.
//! `--version`, `--help` and `completions` answer before any runtime or socket is touched.

mod check;
mod cli;
mod daemon;
mod doctor;
mod exit;
mod format;
mod init;
mod install;
mod mcp;
mod mcp_login;
mod mcp_servers;
mod project;
mod provider;
mod render;
mod repl;
mod run;
mod sessions;
mod store;
mod terminal;
mod transfer;
mod web;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::cli::{Cli, Command, DaemonCommand};
use crate::daemon::Endpoint;
use crate::exit::Exit;

fn main() -> ExitCode {
    quiet_on_closed_pipe();
    let cli = Cli::parse();
    if let Some(Command::Completions { shell }) = &cli.command {
        clap_complete::generate(*shell, &mut Cli::command(), "totem", &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    if let Some(Command::Man { out }) = &cli.command {
        if let Err(error) = install::man_command(out.as_deref()) {
            eprintln!("totem: {error:#}");
            return ExitCode::from(exit::exit_for(&error).code());
        }
        return ExitCode::SUCCESS;
    }
    match dispatch(cli) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(error) => {
            eprintln!("totem: {error:#}");
            ExitCode::from(exit::exit_for(&error).code())
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<Exit> {
    let endpoint = Endpoint::resolve(cli.socket)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    let result = runtime.block_on(async {
        match cli.command {
            None => repl::attach(&endpoint, cli::AttachArgs::default()).await,
            Some(Command::Attach(args)) => repl::attach(&endpoint, args).await,
            Some(Command::Run(args)) => run::run(&endpoint, &args).await,
            Some(Command::Sessions(args)) => match args.command {
                Some(cli::SessionsCommand::Rm { session, yes }) => {
                    sessions::remove(&endpoint, &session, yes).await
                }
                None => sessions::list(&endpoint, &args).await,
            },
            Some(Command::Export(args)) => transfer::export(&endpoint, &args).await,
            Some(Command::Import(args)) => transfer::import(&endpoint, &args).await,
            Some(Command::Init { dir }) => init::init(&endpoint, dir.as_deref()).await,
            Some(Command::Check(args)) => check::check(&endpoint, &args).await,
            Some(Command::Daemon(DaemonCommand::Start)) => daemon::start_command(&endpoint).await,
            Some(Command::Daemon(DaemonCommand::Stop)) => daemon::stop_command(&endpoint).await,
            Some(Command::Daemon(DaemonCommand::Status { json })) => {
                daemon::status_command(&endpoint, json).await
            }
            Some(Command::Daemon(DaemonCommand::Install { print })) => {
                install::install_command(&endpoint, print).await
            }
            Some(Command::Doctor) => doctor::doctor_command(&endpoint).await,
            Some(Command::Store(command)) => store::command(&endpoint, command).await,
            Some(Command::Mcp(args)) => mcp::command(&endpoint, args).await,
            Some(Command::Provider(command)) => provider::command(&endpoint, command).await,
            Some(Command::Models(args)) => provider::models(&endpoint, args).await,
            Some(Command::Web(args)) => web::web(&endpoint, &args).await,
            Some(Command::Completions { .. }) | Some(Command::Man { .. }) => Ok(Exit::Success),
        }
    });
    // A terminal read still blocked on a permission question must not keep `totem` from exiting
    // (after Ctrl-C, say).
    runtime.shutdown_background();
    result
}

/// `totem sessions | head -1`: when the reader goes away, end quietly as other command-line
/// programs do (killed by SIGPIPE), not with a panic about a broken pipe or an error message. The
/// Rust runtime ignores SIGPIPE; this puts the default back before anything is written.
#[allow(unsafe_code)]
fn quiet_on_closed_pipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: called first thing in main, before any thread starts; the default action replaces
    // the runtime's "ignore", and no handler of ours is installed.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}
