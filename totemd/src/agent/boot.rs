//! The boot check at the end of a run (see [`crate::boot`]): when the model gives its answer
//! after editing files of a Total.js 5 project, Totem starts the app and asks the routes the
//! edits declare. What broke goes back to the model as one message, and the run goes on so it
//! can fix it; the user sees the outcome as a notice either way.

use totem_protocol::NoticeLevel;
use totem_provider::Message as ModelMessage;

use super::run::Runner;

/// Boot findings sent back to the model in one run; after that the run ends with the notice.
const MAX_BOOT_ROUNDS: usize = 2;

impl Runner {
    /// Runs the boot check when this run edited files since the last one. `Some` is the message
    /// for the model: the run continues with it.
    pub(super) async fn boot_check(&mut self) -> Option<ModelMessage> {
        if !self.setup.totaljs || self.setup.read_only || self.tools.boot_pending.is_empty() {
            return None;
        }
        let edited = std::mem::take(&mut self.tools.boot_pending);
        let settings = self.settings.totaljs_boot();
        if settings.enabled == Some(false) {
            return None;
        }
        let root = self.tools.ctx.root().to_path_buf();
        if let Some(why) = crate::boot::unavailable(&root) {
            self.notice(NoticeLevel::Info, format!("Boot check skipped: {why}."));
            return None;
        }
        if !self.daemon.sandbox.is_sandboxed() {
            self.notice(
                NoticeLevel::Info,
                "Boot check skipped: there is no kernel sandbox to start the app in; run `totem check --boot` to start it yourself.".into(),
            );
            return None;
        }
        let files: Vec<(String, String)> = edited
            .iter()
            .filter(|rel| rel.ends_with(".js"))
            .filter_map(|rel| {
                std::fs::read_to_string(root.join(rel))
                    .ok()
                    .map(|c| (rel.clone(), c))
            })
            .collect();
        let check = crate::boot::BootCheck {
            requests: totem_totaljs::boot_requests(&files, &settings.safe_routes),
            root,
            tmp_parent: self.daemon.tmp_dir(),
            sandbox: Some(self.tools.policy.secrets().settings().clone()),
            boot_timeout: settings
                .timeout
                .map_or(crate::boot::BOOT_TIMEOUT, std::time::Duration::from_secs),
            request_timeout: crate::boot::REQUEST_TIMEOUT,
        };
        let outcome = tokio::select! {
            _ = self.cancel.cancelled() => return None,
            outcome = check.run() => outcome,
        };
        let level = match &outcome {
            crate::boot::BootOutcome::Failed { .. } => NoticeLevel::Warning,
            _ => NoticeLevel::Info,
        };
        self.notice(level, outcome.describe());
        let crate::boot::BootOutcome::Failed { finding, .. } = outcome else {
            return None;
        };
        if self.tools.boot_rounds >= MAX_BOOT_ROUNDS {
            return None;
        }
        self.tools.boot_rounds += 1;
        Some(ModelMessage::user(format!(
            "Totem started the app after your edits (node index.js) and it broke: {finding}. Fix the code; Totem starts the app again when you answer."
        )))
    }
}
