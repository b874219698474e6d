//! Totem as an MCP server for other agents.
//!
//! The tools are the protocol's methods marked `mcp` in its method table ([`tools`]), called on
//! totemd over its socket like any other client ([`server`]). Two transports: stdio, for
//! `totem mcp` ([`serve_stdio`]), and streamable HTTP, a tower service totemd mounts behind its
//! token check ([`http_service`]). Both speak MCP 2025-11-25 with its `initialize` handshake
//! and the stateless 2026-07-28 revision (`server/discover`).
//!
//! File and shell tools are not exposed: a client gets Totem's agent through `session_ask`,
//! whose runs follow the session's permission rules (and `mcpServer.allow`, the user's
//! pre-approval); a client that can show forms asks its person the runs' questions
//! ([`elicit`]).

#![deny(missing_docs)]

pub mod elicit;
pub mod server;
pub mod tools;

pub use server::{Connect, Connector, TotemMcp};

use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

/// Serves `server` on this process's stdin and stdout until the client closes them.
pub async fn serve_stdio(server: TotemMcp) -> anyhow::Result<()> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("the MCP client did not complete the handshake: {e}"))?;
    running.waiting().await?;
    Ok(())
}

/// The streamable HTTP transport, a tower service.
pub type HttpService = StreamableHttpService<TotemMcp, LocalSessionManager>;

/// The streamable HTTP transport of `server`, to mount at `/mcp`. `loopback_only` keeps the
/// SDK's Host check (DNS rebinding) to loopback names; a server bound elsewhere relies on its
/// bearer token instead. Origin is the caller's to check.
pub fn http_service(
    server: TotemMcp,
    loopback_only: bool,
    cancel: tokio_util::sync::CancellationToken,
) -> HttpService {
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(cancel);
    if !loopback_only {
        config = config.disable_allowed_hosts();
    }
    StreamableHttpService::new(
        move || Ok(server.for_new_session()),
        Default::default(),
        config,
    )
}
