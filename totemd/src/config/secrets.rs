//! Provider API keys, encrypted at rest.
//!
//! A 32-byte master key lives in `$TOTEM_HOME/keys/master.key` (0600, in a 0700 folder). Each
//! provider's key is sealed with ChaCha20-Poly1305 under a fresh random nonce, bound to the
//! provider's name as associated data (a sealed key moved to another provider does not open),
//! and stored as base64(nonce ‖ ciphertext) in `$TOTEM_HOME/secrets.json` (0600). Keys are never
//! read from environment variables, never written in plain text, and no `Debug` here shows one.

use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::file::write_private;

const NONCE_LEN: usize = 12;
const SECRETS_VERSION: u32 = 1;

/// A provider's API key in plain text, in memory only. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Checks and trims a key as a user typed or pasted it.
    pub fn new(text: &str) -> Result<ApiKey, String> {
        let key = text.trim();
        if key.is_empty() {
            return Err("the key is empty".into());
        }
        if key.len() > 8192 || key.chars().any(char::is_control) {
            return Err("the key holds control characters or is too long; paste it again".into());
        }
        Ok(ApiKey(key.to_string()))
    }

    /// The key itself, for the provider's request headers only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The key itself, taking it out of its wrapper.
    pub fn into_inner(self) -> String {
        self.0
    }

    /// A longer text Totem wrote itself (an MCP server's OAuth tokens as JSON), sealed as is.
    pub fn document(text: String) -> ApiKey {
        ApiKey(text)
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// secrets.json: sealed keys by provider name.
#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretsFile {
    version: u32,
    keys: BTreeMap<String, String>,
}

/// The key store under one home. Every call reads and writes the (small) files afresh, so the
/// files stay the only truth. Clones share the lock (an MCP server's token refresh writes beside
/// the settings' own writes).
#[derive(Clone)]
pub struct Secrets {
    key_path: PathBuf,
    secrets_path: PathBuf,
    /// Serializes read-modify-write of secrets.json within this daemon.
    lock: Arc<Mutex<()>>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("key_path", &self.key_path)
            .field("secrets_path", &self.secrets_path)
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// The key store of the Totem home `home` (its `keys/` and `secrets.json`).
    pub fn new(home: &Path) -> Secrets {
        Secrets {
            key_path: home.join("keys").join("master.key"),
            secrets_path: home.join("secrets.json"),
            lock: Arc::new(Mutex::new(())),
        }
    }

    /// Whether a key is stored for `provider` (without decrypting it).
    pub fn has(&self, provider: &str) -> Result<bool, ConfigError> {
        Ok(self.read_file()?.keys.contains_key(provider))
    }

    /// The names that have a stored key.
    pub fn names(&self) -> Result<Vec<String>, ConfigError> {
        Ok(self.read_file()?.keys.into_keys().collect())
    }

