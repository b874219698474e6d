//! What keeps a small model's constrained steps on the task: a change asked for is made before
//! the answer is offered, a repeated call is followed by a hotter step, and an existing file is
//! read before it is overwritten. Each rule comes from what Qwen2.5-Coder 0.5B and 1.5B did in
//! `bench-tasks` (BENCHMARKS.md, "Constrained steps").

use std::collections::HashSet;

/// Words that start a request to change the project ("Add a route…", "Fix it…").
const CHANGE_VERBS: &[&str] = &[
    "add",
    "append",
    "change",
    "convert",
    "correct",
    "create",
    "delete",
    "edit",
    "extract",
    "fix",
    "implement",
    "insert",
    "make",
    "modify",
    "move",
    "put",
    "refactor",
    "remove",
    "rename",
    "repair",
    "replace",
    "rewrite",
    "set",
    "update",
    "write",
];

/// Words that may come before the verb of a request ("Please add…", "Can you fix…").
const COURTESY: &[&str] = &[
    "please", "can", "could", "would", "will", "you", "now", "then", "also", "and", "just",
    "kindly", "so",
];

/// The tools whose success is a change of the project's files.
pub(super) const CHANGE_TOOLS: &[&str] = &["write", "edit", "patch", "multiedit"];

/// The tools that only look.
pub(super) const LOOK_TOOLS: &[&str] = &["read", "list", "grep", "glob"];

/// The tools that show only names: a question is not answered on them alone.
pub(super) const NAMES_ONLY: &[&str] = &["list", "glob"];

/// Calls after which a run asked for a change may answer without one (the change may be there
/// already, or impossible): a model is not held in a loop it cannot leave.
pub(super) const CALLS_BEFORE_UNCHANGED_ANSWER: usize = 6;

/// Calls (Totem's first reads included) after which a model that writes code blocks, asked for
/// a change and with none made, is offered only `write`.
pub(super) const CALLS_BEFORE_WRITE: usize = 2;

/// The temperature of the step after a repeated call. At the usual 0.2 a small model given the
/// same conversation writes the same call again (Qwen2.5-Coder 1.5B read a missing file four times
/// in a row, with "To create it, use write" in every result); llama.cpp's default is 0.8.
pub(super) const HOT_TEMPERATURE: f32 = 0.8;

/// Whether `prompt` asks for a change: one of its sentences starts with a verb of change, after
/// courtesy words. A question ("Which routes…?") or "Do not change any file" does not.
pub(super) fn asks_for_change(prompt: &str) -> bool {
    prompt
        .split(['!', '?', '\n', ';'])
        .flat_map(|part| part.split(". "))
        .any(|sentence| {
            sentence
                .split_whitespace()
                .map(|w| {
                    w.trim_matches(|c: char| !c.is_alphanumeric())
                        .to_lowercase()
                })
                .find(|w| !w.is_empty() && !COURTESY.contains(&w.as_str()))
                .is_some_and(|w| CHANGE_VERBS.contains(&w.as_str()))
        })
}

/// How every line of [`command_change`] starts: a command's result that holds it changed files.
pub(super) const COMMAND_CHANGED: &str = "\n\nThis command ";

/// The files a command changed that its result shows; the rest are counted.
pub(super) const CHANGES_SHOWN: usize = 4;

/// What a command did to `path`, for its result: created (with its line count), deleted, or
/// changed with its changed lines as they are now (text files).
pub(super) fn command_change(
    path: &str,
    before: Option<&str>,
    after: Option<&str>,
    deleted: bool,
) -> String {
    if deleted {
        return format!("\n\nThis command deleted {path}.");
    }
    match (before, after) {
        (None, Some(after)) => format!(
            "\n\nThis command created {path} ({} lines).",
            after.lines().count()
        ),
        (Some(before), Some(after)) => {
            let (first, last) = changed_lines(before, after);
            if last < first {
                // Only lines were removed: show where they were.
                format!(
                    "\n\nThis command removed lines from {path} at line {first}{}",
                    totem_tools::lines_now(after, first, first)
                )
            } else {
                format!(
                    "\n\nThis command changed {path}, line {first}{}",
                    totem_tools::lines_now(after, first, last)
                )
            }
        }
        _ => format!("\n\nThis command changed {path}."),
    }
}

/// The lines of `after` (1-based, first and last) that differ from `before`: what is between
/// their common first and last lines. `last < first` when lines were only removed.
fn changed_lines(before: &str, after: &str) -> (usize, usize) {
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    (head + 1, new.len() - tail)
}

/// Files the prompt names that a small model's run reads first: at most this many.
const NAMED_FILES: usize = 3;
/// Named files larger than this are left to the model (`read` pages them).
const NAMED_FILE_BYTES: u64 = 32 * 1024;

/// Whether `rel` is a regular file of at most [`NAMED_FILE_BYTES`] inside `root` (whose real
/// path is `real_root`), links resolved.
fn small_file_inside(root: &std::path::Path, real_root: &std::path::Path, rel: &str) -> bool {
    let inside = std::fs::canonicalize(root.join(rel))
        .is_ok_and(|real| real.starts_with(real_root) && real != real_root);
    let small_file =
        std::fs::metadata(root.join(rel)).is_ok_and(|m| m.is_file() && m.len() <= NAMED_FILE_BYTES);
    inside && small_file
}

/// A prompt's words as paths may stand in them: split at spaces, brackets, quotes, commas and
/// semicolons.
fn prompt_words(prompt: &str) -> impl Iterator<Item = &str> {
    prompt.split(|c: char| {
        c.is_whitespace() || matches!(c, '(' | ')' | '"' | '`' | '\'' | ',' | ';' | '[' | ']')
    })
}

/// The project's files the prompt names ("… in controllers/default.js", "(views/index.html)"),
/// in the prompt's order: relative paths of existing regular files inside `root` (links
/// resolved), not `secret`, at most [`NAMED_FILES`] of them.
pub(super) fn named_files(
    prompt: &str,
    root: &std::path::Path,
    secret: impl Fn(&str) -> bool,
) -> Vec<String> {
    let Ok(real_root) = std::fs::canonicalize(root) else {
        return Vec::new();
    };
    let mut found: Vec<String> = Vec::new();
    for word in prompt_words(prompt) {
        let word = key(word.trim_end_matches(['.', ':', '!', '?']));
        let plausible = word.contains('.') || word.contains('/');
        if !plausible
            || word.split('/').any(|part| part.is_empty() || part == "..")
            || found.contains(&word)
            || secret(&word)
        {
            continue;
        }
        if small_file_inside(root, &real_root, &word) {
            found.push(word);
            if found.len() == NAMED_FILES {
                break;
            }
        }
    }
    found
}

/// The files the prompt names in a folder ("in a new file actions/contact.js") that do not exist
/// yet, in the prompt's order, at most [`NAMED_FILES`]: a run asked for them is not done while
/// they are missing. The 1.5B, told to add an action in the new file actions/contact.js, renamed
/// the action of actions/products.js instead and answered.
pub(super) fn new_files_named(
    prompt: &str,
    root: &std::path::Path,
    secret: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in prompt_words(prompt) {
        if word.starts_with('/') || word.contains("://") {
            continue;
        }
        let word = key(word.trim_end_matches(['.', ':', '!', '?']));
        let Some((_, name)) = word.rsplit_once('/') else {
            continue;
        };
        let has_extension = name.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
        });
        if !has_extension
            || word
                .split('/')
                .any(|part| part.is_empty() || part == ".." || part == ".")
            || found.contains(&word)
            || secret(&word)
            || std::fs::symlink_metadata(root.join(&word)).is_ok()
        {
            continue;
        }
        found.push(word);
        if found.len() == NAMED_FILES {
            break;
        }
    }
    found
}

/// The routes a prompt names ("served at POST /api/contact/", "a route GET /api/ping/"), as
/// `METHOD /url/`, in its order; none when it asks to remove or rename something (the route it
/// names may then be the one to go).
pub(super) fn named_routes(prompt: &str) -> Vec<String> {
    let lower = prompt.to_lowercase();
    if ["remove", "delete", "drop", "rename"]
        .iter()
        .any(|w| lower.contains(w))
    {
        return Vec::new();
    }
    let words: Vec<&str> = prompt.split_whitespace().collect();
    let mut out: Vec<String> = Vec::new();
    for pair in words.windows(2) {
        let method = pair[0].trim_start_matches(['(', '"', '`', '\'']);
        if !["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&method) {
            continue;
        }
        let url = pair[1].trim_end_matches(['.', ',', ';', ':', ')', '"', '`', '\'', '!', '?']);
        if !url.starts_with('/') || url.contains(['{', '*', ':']) {
            continue;
        }
        let route = format!("{method} {url}");
        if !out.contains(&route) {
            out.push(route);
        }
    }
    out
}

