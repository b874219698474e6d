//! Project detection: is the folder a Total.js 5 project, an older Total.js project, empty, or
//! something else (TOTALJS.md §6).

use std::path::Path;

use serde::Serialize;

use crate::js::lex;

/// Why a folder was taken for a Total.js 5 project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Evidence {
    /// `package.json` lists `total5` in `dependencies` (`dev: false`) or `devDependencies`.
    PackageDependency { dev: bool },
    /// `index.js` calls `require('total5')`.
    IndexRequiresTotal5,
    /// `index.js` calls `Total.run(...)`, the v5 boot.
    IndexCallsTotalRun,
    /// There is a `config` file at the root.
    ConfigFile,
    /// A file in `controllers/` defines `exports.install`.
    ControllerInstall,
}

/// The older Total.js a project is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LegacyVersion {
    /// npm package `total4`.
    Total4,
    /// npm package `total.js` (Total.js 3 and older).
    TotalJs3,
}

impl LegacyVersion {
    /// The npm package name.
    pub fn package(self) -> &'static str {
        match self {
            LegacyVersion::Total4 => "total4",
            LegacyVersion::TotalJs3 => "total.js",
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
        evidence: Vec<Evidence>,
        problems: Vec<String>,
    },
    /// A Total.js 4 (or older) project: the v5 primer and conventions check do not apply.
    Legacy { version: LegacyVersion },
    /// No files, or only dotfiles (`.git`, `.gitignore`): a new session treats it as Total.js 5.
    Empty,
    /// Anything else. `problems` lists what could not be read.
    Other { problems: Vec<String> },
}

impl Project {
    /// Whether Totem should work in Total.js 5 mode (primer, reminder, conventions check).
    /// An empty folder counts: a new project there is a Total.js 5 project.
    pub fn is_totaljs5(&self) -> bool {
        matches!(self, Project::TotalJs5 { .. } | Project::Empty)
    }

    /// A short message for the user about the detection, when there is something to say.
    pub fn message(&self) -> Option<String> {
        match self {
            Project::Legacy { version } => Some(format!(
                "This project uses {} ({}), not Total.js 5: Totem's Total.js 5 primer and conventions check do not apply and are off. Upgrade to the npm package total5 to get them.",
                match version {
                    LegacyVersion::Total4 => "Total.js 4",
                    LegacyVersion::TotalJs3 => "Total.js 3 or older",
                },
                version.package()
            )),
            Project::Empty => Some(
                "Empty folder: treated as a new Total.js 5 project; /init creates the files."
                    .to_string(),
            ),
            Project::TotalJs5 { problems, .. } | Project::Other { problems }
                if !problems.is_empty() =>
            {
                Some(problems.join("; "))
            }
            _ => None,
        }
    }

    /// What could not be read while detecting.
    pub fn problems(&self) -> &[String] {
        match self {
            Project::TotalJs5 { problems, .. } | Project::Other { problems } => problems,
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
    } else if has("devDependencies", "total5") {
        Some(Framework::V5 { dev: true })
    } else if any("total4") {
        Some(Framework::Legacy(LegacyVersion::Total4))
    } else if any("total.js") {
        Some(Framework::Legacy(LegacyVersion::TotalJs3))
    } else {
        None
    })
}

/// What `index.js` says about the framework.
fn from_index(text: &str) -> (Option<Framework>, bool) {
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
        if t.is_ident("Total")
            && tokens.get(i + 1).is_some_and(|n| n.is_punct("."))
            && tokens.get(i + 2).is_some_and(|n| n.is_ident("run"))
        {
            runs = true;
        }
    }
    (found, runs)
}

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

/// Looks at the folder `root` and says what kind of project it holds. Never fails: anything that
/// cannot be read is reported in the result's `problems`.
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
    let mut legacy = None;

    match std::fs::read_to_string(root.join("package.json")) {
        Ok(text) => match from_package_json(&text) {
            Ok(Some(Framework::V5 { dev })) => evidence.push(Evidence::PackageDependency { dev }),
            Ok(Some(Framework::Legacy(v))) => legacy = Some(v),
            Ok(None) => {}
            Err(e) => problems.push(e),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => problems.push(format!("cannot read package.json: {e}")),
    }

    if let Ok(text) = std::fs::read_to_string(root.join("index.js")) {
        let (framework, runs) = from_index(&text);
        match framework {
            Some(Framework::V5 { .. }) => evidence.push(Evidence::IndexRequiresTotal5),
            Some(Framework::Legacy(v)) => {
                legacy.get_or_insert(v);
            }
            None => {}
        }
        if runs {
            evidence.push(Evidence::IndexCallsTotalRun);
        }
    }
    if root.join("config").is_file() {
        evidence.push(Evidence::ConfigFile);
    }
    if controllers_install(root) {
        evidence.push(Evidence::ControllerInstall);
    }

    let strong = evidence.iter().any(|e| {
        matches!(
            e,
            Evidence::PackageDependency { .. }
                | Evidence::IndexRequiresTotal5
                | Evidence::IndexCallsTotalRun
        )
    });
    if evidence
        .iter()
        .any(|e| matches!(e, Evidence::PackageDependency { .. }))
    {
        return Project::TotalJs5 { evidence, problems };
    }
    if let Some(version) = legacy {
        return Project::Legacy { version };
    }
    // Without a framework package, the v5 boot or both folder conventions decide.
    if strong || evidence.len() >= 2 {
        return Project::TotalJs5 { evidence, problems };
    }
    Project::Other { problems }
}
