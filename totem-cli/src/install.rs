//! What installing Totem needs from the command line: `totem daemon install` (the systemd user
//! units from packaging/, with this machine's paths) and `totem man` (the man pages, generated from
//! the clap definitions like the completions).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::Cli;
use crate::daemon::Endpoint;
use crate::exit::Exit;

/// The units as shipped in packaging/: one source for the files and for `daemon install`.
pub const SERVICE_UNIT: &str = include_str!("../../packaging/totemd.service");
pub const SOCKET_UNIT: &str = include_str!("../../packaging/totemd.socket");

/// The placeholder path of totemd in [`SERVICE_UNIT`], replaced by the real one on install.
const EXEC_PLACEHOLDER: &str = "ExecStart=%h/.local/bin/totemd";
/// The socket line of [`SOCKET_UNIT`]: where `totem` looks when only XDG_RUNTIME_DIR is set.
const LISTEN_DEFAULT: &str = "ListenStream=%t/totem/totemd.sock";

/// The two unit files, ready to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Units {
    pub service: String,
    pub socket: String,
}

/// What the units must agree on with `totem`: totemd's path, the socket `totem` will use, and
/// the home when TOTEM_HOME chose it.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    pub totemd: &'a Path,
    pub socket: &'a Path,
    /// `$XDG_RUNTIME_DIR` as `totem` sees it (systemd's `%t`).
    pub runtime_dir: Option<&'a Path>,
    /// `$TOTEM_HOME`, when set.
    pub totem_home: Option<&'a Path>,
}

/// Fills the shipped units in for `target`. The socket stays `%t/totem/totemd.sock` when that is
/// where `totem` looks; otherwise (TOTEM_HOME, `--socket`, no XDG_RUNTIME_DIR) it is written out,
/// so that the client and the socket unit always meet.
pub fn render(target: &Target<'_>) -> Units {
    let mut exec = format!("ExecStart={}", unit_quote(&target.totemd.to_string_lossy()));
    if let Some(home) = target.totem_home {
        exec = format!(
            "Environment={}\n{exec}",
            unit_quote(&format!("TOTEM_HOME={}", home.display()))
        );
    }
    let service = SERVICE_UNIT.replace(EXEC_PLACEHOLDER, &exec);
    let default_socket = target
        .runtime_dir
        .map(|dir| dir.join("totem").join(totem_protocol::socket::SOCKET_FILE));
    let socket = match default_socket.as_deref() == Some(target.socket) {
        true => SOCKET_UNIT.to_string(),
        // ListenStream takes the path as it is (no quoting); systemd's specifier is `%%`.
        false => SOCKET_UNIT.replace(
            LISTEN_DEFAULT,
            &format!(
                "ListenStream={}",
                target.socket.to_string_lossy().replace('%', "%%")
            ),
        ),
    };
    Units { service, socket }
}

/// Quotes a value for a unit file line when it needs it (spaces, quotes, backslashes, `%`).
fn unit_quote(value: &str) -> String {
    let value = value.replace('%', "%%");
    if value
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\\' || c == '\'')
    {
        format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        value
    }
}

/// `~/.config/systemd/user` (or `$XDG_CONFIG_HOME/systemd/user`).
fn unit_dir() -> anyhow::Result<PathBuf> {
    let config = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(|h| PathBuf::from(h).join(".config"))
            .context("cannot find the systemd user folder: set HOME")?,
    };
    Ok(config.join("systemd").join("user"))
}

