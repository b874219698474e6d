//! The boot check's pure half (the daemon starts and stops the app, see `totemd::boot`): which
//! requests to make after an edit, the script that makes the app run as one process on the port
//! Totem chose, and how to read what the app printed into one short finding that names the
//! project's own line (`actions/items.js:1`), not the framework's.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::check::rules::routes::route_strings;

/// Loaded with `node --require` before the project's `index.js`. It makes `Total.run()` and
/// `F.http()` run the app as one process (release mode, no watcher), on 127.0.0.1 and the port in
/// `TOTEM_BOOT_PORT`, with the temp, log and database folders in `TOTEM_BOOT_TMP`: the check reads
/// the project and writes nothing into it.
pub const BOOT_PRELOAD: &str = r#"'use strict';
// Written by Totem for its boot check: the app runs as one process on the port Totem chose,
// with its temp, log and database folders in Totem's temp folder.
var port = +process.env.TOTEM_BOOT_PORT;
var dir = process.env.TOTEM_BOOT_TMP;
// The sandbox hides /proc: memory figures read as 0 instead of throwing.
var memory = process.memoryUsage;
process.memoryUsage = function() {
	try {
		return memory.call(process);
	} catch (e) {
		return { rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 };
	}
};
process.memoryUsage.rss = function() {
	try {
		return memory.rss();
	} catch (e) {
		return 0;
	}
};
require(require.resolve('total5', { paths: [process.cwd()] }));
function force(opt) {
	opt = Object.assign({}, opt);
	opt.watcher = false;
	opt.port = port;
	opt.ip = '127.0.0.1';
	opt.config = Object.assign({}, opt.config, { $dirtmp: dir + '/tmp', $dirlogs: dir + '/logs', $dirdatabases: dir + '/databases' });
	delete opt.cluster;
	delete opt.edit;
	delete opt.unixsocket;
	delete opt.servicemode;
	delete opt.https;
	return opt;
}
// Routes are indexed 100 ms after the last ROUTE(); index them before the first request.
F.on('ready', function() {
	if (F.routes.timeout) {
		clearTimeout(F.routes.timeout);
		F.routes.timeout = null;
		F.TRouting.sort();
	}
});
var run = F.run;
var http = F.http;
F.run = function(opt) { return run.call(F, force(opt)); };
F.http = function(opt) { return http.call(F, force(opt)); };
"#;

/// One request the boot check makes once the app listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootRequest {
    /// `GET`, or the method of a route the settings declare safe.
    pub method: String,
    /// The URL path, e.g. `/api/items/`.
    pub path: String,
    /// The JSON body to send: for a route the run added, one made from its action's `input` (see
    /// [`added_write_requests`]). `None` sends none for `GET`, `{}` for other methods.
    pub body: Option<String>,
}

impl BootRequest {
    /// `GET /api/items/`.
    pub fn label(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// The label with the body sent, for a finding: `POST /api/contact/ with {"name":"Test"}`.
    pub fn describe(&self) -> String {
        match &self.body {
            Some(body) => format!("{} with {body}", self.label()),
            None => self.label(),
        }
    }
}

/// At most this many requests per check: the routes of a large edit are sampled in file order.
pub const MAX_REQUESTS: usize = 12;

/// The requests for the routes declared in `files` (path relative to the root, content): every
/// `GET` route without parameters, and other routes only when `safe` names them (`"POST
/// /api/reset/"`). Error pages (`#404`), parameterised and wildcard URLs are skipped.
pub fn boot_requests(files: &[(String, String)], safe: &[String]) -> Vec<BootRequest> {
    requests(
        files
            .iter()
            .flat_map(|(_, content)| route_strings(content).into_iter().map(|(r, _)| r)),
        safe,
    )
}

/// One file a run edited, for [`changed_boot_requests`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditedFile {
    /// Path relative to the root.
    pub path: String,
    /// The file before the run: `Some(None)` when the run created it, `None` when Totem does not
    /// know (a command changed it), which counts every route in it as changed.
    pub before: Option<Option<String>>,
    /// The file now.
    pub after: String,
}

/// The requests for the routes the run's edits added or changed (same rules as
/// [`boot_requests`]). A route is changed when its method and URL are new to the file, or when the
/// edit touched a line from its declaration up to the next route's (for the file's first route,
/// from the top of the file): its handler, flags and action usually sit there. A route anywhere in
/// `project` (its route files as [`route_files`] reads them) is changed too when it names an action
/// (`--> Products|list`) whose `NEWACTION()` the edits changed, added, renamed or removed: an
/// action renamed in actions/ breaks the controller's route without touching it.
pub fn changed_boot_requests(
    files: &[EditedFile],
    project: &[(String, String)],
    safe: &[String],
) -> Vec<BootRequest> {
    let mut routes = Vec::new();
    let mut actions = HashSet::new();
    for file in files {
        routes.extend(changed_routes(file.before.as_ref(), &file.after));
        actions.extend(changed_actions(file.before.as_ref(), &file.after));
    }
    if !actions.is_empty() {
        for (_, content) in project {
            for (route, _) in route_strings(content) {
                if route_actions(&route).any(|a| actions.contains(a)) {
                    routes.push(route);
                }
            }
        }
    }
    requests(routes.into_iter(), safe)
}

/// The actions a route string runs: the words after its `-->`, without the `(response)` marks.
fn route_actions(route: &str) -> impl Iterator<Item = &str> {
    route
        .split_once("-->")
        .map_or("", |(_, after)| after)
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty() && !w.starts_with('('))
}

