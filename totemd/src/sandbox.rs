//! The kernel sandbox (Linux Landlock) for the commands Totem runs without asking.
//!
//! A command the built-in rules allow (`cat`, `grep -r`, `git status` …) was checked by its words
//! only; what it really opens is decided at run time (symlinks, globs, brace expansion, `cd` with
//! no argument, a `$(…)` hidden in an array subscript). So the daemon starts such a command
//! through itself, `totemd __sandbox …`, which restricts its own process with Landlock and a
//! seccomp filter, then runs `bash -c COMMAND` as its child. Inside:
//!
//! - system folders (`/usr`, `/bin`, `/lib*`, `/opt`, a few files of `/etc`) can be read and run;
//! - the project can be read (not written, not run), except secret files, files with more than
//!   one hard link (they may be the same file as one outside, or a secret under another name) and
//!   anything that is not a regular file, folder or symlink (FIFOs, sockets, devices); symlinks
//!   are followed by the kernel and the file they lead to must itself be readable here;
//! - the call's temp folder (`--tmp`, `TMPDIR` points there) and any `--write` folder can be
//!   written, not run; a `--bin` folder (the hardened `git` wrapper) can be read and run;
//! - nothing else: not the home folder, not `/proc` (other processes' environments), not
//!   `/tmp`; no signals to processes outside the sandbox;
//! - no sockets at all: the seccomp filter refuses `socket()` (TCP, UDP, Unix, netlink, raw) and
//!   io_uring (which makes sockets without that call). Landlock confines connecting to a Unix
//!   socket by its path only from ABI 9 on and UDP not at all, so the filter is what stops a
//!   command from talking to the Docker daemon, an SSH agent, totemd itself, or sending a
//!   datagram out. `--tcp-port P` is the one exception (see below);
//! - no process outlives the command: the launcher stays as the command's parent and a child
//!   subreaper, and when the command ends (or the launcher gets SIGTERM, SIGINT or SIGHUP) it
//!   kills every process left below it, also those that left the process group (`setsid`).
//!
//! For other parts of the daemon that need the same sandbox (the Total.js app): [`Launcher`]
//! takes extra writable folders (`writable`) and one TCP port (`tcp_port`). With a port, the
//! seccomp filter lets `socket(AF_INET/AF_INET6, SOCK_STREAM)` through and Landlock allows
//! binding and connecting that one port only (Landlock filters ports, not addresses: the port is
//! reachable on every address, so bind it to 127.0.0.1 yourself). Everything else stays refused.
//!
//! A command the user approved (a rule they wrote, an answer) runs as the user, unsandboxed,
//! unless a built-in allow also matches it: then it keeps this sandbox (see `agent::confine`).
//! The workspace denies unsafe code, so there is no `pre_exec` hook: the launcher is a separate
//! process image that sandboxes itself before it starts the command.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use totem_permission::{SecretPatterns, SecretSettings};

/// The hidden first argument that turns `totemd` into the launcher.
pub const SUBCOMMAND: &str = "__sandbox";

/// The highest Landlock ABI this code asks for; the crate downgrades to what the kernel has.
const ABI_WANTED: ABI = ABI::V7;

/// A project with more entries than this is not walked to the end: what was not walked is not
/// readable inside the sandbox.
const MAX_ENTRIES: usize = 400_000;

/// Which mode the daemon runs auto-allowed commands in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Landlock restricts them; `abi` is the kernel's version.
    Landlock {
        /// The Landlock ABI version the kernel supports.
        abi: i32,
    },
    /// No Landlock (an old kernel, another OS, or it is switched off): the built-in allow list
    /// shrinks to commands that read no file a path or link could redirect.
    Unavailable {
        /// Why there is no Landlock, as `daemon.status` shows it.
        reason: String,
    },
}

impl Mode {
    /// Whether commands run under Landlock.
    pub fn is_sandboxed(&self) -> bool {
        matches!(self, Mode::Landlock { .. })
    }

    /// One line for `daemon.status` and `totem doctor`.
    pub fn describe(&self) -> String {
        match self {
            Mode::Landlock { abi } => format!(
                "Landlock (ABI {abi}): commands run without asking can read system folders and the project (not its secret files) and write only a temp folder of their own; they open no socket (seccomp) and leave no process running"
            ),
            Mode::Unavailable { reason } => format!(
                "no kernel sandbox ({reason}): only commands that read no files run without asking; the rest ask first"
            ),
        }
    }
}