    /// Decrypts the key stored for `provider`, if any.
    pub fn get(&self, provider: &str) -> Result<Option<ApiKey>, ConfigError> {
        let file = self.read_file()?;
        let Some(sealed) = file.keys.get(provider) else {
            return Ok(None);
        };
        let cipher = self.cipher(false)?;
        let undecryptable = |why: &str| ConfigError::Secret {
            path: self.secrets_path.clone(),
            message: format!(
                "the key of provider `{provider}` cannot be decrypted ({why}); master.key changed or the file was edited. Add the provider again with its key"
            ),
        };
        let bytes = BASE64
            .decode(sealed)
            .map_err(|_| undecryptable("not base64"))?;
        if bytes.len() <= NONCE_LEN {
            return Err(undecryptable("too short"));
        }
        let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
        let plain = cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: &aad(provider),
                },
            )
            .map_err(|_| undecryptable("authentication failed"))?;
        let text = String::from_utf8(plain).map_err(|_| undecryptable("not text"))?;
        Ok(Some(ApiKey(text)))
    }

    /// Encrypts and stores `key` for `provider`, replacing any previous one.
    pub fn set(&self, provider: &str, key: &ApiKey) -> Result<(), ConfigError> {
        let _guard = crate::util::lock(&self.lock);
        let cipher = self.cipher(true)?;
        let nonce = ChaCha20Poly1305::generate_nonce(&mut OsRng);
        let ciphertext = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: key.expose().as_bytes(),
                    aad: &aad(provider),
                },
            )
            .map_err(|_| ConfigError::Secret {
                path: self.secrets_path.clone(),
                message: "encryption failed".into(),
            })?;
        let mut sealed = nonce.to_vec();
        sealed.extend_from_slice(&ciphertext);
        let mut file = self.read_file()?;
        file.keys
            .insert(provider.to_string(), BASE64.encode(sealed));
        self.write_file(file)
    }

    /// Forgets the key of `provider`. Returns whether there was one.
    pub fn remove(&self, provider: &str) -> Result<bool, ConfigError> {
        let _guard = crate::util::lock(&self.lock);
        let mut file = self.read_file()?;
        if file.keys.remove(provider).is_none() {
            return Ok(false);
        }
        self.write_file(file)?;
        Ok(true)
    }

    fn read_file(&self) -> Result<SecretsFile, ConfigError> {
        let text = match std::fs::read_to_string(&self.secrets_path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SecretsFile::default()),
            Err(source) => {
                return Err(ConfigError::Io {
                    action: "read",
                    path: self.secrets_path.clone(),
                    source,
                });
            }
        };
        let file: SecretsFile = serde_json::from_str(&text).map_err(|e| ConfigError::Secret {
            path: self.secrets_path.clone(),
            // serde's message may quote the offending text; keep only where it is.
            message: format!(
                "not readable at line {}, column {}; remove it and add the providers' keys again",
                e.line(),
                e.column()
            ),
        })?;
        if file.version > SECRETS_VERSION {
            return Err(ConfigError::Secret {
                path: self.secrets_path.clone(),
                message: format!(
                    "version {} is newer than this totemd reads ({SECRETS_VERSION}); update totemd",
                    file.version
                ),
            });
        }
        Ok(file)
    }

    fn write_file(&self, mut file: SecretsFile) -> Result<(), ConfigError> {
        file.version = SECRETS_VERSION;
        let mut text = serde_json::to_vec_pretty(&file).map_err(|e| ConfigError::Io {
            action: "encode",
            path: self.secrets_path.clone(),
            source: std::io::Error::other(e),
        })?;
        text.push(b'\n');
        write_private(&self.secrets_path, &text)
    }

    /// The cipher under the master key, creating the key (and its private folder) when asked.
    fn cipher(&self, create: bool) -> Result<ChaCha20Poly1305, ConfigError> {
        let key = match std::fs::read(&self.key_path) {
            Ok(bytes) => {
                self.tighten_permissions()?;
                bytes
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => self.create_key()?,
            Err(source) => {
                return Err(ConfigError::Io {
                    action: "read",
                    path: self.key_path.clone(),
                    source,
                });
            }
        };
        if key.len() != 32 {
            return Err(ConfigError::Secret {
                path: self.key_path.clone(),
                message: format!(
                    "holds {} bytes instead of 32; it was damaged. Remove it and secrets.json, then add the providers' keys again",
                    key.len()
                ),
            });
        }
        Ok(ChaCha20Poly1305::new(Key::from_slice(&key)))
    }

    fn create_key(&self) -> Result<Vec<u8>, ConfigError> {
        let dir = self.key_folder();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| ConfigError::Io {
                action: "create",
                path: dir.to_path_buf(),
                source,
            })?;
        set_mode(dir, 0o700)?;
        let key = ChaCha20Poly1305::generate_key(&mut OsRng);
        write_private(&self.key_path, &key)?;
        tracing::info!(path = %self.key_path.display(), "created the master key for provider keys");
        Ok(key.to_vec())
    }

    /// A master key others can read is fixed on sight rather than trusted as is.
    fn tighten_permissions(&self) -> Result<(), ConfigError> {
        for (path, mode) in [(self.key_folder(), 0o700), (self.key_path.as_path(), 0o600)] {
            let current = std::fs::metadata(path)
                .map_err(|source| ConfigError::Io {
                    action: "inspect",
                    path: path.to_path_buf(),
                    source,
                })?
                .permissions()
                .mode()
                & 0o777;
            if current != mode {
                tracing::warn!(path = %path.display(), mode = format!("{current:o}"), "tightening permissions of the master key");
                set_mode(path, mode)?;
            }
        }
        Ok(())
    }

    fn key_folder(&self) -> &Path {
        self.key_path.parent().unwrap_or_else(|| Path::new("."))
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<(), ConfigError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        ConfigError::Io {
            action: "restrict permissions of",
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Associated data: the provider's name, so a sealed key only opens for that provider.
fn aad(provider: &str) -> Vec<u8> {
    format!("totem provider key v1:{provider}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_are_not_stored_in_plain_text() {
        let home = tempfile::tempdir().unwrap();
        let secrets = Secrets::new(home.path());
        let key = ApiKey::new("  sk-test-round-trip-4242\n").unwrap();
        secrets.set("work", &key).unwrap();
        assert_eq!(secrets.get("work").unwrap(), Some(key));
        assert_eq!(secrets.get("other").unwrap(), None);
        for path in [
            home.path().join("secrets.json"),
            home.path().join("keys/master.key"),
        ] {
            let bytes = std::fs::read(&path).unwrap();
            assert!(!bytes.windows(8).any(|w| w == b"sk-test-"), "{path:?}");
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{path:?}");
        }
        let mode = std::fs::metadata(home.path().join("keys"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(secrets.remove("work").unwrap());
        assert_eq!(secrets.get("work").unwrap(), None);
    }

    #[test]
    fn a_sealed_key_does_not_open_for_another_provider() {
        let home = tempfile::tempdir().unwrap();
        let secrets = Secrets::new(home.path());
        secrets.set("a", &ApiKey::new("sk-a").unwrap()).unwrap();
        let path = home.path().join("secrets.json");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("\"a\"", "\"b\"");
        std::fs::write(&path, text).unwrap();
        let err = secrets.get("b").unwrap_err().to_string();
        assert!(err.contains("cannot be decrypted"), "{err}");
        assert!(!err.contains("sk-a"));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = ApiKey::new("sk-visible?").unwrap();
        assert!(!format!("{key:?}").contains("sk-visible"));
    }

    #[test]
    fn each_seal_uses_a_fresh_nonce() {
        let home = tempfile::tempdir().unwrap();
        let secrets = Secrets::new(home.path());
        let key = ApiKey::new("sk-same").unwrap();
        secrets.set("a", &key).unwrap();
        let first = std::fs::read_to_string(home.path().join("secrets.json")).unwrap();
        secrets.set("a", &key).unwrap();
        let second = std::fs::read_to_string(home.path().join("secrets.json")).unwrap();
        assert_ne!(first, second);
    }
}
