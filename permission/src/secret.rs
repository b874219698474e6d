//! Secret files: files whose content must not reach a model without a person saying so.
//!
//! A secret file is asked about even for reading, whatever the rules say; only an explicit answer
//! for that exact file (or a deny rule) settles it. Patterns are matched case-insensitively at any
//! depth of the project (`.env` matches `api/.env`; `.ssh/**` matches `home/.ssh/id`).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use globset::{GlobSet, GlobSetBuilder};

use crate::pattern::{normalize_path, path_glob};
use crate::rules::RuleError;

/// The built-in secret patterns.
pub const DEFAULT_SECRET_PATTERNS: &[&str] = &[
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.ppk",
    "*.kdbx",
    "*.tfstate",
    "*.tfstate.*",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".npmrc",
    ".netrc",
    ".pypirc",
    ".pgpass",
    ".htpasswd",
    ".git-credentials",
    ".vault-token",
    "credentials*",
    ".aws/credentials",
    ".docker/config.json",
    ".kube/config",
    ".ssh/**",
    ".gnupg/**",
];

/// Files that match a secret pattern but are meant to be shared: templates and public keys.
pub const DEFAULT_SECRET_EXCEPTIONS: &[&str] = &[
    ".env.example",
    ".env.sample",
    ".env.template",
    ".env.dist",
    "*.pub",
];

/// How a user adjusts the secret patterns in settings:
/// `{"add": ["*.secret"], "remove": ["*.key"], "except": ["fixtures/*.pem"]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretSettings {
    /// More patterns to treat as secret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<String>,
    /// Built-in patterns to drop, written exactly as in [`DEFAULT_SECRET_PATTERNS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Paths that are never secret even when a pattern matches them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub except: Vec<String>,
}

impl SecretSettings {
    /// No adjustment: the built-in patterns as they are.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.remove.is_empty() && self.except.is_empty()
    }
}

/// The compiled set of secret patterns. Each side is one `GlobSet`, so a path is checked
/// against every pattern in one pass: the tools ask this of every file they walk.
#[derive(Debug, Clone)]
pub struct SecretPatterns {
    /// The patterns as written, in the order of `include`'s globs.
    names: Vec<String>,
    include: GlobSet,
    except: GlobSet,
    /// The settings these were built from (handed to the sandbox launcher).
    settings: SecretSettings,
}

impl Default for SecretPatterns {
    fn default() -> Self {
        Self::from_settings(&SecretSettings::default()).unwrap_or(SecretPatterns {
            names: Vec::new(),
            include: GlobSet::empty(),
            except: GlobSet::empty(),
            settings: SecretSettings::default(),
        })
    }
}

fn invalid(pattern: &str, e: &globset::Error) -> RuleError {
    RuleError::InvalidGlob {
        key: "secrets".into(),
        pattern: pattern.to_string(),
        message: e.kind().to_string(),
    }
}

/// Secret patterns are matched at any depth, even those with a `/` in them.
fn compile<'a>(patterns: impl Iterator<Item = &'a str>) -> Result<GlobSet, RuleError> {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        let anywhere = if pattern.starts_with("**/") {
            pattern.to_string()
        } else {
            format!("**/{}", pattern.trim_start_matches('/'))
        };
        set.add(path_glob(&format!("/{anywhere}"), true).map_err(|e| invalid(pattern, &e))?);
    }
    set.build().map_err(|e| invalid("(all)", &e))
}

impl SecretPatterns {
    /// The built-in patterns adjusted by `settings`.
    pub fn from_settings(settings: &SecretSettings) -> Result<Self, RuleError> {
        for removed in &settings.remove {
            if !DEFAULT_SECRET_PATTERNS.contains(&removed.as_str()) {
                return Err(RuleError::UnknownSecretPattern {
                    pattern: removed.clone(),
                });
            }
        }
        let names: Vec<String> = DEFAULT_SECRET_PATTERNS
            .iter()
            .map(|p| p.to_string())
            .filter(|p| !settings.remove.contains(p))
            .chain(settings.add.iter().cloned())
            .collect();
        let include = compile(names.iter().map(String::as_str))?;
        let except = compile(
            DEFAULT_SECRET_EXCEPTIONS
                .iter()
                .copied()
                .chain(settings.except.iter().map(String::as_str)),
        )?;
        Ok(SecretPatterns {
            names,
            include,
            except,
            settings: settings.clone(),
        })
    }

    /// The settings these patterns were built from.
    pub fn settings(&self) -> &SecretSettings {
        &self.settings
    }

    /// The pattern that makes `path` (project-relative) a secret, if any: the first one listed
    /// that matches.
    pub fn matching_pattern(&self, path: &str) -> Option<&str> {
        let path = normalize_path(path);
        if !self.include.is_match(path) || self.except.is_match(path) {
            return None;
        }
        let first = self.include.matches(path).into_iter().min()?;
        self.names.get(first).map(String::as_str)
    }

    /// Whether `path` (project-relative) is a secret file.
    pub fn is_secret(&self, path: &str) -> bool {
        self.matching_pattern(path).is_some()
    }
}

/// Whether `path` (project-relative) is a secret file under the built-in patterns.
pub fn is_secret(path: &str) -> bool {
    static BUILT_IN: OnceLock<SecretPatterns> = OnceLock::new();
    BUILT_IN
        .get_or_init(SecretPatterns::default)
        .is_secret(path)
}
