//! Project detection: is the folder a Total.js 5 project, an older Total.js project, empty, or
//! something else (TOTALJS.md §6).

use std::path::Path;

use serde::Serialize;

use crate::js::lex;

/// Why a folder was taken for a Total.js 5 project: positive signs of version 5 only. A `config`
/// file and controllers with `exports.install` are Total.js of any version, so they decide nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Evidence {
    /// `package.json` lists `total5` in `dependencies` (`dev: false`), `devDependencies` or
    /// `peerDependencies`.
    PackageDependency {
        /// Listed in `devDependencies` or `peerDependencies`, not `dependencies`.
        dev: bool,
    },
    /// A boot file (`index.js`, `debug.js`, `release.js` or package.json's `main`) calls
    /// `require('total5')`.
    RequiresTotal5 {
        /// The boot file.
        file: String,
    },
    /// A boot file calls `Total.run(...)` or `F.run(...)`, which only Total.js 5 has, or
    /// `F.http(options)` (v4's takes a mode string first).
    CallsRun {
        /// The boot file.
        file: String,
    },
    /// App code calls a global only Total.js 5 defines (`CRON`, `NEWCOMPONENT`, `PYPELINE`...).
    V5Api {
        /// The file that calls it.
        file: String,
        /// The global.
        name: String,
    },
}

/// The older Total.js a project is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LegacyVersion {
    /// npm package `total4`.
    Total4,
    /// npm package `total.js` (Total.js 3 and older).
    TotalJs3,
    /// A Total.js layout (`config`, controllers with `exports.install`) with no sign of any
    /// version: not taken for Total.js 5.
    Unknown,
}

impl LegacyVersion {
    /// The npm package name.
    pub fn package(self) -> &'static str {
        match self {
            LegacyVersion::Total4 => "total4",
            LegacyVersion::TotalJs3 | LegacyVersion::Unknown => "total.js",
        }
    }
}

/// What kind of project a folder holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Project {
    /// A Total.js 5 project. `problems` lists what could not be read (e.g. a malformed
    /// package.json) when other evidence decided.
    TotalJs5 {
        /// Every sign of version 5 found.
        evidence: Vec<Evidence>,
        /// What could not be read.
        problems: Vec<String>,
    },
    /// A package for Total.js 5 apps, not an app (the npm packages `querybuilderpg`, `dbms`):
    /// `total5` is at most a dev or peer dependency and nothing boots it (no `Total.run()`). The
    /// primer and the check apply, but not the app's boot file, dependency or boot check.
    Library {
        /// Every sign of version 5 found.
        evidence: Vec<Evidence>,
        /// What could not be read.
        problems: Vec<String>,
    },
    /// A Total.js 4 (or older, or of unknown version) project: the v5 primer and conventions
    /// check do not apply.
    Legacy {
        /// Which one.
        version: LegacyVersion,
    },
    /// No files, or only dotfiles (`.git`, `.gitignore`): a new session treats it as Total.js 5.
    Empty,
    /// Anything else. `problems` lists what could not be read.
    Other {
        /// What could not be read.
        problems: Vec<String>,
    },
}

impl Project {
    /// Whether Totem should work in Total.js 5 mode (primer, reminder, conventions check).
    /// An empty folder counts: a new project there is a Total.js 5 project.
    pub fn is_totaljs5(&self) -> bool {
        matches!(
            self,
            Project::TotalJs5 { .. } | Project::Library { .. } | Project::Empty
        )
    }

