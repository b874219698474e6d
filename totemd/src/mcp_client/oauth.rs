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
//!
//! Two more sealed entries per server: the client registration (`mcp/NAME/oauth-client`: client
//! id and secret, the redirect URI and the authorization server it was made with), reused by the
//! next login instead of registering again, and kept by a logout; and the note that the
//! authorization server refused to renew the login (`mcp/NAME/oauth-refused`), so that
//! `totem mcp list`, `totem mcp test` and runs say the login expired until the next login.

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

/// Where the note that the authorization server refused to renew the login is kept.
fn refused_key(server: &str) -> String {
    format!("mcp/{server}/oauth-refused")
}

/// Where the client registration of server `server` is sealed.
fn client_key(server: &str) -> String {
    format!("mcp/{server}/oauth-client")
}

/// What the authorization server said when it refused to renew a login, for the note.
const REFUSED: &str = "the authorization server refused to renew it";

/// Why the stored login of server `server` no longer works (the authorization server refused
/// to renew it), until the next login; `None` when it was not refused.
pub fn refused(secrets: &Secrets, server: &str) -> Option<String> {
    match secrets.get(&refused_key(server)) {
        Ok(Some(why)) => Some(why.into_inner()),
        _ => None,
    }
}

/// Forgets the tokens of server `server` and the note of a refusal; the client registration
/// stays for the next login. Returns whether there were tokens.
pub fn log_out(secrets: &Secrets, server: &str) -> Result<bool, ConfigError> {
    let had = secrets.remove(&secret_key(server))?;
    secrets.remove(&refused_key(server))?;
    Ok(had)
}

/// A client registration with an authorization server (RFC 7591), kept for the next login.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Registration {
    client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    /// The redirect URI it was registered with: the next login must come back there.
    redirect_uri: String,
    /// The authorization server's issuer (its authorization endpoint when it names none).
    authorization_server: String,
}

impl Registration {
    fn load(secrets: &Secrets, server: &str) -> Option<Registration> {
        let sealed = secrets.get(&client_key(server)).ok()??;
        serde_json::from_str(sealed.expose()).ok()
    }

    fn save(&self, secrets: &Secrets, server: &str) -> Result<(), ConfigError> {
        let text = serde_json::to_string(self)
            .map_err(|e| ConfigError::BadRequest(format!("the registration: {e}")))?;
        secrets.set(&client_key(server), &ApiKey::document(text))
    }

    /// Whether it can serve a login to `authorization_server` coming back to `redirect_uri`.
    fn fits(&self, authorization_server: &str, redirect_uri: &str) -> bool {
        self.authorization_server == authorization_server && self.redirect_uri == redirect_uri
    }
}

/// Forgets the client registration of server `server` when it is the one with `client_id`
/// (the authorization server no longer accepts it: the next login registers again).
fn forget_registration(secrets: &Secrets, server: &str, client_id: &str) {
    if Registration::load(secrets, server).is_some_and(|r| r.client_id == client_id) {
        let _ = secrets.remove(&client_key(server));
        tracing::info!(server = %server, "MCP server OAuth client registration refused; forgotten");
    }
}

/// The redirect URI the stored client registration of server `server` was made with: where
/// `totem mcp login` listens again so that the registration is reused.
pub fn registered_redirect(secrets: &Secrets, server: &str) -> Option<String> {
    Registration::load(secrets, server).map(|r| r.redirect_uri)
}