/// Finds out once whether Landlock works here, by restricting a throwaway thread (a ruleset
/// restricts only the thread that applies it). `TOTEM_SANDBOX=off` turns the sandbox off.
pub fn probe() -> Mode {
    if std::env::var("TOTEM_SANDBOX").is_ok_and(|v| v == "off") {
        return Mode::Unavailable {
            reason: "TOTEM_SANDBOX=off".into(),
        };
    }
    let tried = std::thread::spawn(|| -> Result<RulesetStatus, String> {
        let status = Ruleset::default()
            .handle_access(AccessFs::from_all(ABI_WANTED))
            .and_then(|r| r.create())
            .and_then(|r| r.restrict_self())
            .map_err(|e| e.to_string())?;
        Ok(status.ruleset)
    })
    .join();
    match tried {
        Ok(Ok(RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced)) => {
            Mode::Landlock { abi: kernel_abi() }
        }
        Ok(Ok(RulesetStatus::NotEnforced)) => Mode::Unavailable {
            reason: "the kernel has no Landlock".into(),
        },
        Ok(Err(e)) => Mode::Unavailable { reason: e },
        Err(_) => Mode::Unavailable {
            reason: "the probe failed".into(),
        },
    }
}

/// The kernel's Landlock ABI as the highest one a ruleset can be fully enforced with.
fn kernel_abi() -> i32 {
    let all = [
        ABI::V7,
        ABI::V6,
        ABI::V5,
        ABI::V4,
        ABI::V3,
        ABI::V2,
        ABI::V1,
    ];
    for abi in all {
        let full = std::thread::spawn(move || {
            Ruleset::default()
                .set_compatibility(landlock::CompatLevel::HardRequirement)
                .handle_access(AccessFs::from_all(abi))
                .and_then(|r| r.create())
                .is_ok()
        })
        .join()
        .unwrap_or(false);
        if full {
            return abi as i32;
        }
    }
    0
}

/// What the launcher needs: the project, the call's temp folder and the secret patterns, and
/// optionally a folder of helper programs, more writable folders and one TCP port.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The daemon's own executable.
    pub program: PathBuf,
    /// The project root, readable (not writable) inside the sandbox.
    pub project: PathBuf,
    /// The call's own temp folder, writable inside the sandbox.
    pub tmp: PathBuf,
    /// Files matching these are not readable inside the sandbox.
    pub secrets: SecretSettings,
    /// A folder whose programs can be run (and read, not written): the `git` wrapper.
    pub bin: Option<PathBuf>,
    /// More folders that can be written (not run), e.g. an app's own data folder.
    pub writable: Vec<PathBuf>,
    /// One TCP port that can be bound and connected to (on any address: bind to 127.0.0.1).
    pub tcp_port: Option<u16>,
}

impl Launcher {
    /// A launcher for `project` with the temp folder `tmp` and nothing more.
    pub fn new(
        program: PathBuf,
        project: PathBuf,
        tmp: PathBuf,
        secrets: SecretSettings,
    ) -> Launcher {
        Launcher {
            program,
            project,
            tmp,
            secrets,
            bin: None,
            writable: Vec::new(),
            tcp_port: None,
        }
    }

    /// The words that come before the program:
    /// `__sandbox --project P --tmp T --secrets J [--bin B] [--write W]… [--tcp-port N] --`.
    pub fn args(&self) -> Vec<OsString> {
        let secrets = serde_json::to_string(&self.secrets).unwrap_or_else(|_| "{}".into());
        let mut args: Vec<OsString> = vec![
            SUBCOMMAND.into(),
            "--project".into(),
            self.project.clone().into(),
            "--tmp".into(),
            self.tmp.clone().into(),
            "--secrets".into(),
            secrets.into(),
        ];
        if let Some(bin) = &self.bin {
            args.push("--bin".into());
            args.push(bin.clone().into());
        }
        for dir in &self.writable {
            args.push("--write".into());
            args.push(dir.clone().into());
        }
        if let Some(port) = self.tcp_port {
            args.push("--tcp-port".into());
            args.push(port.to_string().into());
        }
        args.push("--".into());
        args
    }

    /// A `std` command that runs `program args…` in this sandbox.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(self.args()).arg(program);
        cmd
    }
}

/// What the launcher was asked to set up.
struct Request {
    project: PathBuf,
    tmp: PathBuf,
    bin: Option<PathBuf>,
    writable: Vec<PathBuf>,
    tcp_port: Option<u16>,
    secrets: SecretPatterns,
    command: Vec<OsString>,
}

