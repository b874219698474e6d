//! `@path` in a prompt: completion of project paths (Tab) and, on submit, the files sent as the
//! prompt's `attachments` (totemd reads and checks them again, and stores them with the prompt).
//! Only files inside the project are offered or sent; completion honours the ignore files
//! (.gitignore, .ignore) as grep and glob do; a file that cannot be attached (missing, a folder,
//! binary, too large, a secret, outside the project) is named in a note and left out, so the rest
//! of the prompt still goes.

use std::path::{Component, Path, PathBuf};

/// Bytes of one attached file.
pub const MAX_FILE: u64 = 100_000;
/// Bytes of every file attached to one prompt.
pub const MAX_TOTAL: usize = 300_000;
/// Candidates offered by one Tab.
const MAX_CANDIDATES: usize = 200;

/// The files to attach and a note per `@path` for the person.
#[derive(Debug, Default, PartialEq)]
pub struct Expanded {
    /// Project-relative paths, for `session.prompt {attachments}`.
    pub attachments: Vec<String>,
    pub notes: Vec<Note>,
}

#[derive(Debug, PartialEq)]
pub enum Note {
    Attached { path: String, bytes: usize },
    Skipped { path: String, why: String },
}

/// The `@path` words of `text`, without the `@` and trailing punctuation, each once.
pub fn mentions(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else {
            continue;
        };
        let path = path.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '"', '\'']);
        if !path.is_empty() && !out.iter().any(|p| p == path) {
            out.push(path.to_string());
        }
    }
    out
}

/// The files `text` mentions as `@path` that can be attached.
pub fn expand(root: &Path, text: &str) -> Expanded {
    let mut expanded = Expanded::default();
    let mut total = 0;
    for path in mentions(text) {
        match read(root, &path, MAX_TOTAL.saturating_sub(total)) {
            Ok(content) => {
                total += content.len();
                expanded.notes.push(Note::Attached {
                    path: path.clone(),
                    bytes: content.len(),
                });
                expanded.attachments.push(path);
            }
            Err(why) => expanded.notes.push(Note::Skipped { path, why }),
        }
    }
    expanded
}

/// The file's text, or why it is not attached.
fn read(root: &Path, rel: &str, room: usize) -> Result<String, String> {
    let real = inside(root, rel)?;
    let meta = std::fs::metadata(&real).map_err(|e| format!("cannot read it: {e}"))?;
    if meta.is_dir() {
        return Err("it is a folder; name the files in it".into());
    }
    if totem_permission::is_secret(rel) {
        return Err(
            "it looks like a secret file (keys, .env…); paste what the model may see".into(),
        );
    }
    let size = meta.len();
    if size > MAX_FILE || size as usize > room {
        let limit = match size > MAX_FILE {
            true => format!("{} KB per file", MAX_FILE / 1000),
            false => format!("{} KB per prompt", MAX_TOTAL / 1000),
        };
        return Err(format!(
            "too large ({} KB, the limit is {limit}); ask the model to read the part you need",
            size.div_ceil(1000)
        ));
    }
    let bytes = std::fs::read(&real).map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.contains(&0) {
        return Err("it is a binary file".into());
    }
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_string())
}

/// The real path of `rel` when it exists inside `root` (symlinks resolved).
fn inside(root: &Path, rel: &str) -> Result<PathBuf, String> {
    let path = Path::new(rel);
    if path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        return Err("it is outside the project; only files inside it can be attached".into());
    }
    let real = std::fs::canonicalize(root.join(path)).map_err(|_| "no such file".to_string())?;
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    match real.starts_with(&root) {
        true => Ok(real),
        false => Err("it is outside the project; only files inside it can be attached".into()),
    }
}

