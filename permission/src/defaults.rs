//! The built-in rules: what a careful user would pick before saying anything.
//!
//! - Reading files in the project is allowed (secret files still ask, see [`crate::secret`]).
//! - Creating, editing and deleting files asks.
//! - MCP tools ask.
//! - Commands ask, except a short list that only read and print: `ls`, `pwd`, `cat`, `head`,
//!   `tail`, `wc`, `stat`, `tree`, `du`, `echo`, `which`, `type`, `whoami`, `uname`, `basename`,
//!   `dirname`, `realpath`, `readlink`, `true`, `false`, `test`/`[`/`[[`, `cd`, `grep`/`egrep`/
//!   `fgrep`, `rg`, `diff`, `cmp`, `cut`, `tr`, `nl`, `jq`, `find`, and `git status`/`diff`/`log`/
//!   `show`/`blame`/`ls-files`/`rev-parse`/`branch --show-current`.
//!
//! Left out on purpose, although they mostly read: `sort` (`-o` writes a file, also as `-uo`),
//! `uniq` (its second argument is an output file), `sed` (`-i`, the `w` command), `awk`
//! (`system()`), `file` (`-C` writes), `env`/`printenv` (print API keys), and anything that builds
//! or tests (`cargo`, `npm`, `make` run project code).
//!
//! Without a kernel sandbox (see [`default_rules_without_sandbox`]) the list shrinks to commands
//! that open no file: `pwd`, `echo`, `which`, `type`, `whoami`, `uname`, `basename`, `dirname`,
//! `true`, `false` and the `git` commands above.
//!
//! The options that make a listed command write or run something ask again, by more specific
//! patterns: `find … -delete`/`-exec`/`-execdir`/`-ok`/`-fprint`/`-fls`, `rg --pre`, `git …
//! --output`, `tree -o`. The engine adds two checks to these built-in allows (they do not apply to
//! rules a user wrote): an output redirection to a file is a write and asks like one, and a
//! command whose arguments reach outside the project (`/abs`, `~`, `..`) or hold an expansion
//! (`$HOME`, `$(…)`) asks.

use crate::rules::{Decision, Rules};

const READ_ONLY_COMMANDS: &[&str] = &[
    "ls *",
    "pwd *",
    "cat *",
    "head *",
    "tail *",
    "wc *",
    "stat *",
    "tree *",
    "du *",
    "echo *",
    "which *",
    "type *",
    "whoami *",
    "uname *",
    "basename *",
    "dirname *",
    "realpath *",
    "readlink *",
    "true *",
    "false *",
    "test *",
    "[ *",
    "[[ *",
    "cd *",
    "grep *",
    "egrep *",
    "fgrep *",
    "rg *",
    "diff *",
    "cmp *",
    "cut *",
    "tr *",
    "nl *",
    "jq *",
    "find *",
    "git status *",
    "git diff *",
    "git log *",
    "git show *",
    "git blame *",
    "git ls-files *",
    "git rev-parse *",
    "git branch --show-current",
];

/// Options that turn an allowed command into one that writes files or runs programs.
const WRITING_OPTIONS: &[&str] = &[
    "find *-delete*",
    "find *-exec*",
    "find *-ok*",
    "find *-fprint*",
    "find *-fls*",
    "rg *--pre*",
    "git *--output*",
    "tree *-o*",
];

/// The commands still allowed without asking where no kernel sandbox (Landlock) confines them:
/// those that open no file a symlink, a glob or a hard link could redirect. `git` reads only
/// the repository and does not follow links; the daemon runs it with hooks, fsmonitor, external
/// diff, textconv and filters switched off.
const READ_NOTHING_PROGRAMS: &[&str] = &[
    "pwd", "echo", "which", "type", "whoami", "uname", "basename", "dirname", "true", "false",
    "git",
];

/// The built-in rules (the lowest layer). Shown by `totem permissions` and in the docs.
pub fn default_rules() -> Rules {
    with_commands(READ_ONLY_COMMANDS.iter().copied())
}

/// The built-in rules where commands cannot be sandboxed (old kernels, macOS): only commands
/// that read no files run without asking.
pub fn default_rules_without_sandbox() -> Rules {
    with_commands(READ_ONLY_COMMANDS.iter().copied().filter(|pattern| {
        let program = pattern.split(' ').next().unwrap_or("");
        READ_NOTHING_PROGRAMS.contains(&program)
    }))
}

fn with_commands<'a>(allowed: impl Iterator<Item = &'a str>) -> Rules {
    let mut rules = Rules::new();
    rules.insert("read", "*", Decision::Allow);
    rules.insert("edit", "*", Decision::Ask);
    rules.insert("mcp", "*", Decision::Ask);
    rules.insert("bash", "*", Decision::Ask);
    rules.insert("*", "*", Decision::Ask);
    for pattern in allowed {
        rules.insert("bash", pattern, Decision::Allow);
    }
    for pattern in WRITING_OPTIONS {
        rules.insert("bash", *pattern, Decision::Ask);
    }
    rules
}