/// The ids of a file's `NEWACTION('Ns|name', …)` with their 1-based lines.
fn declared_actions(content: &str) -> Vec<(String, usize)> {
    action_specs(content)
        .into_iter()
        .map(|spec| (spec.id, spec.line))
        .collect()
}

/// The ids of a script's `NEWACTION('Ns|name', …)` calls, in order, wherever they are (also
/// inside a function).
pub fn action_ids(content: &str) -> Vec<String> {
    declared_actions(content)
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

/// The action ids an edit from `before` to `after` added, removed, or whose declaration (from its
/// line up to the next action's) it touched; every id of both when `before` is not known.
fn changed_actions(before: Option<&Option<String>>, after: &str) -> Vec<String> {
    let now = declared_actions(after);
    let Some(Some(before)) = before else {
        return now.into_iter().map(|(id, _)| id).collect();
    };
    let then = declared_actions(before);
    let ids = |list: &[(String, usize)]| {
        list.iter()
            .map(|(id, _)| id.clone())
            .collect::<HashSet<_>>()
    };
    let (ids_now, ids_then) = (ids(&now), ids(&then));
    let changed = crate::check::report::changed_lines(before, after);
    let mut out: Vec<String> = ids_now.symmetric_difference(&ids_then).cloned().collect();
    for (i, (id, line)) in now.iter().enumerate() {
        let end = now
            .get(i + 1)
            .map_or(usize::MAX, |(_, next)| (*next).max(line + 1));
        if changed.iter().any(|l| (*line..end).contains(l)) && !out.contains(id) {
            out.push(id.clone());
        }
    }
    out
}

/// The methods whose new routes [`added_write_requests`] asks.
const WRITE_METHODS: &[&str] = &["POST", "PUT", "PATCH", "DELETE"];

/// The requests for the routes other than `GET` that the run's edits added (their method and URL
/// are new to their file), each with a JSON body that passes the `input` of the action it runs
/// ([`sample_body`]), so the action's own code runs as a valid request runs it. The 0.5B wrote
/// `Contact|create` with its route and input and a line that throws (`model.products.push`), and
/// said it was done (c37, c38): only a request reaches that line. A route the run only changed,
/// or in a file a command changed, is not asked.
///
/// For the agent's boot check, which runs the app in the kernel sandbox (it writes only its temp
/// folder, reaches only its own port); `totem check --boot` runs the app unconfined and asks
/// these routes only when the settings declare them safe.
pub fn added_write_requests(
    files: &[EditedFile],
    project: &[(String, String)],
) -> Vec<BootRequest> {
    let mut inputs: HashMap<String, Option<String>> = HashMap::new();
    let contents = project
        .iter()
        .map(|(_, c)| c.as_str())
        .chain(files.iter().map(|f| f.after.as_str()));
    for content in contents {
        for spec in action_specs(content) {
            inputs.entry(spec.id).or_insert(spec.input);
        }
    }
    let mut out: Vec<BootRequest> = Vec::new();
    for file in files {
        let Some(before) = &file.before else {
            continue;
        };
        let old: HashSet<String> = before
            .as_deref()
            .map(route_strings)
            .unwrap_or_default()
            .iter()
            .filter_map(|(r, _)| route_key(r))
            .collect();
        let specs = action_specs(&file.after);
        for (route, _) in route_strings(&file.after) {
            let Some((method, url)) = method_and_url(&route) else {
                continue;
            };
            if !WRITE_METHODS.contains(&method.as_str())
                || !url.starts_with('/')
                || url.contains(['{', '*', ':'])
                || old.contains(&format!("{method} {url}"))
            {
                continue;
            }
            let action = route_actions(&route)
                .next()
                .map(str::to_string)
                .or_else(|| {
                    specs
                        .iter()
                        .find(|s| s.route.as_deref() == Some(route.as_str()))
                        .map(|s| s.id.clone())
                });
            let input = action.and_then(|id| inputs.get(&id).cloned().flatten());
            let request = BootRequest {
                method,
                path: url,
                body: Some(sample_body(input.as_deref().unwrap_or(""))),
            };
            if out.len() < MAX_REQUESTS && !out.iter().any(|r| r.label() == request.label()) {
                out.push(request);
            }
        }
    }
    out
}

/// One `NEWACTION('Ns|name', { route: '…', input: '…' })` of a file.
struct ActionSpec {
    id: String,
    /// The 1-based line of its id.
    line: usize,
    route: Option<String>,
    input: Option<String>,
}

fn action_specs(content: &str) -> Vec<ActionSpec> {
    let lexed = crate::js::lex(content);
    let tokens = &lexed.tokens;
    crate::check::syntax::global_calls(tokens, "NEWACTION")
        .iter()
        .filter_map(|call| {
            let (id, line) = crate::check::syntax::string_in(tokens, call.args.first()?)?;
            let text = |key: &str| {
                let options = call.args.get(1)?;
                let value = crate::check::syntax::property(tokens, options, key)?;
                crate::check::syntax::string_in(tokens, &value).map(|(v, _)| v.to_string())
            };
            Some(ActionSpec {
                id: id.to_string(),
                line,
                route: text("route"),
                input: text("input"),
            })
        })
        .collect()
}

/// A JSON object that passes an action's `input` (`*name:String, *email:Email, tags:[String]`):
/// a plain value of each field's type (`{"name":"Test","email":"test@example.com",…}`). A field
/// typed by a schema (`@Item`) gets `{}`, an unknown type a string.
fn sample_body(input: &str) -> String {
    let mut body = serde_json::Map::new();
    for field in top_level_fields(input) {
        let field = field.trim().trim_start_matches('*');
        let (name, kind) = field.split_once(':').unwrap_or((field, "String"));
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        body.insert(name.to_string(), sample_value(kind.trim()));
    }
    serde_json::Value::Object(body).to_string()
}

/// `input`'s fields: split at the commas outside brackets.
fn top_level_fields(input: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in input.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&input[start..]);
    out.into_iter().filter(|f| !f.trim().is_empty()).collect()
}