/// What a change's result says of a route the task names that no file declares: how to declare
/// it, with the action the task names (`Contact|create`) when it names one.
pub(super) fn undeclared_route(route: &str, prompt: &str) -> String {
    match named_action(prompt) {
        Some(action) => format!(
            "\n\nThe task names the route {route}, which no file declares yet: declare it next, with ROUTE('{route} --> {action}'); inside exports.install in controllers/default.js, or route: '{route}' in the NEWACTION('{action}', {{ … }})."
        ),
        None => {
            let handler = handler_name(route);
            format!(
                "\n\nThe task names the route {route}, which no file declares yet: declare it next with ROUTE('{route}', {handler}); inside exports.install in a controller, and a function {handler}($) {{ … }} that answers."
            )
        }
    }
}

/// The lines that declare a route the task names, for the file `path` a small model is about
/// to write whole: in a controller the `ROUTE()` line and its handler (named after the URL's
/// last word), in an action file the NEWACTION's `route:` option. `None` for other files.
pub(super) fn route_lines(route: &str, prompt: &str, path: &str) -> Option<String> {
    let action = named_action(prompt);
    if path.starts_with("controllers/") {
        return Some(match action {
            Some(action) => format!(
                "\nThe task's route goes inside exports.install as the line: ROUTE('{route} --> {action}');"
            ),
            None => {
                let handler = handler_name(route);
                let lower = prompt.to_lowercase();
                let answer = if let Some(value) = json_in(prompt) {
                    format!(" $.json({value});")
                } else if lower.contains("json") {
                    " $.json(…);".to_string()
                } else if lower.contains("text") || lower.contains("plain") {
                    " $.plain(…);".to_string()
                } else if ["view", "page", "html"].iter().any(|w| lower.contains(w)) {
                    " $.view(…);".to_string()
                } else {
                    " …".to_string()
                };
                format!(
                    "\nThe task's route goes inside exports.install as the line: ROUTE('{route}', {handler});\nand its handler below, as a function of its own: function {handler}($) {{{answer} }}"
                )
            }
        });
    }
    match action {
        Some(action) if path.starts_with("actions/") => Some(format!(
            "\nThe task's route is the option route: '{route}' in NEWACTION('{action}', {{ … }})."
        )),
        _ => None,
    }
}

/// The first JSON object a prompt spells out ("answers the JSON {"pong": true}"), as written:
/// the value a handler answers, for its line. The 0.5B copied `$.json(…)` from that line as it
/// was, `…` and all, until stopped (c41).
fn json_in(prompt: &str) -> Option<&str> {
    let start = prompt.find('{')?;
    let mut depth = 0usize;
    for (i, c) in prompt[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    let text = &prompt[start..=start + i];
                    return serde_json::from_str::<serde_json::Value>(text)
                        .is_ok()
                        .then_some(text);
                }
            }
            _ => {}
        }
    }
    None
}

/// The NEWACTION a task describes, for the action file `path` a small model is about to write:
/// its id, the route the task names (when no file declares it), the input its typed fields make,
/// and an action function that takes the input. `None` outside actions/ or when the task names
/// no action.
pub(super) fn action_skeleton(prompt: &str, path: &str, route: Option<&String>) -> Option<String> {
    if !path.starts_with("actions/") {
        return None;
    }
    let action = named_action(prompt)?;
    let mut options = Vec::new();
    if let Some(route) = route {
        options.push(format!("route: '{route}'"));
    }
    let input = named_input(prompt);
    if let Some(input) = &input {
        options.push(format!("input: '{input}'"));
    }
    // A task whose action answers success needs no more than that: no `…` to copy.
    options.push(match (input.is_some(), answers_success(prompt)) {
        (true, true) => "action: function($, model) { $.success(); }".to_string(),
        (false, true) => "action: function($) { $.success(); }".to_string(),
        (true, false) => "action: function($, model) { … $.success(); }".to_string(),
        (false, false) => "action: function($) { … $.success(value); }".to_string(),
    });
    Some(format!(
        "\nThe task's action, as Total.js 5 declares it: NEWACTION('{action}', {{ {} }});",
        options.join(", ")
    ))
}

/// Whether the task says its action answers success ("… and answers success", "returns
/// success"), not merely that something succeeds ("saves it successfully").
fn answers_success(prompt: &str) -> bool {
    let words: Vec<String> = prompt
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words.windows(2).enumerate().any(|(i, pair)| {
        let verb = matches!(
            pair[0].as_str(),
            "answers" | "answer" | "returns" | "return" | "responds" | "respond" | "replies"
        );
        verb && (pair[1] == "success"
            || (pair[1] == "with" && words.get(i + 2).is_some_and(|w| w == "success")))
    })
}

/// The whole content of the new action file `path` for a task that describes its action
/// completely: it names the action, says it answers success, and names its route and typed
/// fields where it has them. `None` for any other task (its action needs code of its own).
pub(super) fn action_file(prompt: &str, path: &str, route: Option<&String>) -> Option<String> {
    if !path.starts_with("actions/") || !answers_success(prompt) {
        return None;
    }
    let action = named_action(prompt)?;
    let mut out = format!("NEWACTION('{action}', {{\n");
    if let Some(route) = route {
        out.push_str(&format!("\troute: '{route}',\n"));
    }
    let input = named_input(prompt);
    if let Some(input) = &input {
        out.push_str(&format!("\tinput: '{input}',\n"));
    }
    let params = if input.is_some() { "$, model" } else { "$" };
    out.push_str(&format!(
        "\taction: function({params}) {{\n\t\t$.success();\n\t}}\n}});\n"
    ));
    Some(out)
}

/// The lines of `script` that declare the action the prompt names.
pub(super) fn named_action_block(prompt: &str, script: &str) -> Option<String> {
    totem_totaljs::action_block(script, named_action(prompt)?)
}

/// Whether two scripts hold the same code, whitespace aside.
pub(super) fn same_code(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

/// Whether every line of `new` (blank lines and lone braces aside, at least two) is a line of
/// `old`, and `old` has more: a write of `new` over `old` adds nothing and removes the rest.
pub(super) fn already_in(old: &str, new: &str) -> bool {
    let old_lines: HashSet<&str> = old.lines().map(str::trim).collect();
    let lines: Vec<&str> = new
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !matches!(*l, "{" | "}" | "};" | "});" | ")" | ");"))
        .collect();
    lines.len() >= 2 && lines.iter().all(|l| old_lines.contains(l)) && !same_code(old, new)
}

/// What a change from `old` to `new` of a Total.js script removes that the file has: its
/// actions, routes and the top-level declarations it still uses, as `the action Products|list`,
/// `the route GET /api/products/`, `the declaration of index{used}`.
pub(super) fn removed_parts(old: &str, new: &str, used: &str) -> Vec<String> {
    let mut removed: Vec<String> = totem_totaljs::actions_removed(old, new)
        .into_iter()
        .map(|id| format!("the action {id}"))
        .collect();
    removed.extend(
        totem_totaljs::routes_removed(old, new)
            .into_iter()
            .map(|route| format!("the route {route}")),
    );
    removed.extend(
        totem_totaljs::declarations_removed(old, new)
            .into_iter()
            .map(|(name, _)| format!("the declaration of {name}{used}")),
    );
    removed
}

/// `text` without the lines `block` (an action's declaration), blank runs left by it closed up,
/// ending in one newline.
pub(super) fn without_block(text: &str, block: &str) -> String {
    let mut without = text.replacen(block, "", 1);
    while without.contains("\n\n\n") {
        without = without.replace("\n\n\n", "\n\n");
    }
    format!("{}\n", without.trim_end())
}

/// The action the prompt names and the lines a project file (path, content) declares it with.
fn task_action_block<'a>(
    prompt: &'a str,
    project: &[(String, String)],
) -> Option<(&'a str, String)> {
    let action = named_action(prompt)?;
    let block = project
        .iter()
        .find_map(|(_, content)| totem_totaljs::action_block(content, action))?;
    Some((action, block))
}

/// Whether `script` declares the action the prompt names.
pub(super) fn declares_named_action(prompt: &str, script: &str) -> bool {
    named_action_block(prompt, script).is_some()
}

/// A handler's name for a route: its URL's last word (`/api/ping/` → `ping`, `/api/order-list/`
/// → `order_list`), or `handler`.
fn handler_name(route: &str) -> String {
    let url = route.split_whitespace().nth(1).unwrap_or("");
    let word = url
        .split('/')
        .rev()
        .find(|w| !w.is_empty())
        .unwrap_or("")
        .replace(['-', '.'], "_");
    if word.is_empty()
        || word.starts_with(|c: char| c.is_ascii_digit())
        || !word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        "handler".to_string()
    } else {
        word
    }
}