    /// A sentence naming the kind for people (`totem doctor`).
    pub fn describe(&self) -> &'static str {
        match self {
            Project::TotalJs5 { .. } => "Total.js 5 app",
            Project::Library { .. } => "library for Total.js 5 apps",
            Project::Legacy {
                version: LegacyVersion::Total4,
            } => "Total.js 4 app",
            Project::Legacy {
                version: LegacyVersion::TotalJs3,
            } => "Total.js 3 (or older) app",
            Project::Legacy {
                version: LegacyVersion::Unknown,
            } => "Total.js app of unknown version",
            Project::Empty => "empty folder (a new Total.js 5 project)",
            Project::Other { .. } => "not a Total.js project",
        }
    }

    /// A short message for the user about the detection, when there is something to say.
    pub fn message(&self) -> Option<String> {
        match self {
            Project::Legacy {
                version: LegacyVersion::Unknown,
            } => Some(
                "This looks like a Total.js project, but nothing says it is Total.js 5 (no total5 dependency, no require('total5')): Totem's Total.js 5 primer and conventions check are off. Add total5 to package.json to turn them on.".to_string(),
            ),
            Project::Legacy { version } => Some(format!(
                "This project uses {} ({}), not Total.js 5: Totem's Total.js 5 primer and conventions check do not apply and are off. Upgrade to the npm package total5 to get them.",
                match version {
                    LegacyVersion::Total4 => "Total.js 4",
                    _ => "Total.js 3 or older",
                },
                version.package()
            )),
            Project::Empty => Some(
                "Empty folder: treated as a new Total.js 5 project; /init creates the files."
                    .to_string(),
            ),
            Project::Library { .. } => Some(
                "A library for Total.js 5 apps (total5 is not a dependency and nothing calls Total.run()): the primer and conventions check apply; the app's boot file, its total5 dependency and the boot check do not.".to_string(),
            ),
            Project::TotalJs5 { problems, .. } | Project::Other { problems }
                if !problems.is_empty() =>
            {
                Some(problems.join("; "))
            }
            _ => None,
        }
    }

    /// A short name of the kind, as `totem doctor` and the protocol show it: `totaljs5`,
    /// `library` (a package for Total.js 5 apps), `totaljs4`, `totaljs3` (or older), `totaljs` (a
    /// Total.js layout of unknown version), `empty` or `other`.
    pub fn kind(&self) -> &'static str {
        match self {
            Project::TotalJs5 { .. } => "totaljs5",
            Project::Library { .. } => "library",
            Project::Legacy {
                version: LegacyVersion::Total4,
            } => "totaljs4",
            Project::Legacy {
                version: LegacyVersion::TotalJs3,
            } => "totaljs3",
            Project::Legacy {
                version: LegacyVersion::Unknown,
            } => "totaljs",
            Project::Empty => "empty",
            Project::Other { .. } => "other",
        }
    }

    /// What could not be read while detecting.
    pub fn problems(&self) -> &[String] {
        match self {
            Project::TotalJs5 { problems, .. }
            | Project::Library { problems, .. }
            | Project::Other { problems } => problems,
            _ => &[],
        }
    }
}

/// Which framework package a dependency list names, if any (total5 wins over older ones).
enum Framework {
    V5 { dev: bool },
    Legacy(LegacyVersion),
}

fn from_package_json(text: &str) -> Result<Option<Framework>, String> {
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("package.json is not valid JSON: {e}"))?;
    let has = |section: &str, name: &str| {
        json.get(section)
            .and_then(|d| d.as_object())
            .is_some_and(|d| d.contains_key(name))
    };
    let any = |name: &str| has("dependencies", name) || has("devDependencies", name);
    Ok(if has("dependencies", "total5") {
        Some(Framework::V5 { dev: false })
    } else if has("devDependencies", "total5") || has("peerDependencies", "total5") {
        Some(Framework::V5 { dev: true })
    } else if any("total4") {
        Some(Framework::Legacy(LegacyVersion::Total4))
    } else if any("total.js") {
        Some(Framework::Legacy(LegacyVersion::TotalJs3))
    } else {
        None
    })
}

/// What a boot file says about the framework: which package it requires, and whether it calls
/// `Total.run()` / `F.run()` (Total.js 5 only; v4 booted with `require('total4/debug')(opts)`).
fn from_boot(text: &str) -> (Option<Framework>, bool) {
    let tokens = lex(text).tokens;
    let mut found = None;
    let mut runs = false;
    for (i, t) in tokens.iter().enumerate() {
        if t.is_ident("require")
            && let Some(name) = tokens.get(i + 2).and_then(|n| n.str_value())
        {
            let is = |p: &str| name == p || name.starts_with(&format!("{p}/"));
            if is("total5") {
                found = Some(Framework::V5 { dev: false });
            } else if is("total4") && found.is_none() {
                found = Some(Framework::Legacy(LegacyVersion::Total4));
            } else if is("total.js") && found.is_none() {
                found = Some(Framework::Legacy(LegacyVersion::TotalJs3));
            }
        }
        if (t.is_ident("Total") || t.is_ident("F"))
            && (i == 0 || !tokens[i - 1].is_punct("."))
            && tokens.get(i + 1).is_some_and(|n| n.is_punct("."))
            && tokens.get(i + 2).is_some_and(|n| {
                // v5 also boots with F.http(options); v4's F.http('debug') takes a mode string.
                n.is_ident("run")
                    || (n.is_ident("http") || n.is_ident("https"))
                        && tokens.get(i + 4).is_some_and(|a| a.str_value().is_none())
            })
            && tokens.get(i + 3).is_some_and(|n| n.is_punct("("))
        {
            runs = true;
        }
    }
    (found, runs)
}

/// Whether some controller has `exports.install`: a Total.js layout, of any version.
fn controllers_install(root: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(root.join("controllers")) else {
        return false;
    };
    entries.flatten().take(50).any(|e| {
        e.file_name().to_string_lossy().ends_with(".js")
            && std::fs::read_to_string(e.path()).is_ok_and(|text| {
                let tokens = lex(&text).tokens;
                tokens.windows(3).any(|w| {
                    w[0].is_ident("exports") && w[1].is_punct(".") && w[2].is_ident("install")
                })
            })
    })
}

