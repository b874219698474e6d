//! A file's content written as a code block. A model 1B parameters or smaller writes code well
//! where it was trained to, in a fenced block, and badly inside a JSON string: Qwen2.5-Coder 0.5B
//! fixed `ROUTE('GET /about/', about;` in 2 of 3 code blocks and in none of 3 JSON `write`s, and
//! picked the wrong `oldString` in every `edit` (bench-tasks). So its constrained `write` names
//! only the path, and the content is asked for in an answer of its own, without the constraint.

use futures::StreamExt;
use totem_provider::{Message as ModelMessage, StreamEvent, TurnBuilder};

use super::run::{Runner, StepError};

/// How the code-block answer starts: the server continues from there.
const FENCE: &str = "```\n";

impl Runner {
    /// The content of the `write` of `path` that the model's constrained answer `call_text`
    /// named: the code block of a second answer, asked for with that call in the conversation.
    /// `None` when the answer holds no code block; its tokens count for `message_id`.
    pub(super) async fn code_block(
        &mut self,
        message_id: &str,
        call_text: &str,
        path: &str,
    ) -> Result<Option<String>, StepError> {
        let mut request = self.fit_request().await;
        request.answer_schema = None;
        request.tools = Vec::new();
        request.messages.push(ModelMessage::assistant(call_text));
        request
            .messages
            .push(ModelMessage::user(self.content_request(path)));
        // The answer starts as a code block: asked plainly, the 0.5B wrote its JSON call again.
        request.messages.push(ModelMessage::assistant(FENCE));
        let context = u64::from(totem_provider::estimate_tokens(&request));
        let mut stream = self.model.provider.stream(request);
        let mut turn = TurnBuilder::new();
        let mut text = String::new();
        let mut checked = 0;
        loop {
            let next = tokio::select! {
                _ = self.cancel.cancelled() => return Err(StepError::Aborted),
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Err(e)) => return Err(StepError::Failed(e.to_string())),
                Some(Ok(event)) => {
                    if let StreamEvent::TextDelta { text: piece } = &event {
                        text.push_str(piece);
                    }
                    turn.push(event);
                    // A block caught in a loop ends there: what came before is kept.
                    if text.len() >= checked + super::stream::LOOP_CHECK_BYTES {
                        checked = text.len();
                        if let Some(keep) = super::repeat::looping_tail(&text) {
                            text.truncate(keep);
                            break;
                        }
                    }
                }
            }
        }
        drop(stream);
        self.account(&turn.finish(), message_id, context)?;
        // Servers that continue an answer send what follows it; some send it whole.
        if !text.trim_start().starts_with("```") {
            text.insert_str(0, FENCE);
        }
        Ok(content_of(&text))
    }
}

impl Runner {
    /// What the model is asked for before its code block: the file's whole content, with the
    /// change the task asks for said again (the 0.5B, asked only for the content, wrote the
    /// controller back unchanged eleven times), and in a Total.js project the lines of a route
    /// the task names that no file declares yet.
    fn content_request(&self, path: &str) -> String {
        let prompt = self.prompt().unwrap_or("").trim();
        let mut out = format!("Write the whole new content of {path} in one code block");
        if !self.setup.changes_asked || prompt.is_empty() {
            out.push('.');
            return out;
        }
        let task = super::guide::cut(prompt, super::guide::TASK_IN_REQUEST);
        out.push_str(&format!(
            ": every line of it that stays, and the change the task asks for.\nThe task: {task}"
        ));
        if self.setup.totaljs {
            let rel = super::guide::key(path);
            let project = totem_totaljs::route_files(self.tools.ctx.root());
            let undeclared =
                totem_totaljs::undeclared_routes(&project, &super::guide::named_routes(prompt));
            // An action file that does not declare the task's action yet: the whole NEWACTION
            // from the task's words (the 0.5B wrote `NEWACTION('Contact|create', { name:
            // 'Hammer', email: … })`, with no action function, c34).
            let declared = project
                .iter()
                .any(|(p, text)| *p == rel && super::guide::declares_named_action(prompt, text));
            match super::guide::action_skeleton(prompt, &rel, undeclared.first()) {
                Some(skeleton) if !declared => out.push_str(&skeleton),
                _ => {
                    for route in &undeclared {
                        if let Some(lines) = super::guide::route_lines(route, prompt, &rel) {
                            out.push_str(&lines);
                        }
                    }
                }
            }
        }
        out
    }
}

/// The file content in a code-block answer: the first fenced block (to the end of the answer
/// when its closing fence is missing). The answer always starts with the fence Totem wrote for
/// the model. The content ends with a newline.
pub(super) fn content_of(answer: &str) -> Option<String> {
    let open = answer.find("```")?;
    let after = &answer[open + 3..];
    // The fence's line may name the language.
    let body = &after[after.find('\n')? + 1..];
    let mut content = String::new();
    for line in body.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            break;
        }
        content.push_str(line);
    }
    if content.trim().is_empty() {
        return None;
    }
    if !content.ends_with('\n') {
        content.push('\n');
    }
    Some(content)
}

#[cfg(test)]
mod tests {
    use super::content_of;

    #[test]
    fn the_first_fenced_block_is_the_content() {
        let answer = "Here it is:\n```javascript\nexports.install = function() {\n\tROUTE('GET /', index);\n};\n```\nThis adds nothing.\n```\nother\n```";
        assert_eq!(
            content_of(answer).as_deref(),
            Some("exports.install = function() {\n\tROUTE('GET /', index);\n};\n")
        );
    }

    #[test]
    fn a_block_cut_short_keeps_what_came() {
        assert_eq!(
            content_of("```html\n<h1>Welcome</h1>\n<p>Tools").as_deref(),
            Some("<h1>Welcome</h1>\n<p>Tools\n")
        );
    }

    #[test]
    fn prose_and_an_empty_block_are_no_content() {
        assert_eq!(content_of("I changed the heading."), None);
        assert_eq!(content_of("```\n\n```"), None);
    }
}
