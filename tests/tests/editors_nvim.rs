//! The Neovim plugin (`editors/nvim`) as a person uses it: a real Neovim with its own terminal
//! interface on a pseudo-terminal, installed from the repository path like any plugin, against the
//! real totemd and the Ollama simulator, with the REPL attached to the same session in a second
//! pseudo-terminal. The test types keys and reads the screen (drawn by `vt100` from Neovim's
//! output): the plugin starts the daemon, the answer streams into the chat window, the question's
//! diff pops up in a float and `o` answers it, the changed buffer reloads, `:TotemDiff` and
//! `:TotemUndo` work, the REPL answers the next question and the float closes, attachments reach
//! the model, the session picker and `:checkhealth totem` show what they should.

mod cli_common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cli_common::Cli;
use expectrl::{Eof, Expect, Session};
use serde_json::json;
use totem_tests::sim::{Reply, Script, Sim, SimEvent, SimKind};

const COLS: u16 = 160;
const ROWS: u16 = 50;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

/// settings.json with the simulator as the only provider and its model as the default.
fn settings(home: &Path, sim: &Sim) {
    let settings = json!({
        "defaultModel": "sim/llama3.2:latest",
        "providers": [{"name": "sim", "kind": "ollama", "url": sim.url(),
                       "defaultModel": "llama3.2:latest", "maxRetries": 0}],
    });
    std::fs::write(home.join("settings.json"), settings.to_string()).expect("settings.json");
}

fn edit(id: &str, from: &str, to: &str) -> SimEvent {
    SimEvent::tool_call(
        id,
        "edit",
        json!({"path": "math.js", "oldString": from, "newString": to}),
    )
}

/// Neovim on a pseudo-terminal and the screen it draws there.
struct Nvim {
    nvim: PathBuf,
    server: PathBuf,
    pty: expectrl::session::OsSession,
    screen: vt100::Parser,
}

impl Nvim {
    fn start(nvim: &Path, cli: &Cli, config: &Path) -> Nvim {
        let server = config.join("nvim.sock");
        let init = config.join("init.lua");
        // What a user's init.lua holds after installing the plugin from the repository path.
        let plugin = repo().join("editors/nvim");
        std::fs::write(
            &init,
            format!(
                "vim.opt.rtp:prepend({plugin:?})\n\
                 vim.o.swapfile = false\n\
                 vim.o.statusline = \"%f %m%=%{{v:lua.require'totem'.statusline()}} \"\n\
                 require('totem').setup({{ cmd = {cmd:?} }})\n",
                plugin = plugin.display().to_string(),
                cmd = cli_common::binary("totem").display().to_string(),
            ),
        )
        .expect("init.lua");
        let mut command = Command::new(nvim);
        command
            .args(["-u"])
            .arg(&init)
            .args(["-i", "NONE", "-n", "--listen"])
            .arg(&server)
            .arg("math.js")
            .current_dir(cli.project.path())
            .env("TERM", "xterm-256color")
            .env("TOTEM_HOME", cli.home())
            .env("XDG_CONFIG_HOME", config.join("config"))
            .env("XDG_DATA_HOME", config.join("data"))
            .env("XDG_STATE_HOME", config.join("state"))
            .env("XDG_CACHE_HOME", config.join("cache"))
            .env_remove("TOTEM_LOG");
        let mut pty = Session::spawn(command).expect("start nvim in a pty");
        pty.get_process_mut()
            .set_window_size(COLS, ROWS)
            .expect("size the terminal");
        let mut nvim = Nvim {
            nvim: nvim.to_path_buf(),
            server,
            pty,
            screen: vt100::Parser::new(
                std::num::NonZeroU16::new(ROWS).expect("rows"),
                std::num::NonZeroU16::new(COLS).expect("columns"),
                0,
            ),
        };
        nvim.wait("Neovim to show math.js", |s| s.contains("const a = 1;"));
        nvim
    }

    /// Reads what Neovim drew so far into the screen.
    fn pump(&mut self) {
        let mut buf = [0u8; 1 << 16];
        while let Ok(n) = self.pty.try_read(&mut buf) {
            if n == 0 {
                break;
            }
            self.screen.process(&buf[..n]);
        }
    }

    fn text(&mut self) -> String {
        self.pump();
        self.screen.screen().contents()
    }