/// The launcher's entry: `totemd __sandbox --project P --tmp T --secrets JSON [--bin B]
/// [--write W]… [--tcp-port N] -- PROGRAM ARGS…`. Restricts this process, runs PROGRAM as its
/// child, ends every process left below it, and exits with PROGRAM's status (128 + the signal
/// that ended it). Fails with exit code 126.
pub fn launch(args: Vec<OsString>) -> std::process::ExitCode {
    match restrict_and_run(args) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("totem sandbox: {e}");
            std::process::ExitCode::from(126)
        }
    }
}

fn parse(args: Vec<OsString>) -> Result<Request, String> {
    let mut project = None;
    let mut tmp = None;
    let mut bin = None;
    let mut writable = Vec::new();
    let mut tcp_port = None;
    let mut secrets = SecretSettings::default();
    let mut rest = args.into_iter();
    loop {
        let Some(arg) = rest.next() else {
            return Err("no command after `--`".into());
        };
        let value = |rest: &mut dyn Iterator<Item = OsString>| {
            rest.next()
                .ok_or_else(|| format!("{} needs a value", arg.to_string_lossy()))
        };
        match arg.to_str() {
            Some("--") => break,
            Some("--project") => project = Some(PathBuf::from(value(&mut rest)?)),
            Some("--tmp") => tmp = Some(PathBuf::from(value(&mut rest)?)),
            Some("--bin") => bin = Some(PathBuf::from(value(&mut rest)?)),
            Some("--write") => writable.push(PathBuf::from(value(&mut rest)?)),
            Some("--tcp-port") => {
                let text = value(&mut rest)?;
                let port = text
                    .to_str()
                    .and_then(|t| t.parse::<u16>().ok())
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("bad --tcp-port {}", text.to_string_lossy()))?;
                tcp_port = Some(port);
            }
            Some("--secrets") => {
                let text = value(&mut rest)?;
                secrets = serde_json::from_str(&text.to_string_lossy())
                    .map_err(|e| format!("bad --secrets: {e}"))?;
            }
            _ => return Err(format!("unknown argument {}", arg.to_string_lossy())),
        }
    }
    let project = project.ok_or("--project is missing")?;
    let tmp = tmp.ok_or("--tmp is missing")?;
    let secrets = SecretPatterns::from_settings(&secrets).map_err(|e| e.to_string())?;
    let command: Vec<OsString> = rest.collect();
    if command.is_empty() {
        return Err("no command after `--`".into());
    }
    Ok(Request {
        project,
        tmp,
        bin,
        writable,
        tcp_port,
        secrets,
        command,
    })
}

fn restrict_and_run(args: Vec<OsString>) -> Result<u8, String> {
    use nix::sys::signal::{SigSet, Signal};
    let request = parse(args)?;
    let Some((program, program_args)) = request.command.split_first() else {
        return Err("no command after `--`".into());
    };
    // Opened before the sandbox closes /proc: the list of this process's children, read again
    // after the command to find what it left running.
    let children =
        std::fs::File::open(format!("/proc/self/task/{}/children", std::process::id())).ok();
    // Orphans below the command (a `setsid` that left its group) become our children.
    nix::sys::prctl::set_child_subreaper(true)
        .map_err(|e| format!("cannot watch the command's processes: {e}"))?;
    let mut signals = SigSet::empty();
    for signal in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
    ] {
        signals.add(signal);
    }
    // Blocked here and waited for below; the command starts with an empty mask (std resets it).
    signals
        .thread_block()
        .map_err(|e| format!("cannot watch signals: {e}"))?;
    restrict(&request)?;
    refuse_sockets(request.tcp_port.is_some())?;
    let child = std::process::Command::new(program)
        .args(program_args)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.to_string_lossy()))?;
    let child_pid = nix::unistd::Pid::from_raw(
        i32::try_from(child.id()).map_err(|_| "the command's process id is out of range")?,
    );
    let mut code: Option<u8> = None;
    while code.is_none() {
        match signals.wait() {
            Ok(Signal::SIGCHLD) => code = reap(child_pid, false).or(code),
            Ok(signal) => {
                // Ended from outside (a timeout, an abort): the whole tree goes.
                code = Some(128u8.saturating_add(signal as u8));
            }
            Err(_) => {}
        }
    }
    end_tree(children.as_ref(), child_pid);
    Ok(code.unwrap_or(1))
}