/// Globals that total5 defines and framework4 does not (diff of their global assignments).
const V5_ONLY_GLOBALS: &[&str] = &["CRON", "NEWCOMPONENT", "PYPELINE", "AJAX"];

/// Folders searched for a v5-only API call, and how many files at most.
const API_FOLDERS: &[&str] = &[
    "definitions",
    "modules",
    "actions",
    "schemas",
    "controllers",
];
const API_FILES: usize = 100;

/// The first call of a v5-only global in the app's code, as (file, name).
fn v5_api(root: &Path) -> Option<(String, String)> {
    let mut seen = 0;
    for folder in API_FOLDERS {
        let Ok(entries) = std::fs::read_dir(root.join(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".js") {
                continue;
            }
            seen += 1;
            if seen > API_FILES {
                return None;
            }
            let Ok(text) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            let tokens = lex(&text).tokens;
            let call = tokens.windows(2).enumerate().find(|(i, w)| {
                V5_ONLY_GLOBALS.contains(&w[0].text)
                    && w[1].is_punct("(")
                    && (*i == 0
                        || !tokens[i - 1].is_punct(".") && !tokens[i - 1].is_ident("function"))
            });
            if let Some((_, w)) = call {
                return Some((format!("{folder}/{name}"), w[0].text.to_string()));
            }
        }
    }
    None
}

/// Looks at the folder `root` and says what kind of project it holds. Never fails: anything that
/// cannot be read is reported in the result's `problems`.
///
/// Total.js 5 is decided from positive signs only, strongest first: what the boot file requires
/// (it is what runs: `require('total5')` wins over a stale `total4` in package.json), then the
/// package.json dependency, then `Total.run()`, then a v5-only API in the app's code. A Total.js
/// layout with none of them (a v3/v4 app booting from `debug.js` with no dependency listed) is
/// [`LegacyVersion::Unknown`], not Total.js 5.
pub fn detect(root: &Path) -> Project {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) => {
            return Project::Other {
                problems: vec![format!("cannot read the folder {}: {e}", root.display())],
            };
        }
    };
    let names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.iter().all(|n| n.starts_with('.')) {
        return Project::Empty;
    }

    let mut problems = Vec::new();
    let mut evidence = Vec::new();
    let mut package = None;
    let mut main = None;

    match std::fs::read_to_string(root.join("package.json")) {
        Ok(text) => {
            match from_package_json(&text) {
                Ok(found) => package = found,
                Err(e) => problems.push(e),
            }
            main = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|j| j.get("main").and_then(|m| m.as_str()).map(str::to_string))
                .filter(|m| !m.contains("..") && !m.starts_with('/'));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => problems.push(format!("cannot read package.json: {e}")),
    }

    let mut boot_files = vec![
        "index.js".to_string(),
        "debug.js".into(),
        "release.js".into(),
    ];
    if let Some(main) = main.map(|m| m.trim_start_matches("./").to_string())
        && !boot_files.contains(&main)
    {
        boot_files.push(main);
    }
    let mut boot_legacy = None;
    for file in &boot_files {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        let (framework, runs) = from_boot(&text);
        match framework {
            Some(Framework::V5 { .. }) => {
                evidence.push(Evidence::RequiresTotal5 { file: file.clone() })
            }
            Some(Framework::Legacy(v)) => {
                boot_legacy.get_or_insert(v);
            }
            None => {}
        }
        if runs {
            evidence.push(Evidence::CallsRun { file: file.clone() });
        }
    }
    let requires = evidence
        .iter()
        .any(|e| matches!(e, Evidence::RequiresTotal5 { .. }));
    if let Some(Framework::V5 { dev }) = package {
        evidence.insert(0, Evidence::PackageDependency { dev });
    }
    if !requires {
        if let Some(version) = boot_legacy {
            return Project::Legacy { version };
        }
        if let Some(Framework::Legacy(version)) = package {
            return Project::Legacy { version };
        }
    }
    if evidence.is_empty()
        && let Some((file, name)) = v5_api(root)
    {
        evidence.push(Evidence::V5Api { file, name });
    }
    if !evidence.is_empty() {
        // No app of its own: nothing boots total5 and it is not a runtime dependency.
        let boots = evidence.iter().any(|e| {
            matches!(
                e,
                Evidence::CallsRun { .. } | Evidence::PackageDependency { dev: false }
            )
        });
        if !boots && root.join("package.json").is_file() {
            return Project::Library { evidence, problems };
        }
        return Project::TotalJs5 { evidence, problems };
    }
    if root.join("config").is_file() && controllers_install(root) {
        return Project::Legacy {
            version: LegacyVersion::Unknown,
        };
    }
    Project::Other { problems }
}
