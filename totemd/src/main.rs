//! `totemd`: serve Totem's protocol on a Unix socket until SIGTERM, SIGINT or `daemon.shutdown`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use totemd::daemon::Daemon;
use totemd::server::{self, listener};

/// The Totem daemon. Clients (`totem`, editors, MCP) attach to it over a local socket.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Socket to listen on (default: $XDG_RUNTIME_DIR/totem/totemd.sock, or $TOTEM_HOME/run/totemd.sock).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Totem's home: store, blobs, logs, settings (default: $TOTEM_HOME, else ~/.totem).
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Log filter, e.g. `info` or `totemd=debug` (default: $TOTEM_LOG, else $RUST_LOG, else
    /// `logLevel` in settings.json, else info).
    #[arg(long, value_name = "FILTER")]
    log: Option<String>,
    /// Read settings.json as totemd would, print what is wrong with it and exit (`totem doctor`
    /// runs this when no daemon is running).
    #[arg(long)]
    check_settings: bool,
    /// Put back the store and blobs from a backup (`totem store backup FILE`) and exit, instead
    /// of serving. The daemon must not be running; the current store is kept beside it.
    #[arg(long, value_name = "FILE")]
    restore: Option<PathBuf>,
    /// Stop once no client has been connected, no run going and no terminal running for this
    /// many seconds (`totem mcp` starts totemd so, so that it does not outlive its host); the
    /// sessions stay in the store and the next client starts totemd again.
    #[arg(long, value_name = "SECS")]
    exit_when_idle: Option<u64>,
}

fn main() -> std::process::ExitCode {
    // The sandbox launcher (see `totemd::sandbox`): nothing else of the daemon runs in it.
    let mut raw = std::env::args_os().skip(1);
    if raw.next().is_some_and(|a| a == totemd::sandbox::SUBCOMMAND) {
        return totemd::sandbox::launch(raw.collect());
    }
    // Before any thread starts (the log writer, the runtime, the store's workers).
    totemd::memory::no_thread_caches();
    totemd::memory::limit_arenas();
    let args = Args::parse();
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("totemd: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    // First: it edits the environment, which is only sound before any thread starts.
    let inherited = listener::take_inherited()?;
    let (default_home, default_socket) = totem_protocol::socket::from_env()
        .context("cannot find a home folder: set TOTEM_HOME or HOME")?;
    // An explicit --home keeps its socket beside it, as TOTEM_HOME does. A socket from systemd
    // is wherever totemd.socket put it.
    let socket = match (
        inherited.as_ref().and_then(|i| i.path.clone()),
        args.socket,
        &args.home,
    ) {
        (Some(s), _, _) => s,
        (None, Some(s), _) => s,
        (None, None, Some(home)) => home.join("run").join(totem_protocol::socket::SOCKET_FILE),
        (None, None, None) => default_socket,
    };
    let home = args.home.unwrap_or(default_home);
    if args.check_settings {
        let path = home.join("settings.json");
        totemd::config::file::read(&path)?;
        println!("{} is valid", path.display());
        return Ok(());
    }
    check_home(&home)?;
    // The home holds transcripts, snapshots and keys: the user's only (0700 folders, 0600
    // files), also when an older totemd created it open.
    totemd::util::create_private_dir(&home.join("logs"))
        .with_context(|| format!("cannot create {}", home.display()))?;
    let _ = totemd::util::create_private_dir(&home);
    let _log_guard = init_logging(&home, args.log)?;
    let _lock = listener::lock_home(&home, &socket)?;
    if let Some(file) = &args.restore {
        let (summary, kept) = totemd::store::restore(&home, file)
            .with_context(|| format!("cannot restore {}", file.display()))?;
        println!(
            "restored {} records and {} blobs from {} into {}",
            summary.records,
            summary.blobs,
            file.display(),
            home.display()
        );
        if let Some(kept) = kept {
            println!(
                "the store as it was is kept in {}; delete it once the restored one is right",
                kept.display()
            );
        }
        return Ok(());
    }

    // One async worker per core, up to 4: the daemon mostly waits on sockets, providers and the
    // store. Each worker is a stack and, with glibc, an allocator arena that keeps what it once
    // held, so a 32-core machine does not get 32 of them.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(MAX_WORKERS));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let daemon = Arc::new(Daemon::open(&home, &socket)?);
        let fixed = totemd::util::make_private(&home);
        if fixed > 0 {
            tracing::info!(fixed, "made files under the home readable by the user only");
        }
        daemon.watch_store();
        let activated = inherited.is_some();
        let listening = match inherited {
            Some(inherited) => {
                inherited
                    .listener
                    .set_nonblocking(true)
                    .context("cannot use the socket systemd passed")?;
                tokio::net::UnixListener::from_std(inherited.listener)
                    .context("cannot use the socket systemd passed")?
            }
            None => listener::bind(&socket)?,
        };
        tracing::info!(socket = %socket.display(), home = %home.display(), pid = std::process::id(), activated, "totemd ready");
        spawn_signal_watch(daemon.clone())?;
        if let Some(secs) = args.exit_when_idle {
            spawn_idle_watch(daemon.clone(), std::time::Duration::from_secs(secs));
        }
        // Ready once SIGTERM is handled too: systemd may stop us right after.
        if let Err(e) = listener::notify_ready() {
            tracing::warn!(error = %e, "cannot tell systemd we are ready (NOTIFY_SOCKET)");
        }
        server::serve(daemon.clone(), listening).await;
        tracing::info!("shutting down");
        daemon.agents.stop_mcp_servers();
        let terminals = daemon.terminals.clone();
        let _ = tokio::task::spawn_blocking(move || terminals.close_all()).await;
        if daemon.failed() {
            // Nothing more can be written; the next start replays the journal.
            anyhow::bail!(
                "the store in {} could not be written and could not be reopened; start totemd again (`totem daemon start`), and see its log in {}",
                daemon.store().path().display(),
                home.join("logs").display()
            );
        }
        daemon.sessions.give_back_reserved();
        daemon.store().persist()?;
        daemon.write_acked();
        // systemd's socket stays in place: it starts us again on the next connection.
        if !activated {
            let _ = std::fs::remove_file(&socket);
        }
        tracing::info!("stopped");
        Ok::<_, anyhow::Error>(())
    })?;
    // Sessions' tasks may still hold the store; the runtime is gone, so nothing writes anymore.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    Ok(())
}

