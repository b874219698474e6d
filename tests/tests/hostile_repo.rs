//! A hostile repository against the real daemon: commands an AGENTS.md names run only after the
//! user says yes (and ask again when their text changes), whatever else the run was allowed.

mod agent_common;

use agent_common::{Env, follow_replying, results, text, tool, write_file};
use serde_json::{Value, json};
use totem_protocol::{EventKind, PermissionQuestion, SessionEvent};

/// One run in which the model writes `rel` (with only `--allow edit`), answered with `reply`.
async fn edit_run(
    env: &Env,
    rel: &str,
    reply: Value,
) -> (Vec<SessionEvent>, Vec<PermissionQuestion>) {
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": rel, "content": "x\n"}),
    )]);
    env.push(vec![text("ok")]);
    let mut stream = env.subscribe().await;
    let run = env.prompt("write it", json!({"allow": ["edit"]})).await;
    follow_replying(env, &mut stream, &run, Some(reply)).await
}

fn deny() -> Value {
    json!({"type": "deny"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_agents_md_check_asks_and_does_not_run_when_denied() {
    let env = Env::start().await;
    write_file(
        env.project.path(),
        "AGENTS.md",
        "# demo\n\n- check: `touch pwned-check`\n- format: `ls {file} > /dev/null; touch pwned-format`\n",
    );
    let (events, questions) = edit_run(&env, "a.txt", deny()).await;
    assert_eq!(questions.len(), 2, "both commands ask: {questions:#?}");
    for q in &questions {
        assert_eq!(q.kind, totem_protocol::QuestionKind::Execute);
        assert!(q.explanation.contains("AGENTS.md"), "{}", q.explanation);
    }
    assert!(questions[0].target.contains("touch pwned-format"));
    assert!(questions[1].target.contains("touch pwned-check"));
    assert!(!env.project.path().join("pwned-check").exists());
    assert!(!env.project.path().join("pwned-format").exists());
    let output = &results(&events)[0].1;
    assert!(output.contains("was not run"), "{output}");
    assert_eq!(env.file("a.txt"), "x\n", "the edit itself went through");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_allowed_command_from_agents_md_still_asks_the_first_time() {
    let env = Env::start().await;
    write_file(env.project.path(), "AGENTS.md", "- check: `cat {file}`\n");
    let (events, questions) = edit_run(&env, "a.txt", json!({"type": "once"})).await;
    assert_eq!(questions.len(), 1, "{questions:#?}");
    assert_eq!(questions[0].target, "cat 'a.txt'");
    let output = &results(&events)[0].1;
    assert!(output.contains("Check `cat 'a.txt'` passed."), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_written_agents_md_cannot_run_its_commands_in_the_next_run() {
    let env = Env::start().await;
    // Run 1: the model, allowed to edit, writes an AGENTS.md with its own check.
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "AGENTS.md", "content": "- check: `touch pwned`\n"}),
    )]);
    env.push(vec![text("ok")]);
    let mut stream = env.subscribe().await;
    let run = env.prompt("set up", json!({"allow": ["edit"]})).await;
    let (_, questions) = follow_replying(&env, &mut stream, &run, Some(deny())).await;
    assert!(questions.is_empty(), "{questions:#?}");
    // Run 2: the next edit meets the check; it asks, is refused, and nothing runs.
    let (_, questions) = edit_run(&env, "b.txt", deny()).await;
    assert_eq!(questions.len(), 1, "{questions:#?}");
    assert!(questions[0].explanation.contains("AGENTS.md"));
    assert!(!env.project.path().join("pwned").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_remembers_the_exact_command_and_a_changed_one_asks_again() {
    let env = Env::start().await;
    write_file(env.project.path(), "AGENTS.md", "- check: `touch one`\n");
    let (_, questions) = edit_run(&env, "a.txt", json!({"type": "alwaysProject"})).await;
    assert_eq!(questions.len(), 1);
    assert!(env.project.path().join("one").exists());
    assert_eq!(
        questions[0].always,
        json!({"bash": {"touch one": "allow"}}),
        "always remembers the exact text"
    );

    std::fs::remove_file(env.project.path().join("one")).expect("remove");
    let (_, questions) = edit_run(&env, "a.txt", deny()).await;
    assert!(questions.is_empty(), "remembered: {questions:#?}");
    assert!(env.project.path().join("one").exists(), "it ran again");

    write_file(
        env.project.path(),
        "AGENTS.md",
        "- check: `touch one two`\n",
    );
    let (_, questions) = edit_run(&env, "a.txt", deny()).await;
    assert_eq!(questions.len(), 1, "the changed text asks: {questions:#?}");
    assert!(!env.project.path().join("two").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_from_the_users_settings_run_without_a_question() {
    let env = Env::start().await;
    let path = env.daemon.home.join("settings.json");
    let mut settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("settings")).expect("json");
    settings["check"] = json!(["touch trusted"]);
    std::fs::write(&path, settings.to_string()).expect("write settings");
    let (_, questions) = edit_run(&env, "a.txt", deny()).await;
    assert!(questions.is_empty(), "{questions:#?}");
    assert!(env.project.path().join("trusted").exists());
}

/// The adversarial suite (see `totem_tests::hostile`): every attack holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attack_of_a_hostile_tree_holds() {
    let suite = totem_tests::hostile::Suite::start().await;
    let mut failed = Vec::new();
    for attack in totem_tests::hostile::attacks() {
        let outcome = suite.attack(&attack).await;
        if !outcome.held {
            failed.push(format!("{}: {}", outcome.name, outcome.detail));
        }
    }
    assert!(
        failed.is_empty(),
        "attacks that got through:\n{}",
        failed.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_provider_echoes_is_not_shown_stored_or_logged() {
    const KEY: &str = "sk-echoed-5e1f0a9c7b3d";
    let env = Env::start().await;
    env.client
        .call_raw(
            "provider.add",
            json!({"name": "keyed", "kind": "ollama", "url": env.sim.url(),
                   "key": KEY, "defaultModel": "llama3.2:latest", "maxRetries": 0}),
        )
        .await
        .expect("provider.add");
    env.sim.push(totem_tests::sim::Reply::error(
        401,
        format!("Incorrect API key provided: {KEY}."),
    ));
    let mut stream = env.subscribe().await;
    let run = env
        .prompt("hi", json!({"model": "keyed/llama3.2:latest"}))
        .await;
    let (events, _) = follow_replying(&env, &mut stream, &run, Some(deny())).await;
    let failed = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::RunFailed { run } => run.error.clone(),
            _ => None,
        })
        .expect("the run fails");
    assert!(failed.contains("[redacted]"), "{failed}");
    // Nothing the clients see, nothing in the store, nothing in the log.
    let shown = serde_json::to_string(&events).expect("json");
    assert!(!shown.contains(KEY), "an event holds the key");
    let stored = env
        .client
        .call_raw("run.get", json!({"runId": run}))
        .await
        .expect("run.get");
    assert!(!stored.to_string().contains(KEY), "{stored}");
    let mut replayed = env.subscribe().await;
    while let Ok(Some(Ok(e))) =
        tokio::time::timeout(std::time::Duration::from_millis(300), replayed.next()).await
    {
        assert!(!serde_json::to_string(&e).unwrap_or_default().contains(KEY));
    }
    for entry in std::fs::read_dir(env.daemon.home.join("logs")).expect("logs") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).unwrap_or_default();
        assert!(!text.contains(KEY), "the log holds the key");
    }
}

/// `python3` connecting to the Unix socket at `socket`, run as is or through `launcher`.
fn connect_to(socket: &std::path::Path, launcher: &[std::ffi::OsString]) -> std::process::Output {
    let script = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\nprint('connected')";
    let mut command = match launcher.split_first() {
        Some((program, args)) => {
            let mut command = std::process::Command::new(program);
            command.args(args).arg("python3");
            command
        }
        None => std::process::Command::new("python3"),
    };
    command
        .args(["-c", script])
        .arg(socket)
        .output()
        .expect("python3")
}

#[test]
fn a_confined_command_cannot_reach_a_unix_socket() {
    // Landlock confines Unix sockets from ABI 9 on; below, the launcher's seccomp filter does.
    let dir = tempfile::tempdir().expect("temp");
    let project = dir.path().join("proj");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&project).expect("project");
    std::fs::create_dir_all(&tmp).expect("tmp");
    // A daemon's socket outside the project (an SSH agent, Docker, totemd) and one inside.
    let outside = dir.path().join("agent.sock");
    let inside = project.join("app.sock");
    let _listeners = [&outside, &inside]
        .map(|path| std::os::unix::net::UnixListener::bind(path).expect("listen on a Unix socket"));
    let launcher: Vec<std::ffi::OsString> = vec![
        totem_tests::harness::binary("totemd").into(),
        "__sandbox".into(),
        "--project".into(),
        project.clone().into(),
        "--tmp".into(),
        tmp.into(),
        "--secrets".into(),
        "{}".into(),
        "--".into(),
    ];
    for socket in [&outside, &inside] {
        let free = connect_to(socket, &[]);
        assert_eq!(String::from_utf8_lossy(&free.stdout).trim(), "connected");
        let confined = connect_to(socket, &launcher);
        let stderr = String::from_utf8_lossy(&confined.stderr);
        assert!(!confined.status.success(), "{stderr}");
        assert!(confined.stdout.is_empty(), "{stderr}");
        assert!(stderr.contains("Permission denied"), "{stderr}");
    }
}