/// A value of one `input` type: `String`, `Email`, `[Number]`, `{a|b}`, `String(50)`, `@Item`.
fn sample_value(kind: &str) -> serde_json::Value {
    use serde_json::json;
    if let Some(inner) = kind.strip_prefix('[').and_then(|k| k.strip_suffix(']')) {
        return json!([sample_value(inner.trim())]);
    }
    if let Some(options) = kind.strip_prefix('{').and_then(|k| k.strip_suffix('}')) {
        return json!(options.split('|').next().unwrap_or("").trim());
    }
    if kind.starts_with('@') {
        return json!({});
    }
    let base = kind.split('(').next().unwrap_or(kind).trim();
    match base.to_ascii_lowercase().as_str() {
        "email" => json!("test@example.com"),
        "phone" => json!("+421900123456"),
        "url" => json!("https://example.com/"),
        "zip" => json!("12345"),
        // A UID that total5's `isUID()` accepts (made by its `UID()`).
        "uid" => json!("Jbp8Rz1cG61f"),
        "guid" => json!("6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"),
        "json" => json!("{}"),
        "base64" => json!("dGVzdA=="),
        "color" => json!("#336699"),
        "icon" => json!("ti ti-home"),
        "number" | "number2" | "int" | "integer" | "float" | "decimal" => json!(1),
        "boolean" | "bool" => json!(true),
        "date" => json!("2026-01-01T00:00:00.000Z"),
        "object" => json!({}),
        "array" => json!([]),
        _ => json!("Test"),
    }
}

/// The action a Total.js 5 answer says does not exist: its body for a route whose action is not
/// declared is `[{"error":"The action \"Products|list\" not found"}]` (status 400).
pub fn missing_action(body: &str) -> Option<String> {
    let errors: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    errors.as_array()?.iter().find_map(|e| {
        let text = e.get("error")?.as_str()?;
        let name = text
            .strip_prefix("The action \"")?
            .strip_suffix("\" not found")?;
        (!name.is_empty() && name.len() <= 200).then(|| name.to_string())
    })
}

/// The route strings of `after` that are new or whose lines the edit from `before` touched.
fn changed_routes(before: Option<&Option<String>>, after: &str) -> Vec<String> {
    let sites = route_strings(after);
    let Some(Some(before)) = before else {
        return sites.into_iter().map(|(r, _)| r).collect();
    };
    let old: HashSet<String> = route_strings(before)
        .iter()
        .filter_map(|(r, _)| route_key(r))
        .collect();
    let changed = crate::check::report::changed_lines(before, after);
    let mut out = Vec::new();
    for (i, (route, line)) in sites.iter().enumerate() {
        let start = if i == 0 { 1 } else { *line };
        let end = sites
            .get(i + 1)
            .map_or(usize::MAX, |(_, next)| (*next).max(line + 1));
        let is_new = route_key(route).is_none_or(|k| !old.contains(&k));
        if is_new || changed.iter().any(|l| (start..end).contains(l)) {
            out.push(route.clone());
        }
    }
    out
}

fn requests(routes: impl Iterator<Item = String>, safe: &[String]) -> Vec<BootRequest> {
    let safe: HashSet<String> = safe.iter().map(|s| normalize_safe(s)).collect();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for route in routes {
        let Some(request) = request_for(&route, &safe) else {
            continue;
        };
        if seen.insert(request.label()) && out.len() < MAX_REQUESTS {
            out.push(request);
        }
    }
    out
}

fn normalize_safe(s: &str) -> String {
    let mut words = s.split_whitespace();
    let method = words.next().unwrap_or("").to_ascii_uppercase();
    let url = words.next().unwrap_or("");
    format!("{method} {}", url.trim_end_matches('/'))
}

/// A route's method and URL as one key (`GET /api/items/`), to compare routes across files and
/// edits.
fn route_key(route: &str) -> Option<String> {
    method_and_url(route).map(|(m, u)| format!("{m} {u}"))
}

/// The method and URL of a route string, `None` for error pages and strings without a URL.
fn method_and_url(route: &str) -> Option<(String, String)> {
    let mut words = route.split_whitespace();
    let first = words.next()?;
    let method = first.trim_start_matches(['+', '-']).to_ascii_uppercase();
    let url = words.next()?;
    if method.starts_with('#') || url.starts_with('#') {
        return None;
    }
    let url = match url.strip_prefix('?') {
        Some(rest) => format!("/api/{}", rest.trim_start_matches('/')),
        None => url.to_string(),
    };
    Some((method, url))
}

fn request_for(route: &str, safe: &HashSet<String>) -> Option<BootRequest> {
    let (method, url) = method_and_url(route)?;
    if !url.starts_with('/') || url.contains(['{', '*', ':']) {
        return None;
    }
    let declared = safe.contains(&format!("{method} {}", url.trim_end_matches('/')));
    if method != "GET" && !declared {
        return None;
    }
    Some(BootRequest {
        method,
        path: url,
        body: None,
    })
}

/// Folders whose `.js` files declare routes: `(path relative to the root, content)` of each, for
/// `totem check --boot` (which asks every route, not only those of an edit).
pub fn route_files(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for folder in ["controllers", "actions", "schemas", "modules", "plugins"] {
        collect(root, &root.join(folder), 0, &mut out);
    }
    out
}

