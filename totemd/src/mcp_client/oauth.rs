//! OAuth for remote MCP servers (`totem mcp login NAME`), on rmcp's `auth` feature: discovery of
//! the protected-resource metadata (RFC 9728, from the 401's `WWW-Authenticate` header or the
//! well-known URL) and then of the authorization server (RFC 8414), dynamic client registration
//! (RFC 7591) unless the user gives a client id, authorization code with PKCE S256 and a checked
//! `state`, refresh when the access token expired or the server answers 401.
//!
//! The CLI owns the loopback redirect (it is where the browser is): it asks for the authorization
//! URL with its redirect URI ([`Logins::start`]), then hands the URL the browser came back with
//! ([`Logins::finish`]). The tokens are sealed in secrets.json under `mcp/NAME/oauth` like provider
//! keys, and read and written there again by every refresh ([`TokenStore`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationMetadataResolution,
    AuthorizationRequest, AuthorizationSession, CredentialStore, StoredCredentials,
};

use crate::config::{ApiKey, ConfigError, McpServerSettings, Secrets, Settings};
use crate::util::lock;

/// A login that waits longer than this for the browser is forgotten.
const LOGIN_WAIT: Duration = Duration::from_secs(15 * 60);

/// Where the OAuth tokens of server `server` are sealed in secrets.json.
pub fn secret_key(server: &str) -> String {
    format!("mcp/{server}/oauth")
}

/// The sealed OAuth tokens of one server: what rmcp loads before a request and saves after a
/// login or a refresh. Equal when they belong to the same server (the tokens are not compared:
/// a refresh does not make a running server's configuration another one).
#[derive(Clone)]
pub struct TokenStore {
    secrets: Secrets,
    server: String,
}

impl TokenStore {
    /// The OAuth token store of the MCP server `server`, kept in `secrets`.
    pub fn new(secrets: Secrets, server: &str) -> TokenStore {
        TokenStore {
            secrets,
            server: server.to_string(),
        }
    }
}

impl PartialEq for TokenStore {
    fn eq(&self, other: &TokenStore) -> bool {
        self.server == other.server
    }
}

impl Eq for TokenStore {}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenStore({})", self.server)
    }
}

fn store_error(e: impl std::fmt::Display) -> AuthError {
    AuthError::CredentialStoreError(e.to_string())
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some(sealed) = self
            .secrets
            .get(&secret_key(&self.server))
            .map_err(store_error)?
        else {
            return Ok(None);
        };
        serde_json::from_str(sealed.expose())
            .map(Some)
            .map_err(store_error)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = serde_json::to_string(&credentials).map_err(store_error)?;
        self.secrets
            .set(&secret_key(&self.server), &ApiKey::document(text))
            .map_err(store_error)?;
        tracing::info!(server = %self.server, "MCP server OAuth tokens stored");
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.secrets
            .remove(&secret_key(&self.server))
            .map(|_| ())
            .map_err(store_error)
    }
}

/// The HTTP client of a logged-in server: it sends the stored access token, refreshes it when
/// it expired or the server answers 401, and stores the new tokens.
pub async fn client(url: &str, tokens: TokenStore) -> Result<AuthClient<reqwest::Client>, String> {
    let server = tokens.server.clone();
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| format!("{url} is not a URL Totem can log in to: {e}"))?;
    manager.set_credential_store(tokens);
    match manager.initialize_from_store().await {
        Ok(true) => Ok(AuthClient::new(reqwest::Client::default(), manager)),
        Ok(false) => Err(login_hint(&server, "its login is no longer valid")),
        Err(e) => Err(match unreachable(url).await {
            // The server itself is down: that, not its metadata, is what to fix.
            Some(why) => {
                format!("{url} did not accept the connection ({why}); is the server running?")
            }
            None => format!(
                "its OAuth metadata could not be read ({}); `totem mcp test {server}` tries again",
                plain(&e)
            ),
        }),
    }
}

/// Why nothing answers at `url` (the connection was refused, the name does not resolve); `None`
/// when something does.
async fn unreachable(url: &str) -> Option<String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .ok()?;
    match client.get(url).send().await {
        Err(e) if e.is_connect() || e.is_timeout() => {
            let mut causes = Vec::new();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                causes.push(c.to_string().to_lowercase());
                cause = c.source();
            }
            Some(if causes.iter().any(|c| c.contains("refused")) {
                "it refused the connection".to_string()
            } else if e.is_timeout() {
                "it did not answer in time".to_string()
            } else {
                "it could not be reached".to_string()
            })
        }
        _ => None,
    }
}

/// What to do when a server wants a (new) login.
pub fn login_hint(server: &str, what: &str) -> String {
    format!("{what}: run `totem mcp login {server}`")
}

/// Whether the server at `url` publishes OAuth metadata (so `totem mcp login` can work).
pub async fn offers_login(url: &str, entry: &McpServerSettings) -> bool {
    let found = tokio::time::timeout(Duration::from_secs(15), discover(url, entry)).await;
    matches!(found, Ok(Ok((_, resolution))) if resolution.source.is_discovered())
}

/// Finds the authorization server of the server at `url`: through the protected-resource
/// metadata its 401 names in `WWW-Authenticate` (RFC 9728), else at the well-known URLs.
async fn discover(
    url: &str,
    entry: &McpServerSettings,
) -> Result<(AuthorizationManager, AuthorizationMetadataResolution), String> {
    let challenge = challenge(url, entry).await?;
    let manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| format!("{url} is not a URL Totem can log in to: {e}"))?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(|e| format!("its OAuth metadata could not be read: {}", plain(&e)))?;
    Ok((manager, resolution))
}

