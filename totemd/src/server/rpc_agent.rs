//! Handlers of the agent's methods: `session.abort`, `session.command`, `session.shell`,
//! `job.list`, `permission.reply` and `permission.list` (`session.prompt` is registered with the session methods and calls the agent).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use jsonrpsee::core::server::RpcModule;
use totem_protocol::{
    Ack, ErrorCode, PermissionList, PermissionReplyParams, SessionCommandParams, SessionRef,
    SessionShellParams, method,
};

use super::connection::ConnectionState;
use super::rpc::{err, register};

use crate::daemon::Daemon;

pub(super) fn register_all(m: &mut RpcModule<Daemon>) {
    register::<method::SessionAbort, _, _>(m, |p: SessionRef, d, _| async move {
        let agent = d.agents.session(&d, &p.session_id)?;
        Ok(agent.abort(&d))
    });

    register::<method::SessionCommand, _, _>(m, |p: SessionCommandParams, d, _| async move {
        Ok(crate::agent::command::run(&d, p).await?)
    });

    register::<method::SessionShell, _, _>(m, |p: SessionShellParams, d, _| async move {
        Ok(crate::agent::shell::shell(&d, p).await?)
    });

    register::<method::JobList, _, _>(m, |p: SessionRef, d, _| async move {
        let agent = d.agents.session(&d, &p.session_id)?;
        Ok(crate::agent::shell::jobs(&agent))
    });

    register::<method::PermissionReply, _, _>(m, |p: PermissionReplyParams, d, ext| async move {
        let answers = ext
            .get::<Arc<ConnectionState>>()
            .is_some_and(|s| s.answers_permissions.load(Ordering::Acquire));
        if !answers {
            return Err(err(
                ErrorCode::INVALID_REQUEST,
                "this connection did not declare that it answers permission questions: initialize with capabilities.permissions = true",
            ));
        }
        let agent = d.agents.session(&d, &p.session_id)?;
        agent.reply(&d, p)?;
        Ok(Ack {})
    });

    register::<method::PermissionList, _, _>(m, |p: SessionRef, d, _| async move {
        let agent = d.agents.session(&d, &p.session_id)?;
        Ok(PermissionList {
            questions: agent.pending_questions(),
        })
    });
}