/// Completions of `typed` (what follows `@`): the entries of the folder it names whose names
/// start with what follows its last `/`, folders ending in `/`; when that finds nothing and no
/// folder is named, files anywhere in the project whose name starts with it.
pub fn complete(root: &Path, typed: &str) -> Vec<String> {
    let (dir, prefix) = match typed.rfind('/') {
        Some(i) => (&typed[..=i], &typed[i + 1..]),
        None => ("", typed),
    };
    let Ok(real_dir) = inside(root, if dir.is_empty() { "." } else { dir }) else {
        return Vec::new();
    };
    let mut out: Vec<String> = walk(root, &real_dir, Some(1))
        .into_iter()
        .filter_map(|(path, is_dir)| {
            let name = path.file_name()?.to_str()?;
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                return None;
            }
            Some(format!("{dir}{name}{}", if is_dir { "/" } else { "" }))
        })
        .collect();
    if out.is_empty() && dir.is_empty() && !prefix.is_empty() {
        out = walk(root, &real_dir, None)
            .into_iter()
            .filter(|(path, is_dir)| {
                !is_dir
                    && path
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(prefix))
            })
            .filter_map(|(path, _)| Some(path.strip_prefix(&real_dir).ok()?.to_str()?.to_string()))
            .collect();
    }
    out.sort();
    out.truncate(MAX_CANDIDATES);
    out
}

/// Entries under `dir` (inside the canonical `root`) that the ignore files do not hide, with
/// whether each is a folder. `depth` 1 lists the folder itself.
fn walk(root: &Path, dir: &Path, depth: Option<usize>) -> Vec<(PathBuf, bool)> {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut out = Vec::new();
    let walker = ignore::WalkBuilder::new(dir)
        .max_depth(depth)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walker.flatten() {
        if entry.depth() == 0 {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if entry.path().starts_with(&root) {
            out.push((entry.into_path(), is_dir));
        }
        if out.len() >= 5 * MAX_CANDIDATES {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp");
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/deep")).expect("src");
        std::fs::create_dir_all(root.join("build")).expect("build");
        std::fs::write(root.join(".gitignore"), "build/\n*.log\n").expect("gitignore");
        std::fs::write(root.join("src/main.rs"), "fn main() {}\n").expect("main");
        std::fs::write(root.join("src/deep/util.rs"), "pub fn util() {}\n").expect("util");
        std::fs::write(root.join("build/out.rs"), "x").expect("out");
        std::fs::write(root.join("run.log"), "x").expect("log");
        std::fs::write(root.join("data.bin"), [0u8, 1, 2]).expect("bin");
        std::fs::write(root.join(".env"), "TOKEN=x\n").expect("env");
        std::fs::write(root.join("big.txt"), "x".repeat(MAX_FILE as usize + 1)).expect("big");
        dir
    }

    #[test]
    fn completion_lists_a_folder_honouring_ignore_files() {
        let dir = project();
        let root = dir.path();
        assert_eq!(complete(root, "sr"), vec!["src/"]);
        assert_eq!(complete(root, "src/"), vec!["src/deep/", "src/main.rs"]);
        assert!(complete(root, "bu").is_empty(), "build/ is ignored");
        assert!(complete(root, "run").is_empty(), "*.log is ignored");
        // No top-level match: files anywhere whose name starts with it.
        assert_eq!(complete(root, "uti"), vec!["src/deep/util.rs"]);
        assert!(complete(root, "../").is_empty());
        assert!(complete(root, "/etc/").is_empty());
    }

    #[test]
    fn attaching_reads_text_files_and_says_why_others_are_left_out() {
        let dir = project();
        let root = dir.path();
        let out = expand(
            root,
            "look at @src/main.rs, @data.bin @big.txt @missing.rs @../x @.env @src",
        );
        assert_eq!(out.attachments, vec!["src/main.rs"]);
        let why = |p: &str| {
            out.notes.iter().find_map(|n| match n {
                Note::Skipped { path, why } if path == p => Some(why.clone()),
                _ => None,
            })
        };
        assert!(why("data.bin").is_some_and(|w| w.contains("binary")));
        assert!(why("big.txt").is_some_and(|w| w.contains("too large")));
        assert!(why("missing.rs").is_some_and(|w| w.contains("no such file")));
        assert!(why("../x").is_some_and(|w| w.contains("outside the project")));
        assert!(why(".env").is_some_and(|w| w.contains("secret")));
        assert!(why("src").is_some_and(|w| w.contains("folder")));
    }

    #[test]
    fn a_symlink_out_of_the_project_is_not_attached() {
        let dir = project();
        let outside = tempfile::tempdir().expect("outside");
        std::fs::write(outside.path().join("secret.txt"), "outside").expect("file");
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("link"))
            .expect("symlink");
        let out = expand(dir.path(), "@link");
        assert!(out.attachments.is_empty());
        assert!(matches!(&out.notes[0], Note::Skipped { why, .. } if why.contains("outside")));
    }
}
