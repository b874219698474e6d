//! The project boundary: a hard deny on every path outside the project root.
//!
//! Every path a tool touches goes through [`Boundary::resolve`], which rejects NUL bytes and
//! look-alike or invisible Unicode, expands `~`, joins relative paths to the root and then walks the
//! path component by component the way the kernel would — following each symlink it meets, applying
//! `..` to the *physical* parent — so the result is the real location the tool would read or write.
//! Components that do not exist yet are applied lexically (they cannot be links). The resolved path
//! must lie under the canonical root. No rule, mode or answer lifts this; the permission engine works
//! on paths that already passed here.
//!
//! What this cannot see: a hard link to a file outside (it is a file inside), and a symlink swapped in
//! between resolution and use; tools resolve again right before they act to keep that window small.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// How many symlinks one resolution may follow before it is treated as a loop (Linux uses 40).
const MAX_LINKS: usize = 40;

/// Why a path was refused. The `Display` text is what the model sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoundaryError {
    /// The path resolves (through `..`, `~`, an absolute path or a symlink) outside the project.
    #[error("path is outside the project: {0} (paths are relative to the project root)")]
    Outside(String),
    /// The path text itself is not acceptable (NUL byte, invisible or look-alike character).
    #[error("invalid path {path:?}: {reason}")]
    Invalid {
        /// The path as given.
        path: String,
        /// What is wrong with its text.
        reason: String,
    },
    /// Resolution failed (a symlink loop, an unreadable directory).
    #[error("cannot resolve path {path:?}: {reason}")]
    Unresolvable {
        /// The path as given.
        path: String,
        /// Why it could not be followed.
        reason: String,
    },
}

/// A path that passed the boundary: its real absolute location and its form relative to the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Real absolute path, symlinks resolved, under the project root.
    pub abs: PathBuf,
    /// The same path relative to the root with `/` separators; `.` for the root itself.
    pub rel: String,
}

/// The project root, canonicalised once, and the checks against it.
#[derive(Debug, Clone)]
pub struct Boundary {
    root: PathBuf,
}

impl Boundary {
    /// Canonicalises `root` (it must exist and be a directory).
    pub fn new(root: &Path) -> std::io::Result<Self> {
        let root = std::fs::canonicalize(root)?;
        if !root.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("project root {} is not a directory", root.display()),
            ));
        }
        Ok(Self { root })
    }

    /// The canonical project root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a path given by the model (relative to the root, absolute, or `~`-prefixed) and
    /// refuses it unless its real location is inside the project. An empty path means the root.
    pub fn resolve(&self, input: &str) -> Result<Resolved, BoundaryError> {
        check_text(input)?;
        let trimmed = input.trim();
        // `file:///abs/path`, as some models write paths.
        let trimmed = trimmed.strip_prefix("file://").unwrap_or(trimmed);
        let expanded = expand_tilde(trimmed);
        let joined = match &expanded {
            Some(home) => home.clone(),
            None if trimmed.is_empty() => self.root.clone(),
            None if Path::new(trimmed).is_absolute() => PathBuf::from(trimmed),
            None => self.root.join(trimmed),
        };
        let real = physical(&joined).map_err(|reason| BoundaryError::Unresolvable {
            path: input.to_string(),
            reason,
        })?;
        if let Some(rel) = self.relative(&real) {
            return Ok(Resolved { abs: real, rel });
        }
        // Small models write project paths with a leading slash (`/`, `/controllers/a.js`). When
        // the path's first folder does not exist on the machine, the project's is meant: it is
        // resolved again under the root, through the same checks.
        if expanded.is_none()
            && let Some(rest) = project_meant(trimmed)
        {
            let real =
                physical(&self.root.join(rest)).map_err(|reason| BoundaryError::Unresolvable {
                    path: input.to_string(),
                    reason,
                })?;
            if let Some(rel) = self.relative(&real) {
                return Ok(Resolved { abs: real, rel });
            }
        }
        Err(BoundaryError::Outside(input.to_string()))
    }

    /// The root-relative form of an absolute path that is already real (no symlinks), or `None`
    /// when it lies outside the root.
    pub fn relative(&self, real: &Path) -> Option<String> {
        let rest = real.strip_prefix(&self.root).ok()?;
        if rest.as_os_str().is_empty() {
            return Some(".".to_string());
        }
        let parts: Vec<String> = rest
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        Some(parts.join("/"))
    }

    /// True when `path` (absolute; symlinks are followed) really lies inside the project. Used by the
    /// walkers to decide whether a symlink met during a walk may be followed or reported.
    pub fn contains(&self, path: &Path) -> bool {
        physical(path).is_ok_and(|real| real.starts_with(&self.root))
    }
}

