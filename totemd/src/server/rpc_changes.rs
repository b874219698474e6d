//! Handlers of `session.diff`, `session.undo`, `session.redo` and `session.fork` (the work is in
//! [`crate::changes`]).

use jsonrpsee::core::server::RpcModule;
use jsonrpsee::types::{ErrorObject, ErrorObjectOwned};
use totem_protocol::{
    ErrorCode, SessionDiffParams, SessionForkParams, SessionImportParams, SessionUndoParams, method,
};

use super::rpc::{err, register};
use crate::changes::{self, ChangesError};
use crate::daemon::Daemon;

impl From<ChangesError> for ErrorObjectOwned {
    fn from(e: ChangesError) -> Self {
        match e {
            ChangesError::Session(s) => s.into(),
            ChangesError::Store(s) => s.into(),
            ChangesError::NotFound(m) => err(ErrorCode::NOT_FOUND, m),
            ChangesError::Invalid(m) => err(ErrorCode::INVALID_PARAMS, m),
            ChangesError::Busy(m) => err(ErrorCode::CONFLICT, m),
            ChangesError::Conflict { message, files } => ErrorObject::owned(
                ErrorCode::CONFLICT.0,
                message,
                Some(serde_json::json!({ "files": files })),
            ),
            ChangesError::Failed(m) => err(ErrorCode::INTERNAL_ERROR, m),
        }
    }
}

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
