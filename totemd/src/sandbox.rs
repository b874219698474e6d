//! The kernel sandbox (Linux Landlock) for the commands Totem runs without asking.
//!
//! A command the built-in rules allow (`cat`, `grep -r`, `git status` …) was checked by its words
//! only; what it really opens is decided at run time (symlinks, globs, brace expansion, `cd` with
//! no argument). So the daemon starts such a command through itself, `totemd __sandbox …`, which
//! restricts its own process with Landlock and then executes `bash -c COMMAND`. Inside:
//!
//! - system folders (`/usr`, `/bin`, `/lib*`, `/opt`, a few files of `/etc`) can be read and run;
//! - the project can be read, except secret files, files with more than one hard link (they may
//!   be the same file as one outside, or a secret under another name) and anything that is not a
//!   regular file, folder or symlink (FIFOs, sockets, devices); symlinks are followed by the
//!   kernel and the file they lead to must itself be readable here;
//! - the project and the call's temp folder can be written (`TMPDIR` points at the latter);
//! - nothing else: not the home folder, not `/proc` (other processes' environments), not
//!   `/tmp`; no TCP connections, no signals to processes outside the sandbox;
//! - no Unix sockets: Landlock confines connecting to one by its path only from ABI 9 on, so a
//!   seccomp filter refuses `socket(AF_UNIX, …)` (and io_uring, which makes sockets without that
//!   call); a confined command cannot talk to the Docker daemon, an SSH agent or totemd itself.
//!
//! A command the user approved (a rule they wrote, an answer) runs as the user, unsandboxed. The
//! workspace denies unsafe code, so there is no `pre_exec` hook: the launcher is a separate
//! process image that sandboxes itself before the `exec`.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
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
                "Landlock (ABI {abi}): commands run without asking can read system folders and the project (not its secret files) and write only the project and a temp folder; they open no Unix socket (seccomp)"
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

/// What the launcher needs: the project, the call's temp folder and the secret patterns.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The daemon's own executable.
    pub program: PathBuf,
    /// The project root, writable inside the sandbox.
    pub project: PathBuf,
    /// The call's own temp folder, writable inside the sandbox.
    pub tmp: PathBuf,
    /// Files matching these are not readable inside the sandbox.
    pub secrets: SecretSettings,
}

impl Launcher {
    /// The words that come before the shell: `__sandbox --project P --tmp T --secrets J --`.
    pub fn args(&self) -> Vec<OsString> {
        let secrets = serde_json::to_string(&self.secrets).unwrap_or_else(|_| "{}".into());
        vec![
            SUBCOMMAND.into(),
            "--project".into(),
            self.project.clone().into(),
            "--tmp".into(),
            self.tmp.clone().into(),
            "--secrets".into(),
            secrets.into(),
            "--".into(),
        ]
    }
}

/// The launcher's entry: `totemd __sandbox --project P --tmp T --secrets JSON -- PROGRAM ARGS…`.
/// Restricts this process and executes PROGRAM; returns only on failure (exit code 126).
pub fn launch(args: Vec<OsString>) -> std::process::ExitCode {
    match restrict_and_exec(args) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("totem sandbox: {e}");
            std::process::ExitCode::from(126)
        }
    }
}

enum Never {}

fn restrict_and_exec(args: Vec<OsString>) -> Result<Never, String> {
    let mut project = None;
    let mut tmp = None;
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
    let patterns = SecretPatterns::from_settings(&secrets).map_err(|e| e.to_string())?;
    let command: Vec<OsString> = rest.collect();
    let Some((program, program_args)) = command.split_first() else {
        return Err("no command after `--`".into());
    };
    restrict(&project, &tmp, &patterns)?;
    refuse_unix_sockets()?;
    let error = std::process::Command::new(program)
        .args(program_args)
        .exec();
    Err(format!("cannot run {}: {error}", program.to_string_lossy()))
}

/// Installs a seccomp filter on this process (inherited by the command): `socket(AF_UNIX, …)` and
/// `io_uring_setup` fail with EACCES. Landlock has set no_new_privs, which lets an unprivileged
/// process install it.
fn refuse_unix_sockets() -> Result<(), String> {
    use nix::libc;
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let failed = |e: &dyn std::fmt::Display| format!("cannot refuse Unix sockets: {e}");
    let arch = std::env::consts::ARCH.try_into().map_err(|e| failed(&e))?;
    let unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_UNIX as u64,
    )
    .and_then(|domain| SeccompRule::new(vec![domain]))
    .map_err(|e| failed(&e))?;
    let rules = [
        (libc::SYS_socket, vec![unix]),
        // No rule: refused whatever its arguments.
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

/// Rights on the project's folders that hold nothing unsafe.
fn folder_rights(abi: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_all(abi)
        & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock)
        & !AccessFs::IoctlDev
}

/// Rights on one readable file inside a folder that also holds something unsafe.
fn file_rights() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate
}

/// Rights on the project root and on folders that hold something unsafe: list, create and
/// remove entries, but no file rights that would reach the unsafe entries.
fn entry_rights(abi: ABI) -> BitFlags<AccessFs> {
    (AccessFs::ReadDir
        | AccessFs::MakeReg
        | AccessFs::MakeDir
        | AccessFs::MakeSym
        | AccessFs::MakeFifo
        | AccessFs::MakeSock
        | AccessFs::RemoveFile
        | AccessFs::RemoveDir
        | AccessFs::Refer)
        & AccessFs::from_all(abi)
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

fn restrict(project: &Path, tmp: &Path, secrets: &SecretPatterns) -> Result<(), String> {
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
    rules.push((tmp.to_path_buf(), folder_rights(abi)));
    let grants = readable(project, secrets);
    if grants.whole_root {
        rules.push((project.to_path_buf(), folder_rights(abi)));
    } else {
        rules.push((project.to_path_buf(), entry_rights(abi)));
        for dir in &grants.folders {
            rules.push((dir.clone(), folder_rights(abi)));
        }
        for dir in &grants.partial {
            rules.push((dir.clone(), entry_rights(abi)));
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
