//! `totem store backup FILE` (through the running daemon, which reads one consistent view of its
//! store) and `totem store restore FILE` (by `totemd --restore`, with the daemon stopped).

use std::path::{Path, PathBuf};

use anyhow::Context;
use totem_protocol::{StoreBackupParams, method};

use crate::cli::StoreCommand;
use crate::daemon::Endpoint;
use crate::exit::{Exit, Unreachable};

pub async fn command(endpoint: &Endpoint, command: StoreCommand) -> anyhow::Result<Exit> {
    match command {
        StoreCommand::Backup { file } => backup(endpoint, &file).await,
        StoreCommand::Restore { file } => restore(endpoint, &file).await,
    }
}

/// `file` made absolute against the current folder (the daemon runs elsewhere).
fn absolute(file: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(file).with_context(|| format!("cannot use {} as a path", file.display()))
}

async fn backup(endpoint: &Endpoint, file: &Path) -> anyhow::Result<Exit> {
    let file = absolute(file)?;
    let connection = crate::daemon::connect_or_start(endpoint).await?;
    let done = connection
        .client
        .call::<method::StoreBackup>(StoreBackupParams {
            path: file.display().to_string(),
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "backed up {} records and {} blobs to {} ({})",
        done.records,
        done.blobs,
        done.path,
        totem_protocol::human_bytes(done.bytes)
    );
    Ok(Exit::Success)
}

async fn restore(endpoint: &Endpoint, file: &Path) -> anyhow::Result<Exit> {
    let file = absolute(file)?;
    if !file.is_file() {
        anyhow::bail!("no backup file at {}", file.display());
    }
    if crate::daemon::connect(endpoint).await?.is_some() {
        return Err(Unreachable(
            "totemd is running: stop it with `totem daemon stop`, then restore again".into(),
        )
        .into());
    }
    let totemd = crate::daemon::find_totemd()?;
    let mut restore = std::process::Command::new(&totemd);
    if endpoint.socket_flag {
        restore.arg("--socket").arg(&endpoint.socket);
    }
    let status = restore
        .arg("--restore")
        .arg(&file)
        .status()
        .with_context(|| format!("cannot run {}", totemd.display()))?;
    Ok(if status.success() {
        Exit::Success
    } else {
        Exit::Failed
    })
}