/// The project-relative path an absolute `path` stands for when its first component names nothing
/// on the machine (`/api/x` where there is no `/api`), or the root for `/` itself. `None` when the
/// path is not absolute or its first folder exists (`/etc/hosts` stays outside).
fn project_meant(path: &str) -> Option<&str> {
    let rest = path.strip_prefix('/')?.trim_start_matches('/');
    if rest.is_empty() {
        return Some("");
    }
    let first = rest.split('/').next().unwrap_or(rest);
    if matches!(first, "." | "..") {
        return None;
    }
    match std::fs::symlink_metadata(Path::new("/").join(first)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(rest),
        _ => None,
    }
}

/// Rejects path text that no honest path needs: NUL and control bytes, bidirectional overrides,
/// zero-width characters, and look-alikes of `/`, `\` and `.` (a model — or a file it read — could
/// use them to make `..／..／etc` look like a harmless name to a reviewer).
fn check_text(input: &str) -> Result<(), BoundaryError> {
    for c in input.chars() {
        if let Some(reason) = odd_char(c) {
            return Err(BoundaryError::Invalid {
                path: input.escape_debug().to_string(),
                reason: format!("it contains {reason} (U+{:04X})", c as u32),
            });
        }
    }
    Ok(())
}

fn odd_char(c: char) -> Option<&'static str> {
    Some(match c {
        '\0' => "a NUL byte",
        '\u{1}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => "a control character",
        '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}' | '\u{180e}' | '\u{ad}' => {
            "an invisible character"
        }
        '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{61c}' => {
            "a text-direction override"
        }
        '\u{ff0f}' | '\u{2215}' | '\u{2044}' | '\u{29f8}' | '\u{1735}' | '\u{ff3c}'
        | '\u{29f5}' | '\u{29f9}' | '\u{fe68}' => "a look-alike of a slash",
        '\u{ff0e}' | '\u{2024}' | '\u{2025}' | '\u{2026}' | '\u{fe52}' => "a look-alike of a dot",
        _ => return None,
    })
}

/// `~` and `~/x` become the home directory; `~user/x` that user's home. Anything else is `None`
/// (a file literally named `~notauser` stays a relative name).
fn expand_tilde(path: &str) -> Option<PathBuf> {
    let rest = path.strip_prefix('~')?;
    let (user, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i + 1..].trim_start_matches('/')),
        None => (rest, ""),
    };
    let home = if user.is_empty() {
        std::env::var_os("HOME").map(PathBuf::from).or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.dir)
        })?
    } else {
        nix::unistd::User::from_name(user).ok().flatten()?.dir
    };
    Some(if tail.is_empty() {
        home
    } else {
        home.join(tail)
    })
}

/// The real location of an absolute path: symlinks followed as the kernel would, `..` applied to
/// the physical parent, missing components appended as they are.
fn physical(path: &Path) -> Result<PathBuf, String> {
    let mut out = PathBuf::from("/");
    let mut pending: Vec<std::ffi::OsString> = Vec::new();
    push_components(&mut pending, path);
    let mut links = 0usize;
    while let Some(part) = pending.pop() {
        let part: &OsStr = &part;
        if part == "/" {
            out = PathBuf::from("/");
        } else if part == "." {
        } else if part == ".." {
            out.pop();
        } else {
            out.push(part);
            match std::fs::symlink_metadata(&out) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err("too many levels of symbolic links".to_string());
                    }
                    let target = std::fs::read_link(&out).map_err(|e| e.to_string())?;
                    out.pop();
                    push_components(&mut pending, &target);
                }
                // Missing or not a directory: nothing to follow; the tool reports the real error.
                Ok(_) | Err(_) => {}
            }
        }
    }
    Ok(out)
}

/// Pushes the components of `path` onto a stack so that the first component is popped first.
fn push_components(stack: &mut Vec<std::ffi::OsString>, path: &Path) {
    let parts: Vec<std::ffi::OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::RootDir => Some("/".into()),
            Component::CurDir => None,
            Component::ParentDir => Some("..".into()),
            Component::Normal(name) => Some(name.to_os_string()),
            Component::Prefix(_) => None,
        })
        .collect();
    stack.extend(parts.into_iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_char_flags_fullwidth_solidus_and_rtl_override() {
        assert!(odd_char('\u{ff0f}').is_some());
        assert!(odd_char('\u{202e}').is_some());
        assert!(odd_char('a').is_none());
        assert!(odd_char('é').is_none());
    }
}
