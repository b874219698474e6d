//! Handler of `project.check`: the Total.js 5 conventions check over a project or some of its
//! files, for `totem check` and editors (the work is in `totem_totaljs::check_project`).

use std::path::{Path, PathBuf};

use jsonrpsee::core::server::RpcModule;
use totem_protocol::{
    BootResult, CheckFinding, ErrorCode, ProjectCheck, ProjectCheckParams, method,
};
use totem_totaljs::Severity;

use super::rpc::{err, register};
use crate::daemon::Daemon;

pub(super) fn register_all(m: &mut RpcModule<Daemon>) {
    register::<method::ProjectCheck, _, _>(m, |p: ProjectCheckParams, d, _| async move {
        let root = PathBuf::from(&p.path);
        if !root.is_absolute() || !root.is_dir() {
            return Err(err(
                ErrorCode::INVALID_PATH,
                format!(
                    "cannot check {}: pass the absolute path of an existing project folder",
                    p.path
                ),
            ));
        }
        let settings =
            crate::agent::settings::load(&d).map_err(|e| err(ErrorCode::INVALID_PARAMS, e))?;
        let config = settings.totaljs_check();
        let files: Vec<PathBuf> = p.files.iter().map(PathBuf::from).collect();
        let migrate = p.migrate;
        let checked_root = root.clone();
        let mut out =
            tokio::task::spawn_blocking(move || check(&checked_root, &files, &config, migrate))
                .await
                .map_err(|e| err(ErrorCode::INTERNAL_ERROR, format!("the check stopped: {e}")))?;
        if p.boot {
            out.boot = Some(boot(&d, &root, &settings).await);
        }
        Ok(out)
    });
}

/// `totem check --boot`: the user asked to start the app, so it runs in the kernel sandbox when
/// there is one and unconfined otherwise. Every `GET` route without parameters is asked.
async fn boot(d: &Daemon, root: &Path, settings: &crate::config::SettingsFile) -> BootResult {
    let boot = settings.totaljs_boot();
    let files = totem_totaljs::route_files(root);
    let secrets = settings
        .permission
        .as_ref()
        .map(|p| p.secrets.clone())
        .unwrap_or_default();
    let check = crate::boot::BootCheck {
        root: root.to_path_buf(),
        requests: totem_totaljs::boot_requests(&files, &boot.safe_routes),
        tmp_parent: d.tmp_dir(),
        sandbox: d.sandbox.is_sandboxed().then_some(secrets),
        boot_timeout: boot
            .timeout
            .map_or(crate::boot::BOOT_TIMEOUT, std::time::Duration::from_secs),
        request_timeout: crate::boot::REQUEST_TIMEOUT,
    };
    let outcome = check.run().await;
    let message = outcome.describe();
    match outcome {
        crate::boot::BootOutcome::Skipped(_) => BootResult {
            status: "skipped".into(),
            message,
            millis: None,
        },
        crate::boot::BootOutcome::Passed { millis, .. } => BootResult {
            status: "passed".into(),
            message,
            millis: Some(millis),
        },
        crate::boot::BootOutcome::Failed { millis, .. } => BootResult {
            status: "failed".into(),
            message,
            millis: Some(millis),
        },
    }
}

fn check(
    root: &Path,
    files: &[PathBuf],
    config: &totem_totaljs::CheckConfig,
    migrate: bool,
) -> ProjectCheck {
    let project = totem_totaljs::detect(root);
    let mut notices = Vec::new();
    let mut out = ProjectCheck {
        findings: Vec::new(),
        files_checked: 0,
        errors: 0,
        warnings: 0,
        notes: 0,
        notices: Vec::new(),
        kind: Some(project.kind().to_string()),
        boot: None,
    };
    let legacy = matches!(project, totem_totaljs::Project::Legacy { .. });
    if legacy && !migrate {
        // One answer: the check does not apply, so it finds nothing and fails nothing.
        if let Some(message) = project.message() {
            out.notices.push(message);
        }
        out.notices.push(
            "Run `totem check --migrate` to list what would have to change for Total.js 5.".into(),
        );
        return out;
    }
    let report = totem_totaljs::check_project(root, files, config);
    if !project.is_totaljs5() {
        notices.push(if legacy {
            "Listed for a migration to Total.js 5: these findings describe what Total.js 5 would reject; the project as it is runs on its own version.".to_string()
        } else {
            project.message().unwrap_or_else(|| {
                "This folder is not detected as a Total.js 5 project (no total5 dependency, no require('total5')); the findings assume Total.js 5.".to_string()
            })
        });
    }
    notices.extend(report.problems);
    out.files_checked = u32::try_from(report.files_checked).unwrap_or(u32::MAX);
    out.notices = notices;
    for file in report.files {
        for f in file.findings {
            match f.severity {
                Severity::Error => out.errors += 1,
                Severity::Warning => out.warnings += 1,
                Severity::Info => out.notes += 1,
            }
            out.findings.push(CheckFinding {
                path: file.path.clone(),
                line: u32::try_from(f.line).unwrap_or(u32::MAX),
                rule: f.rule.to_string(),
                severity: f.severity.to_string(),
                message: f.message,
            });
        }
    }
    out
}
