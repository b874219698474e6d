//! The boot check at the end of a run (see [`crate::boot`]): when the model gives its answer
//! after editing files of a Total.js 5 project, Totem starts the app and asks the routes the
//! run's edits added or changed. What broke goes back to the model as one message, and the run
//! goes on so it can fix it; the user sees the outcome as a notice either way. When the model's
//! last fix still fails, the run ends with an error notice: "The app does not boot: …".

use totem_protocol::NoticeLevel;
use totem_provider::Message as ModelMessage;

use super::run::Runner;

/// Boot findings sent back to the model in one run; after that the run ends with an error notice.
const MAX_BOOT_ROUNDS: usize = 2;

impl Runner {
    /// Runs the boot check when this run edited files since the last one. `Some` is the message
    /// for the model: the run continues with it.
    pub(super) async fn boot_check(&mut self) -> Option<ModelMessage> {
        if !self.setup.totaljs || self.setup.read_only || self.tools.boot_pending.is_empty() {
            return None;
        }
        self.tools.boot_pending.clear();
        let settings = self.settings.totaljs_boot();
        if settings.enabled == Some(false) {
            return None;
        }
        let root = self.tools.ctx.root().to_path_buf();
        if let Some(why) =
            crate::boot::unavailable(&root).or_else(|| crate::boot::outside_the_sandbox(&root))
        {
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
        // Every file the run edited so far, compared with how it was before the run: a fix in
        // one file asks the routes an earlier edit in another added or changed too.
        let files: Vec<totem_totaljs::EditedFile> = self
            .tools
            .boot_edited
            .iter()
            .filter(|rel| rel.ends_with(".js"))
            .filter_map(|rel| {
                let after = std::fs::read_to_string(root.join(rel)).ok()?;
                Some(totem_totaljs::EditedFile {
                    path: rel.clone(),
                    before: self.tools.boot_before.get(rel).cloned(),
                    after,
                })
            })
            .collect();
        let project = totem_totaljs::route_files(&root);
        let mut requests =
            totem_totaljs::changed_boot_requests(&files, &project, &settings.safe_routes);
        // The app runs in the sandbox: the routes other than GET that the run added are asked
        // too, with a body their action's input accepts.
        for added in totem_totaljs::added_write_requests(&files, &project) {
            if let Some(request) = requests.iter_mut().find(|r| r.label() == added.label()) {
                request.body = added.body;
            } else if requests.len() < totem_totaljs::MAX_REQUESTS {
                requests.push(added);
            }
        }
        for again in std::mem::take(&mut self.tools.boot_failed_requests) {
            if !requests.contains(&again) {
                requests.push(again);
            }
        }
        let check = crate::boot::BootCheck {
            requests: requests.clone(),
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
        if matches!(outcome, crate::boot::BootOutcome::Failed { .. }) {
            self.tools.boot_failed_requests = requests;
        }
        let crate::boot::BootOutcome::Failed { finding, .. } = &outcome else {
            self.notice(NoticeLevel::Info, outcome.describe());
            return None;
        };
        if self.tools.boot_rounds >= MAX_BOOT_ROUNDS {
            // The model's last fix still fails: the run ends, and says so plainly.
            self.notice(
                NoticeLevel::Error,
                format!(
                    "The app does not boot: {finding}. The model's fixes did not help; fix it yourself or ask again, and run `totem check --boot` to start the app."
                ),
            );
            return None;
        }
        self.notice(NoticeLevel::Warning, outcome.describe());
        self.tools.boot_rounds += 1;
        Some(ModelMessage::user(format!(
            "Totem started the app after your edits (node index.js) and it broke: {finding}. Fix the code; Totem starts the app again when you answer."
        )))
    }
}
