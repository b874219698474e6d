//! Rules for mistakes that break an app at boot or leave a route broken without a word, each
//! verified live on total5 0.0.14 (issue #32 item 3):
//!
//! - `schema-load-order`: `input: '@Item'` needs `NEWSCHEMA('@Item', '...')` registered before the
//!   action's file loads. The framework loads `extensions/`, `modules/`, `actions/`, `schemas/`,
//!   `models/`, `definitions/`, `controllers/` in that order, each folder's files alphabetically
//!   (then its subfolders), then each plugin; a schema defined later crashes the boot with
//!   `JSON Schema "Item" not found`.
//! - `view-layout`: `$.view('index')` renders inside `views/layout.html`; without one (and without
//!   `@{layout('')}` in the view) the request never answers.
//! - `plugin-index`: the framework requires `plugins/<id>/index.js` for every folder in
//!   `plugins/`; without it the boot crashes with `Cannot find module`.
//! - `api-route-duplicate`: two `schema.action(…, { route: 'API ?' })` of one schema both
//!   register the endpoint named after the schema (the id `Items/list` splits on `/`), and the
//!   last one answers every call.
//! - `route-middleware`: a `#name` route flag naming no `MIDDLEWARE('name', …)` is skipped: the
//!   route answers without it (a mistyped auth middleware is no protection).
//! - `install-argument`: the framework calls `exports.install()` with no argument, so
//!   `exports.install = function(framework) { framework.route(…) }` throws at load.

use std::cmp::Ordering;

use super::{Hits, Source};
use crate::check::ProjectContext;
use crate::check::syntax::{
    function_at, global_calls, method_calls, prev_is, property, route_str, string_in,
};
use crate::js::{Kind, Token};

/// Root folders in the order total5 loads them (`F.load`); `middleware/` is moved last.
const ROOT_ORDER: &[&str] = &[
    "extensions",
    "modules",
    "actions",
    "schemas",
    "models",
    "definitions",
    "controllers",
    "sources",
    "scripts",
    "transforms",
    "middleware",
];
/// A plugin's folders in load order, after its `index.js` (plugins load no `modules/`).
const PLUGIN_ORDER: &[&str] = &[
    "extensions",
    "controllers",
    "actions",
    "schemas",
    "models",
    "definitions",
    "sources",
    "flowstreams",
    "middleware",
    "transforms",
];

/// When the framework loads a file: (phase, plugin, folder, depth in the folder, path). None for
/// files it never loads by itself.
type LoadKey = (u8, String, usize, usize, String);

pub(crate) fn load_key(path: &str) -> Option<LoadKey> {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        // index.js runs before Total.run() starts loading; jsonschemas/ load first of all.
        ["index.js"] => Some((0, String::new(), 0, 0, String::new())),
        ["jsonschemas", ..] => Some((0, String::new(), 1, 0, path.to_string())),
        ["plugins", id, "index.js"] => Some((2, id.to_string(), 0, 0, String::new())),
        ["plugins", id, folder, rest @ ..] if !rest.is_empty() => {
            let i = PLUGIN_ORDER.iter().position(|f| f == folder)?;
            Some((2, id.to_string(), i + 1, rest.len() - 1, path.to_string()))
        }
        [folder, rest @ ..] if !rest.is_empty() => {
            let i = ROOT_ORDER.iter().position(|f| f == folder)?;
            Some((1, String::new(), i + 2, rest.len() - 1, path.to_string()))
        }
        _ => None,
    }
}

/// Whether a definition at `def` (path, line) runs before a use at `use_` (path, line).
fn runs_before(def: (&str, usize), use_: (&str, usize)) -> bool {
    if def.0 == use_.0 {
        return def.1 < use_.1;
    }
    match (load_key(def.0), load_key(use_.0)) {
        (Some(d), Some(u)) => d.cmp(&u) == Ordering::Less,
        _ => false,
    }
}

/// JSON schemas a file defines: `NEWSCHEMA('@Item', 'name:String')` (or without `@`), and
/// `F.newjsonschema('Item', …)`. `NEWSCHEMA('Item', function(schema) {…})` defines actions only.
pub(crate) fn json_schemas<'a>(tokens: &[Token<'a>]) -> Vec<(&'a str, usize)> {
    let mut out = Vec::new();
    for call in global_calls(tokens, "NEWSCHEMA") {
        let Some((name, line)) = call.args.first().and_then(|a| string_in(tokens, a)) else {
            continue;
        };
        if call.args.get(1).is_some_and(|a| {
            tokens
                .get(a.start)
                .is_some_and(|t| matches!(t.kind, Kind::Str | Kind::Template))
        }) {
            out.push((name.trim_start_matches('@'), line));
        }
    }
    for call in method_calls(tokens, "newjsonschema") {
        if let Some((name, line)) = call.args.first().and_then(|a| string_in(tokens, a)) {
            out.push((name, line));
        }
    }
    out
}

