//! `!command`: the person's own shell command, run by the daemon in the project folder under the
//! session's `bash` permission rules (`session.shell`: allowed, denied, or asked like any question,
//! here or in another terminal). The call runs beside the prompt loop, so the question can be
//! answered meanwhile; its output is shown and goes, with the command, into the next prompt.

use totem_client::ClientError;
use totem_protocol::{Method, SessionShellParams, ShellResult, method};

use super::Repl;
use super::attach::{self, Note};

/// Bytes of a command's output carried into the next prompt (its tail).
const OUTPUT_IN_PROMPT: usize = 16_000;

/// A `session.shell` call that came back.
pub struct ShellDone {
    pub command: String,
    pub result: Result<ShellResult, ClientError>,
}

impl Repl<'_> {
    /// Starts `command` on the daemon; the answer arrives through `shell_done`.
    pub(super) fn shell(&mut self, command: &str) {
        if command.is_empty() {
            self.note("Type a command after !, e.g. !git status");
            return;
        }
        if !self.connection.has(method::SessionShell::NAME) {
            self.note("!command is not available in this daemon yet (it has no session.shell).");
            return;
        }
        let client = self.connection.client.clone();
        let done = self.shell_done_tx.clone();
        let params = SessionShellParams {
            session_id: self.session.id.clone(),
            command: command.to_string(),
            timeout_secs: None,
        };
        let command = command.to_string();
        self.note(&format!("$ {command}"));
        tokio::spawn(async move {
            let result = client.call::<method::SessionShell>(params).await;
            let _ = done.send(ShellDone { command, result });
        });
    }

    pub(super) fn on_shell_done(&mut self, done: ShellDone) {
        let shell = match done.result {
            Ok(shell) => shell,
            Err(e) => {
                self.error(&format!("!{} failed: {e}", done.command));
                return;
            }
        };
        let output = shell.output.as_str();
        if !shell.ran {
            self.error(&format!("Not run: {}", output.trim()));
            return;
        }
        let mut shown = totem_protocol::display::displayable(output).into_owned();
        if !shown.is_empty() && !shown.ends_with('\n') {
            shown.push('\n');
        }
        self.print(&shown);
        self.note("(the command and its output go with your next prompt)");
        self.shell_outputs
            .push(for_prompt(&done.command, output, shell.exit_code));
    }

    /// The prompt as sent: the `!command` outputs waiting for it and the text typed; and the
    /// files its `@path`s name, to send as its attachments.
    pub(super) fn compose(&mut self, line: &str) -> (String, Vec<String>) {
        let expanded = attach::expand(std::path::Path::new(&self.project.path), line);
        for note in &expanded.notes {
            match note {
                Note::Attached { path, bytes } => {
                    let size = match *bytes {
                        b if b < 1000 => format!("{b} bytes"),
                        b => format!("{:.1} KB", b as f64 / 1000.0),
                    };
                    self.note(&format!("Attached {path} ({size})."));
                }
                Note::Skipped { path, why } => {
                    let line = self
                        .style()
                        .yellow(&format!("@{path} is not attached: {why}."));
                    self.print(&format!("{line}\n"));
                }
            }
        }
        let mut text = String::new();
        for output in self.shell_outputs.drain(..) {
            text.push_str(&output);
            text.push_str("\n\n");
        }
        text.push_str(line);
        (text, expanded.attachments)
    }
}

/// What the model is told about a command the user ran.
fn for_prompt(command: &str, output: &str, exit_code: Option<i32>) -> String {
    let mut output = output.trim_end().to_string();
    if output.len() > OUTPUT_IN_PROMPT {
        let cut = output.ceil_char_boundary(output.len() - OUTPUT_IN_PROMPT);
        output = format!("… ({cut} bytes cut)\n{}", &output[cut..]);
    }
    let code = exit_code.map_or(String::new(), |c| format!(" (exit code {c})"));
    format!("I ran `{command}` in the project folder{code}; its output:\n```\n{output}\n```")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_output_keeps_its_tail_in_the_prompt() {
        let long = format!("{}END", "é".repeat(OUTPUT_IN_PROMPT));
        let text = for_prompt("make", &long, Some(2));
        assert!(text.starts_with("I ran `make` in the project folder (exit code 2)"));
        assert!(text.contains("bytes cut)") && text.ends_with("END\n```"));
        assert!(text.len() < OUTPUT_IN_PROMPT + 200);
    }
}