/// Reaps children that ended; `Some(code)` once the command itself has. With `block`, waits for
/// one child to end first.
fn reap(command: nix::unistd::Pid, block: bool) -> Option<u8> {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let mut code = None;
    let mut flags = Some(WaitPidFlag::WNOHANG);
    if block {
        flags = None;
    }
    loop {
        match waitpid(None, flags) {
            Ok(WaitStatus::Exited(pid, status)) if pid == command => {
                code = Some(u8::try_from(status).unwrap_or(1));
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == command => {
                code = Some(128u8.saturating_add(signal as u8));
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return code,
            Ok(_) => {}
        }
        if block {
            return code;
        }
    }
}

/// Kills every process below the launcher until none is left: the command's leftovers, and
/// what they started, as each generation is handed to us. Without the children list (a kernel
/// without it) only what already ended is reaped.
fn end_tree(children: Option<&std::fs::File>, command: nix::unistd::Pid) {
    use std::io::{Read, Seek};
    let Some(mut file) = children else {
        let _ = reap(command, false);
        return;
    };
    for _ in 0..10_000 {
        let mut text = String::new();
        if file.rewind().is_err() || file.read_to_string(&mut text).is_err() {
            let _ = reap(command, false);
            return;
        }
        let pids: Vec<i32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        for pid in &pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if pids.is_empty() {
            // Nothing listed: reap what may have ended in between, and stop.
            let _ = reap(command, false);
            return;
        }
        // Wait for one to end; its children (if any) are ours by then.
        let _ = reap(command, true);
    }
}

/// Installs a seccomp filter on this process (inherited by the command): `socket()` and
/// `io_uring_setup` fail with EACCES. With `tcp`, `socket(AF_INET/AF_INET6, SOCK_STREAM)` is let
/// through (Landlock then allows only the one port). Landlock has set no_new_privs, which lets an
/// unprivileged process install it.
fn refuse_sockets(tcp: bool) -> Result<(), String> {
    use nix::libc;
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let failed = |e: &dyn std::fmt::Display| format!("cannot refuse sockets: {e}");
    let arch = std::env::consts::ARCH.try_into().map_err(|e| failed(&e))?;
    let cond = |arg: u8, op: SeccompCmpOp, value: i32| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value as u64)
    };
    let socket_rules = if tcp {
        // Refused: a domain other than IPv4/IPv6, or a type other than a stream.
        let mut rules = vec![
            SeccompRule::new(vec![
                cond(0, SeccompCmpOp::Ne, libc::AF_INET).map_err(|e| failed(&e))?,
                cond(0, SeccompCmpOp::Ne, libc::AF_INET6).map_err(|e| failed(&e))?,
            ])
            .map_err(|e| failed(&e))?,
        ];
        for kind in [
            libc::SOCK_DGRAM,
            libc::SOCK_RAW,
            libc::SOCK_RDM,
            libc::SOCK_SEQPACKET,
        ] {
            rules.push(
                SeccompRule::new(vec![
                    cond(1, SeccompCmpOp::MaskedEq(0xf), kind).map_err(|e| failed(&e))?,
                ])
                .map_err(|e| failed(&e))?,
            );
        }
        rules
    } else {
        // No rule: refused whatever its arguments.
        Vec::new()
    };
    let rules = [
        (libc::SYS_socket, socket_rules),
        (libc::SYS_io_uring_setup, vec![]),
    ];
    let filter = SeccompFilter::new(
        rules.into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(|e| failed(&e))?;
    let program: BpfProgram = filter.try_into().map_err(|e| failed(&e))?;
    seccompiler::apply_filter(&program).map_err(|e| failed(&e))
}

/// Rights on the project's folders that hold nothing unsafe: read, list.
fn folder_rights() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

/// Rights on one readable file inside a folder that also holds something unsafe.
fn file_rights() -> BitFlags<AccessFs> {
    AccessFs::ReadFile.into()
}

/// Rights on the project root and on folders that hold something unsafe: list the entries, no
/// file rights that would reach the unsafe ones.
fn entry_rights() -> BitFlags<AccessFs> {
    AccessFs::ReadDir.into()
}

/// Rights on the temp folder and other writable folders: everything but running programs and
/// making devices.
fn writable_rights(abi: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_all(abi)
        & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock)
        & !AccessFs::IoctlDev
}

/// System places that can be read (and run).
const SYSTEM: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/nix/store",
];

/// Files of `/etc` that programs read to start (the dynamic linker, users, time zone, git).
const ETC: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/gitconfig",
    "/etc/inputrc",
    "/etc/magic",
    "/etc/mime.types",
    "/etc/alternatives",
];

/// Devices every program may use.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

