//! Handler of `project.check`: the Total.js 5 conventions check over a project or some of its
//! files, for `totem check` and editors (the work is in `totem_totaljs::check_project`).

use std::path::{Path, PathBuf};

use jsonrpsee::core::server::RpcModule;
use totem_protocol::{CheckFinding, ErrorCode, ProjectCheck, ProjectCheckParams, method};
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
        let config = crate::agent::settings::load(&d)
            .map_err(|e| err(ErrorCode::INVALID_PARAMS, e))?
            .totaljs_check();
        let files: Vec<PathBuf> = p.files.iter().map(PathBuf::from).collect();
        tokio::task::spawn_blocking(move || check(&root, &files, &config))
            .await
            .map_err(|e| err(ErrorCode::INTERNAL_ERROR, format!("the check stopped: {e}")))
    });
}

fn check(root: &Path, files: &[PathBuf], config: &totem_totaljs::CheckConfig) -> ProjectCheck {
    let report = totem_totaljs::check_project(root, files, config);
    let mut notices = Vec::new();
    let project = totem_totaljs::detect(root);
    if !project.is_totaljs5() {
        notices.push(project.message().unwrap_or_else(|| {
            "This folder is not detected as a Total.js 5 project (no total5 dependency, no require('total5')); the findings assume Total.js 5.".to_string()
        }));
    }
    notices.extend(report.problems);
    let mut out = ProjectCheck {
        findings: Vec::new(),
        files_checked: u32::try_from(report.files_checked).unwrap_or(u32::MAX),
        errors: 0,
        warnings: 0,
        notes: 0,
        notices,
    };
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