/// Whether an OAuth error code says the authorization server no longer knows the client.
fn client_refused(text: &str) -> bool {
    text.contains("invalid_client") || text.contains("unauthorized_client")
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

impl TokenStore {
    /// Why the login no longer works, when the authorization server refused to renew it.
    pub fn refused(&self) -> Option<String> {
        refused(&self.secrets, &self.server)
    }

    /// Notes that the authorization server refused to renew the login.
    fn refuse(&self, why: &str) {
        let noted = self.secrets.set(
            &refused_key(&self.server),
            &ApiKey::document(why.to_string()),
        );
        match noted {
            Ok(()) => tracing::warn!(server = %self.server, why, "MCP server login refused"),
            Err(e) => {
                tracing::warn!(server = %self.server, error = %e, "the refusal was not noted")
            }
        }
    }
}

/// What to tell the user when server `tokens` refused a connection or a call for want of a valid
/// login; `error` is rmcp's. A refresh the authorization server refused (an error answer from
/// its token endpoint, not a network failure) is noted first, so that `totem mcp list` says so
/// too; `invalid_grant` was noted already by [`TokenStore::on_refresh_token_rejected`].
pub fn relogin_hint(tokens: &TokenStore, error: &str) -> String {
    const ANSWER: &str = "token refresh failed: Server returned error response: ";
    if let Some((_, answer)) = error.split_once(ANSWER) {
        let code = answer.split([':', ' ', ',']).next().unwrap_or_default();
        tokens.refuse(REFUSED);
        if client_refused(code)
            && let Ok(Some(current)) = tokens.secrets.get(&secret_key(&tokens.server))
            && let Ok(current) = serde_json::from_str::<StoredCredentials>(current.expose())
        {
            forget_registration(&tokens.secrets, &tokens.server, &current.client_id);
        }
    }
    match tokens.refused() {
        Some(why) => login_hint(&tokens.server, &format!("its login expired ({why})")),
        // No answer from the token endpoint: nothing was refused, so nothing to log in again for.
        None if error.contains("token refresh failed") => format!(
            "its login could not be renewed: its authorization server did not answer; `totem mcp test {}` tries again",
            tokens.server
        ),
        None => login_hint(&tokens.server, "its login is no longer valid"),
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
        if credentials.token_response.is_some() {
            // Tokens the authorization server just gave: whatever it refused before is over.
            self.secrets
                .remove(&refused_key(&self.server))
                .map_err(store_error)?;
        }
        tracing::info!(server = %self.server, "MCP server OAuth tokens stored");
        Ok(())
    }

    /// The authorization server answered `invalid_grant` to the refresh: the login is over
    /// until the next `totem mcp login` (unless another refresh replaced the tokens meanwhile).
    async fn on_refresh_token_rejected(
        &self,
        credentials: &StoredCredentials,
    ) -> Result<(), AuthError> {
        let current = self.load().await?;
        let same = current.is_some_and(|c| {
            c.client_id == credentials.client_id
                && c.token_received_at == credentials.token_received_at
        });
        if same {
            self.refuse(REFUSED);
        }
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
    if let Some(why) = tokens.refused() {
        return Err(login_hint(&server, &format!("its login expired ({why})")));
    }
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
    pending: Mutex<HashMap<String, Pending>>,
}

/// A login waiting for the browser.
struct Pending {
    session: AuthorizationSession,
    started: Instant,
    /// The client id of Totem's registration it uses (`None` for a client registered by hand).
    registered: Option<String>,
    secrets: Secrets,
}

/// Whether the authorization server takes the client of the authorization page `url`: it
/// answers an unknown client with an error page (RFC 6749 section 4.1.2.1) instead of its login
/// page or a redirect. Anything else, including no answer, lets the browser find out.
async fn takes_client(url: &str) -> bool {
    let Ok(client) = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
    else {
        return true;
    };
    match client.get(url).send().await {
        Ok(answer) => !answer.status().is_client_error(),
        Err(_) => true,
    }
}

impl Logins {
    /// Starts the login to server `name`: finds its authorization server, registers Totem there
    /// (unless `client_id` is given or the last registration serves) and returns the URL to open in the browser, which comes back
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
        let authorization_server = resolution
            .metadata
            .issuer
            .clone()
            .unwrap_or_else(|| resolution.metadata.authorization_endpoint.clone());
        manager.set_metadata(resolution.metadata);
        let secrets = settings.secrets();
        manager.set_credential_store(TokenStore::new(secrets.clone(), name));
        let scopes = manager.select_initial_scopes(&[]).await;
        let request = |id: &str, secret: Option<&str>| {
            let mut request = AuthorizationRequest::new(redirect_uri)
                .with_client_name("Totem")
                .with_scopes(scopes.clone())
                .with_initial_scope_selection()
                .with_preregistered_client(id);
            if let Some(secret) = secret {
                request = request.with_client_secret(secret);
            }
            request
        };
        let could_not_start =
            |e: AuthError| bad(format!("the login could not start: {}", plain(&e)));
        // A client registered by hand; else the registration of the last login when it was made
        // with this authorization server for this redirect URI and the server still takes it;
        // else a new registration, kept for the next login.
        let (session, registered) = match client_id {
            Some(id) => {
                let session = AuthorizationSession::new(manager, request(id, None))
                    .await
                    .map_err(|(_, e)| could_not_start(e))?;
                (session, None)
            }
            None => {
                let stored = Registration::load(secrets, name)
                    .filter(|r| r.fits(&authorization_server, redirect_uri));
                // The session of the stored registration, or the manager back to register anew.
                let reused = match stored {
                    Some(r) => {
                        let session = AuthorizationSession::new(
                            manager,
                            request(&r.client_id, r.client_secret.as_deref()),
                        )
                        .await
                        .map_err(|(_, e)| could_not_start(e))?;
                        match takes_client(session.get_authorization_url()).await {
                            true => Ok((session, r.client_id)),
                            false => {
                                forget_registration(secrets, name, &r.client_id);
                                Err(session.auth_manager)
                            }
                        }
                    }
                    None => Err(manager),
                };
                match reused {
                    Ok((session, id)) => {
                        tracing::info!(server = %name, "MCP server login reuses its client registration");
                        (session, Some(id))
                    }
                    Err(mut manager) => {
                        if !registers {
                            return Err(bad(format!(
                                "its authorization server does not register clients by itself; register Totem there (redirect URI {redirect_uri}, any port of 127.0.0.1) and run `totem mcp login {name} --client-id ID`"
                            )));
                        }
                        let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
                        let config = manager
                            .register_client("Totem", redirect_uri, &scope_refs)
                            .await
                            .map_err(|e| {
                                bad(format!("Totem could not register there: {}", plain(&e)))
                            })?;
                        Registration {
                            client_id: config.client_id.clone(),
                            client_secret: config.client_secret.clone(),
                            redirect_uri: redirect_uri.to_string(),
                            authorization_server,
                        }
                        .save(secrets, name)?;
                        tracing::info!(server = %name, "MCP server OAuth client registered");
                        let session = AuthorizationSession::new(
                            manager,
                            request(&config.client_id, config.client_secret.as_deref()),
                        )
                        .await
                        .map_err(|(_, e)| could_not_start(e))?;
                        (session, Some(config.client_id))
                    }
                }
            }
        };
        let url = session.get_authorization_url().to_string();
        let mut pending = lock(&self.pending);
        pending.retain(|_, login| login.started.elapsed() < LOGIN_WAIT);
        pending.insert(
            name.to_string(),
            Pending {
                session,
                started: Instant::now(),
                registered,
                secrets: secrets.clone(),
            },
        );
        tracing::info!(server = %name, by_hand = client_id.is_some(), "MCP server login started");
        Ok(url)
    }

    /// Finishes the login to `name` with the URL the browser was sent back to: checks its
    /// `state`, trades the code for tokens (with the PKCE verifier) and seals them.
    pub async fn finish(&self, name: &str, callback_url: &str) -> Result<(), ConfigError> {
        let again = format!("start again with `totem mcp login {name}`");
        let Some(Pending {
            session,
            registered,
            secrets,
            ..
        }) = lock(&self.pending).remove(name)
        else {
            return Err(ConfigError::BadRequest(format!(
                "no login to MCP server `{name}` is under way; {again}"
            )));
        };
        let query: HashMap<String, String> = reqwest::Url::parse(callback_url)
            .map(|u| u.query_pairs().into_owned().collect())
            .unwrap_or_default();
        // The authorization server does not know Totem's registration any more: the next login
        // registers again.
        let refused_client = |text: &str| {
            if let Some(id) = registered.as_deref().filter(|_| client_refused(text)) {
                forget_registration(&secrets, name, id);
            }
        };
        if let Some(error) = query.get("error") {
            refused_client(error);
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
                refused_client(&e.to_string());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_serves_only_its_authorization_server_and_redirect_uri() {
        let registration = Registration {
            client_id: "c1".into(),
            client_secret: None,
            redirect_uri: "http://127.0.0.1:4000/callback".into(),
            authorization_server: "https://auth.example".into(),
        };
        assert!(registration.fits("https://auth.example", "http://127.0.0.1:4000/callback"));
        // Another authorization server, or another port: register again.
        assert!(!registration.fits("https://other.example", "http://127.0.0.1:4000/callback"));
        assert!(!registration.fits("https://auth.example", "http://127.0.0.1:4001/callback"));
    }

    #[test]
    fn only_a_refusal_of_the_client_forgets_the_registration() {
        assert!(client_refused("invalid_client"));
        assert!(client_refused("unauthorized_client"));
        assert!(!client_refused("invalid_grant"));
        assert!(!client_refused("access_denied"));
    }
}
