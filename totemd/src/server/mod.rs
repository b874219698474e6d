//! The socket server: accepts connections from the daemon's own user and serves each one.

pub mod connection;
pub mod limits;
pub mod listener;
pub mod mcp_http;
pub mod rpc;
mod rpc_agent;
mod rpc_changes;
mod rpc_check;
mod rpc_provider;
mod rpc_run;
pub mod rpc_terminal;
pub mod web;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::UnixListener;

use crate::daemon::Daemon;

/// Accepts connections until shutdown is requested.
pub async fn serve(daemon: Arc<Daemon>, listener: UnixListener) {
    let methods: jsonrpsee::core::server::Methods = rpc::module(daemon.clone()).into();
    mcp_http::start(daemon.clone()).await;
    let uid = nix::unistd::getuid().as_raw();
    let next_id = AtomicUsize::new(1);
    let mut shutdown = daemon.shutdown_requested();
    let capacity = daemon.max_connections;
    let mut spare = limits::Spare::default();
    let mut refusals = limits::Refusals::default();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            accepted = listener.accept() => accepted,
        };
        let open = daemon.connections.load(Ordering::Relaxed);
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) if limits::out_of_descriptors(&e) => {
                let line = limits::refusal_line(open, capacity, true);
                match spare.take_waiting(&listener, &line).await {
                    limits::Waiting::Room(stream) => stream,
                    limits::Waiting::Refused => {
                        refusals.note("no file descriptors left", open, capacity);
                        continue;
                    }
                    limits::Waiting::Nothing => {
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        if open >= capacity {
            refusals.note("connection limit reached", open, capacity);
            limits::refuse(stream, &limits::refusal_line(open, capacity, false));
            continue;
        }
        refusals.settle();
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == uid => {}
            Ok(cred) => {
                tracing::warn!(
                    peer_uid = cred.uid(),
                    "refused a connection from another user"
                );
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "refused a connection without peer credentials");
                continue;
            }
        }
        let conn_id = next_id.fetch_add(1, Ordering::Relaxed);
        let methods = methods.clone();
        let daemon = daemon.clone();
        // Counted before the task starts, so a burst of connections sees the count rise.
        daemon.connections.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            connection::serve(stream, methods, conn_id).await;
            daemon.connections.fetch_sub(1, Ordering::Relaxed);
        });
    }
}