/// `totemd __sandbox` for `project` with its own temp folder (and `more` arguments), running
/// `bash -c script`.
fn sandboxed(
    project: &std::path::Path,
    tmp: &std::path::Path,
    more: &[&str],
    script: &str,
) -> std::process::Command {
    let mut command = std::process::Command::new(totem_tests::harness::binary("totemd"));
    command
        .arg("__sandbox")
        .arg("--project")
        .arg(project)
        .arg("--tmp")
        .arg(tmp)
        .args(["--secrets", "{}"])
        .args(more)
        .args(["--", "bash", "-c", script])
        .current_dir(project);
    command
}

fn sandbox_dirs() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp");
    let project = dir.path().join("proj");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(project.join(".git/hooks")).expect("project");
    std::fs::create_dir_all(&tmp).expect("tmp");
    std::fs::write(project.join("a.txt"), "hello\n").expect("a.txt");
    (dir, project, tmp)
}

/// Issue 30, item 1: a command run without asking writes nothing but its own temp folder, so a
/// parser mistake can no longer plant a git hook.
#[test]
fn a_confined_command_writes_only_its_temp_folder() {
    let (_dir, project, tmp) = sandbox_dirs();
    let mut command = sandboxed(
        &project,
        &tmp,
        &[],
        "cat a.txt; touch new.txt; echo x >> a.txt; cp a.txt .git/hooks/pre-commit; rm a.txt; mkdir d; touch \"$TMPDIR_TEST/t\" && echo temp-ok",
    );
    command.env("TMPDIR_TEST", &tmp);
    let out = sandbox_output(&mut command);
    assert!(out.contains("hello"), "{out}");
    assert!(out.contains("temp-ok"), "{out}");
    assert!(!project.join("new.txt").exists());
    assert!(!project.join("d").exists());
    assert!(!project.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(project.join("a.txt")).expect("a.txt"),
        "hello\n"
    );
    assert!(tmp.join("t").exists());
}

