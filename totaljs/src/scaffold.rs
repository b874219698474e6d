//! The files of a new Total.js 5 project (TOTALJS.md §6), written by `/init` in an empty folder.

use std::io::Write;
use std::path::{Path, PathBuf};

const PACKAGE_JSON: &str = r#"{
	"name": "app",
	"version": "1.0.0",
	"private": true,
	"description": "A Total.js 5 application",
	"main": "index.js",
	"scripts": {
		"start": "node index.js"
	},
	"dependencies": {
		"total5": "latest"
	}
}
"#;

const INDEX_JS: &str = "\
// Boots the app: node index.js
// Debug mode watches the files and restarts on changes (it writes index.pid).
// For production, give Total.run() { release: true, watcher: false }.
// The port comes from options.port, else $PORT, else 8000.
require('total5');

Total.run({});
";

const CONFIG: &str = "\
# One \"key : value\" per line; keep the space after the colon.
# Framework settings start with $, e.g. $port, $api, $httpmaxsize.
name : App
";

const CONTROLLER: &str = "\
exports.install = function() {
	ROUTE('GET /', index);
	ROUTE('GET /api/ping/', ping);
};

function index($) {
	$.plain('Hello from ' + CONF.name);
}

function ping($) {
	$.success(NOW);
}
";

const DEFINITION: &str = "\
// Startup code: runs once when the app loads, before controllers.
// AUTH() goes here when a route needs a signed-in user ('+' routes), and so do
// shared FUNC functions, CRON() jobs and ON('ready') listeners.

ON('ready', function() {
	// Everything is loaded and the server listens.
});
";

const GITIGNORE: &str = "\
node_modules/
index.js.map
tmp/
*.pid
logs/
databases/
";

/// The files of a new Total.js 5 project: (path relative to the root, content). Every one passes
/// the conventions check without findings.
pub fn scaffold() -> Vec<(&'static str, String)> {
    vec![
        ("package.json", PACKAGE_JSON.to_string()),
        ("index.js", INDEX_JS.to_string()),
        ("config", CONFIG.to_string()),
        ("controllers/default.js", CONTROLLER.to_string()),
        ("definitions/init.js", DEFINITION.to_string()),
        (".gitignore", GITIGNORE.to_string()),
    ]
}

/// Why the scaffold could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// Some of the files exist; nothing was written.
    #[error(
        "not creating a Total.js project in {root}: these files already exist and would be overwritten: {}; move them away or create the project in an empty folder",
        existing.join(", ")
    )]
    WouldOverwrite {
        /// The project folder.
        root: PathBuf,
        /// The files in the way, project-relative.
        existing: Vec<String>,
    },
    /// Writing a file failed (files written before it stay).
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

/// The one scaffold file that may already exist: an existing `.gitignore` (a fresh clone often
/// has one) gets the missing entries appended instead.
const MERGED: &str = ".gitignore";

/// Writes [`scaffold`] under `root` (creating folders as needed) and returns the paths written.
/// Refuses, writing nothing, when any of the files already exists, except `.gitignore`, which
/// gets the entries it lacks appended.
pub fn write_scaffold(root: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
    let files = scaffold();
    let existing: Vec<String> = files
        .iter()
        .filter(|(rel, _)| *rel != MERGED && root.join(rel).symlink_metadata().is_ok())
        .map(|(rel, _)| rel.to_string())
        .collect();
    if !existing.is_empty() {
        return Err(ScaffoldError::WouldOverwrite {
            root: root.to_path_buf(),
            existing,
        });
    }
    let mut written = Vec::new();
    for (rel, content) in files {
        let path = root.join(rel);
        let io = |source| ScaffoldError::Io {
            path: path.clone(),
            source,
        };
        if rel == MERGED && path.exists() {
            if merge_lines(&path, &content).map_err(io)? {
                written.push(path);
            }
            continue;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        // create_new: a file that appeared since the check above is still never overwritten.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io)?;
        file.write_all(content.as_bytes()).map_err(io)?;
        written.push(path);
    }
    Ok(written)
}

/// Appends the lines of `wanted` that `path` lacks; true when it changed the file.
fn merge_lines(path: &Path, wanted: &str) -> std::io::Result<bool> {
    let current = std::fs::read_to_string(path)?;
    let have: Vec<&str> = current.lines().map(str::trim).collect();
    let missing: Vec<&str> = wanted
        .lines()
        .filter(|l| !l.trim().is_empty() && !have.contains(&l.trim()))
        .collect();
    if missing.is_empty() {
        return Ok(false);
    }
    let mut text = String::new();
    if !current.is_empty() && !current.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("\n# Total.js\n");
    for line in missing {
        text.push_str(line);
        text.push('\n');
    }
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    file.write_all(text.as_bytes())?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small model copies commented-out code as if it were the project's (issue 39): the
    /// scaffold's comments are words, never code to uncomment.
    #[test]
    fn the_scaffold_has_no_commented_out_code() {
        for (path, content) in scaffold() {
            for line in content.lines() {
                let Some(comment) = line.trim().strip_prefix("//") else {
                    continue;
                };
                let comment = comment.trim_end();
                assert!(
                    !(comment.ends_with(';')
                        || comment.ends_with('{')
                        || comment.ends_with('}')
                        || comment.contains("function(")),
                    "{path}: commented-out code: {line}"
                );
            }
        }
    }
}