fn collect(root: &Path, dir: &Path, depth: usize, out: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            if depth < 3 && !path.ends_with("node_modules") {
                collect(root, &path, depth + 1, out);
            }
        } else if path.extension().is_some_and(|e| e == "js")
            && let (Ok(rel), Ok(content)) =
                (path.strip_prefix(root), std::fs::read_to_string(&path))
        {
            out.push((rel.to_string_lossy().replace('\\', "/"), content));
        }
    }
}

/// The routes `before` declares that `after` no longer does, as written (`GET /api/items/`).
pub fn routes_removed(before: &str, after: &str) -> Vec<String> {
    let kept: HashSet<String> = route_strings(after)
        .iter()
        .filter_map(|(r, _)| route_key(r))
        .collect();
    let mut out: Vec<String> = Vec::new();
    for (route, _) in route_strings(before) {
        if let Some(k) = route_key(&route)
            && !kept.contains(&k)
            && !out.contains(&k)
        {
            out.push(k);
        }
    }
    out
}

/// The actions `before` declares (`NEWACTION('Products|list', …)`) that `after` no longer does:
/// an action renamed or deleted, which every route that runs it (`--> Products|list`) loses.
pub fn actions_removed(before: &str, after: &str) -> Vec<String> {
    let kept: HashSet<String> = declared_actions(after)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let mut out: Vec<String> = Vec::new();
    for (id, _) in declared_actions(before) {
        if !kept.contains(&id) && !out.contains(&id) {
            out.push(id);
        }
    }
    out
}

/// What a run removed and has not put back: the routes (`GET /api/items/`) and the actions
/// (`Products|list`) that the files it changed declared before it (`before`: path and text; a
/// file the run created is not in it) and that no file of the project declares now (`project`,
/// as [`route_files`] reads it). A route or action moved to another file is not removed.
pub fn removed_by_run(before: &[(String, String)], project: &[(String, String)]) -> Vec<String> {
    let mut routes_now = HashSet::new();
    let mut actions_now = HashSet::new();
    for (_, content) in project {
        routes_now.extend(
            route_strings(content)
                .iter()
                .filter_map(|(r, _)| route_key(r)),
        );
        actions_now.extend(declared_actions(content).into_iter().map(|(id, _)| id));
    }
    let mut out: Vec<String> = Vec::new();
    for (_, content) in before {
        for route in route_strings(content)
            .iter()
            .filter_map(|(r, _)| route_key(r))
        {
            if !routes_now.contains(&route) && !out.contains(&route) {
                out.push(route);
            }
        }
        for (id, _) in declared_actions(content) {
            let named = format!("the action {id}");
            if !actions_now.contains(&id) && !out.contains(&named) {
                out.push(named);
            }
        }
    }
    out
}

/// The routes of `wanted` (`POST /api/contact/`) that no file of `project` (as [`route_files`]
/// reads it) declares, by method and URL; a trailing slash does not count.
pub fn undeclared_routes(project: &[(String, String)], wanted: &[String]) -> Vec<String> {
    let key = |route: &str| {
        method_and_url(route).map(|(m, u)| format!("{m} {}", u.trim_end_matches('/')))
    };
    let declared: HashSet<String> = project
        .iter()
        .flat_map(|(_, content)| route_strings(content))
        .filter_map(|(r, _)| key(&r))
        .collect();
    wanted
        .iter()
        .filter(|w| key(w).is_some_and(|k| !declared.contains(&k)))
        .cloned()
        .collect()
}

/// The names a script (its tokens) declares at its top level (`var PRODUCTS`, `function about`, `const a, b`
/// is `a` only) with the line of each.
fn top_level_names(tokens: &[crate::js::Token]) -> Vec<(String, usize)> {
    top_level_declarations(tokens)
        .into_iter()
        .map(|i| (tokens[i + 1].text.to_string(), tokens[i].line))
        .collect()
}

/// The indexes of the `var`, `let`, `const`, `function` and `class` tokens at a script's top
/// level that a name follows.
fn top_level_declarations(tokens: &[crate::js::Token]) -> Vec<usize> {
    let mut depth = 0usize;
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        match t.text {
            "{" | "(" | "[" if t.kind == crate::js::Kind::Punct => depth += 1,
            "}" | ")" | "]" if t.kind == crate::js::Kind::Punct => depth = depth.saturating_sub(1),
            "var" | "let" | "const" | "function" | "class"
                if depth == 0
                    && t.kind == crate::js::Kind::Ident
                    && tokens
                        .get(i + 1)
                        .is_some_and(|n| n.kind == crate::js::Kind::Ident) =>
            {
                out.push(i);
            }
            _ => {}
        }
    }
    out
}

/// The top-level names `before` declared that `after` no longer declares but still uses (a name
/// not after a `.`), with the line that declared each before: the 1.5B wrote its new action over
/// actions/products.js and left out `var PRODUCTS = [...]`, which the action still returned.
pub fn declarations_removed(before: &str, after: &str) -> Vec<(String, usize)> {
    let lexed = crate::js::lex(after);
    let now: HashSet<String> = top_level_names(&lexed.tokens)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let used: HashSet<&str> = lexed
        .tokens
        .iter()
        .enumerate()
        .filter(|(i, t)| {
            t.kind == crate::js::Kind::Ident && !(*i > 0 && lexed.tokens[i - 1].is_punct("."))
        })
        .map(|(_, t)| t.text)
        .collect();
    let mut out: Vec<(String, usize)> = Vec::new();
    for (name, line) in top_level_names(&crate::js::lex(before).tokens) {
        if !now.contains(&name)
            && used.contains(name.as_str())
            && !out.iter().any(|(n, _)| *n == name)
        {
            out.push((name, line));
        }
    }
    out
}

