//! Handlers of `session.diff`, `session.undo`, `session.redo` and `session.fork` (the work is in
//! [`crate::changes`]).

use jsonrpsee::core::server::RpcModule;
use totem_protocol::{
    SessionDiffParams, SessionForkParams, SessionImportParams, SessionUndoParams, method,
};

use super::rpc::register;
use crate::changes;
use crate::daemon::Daemon;

pub(super) fn register_all(m: &mut RpcModule<Daemon>) {
    register::<method::SessionDiff, _, _>(m, |p: SessionDiffParams, d, _| async move {
        Ok(changes::diff::diff(&d, p).await?)
    });

    register::<method::SessionUndo, _, _>(m, |p: SessionUndoParams, d, _| async move {
        Ok(changes::undo::undo(&d, &p.session_id, p.force).await?)
    });

    register::<method::SessionRedo, _, _>(m, |p: SessionUndoParams, d, _| async move {
        Ok(changes::undo::redo(&d, &p.session_id, p.force).await?)
    });

    register::<method::SessionFork, _, _>(m, |p: SessionForkParams, d, _| async move {
        Ok(changes::fork::fork(&d, p)?)
    });

    register::<method::SessionImport, _, _>(m, |p: SessionImportParams, d, _| async move {
        Ok(changes::fork::import(&d, p)?)
    });
}
