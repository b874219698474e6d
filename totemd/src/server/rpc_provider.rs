//! Handlers of the provider and model methods: `provider.add|list|remove|test`, `model.list`;
//! and of the user's MCP servers: `mcpServer.add|list|remove|test`.
//! Params of `provider.add` carry a key; nothing here logs params or returns a key.

use jsonrpsee::core::server::RpcModule;
use jsonrpsee::types::ErrorObjectOwned;
use totem_protocol::{
    ErrorCode, McpServerAddParams, McpServerLoginFinishParams, McpServerLoginParams,
    McpServerLoginStarted, McpServerLogoutResult, McpServerTestParams, McpServerTestResult,
    ModelListParams, NoParams, ProviderAddParams, ProviderRef, ProviderRemoved, ProviderTestParams,
    method,
};

use super::rpc::{err, register};
use crate::config::ConfigError;
use crate::daemon::Daemon;

impl From<ConfigError> for ErrorObjectOwned {
    fn from(e: ConfigError) -> Self {
        let code = match &e {
            ConfigError::BadRequest(_) => ErrorCode::INVALID_PARAMS,
            ConfigError::NoProvider(_) | ConfigError::NoMcpServer(_) => ErrorCode::NOT_FOUND,
            ConfigError::Exists(_) | ConfigError::Broken(_) => ErrorCode::CONFLICT,
            ConfigError::Malformed { .. } | ConfigError::Invalid { .. } => ErrorCode::CONFLICT,
            ConfigError::Io { .. } | ConfigError::Secret { .. } | ConfigError::Provider(_) => {
                tracing::error!(error = %e, "settings failure");
                ErrorCode::INTERNAL_ERROR
            }
        };
        err(code, e.to_string())
    }
}

/// Registers the provider and model methods.
pub fn register_all(m: &mut RpcModule<Daemon>) {
    register::<method::ProviderAdd, _, _>(m, |p: ProviderAddParams, d, _| async move {
        Ok(d.settings.add_provider(p)?)
    });

    register::<method::ProviderList, _, _>(m, |_: NoParams, d, _| async move {
        Ok(d.settings.list_providers()?)
    });

    register::<method::ProviderRemove, _, _>(m, |p: ProviderRef, d, _| async move {
        d.settings.remove_provider(&p.name)?;
        Ok(ProviderRemoved { name: p.name })
    });

    register::<method::ProviderTest, _, _>(m, |p: ProviderTestParams, d, _| async move {
        Ok(d.settings.test_provider(&p).await?)
    });

    register::<method::ModelList, _, _>(m, |p: ModelListParams, d, _| async move {
        Ok(d.settings.list_models(p.provider.as_deref()).await?)
    });

    register::<method::McpServerAdd, _, _>(m, |p: McpServerAddParams, d, _| async move {
        Ok(d.settings.add_mcp_server(p)?)
    });

    register::<method::McpServerList, _, _>(m, |_: NoParams, d, _| async move {
        Ok(d.settings.list_mcp_servers())
    });

    register::<method::McpServerRemove, _, _>(m, |p: ProviderRef, d, _| async move {
        d.settings.remove_mcp_server(&p.name)?;
        Ok(ProviderRemoved { name: p.name })
    });

    register::<method::McpServerTest, _, _>(m, |p: McpServerTestParams, d, _| async move {
        Ok(test_mcp_server(&d, p).await?)
    });

    register::<method::McpServerLogin, _, _>(m, |p: McpServerLoginParams, d, _| async move {
        let authorization_url = d
            .mcp_logins
            .start(
                &d.settings,
                &p.name,
                &p.redirect_uri,
                p.client_id.as_deref(),
            )
            .await?;
        Ok(McpServerLoginStarted {
            name: p.name,
            authorization_url,
        })
    });

    register::<method::McpServerLoginFinish, _, _>(
        m,
        |p: McpServerLoginFinishParams, d, _| async move {
            d.mcp_logins.finish(&p.name, &p.callback_url).await?;
            // A start that failed for want of a valid login is not remembered past a new one.
            d.agents.mcp_pool.forget_failures(&p.name);
            let listed = d.settings.list_mcp_servers();
            listed
                .servers
                .into_iter()
                .find(|s| s.name == p.name)
                .ok_or_else(|| ConfigError::NoMcpServer(p.name).into())
        },
    );

    register::<method::McpServerLogout, _, _>(m, |p: ProviderRef, d, _| async move {
        let was_logged_in = d.settings.log_out_of_mcp_server(&p.name)?;
        Ok(McpServerLogoutResult {
            name: p.name,
            was_logged_in,
        })
    });
}

/// Starts one of the user's MCP servers as a session would, lists its tools and stops it.
async fn test_mcp_server(
    d: &Daemon,
    p: McpServerTestParams,
) -> Result<McpServerTestResult, ConfigError> {
    use crate::mcp_client::server_config::{Origin, ServerConfig};
    let settings = match d.settings.mcp_server_with_secrets(&p.name) {
        None => return Err(ConfigError::NoMcpServer(p.name)),
        Some(Err(problem)) => {
            return Ok(McpServerTestResult {
                name: p.name,
                ok: false,
                tools: Vec::new(),
                error: Some(problem),
                millis: 0,
            });
        }
        Some(Ok(settings)) => settings,
    };
    crate::mcp_client::server_config::register_secrets(&settings);
    let dir = p
        .dir
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| d.home.clone());
    let config = ServerConfig {
        name: p.name.clone(),
        settings,
        origin: Origin::User,
    };
    let started = std::time::Instant::now();
    let outcome = crate::mcp_client::client::Connection::start(config, &dir).await;
    let millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(match outcome {
        Ok(connection) => {
            let tools = connection
                .tools()
                .iter()
                .filter_map(|t| t.get("name").and_then(|n| n.as_str()).map(String::from))
                .collect();
            connection.kill();
            // It works now: runs that skipped it since it failed to start try it again.
            d.agents.mcp_pool.forget_failures(&p.name);
            McpServerTestResult {
                name: p.name,
                ok: true,
                tools,
                error: None,
                millis,
            }
        }
        Err(error) => McpServerTestResult {
            name: p.name,
            ok: false,
            tools: Vec::new(),
            error: Some(error),
            millis,
        },
    })
}