/// The lines of `content` that declare the top-level `name` (`var PRODUCTS = [ … ];`, `function
/// index($) { … }`), from the declaration's first line to its last, to put a removed declaration
/// back as it was. `None` for a variable whose statement ends without `;`.
pub fn declaration_block(content: &str, name: &str) -> Option<String> {
    let lexed = crate::js::lex(content);
    let tokens = &lexed.tokens;
    let start = top_level_declarations(tokens)
        .into_iter()
        .find(|&i| tokens[i + 1].is_ident(name))?;
    let mut depth = 0usize;
    let is_var = matches!(tokens[start].text, "var" | "let" | "const");
    let mut end = None;
    for (i, t) in tokens.iter().enumerate().skip(start + 2) {
        if is_var {
            match t.text {
                "{" | "(" | "[" if t.kind == crate::js::Kind::Punct => depth += 1,
                "}" | ")" | "]" if t.kind == crate::js::Kind::Punct => {
                    depth = depth.saturating_sub(1)
                }
                ";" if depth == 0 && t.kind == crate::js::Kind::Punct => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        } else if t.is_punct("{") {
            end = Some(crate::check::syntax::matching(tokens, i));
            break;
        }
    }
    let first = tokens[start].line;
    let last = tokens.get(end?)?.line;
    let lines: Vec<&str> = content.lines().collect();
    Some(lines.get(first - 1..last)?.join("\n"))
}

/// The lines of `content` that declare the action `id` (`NEWACTION('Products|list', { … });`,
/// from the call's first line to its last), to put a removed action back as it was.
pub fn action_block(content: &str, id: &str) -> Option<String> {
    let lexed = crate::js::lex(content);
    let tokens = &lexed.tokens;
    let call = crate::check::syntax::global_calls(tokens, "NEWACTION")
        .into_iter()
        .find(|c| {
            c.args
                .first()
                .and_then(|a| crate::check::syntax::string_in(tokens, a))
                .is_some_and(|(v, _)| v == id)
        })?;
    let close = crate::check::syntax::matching(tokens, call.open);
    let first = tokens.get(call.at)?.line;
    let last = tokens.get(close)?.line;
    let lines: Vec<&str> = content.lines().collect();
    Some(lines.get(first - 1..last)?.join("\n"))
}

/// One error the app printed: its first line and the first frame of the stack that is in the
/// project (not in `node_modules/`, not in Node.js itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootError {
    /// The error's first line, e.g. `Error: JSON Schema "Item" not found`.
    pub message: String,
    /// `actions/items.js:1`, when a frame of the stack is in the project.
    pub frame: Option<String>,
}

impl BootError {
    /// `Error: … (actions/items.js:1)`.
    pub fn describe(&self) -> String {
        match &self.frame {
            Some(frame) => format!("{} ({frame})", self.message),
            None => self.message.clone(),
        }
    }
}

/// The longest error message kept, in characters.
const MAX_MESSAGE: usize = 240;

fn clip(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() <= MAX_MESSAGE {
        return s.to_string();
    }
    let mut out: String = s.chars().take(MAX_MESSAGE).collect();
    out.push('…');
    out
}

/// The errors in the app's output, in order: Total.js's `ERROR ======= date: message` blocks
/// (uncaught exceptions, load errors) and Node.js's own report of an error that ended the
/// process (`/path/file.js:3` … `SyntaxError: …`).
pub fn read_errors(output: &str, root: &Path) -> Vec<BootError> {
    let lines: Vec<&str> = output.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(rest) = line.strip_prefix("ERROR ======= ") {
            // `2026-12-05 04:09:41: Error: …`: the date has one `: ` after it.
            let message = rest.get(21..).unwrap_or(rest);
            // A syntax error's stack starts with its place, then the code, then the error.
            if let Some(place) = location_in(message.trim(), root)
                && let Some(at) = (i + 1..lines.len().min(i + 6)).find(|&j| is_error_line(lines[j]))
            {
                let (_, next) = frames_after(&lines, at + 1);
                out.push(BootError {
                    message: clip(lines[at]),
                    frame: Some(place),
                });
                i = next;
                continue;
            }
            let (frames, next) = frames_after(&lines, i + 1);
            out.push(BootError {
                message: clip(message),
                frame: first_project_frame(frames.iter().copied(), root),
            });
            i = next;
            continue;
        }
        if is_error_line(line) {
            let (frames, next) = frames_after(&lines, i + 1);
            // Node.js prints `/path/file.js:LINE` above the code of a syntax error.
            let above = lines[..i]
                .iter()
                .rev()
                .take(6)
                .find_map(|l| location_in(l.trim(), root));
            out.push(BootError {
                message: clip(line),
                frame: above.or_else(|| first_project_frame(frames.iter().copied(), root)),
            });
            i = next;
            continue;
        }
        i += 1;
    }
    out
}

/// `TypeError: …`, `Error [ERR_X]: …`, `SyntaxError: …` at the start of a line.
fn is_error_line(line: &str) -> bool {
    let head: String = line
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    head.ends_with("Error")
        && line[head.len()..].starts_with([':', ' '])
        && !line.starts_with("ERROR")
}