fn restrict(request: &Request) -> Result<(), String> {
    let abi = ABI_WANTED;
    let read_exec = AccessFs::from_read(abi);
    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    for place in SYSTEM.iter().chain(ETC) {
        rules.push((PathBuf::from(place), read_exec));
    }
    for device in DEVICES {
        rules.push((
            PathBuf::from(device),
            AccessFs::ReadFile | AccessFs::WriteFile,
        ));
    }
    rules.push((request.tmp.clone(), writable_rights(abi)));
    for dir in &request.writable {
        rules.push((dir.clone(), writable_rights(abi)));
    }
    if let Some(bin) = &request.bin {
        rules.push((bin.clone(), read_exec));
    }
    let project = request.project.as_path();
    let grants = readable(project, &request.secrets);
    if grants.whole_root {
        rules.push((project.to_path_buf(), folder_rights()));
    } else {
        rules.push((project.to_path_buf(), entry_rights()));
        for dir in &grants.folders {
            rules.push((dir.clone(), folder_rights()));
        }
        for dir in &grants.partial {
            rules.push((dir.clone(), entry_rights()));
        }
        for file in &grants.files {
            rules.push((file.clone(), file_rights()));
        }
    }
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| r.scope(Scope::from_all(abi)))
        .and_then(|r| r.create())
        .map_err(|e| format!("cannot create the sandbox: {e}"))?;
    for (path, access) in rules {
        // Places this system lacks (`/lib32`, `/nix/store`) are skipped.
        let Ok(fd) = PathFd::new(&path) else {
            continue;
        };
        let is_dir = std::fs::metadata(&path).is_ok_and(|m| m.is_dir());
        let access = if is_dir {
            access
        } else {
            access
                & (AccessFs::ReadFile
                    | AccessFs::WriteFile
                    | AccessFs::Truncate
                    | AccessFs::Execute
                    | AccessFs::IoctlDev)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("cannot add {} to the sandbox: {e}", path.display()))?;
    }
    if let Some(port) = request.tcp_port {
        ruleset = ruleset
            .add_rule(landlock::NetPort::new(
                port,
                AccessNet::BindTcp | AccessNet::ConnectTcp,
            ))
            .map_err(|e| format!("cannot allow port {port} in the sandbox: {e}"))?;
    }
    let status = ruleset
        .restrict_self()
        .map_err(|e| format!("cannot enter the sandbox: {e}"))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("the kernel did not enforce the sandbox; the command was not run".into());
    }
    Ok(())
}

/// What of the project the sandbox may read.
#[derive(Debug, Default)]
pub struct Grants {
    /// Nothing in the project is unsafe: grant it whole.
    pub whole_root: bool,
    /// Folders with nothing unsafe anywhere below them.
    pub folders: Vec<PathBuf>,
    /// Folders that hold something unsafe: their entries can be listed, not read.
    pub partial: Vec<PathBuf>,
    /// Readable files in partial folders.
    pub files: Vec<PathBuf>,
}

/// Walks the project (links are not followed) and sorts what a sandboxed command may read.
pub fn readable(project: &Path, secrets: &SecretPatterns) -> Grants {
    let mut grants = Grants::default();
    let mut budget = MAX_ENTRIES;
    grants.whole_root = walk(project, "", secrets, &mut grants, &mut budget);
    if grants.whole_root {
        grants.folders.clear();
        grants.partial.clear();
        grants.files.clear();
    }
    grants
}

/// Whether everything below `dir` is safe to read. When it is not, the safe entries are added
/// to `grants` one by one and `dir` is listed as partial.
fn walk(
    dir: &Path,
    rel: &str,
    secrets: &SecretPatterns,
    grants: &mut Grants,
    budget: &mut usize,
) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut safe_folders = Vec::new();
    let mut safe_files = Vec::new();
    let mut all_safe = true;
    for entry in entries {
        let Ok(entry) = entry else {
            all_safe = false;
            continue;
        };
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let child_rel = if rel.is_empty() {
            name.to_string()
        } else {
            format!("{rel}/{name}")
        };
        let path = entry.path();
        let Ok(meta) = entry.metadata() else {
            all_safe = false;
            continue;
        };
        let kind = meta.file_type();
        if secrets.is_secret(&child_rel) {
            all_safe = false;
        } else if kind.is_dir() {
            if walk(&path, &child_rel, secrets, grants, budget) {
                safe_folders.push(path);
            } else {
                all_safe = false;
            }
        } else if kind.is_symlink() {
            // The kernel checks the file a link leads to against these same rules.
        } else if kind.is_file() && meta.nlink() == 1 {
            safe_files.push(path);
        } else {
            // A hard-linked file, a FIFO, a socket, a device.
            all_safe = false;
        }
    }
    if !all_safe {
        grants.partial.push(dir.to_path_buf());
        grants.folders.extend(safe_folders);
        grants.files.extend(safe_files);
    }
    all_safe
}