    /// Waits until the screen satisfies `done`; returns it. Fails with the screen after 30 s.
    fn wait(&mut self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = self.text();
            if done(&text) {
                return text;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; the screen:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn wait_for(&mut self, needle: &str) -> String {
        self.wait(&format!("{needle:?} on the screen"), |s| s.contains(needle))
    }

    fn keys(&mut self, keys: &str) {
        self.pty.send(keys).expect("type into nvim");
    }

    /// An ex command, typed.
    fn command(&mut self, command: &str) {
        self.keys(&format!("\x1b:{command}\r"));
    }

    /// A Lua expression evaluated in this Neovim through its server socket (`nvim --remote-expr`),
    /// for what the screen cannot show (window options).
    fn lua(&self, expr: &str) -> String {
        let out = Command::new(&self.nvim)
            .arg("--server")
            .arg(&self.server)
            .arg("--remote-expr")
            .arg(format!("luaeval({expr:?})"))
            .output()
            .expect("nvim --remote-expr");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn the_plugin_and_the_repl_share_a_session_in_a_real_neovim() {
    let nvim_bin = totem_tests::external::neovim();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let sim = runtime.block_on(Sim::start(SimKind::Ollama));
    let cli = Cli::new();
    settings(cli.home(), &sim);
    std::fs::write(
        cli.project.path().join("math.js"),
        "const a = 1;\nconst b = 2;\n",
    )
    .expect("math.js");
    {
        let _guard = runtime.enter();
        let push = |events: Vec<SimEvent>, delay_ms: u64| {
            sim.push(Reply::Stream(Script {
                delay_ms,
                ..Script::new(events)
            }))
        };
        push(vec![edit("c1", "const b = 2;", "const b = 3;")], 0);
        push(
            vec![
                SimEvent::text("First words. "),
                SimEvent::text("Middle words. "),
                SimEvent::text("Last words."),
            ],
            400,
        );
        push(vec![edit("c2", "const b = 2;", "const b = 4;")], 0);
        push(vec![SimEvent::text("Done again.")], 0);
        push(vec![SimEvent::text("a is one.")], 0);
        push(vec![SimEvent::text("Still one.")], 0);
    }
    let config = tempfile::tempdir().expect("nvim's folders");
    let mut nvim = Nvim::start(&nvim_bin, &cli, config.path());

    // :Totem starts the daemon (none answers yet) and opens the chat on a new session.
    nvim.command("Totem");
    nvim.wait_for("totem://prompt");
    let session = nvim.lua("require('totem.chat').session_id() or ''");
    assert!(
        session.starts_with("ses_"),
        "no session in the chat: {session:?}"
    );
    let mut command = cli.command(["attach", "--session", &session]);
    command.env("TERM", "xterm");
    let mut repl = Session::spawn(command).expect("spawn totem in a pty");
    repl.set_expect_timeout(Some(Duration::from_secs(30)));
    repl.expect(session.as_str())
        .expect("the REPL follows the session");

    // 1. A prompt typed in the prompt window and sent with <C-s>; the edit's question pops up in
    // a float with its diff, the status line says Totem waits; `o` answers it.
    nvim.keys("imake b three\x13");
    let screen = nvim.wait_for("Totem asks");
    for want in [
        "edit wants to write math.js",
        "-const b = 2;",
        "+const b = 3;",
        "o once · s this session · p this project",
    ] {
        assert!(screen.contains(want), "the float lacks {want:?}:\n{screen}");
    }
    nvim.wait_for("Totem: waiting for you");
    repl.expect("? edit wants to write math.js")
        .expect("the REPL shows the question");
    repl.expect("+const b = 3;").expect("with its diff");
    nvim.keys("o");
    nvim.wait("the float to close", |s| !s.contains("Totem asks"));
    repl.expect("(answered in another terminal)")
        .expect("the REPL sees Neovim's answer");

    // The file's window reloads with the change; the answer streams in, part by part.
    nvim.wait("math.js to reload", |s| s.contains("const b = 3;"));
    let screen = nvim.wait_for("First words.");
    assert!(
        !screen.contains("Last words."),
        "the answer was drawn at once, not as it streamed:\n{screen}"
    );
    assert!(
        screen.contains("llama3.2:latest · running"),
        "the status line while running:\n{screen}"
    );
    nvim.wait_for("Last words.");
    nvim.wait_for("✓ done");
    nvim.wait_for("Run done");
    repl.expect("Last words.")
        .expect("the REPL sees the answer");

    // :TotemDiff: before on the left, now on the right, in diff mode, in a new tab.
    nvim.command("TotemDiff");
    nvim.wait("the diff's two sides", |s| {
        s.lines()
            .any(|l| l.contains("const b = 2;") && l.contains("const b = 3;"))
    });
    assert_eq!(
        nvim.lua(
            "#vim.api.nvim_tabpage_list_wins(0) == 2 and vim.iter(vim.api.nvim_tabpage_list_wins(0)):all(function(w) return vim.wo[w].diff end) and 'diff' or 'no'"
        ),
        "diff"
    );
    nvim.keys("q");
    nvim.wait("the diff tab to close", |s| {
        !s.lines()
            .any(|l| l.contains("const b = 2;") && l.contains("const b = 3;"))
    });

    // :TotemUndo puts the file back; its window reloads.
    nvim.command("TotemUndo");
    nvim.wait("math.js to reload after undo", |s| {
        s.contains("const b = 2;") && !s.contains("const b = 3;")
    });

    // 2. The REPL answers the next question: the float in Neovim closes by itself.
    nvim.command("Totem");
    nvim.keys("imake b four\x13");
    nvim.wait_for("Totem asks");
    repl.expect("+const b = 4;").expect("the second diff");
    repl.send("o\r").expect("answer once");
    nvim.wait("the REPL's answer to close the float", |s| {
        !s.contains("Totem asks")
    });
    nvim.wait("math.js to reload", |s| s.contains("const b = 4;"));
    nvim.wait("the second run's end", |s| count(s, "✓ done") == 2);

    // 3. :TotemAsk with a range sends those lines; the REPL shows the prompt and its attachment.
    nvim.keys("\x1b\x17t");
    nvim.command("1TotemAsk what is a");
    nvim.wait_for("📎 math.js (lines 1–1)");
    nvim.wait("the third run's end", |s| count(s, "✓ done") == 3);
    repl.expect("› what is a").expect("the prompt from Neovim");
    repl.expect("📎 math.js (lines 1–1)")
        .expect("its attachment");

    // :TotemAdd attaches the buffer as it is, unsaved edit included, to the next prompt.
    nvim.keys("\x17tggccconst a = 10; // unsaved\x1b");
    nvim.command("TotemAdd");
    nvim.wait_for("Attached math.js to the next prompt");
    nvim.command("Totem");
    nvim.keys("iand now?\x13");
    nvim.wait_for("📎 math.js, unsaved");
    nvim.wait("the fourth run's end", |s| count(s, "✓ done") == 4);
    let requests = {
        let _guard = runtime.enter();
        sim.chat_requests()
    };
    let last = requests.last().expect("requests").body.to_string();
    assert!(
        last.contains("Attached file `math.js`, unsaved editor text")
            && last.contains("const a = 10; // unsaved"),
        "{last}"
    );

    // Sessions: a new one, then the first again through the picker.
    nvim.command("Totem new");
    nvim.wait("an empty chat", |s| !s.contains("Still one."));
    nvim.command("TotemSessions");
    let screen = nvim.wait_for("Type number and <Enter>");
    let first = screen
        .lines()
        .filter_map(|l| l.split_once(": New session"))
        .find(|(_, rest)| !rest.contains(", 0 messages"))
        .map(|(number, _)| number)
        .unwrap_or_else(|| panic!("the first session in the picker:\n{screen}"))
        .trim()
        .to_string();
    nvim.keys(&format!("{first}\r"));
    // The chat shows the end of the first session's history again.
    nvim.wait_for("Still one.");
    assert_eq!(
        nvim.lua("require('totem.chat').session_id()"),
        session,
        "the picker opened another session"
    );

    // :checkhealth totem names the daemon, the protocol and the provider.
    nvim.command("checkhealth totem");
    let screen = nvim.wait_for("protocol version 1");
    for want in ["provider sim (ollama)", "totemd "] {
        assert!(
            screen.contains(want),
            "checkhealth lacks {want:?}:\n{screen}"
        );
    }
    nvim.command("qall!");
    assert_eq!(
        std::fs::read_to_string(cli.project.path().join("math.js")).expect("math.js"),
        "const a = 1;\nconst b = 4;\n"
    );
    cli_common::ctrl_d_until(&mut repl, Eof);
}