fn sandbox_output(command: &mut std::process::Command) -> String {
    let out = command.output().expect("run the launcher");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Issue 30, item 11: no datagram leaves the sandbox (`/dev/udp/…`).
#[test]
fn a_confined_command_sends_no_udp() {
    let (_dir, project, tmp) = sandbox_dirs();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    socket
        .set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .expect("timeout");
    let port = socket.local_addr().expect("addr").port();
    let script = format!("echo leaked > /dev/udp/127.0.0.1/{port}");
    let free = std::process::Command::new("bash")
        .args(["-c", &script])
        .status()
        .expect("bash");
    assert!(free.success());
    let mut buf = [0u8; 64];
    assert!(
        socket.recv(&mut buf).is_ok(),
        "the control datagram arrives"
    );
    let out = sandbox_output(&mut sandboxed(&project, &tmp, &[], &script));
    assert!(out.contains("Permission denied"), "{out}");
    assert!(socket.recv(&mut buf).is_err(), "a datagram got out: {out}");
}

/// `true` while the process `pid` exists and is not a zombie.
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim()
            .starts_with('Z')
    })
}

/// Issue 30, item 11: a command cannot leave a process running, also one that left its process
/// group with `setsid`, whether the command ends by itself or is ended (a timeout, an abort).
#[test]
fn a_confined_command_leaves_no_process_running() {
    let (_dir, project, tmp) = sandbox_dirs();
    let out = sandbox_output(&mut sandboxed(
        &project,
        &tmp,
        &[],
        "setsid sleep 120 & echo $!; (nohup sleep 121 >/dev/null 2>&1 &)",
    ));
    let pid = out.lines().next().unwrap_or_default().trim().to_string();
    assert!(!pid.is_empty(), "{out}");
    assert!(!alive(&pid), "setsid sleep {pid} outlived the command");

    // Ended from outside: SIGTERM to the launcher ends the whole tree.
    use std::io::BufRead;
    let mut child = sandboxed(&project, &tmp, &[], "setsid sleep 122 & echo $!; sleep 100")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("launcher");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("pid");
    let pid = line.trim().to_string();
    assert!(alive(&pid));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("term");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(143));
    assert!(
        !alive(&pid),
        "setsid sleep {pid} outlived the ended command"
    );
}

