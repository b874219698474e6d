//! Secret files: files whose content must not reach a model without a person saying so.
//!
//! A secret file is asked about even for reading, whatever the rules say; only an explicit answer
//! for that exact file (or a deny rule) settles it. Patterns are matched case-insensitively at any
//! depth of the project (`.env` matches `api/.env`; `.ssh/**` matches `home/.ssh/id`).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::pattern::PathPattern;
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

/// The compiled set of secret patterns.
#[derive(Debug, Clone)]
pub struct SecretPatterns {
    include: Vec<(String, PathPattern)>,
    except: Vec<PathPattern>,
}

impl Default for SecretPatterns {
    fn default() -> Self {
        Self::from_settings(&SecretSettings::default()).unwrap_or(SecretPatterns {
            include: Vec::new(),
            except: Vec::new(),
        })
    }
}

/// Secret patterns are matched at any depth, even those with a `/` in them.
fn compile(pattern: &str) -> Result<PathPattern, RuleError> {
    let anywhere = if pattern.starts_with("**/") {
        pattern.to_string()
    } else {
        format!("**/{}", pattern.trim_start_matches('/'))
    };
    PathPattern::new(&format!("/{anywhere}"), true).map_err(|e| RuleError::InvalidGlob {
        key: "secrets".into(),
        pattern: pattern.to_string(),
        message: e.kind().to_string(),
    })
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
        let mut include = Vec::new();
        for pattern in DEFAULT_SECRET_PATTERNS
            .iter()
            .map(|p| p.to_string())
            .filter(|p| !settings.remove.contains(p))
            .chain(settings.add.iter().cloned())
        {
            let compiled = compile(&pattern)?;
            include.push((pattern, compiled));
        }
        let except = DEFAULT_SECRET_EXCEPTIONS
            .iter()
            .map(|p| p.to_string())
            .chain(settings.except.iter().cloned())
            .map(|p| compile(&p))
            .collect::<Result<_, _>>()?;
        Ok(SecretPatterns { include, except })
    }

    /// The pattern that makes `path` (project-relative) a secret, if any.
    pub fn matching_pattern(&self, path: &str) -> Option<&str> {
        if self.except.iter().any(|p| p.is_match(path)) {
            return None;
        }
        self.include
            .iter()
            .find(|(_, p)| p.is_match(path))
            .map(|(s, _)| s.as_str())
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