/// An rmcp auth error as a sentence without Rust type names.
fn plain(e: &AuthError) -> String {
    e.to_string().replace("OAuth ", "")
}

/// Logins under way: the authorization session of each server whose browser step is pending.
#[derive(Default)]
pub struct Logins {
    pending: Mutex<HashMap<String, (AuthorizationSession, Instant)>>,
}

impl Logins {
    /// Starts the login to server `name`: finds its authorization server, registers Totem there
    /// (unless `client_id` is given) and returns the URL to open in the browser, which comes back
    /// to `redirect_uri` (the CLI's loopback address).
    pub async fn start(
        &self,
        settings: &Settings,
        name: &str,
        redirect_uri: &str,
        client_id: Option<&str>,
    ) -> Result<String, ConfigError> {
        let entry = remote_entry(settings, name)?;
        let Some(url) = entry.url.clone() else {
            return Err(ConfigError::BadRequest(format!(
                "MCP server `{name}` is a command, not a URL; only remote servers log in"
            )));
        };
        let loopback = ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"];
        if !loopback.iter().any(|p| redirect_uri.starts_with(p)) {
            return Err(ConfigError::BadRequest(format!(
                "the redirect URI must be a loopback http address, not {redirect_uri}"
            )));
        }
        let bad = |what: String| ConfigError::BadRequest(format!("MCP server `{name}`: {what}"));
        let (mut manager, resolution) = discover(&url, &entry).await.map_err(bad)?;
        if !resolution.source.is_discovered() {
            return Err(bad(format!(
                "{url} publishes no OAuth metadata, so there is nothing to log in to; if it wants a token, store one with `totem mcp add {name} --url {url} --header Authorization --value-stdin --replace`"
            )));
        }
        let registers = resolution.metadata.registration_endpoint.is_some();
        manager.set_metadata(resolution.metadata);
        manager.set_credential_store(TokenStore::new(settings.secrets().clone(), name));
        let mut request = AuthorizationRequest::new(redirect_uri)
            .with_client_name("Totem")
            .with_initial_scope_selection();
        if let Some(id) = client_id {
            request = request.with_preregistered_client(id);
        } else if !registers {
            return Err(bad(format!(
                "its authorization server does not register clients by itself; register Totem there (redirect URI {redirect_uri}, any port of 127.0.0.1) and run `totem mcp login {name} --client-id ID`"
            )));
        }
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, e)| bad(format!("the login could not start: {}", plain(&e))))?;
        let url = session.get_authorization_url().to_string();
        let mut pending = lock(&self.pending);
        pending.retain(|_, (_, started)| started.elapsed() < LOGIN_WAIT);
        pending.insert(name.to_string(), (session, Instant::now()));
        tracing::info!(server = %name, registered = client_id.is_none(), "MCP server login started");
        Ok(url)
    }

    /// Finishes the login to `name` with the URL the browser was sent back to: checks its
    /// `state`, trades the code for tokens (with the PKCE verifier) and seals them.
    pub async fn finish(&self, name: &str, callback_url: &str) -> Result<(), ConfigError> {
        let again = format!("start again with `totem mcp login {name}`");
        let Some((session, _)) = lock(&self.pending).remove(name) else {
            return Err(ConfigError::BadRequest(format!(
                "no login to MCP server `{name}` is under way; {again}"
            )));
        };
        let query: HashMap<String, String> = reqwest::Url::parse(callback_url)
            .map(|u| u.query_pairs().into_owned().collect())
            .unwrap_or_default();
        if let Some(error) = query.get("error") {
            let detail = query
                .get("error_description")
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            return Err(ConfigError::BadRequest(format!(
                "the authorization server of `{name}` said no: {error}{detail}; {again}"
            )));
        }
        session
            .handle_callback_url(callback_url)
            .await
            .map_err(|e| {
                let why = match &e {
                    AuthError::InternalError(m) if m.contains("state not found") => {
                        "the answer's state is not this login's".to_string()
                    }
                    e => plain(e),
                };
                ConfigError::BadRequest(format!("the login to `{name}` failed: {why}; {again}"))
            })?;
        tracing::info!(server = %name, "MCP server logged in");
        Ok(())
    }
}

/// The user's server `name` with its secrets, for reaching it.
fn remote_entry(settings: &Settings, name: &str) -> Result<McpServerSettings, ConfigError> {
    match settings.mcp_server_with_secrets(name) {
        None => Err(ConfigError::NoMcpServer(name.to_string())),
        Some(Err(problem)) => Err(ConfigError::BadRequest(problem)),
        Some(Ok(entry)) => Ok(entry),
    }
}

/// The `WWW-Authenticate` header of the server's answer to a request without a token (an MCP
/// `initialize`), when it answers 401; `None` when it answers otherwise.
async fn challenge(url: &str, entry: &McpServerSettings) -> Result<Option<String>, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut request = reqwest::Client::new()
        .post(url)
        .timeout(Duration::from_secs(30))
        .header("accept", "application/json, text/event-stream")
        .json(&serde_json::json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "totem", "version": env!("CARGO_PKG_VERSION")}}
        }));
    for (header, value) in &entry.headers {
        request = request.header(header, value);
    }
    let answer = request.send().await.map_err(|e| {
        format!(
            "{url} did not answer ({})",
            crate::redact::text(&e.to_string())
        )
    })?;
    if answer.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Ok(None);
    }
    Ok(answer
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(String::from))
}