/// Total.js 5 input types a prompt may name in parentheses after a field.
const INPUT_TYPES: &[&str] = &[
    "String",
    "Number",
    "Email",
    "Boolean",
    "Date",
    "Object",
    "Array",
    "UID",
    "Phone",
    "URL",
    "JSON",
    "Name",
    "Zip",
    "Lower",
    "Upper",
    "Capitalize",
    "Base64",
    "SafeString",
    "Color",
];

/// The input a prompt describes with typed fields ("a required name (String) and a required email
/// (Email)"), as NEWACTION's `input` string: `*name:String, *email:Email` (`*`: the word
/// "required" is among the three words before the field). `None` when it names no typed field.
pub(super) fn named_input(prompt: &str) -> Option<String> {
    let words: Vec<&str> = prompt.split_whitespace().collect();
    let mut fields = Vec::new();
    for (i, pair) in words.windows(2).enumerate() {
        let kind = pair[1]
            .trim_start_matches('(')
            .trim_end_matches(['.', ',', ';', ':'])
            .trim_end_matches(')');
        if !pair[1].starts_with('(') || !INPUT_TYPES.contains(&kind) {
            continue;
        }
        let name = pair[0].trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let required = words[i.saturating_sub(3)..i]
            .iter()
            .any(|w| w.eq_ignore_ascii_case("required"));
        let field = format!("{}{name}:{kind}", if required { "*" } else { "" });
        if !fields.contains(&field) {
            fields.push(field);
        }
    }
    (!fields.is_empty()).then(|| fields.join(", "))
}

/// What a change's result says when the action the task names has no `input` and the task
/// describes typed fields: the `input` to add. The 1.5B wrote Contact|create without one, and a
/// request without an email got 200 where the task wanted 400 (c29, c34).
pub(super) fn missing_input(prompt: &str, project: &[(String, String)]) -> Option<String> {
    let input = named_input(prompt)?;
    let (action, block) = task_action_block(prompt, project)?;
    if block.contains("input:") || block.contains("input :") {
        return None;
    }
    Some(format!(
        "\n\nThe task describes the action's fields, and NEWACTION('{action}') has no input yet: add input: '{input}', and take them as model: action: function($, model) {{ … }} (a request with missing or invalid fields then gets HTTP 400)."
    ))
}

/// What a change's result says when the task says the action it names "answers success" and
/// the action never calls `$.success()`: the 0.5B wrote Contact|create ending in
/// `$.callback(model)`, which answers the model, and was told it was done (c39).
pub(super) fn missing_success(prompt: &str, project: &[(String, String)]) -> Option<String> {
    if !answers_success(prompt) {
        return None;
    }
    let (action, block) = task_action_block(prompt, project)?;
    if block.contains("$.success(") {
        return None;
    }
    Some(format!(
        "\n\nThe task says NEWACTION('{action}') answers success (the client gets {{\"success\":true}}), and its action does not call $.success() yet. End its action with: $.success();"
    ))
}

/// The action a prompt names, as `Namespace|name` (`Contact|create`).
fn named_action(prompt: &str) -> Option<&str> {
    prompt
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | '"' | '`' | '\''))
        .map(|w| w.trim_end_matches(['.', ':', ';', '!', '?']))
        .find(|w| {
            w.split_once('|').is_some_and(|(ns, name)| {
                ns.starts_with(|c: char| c.is_ascii_uppercase())
                    && !name.is_empty()
                    && ns
                        .chars()
                        .chain(name.chars())
                        .all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
}

/// The Total.js 5 folders a prompt's words point at: routes are declared in controllers/,
/// actions in actions/, pages in views/, schemas in schemas/.
const TOPICS: &[(&[&str], &str)] = &[
    (
        &[
            "route",
            "routes",
            "endpoint",
            "endpoints",
            "url",
            "urls",
            "api",
        ],
        "controllers",
    ),
    (&["action", "actions", "validation", "validate"], "actions"),
    (
        &[
            "view",
            "views",
            "page",
            "pages",
            "heading",
            "html",
            "template",
            "templates",
        ],
        "views",
    ),
    (&["schema", "schemas"], "schemas"),
];

/// The folders of [`TOPICS`] that `prompt` points at, in the order its words name them.
pub(super) fn topic_folders(prompt: &str) -> Vec<&'static str> {
    let mut folders = Vec::new();
    for word in prompt.split(|c: char| !c.is_alphanumeric()) {
        let word = word.to_lowercase();
        for (words, folder) in TOPICS {
            if words.contains(&word.as_str()) && !folders.contains(folder) {
                folders.push(*folder);
            }
        }
    }
    folders
}

/// The files a Total.js question or task is about when its prompt names none: the files of each
/// folder `prompt` points at ([`topic_folders`]) that holds at most [`NAMED_FILES`] of them
/// (a larger folder is the model's to search), with the same limits as [`named_files`].
/// Qwen2.5-Coder 0.5B, asked which routes an app defines, read actions/products.js and answered
/// with words of Totem's own notes.
pub(super) fn topic_files(
    prompt: &str,
    root: &std::path::Path,
    secret: impl Fn(&str) -> bool,
) -> Vec<String> {
    let Ok(real_root) = std::fs::canonicalize(root) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for folder in topic_folders(prompt) {
        let Ok(entries) = std::fs::read_dir(root.join(folder)) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| !name.starts_with('.'))
            .collect();
        if names.len() > NAMED_FILES {
            continue;
        }
        names.sort();
        for name in names {
            let rel = format!("{folder}/{name}");
            if small_file_inside(root, &real_root, &rel)
                && !secret(&rel)
                && found.len() < NAMED_FILES
            {
                found.push(rel);
            }
        }
    }
    found
}

/// Words with which a prompt forbids changes ("… Do not change any file."): a constrained step is
/// then offered only the tools that look.
const HANDS_OFF: &[&str] = &[
    "do not change",
    "don't change",
    "do not modify",
    "don't modify",
    "do not edit",
    "don't edit",
    "without changing any",
    "read-only",
    "read only",
];

/// Whether `prompt` says not to change anything.
pub(super) fn forbids_changes(prompt: &str) -> bool {
    let prompt = prompt.to_lowercase().replace('\u{2019}', "'");
    HANDS_OFF.iter().any(|words| prompt.contains(words))
}

/// Words with which a prompt asks for a file to be replaced whole: a write may then drop its lines.
pub(super) const WHOLE_REWRITE: &[&str] = &[
    "rewrite",
    "replace",
    "overwrite",
    "empty",
    "clear",
    "remove",
    "delete",
    "truncate",
];

/// Whether `new` is `old` again but for spacing: the same non-blank lines, each trimmed, in the
/// same order (the 0.5B wrote a controller back without its blank lines, as its "change").
pub(super) fn same_but_spacing(old: &str, new: &str) -> bool {
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    lines(old) == lines(new)
}

/// Whether `prompt` asks about spacing (indentation, tabs, formatting): a write that changes
/// only spacing is then a change.
pub(super) fn asks_for_spacing(prompt: &str) -> bool {
    let prompt = prompt.to_lowercase();
    let words = || prompt.split(|c: char| !c.is_alphanumeric());
    ["indent", "format", "spac", "whitespace"]
        .iter()
        .any(|w| prompt.contains(w))
        || prompt.contains("blank line")
        // "tab" as a word ("tabs", "tabbed"), not inside "table" or "stable".
        || words().any(|w| matches!(w, "tab" | "tabs" | "tabbed" | "tabulation"))
}

/// The longest task said again to a small model (bytes): in the request for a code block, and
/// after a write that changed nothing.
pub(super) const TASK_IN_REQUEST: usize = 600;

/// `text` cut to at most `max` bytes, with `…` where it was cut.
pub(super) fn cut(text: &str, max: usize) -> String {
    if text.len() > max {
        format!("{}…", &text[..text.floor_char_boundary(max)])
    } else {
        text.to_string()
    }
}

/// The result of a `write` of the content `path` already holds: nothing changed.
pub(super) fn unchanged_write(path: &str) -> String {
    format!(
        "Not written: {path} already holds this content (spacing aside), so nothing changed. Write it with the change the task asks for in it."
    )
}

/// What [`dropping_overwrite`] advises.
const DROPPING_ADVICE: &str = "To change part of it, use edit with the exact old text; to rewrite it, write all of its lines with your change in them.";
/// What [`SeenFiles::unseen_overwrite`] advises after the read.
const UNSEEN_ADVICE: &str = "then change the part that needs it with edit.";

/// A write's refusal as told to a model that is not offered `edit` (it writes code blocks).
pub(super) fn without_edit(mut refusal: String) -> String {
    // The call to copy is a JSON `write` with content, which such a model does not write.
    if let Some(at) = refusal.find(APPEND_HINT) {
        let after = at + APPEND_HINT.len();
        let end = refusal[after..]
            .find("\n\n")
            .map_or(refusal.len(), |e| after + e);
        refusal.replace_range(at..end, "");
    }
    refusal
        .replace(
            DROPPING_ADVICE,
            "Write all of its lines again, with your change in them.",
        )
        .replace(UNSEEN_ADVICE, "then write all of it with your change.")
}

/// The refusal of a `write` of `content` over `path`, whose text is `old`, when it would drop most
/// of the file's lines and `prompt` did not ask for the file to be replaced: the 0.5B wrote
/// "Welcome to Acme Shop" over a two-line view, and one sentence over a 13-line controller.
pub(super) fn dropping_overwrite(
    path: &str,
    old: &str,
    content: &str,
    prompt: &str,
) -> Option<String> {
    let prompt = prompt.to_lowercase();
    if WHOLE_REWRITE.iter().any(|w| prompt.contains(w)) {
        return None;
    }
    let old_lines: Vec<&str> = old.lines().filter(|l| !l.trim().is_empty()).collect();
    if old_lines.len() < 2 {
        return None;
    }
    let new_lines: HashSet<&str> = content.lines().map(str::trim).collect();
    let dropped: Vec<(usize, &str)> = old
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !new_lines.contains(l.trim()))
        .map(|(i, l)| (i + 1, l.trim()))
        .collect();
    if dropped.len() * 2 <= old_lines.len() {
        return None;
    }
    let shown: Vec<String> = dropped
        .iter()
        .take(3)
        .map(|(no, line)| format!("line {no} `{}`", short(line)))
        .collect();
    let more = if dropped.len() > 3 {
        format!(" and {} more", dropped.len() - 3)
    } else {
        String::new()
    };
    let mut refusal = format!(
        "Not written: this would delete {} of the {} lines of {path} ({}{more}). {DROPPING_ADVICE}",
        dropped.len(),
        old_lines.len(),
        shown.join(", ")
    );
    // New code that keeps none of the file's lines is often meant to be added to it: the 1.5B,
    // asked to add an action to actions/products.js, wrote only the new action six times over
    // (on one line in c30), each time told it would delete the file. The call that adds it is one
    // it can copy.
    let mut content_lines = content.lines().map(str::trim).filter(|l| !l.is_empty());
    let first_is_new = content_lines
        .next()
        .is_some_and(|first| !old_lines.iter().any(|l| l.trim() == first));
    let new_code = first_is_new
        && (content_lines.count() >= 2 || content.trim().len() >= 40)
        && old.len() <= WHOLE_FILE_CALL_BYTES
        && path.ends_with(".js");
    if new_code {
        let whole = format!("{}\n\n{}", old.trim_end(), content.trim_start());
        let call =
            serde_json::json!({"name": "write", "arguments": {"path": path, "content": whole}});
        refusal.push_str(&format!("{APPEND_HINT}{call}"));
    }
    Some(refusal)
}

