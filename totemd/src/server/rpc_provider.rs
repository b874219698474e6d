//! Handlers of the provider and model methods: `provider.add|list|remove|test`, `model.list`.
//! Params of `provider.add` carry a key; nothing here logs params or returns a key.

use jsonrpsee::core::server::RpcModule;
use jsonrpsee::types::ErrorObjectOwned;
use totem_protocol::{
    ErrorCode, ModelListParams, NoParams, ProviderAddParams, ProviderRef, ProviderRemoved,
    ProviderTestParams, method,
};

use super::rpc::{err, register};
use crate::config::ConfigError;
use crate::daemon::Daemon;

impl From<ConfigError> for ErrorObjectOwned {
    fn from(e: ConfigError) -> Self {
        let code = match &e {
            ConfigError::BadRequest(_) => ErrorCode::INVALID_PARAMS,
            ConfigError::NoProvider(_) => ErrorCode::NOT_FOUND,
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
}