/// Middleware names a file defines, and whether it defines one under a computed name.
pub(crate) fn middleware<'a>(tokens: &[Token<'a>]) -> (Vec<&'a str>, bool) {
    let mut names = Vec::new();
    let mut dynamic = false;
    let calls = global_calls(tokens, "MIDDLEWARE")
        .into_iter()
        .chain(global_calls(tokens, "NEWMIDDLEWARE"))
        .chain(method_calls(tokens, "middleware").into_iter().filter(|c| {
            c.at >= 2 && (tokens[c.at - 2].is_ident("F") || tokens[c.at - 2].is_ident("Total"))
        }));
    for call in calls {
        // `MIDDLEWARE('name')` without a function removes it.
        if call.args.len() < 2 {
            continue;
        }
        match call.args.first().and_then(|a| string_in(tokens, a)) {
            Some((name, _)) => names.push(name),
            None => dynamic = true,
        }
    }
    (names, dynamic)
}

/// `schema-load-order`.
pub(crate) fn schema_load_order(src: &Source, ctx: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    let own = json_schemas(tokens);
    let mut hits = Hits::new();
    let calls = global_calls(tokens, "NEWACTION")
        .into_iter()
        .chain(method_calls(tokens, "action"));
    for call in calls {
        let Some(opts) = call.args.get(1) else {
            continue;
        };
        for key in ["input", "output", "params", "query"] {
            let Some((value, line)) =
                property(tokens, opts, key).and_then(|r| string_in(tokens, &r))
            else {
                continue;
            };
            let Some(name) = value.strip_prefix('@') else {
                continue;
            };
            let here = (src.path.as_str(), line);
            if own
                .iter()
                .any(|(n, l)| *n == name && runs_before((src.path.as_str(), *l), here))
            {
                continue;
            }
            let defs = ctx.json_schemas.get(name).map_or(&[][..], Vec::as_slice);
            if defs.is_empty() && !own.iter().any(|(n, _)| *n == name) {
                continue;
            }
            // This file's own definitions are `own` (the copy on disk may be older).
            if defs
                .iter()
                .any(|d| *d != src.path && runs_before((d.as_str(), 0), here))
            {
                continue;
            }
            let later = own
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, l)| format!("line {l} of this file"))
                .or_else(|| defs.iter().find(|d| *d != &src.path).cloned())
                .unwrap_or_else(|| "a file that loads later".to_string());
            hits.push((
                line,
                format!(
                    "{key}: '@{name}' needs NEWSCHEMA('@{name}') registered before this file loads, but it is in {later}, which loads later: the app crashes at boot with JSON Schema \"{name}\" not found; define it above this action in the same file or in modules/ (loads before actions/, schemas/ and definitions/)"
                ),
            ));
        }
    }
    hits
}

/// `view-layout`.
pub(crate) fn view_layout(src: &Source, ctx: &ProjectContext) -> Hits {
    let Some(views) = &ctx.views else {
        return Hits::new();
    };
    if views.has_layout || src.file.plugin {
        return Hits::new();
    }
    let tokens = src.tokens();
    // `$.layout('other')` anywhere in the file: the author chose a layout; leave it alone.
    if !method_calls(tokens, "layout").is_empty() {
        return Hits::new();
    }
    let mut hits = Hits::new();
    for call in method_calls(tokens, "view") {
        let Some((name, line)) = call.args.first().and_then(|a| string_in(tokens, a)) else {
            continue;
        };
        let name = name.trim_end_matches(".html");
        if name.is_empty() || name.starts_with(['~', '@', '/', '.', '=']) {
            continue;
        }
        if views.names.contains(name) && !views.set_layout.contains(name) {
            hits.push((
                line,
                format!(
                    "$.view('{name}') renders inside views/layout.html, which does not exist: the request never answers; add views/layout.html (with @{{body}}) or start views/{name}.html with @{{layout('')}}"
                ),
            ));
        }
    }
    hits
}

/// `plugin-index`.
pub(crate) fn plugin_index(src: &Source, ctx: &ProjectContext) -> Hits {
    let Some(id) = src
        .path
        .strip_prefix("plugins/")
        .and_then(|r| r.split('/').next())
    else {
        return Hits::new();
    };
    if !ctx.plugins_without_index.contains(id) {
        return Hits::new();
    }
    vec![(
        1,
        format!(
            "plugins/{id}/ has no index.js: total5 requires plugins/{id}/index.js for every folder in plugins/ and the app crashes at boot (Cannot find module); add plugins/{id}/index.js (it may hold just exports.name = '{id}';)"
        ),
    )]
}

