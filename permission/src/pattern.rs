//! The two pattern languages of rules: globs for paths, `*` wildcards for commands and names.

use globset::{Glob, GlobBuilder, GlobMatcher};

/// A path glob as written in a rule, compiled.
///
/// Paths are project-relative with `/` separators. Like `.gitignore`: a pattern without a `/`
/// matches the file name at any depth (`*.pem`, `.env`); a pattern with a `/` is anchored at the
/// project root (`src/**`, `config/*.yml`); a leading `/` anchors a bare name (`/Makefile`); a
/// trailing `/` means everything under that folder (`build/`). `*` stays within one folder, `**`
/// crosses folders, `?`, `[abc]` and `{a,b}` work as in globset, `\` escapes.
#[derive(Debug, Clone)]
pub(crate) struct PathPattern {
    matcher: GlobMatcher,
}

impl PathPattern {
    pub(crate) fn new(pattern: &str, case_insensitive: bool) -> Result<Self, globset::Error> {
        Ok(PathPattern {
            matcher: path_glob(pattern, case_insensitive)?.compile_matcher(),
        })
    }

    pub(crate) fn is_match(&self, path: &str) -> bool {
        self.matcher.is_match(normalize_path(path))
    }
}

/// A rule's path pattern as a glob over project-relative paths (see [`PathPattern`]); sets of
/// patterns are matched at once with a `GlobSet` of these.
pub(crate) fn path_glob(pattern: &str, case_insensitive: bool) -> Result<Glob, globset::Error> {
    let mut glob = if let Some(anchored) = pattern.strip_prefix('/') {
        anchored.to_string()
    } else if pattern.trim_end_matches('/').contains('/') {
        pattern.to_string()
    } else {
        format!("**/{pattern}")
    };
    if glob.ends_with('/') {
        glob.push_str("**");
    }
    GlobBuilder::new(&glob)
        .literal_separator(true)
        .backslash_escape(true)
        .case_insensitive(case_insensitive)
        .build()
}

/// Strips the `./` prefixes a tool may leave on a project-relative path.
pub(crate) fn normalize_path(path: &str) -> &str {
    let mut p = path;
    while let Some(rest) = p.strip_prefix("./") {
        p = rest.trim_start_matches('/');
    }
    p
}

/// Escapes a path so that, as a rule pattern, it matches exactly that path from the project root.
pub(crate) fn exact_path_pattern(path: &str) -> String {
    let mut out = String::from("/");
    for c in normalize_path(path).chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A command (or MCP tool name) pattern: `*` matches any text, including spaces and `/`; `\*`
/// is a literal star; everything else is literal. A pattern ending in ` *` also matches the text
/// without that tail, so `git status *` covers both `git status` and `git status --short`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wildcard {
    /// `None` stands for `*`.
    chars: Vec<Option<char>>,
}

impl Wildcard {
    pub(crate) fn new(pattern: &str) -> Self {
        let mut chars = Vec::new();
        let mut it = pattern.chars();
        while let Some(c) = it.next() {
            match c {
                '\\' => match it.next() {
                    Some(n) => chars.push(Some(n)),
                    None => chars.push(Some('\\')),
                },
                '*' => chars.push(None),
                c => chars.push(Some(c)),
            }
        }
        Wildcard { chars }
    }

    pub(crate) fn is_match(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().collect();
        if glob_match(&self.chars, &text) {
            return true;
        }
        match self.chars.as_slice() {
            [head @ .., Some(' '), None] => glob_match(head, &text),
            _ => false,
        }
    }

    /// The pattern has no wildcard: it names one exact command.
    pub(crate) fn is_exact(&self) -> bool {
        self.chars.iter().all(Option::is_some)
    }
}

/// Escapes a command so that, as a rule pattern, it matches exactly that command.
pub(crate) fn exact_command_pattern(command: &str) -> String {
    let mut out = String::with_capacity(command.len());
    for c in command.chars() {
        if c == '*' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn glob_match(pattern: &[Option<char>], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(Some(c)) if *c == text[t] => {
                p += 1;
                t += 1;
            }
            Some(None) => {
                backtrack = Some((p, t));
                p += 1;
            }
            _ => match backtrack {
                Some((star, from)) => {
                    p = star + 1;
                    t = from + 1;
                    backtrack = Some((star, from + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(Option::is_none)
}

/// How specific a pattern is: its number of literal characters. Among the rules of one layer that
/// match, the most specific decides, so `git status *` beats `*` whatever their order.
pub(crate) fn specificity(pattern: &str) -> usize {
    pattern
        .chars()
        .filter(|c| !matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\'))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_matches_prefixes_and_middles() {
        assert!(Wildcard::new("git status*").is_match("git status --short"));
        assert!(Wildcard::new("git status *").is_match("git status"));
        assert!(!Wildcard::new("git status *").is_match("git statusx"));
        assert!(Wildcard::new("find *-delete*").is_match("find . -name x -delete"));
        assert!(Wildcard::new("*").is_match(""));
        assert!(!Wildcard::new("ls").is_match("ls -la"));
        assert!(Wildcard::new(r"ls \*").is_match("ls *"));
        assert!(!Wildcard::new(r"ls \*").is_match("ls x"));
    }

    #[test]
    fn path_patterns_follow_gitignore_anchoring() {
        let p = |s: &str| PathPattern::new(s, false).unwrap();
        assert!(p("*.pem").is_match("a/b/c.pem"));
        assert!(p("src/**").is_match("src/a/b.rs"));
        assert!(!p("src/**").is_match("lib/src/a.rs"));
        assert!(p("/Makefile").is_match("Makefile"));
        assert!(!p("/Makefile").is_match("sub/Makefile"));
        assert!(p("build/").is_match("build/x/y"));
        assert!(p("*").is_match("a/b"));
        assert!(p(&exact_path_pattern("a[1].txt")).is_match("a[1].txt"));
        assert!(!p(&exact_path_pattern("a[1].txt")).is_match("a1.txt"));
        assert!(p("src/*.rs").is_match("./src/main.rs"));
    }
}