fn frames_after<'a>(lines: &[&'a str], start: usize) -> (Vec<&'a str>, usize) {
    let mut frames = Vec::new();
    let mut i = start;
    while i < lines.len() && lines[i].trim_start().starts_with("at ") {
        frames.push(lines[i]);
        i += 1;
    }
    (frames, i)
}

/// The first frame of a stack that points into the project: `actions/items.js:1`.
pub fn first_project_frame<'a>(
    frames: impl IntoIterator<Item = &'a str>,
    root: &Path,
) -> Option<String> {
    frames.into_iter().find_map(|frame| {
        let frame = frame.trim().strip_prefix("at ")?;
        let location = match (frame.rfind('('), frame.ends_with(')')) {
            (Some(open), true) => &frame[open + 1..frame.len() - 1],
            _ => frame,
        };
        location_in(location, root)
    })
}

/// `/root/actions/items.js:1:7` (or `file:///…`) → `actions/items.js:1` when it is in the project.
fn location_in(location: &str, root: &Path) -> Option<String> {
    let location = location.strip_prefix("file://").unwrap_or(location);
    let root = root.to_str()?.trim_end_matches('/');
    let rel = location.strip_prefix(root)?.strip_prefix('/')?;
    let mut parts = rel.splitn(3, ':');
    let file = parts.next()?;
    let line = parts.next()?;
    if file.is_empty()
        || file.starts_with("node_modules/")
        || file.contains("/node_modules/")
        || line.is_empty()
        || !line.chars().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    Some(format!("{file}:{line}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_routes_without_parameters_are_asked_others_only_when_safe() {
        let files = vec![(
            "controllers/default.js".to_string(),
            "exports.install = function() {\n\tROUTE('GET /', a);\n\tROUTE('+GET /api/me/', b);\n\tROUTE('GET /items/{id}/', c);\n\tROUTE('POST /api/reset/', d);\n\tROUTE('DELETE /api/x/', e);\n\tROUTE('#404', f);\n};\nNEWACTION('Items|list', { route: 'GET ?items/', action($) { $.success(); } });\n".to_string(),
        )];
        let labels: Vec<String> = boot_requests(&files, &["post /api/reset".to_string()])
            .iter()
            .map(BootRequest::label)
            .collect();
        assert_eq!(
            labels,
            [
                "GET /",
                "GET /api/me/",
                "POST /api/reset/",
                "GET /api/items/"
            ]
        );
    }

    #[test]
    fn only_routes_the_edit_added_or_changed_are_asked() {
        let before = "exports.install = function() {\n\tROUTE('GET /a/', a);\n\tROUTE('GET /b/', b);\n\tROUTE('GET /c/', c);\n};\nfunction a($) { $.plain('a'); }\n";
        let edited = |after: &str| {
            let files = [EditedFile {
                path: "controllers/default.js".into(),
                before: Some(Some(before.to_string())),
                after: after.to_string(),
            }];
            changed_boot_requests(&files, &[], &[])
                .iter()
                .map(BootRequest::label)
                .collect::<Vec<_>>()
        };
        // Nothing changed: nothing to ask.
        assert!(edited(before).is_empty());
        // A route added between two unchanged ones.
        assert_eq!(
            edited(
                "exports.install = function() {\n\tROUTE('GET /a/', a);\n\tROUTE('GET /new/', n);\n\tROUTE('GET /b/', b);\n\tROUTE('GET /c/', c);\n};\nfunction a($) { $.plain('a'); }\n"
            ),
            ["GET /new/"]
        );
        // A route's declaration changed (its handler), the others not.
        assert_eq!(
            edited(
                "exports.install = function() {\n\tROUTE('GET /a/', a);\n\tROUTE('GET /b/', b2);\n\tROUTE('GET /c/', c);\n};\nfunction a($) { $.plain('a'); }\n"
            ),
            ["GET /b/"]
        );
        // An edit below the last route belongs to it (its handler usually sits there).
        assert_eq!(
            edited(
                "exports.install = function() {\n\tROUTE('GET /a/', a);\n\tROUTE('GET /b/', b);\n\tROUTE('GET /c/', c);\n};\nfunction a($) { $.plain('A'); }\n"
            ),
            ["GET /c/"]
        );
        // An inline handler's body changed.
        let before = "NEWACTION('A|x', { route: 'GET ?a/', action($) {\n\t$.success();\n} });\nNEWACTION('B|x', { route: 'GET ?b/', action($) {\n\t$.success();\n} });\n";
        let after = "NEWACTION('A|x', { route: 'GET ?a/', action($) {\n\t$.success();\n} });\nNEWACTION('B|x', { route: 'GET ?b/', action($) {\n\t$.success(true);\n} });\n";
        let files = [EditedFile {
            path: "actions/x.js".into(),
            before: Some(Some(before.into())),
            after: after.into(),
        }];
        let labels: Vec<String> = changed_boot_requests(&files, &[], &[])
            .iter()
            .map(BootRequest::label)
            .collect();
        assert_eq!(labels, ["GET /api/b/"]);
        // A file the run created, or one a command changed: every route is asked.
        for before in [Some(None), None] {
            let files = [EditedFile {
                path: "actions/x.js".into(),
                before,
                after: after.into(),
            }];
            assert_eq!(changed_boot_requests(&files, &[], &[]).len(), 2);
        }
    }

    #[test]
    fn routes_that_run_an_action_the_edit_changed_are_asked() {
        let controller = "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n\tROUTE('GET /api/both/ --> Products|list (response) Orders|list');\n\tROUTE('GET /api/orders/ --> Orders|list');\n\tROUTE('GET /about/', about);\n};\n";
        let project = [("controllers/default.js".to_string(), controller.to_string())];
        let before = "NEWACTION('Products|list', {\n\tname: 'List',\n\taction: function($) {\n\t\t$.callback([]);\n\t}\n});\n\nNEWACTION('Orders|list', {\n\taction: function($) {\n\t\t$.callback([]);\n\t}\n});\n";
        let asked = |after: &str| {
            let files = [EditedFile {
                path: "actions/products.js".into(),
                before: Some(Some(before.to_string())),
                after: after.to_string(),
            }];
            changed_boot_requests(&files, &project, &[])
                .iter()
                .map(BootRequest::label)
                .collect::<Vec<_>>()
        };
        assert!(asked(before).is_empty());
        // Renamed: the routes that ran the old name are asked (the 1.5B did this).
        assert_eq!(
            asked(&before.replace("Products|list", "Contact|create")),
            ["GET /api/products/", "GET /api/both/"]
        );
        // Its body changed: the same routes; the other action's routes are left alone.
        assert_eq!(
            asked(&before.replace(
                "$.callback([]);\n\t}\n});\n\nNEWACTION",
                "$.callback([1]);\n\t}\n});\n\nNEWACTION"
            )),
            ["GET /api/products/", "GET /api/both/"]
        );
        // Removed (the lines after a removal count as touched, so Orders|list may be asked too).
        let removed = asked(&before[before.find("NEWACTION('Orders").unwrap_or(0)..]);
        assert!(
            removed.starts_with(&[
                "GET /api/products/".to_string(),
                "GET /api/both/".to_string()
            ]) && !removed.contains(&"GET /about/".to_string()),
            "{removed:?}"
        );
        // A file whose past is not known: every action in it counts.
        let files = [EditedFile {
            path: "actions/products.js".into(),
            before: None,
            after: before.into(),
        }];
        assert_eq!(changed_boot_requests(&files, &project, &[]).len(), 3);
    }

    #[test]
    fn an_answer_that_says_the_action_is_missing_names_it() {
        assert_eq!(
            missing_action(r#"[{"error":"The action \"Products|list\" not found"}]"#).as_deref(),
            Some("Products|list")
        );
        assert_eq!(
            missing_action(r#"[{"error":"email is invalid","path":"email"}]"#),
            None
        );
        assert_eq!(missing_action("not json"), None);
        assert_eq!(
            missing_action(r#"{"error":"The action \"x\" not found"}"#),
            None
        );
    }

    #[test]
    fn removed_routes_are_named() {
        let before =
            "exports.install = function() {\n\tROUTE('GET /a/', a);\n\tROUTE('GET /b/', b);\n};\n";
        let after = "exports.install = function() {\n\tROUTE('GET /b/', b);\n};\n";
        assert_eq!(routes_removed(before, after), ["GET /a/"]);
        assert_eq!(routes_removed(before, ""), ["GET /a/", "GET /b/"]);
    }

    #[test]
    fn what_a_run_removed_counts_the_whole_project_now() {
        let products = "NEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback([]);\n\t}\n});\n".to_string();
        let controller = "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n};\n".to_string();
        let before = vec![
            ("actions/products.js".to_string(), products.clone()),
            ("controllers/default.js".to_string(), controller.clone()),
        ];
        let renamed = products.replace("Products|list", "Products|count");
        let now = vec![
            ("actions/products.js".to_string(), renamed.clone()),
            (
                "controllers/default.js".to_string(),
                "exports.install = function() {\n};\n".to_string(),
            ),
        ];
        assert_eq!(
            removed_by_run(&before, &now),
            ["the action Products|list", "GET /api/products/"]
        );
        // Moved to other files: nothing removed.
        let moved = vec![
            ("actions/products.js".to_string(), renamed),
            ("actions/list.js".to_string(), products),
            ("controllers/default.js".to_string(), String::new()),
            ("controllers/api.js".to_string(), controller),
        ];
        assert!(removed_by_run(&before, &moved).is_empty());
    }

    #[test]
    fn routes_other_than_get_the_run_added_are_asked_with_a_body_their_input_accepts() {
        let controller_before =
            "exports.install = function() {\n\tROUTE('POST /api/orders/ --> Orders|create');\n};\n";
        let controller_after = "exports.install = function() {\n\tROUTE('POST /api/orders/ --> Orders|create');\n\tROUTE('PUT /api/orders/ --> Orders|update');\n\tROUTE('GET /api/orders/ --> Orders|list');\n\tROUTE('POST /api/orders/{id}/ --> Orders|update');\n};\n";
        let orders = "NEWACTION('Orders|update', {\n\tinput: '*id:UID, count:Number, tags:[String], kind:{a|b}, note:String(50), item:@Item',\n\taction: function($, model) {\n\t\t$.success();\n\t}\n});\n";
        let contact = "NEWACTION('Contact|create', { route: 'POST /api/contact/', input: '*name:String, *email:Email', action: function($, model) {\n\t$.success();\n} });\n";
        let files = [
            EditedFile {
                path: "controllers/default.js".into(),
                before: Some(Some(controller_before.into())),
                after: controller_after.into(),
            },
            EditedFile {
                path: "actions/contact.js".into(),
                before: Some(None),
                after: contact.into(),
            },
            // A command changed this file: Totem does not know what it added.
            EditedFile {
                path: "controllers/other.js".into(),
                before: None,
                after: "exports.install = function() {\n\tROUTE('POST /api/other/', o);\n};\n"
                    .into(),
            },
        ];
        let project = [("actions/orders.js".to_string(), orders.to_string())];
        let asked: Vec<String> = added_write_requests(&files, &project)
            .iter()
            .map(BootRequest::describe)
            .collect();
        assert_eq!(
            asked,
            [
                r#"PUT /api/orders/ with {"id":"Jbp8Rz1cG61f","count":1,"tags":["Test"],"kind":"a","note":"Test","item":{}}"#,
                r#"POST /api/contact/ with {"name":"Test","email":"test@example.com"}"#,
            ]
        );
        // An action without input, or one Totem cannot find, gets an empty object.
        assert_eq!(sample_body(""), "{}");
        assert_eq!(
            sample_body("*a:Boolean, b:Date"),
            r#"{"a":true,"b":"2026-01-01T00:00:00.000Z"}"#
        );
        // The plain boot requests are unchanged: no body, other methods only when safe.
        assert!(
            changed_boot_requests(&files, &project, &[])
                .iter()
                .all(|r| r.method == "GET" && r.body.is_none())
        );
    }

    #[test]
    fn routes_no_file_declares_are_named() {
        let project = vec![(
            "controllers/default.js".to_string(),
            "exports.install = function() {\n\tROUTE('GET /api/products/ --> Products|list');\n};\n".to_string(),
        ), (
            "actions/contact.js".to_string(),
            "NEWACTION('Contact|create', {\n\troute: 'POST /api/contact',\n\taction: function($) {\n\t\t$.success();\n\t}\n});\n".to_string(),
        )];
        let wanted = [
            "GET /api/products".to_string(),
            "POST /api/contact/".to_string(),
            "GET /api/ping/".to_string(),
            "POST /api/products/".to_string(),
        ];
        assert_eq!(
            undeclared_routes(&project, &wanted),
            ["GET /api/ping/", "POST /api/products/"]
        );
    }

    #[test]
    fn a_declaration_removed_but_still_used_is_named() {
        let before = "var PRODUCTS = [\n\t{ id: 1 }\n];\n\nfunction unused() {}\n\nNEWACTION('Products|list', {\n\taction: function($) {\n\t\tvar x = 1;\n\t\t$.callback(PRODUCTS);\n\t}\n});\n";
        let after = "NEWACTION('Products|count', {\n\taction: function($) {\n\t\t$.callback(PRODUCTS.length);\n\t}\n});\n";
        assert_eq!(
            declarations_removed(before, after),
            [("PRODUCTS".to_string(), 1)]
        );
        assert!(declarations_removed(before, before).is_empty());
        // Used only as a property: not the removed name.
        assert!(declarations_removed(before, "$.PRODUCTS = 1;\n").is_empty());
    }

    #[test]
    fn an_actions_block_is_its_lines() {
        let content = "var A = 1;\n\nNEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(A);\n\t}\n});\n\nNEWACTION('B|c', {});\n";
        assert_eq!(
            action_block(content, "Products|list").as_deref(),
            Some(
                "NEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback(A);\n\t}\n});"
            )
        );
        assert_eq!(
            action_block(content, "B|c").as_deref(),
            Some("NEWACTION('B|c', {});")
        );
        assert_eq!(action_block(content, "X|y"), None);
    }

    #[test]
    fn removed_actions_are_named() {
        let before = "NEWACTION('Products|list', {\n\taction: function($) {\n\t\t$.callback([]);\n\t}\n});\n";
        let renamed = before.replace("Products|list", "Products|count");
        assert_eq!(actions_removed(before, &renamed), ["Products|list"]);
        let added = format!("{before}\n{renamed}");
        assert!(actions_removed(before, &added).is_empty());
        assert_eq!(actions_removed(before, ""), ["Products|list"]);
    }

    #[test]
    fn a_total_js_error_names_the_first_project_frame() {
        let out = "ERROR ======= 2026-12-05 04:09:41: Error: JSON Schema \"Item\" not found\n    at exports.jsonschema (/p/node_modules/total5/utils.js:5748:11)\n    at exports.newaction (/p/node_modules/total5/builders.js:1250:37)\n    at Object.<anonymous> (/p/actions/items.js:1:1)\n    at Module._compile (node:internal/modules/cjs/loader:1521:14)\n";
        let errors = read_errors(out, Path::new("/p"));
        assert_eq!(
            errors,
            [BootError {
                message: "Error: JSON Schema \"Item\" not found".into(),
                frame: Some("actions/items.js:1".into()),
            }]
        );
    }

    #[test]
    fn a_syntax_error_total_js_caught_names_its_place() {
        let out = "ERROR ======= 2026-12-05 04:51:02: /p/actions/items.js:5\n);\n^\n\nSyntaxError: Unexpected token ')'\n    at wrapSafe (node:internal/modules/cjs/loader:1469:18)\n";
        let errors = read_errors(out, Path::new("/p"));
        assert_eq!(
            errors,
            [BootError {
                message: "SyntaxError: Unexpected token ')'".into(),
                frame: Some("actions/items.js:5".into()),
            }]
        );
    }

    #[test]
    fn a_node_syntax_error_names_the_line_above_it() {
        let out = "/p/controllers/default.js:3\n\tROUTE('GET /', index;\n\t                     ^\n\nSyntaxError: missing ) after argument list\n    at internalCompileFunction (node:internal/vm:76:18)\n\nNode.js v20.20.2\n";
        let errors = read_errors(out, Path::new("/p"));
        assert_eq!(errors.len(), 1);
        assert_eq!(
            errors[0].message,
            "SyntaxError: missing ) after argument list"
        );
        assert_eq!(errors[0].frame.as_deref(), Some("controllers/default.js:3"));
    }
}