fn systemctl_available() -> bool {
    Command::new("systemctl")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The commands that activate the units once written.
const ENABLE_COMMANDS: [&[&str]; 2] = [
    &["systemctl", "--user", "daemon-reload"],
    &["systemctl", "--user", "enable", "--now", "totemd.socket"],
];

/// `totem daemon install [--print]`.
pub async fn install_command(endpoint: &Endpoint, print: bool) -> anyhow::Result<Exit> {
    let totemd = crate::daemon::find_totemd()?;
    let totemd = totemd.canonicalize().unwrap_or(totemd);
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let totem_home = std::env::var_os("TOTEM_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let units = render(&Target {
        totemd: &totemd,
        socket: &endpoint.socket,
        runtime_dir: runtime_dir.as_deref(),
        totem_home: totem_home.as_deref(),
    });
    let dir = unit_dir()?;
    let service_path = dir.join("totemd.service");
    let socket_path = dir.join("totemd.socket");
    let commands: Vec<String> = ENABLE_COMMANDS.iter().map(|c| c.join(" ")).collect();
    if print {
        println!("# {}\n{}", service_path.display(), units.service);
        println!("# {}\n{}", socket_path.display(), units.socket);
        println!("# then:\n{}", commands.join("\n"));
        return Ok(Exit::Success);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (path, text) in [
        (&service_path, &units.service),
        (&socket_path, &units.socket),
    ] {
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    if !systemctl_available() {
        println!(
            "systemctl is not available here: once a systemd user session runs, enable the socket with\n  {}",
            commands.join("\n  ")
        );
        return Ok(Exit::Success);
    }
    // A totemd started by hand holds the socket the unit is about to take over: stop it first.
    if !systemd_owns_daemon()
        && let Some(connection) = crate::daemon::connect(endpoint).await?
    {
        drop(connection);
        println!("stopping the totemd that runs outside systemd");
        crate::daemon::stop_command(endpoint).await?;
    }
    for command in ENABLE_COMMANDS {
        let status = Command::new(command[0])
            .args(&command[1..])
            .status()
            .with_context(|| format!("cannot run `{}`", command.join(" ")))?;
        if !status.success() {
            anyhow::bail!(
                "`{}` failed ({status}). The unit files are written; fix the user session (is `systemctl --user status` working?) and run:\n  {}",
                command.join(" "),
                commands.join("\n  ")
            );
        }
    }
    println!(
        "enabled totemd.socket: totemd starts on the first connection to {}. Check it with `totem doctor`",
        endpoint.socket.display()
    );
    Ok(Exit::Success)
}

/// Whether systemd already runs totemd (so the daemon answering is the unit's).
fn systemd_owns_daemon() -> bool {
    Command::new("systemctl")
        .args(["--user", "is-active", "--quiet", "totemd.service"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `totem man [--out DIR]`: the man page of `totem` on stdout, or one page per command in DIR.
pub fn man_command(out: Option<&Path>) -> anyhow::Result<()> {
    let command = Cli::command();
    match out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("cannot write the man pages in {}", dir.display()))?;
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            clap_mangen::Man::new(command)
                .render(&mut stdout)
                .context("cannot write the man page")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_socket_keeps_the_runtime_specifier() {
        let units = render(&Target {
            totemd: Path::new("/opt/totem/bin/totemd"),
            socket: Path::new("/run/user/1000/totem/totemd.sock"),
            runtime_dir: Some(Path::new("/run/user/1000")),
            totem_home: None,
        });
        assert!(units.socket.contains("ListenStream=%t/totem/totemd.sock"));
        assert!(
            units
                .service
                .contains("\nExecStart=/opt/totem/bin/totemd\n")
        );
        assert!(!units.service.contains("TOTEM_HOME"));
        assert!(!units.service.contains(EXEC_PLACEHOLDER));
    }

    #[test]
    fn totem_home_socket_is_written_out_and_home_passed() {
        let units = render(&Target {
            totemd: Path::new("/home/a b/bin/totemd"),
            socket: Path::new("/srv/totem/run/totemd.sock"),
            runtime_dir: Some(Path::new("/run/user/1000")),
            totem_home: Some(Path::new("/srv/totem")),
        });
        assert!(
            units
                .socket
                .contains("\nListenStream=/srv/totem/run/totemd.sock\n")
        );
        assert!(
            units
                .service
                .contains("Environment=TOTEM_HOME=/srv/totem\n")
        );
        assert!(
            units
                .service
                .contains("ExecStart=\"/home/a b/bin/totemd\"\n")
        );
    }

    #[test]
    fn man_page_names_the_commands() {
        let mut page = Vec::new();
        clap_mangen::Man::new(Cli::command())
            .render(&mut page)
            .unwrap_or_else(|e| panic!("render: {e}"));
        let page = String::from_utf8_lossy(&page);
        assert!(page.contains(".TH totem"), "{page}");
        assert!(page.contains("daemon"));
    }
}