/// The option other parts (the Total.js app) use: one TCP port, nothing else.
#[test]
fn a_sandbox_with_one_tcp_port_reaches_only_that_port() {
    let (_dir, project, tmp) = sandbox_dirs();
    let allowed = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let other = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = allowed.local_addr().expect("addr").port();
    let other_port = other.local_addr().expect("addr").port();
    let script = format!(
        "echo a > /dev/tcp/127.0.0.1/{port} && echo port-ok; echo b > /dev/tcp/127.0.0.1/{other_port} && echo OTHER-OK; echo c > /dev/udp/127.0.0.1/{port} && echo UDP-OK"
    );
    let port_text = port.to_string();
    let out = sandbox_output(&mut sandboxed(
        &project,
        &tmp,
        &["--tcp-port", &port_text],
        &script,
    ));
    assert!(out.contains("port-ok"), "{out}");
    assert!(!out.contains("OTHER-OK"), "{out}");
    assert!(!out.contains("UDP-OK"), "{out}");
    let out = sandbox_output(&mut sandboxed(&project, &tmp, &[], &script));
    assert!(!out.contains("port-ok"), "without the option: {out}");
}

/// Issue 30, item 4: every built-in allowed git command works inside the sandbox on a real
/// repository, with and without `--allow bash`, and runs none of the hostile configuration's
/// programs (fsmonitor directly and through include.path/includeIf/config.worktree, hooks,
/// pager, external diff, textconv, clean/smudge/process filters, gpg on a signed commit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_built_in_git_command_works_in_the_sandbox_and_runs_nothing_of_the_repository() {
    use totem_tests::hostile::{Attack, Leak, Suite};
    let suite = Suite::start().await;
    let commands: &[(&str, &str)] = &[
        ("git status", "tracked.txt"),
        ("git status -v", "tracked.txt"),
        ("git diff", "+two"),
        ("git diff --ext-diff --textconv", "+two"),
        ("git log", "signed"),
        ("git log -p -1", "signed"),
        ("git show HEAD", "signed"),
        ("git blame tracked.txt", "two"),
        ("git ls-files", "tracked.txt"),
        ("git rev-parse --show-toplevel", "proj"),
        ("git branch --show-current", ""),
    ];
    let mut failed = Vec::new();
    // Every command as the built-in rules allow it, and the common ones again under `--allow
    // bash` (item 5), where they must keep the same sandboxed, hardened path.
    let runs = commands
        .iter()
        .map(|c| (&[][..], c))
        .chain(commands[..5].iter().map(|c| (&["bash"][..], c)));
    {
        for (allow, (command, expected)) in runs {
            let attack = Attack {
                name: "git",
                tool: "bash",
                args: json!({"command": command, "timeout": 10}),
                leak: Leak::Ran,
                allow,
                writes: &[],
                primed: &[],
            };
            let outcome = suite.attack(&attack).await;
            let output = &outcome.output;
            // "exit code 126", not "126" alone: a commit hash holds it now and then (CI: the
            // signed commit's hash, which changes with the time of its parent, had "0126").
            let broken = [
                "bad interpreter",
                "exit code 126",
                "fatal",
                "error",
                "Permission denied",
            ]
            .iter()
            .any(|bad| output.contains(bad));
            if !outcome.held
                || outcome.asked > 0
                || broken
                || !output.contains(expected)
                || output.trim().is_empty()
            {
                failed.push(format!("{command} (allow {allow:?}): {}", outcome.detail));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Issue 30, item 3: `/diff git` (`session.diff {git: true}`) runs git in the sandbox with the
/// repository's programs switched off, and a `.git` file cannot point it at another repository.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn totems_own_git_diff_runs_nothing_of_the_repository() {
    use totem_tests::hostile::{OUTSIDE_REPO, Suite};
    let suite = Suite::start().await;
    let started = std::time::Instant::now();
    let diff = suite
        .client
        .call_raw(
            "session.diff",
            json!({"sessionId": suite.session, "git": true}),
        )
        .await
        .expect("session.diff");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "a process filter held it"
    );
    let text = diff["diff"].as_str().unwrap_or_default();
    assert!(text.contains("+two"), "{diff}");
    assert!(
        suite.tree.take_pwned().is_empty(),
        "git ran the repository's programs"
    );

    // A session on `sub/`, whose `.git` file names a repository outside the project.
    let sub = suite.tree.project.join("sub");
    let project = totem_tests::setup::open_project(&suite.client, &sub).await;
    let id = totem_tests::setup::create_session(&suite.client, &project).await;
    let answer = suite
        .client
        .call_raw("session.diff", json!({"sessionId": id, "git": true}))
        .await;
    let shown = format!("{answer:?}");
    assert!(!shown.contains("other.txt"), "{shown}");
    assert!(!shown.contains(OUTSIDE_REPO), "{shown}");
}

/// One run in which the model runs `command`, each question answered with `reply`.
async fn bash_run(
    env: &Env,
    command: &str,
    reply: Value,
) -> (Vec<SessionEvent>, Vec<PermissionQuestion>) {
    env.push(vec![tool(
        "c1",
        "bash",
        json!({"command": command, "timeout": 10}),
    )]);
    env.push(vec![text("ok")]);
    let mut stream = env.subscribe().await;
    let run = env.prompt("run it", json!({})).await;
    follow_replying(env, &mut stream, &run, Some(reply)).await
}

/// Issue 30, item 6: the question says what "always" stores, a program that can run commands or
/// write files is stored by its exact text, and what it could turn into asks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_stores_only_the_text_the_question_showed() {
    let env = Env::start().await;
    write_file(env.project.path(), "a.txt", "one\ntwo\n");
    let always = json!({"type": "alwaysSession"});
    let cases = [
        ("sed -n 1p a.txt", "sed -n '1e touch X1' a.txt", "X1"),
        (
            "awk 'NR==1' a.txt",
            "awk 'BEGIN{system(\"touch X2\")}'",
            "X2",
        ),
        (
            "find . -name a.txt -exec cat {} +",
            "find . -name a.txt -fprint X3",
            "X3",
        ),
        ("echo a.txt | xargs cat", "echo X4 | xargs touch", "X4"),
        ("env LC_ALL=C ls", "env LC_ALL=C touch X5", "X5"),
        (
            "git -c core.quotepath=off status",
            "git -c core.quotepath=off -c alias.x='!touch X6' x",
            "X6",
        ),
    ];
    for (asked, attack, marker) in cases {
        let (events, questions) = bash_run(&env, asked, always.clone()).await;
        assert!(!questions.is_empty(), "{asked} asks: {events:#?}");
        let q = &questions[0];
        let stored = q.always["bash"]
            .as_object()
            .map(|m| m.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default();
        assert!(
            !stored.is_empty() && stored.iter().all(|p| !p.ends_with(" *")),
            "{asked}: stored {stored:?}"
        );
        for pattern in &stored {
            assert!(
                q.explanation.contains(&format!("bash({pattern})")),
                "the question shows what always stores: {}",
                q.explanation
            );
        }
        assert!(
            q.explanation.contains("this exact text only"),
            "{}",
            q.explanation
        );
        let (_, questions) = bash_run(&env, attack, json!({"type": "deny"})).await;
        assert!(
            !questions.is_empty(),
            "after `{asked}` answered always, `{attack}` must ask"
        );
        assert!(
            !env.project.path().join(marker).exists(),
            "`{attack}` ran after `{asked}` was answered always"
        );
    }
    // The exact command itself no longer asks.
    let (_, questions) = bash_run(&env, "sed -n 1p a.txt", json!({"type": "deny"})).await;
    assert!(questions.is_empty(), "{questions:#?}");
    // A program safe to widen keeps its prefix, and the question says so.
    let (_, questions) = bash_run(&env, "git commit --allow-empty -qm one", always.clone()).await;
    assert!(!questions.is_empty());
    assert!(
        questions[0]
            .explanation
            .contains("\"Always\" remembers bash(git commit *)"),
        "{}",
        questions[0].explanation
    );
}

/// `session.command` for `name`: the result, or the error's message.
async fn command(env: &Env, name: &str) -> Result<Value, String> {
    env.client
        .call_raw(
            "session.command",
            json!({"sessionId": env.session, "command": name}),
        )
        .await
        .map_err(|e| e.to_string())
}

/// Issue 30, item 10: a project command file goes through the file tools' rules. A link to
/// `.env`, a link outside and a hard link to a file outside are refused with a clear reason, and
/// nothing reaches the model; an AGENTS.md that is a link to `.env` is not sent either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_command_file_is_not_a_way_to_a_secret_or_outside() {
    let env = Env::start().await;
    let root = env.project.path();
    let outside = tempfile::tempdir().expect("outside");
    write_file(root, ".env", "API=CMD-ENV-SECRET-61d0\n");
    write_file(outside.path(), "x.md", "CMD-OUTSIDE-SECRET-7c2e\n");
    std::fs::create_dir_all(root.join(".totem/commands")).expect("commands");
    let link = |target: &std::path::Path, name: &str| {
        std::os::unix::fs::symlink(target, root.join(".totem/commands").join(name))
            .expect("symlink")
    };
    link(std::path::Path::new("../../.env"), "review.md");
    link(&outside.path().join("x.md"), "out.md");
    std::fs::hard_link(
        outside.path().join("x.md"),
        root.join(".totem/commands/hard.md"),
    )
    .expect("hard link");
    std::os::unix::fs::symlink(".env", root.join("AGENTS.md")).expect("AGENTS.md link");

    let error = command(&env, "/review").await.expect_err("a link to .env");
    assert!(
        error.contains("review.md leads to .env, a secret file") && error.contains("not run"),
        "{error}"
    );
    let error = command(&env, "/out").await.expect_err("a link outside");
    assert!(error.contains("outside the project"), "{error}");
    let error = command(&env, "/hard").await.expect_err("a hard link");
    assert!(error.contains("more than one name"), "{error}");

    // An ordinary prompt: the AGENTS.md link to .env is not in the system prompt.
    env.push(vec![text("ok")]);
    let mut stream = env.subscribe().await;
    let run = env.prompt("hello", json!({})).await;
    follow_replying(&env, &mut stream, &run, None).await;
    let sent: String = env
        .sim
        .chat_requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(!sent.is_empty());
    for secret in ["CMD-ENV-SECRET-61d0", "CMD-OUTSIDE-SECRET-7c2e"] {
        assert!(!sent.contains(secret), "{secret} reached the model");
    }
    assert!(
        sent.contains("AGENTS.md leads to .env, a secret file"),
        "{sent}"
    );
}

