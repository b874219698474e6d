//! `totem --version`, `totem daemon start|status|stop`, auto-start, `totem sessions`, help,
//! completions and the errors when totemd cannot be found.

mod cli_common;

use cli_common::{Cli, assert_exit, session_ids, stderr, stdout};

#[test]
fn version_answers_without_a_daemon() {
    let cli = Cli::new();
    let out = cli.run(["--version"]);
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out).trim(),
        format!("totem {}", env!("CARGO_PKG_VERSION"))
    );
    assert!(
        !cli.socket().exists(),
        "--version must not start the daemon"
    );
}

#[test]
fn daemon_start_status_stop() {
    let cli = Cli::new();
    let out = cli.run(["daemon", "status"]);
    assert_exit(&out, 3);
    assert!(
        stderr(&out).contains("totem daemon start"),
        "{}",
        stderr(&out)
    );

    let out = cli.run(["daemon", "start"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("started totemd"), "{}", stdout(&out));
    assert!(cli.socket().exists());

    let out = cli.run(["daemon", "start"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("already running"), "{}", stdout(&out));

    let out = cli.run(["daemon", "status"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let pid = cli.daemon_pid().expect("pid in the lock file");
    assert!(text.contains(&format!("pid          {pid}")), "{text}");
    assert!(text.contains(&cli.socket().display().to_string()), "{text}");
    assert!(text.contains("uptime") && text.contains("store"), "{text}");

    let out = cli.run(["daemon", "status", "--json"]);
    assert_exit(&out, 0);
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(status["pid"], pid);

    let out = cli.run(["daemon", "stop"]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains(&format!("stopped totemd (pid {pid})")),
        "{}",
        stdout(&out)
    );
    assert!(
        !cli.socket().exists(),
        "the socket is gone once stop returns"
    );

    let out = cli.run(["daemon", "stop"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("not running"), "{}", stdout(&out));
}

#[test]
fn sessions_starts_the_daemon_when_it_is_not_running() {
    let cli = Cli::new();
    assert!(!cli.socket().exists());
    let out = cli.run(["sessions", "--json"]);
    assert_exit(&out, 0);
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).expect("page JSON");
    assert_eq!(page["items"], serde_json::json!([]));
    assert!(cli.socket().exists(), "the daemon was started");
    let out = cli.run(["sessions"]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("No sessions yet"), "{}", stdout(&out));
}

#[test]
fn sessions_json_lists_the_project_sessions_newest_first() {
    let cli = Cli::new();
    cli.run(["run", "first question"]);
    cli.run(["run", "second question"]);
    let other = tempfile::tempdir().expect("other project");
    cli.command(["run", "elsewhere"])
        .current_dir(other.path())
        .output()
        .expect("run");

    let out = cli.run(["sessions", "--json", "--project", "."]);
    assert_exit(&out, 0);
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).expect("page JSON");
    let items = page["items"].as_array().expect("items");
    assert_eq!(items.len(), 2, "{page:#}");
    assert_eq!(items[0]["title"], "second question");
    assert_eq!(items[1]["title"], "first question");
    assert_eq!(items[0]["messageCount"], 1);

    let out = cli.run(["sessions"]);
    assert_exit(&out, 0);
    let table = stdout(&out);
    assert!(table.starts_with("ID"), "{table}");
    assert_eq!(
        table.lines().count(),
        4,
        "a header and three sessions: {table}"
    );
    assert!(table.contains("elsewhere"), "{table}");
}

#[test]
fn a_missing_totemd_says_where_it_looked_and_what_to_do() {
    let cli = Cli::new();
    let alone = tempfile::tempdir().expect("bin dir");
    let totem = alone.path().join("totem");
    // A hard link, not a copy: a copy's write descriptor, inherited by a process another test
    // forks meanwhile, makes exec fail with "Text file busy".
    if std::fs::hard_link(cli_common::binary("totem"), &totem).is_err() {
        std::fs::copy(cli_common::binary("totem"), &totem).expect("copy totem");
    }
    let run = || {
        std::process::Command::new(&totem)
            .args(["run", "hi"])
            .current_dir(cli.project.path())
            .env("TOTEM_HOME", cli.home())
            .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
            .env("PATH", alone.path())
            .output()
    };
    let mut out = run();
    for _ in 0..50 {
        match &out {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                out = run();
            }
            _ => break,
        }
    }
    let out = out.expect("run totem");
    assert_exit(&out, 3);
    let err = stderr(&out);
    assert!(err.contains("cannot find totemd"), "{err}");
    assert!(
        err.contains("PATH") && err.contains("cargo build -p totemd"),
        "{err}"
    );
}

#[test]
fn bad_usage_exits_2_and_help_documents_the_exit_codes() {
    let cli = Cli::new();
    assert_exit(&cli.run(["run"]), 2);
    assert_exit(
        &cli.run(["run", "--session", "ses_x", "--continue", "hi"]),
        2,
    );
    assert_exit(&cli.run(["run", "--reasoning", "extreme", "hi"]), 2);
    assert_exit(&cli.run(["no-such-command"]), 2);
    let out = cli.run(["run", "--help"]);
    assert_exit(&out, 0);
    let help = stdout(&out);
    for line in [
        "0  success",
        "2  bad usage",
        "3  totemd is unreachable",
        "4  a permission",
    ] {
        assert!(help.contains(line), "missing {line:?} in:\n{help}");
    }
    assert!(
        !cli.socket().exists(),
        "usage errors never start the daemon"
    );
}

#[test]
fn completions_are_generated_for_each_shell() {
    let cli = Cli::new();
    for (shell, marker) in [
        ("bash", "_totem()"),
        ("zsh", "#compdef totem"),
        ("fish", "complete -c totem"),
    ] {
        let out = cli.run(["completions", shell]);
        assert_exit(&out, 0);
        let script = stdout(&out);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(
            script.contains("sessions") && script.contains("attach"),
            "{shell}"
        );
    }
}

#[test]
fn socket_option_starts_and_finds_the_daemon_there() {
    let cli = Cli::new();
    let dir = tempfile::tempdir().expect("socket dir");
    let socket = dir.path().join("elsewhere.sock");
    let socket_arg = socket.to_str().expect("utf-8 path");
    let out = cli.run(["--socket", socket_arg, "daemon", "start"]);
    assert_exit(&out, 0);
    assert!(socket.exists(), "the daemon listens on --socket");
    assert!(!cli.socket().exists(), "and not on the default socket");
    let out = cli.run(["daemon", "status", "--socket", socket_arg]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains(socket_arg), "{}", stdout(&out));
    let out = cli.run(["--socket", socket_arg, "daemon", "stop"]);
    assert_exit(&out, 0);
    assert!(!socket.exists());
}

/// A listener at `path` nobody answers on, and whether anything connected to it.
fn fake_socket(path: &std::path::Path) -> std::os::unix::net::UnixListener {
    let listener = std::os::unix::net::UnixListener::bind(path).expect("bind a fake socket");
    listener.set_nonblocking(true).expect("nonblocking");
    listener
}

fn connected(listener: &std::os::unix::net::UnixListener) -> bool {
    listener.accept().is_ok()
}

fn chmod(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn the_cli_sends_nothing_to_a_socket_others_can_change() {
    // A socket at the default path that anyone could have replaced (mode 0666).
    let cli = Cli::new();
    let run_dir = cli.socket().parent().expect("folder").to_path_buf();
    std::fs::create_dir_all(&run_dir).expect("run folder");
    chmod(&run_dir, 0o700);
    let listener = fake_socket(&cli.socket());
    chmod(&cli.socket(), 0o666);
    let out = cli.run(["sessions"]);
    assert_exit(&out, 3);
    let err = stderr(&out);
    assert!(
        err.contains("not talking to")
            && err.contains("the socket can be changed by other users (mode 666)")
            && err.contains("nothing was sent"),
        "{err}"
    );
    assert!(
        !connected(&listener),
        "the CLI connected to the fake socket"
    );

    // A socket of the right mode in a folder anyone can write to (`--socket`).
    let cli = Cli::new();
    let open_dir = tempfile::tempdir().expect("open folder");
    chmod(open_dir.path(), 0o777);
    let socket = open_dir.path().join("totemd.sock");
    let listener = fake_socket(&socket);
    chmod(&socket, 0o600);
    let out = cli.run(["--socket".as_ref(), socket.as_os_str(), "sessions".as_ref()]);
    assert_exit(&out, 3);
    let err = stderr(&out);
    assert!(
        err.contains("its folder can be changed by other users (mode 777)"),
        "{err}"
    );
    assert!(
        !connected(&listener),
        "the CLI connected to the fake socket"
    );
}

#[test]
fn the_cli_sends_nothing_to_a_server_of_another_user() {
    use std::os::unix::process::CommandExt as _;
    if nix::unistd::geteuid().as_raw() != 0 {
        eprintln!("skipped: starting a listener as another user needs root");
        return;
    }
    // A listener run as `nobody`, its socket then handed to us: owner and modes pass, the
    // peer's credentials do not.
    let cli = Cli::new();
    let dir = tempfile::tempdir().expect("folder");
    chmod(dir.path(), 0o777);
    let socket = dir.path().join("totemd.sock");
    let script = format!(
        "import socket,time\ns=socket.socket(socket.AF_UNIX)\ns.bind({:?})\ns.listen()\nprint('up',flush=True)\nc,_=s.accept()\nprint('CONNECTED',flush=True)\ntime.sleep(5)",
        socket.display().to_string()
    );
    let mut child = std::process::Command::new("python3");
    child
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped());
    // SAFETY: setgid/setuid are async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        child.pre_exec(|| {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = child.spawn().expect("python3 as nobody");
    let mut stdout_pipe = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout_pipe, &mut line).expect("listener up");
    assert_eq!(line.trim(), "up");
    nix::unistd::chown(&socket, Some(0.into()), Some(0.into())).expect("chown socket");
    chmod(&socket, 0o600);
    chmod(dir.path(), 0o700);

    let out = cli.run(["--socket".as_ref(), socket.as_os_str(), "sessions".as_ref()]);
    let _ = child.kill();
    let _ = child.wait();
    assert_exit(&out, 3);
    let err = stderr(&out);
    assert!(
        err.contains("the program listening there runs as user 65534, not as you (user 0)"),
        "{err}"
    );
}

#[test]
fn sessions_rm_asks_then_deletes_and_refuses_without_a_terminal_or_yes() {
    use expectrl::{Expect, Session};
    let cli = Cli::new();
    cli.run(["run", "keep me"]);
    cli.run(["run", "delete me"]);
    let ids = session_ids(&cli);
    assert_eq!(ids.len(), 2);
    let (doomed, kept) = (ids[0].clone(), ids[1].clone());

    // No terminal to ask on: nothing is deleted, and the error says what to do.
    let out = cli.run_with_input(&["sessions", "rm", &doomed], "y\n");
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert_eq!(session_ids(&cli).len(), 2);

    // In a terminal: the question names the session; "n" keeps it, "y" deletes it.
    for (answer, gone) in [("n", false), ("y", true)] {
        let mut pty = Session::spawn(cli.command(["sessions", "rm", &doomed])).expect("pty");
        pty.set_expect_timeout(Some(std::time::Duration::from_secs(20)));
        pty.expect("Delete the session “delete me”")
            .expect("the question");
        pty.send(format!("{answer}\r")).expect("answer");
        let said = if gone {
            "Deleted the session"
        } else {
            "Kept the session"
        };
        pty.expect(said).expect("the outcome");
        assert_eq!(session_ids(&cli).contains(&doomed), !gone);
    }
    assert_eq!(session_ids(&cli), vec![kept.clone()]);

    // --yes deletes without a question; an unknown id says how to list them.
    let out = cli.run(["sessions", "rm", "--yes", &kept]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("keep me"), "{}", stdout(&out));
    assert!(session_ids(&cli).is_empty());
    let out = cli.run(["sessions", "rm", "--yes", &kept]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("totem sessions"), "{}", stderr(&out));
}