/// `api-route-duplicate`.
pub(crate) fn api_route_duplicate(src: &Source, _: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    let mut hits = Hits::new();
    for schema in global_calls(tokens, "NEWSCHEMA") {
        let Some((name, _)) = schema.args.first().and_then(|a| string_in(tokens, a)) else {
            continue;
        };
        let Some(body) = schema.args.get(1) else {
            continue;
        };
        let mut first: Option<&str> = None;
        for call in method_calls(tokens, "action") {
            if call.at < body.start || call.at >= body.end {
                continue;
            }
            let Some((action, _)) = call.args.first().and_then(|a| string_in(tokens, a)) else {
                continue;
            };
            let Some((route, line)) = call
                .args
                .get(1)
                .and_then(|o| property(tokens, o, "route"))
                .and_then(|r| string_in(tokens, &r))
            else {
                continue;
            };
            if !route_str(route.trim()).method.eq_ignore_ascii_case("API") || route.contains("-->")
            {
                continue;
            }
            match first {
                None => first = Some(action),
                Some(first) => hits.push((
                    line,
                    format!(
                        "schema.action('{action}') and schema.action('{first}') of '{name}' both use route 'API ?': both become the API endpoint '{name}' and the last one answers every call; declare each as its own NEWACTION('{name}|{action}') with route: 'API ?'"
                    ),
                )),
            }
        }
    }
    hits
}

/// `route-middleware`.
pub(crate) fn route_middleware(src: &Source, ctx: &ProjectContext) -> Hits {
    let Some(known) = &ctx.middleware else {
        return Hits::new();
    };
    let (own, dynamic) = middleware(src.tokens());
    if dynamic {
        return Hits::new();
    }
    let mut hits = Hits::new();
    for (route, line) in super::routes::route_strings(src.text) {
        for word in route.split_whitespace().skip(1) {
            let Some(name) = word.strip_prefix('#') else {
                continue;
            };
            let name: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() || known.contains(&name) || own.contains(&name.as_str()) {
                continue;
            }
            hits.push((
                line,
                format!(
                    "route flag #{name} names a middleware the project never defines: total5 skips it silently and the route answers without it; fix the name, or define MIDDLEWARE('{name}') in definitions/ with a function($, next) that calls next() when the request may go on"
                ),
            ));
        }
    }
    hits
}

/// `install-argument`.
pub(crate) fn install_argument(src: &Source, _: &ProjectContext) -> Hits {
    // Only the files F.load() requires and installs; a FlowStream calls its own with an instance.
    if src.path == "index.js" || load_key(&src.path).is_none() {
        return Hits::new();
    }
    let tokens = src.tokens();
    let mut hits = Hits::new();
    for i in 2..tokens.len() {
        if !(tokens[i].is_ident("install")
            && tokens[i - 1].is_punct(".")
            && tokens[i - 2].is_ident("exports")
            && tokens.get(i + 1).is_some_and(|t| t.is_punct("=")))
        {
            continue;
        }
        let Some(f) = function_at(tokens, &(i + 2..tokens.len())) else {
            continue;
        };
        let Some(param) = f.params.first().copied() else {
            continue;
        };
        let guarded = f.body.clone().any(|j| {
            tokens[j].is_ident(param)
                && (prev_is(tokens, j, |p| p.is_punct("(") || p.is_ident("typeof"))
                    || tokens
                        .get(j + 1)
                        .is_some_and(|n| n.is_punct("&") || n.is_punct("?") || n.is_punct("|")))
        });
        if guarded {
            continue;
        }
        let used = f.body.clone().find(|&j| {
            tokens[j].is_ident(param)
                && !prev_is(tokens, j, |p| p.is_punct("."))
                && tokens.get(j + 1).is_some_and(|n| n.is_punct("."))
        });
        if let Some(j) = used {
            hits.push((
                tokens[j].line,
                format!(
                    "exports.install is called with no argument in Total.js 5, so {param}.{m}() throws at load and the app does not boot: remove the parameter {param} and declare routes with ROUTE() instead of {param}.{m}()",
                    m = tokens.get(j + 2).map_or("", |t| t.text)
                ),
            ));
        }
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_order_follows_the_framework() {
        let before = |a: &str, b: &str| runs_before((a, 1), (b, 1));
        assert!(before("modules/schemas.js", "actions/items.js"));
        assert!(before("extensions/a.js", "modules/a.js"));
        assert!(before("actions/a.js", "actions/b.js"));
        assert!(before("actions/z.js", "actions/sub/a.js"));
        assert!(!before("actions/schemas.js", "actions/items.js"));
        assert!(!before("schemas/item.js", "actions/items.js"));
        assert!(!before("definitions/item.js", "actions/items.js"));
        assert!(before("schemas/item.js", "plugins/a/actions/x.js"));
        assert!(before("plugins/a/index.js", "plugins/a/actions/x.js"));
        assert!(!before("plugins/b/actions/x.js", "plugins/a/actions/x.js"));
        // Plugins load no modules/, and loose scripts are never loaded.
        assert!(!before("plugins/a/modules/x.js", "plugins/a/actions/x.js"));
        assert!(!before("tools/x.js", "actions/x.js"));
        assert!(before("index.js", "actions/x.js"));
    }
}