/// Where [`merge_fragment`] put the new lines.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Placed {
    /// Inside `exports.install`, after this line (1-based, in the file before).
    Routes(usize),
    /// At the end of the file.
    End,
    /// The `ROUTE()` lines inside `exports.install` after this line, the rest at the end.
    RoutesAndEnd(usize),
}

/// `old` with `fragment` added where it belongs, when `fragment` is new code: its first line is
/// not one of `old`'s, `old`'s first line is not in it, and at most a third of its lines (braces
/// aside) are in `old`. `ROUTE()` lines go inside `exports.install`, after its last route, with
/// that route's indent; the other lines go at the end. `None` for other content, when the file
/// has fewer than two lines, or when there are routes to place and no `exports.install`. The 1.5B, asked to add an action and its route,
/// wrote only the new NEWACTION over actions/products.js and only the ROUTE line over the
/// controller, was refused each time, and was stopped after 18 refusals (c32).
pub(super) fn merge_fragment(old: &str, fragment: &str) -> Option<(String, Placed)> {
    match unwrap_install(old, fragment) {
        Some(inner) => merge_new_code(old, &inner),
        None => merge_new_code(old, fragment),
    }
}

/// The new code of content that wraps it in the file's own `exports.install = function() {`:
/// the routes of its install block that the file does not have (each on a line of its own),
/// the rest of the block moved out of it, and what follows the block. The 0.5B wrote
/// `exports.install = function() {` with only the new route and its handler, 28 times (c33).
fn unwrap_install(old: &str, content: &str) -> Option<String> {
    let old_lines: HashSet<&str> = old.lines().map(str::trim).collect();
    let lines: Vec<&str> = content.lines().collect();
    let start = lines.iter().position(|l| {
        l.trim_start().starts_with("exports.install") && old_lines.contains(l.trim())
    })?;
    let indent = |l: &str| l.len() - l.trim_start().len();
    let end = start
        + 1
        + lines[start + 1..]
            .iter()
            .position(|l| matches!(l.trim(), "};" | "}") && indent(l) <= indent(lines[start]))?;
    let body = &lines[start + 1..end];
    // A route over several lines (its handler inline) is not moved line by line: the 1.5B's
    // `ROUTE('POST /api/contact/', function($, model) {` went into install without its body (c35).
    if body.iter().any(|l| {
        let l = l.trim();
        l.starts_with("ROUTE(")
            && !(l.ends_with(");") && l.matches('(').count() == l.matches(')').count())
    }) {
        return None;
    }
    let mut out: Vec<String> = body
        .iter()
        .map(|l| l.trim())
        .filter(|l| l.starts_with("ROUTE(") && !old_lines.contains(l))
        .map(str::to_string)
        .collect();
    let rest: Vec<&str> = body
        .iter()
        .copied()
        .filter(|l| !l.trim().starts_with("ROUTE("))
        .collect();
    let cut = rest
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent(l))
        .min()
        .unwrap_or(0);
    out.push(String::new());
    out.extend(rest.iter().map(|l| l.get(cut..).unwrap_or("").to_string()));
    out.extend(lines[..start].iter().map(|l| l.to_string()));
    out.extend(lines[end + 1..].iter().map(|l| l.to_string()));
    Some(out.join("\n"))
}

/// The ids of the actions `script` declares with NEWACTION, in order (the lexer finds them
/// wherever they are: the 1.5B wrote one inside `exports.install`, c38).
pub(super) fn declared_actions(script: &str) -> Vec<String> {
    let mut ids = totem_totaljs::action_ids(script);
    ids.dedup();
    ids
}

