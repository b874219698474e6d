//! Which environment variables commands inherit from the daemon.
//!
//! Commands run with the user's environment minus the names that look like secrets: by default
//! every name containing `KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `CREDENTIAL` or
//! `AUTH` (case does not matter), as Codex's shell environment policy does. In settings:
//!
//! ```json
//! { "permission": { "environment": {
//!     "exclude": ["AWS_*", "*_DSN"],
//!     "keep": ["SSH_AUTH_SOCK"],
//!     "set": {"CI": "1"},
//!     "ignoreDefaultExcludes": false
//! } } }
//! ```
//!
//! Patterns use `*` for any text and match whole names, without regard to case.
//!
//! A value that carries a credential is removed whatever its name (unless `keep` names it): a
//! URL with a password (`DATABASE_URL=postgres://app:hunter2@db/x`) or a `password=…`/`pwd=…`
//! pair (`host=db password=…`).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

use serde::{Deserialize, Serialize};

/// Names removed unless the settings say otherwise.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "*KEY*",
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "*AUTH*",
    "*_PWD",
    "*PASSPHRASE*",
];

/// `permission.environment` in settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvSettings {
    /// More name patterns to remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Names (or patterns) kept even though an exclude matches them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep: Vec<String>,
    /// Variables set for every command.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Drop the built-in excludes (only `exclude` applies).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_default_excludes: bool,
}

impl EnvSettings {
    /// Nothing configured (the built-in excludes apply).
    pub fn is_default(&self) -> bool {
        *self == EnvSettings::default()
    }

    /// Whether a variable named `name` is removed.
    pub fn excludes(&self, name: &str) -> bool {
        let defaults = DEFAULT_EXCLUDES
            .iter()
            .copied()
            .filter(|_| !self.ignore_default_excludes);
        let excluded = defaults
            .chain(self.exclude.iter().map(String::as_str))
            .any(|p| name_matches(p, name));
        excluded && !self.keep.iter().any(|p| name_matches(p, name))
    }

    /// Whether a variable `name=value` is removed: by its name, or because its value carries a
    /// credential (see [`carries_credential`]).
    pub fn removes(&self, name: &str, value: &str) -> bool {
        self.excludes(name)
            || (carries_credential(value) && !self.keep.iter().any(|p| name_matches(p, name)))
    }

    /// The names among `vars` (the daemon's environment, names and values) that commands do not
    /// get.
    pub fn removed_vars<'a>(
        &self,
        vars: impl IntoIterator<Item = (&'a OsStr, &'a OsStr)>,
    ) -> Vec<OsString> {
        vars.into_iter()
            .filter(|(name, value)| self.removes(&name.to_string_lossy(), &value.to_string_lossy()))
            .map(|(name, _)| name.to_os_string())
            .collect()
    }

    /// The names among `vars` (the daemon's environment) that commands do not get.
    pub fn removed<'a>(&self, vars: impl IntoIterator<Item = &'a OsStr>) -> Vec<OsString> {
        vars.into_iter()
            .filter(|name| self.excludes(&name.to_string_lossy()))
            .map(OsStr::to_os_string)
            .collect()
    }
}

/// Whether a value looks like it holds a password: a URL whose user part has one
/// (`scheme://user:pass@host`) or a `password=`/`pwd=`/`passwd=` pair.
pub fn carries_credential(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        let authority = after.split(['/', '?', '#', ' ']).next().unwrap_or("");
        if let Some((user_info, _)) = authority.rsplit_once('@')
            && let Some((_, password)) = user_info.split_once(':')
            && !password.is_empty()
        {
            return true;
        }
        rest = after;
    }
    ["password=", "passwd=", "pwd=", "password:"]
        .iter()
        .any(|key| lower.contains(key))
}

/// `*` matches any text; everything else is compared without regard to ASCII case.
fn name_matches(pattern: &str, name: &str) -> bool {
    let pattern = pattern.to_ascii_uppercase();
    let name = name.to_ascii_uppercase();
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        // No `*`: the whole name.
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names_are_removed_and_others_kept() {
        let env = EnvSettings::default();
        for name in [
            "OPENAI_API_KEY",
            "api_key",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "PGPASSWORD",
            "TOTEM_MASTER_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "NPM_AUTH",
        ] {
            assert!(env.excludes(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "TERM", "KEYBOARD_LAYOUT_X"] {
            assert_eq!(env.excludes(name), name.contains("KEY"), "{name}");
        }
    }

    #[test]
    fn settings_add_keep_and_replace_the_defaults() {
        let env: EnvSettings = serde_json::from_str(
            r#"{"exclude": ["*_DSN"], "keep": ["SSH_AUTH_SOCK"], "set": {"CI": "1"}}"#,
        )
        .unwrap_or_default();
        assert!(env.excludes("SENTRY_DSN"));
        assert!(!env.excludes("SSH_AUTH_SOCK"));
        assert!(env.excludes("MY_TOKEN"));
        let only: EnvSettings =
            serde_json::from_str(r#"{"ignoreDefaultExcludes": true, "exclude": ["X"]}"#)
                .unwrap_or_default();
        assert!(!only.excludes("MY_TOKEN"));
        assert!(only.excludes("x"));
        assert!(!only.excludes("XY"));
        assert!(serde_json::from_str::<EnvSettings>(r#"{"exclud": []}"#).is_err());
    }

    #[test]
    fn values_with_credentials_are_removed_whatever_the_name() {
        let env = EnvSettings::default();
        assert!(env.removes("DATABASE_URL", "postgres://app:hunter2@db:5432/x"));
        assert!(env.removes("REDIS", "redis://:pw@localhost:6379"));
        assert!(env.removes("DSN", "host=db user=app password=hunter2"));
        assert!(env.removes("MYSQL_PWD", "hunter2"));
        assert!(!env.removes("DATABASE_URL", "postgres://app@db/x"));
        assert!(!env.removes("HOMEPAGE", "https://example.com/a:b@c"));
        assert!(!env.removes("PWD", "/home/me"));
        assert!(!env.removes("OLDPWD", "/home"));
        let keep: EnvSettings =
            serde_json::from_str(r#"{"keep": ["DATABASE_URL"]}"#).unwrap_or_default();
        assert!(!keep.removes("DATABASE_URL", "postgres://app:pw@db/x"));
    }

    #[test]
    fn patterns_match_whole_names() {
        assert!(name_matches("A*B", "AXXB"));
        assert!(!name_matches("A*B", "AXXBC"));
        assert!(name_matches("*", ""));
        assert!(name_matches("AB*", "AB"));
        assert!(!name_matches("*AB*AB", "AB"));
    }
}
