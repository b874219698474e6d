//! Totem's knowledge of Total.js 5, as a pure library the daemon calls:
//!
//! - [`detect`]: is a folder a Total.js 5 project, an older Total.js project, or empty?
//! - [`primer`] and [`reminder`]: what the model is told about Total.js 5 in its system prompt and
//!   with each request.
//! - [`check`]: the conventions check run on every file a tool writes in a Total.js 5 project;
//!   [`format_findings`] turns its findings into text appended to the tool result.
//! - [`boot_requests`], [`read_errors`] and [`BOOT_PRELOAD`]: the pure half of the boot check
//!   (the daemon starts the app after a run's edits and asks the routes they touched).
//! - [`scaffold`] and [`write_scaffold`]: the files of a new project, for `/init` in an empty folder.
//!
//! The facts behind all of it are in `shared/TOTALJS.md` (framework5 source and live runs).
//!
//! Wiring in the daemon:
//!
//! 1. At session start, `detect(root)`. When [`Project::is_totaljs5`] (a Total.js 5 project or an
//!    empty folder), put [`primer()`] in the system prompt and append [`reminder()`] to each
//!    request. Show [`Project::message`] to the user when it has one (older Total.js, unreadable
//!    package.json).
//! 2. After a tool writes a file in such a project: `check_edit(rel_path, before, after, &cfg,
//!    &ProjectContext::scan(root))` and append `format_edit(rel_path, &findings)` to the tool
//!    result (it is empty when there is nothing to say). Only the edit's own findings are shown;
//!    the file's older ones are counted, never pushed on the model (see `check::report`). `cfg`
//!    comes from settings; call [`CheckConfig::validate`] when loading them.
//! 3. `/init` in an empty folder: [`write_scaffold`]; it refuses to overwrite and lists the files.

#![deny(missing_docs)]

mod boot;
mod check;
mod detect;
mod js;
mod primer;
mod scaffold;

pub use boot::{
    BOOT_PRELOAD, BootError, BootRequest, EditedFile, MAX_REQUESTS, action_block, action_ids,
    actions_removed, added_write_requests, boot_requests, changed_boot_requests, declaration_block,
    declarations_removed, first_project_frame, missing_action, read_errors, removed_by_run,
    route_files, routes_removed, undeclared_routes,
};
pub use check::{
    BREAK_MARKS, CheckConfig, CheckConfigError, Confidence, EditFindings, FileFindings, Finding,
    ProjectContext, ProjectReport, Rule, Severity, Views, check, check_edit, check_in_project,
    check_project, describe_routes, fix_action_handlers, format_edit, format_finding,
    format_findings, route_summary, rules,
};
pub use detect::{Evidence, LegacyVersion, Project, detect};
pub use primer::{primer, primer_example, reminder};
pub use scaffold::{ScaffoldError, scaffold, write_scaffold};