/// Issue 30, item 10: a project command's front matter cannot pick an agent whose rules allow
/// more than the session's current mode; it runs in the current mode, with a notice that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_command_cannot_pick_a_wider_agent() {
    let env = Env::start().await;
    let path = env.daemon.home.join("settings.json");
    let mut settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("settings")).expect("json");
    settings["agents"] = json!({"wide": {"allow": ["bash", "edit"]}});
    std::fs::write(&path, settings.to_string()).expect("write settings");
    let root = env.project.path();
    write_file(
        root,
        ".totem/commands/build.md",
        "---\nagent: build\n---\nDo it.\n",
    );
    write_file(
        root,
        ".totem/commands/wide.md",
        "---\nagent: wide\n---\nDo it.\n",
    );
    write_file(
        root,
        ".totem/commands/look.md",
        "---\nagent: plan\n---\nLook.\n",
    );
    write_file(root, ".totem/commands/plain.md", "Go on.\n");

    // The mode a run got, from its run.queued event.
    async fn mode_of(env: &Env, name: &str) -> (String, String) {
        env.push(vec![text("ok")]);
        let mut stream = env.subscribe().await;
        let result = command(env, name).await.expect("command");
        let run = result["runId"].as_str().expect("run").to_string();
        let (events, _) = follow_replying(env, &mut stream, &run, None).await;
        let mode = events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::RunQueued { run: r, .. } if r.id == run => r.mode.clone(),
                _ => None,
            })
            .unwrap_or_default();
        (
            mode,
            result["text"].as_str().unwrap_or_default().to_string(),
        )
    }
    async fn prompt_in(env: &Env, mode: &str) {
        env.push(vec![text("ok")]);
        let mut stream = env.subscribe().await;
        let run = env.prompt("hi", json!({"mode": mode})).await;
        follow_replying(env, &mut stream, &run, None).await;
    }

    // In plan mode, `agent: build` and a wider agent fall back to plan, and say so.
    prompt_in(&env, "plan").await;
    for name in ["/build", "/wide", "/plain"] {
        let (mode, said) = mode_of(&env, name).await;
        assert_eq!(mode, "plan", "{name}: {said}");
        if name != "/plain" {
            assert!(said.contains("runs in `plan`"), "{name}: {said}");
        }
    }
    // In build mode, an agent with wider rules falls back to build; plan (narrower) is kept.
    prompt_in(&env, "build").await;
    let (mode, said) = mode_of(&env, "/wide").await;
    assert_eq!(mode, "build", "{said}");
    assert!(said.contains("allows `bash`"), "{said}");
    let (mode, said) = mode_of(&env, "/look").await;
    assert_eq!(mode, "plan", "{said}");
}
