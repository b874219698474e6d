//! A real Neovim with its terminal interface on a pseudo-terminal, the Totem plugin loaded from
//! the repository as a user's init.lua would, and the screen it draws (kept by `vt100`): the
//! editor plugin's test and benchmark type keys and read what a person would see.

use std::num::NonZeroU16;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::session::OsSession;
use expectrl::{Expect, Session};

pub const COLS: u16 = 160;
pub const ROWS: u16 = 50;

/// Where the pieces are: the `nvim` and `totem` binaries, Totem's home and the project opened.
pub struct NvimSetup<'a> {
    pub nvim: &'a Path,
    pub totem: &'a Path,
    pub home: &'a Path,
    pub project: &'a Path,
    /// An empty folder for Neovim's own files (init.lua, its XDG folders, its server socket).
    pub config: &'a Path,
    /// The file opened at start, in `project`.
    pub file: &'a str,
    /// More of `require('totem').setup{…}`, as Lua fields (`model = "sim/m"`), or empty.
    pub options: &'a str,
}

/// Neovim on a pseudo-terminal and the screen it draws there.
pub struct Nvim {
    nvim: PathBuf,
    server: PathBuf,
    pty: OsSession,
    screen: vt100::Parser,
}

impl Nvim {
    pub fn start(setup: &NvimSetup) -> anyhow::Result<Nvim> {
        let server = setup.config.join("nvim.sock");
        let init = setup.config.join("init.lua");
        // What a user's init.lua holds after installing the plugin from the repository path.
        let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../editors/nvim");
        std::fs::write(
            &init,
            format!(
                "vim.opt.rtp:prepend({plugin:?})\n\
                 vim.o.swapfile = false\n\
                 vim.o.statusline = \"%f %m%=%{{v:lua.require'totem'.statusline()}} \"\n\
                 require('totem').setup({{ cmd = {cmd:?}, {options} }})\n",
                plugin = plugin.display().to_string(),
                cmd = setup.totem.display().to_string(),
                options = setup.options,
            ),
        )?;
        let mut command = Command::new(setup.nvim);
        command
            .arg("-u")
            .arg(&init)
            .args(["-i", "NONE", "-n", "--listen"])
            .arg(&server)
            .arg(setup.file)
            .current_dir(setup.project)
            .env("TERM", "xterm-256color")
            .env("TOTEM_HOME", setup.home)
            .env("OLLAMA_HOST", crate::harness::closed_ollama_host())
            .env("XDG_CONFIG_HOME", setup.config.join("config"))
            .env("XDG_DATA_HOME", setup.config.join("data"))
            .env("XDG_STATE_HOME", setup.config.join("state"))
            .env("XDG_CACHE_HOME", setup.config.join("cache"))
            .env_remove("TOTEM_LOG");
        let mut pty = Session::spawn(command)?;
        pty.get_process_mut().set_window_size(COLS, ROWS)?;
        let side = |n| NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN);
        Ok(Nvim {
            nvim: setup.nvim.to_path_buf(),
            server,
            pty,
            screen: vt100::Parser::new(side(ROWS), side(COLS), 0),
        })
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

    /// The screen's text, row by row.
    pub fn text(&mut self) -> String {
        self.pump();
        self.screen.screen().contents()
    }

    /// Waits until the screen satisfies `done` and returns it; fails with the screen after 30 s.
    pub fn wait(&mut self, what: &str, done: impl Fn(&str) -> bool) -> String {
        self.wait_poll(what, Duration::from_millis(10), done)
    }

    /// [`Nvim::wait`], looking every `poll`.
    pub fn wait_poll(&mut self, what: &str, poll: Duration, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = self.text();
            if done(&text) {
                return text;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; the screen:\n{text}");
            }
            std::thread::sleep(poll);
        }
    }

    pub fn wait_for(&mut self, needle: &str) -> String {
        self.wait(&format!("{needle:?} on the screen"), |s| s.contains(needle))
    }

    /// Types `keys`.
    pub fn keys(&mut self, keys: &str) {
        if let Err(e) = self.pty.send(keys) {
            panic!("cannot type into nvim: {e}");
        }
    }

    /// An ex command, typed (from normal mode).
    pub fn command(&mut self, command: &str) {
        self.keys(&format!("\x1b:{command}\r"));
    }

    /// A Lua expression evaluated in this Neovim through its server socket (`nvim --remote-expr`),
    /// for what the screen cannot show (window options, ids).
    pub fn lua(&self, expr: &str) -> String {
        let out = Command::new(&self.nvim)
            .arg("--server")
            .arg(&self.server)
            .arg("--remote-expr")
            .arg(format!("luaeval({expr:?})"))
            .output();
        match out {
            Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_string(),
            Err(e) => panic!("nvim --remote-expr: {e}"),
        }
    }
}