/// The names a script declares at its top level (lines that start at the margin): `var`, `let`,
/// `const` and `function` names, and NEWACTION ids.
fn top_level_names(script: &str) -> HashSet<String> {
    let mut names = HashSet::new();
    for line in script.lines() {
        if let Some(rest) = line.strip_prefix("NEWACTION(") {
            let id: String = rest
                .trim_start_matches(['\'', '"', '`'])
                .chars()
                .take_while(|c| !matches!(c, '\'' | '"' | '`'))
                .collect();
            names.insert(format!("NEWACTION {id}"));
            continue;
        }
        let rest = ["var ", "let ", "const ", "function ", "async function "]
            .iter()
            .find_map(|k| line.strip_prefix(k));
        if let Some(rest) = rest {
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
                .collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

fn merge_new_code(old: &str, fragment: &str) -> Option<(String, Placed)> {
    let significant = |l: &&str| l.trim().len() >= 4 && l.chars().any(char::is_alphanumeric);
    let old_lines: HashSet<&str> = old.lines().filter(significant).map(str::trim).collect();
    if old_lines.len() < 2 {
        return None;
    }
    let new: Vec<&str> = fragment
        .lines()
        .filter(significant)
        .map(str::trim)
        .collect();
    // A controller's install block is no code to add to another file: the 0.5B wrote the
    // controller over actions/products.js, and it was added there twice (c37).
    if fragment
        .lines()
        .any(|l| l.trim_start().starts_with("exports.install"))
    {
        return None;
    }
    // Code that declares again what the file declares is a new version of it, not an addition.
    let old_names = top_level_names(old);
    if top_level_names(fragment)
        .iter()
        .any(|name| old_names.contains(name))
    {
        return None;
    }
    let first_old = old.lines().find(significant).map(str::trim);
    let repeated = new.iter().filter(|l| old_lines.contains(*l)).count();
    // Its first line new, the file's first line not in it, and most of it new: a new action
    // repeats `action: function($) {` of the one before it.
    if new.first().is_none_or(|first| old_lines.contains(first))
        || first_old.is_some_and(|first| new.contains(&first))
        || repeated * 3 > new.len()
    {
        return None;
    }
    // A ROUTE() line of the fragment's own top level (a route inside a function it adds stays
    // there).
    let is_route = |l: &str| l.starts_with("ROUTE(") && l.trim_end().ends_with(';');
    let (routes, rest): (Vec<&str>, Vec<&str>) = fragment
        .lines()
        .partition(|l| !l.starts_with([' ', '\t']) && is_route(l.trim()));
    let mut rest = rest.join("\n");
    // Indented as the file is: the 0.5B's handler came with four spaces into a file of tabs.
    if indents_with_tabs(old) {
        rest = spaces_to_tabs(&rest);
    }
    // A route the file declares already (its method and URL): the content changes it, it adds
    // nothing (the 1.5B wrote the controller back with a route it had renamed).
    if routes
        .iter()
        .any(|r| totem_totaljs::routes_removed(r, old).is_empty())
    {
        return None;
    }
    let mut lines: Vec<String> = old.lines().map(str::to_string).collect();
    let mut placed = None;
    if !routes.is_empty() {
        let last_route = lines
            .iter()
            .rposition(|l| l.trim_start().starts_with("ROUTE("));
        let install = lines
            .iter()
            .position(|l| l.trim_start().starts_with("exports.install"));
        let (after, indent) = match (last_route, install) {
            (Some(at), _) => {
                let line = &lines[at];
                (at, line[..line.len() - line.trim_start().len()].to_string())
            }
            (None, Some(at)) => (at, "\t".to_string()),
            (None, None) => return None,
        };
        for (i, route) in routes.iter().enumerate() {
            lines.insert(after + 1 + i, format!("{indent}{}", route.trim()));
        }
        placed = Some(after + 1);
    }
    let mut merged = lines.join("\n");
    let placed = if rest.trim().is_empty() {
        Placed::Routes(placed?)
    } else {
        merged = format!("{}\n\n{}", merged.trim_end(), rest.trim());
        placed.map_or(Placed::End, Placed::RoutesAndEnd)
    };
    merged.push('\n');
    Some((merged, placed))
}

/// `new` with what it removed of `old` put back: the `ROUTE()` lines of removed routes inside
/// `exports.install` after its last route, removed actions at the end, removed declarations the
/// file still uses (variables at the top, functions at the end). `None` when that still removes
/// something (a route `new` has no place for).
pub(super) fn put_back(old: &str, new: &str) -> Option<String> {
    let lines: Vec<&str> = old
        .lines()
        .filter(|l| {
            l.trim_start().starts_with("ROUTE(")
                && !totem_totaljs::routes_removed(l, new).is_empty()
        })
        .collect();
    let mut out: Vec<String> = new.lines().map(str::to_string).collect();
    if !lines.is_empty() {
        let at = out
            .iter()
            .rposition(|l| l.trim_start().starts_with("ROUTE("))
            .or_else(|| {
                out.iter()
                    .position(|l| l.trim_start().starts_with("exports.install"))
            })?;
        for (i, line) in lines.iter().enumerate() {
            out.insert(at + 1 + i, (*line).to_string());
        }
    }
    let mut text = out.join("\n");
    for id in totem_totaljs::actions_removed(old, new) {
        let block = totem_totaljs::action_block(old, &id)?;
        text = format!("{}\n\n{}", text.trim_end(), block.trim_end());
    }
    // Declarations the file still uses: variables at the top (before their first use),
    // functions at the end. The 1.5B wrote actions/products.js without `var PRODUCTS = [...]`
    // again and again, refused each time with nothing to copy (c38).
    let mut top = Vec::new();
    for (name, _) in totem_totaljs::declarations_removed(old, &text) {
        let block = totem_totaljs::declaration_block(old, &name)?;
        let trimmed = block.trim_start();
        if trimmed.starts_with("function") || trimmed.starts_with("class") {
            text = format!("{}\n\n{}", text.trim_end(), block.trim_end());
        } else {
            top.push(block.trim_end().to_string());
        }
    }
    if !top.is_empty() {
        text = format!("{}\n\n{}", top.join("\n"), text.trim_start());
    }
    text.push('\n');
    (totem_totaljs::routes_removed(old, &text).is_empty()
        && totem_totaljs::actions_removed(old, &text).is_empty()
        && totem_totaljs::declarations_removed(old, &text).is_empty())
    .then_some(text)
}

/// Whether more of `text`'s indented lines start with a tab than with a space.
fn indents_with_tabs(text: &str) -> bool {
    let tabs = text.lines().filter(|l| l.starts_with('\t')).count();
    let spaces = text.lines().filter(|l| l.starts_with(' ')).count();
    tabs > spaces
}

/// `code` with its leading spaces as tabs, one a level (the level: its smallest indent).
fn spaces_to_tabs(code: &str) -> String {
    let lead = |l: &str| l.len() - l.trim_start_matches(' ').len();
    let Some(unit) = code.lines().map(lead).filter(|&n| n > 0).min() else {
        return code.to_string();
    };
    code.lines()
        .map(|l| {
            let n = lead(l);
            format!(
                "{}{}{}",
                "\t".repeat(n / unit),
                " ".repeat(n % unit),
                &l[n..]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the result of a write that [`merge_fragment`] completed says first.
pub(super) fn merged_note(path: &str, placed: &Placed) -> String {
    let place = match placed {
        Placed::Routes(line) => format!("the route inside exports.install, after line {line}"),
        Placed::End => "them at the end".to_string(),
        Placed::RoutesAndEnd(line) => {
            format!("the route inside exports.install, after line {line}, the rest at the end")
        }
    };
    format!(
        "Your lines are new code, so Totem added them to {path} and kept all of its lines: {place}. Read it if you need to see it whole.\n"
    )
}

/// Files up to this size get a call to copy that holds the whole file ([`APPEND_HINT`]'s, and
/// the one that puts a removed action back).
pub(super) const WHOLE_FILE_CALL_BYTES: usize = 4_000;

/// How the call that adds new code to the end of a file is introduced.
const APPEND_HINT: &str =
    "\n\nIf these lines are new code to add to the file, write it whole with them at the end: ";

/// A line cut to 60 characters for a message.
fn short(line: &str) -> String {
    match line.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// The file a `list` of `base` shows that a model should read first: the first file in a folder
/// `prompt` points at ([`topic_folders`]), else the first `.js` file in the tree, else the first
/// file (links and annotated entries skipped). Paths are relative to the
/// project's root.
pub(super) fn first_listed_file(base: &str, listing: &str, prompt: &str) -> Option<String> {
    let base = key(base);
    let topics = topic_folders(prompt);
    let mut folders: Vec<String> = Vec::new();
    let mut first = None;
    let mut first_js = None;
    for line in listing.lines() {
        let name = line.trim_start();
        let depth = (line.len() - name.len()) / 2;
        if name.is_empty() || name.contains(['@', ' ']) {
            continue;
        }
        folders.truncate(depth);
        if let Some(folder) = name.strip_suffix('/') {
            folders.push(folder.to_string());
            continue;
        }
        let mut parts: Vec<&str> = Vec::new();
        if !base.is_empty() && base != "." {
            parts.push(&base);
        }
        parts.extend(folders.iter().map(String::as_str));
        parts.push(name);
        let path = parts.join("/");
        // A file in a folder the prompt points at comes first (routes: controllers/).
        if topics.iter().any(|t| path.starts_with(&format!("{t}/"))) {
            return Some(path);
        }
        if name.ends_with(".js") {
            first_js.get_or_insert_with(|| path.clone());
        }
        first.get_or_insert(path);
    }
    first_js.or(first)
}

/// A path as the model wrote it, in one form: no `./`, no leading `/` (the project's root, as the
/// tools read it), no trailing `/`.
pub(super) fn key(path: &str) -> String {
    let mut path = path.trim();
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    path.trim_start_matches('/')
        .trim_end_matches('/')
        .to_string()
}

/// The files a run has seen: read, written or edited with success.
#[derive(Debug, Default)]
pub(super) struct SeenFiles(HashSet<String>);

impl SeenFiles {
    /// Notes a successful call of `tool` on `path` (relative to the project's root).
    pub(super) fn record(&mut self, tool: &str, path: &str) {
        if tool == "read" || CHANGE_TOOLS.contains(&tool) {
            self.0.insert(key(path));
        }
    }

    /// The refusal of a `write` over `path`, a file that `exists` in the project but that this
    /// run has not seen: a small model overwrote a file it had never read with three lines of
    /// its own (Qwen2.5-Coder 1.5B, actions/products.js).
    pub(super) fn unseen_overwrite(&self, path: &str, exists: bool) -> Option<String> {
        let path = key(path);
        (exists && !self.0.contains(&path)).then(|| {
            format!(
                "{path} already exists and has not been read in this task: write would replace all of it. Read {path} first, {UNSEEN_ADVICE}"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_to_change_are_told_from_questions() {
        for prompt in [
            "Add a route GET /api/ping/ in controllers/default.js that answers the JSON {\"pong\": true}.",
            "Change the heading of the home page (views/index.html) from \"Acme Shop\" to \"Welcome\".",
            "The app crashes at start with a SyntaxError in controllers/default.js. Fix it without changing what the routes do.",
            "Please create a file notes.md",
            "can you rename index.js to main.js?",
        ] {
            assert!(asks_for_change(prompt), "{prompt}");
        }
        for prompt in [
            "Which routes does this app define? List each HTTP method and path. Do not change any file.",
            "What does controllers/default.js do?",
            "Explain how the products action works",
            "",
        ] {
            assert!(!asks_for_change(prompt), "{prompt}");
        }
    }

    #[test]
    fn a_write_that_would_drop_most_of_a_file_is_refused_unless_asked() {
        let view = "<h1>Acme Shop</h1>\n<p>Tools for every workshop.</p>\n";
        let task = "Change the heading of the home page (views/index.html).";
        let refusal = dropping_overwrite("views/index.html", view, "Welcome to Acme Shop", task)
            .expect("refused");
        assert_eq!(
            refusal,
            "Not written: this would delete 2 of the 2 lines of views/index.html (line 1 `<h1>Acme Shop</h1>`, line 2 `<p>Tools for every workshop.</p>`). To change part of it, use edit with the exact old text; to rewrite it, write all of its lines with your change in them."
        );
        let whole = "<h1>Welcome to Acme Shop</h1>\n<p>Tools for every workshop.</p>\n";
        assert_eq!(
            dropping_overwrite("views/index.html", view, whole, task),
            None
        );
        assert_eq!(
            dropping_overwrite(
                "views/index.html",
                view,
                "x",
                "Rewrite views/index.html as x"
            ),
            None,
            "asked for"
        );
        assert_eq!(
            dropping_overwrite("a.txt", "one line\n", "other", task),
            None
        );
    }

    #[test]
    fn the_routes_a_prompt_names_are_its_method_and_path_pairs() {
        assert_eq!(
            named_routes(
                "Add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/. A request without a valid email must get HTTP 400."
            ),
            ["POST /api/contact/"]
        );
        assert_eq!(
            named_routes(
                "Add a route GET /api/ping/ in controllers/default.js (like `GET /about/`)."
            ),
            ["GET /api/ping/", "GET /about/"]
        );
        assert!(named_routes("Remove the route GET /about/.").is_empty());
        assert!(named_routes("GET the list of routes; use POST /api/{id}/").is_empty());
    }

    #[test]
    fn the_new_files_a_prompt_names_are_the_missing_paths_in_a_folder() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir_all(dir.path().join("actions")).expect("actions");
        std::fs::write(dir.path().join("actions/products.js"), "x").expect("file");
        let prompt = "Add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/. Keep actions/products.js; see https://docs.totaljs.com/x.html, Node.js and ./views/new.html or ../out/x.js.";
        assert_eq!(
            new_files_named(prompt, dir.path(), |_| false),
            ["actions/contact.js", "views/new.html"]
        );
        assert!(
            new_files_named(prompt, dir.path(), |p| p.starts_with("actions/"))
                == ["views/new.html"]
        );
    }

    #[test]
    fn the_file_to_read_after_a_list_is_its_first_script() {
        let root = "actions/\n  products.js\nconfig\ncontrollers/\n  default.js\nindex.js\nnode_modules@ (link outside the project)\n";
        assert_eq!(
            first_listed_file("/", root, "Fix the app").as_deref(),
            Some("actions/products.js")
        );
        assert_eq!(
            first_listed_file("controllers/", "default.js\n", "").as_deref(),
            Some("controllers/default.js")
        );
        assert_eq!(
            first_listed_file("views", "index.html\nlayout.html\n", "").as_deref(),
            Some("views/index.html")
        );
        assert_eq!(first_listed_file(".", "app/\n  sub/\n", ""), None);
        // A question on routes reads the controller, not the first script.
        assert_eq!(
            first_listed_file("/", root, "Which routes does this app define?").as_deref(),
            Some("controllers/default.js")
        );
    }

    #[test]
    fn a_write_that_changes_only_spacing_is_the_same_content() {
        let old = "exports.install = function() {\n\tROUTE('GET /', index);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n";
        let respaced = "exports.install = function() {\n    ROUTE('GET /', index);\n};\nfunction index($) {\n    $.view('index');\n}";
        assert!(same_but_spacing(old, respaced));
        assert!(!same_but_spacing(old, &old.replace("index);", "home);")));
        assert!(!same_but_spacing("a\nb\n", "b\na\n"));
        assert!(asks_for_spacing("Indent controllers/default.js with tabs"));
        assert!(!asks_for_spacing("Add a route GET /api/ping/"));
        assert!(asks_for_spacing("Convert the file to tabs"));
        assert!(!asks_for_spacing("Add a products table to the stable page"));
    }

    #[test]
    fn new_code_over_a_whole_script_is_shown_the_write_that_adds_it() {
        let old = "var PRODUCTS = [\n\t{ id: 1, name: 'Hammer' },\n\t{ id: 2, name: 'Saw' }\n];\n\nNEWACTION('Products|list', {\n\tname: 'List products',\n\taction: function($) {\n\t\t$.callback(PRODUCTS);\n\t}\n});\n";
        let new = "NEWACTION('Products|count', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS.length);\n\t}\n});";
        let task = "Add an action Products|count in actions/products.js";
        let refusal = dropping_overwrite("actions/products.js", old, new, task).expect("refused");
        let (_, call) = refusal.split_once(APPEND_HINT).expect("the hint");
        let call: serde_json::Value = serde_json::from_str(call).expect("a JSON call");
        assert_eq!(call["name"], "write");
        assert_eq!(
            call["arguments"]["content"],
            format!("{}\n\n{new}", old.trim_end())
        );
        assert!(!without_edit(refusal.clone()).contains("If these lines"));
        let told = without_edit(format!("{refusal}\n\nThe task names a/b.js."));
        assert!(
            !told.contains("If these lines") && told.ends_with("\n\nThe task names a/b.js."),
            "{told}"
        );
        // Written on one line (the 1.5B, c30): the same.
        let line = "NEWACTION('Products|count', { action: function($) { $.callback(PRODUCTS.length); } });";
        let one = dropping_overwrite("actions/products.js", old, line, task).expect("refused");
        assert!(one.contains(APPEND_HINT), "{one}");
        // Not for a short line, nor when the write starts with one of the file's lines.
        let short =
            dropping_overwrite("actions/products.js", old, "var A = 1;", task).expect("refused");
        assert!(!short.contains("If these lines"), "{short}");
        let kept = dropping_overwrite(
            "actions/products.js",
            old,
            "var PRODUCTS = [\nx\ny\n];",
            task,
        )
        .expect("refused");
        assert!(!kept.contains("If these lines"), "{kept}");
        let view = "<h1>Acme Shop</h1>\n<p>Tools.</p>\n";
        let text =
            dropping_overwrite("views/index.html", view, "a\nb\nc\n", task).expect("refused");
        assert!(!text.contains("If these lines"), "{text}");
    }

    #[test]
    fn a_refusal_told_to_a_model_without_edit_does_not_name_it() {
        let dropping = dropping_overwrite("v.html", "a\nb\n", "c\n", "Change v.html").unwrap();
        let unseen = SeenFiles::default()
            .unseen_overwrite("v.html", true)
            .unwrap();
        for refusal in [dropping, unseen] {
            let told = without_edit(refusal.clone());
            assert!(refusal.contains("edit"), "{refusal}");
            assert!(
                !told.contains("edit") && told.to_lowercase().contains("write all of"),
                "{told}"
            );
        }
    }

    #[test]
    fn a_prompt_points_at_the_total_js_folders_of_its_words() {
        assert_eq!(
            topic_folders("Which routes does this app define?"),
            ["controllers"]
        );
        assert_eq!(
            topic_folders("Add an action with validation, served at POST /api/contact/"),
            ["actions", "controllers"]
        );
        assert!(topic_folders("Fix the build").is_empty());
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (path, text) in [
            (
                "controllers/default.js",
                "exports.install = function() {};\n",
            ),
            ("controllers/.hidden.js", "x"),
            ("actions/a.js", "a"),
            ("actions/b.js", "b"),
            ("actions/c.js", "c"),
            ("actions/d.js", "d"),
            ("views/.env", "SECRET=1"),
        ] {
            std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            std::fs::write(root.join(path), text).unwrap();
        }
        // A folder of four files is left to the model's search; a secret file is not read.
        assert_eq!(
            topic_files("Which routes and actions are there?", root, |_| false),
            ["controllers/default.js"]
        );
        assert!(topic_files("Change the page", root, |rel| rel.ends_with(".env")).is_empty());
        #[cfg(unix)]
        {
            let outside = tempfile::tempdir().unwrap();
            std::fs::write(outside.path().join("x.js"), "x").unwrap();
            std::fs::create_dir(root.join("schemas")).unwrap();
            std::os::unix::fs::symlink(outside.path().join("x.js"), root.join("schemas/x.js"))
                .unwrap();
            assert!(topic_files("Which schemas?", root, |_| false).is_empty());
        }
    }

    #[test]
    fn a_prompt_that_forbids_changes_is_told_apart() {
        assert!(forbids_changes(
            "Which routes does this app define? List each HTTP method and path. Do not change any file."
        ));
        assert!(forbids_changes(
            "Explain the build, but don\u{2019}t edit anything"
        ));
        assert!(!forbids_changes(
            "Fix it without changing what the routes do."
        ));
        assert!(!forbids_changes("Which routes does this app define?"));
    }

    #[test]
    fn a_commands_change_shows_its_lines_as_they_are_now() {
        let before = "<h1>Acme Shop</h1>\n<p>Tools for every workshop.</p>\n";
        let after = "<h1>Welcome to Acme Shop</h1>\n<p>Tools for every workshop.</p>\n";
        assert_eq!(
            command_change("views/index.html", Some(before), Some(after), false),
            "\n\nThis command changed views/index.html, line 1. Now:\n    1\t<h1>Welcome to Acme Shop</h1>\n    2\t<p>Tools for every workshop.</p>"
        );
        let grown = "a\nb\nnew\nc\n";
        assert!(
            command_change("x", Some("a\nb\nc\n"), Some(grown), false).starts_with(
                "\n\nThis command changed x, line 3. Now:\n    2\tb\n    3\tnew\n    4\tc"
            )
        );
        assert!(
            command_change("x", Some("a\nb\nc\n"), Some("a\nc\n"), false).starts_with(
                "\n\nThis command removed lines from x at line 2. Now:\n    1\ta\n    2\tc"
            )
        );
        assert_eq!(
            command_change("new.js", None, Some("x\ny\n"), false),
            "\n\nThis command created new.js (2 lines)."
        );
        assert_eq!(
            command_change("old.js", Some("x"), None, true),
            "\n\nThis command deleted old.js."
        );
        assert_eq!(
            command_change("logo.png", None, None, false),
            "\n\nThis command changed logo.png."
        );
    }

    #[test]
    fn the_files_a_prompt_names_are_found_inside_the_project_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("app");
        for (path, text) in [
            ("controllers/default.js", "x"),
            ("views/index.html", "x"),
            ("index.js", "x"),
            (".env", "SECRET=1"),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
            std::fs::write(path, text).expect("file");
        }
        std::fs::write(dir.path().join("outside.js"), "x").expect("outside");
        std::os::unix::fs::symlink(dir.path().join("outside.js"), root.join("link.js"))
            .expect("link");
        let secret = |p: &str| p == ".env";
        assert_eq!(
            named_files(
                "Add a route GET /api/ping/ in controllers/default.js that answers {\"pong\": true}.",
                &root,
                secret
            ),
            ["controllers/default.js"]
        );
        assert_eq!(
            named_files(
                "Change the heading (views/index.html), see ./index.js and views/index.html again: also `index.js`.",
                &root,
                secret
            ),
            ["views/index.html", "index.js"]
        );
        assert!(
            named_files(
                "Read .env, link.js, ../outside.js, /etc/passwd, views and missing.js",
                &root,
                secret
            )
            .is_empty(),
            "secrets, links out, folders and missing files are not read"
        );
    }

    #[test]
    fn an_existing_file_is_overwritten_only_once_seen() {
        let mut seen = SeenFiles::default();
        assert!(
            seen.unseen_overwrite("new.js", false).is_none(),
            "a new file"
        );
        let refusal = seen
            .unseen_overwrite("./actions/products.js", true)
            .expect("refused");
        assert!(
            refusal.starts_with("actions/products.js already exists"),
            "{refusal}"
        );
        seen.record("read", "actions/products.js");
        assert!(seen.unseen_overwrite("actions/products.js", true).is_none());
        seen.record("list", "views");
        assert!(
            seen.unseen_overwrite("views", true).is_some(),
            "a list is not a read"
        );
    }

    const CONTROLLER: &str = "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /about/', about);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n\nfunction about($) {\n\t$.plain('Since 1999.');\n}\n";

    #[test]
    fn a_route_line_goes_inside_install_and_a_function_at_the_end() {
        let (merged, placed) = merge_fragment(
            CONTROLLER,
            "ROUTE('GET /api/ping/', ping);\n\nfunction ping($) {\n\t$.json({ pong: true });\n}\n",
        )
        .expect("merged");
        assert_eq!(placed, Placed::RoutesAndEnd(3));
        assert_eq!(
            merged,
            "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /about/', about);\n\tROUTE('GET /api/ping/', ping);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n\nfunction about($) {\n\t$.plain('Since 1999.');\n}\n\nfunction ping($) {\n\t$.json({ pong: true });\n}\n"
        );
        let (merged, placed) =
            merge_fragment(CONTROLLER, "ROUTE('GET /api/x/ --> X|list');").expect("merged");
        assert_eq!(placed, Placed::Routes(3));
        assert!(
            merged.contains("about);\n\tROUTE('GET /api/x/ --> X|list');\n};"),
            "{merged}"
        );
    }

    #[test]
    fn new_code_wrapped_in_the_files_install_is_unwrapped() {
        // The 0.5B's content: the file's install line with only the new route, the handler
        // inside the block or after it.
        for content in [
            "exports.install = function() {\n    ROUTE('GET /api/ping/', ping);\n};\n\nfunction ping($) {\n    $.json({ pong: true });\n}\n",
            "exports.install = function() {\n  ROUTE('GET /api/ping/', ping);\n  function ping($) {\n    $.json({ pong: true });\n  }\n};\n",
        ] {
            let (merged, placed) = merge_fragment(CONTROLLER, content).expect("merged");
            assert_eq!(placed, Placed::RoutesAndEnd(3), "{content}");
            assert!(
                merged.starts_with("exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /about/', about);\n\tROUTE('GET /api/ping/', ping);\n};\n"),
                "{merged}"
            );
            assert!(merged.contains("function about($) {"), "{merged}");
            assert!(
                merged.contains("function ping($) {\n\t$.json({ pong: true });\n}"),
                "indented with tabs, as the file: {merged}"
            );
            assert!(merged.trim_end().ends_with('}'), "{merged}");
            assert_eq!(merged.matches("exports.install").count(), 1, "{merged}");
        }
        // A route the file has, pointed elsewhere: a change of it, not an addition.
        assert_eq!(
            merge_fragment(
                CONTROLLER,
                "exports.install = function() {\n\tROUTE('GET /about/ --> About|show');\n};\n"
            ),
            None
        );
        // A route with its handler inline, over several lines: not moved line by line.
        assert_eq!(
            merge_fragment(
                CONTROLLER,
                "exports.install = function() {\n\tROUTE('POST /x/', function($) {\n\t\t$.success();\n\t});\n};\n"
            ),
            None
        );
        // The file copied whole with the route: not new code (written as it is).
        let whole = CONTROLLER.replace(
            "about);\n};",
            "about);\n\tROUTE('GET /api/ping/', ping);\n};",
        );
        assert_eq!(merge_fragment(CONTROLLER, &whole), None);
    }

    #[test]
    fn new_code_goes_at_the_end_and_a_partial_copy_is_no_fragment() {
        let action = "NEWACTION('Products|count', {\n\tname: 'Count',\n\taction: function($) {\n\t\t$.callback(PRODUCTS.length);\n\t}\n});";
        let old = "var PRODUCTS = [1, 2];\n\nNEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS);\n\t}\n});\n";
        let (merged, placed) = merge_fragment(old, action).expect("merged");
        assert_eq!(placed, Placed::End);
        assert_eq!(merged, format!("{}\n\n{action}\n", old.trim_end()));
        // The file's first line in the content: a rewrite (refused or written whole).
        assert_eq!(
            merge_fragment(old, "var PRODUCTS = [3];\nvar OTHER = [4];\n"),
            None
        );
        // A controller's install block written over an action file: not added to it.
        assert_eq!(
            merge_fragment(
                old,
                "exports.install = function() {\n\tROUTE('GET /x/', x);\n};\n"
            ),
            None
        );
        // Routes without an exports.install to put them in.
        assert_eq!(merge_fragment(old, "ROUTE('GET /x/', x);"), None);
        // Braces alone are not lines of the file.
        assert!(merge_fragment(old, "function x() {\n}\n").is_some());
    }

    #[test]
    fn what_a_write_removed_is_put_back_in_it() {
        let old = "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /api/products/ --> Products|list');\n};\n\nfunction index($) {\n\t$.view('index');\n}\n";
        let new = "exports.install = function() {\n\tROUTE('GET /api/products/count/ --> Products|count');\n\tROUTE('GET /', index);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n";
        assert_eq!(
            put_back(old, new).as_deref(),
            Some(
                "exports.install = function() {\n\tROUTE('GET /api/products/count/ --> Products|count');\n\tROUTE('GET /', index);\n\tROUTE('GET /api/products/ --> Products|list');\n};\n\nfunction index($) {\n\t$.view('index');\n}\n"
            )
        );
        let actions = "var P = [];\n\nNEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(P);\n\t}\n});\n";
        let renamed = actions.replace("Products|list", "Contact|create");
        let back = put_back(actions, &renamed).expect("put back");
        assert!(back.starts_with(&renamed.trim_end().to_string()), "{back}");
        assert!(back.ends_with("NEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(P);\n\t}\n});\n"), "{back}");
        // No install to put the route in.
        assert_eq!(put_back(old, "var a = 1;\n"), None);
        // A dropped declaration the file still uses: variables at the top, functions at the end.
        let products = "var PRODUCTS = [\n\t{ id: 1, name: 'Hammer' }\n];\n\nNEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS);\n\t}\n});\n";
        let without = "NEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS);\n\t}\n});\n\nNEWACTION('Products|count', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS.length);\n\t}\n});\n";
        assert_eq!(
            put_back(products, without).as_deref(),
            Some(
                format!("var PRODUCTS = [\n\t{{ id: 1, name: 'Hammer' }}\n];\n\n{without}")
                    .as_str()
            )
        );
        let controller = "exports.install = function() {\n\tROUTE('GET /', index);\n};\n\nfunction index($) {\n\t$.view('index');\n}\n";
        let install_only = "exports.install = function() {\n\tROUTE('GET /', index);\n\tROUTE('GET /x/', x);\n};\nfunction x($) {\n\t$.plain('x');\n}\n";
        assert_eq!(
            put_back(controller, install_only).as_deref(),
            Some(
                format!(
                    "{}\n\nfunction index($) {{\n\t$.view('index');\n}}\n",
                    install_only.trim_end()
                )
                .as_str()
            )
        );
    }

    #[test]
    fn the_action_a_task_describes_is_shown_whole_for_its_file() {
        let prompt = "Add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/. It takes a required name (String) and a required email (Email), and answers success.";
        let route = "POST /api/contact/".to_string();
        assert_eq!(
            action_skeleton(prompt, "actions/contact.js", Some(&route)).as_deref(),
            Some(
                "\nThe task's action, as Total.js 5 declares it: NEWACTION('Contact|create', { route: 'POST /api/contact/', input: '*name:String, *email:Email', action: function($, model) { $.success(); } });"
            )
        );
        assert_eq!(
            action_file(prompt, "actions/contact.js", Some(&route)).as_deref(),
            Some(
                "NEWACTION('Contact|create', {\n\troute: 'POST /api/contact/',\n\tinput: '*name:String, *email:Email',\n\taction: function($, model) {\n\t\t$.success();\n\t}\n});\n"
            )
        );
        // An action with work of its own to do gets the shape, not a file.
        assert_eq!(
            action_file(
                "Add an action Products|count that answers the number of products.",
                "actions/products.js",
                None
            ),
            None
        );
        assert_eq!(
            action_skeleton(
                "Add an action Products|count that answers the number of products.",
                "actions/products.js",
                None
            )
            .as_deref(),
            Some(
                "\nThe task's action, as Total.js 5 declares it: NEWACTION('Products|count', { action: function($) { … $.success(value); } });"
            )
        );
        assert_eq!(
            action_skeleton(prompt, "controllers/default.js", Some(&route)),
            None
        );
        assert!(declares_named_action(
            prompt,
            "NEWACTION('Contact|create', {\n\taction: function($) {}\n});\n"
        ));
        assert!(!declares_named_action(prompt, "var a = 1;\n"));
    }

    #[test]
    fn typed_fields_of_a_task_become_an_input() {
        let prompt = "Add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/. It takes a required name (String) and a required email (Email), and answers success. A request without a valid email must get HTTP 400.";
        assert_eq!(
            named_input(prompt).as_deref(),
            Some("*name:String, *email:Email")
        );
        assert_eq!(
            named_input("Store a title (String) and an optional count (Number).").as_deref(),
            Some("title:String, count:Number")
        );
        assert_eq!(named_input("Add a route (see the docs) for x."), None);
        let without = vec![(
            "actions/contact.js".to_string(),
            "NEWACTION('Contact|create', {\n\taction: function($) {\n\t\t$.success();\n\t}\n});\n"
                .to_string(),
        )];
        let told = missing_input(prompt, &without).expect("told");
        assert!(
            told.contains("add input: '*name:String, *email:Email'"),
            "{told}"
        );
        let with = vec![(
            "actions/contact.js".to_string(),
            "NEWACTION('Contact|create', {\n\tinput: '*name:String',\n\taction: function($, model) {\n\t\t$.success();\n\t}\n});\n"
                .to_string(),
        )];
        assert_eq!(missing_input(prompt, &with), None);
        // No action yet: the route and file notes say what to do first.
        assert_eq!(missing_input(prompt, &[]), None);
    }

    #[test]
    fn actions_are_found_wherever_they_are_declared() {
        let script = "exports.install = function() {\n\tROUTE('POST /x/ --> A|b');\n\tNEWACTION('A|b', { action: $ => $.success() });\n};\nNEWACTION('C|d', {\n\taction: $ => $.success()\n});\n// NEWACTION('E|f')\n";
        assert_eq!(declared_actions(script), ["A|b", "C|d"]);
    }

    #[test]
    fn content_the_file_holds_already_is_found() {
        let old = "var P = [];\n\nNEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(P);\n\t}\n});\n\nNEWACTION('Products|count', {\n\taction: function($) {\n\t\t$.callback(P.length);\n\t}\n});\n";
        let count = "NEWACTION('Products|count', {\n    action: function($) {\n        $.callback(P.length);\n    }\n});";
        assert!(already_in(old, count));
        assert!(!already_in(old, old));
        assert!(!already_in(old, &count.replace("P.length", "P.length + 1")));
        assert!(!already_in(old, "});\n"));
    }

    #[test]
    fn only_a_task_that_says_its_action_answers_success_asks_for_it() {
        assert!(answers_success("It takes a name, and answers success."));
        assert!(answers_success("The action responds with success."));
        assert!(answers_success("Returns success when saved."));
        assert!(!answers_success(
            "Add an action that saves the order successfully."
        ));
        assert!(!answers_success("Show a success message on the page."));
    }

    #[test]
    fn an_action_the_task_says_answers_success_is_told_to() {
        let prompt = "Add an action Contact|create in a new file actions/contact.js. It takes a required name (String), and answers success.";
        let echo = vec![(
            "actions/contact.js".to_string(),
            "NEWACTION('Contact|create', {\n\tinput: '*name:String',\n\taction: function($, model) {\n\t\t$.callback(model);\n\t}\n});\n".to_string(),
        )];
        let told = missing_success(prompt, &echo).expect("told");
        assert!(
            told.ends_with("End its action with: $.success();"),
            "{told}"
        );
        let success = vec![(
            echo[0].0.clone(),
            echo[0].1.replace("$.callback(model)", "$.success()"),
        )];
        assert_eq!(missing_success(prompt, &success), None);
        assert_eq!(
            missing_success(
                &prompt.replace("answers success", "answers the contact"),
                &echo
            ),
            None
        );
        assert_eq!(missing_success(prompt, &[]), None);
    }

    #[test]
    fn a_route_the_task_names_comes_with_its_lines_for_the_file() {
        let prompt = "Add a route GET /api/ping/ in controllers/default.js that answers the JSON {\"pong\": true}.";
        let lines = route_lines("GET /api/ping/", prompt, "controllers/default.js").expect("lines");
        assert!(lines.contains("ROUTE('GET /api/ping/', ping);"), "{lines}");
        assert!(
            lines.contains("function ping($) { $.json({\"pong\": true}); }"),
            "{lines}"
        );
        assert_eq!(
            json_in("answers {\"a\": {\"b\": 1}} now"),
            Some("{\"a\": {\"b\": 1}}")
        );
        assert_eq!(json_in("answers {not json}"), None);
        let action = "Add an action Contact|create in a new file actions/contact.js, served at POST /api/contact/.";
        let lines =
            route_lines("POST /api/contact/", action, "controllers/default.js").expect("lines");
        assert!(
            lines.contains("ROUTE('POST /api/contact/ --> Contact|create');"),
            "{lines}"
        );
        let lines = route_lines("POST /api/contact/", action, "actions/contact.js").expect("lines");
        assert!(lines.contains("route: 'POST /api/contact/'"), "{lines}");
        assert_eq!(
            route_lines("GET /api/ping/", prompt, "views/index.html"),
            None
        );
        assert_eq!(handler_name("GET /api/order-list/"), "order_list");
        assert_eq!(handler_name("GET /"), "handler");
        assert_eq!(handler_name("GET /api/2024/"), "handler");
    }
}
