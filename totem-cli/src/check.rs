//! `totem check [PATH…]`: the Total.js 5 conventions check of a project or some of its files, for
//! people and CI. One `file:line: severity [rule] message` line per finding (or `--json`), exit 1
//! when there is an error. The daemon runs it (`project.check`) with the user's settings and the
//! project's `.totem/settings.json`.

use std::path::{Path, PathBuf};

use totem_protocol::display::{displayable, displayable_line};
use totem_protocol::{ProjectCheckParams, method};

use crate::cli::CheckArgs;
use crate::daemon::{self, Endpoint};
use crate::exit::{Exit, UsageError};

/// The project folder a path belongs to: the nearest folder up from it with a package.json,
/// index.js or config (a plugin's `plugins/<id>/` does not count), else the path's own folder.
pub(crate) fn project_root(path: &Path) -> PathBuf {
    let start = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    for dir in start.ancestors() {
        let plugin = dir
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "plugins");
        let marked = ["package.json", "index.js", "config"]
            .iter()
            .any(|f| dir.join(f).is_file());
        if marked && !plugin {
            return dir.to_path_buf();
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    start.to_path_buf()
}

/// The project root and the paths to check inside it (relative; none for the whole project).
fn resolve(paths: &[PathBuf]) -> anyhow::Result<(PathBuf, Vec<String>)> {
    let cwd = crate::project::folder(None)?;
    let paths: Vec<PathBuf> = paths
        .iter()
        .map(|p| {
            std::fs::canonicalize(p).map_err(|e| {
                UsageError(format!(
                    "cannot check {}: {e}. Pass existing files or folders",
                    p.display()
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    let root = project_root(paths.first().unwrap_or(&cwd));
    let mut files = Vec::new();
    for path in &paths {
        let Ok(rel) = path.strip_prefix(&root) else {
            return Err(UsageError(format!(
                "{} is not in the project {}: check one project at a time",
                path.display(),
                root.display()
            ))
            .into());
        };
        if rel.as_os_str().is_empty() {
            return Ok((root, Vec::new()));
        }
        files.push(rel.to_string_lossy().into_owned());
    }
    Ok((root, files))
}

pub async fn check(endpoint: &Endpoint, args: &CheckArgs) -> anyhow::Result<Exit> {
    let (root, files) = resolve(&args.paths)?;
    let connection = daemon::connect_or_start(endpoint).await?;
    let result = connection
        .client
        .call::<method::ProjectCheck>(ProjectCheckParams {
            path: root.display().to_string(),
            files,
            boot: args.boot,
            migrate: args.migrate,
        })
        .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        // Paths as the user can open them from here. File names, messages (which quote the
        // project's code) and the app's own errors are the project's text: shown as escapes.
        let cwd = crate::project::folder(None)?;
        let shown = |rel: &str| match root.strip_prefix(&cwd) {
            Ok(prefix) => prefix.join(rel).display().to_string(),
            Err(_) => root.join(rel).display().to_string(),
        };
        for f in &result.findings {
            let severity = if f.severity == "info" {
                "note"
            } else {
                &f.severity
            };
            println!(
                "{}:{}: {severity} [{}] {}",
                displayable_line(&shown(&f.path)),
                f.line,
                displayable_line(&f.rule),
                displayable(&f.message)
            );
        }
        for notice in &result.notices {
            eprintln!("note: {}", displayable(notice));
        }
        if let Some(boot) = &result.boot {
            println!("{}", displayable(&boot.message));
        }
        let plural = |n: u32, one: &str| {
            if n == 1 {
                format!("1 {one}")
            } else {
                format!("{n} {one}s")
            }
        };
        println!(
            "{}, {}, {} in {}.",
            plural(result.errors, "error"),
            plural(result.warnings, "warning"),
            plural(result.notes, "note"),
            plural(result.files_checked, "file")
        );
        if !result.findings.is_empty() {
            println!(
                "Switch a rule off with `// totem-ignore RULE` on the line, or in .totem/settings.json: {{\"totaljs\": {{\"check\": {{\"disabled\": [\"RULE\"]}}}}}}."
            );
        }
    }
    let boot_failed = result.boot.as_ref().is_some_and(|b| b.status == "failed");
    Ok(if result.errors > 0 || boot_failed {
        Exit::Failed
    } else {
        Exit::Success
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_nearest_app_folder_above_plugins() {
        let dir = tempfile::tempdir().unwrap();
        let app = dir.path();
        std::fs::create_dir_all(app.join("plugins/admin/controllers")).unwrap();
        std::fs::write(app.join("package.json"), "{}").unwrap();
        std::fs::write(app.join("plugins/admin/index.js"), "").unwrap();
        std::fs::write(app.join("plugins/admin/controllers/a.js"), "").unwrap();
        assert_eq!(
            project_root(&app.join("plugins/admin/controllers/a.js")),
            app
        );
        assert_eq!(project_root(&app.join("plugins/admin")), app);
        assert_eq!(project_root(app), app);
    }
}