/// Fails at once, naming the folder and the reason, when Totem's home (or a folder in it) cannot
/// be written: a read-only mount, another owner, a full disk.
fn check_home(home: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(home)
    {
        anyhow::bail!(home_error(home, &home_reason(&e)));
    }
    let inside = ["store", "blobs", "logs"].map(|d| home.join(d));
    for dir in std::iter::once(home.to_path_buf()).chain(inside) {
        if !dir.is_dir() {
            continue;
        }
        let probe = tempfile::Builder::new()
            .prefix(".totemd-write-check")
            .tempfile_in(&dir);
        if let Err(e) = probe {
            let mut reason = home_reason(&e);
            let owner = std::fs::metadata(&dir).map(|m| m.uid()).ok();
            let me = nix::unistd::getuid().as_raw();
            if let Some(owner) = owner.filter(|o| *o != me) {
                reason.push_str(&format!(
                    ": it belongs to user id {owner}, and totemd runs as user id {me}"
                ));
            }
            anyhow::bail!(home_error(&dir, &reason));
        }
    }
    Ok(())
}

fn home_reason(error: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::ReadOnlyFilesystem => "it is on a read-only filesystem".to_string(),
        ErrorKind::PermissionDenied => "permission denied".to_string(),
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => "the disk is full".to_string(),
        _ => error.to_string(),
    }
}

fn home_error(dir: &std::path::Path, reason: &str) -> String {
    format!(
        "cannot write to {}: {reason}. Totem keeps its sessions there; make it writable for this user (or free space), or point TOTEM_HOME at a folder you own",
        dir.display()
    )
}

fn spawn_signal_watch(daemon: Arc<Daemon>) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM"),
            _ = int.recv() => tracing::info!("SIGINT"),
        }
        daemon.request_shutdown();
    });
    Ok(())
}

/// Stops the daemon once it has been unused for `idle`: no client connected, no run going, no
/// terminal running.
fn spawn_idle_watch(daemon: Arc<Daemon>, idle: std::time::Duration) {
    use std::sync::atomic::Ordering;
    tokio::spawn(async move {
        let tick = (idle / 4).clamp(
            std::time::Duration::from_millis(100),
            std::time::Duration::from_secs(5),
        );
        let mut unused_since = std::time::Instant::now();
        loop {
            tokio::time::sleep(tick).await;
            let used = daemon.connections.load(Ordering::Relaxed) > 0
                || daemon.sessions.running() > 0
                || daemon.terminals.list(None).iter().any(|t| t.is_running());
            if used {
                unused_since = std::time::Instant::now();
            } else if unused_since.elapsed() >= idle {
                tracing::info!(
                    secs = idle.as_secs(),
                    "no client, run or terminal for a while: stopping (--exit-when-idle)"
                );
                daemon.request_shutdown();
                return;
            }
        }
    });
}

/// Async worker threads at most, whatever the number of cores.
const MAX_WORKERS: usize = 4;

/// Log lines that may wait for the log's writer thread.
const LOG_LINES_QUEUED: usize = 4096;

fn init_logging(
    home: &std::path::Path,
    filter: Option<String>,
) -> anyhow::Result<tracing_appender::non_blocking::WorkerGuard> {
    let logs = home.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let appender = tracing_appender::rolling::Builder::new()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("totemd")
        .filename_suffix("log")
        .max_log_files(7)
        .build(&logs)
        .with_context(|| format!("cannot write logs in {}", logs.display()))?;
    // The log's queue holds its lines in one buffer allocated whole: the crate's default of
    // 128,000 lines is 4 MiB resident from the start, for a daemon that logs a few lines a run.
    // Past 4,096 waiting lines (128 KiB), new ones are dropped rather than slowing the daemon.
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_LINES_QUEUED)
        .finish(appender);
    let (text, source) = log_filter(home, filter);
    let filter = tracing_subscriber::EnvFilter::try_new(&text)
        .with_context(|| format!("bad log filter `{text}` (from {source})"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(totemd::redact::MakeWriter(writer))
        .with_ansi(false)
        .init();
    tracing::info!(filter = %text, from = source, "logging");
    Ok(guard)
}

/// The log filter and where it came from: `--log`, then `TOTEM_LOG`, then `RUST_LOG`, then
/// `logLevel` in settings.json, then `info`. A settings file that does not load is reported by
/// the daemon once it runs; logging then starts at `info`.
fn log_filter(home: &std::path::Path, flag: Option<String>) -> (String, &'static str) {
    let env = |name| {
        std::env::var(name)
            .ok()
            .filter(|v: &String| !v.trim().is_empty())
    };
    if let Some(flag) = flag {
        return (flag, "--log");
    }
    if let Some(value) = env("TOTEM_LOG") {
        return (value, "TOTEM_LOG");
    }
    if let Some(value) = env("RUST_LOG") {
        return (value, "RUST_LOG");
    }
    let settings = totemd::config::file::read(&home.join("settings.json"));
    match settings.ok().and_then(|s| s.log_level) {
        Some(level) => (level, "settings.json logLevel"),
        None => ("info".to_string(), "default"),
    }
}
