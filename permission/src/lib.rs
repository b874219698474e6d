//! Totem's permission engine: decides whether a tool call may read a file, change one, run a
//! command line or call an MCP tool — allow, ask a person, or deny — and explains why.
//!
//! It is a pure library: the daemon builds a [`Policy`] from settings, keeps a [`PermissionState`]
//! per session, calls [`Policy::evaluate`] for every [`Access`] a tool call plans, on
//! [`Decision::Ask`] sends a [`Question`] to the clients, and feeds the first reply (the protocol's
//! [`PermissionReply`](totem_protocol::PermissionReply)) to [`PermissionState::answer`]. The project
//! boundary (paths outside the project root) is enforced before this crate is consulted and no
//! rule here can lift it.
//!
//! # Rules in settings
//!
//! Rules go under `permission.rules` in settings.json: a map from a *rule key* to a map from
//! *pattern* to `"allow"`, `"ask"` or `"deny"`:
//!
//! ```json
//! { "permission": { "rules": {
//!   "bash": { "git status *": "allow", "npm test *": "allow", "git push *": "ask", "rm *": "deny" },
//!   "edit": { "src/**": "allow", "*.lock": "deny" },
//!   "read": { "private/": "deny" },
//!   "mcp":  { "github/*": "allow" },
//!   "webfetch": { "*": "ask" }
//! } } }
//! ```
//!
//! Keys: `read` covers every tool that reads (read, list, glob, grep), `edit` every tool that
//! writes (write, edit, patch, and output redirections of commands), `bash` every tool that runs a
//! command line (bash, job), `mcp` every MCP tool (target `server/tool`); any other key is one
//! tool's own name and wins over its kind's key; `*` covers every tool.
//!
//! Patterns: for `read`/`edit`, globs over project-relative paths with `.gitignore` anchoring (a
//! pattern without `/` matches at any depth, `src/**` is anchored, a trailing `/` means the whole
//! folder). For `bash` and `mcp`, `*` matches any text, and a pattern ending in ` *` also matches
//! the command without arguments (`git status *` covers `git status`). Within one map the most
//! specific matching pattern decides (most literal characters; on a tie the strictest), so the
//! order in the file does not matter.
//!
//! Agents list rules as `allow:`/`deny:` entries such as `bash(git *)` or `read`; see
//! [`Rules::from_lists`].
//!
//! # Layers
//!
//! Built-in defaults < user settings < agent lists < project rules < rules granted for one run
//! (`totem run --allow`). A deny from any layer wins over an allow from any layer; otherwise the
//! highest layer with a matching rule decides ([`Policy::add_layer`]), so an allow granted higher
//! up answers questions but never lifts a deny. Rules read from a file inside the repository
//! should be added with [`Policy::add_tightening_layer`], which can only make decisions stricter.
//! Remembered "always" answers ([`PermissionState`], for the session or the project) come last and
//! only turn a question into an allow: they never lift a deny.
//!
//! Commands that come from a file in the project (AGENTS.md's `check:`/`format:` lines) are
//! decided with [`Policy::evaluate_from_project`]: the same rules, but a built-in allow does not
//! cover them and "always" remembers their exact text.
//!
//! # Command lines
//!
//! A command line is split into every command it runs ([`bash::split_commands`]): separators,
//! pipes, subshells, substitutions, `bash -c`, `eval`, `xargs`, `find -exec`, `sudo` …. Every
//! sub-command must be allowed for the line to be allowed; deny wins over ask over allow. An
//! output redirection to a file is a write of that file under the `edit` rules. A line that cannot
//! be read with confidence, code that cannot be seen (`eval "$x"`), and a program name that is an
//! expansion always ask. A rule `rm *` → deny also catches `FOO=1 rm x` and `/bin/rm x`, and
//! commands in the literal text of a line whose shell reads its script from a pipe
//! (`echo 'rm x' | bash`); an allow must name the assignment (`FOO=1 ls` is not `ls`).
//!
//! # Defaults
//!
//! See [`defaults`]: reading allowed, writing asks, commands ask except a short list of read-only
//! ones, MCP tools ask.
//!
//! # Secret files
//!
//! See [`secret`]: `.env`, keys, certificates, credential stores ask even for reading, even where
//! a rule allows, and also when a command names them (`cat .env`). Only a deny rule or an answer
//! for that exact file settles them.
//!
//! # Answers
//!
//! "Always" remembers, per asking part, the pattern in [`Part::always`], and the question says
//! which ([`Verdict::always_note`]): for a file that exact path; for a command its prefix only
//! where no argument can make it run a command or write a file (`npm test *`, `git commit *`,
//! `wc *`), else its exact text: `sed`, `awk`, `find`, `xargs`, `env`, `tee`, interpreters,
//! `git -c`/`git config`, `npx`, `cargo install`, a command with an option that picks a program
//! or a file to write (`--config`, `--script-shell`, `--output` …), any program not known to be
//! harmless, and any question that came from a secret, an expansion, an unreadable line or an
//! argument that reaches outside the project. A command remembered only exactly is settled only
//! by an answer for exactly its text, so a broad rule (`sed *`, left by an older build) does
//! not cover `sed -n '1e touch X'`.
#![deny(missing_docs)]

pub mod bash;
pub mod defaults;
pub mod env;
mod pattern;
mod policy;
mod question;
mod rules;
pub mod secret;
mod state;

pub use env::EnvSettings;
pub use policy::{AlwaysRule, Part, Policy, Reason, Verdict, control_folder};
pub use question::Question;
pub use rules::{Access, AccessKind, Decision, MatchedRule, RuleError, RuleSet, Rules, Source};
pub use secret::{SecretPatterns, SecretSettings, is_secret};
pub use state::{Answer, PermissionState, Scope};

use serde::{Deserialize, Serialize};

/// The `permission` section of a settings file: rules plus adjustments to the secret patterns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionSettings {
    /// The rule keys and their patterns.
    #[serde(default, skip_serializing_if = "Rules::is_empty")]
    pub rules: Rules,
    /// Secret patterns added to or removed from the built-in ones.
    #[serde(default, skip_serializing_if = "SecretSettings::is_empty")]
    pub secrets: SecretSettings,
    /// Which environment variables commands inherit (see [`env`]).
    #[serde(default, skip_serializing_if = "env::EnvSettings::is_default")]
    pub environment: env::EnvSettings,
}
