//! Route rules: the method token (#5), v4 schema syntax (#6), the v4 flags array (#7) and the
//! `AUTH()` delegate that `+`/`-` routes rely on (#17). Route strings are read from `ROUTE()`'s
//! first argument and from the `route:` option of `NEWACTION` and `schema.action`.

use super::{Hits, Source};
use crate::check::ProjectContext;
use crate::check::syntax::{
    Call, defines_auth, global_calls, method_calls, prev_is, property, route_str, string_in,
};
use crate::js::Token;

/// A route string found in the file.
struct Site<'a> {
    value: &'a str,
    line: usize,
}

/// `ROUTE(...)` and its v5 alias `F.route(...)` / `Total.route(...)`.
pub(crate) fn route_calls(tokens: &[Token]) -> Vec<Call> {
    let mut calls = global_calls(tokens, "ROUTE");
    calls.extend(method_calls(tokens, "route").into_iter().filter(|c| {
        c.at >= 2
            && (tokens[c.at - 2].is_ident("F") || tokens[c.at - 2].is_ident("Total"))
            && !prev_is(tokens, c.at - 2, |p| p.is_punct("."))
    }));
    calls.sort_by_key(|c| c.at);
    calls
}

fn sites<'a>(tokens: &[Token<'a>]) -> Vec<Site<'a>> {
    let mut out = Vec::new();
    for call in route_calls(tokens) {
        if let Some((value, line)) = call.args.first().and_then(|a| string_in(tokens, a)) {
            out.push(Site { value, line });
        }
    }
    let action_calls = global_calls(tokens, "NEWACTION")
        .into_iter()
        .chain(method_calls(tokens, "action"));
    for call in action_calls {
        let route = call
            .args
            .get(1)
            .and_then(|opts| property(tokens, opts, "route"))
            .and_then(|r| string_in(tokens, &r));
        if let Some((value, line)) = route {
            out.push(Site { value, line });
        }
    }
    out.sort_by_key(|s| s.line);
    out
}

/// Every route string of a file with its 1-based line: `ROUTE()`, `F.route()`, and the `route:`
/// of `NEWACTION` and `schema.action`.
pub(crate) fn route_strings(content: &str) -> Vec<(String, usize)> {
    let lexed = crate::js::lex(content);
    sites(&lexed.tokens)
        .into_iter()
        .map(|s| (s.value.to_string(), s.line))
        .collect()
}

/// The routes a file declares, one short line for a model that reads the file: "Routes this file
/// declares: GET / (function index), GET /api/products/ (action Products|list)." `None` when it
/// declares none. The 1.5B, asked which routes an app defines, read the controller and listed
/// `GET /` and `GET /about/` but called `ROUTE('GET /api/products/ --> Products|list')` "a route
/// for the API products/": a route with an action and no handler did not read as one to it.
pub fn describe_routes(content: &str) -> Option<String> {
    Some(format!(
        "Routes this file declares: {}.",
        route_summary(content)?
    ))
}

/// The routes a file declares, in one line: "GET / (function index), GET /api/products/ (action
/// Products|list)". `None` when it declares none.
pub fn route_summary(content: &str) -> Option<String> {
    let lexed = crate::js::lex(content);
    let tokens = &lexed.tokens;
    let mut routes: Vec<(usize, String)> = Vec::new();
    for call in route_calls(tokens) {
        let Some((value, line)) = call.args.first().and_then(|a| string_in(tokens, a)) else {
            continue;
        };
        let (route, actions) = match value.split_once("-->") {
            Some((route, actions)) => (route, Some(actions)),
            None => (value, None),
        };
        let what = match (actions, call.args.get(1).map(|r| &tokens[r.clone()])) {
            (Some(actions), _) => {
                let names: Vec<&str> = actions
                    .split(|c: char| c.is_whitespace() || c == ',')
                    .filter(|w| !w.is_empty() && !w.starts_with('('))
                    .collect();
                format!("action {}", names.join(", "))
            }
            (None, Some([t])) if t.kind == crate::js::Kind::Ident => format!("function {}", t.text),
            (None, Some(_)) => "inline function".to_string(),
            (None, None) => "no handler".to_string(),
        };
        routes.push((line, format!("{} ({what})", route_line(route))));
    }
    for call in global_calls(tokens, "NEWACTION") {
        let id = call.args.first().and_then(|a| string_in(tokens, a));
        let route = call
            .args
            .get(1)
            .and_then(|opts| property(tokens, opts, "route"))
            .and_then(|r| string_in(tokens, &r));
        if let (Some((id, _)), Some((route, line))) = (id, route) {
            routes.push((line, format!("{} (action {id})", route_line(route))));
        }
    }
    if routes.is_empty() {
        return None;
    }
    routes.sort_by_key(|(line, _)| *line);
    let list: Vec<String> = routes.into_iter().map(|(_, r)| r).collect();
    Some(list.join(", "))
}

/// A route string's method and URL with the spacing made plain (`GET  /a/ ` → `GET /a/`); flags
/// after them are kept (`GET /a/ <1MB`).
fn route_line(route: &str) -> String {
    route.split_whitespace().collect::<Vec<_>>().join(" ")
}

const METHODS: &[&str] = &[
    "GET",
    "POST",
    "PUT",
    "PATCH",
    "DELETE",
    "API",
    "SOCKET",
    "WEBSOCKET",
    "FILE",
    "HEAD",
    "OPTIONS",
];

/// #5: the first word of a route string is a known method. Case is [`method_case`]'s business:
/// `Route()` upper-cases it, so `get` works.
pub(crate) fn method(src: &Source, _: &ProjectContext) -> Hits {
    let mut hits = Hits::new();
    for site in sites(src.tokens()) {
        let s = site.value.trim();
        if s.starts_with('#') {
            continue;
        }
        let r = route_str(s);
        if METHODS.contains(&r.method.to_ascii_uppercase().as_str()) {
            continue;
        }
        let message = if r.method.starts_with('/') || r.method.is_empty() {
            format!(
                "route '{s}' has no method: start it with one, e.g. 'GET {}'",
                r.method
            )
        } else {
            format!(
                "'{}' is not a route method: use GET, POST, PUT, PATCH, DELETE, API, SOCKET or FILE (prefix + for signed-in users, - for anonymous), or '#404' for an error page",
                r.method
            )
        };
        hits.push((site.line, message));
    }
    hits
}

/// #5b: a known method written in lowercase. It works (`Route()` upper-cases it); the framework's
/// own code writes it in uppercase.
pub(crate) fn method_case(src: &Source, _: &ProjectContext) -> Hits {
    let mut hits = Hits::new();
    for site in sites(src.tokens()) {
        let r = route_str(site.value.trim());
        let upper = r.method.to_ascii_uppercase();
        if r.method != upper && METHODS.contains(&upper.as_str()) {
            hits.push((
                site.line,
                format!(
                    "route method '{}' works, but Total.js code writes it in uppercase: '{upper}'",
                    r.method
                ),
            ));
        }
    }
    hits
}

/// #6: `*Schema --> action` (Total.js 4); v5 answers such routes with 400 "action not found".
pub(crate) fn v4_schema(src: &Source, _: &ProjectContext) -> Hits {
    let mut hits = Hits::new();
    for site in sites(src.tokens()) {
        let before = site.value.split("-->").next().unwrap_or("");
        let r = route_str(before);
        let upper = r.method.to_ascii_uppercase();
        if upper == "FILE" {
            continue;
        }
        // Skip the URL; an API route's first name is its endpoint (`+name`, `-name`, `*name`).
        let mut words = r
            .rest
            .iter()
            .skip(1)
            .filter(|w| !w.starts_with('@') && !w.starts_with('#') && !w.starts_with('<'));
        if upper == "API" {
            words.next();
        }
        let schema = words.find(|w| {
            let mut c = w.chars();
            c.next() == Some('*') && c.next().is_some_and(|c| c.is_ascii_uppercase())
        });
        if let Some(schema) = schema {
            let name = &schema[1..];
            // The route's own action after the arrow, when it names one (`--> list`).
            let action = site
                .value
                .split("-->")
                .nth(1)
                .and_then(|a| a.split_whitespace().next())
                .filter(|a| a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            let fix = match action {
                Some(a) => format!("write '--> {name}|{a}'"),
                None => format!("name the action after the arrow as {name}| and the action's name"),
            };
            hits.push((
                site.line,
                format!(
                    "'{schema} --> ...' is Total.js 4 route syntax and answers 400 in v5: drop '{schema}' and {fix}"
                ),
            ));
        }
    }
    hits
}

/// #7: `ROUTE(url, fn, ['upload'], 1024)`: v5 takes (url, handler, sizeInBytes).
pub(crate) fn flags_array(src: &Source, _: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    let mut hits = Hits::new();
    for call in route_calls(tokens) {
        let array = call
            .args
            .iter()
            .skip(1)
            .any(|a| tokens.get(a.start).is_some_and(|t| t.is_punct("[")));
        if array || call.args.len() > 3 {
            hits.push((
                tokens[call.at].line,
                "ROUTE() takes (url, handler, sizeInBytes): an array of flags silently disables the payload limit in v5; put the flags in the url string as @ words and the size limit as <10MB".to_string(),
            ));
        }
    }
    hits
}

/// A route whose handler is an action's id (`ROUTE('GET /x/', Products|count)` or
/// `'Products|count'`): the id is no function, so the route has no handler (an unquoted one is
/// a ReferenceError when the controller installs). The action goes in the route string. The
/// 1.5B wrote `ROUTE('GET /api/products/count/', Products|count);` for "a route for it".
pub(crate) fn action_as_handler(src: &Source, _: &ProjectContext) -> Hits {
    action_handlers(src.tokens())
        .into_iter()
        .map(|h| {
            (
                h.line,
                format!(
                    "{} is an action, not a handler function: name it in the route string instead, {}",
                    h.id,
                    h.fixed_call()
                ),
            )
        })
        .collect()
}

/// A `ROUTE()` whose handler is an action's id, for [`action_as_handler`] and
/// [`fix_action_handlers`].
struct ActionHandler {
    id: String,
    /// The route string without its `-->` part.
    url: String,
    line: usize,
    /// The tokens from the route string to the end of the handler.
    span: std::ops::Range<usize>,
}

impl ActionHandler {
    fn fixed_call(&self) -> String {
        format!("ROUTE('{} --> {}');", self.url, self.id)
    }
}

fn action_handlers(tokens: &[Token]) -> Vec<ActionHandler> {
    let mut out = Vec::new();
    for call in route_calls(tokens) {
        let (Some(url), Some(handler)) = (call.args.first(), call.args.get(1)) else {
            continue;
        };
        let Some((value, line)) = string_in(tokens, url) else {
            continue;
        };
        let id = match &tokens[handler.clone()] {
            [ns, bar, name]
                if ns.kind == crate::js::Kind::Ident
                    && bar.is_punct("|")
                    && name.kind == crate::js::Kind::Ident =>
            {
                format!("{}|{}", ns.text, name.text)
            }
            [one] if one.kind == crate::js::Kind::Str => {
                let Some((value, _)) = string_in(tokens, handler) else {
                    continue;
                };
                if !value.contains('|') || value.contains(char::is_whitespace) {
                    continue;
                }
                value.to_string()
            }
            _ => continue,
        };
        out.push(ActionHandler {
            id,
            url: value
                .split("-->")
                .next()
                .unwrap_or(value)
                .trim()
                .to_string(),
            line,
            span: url.start..handler.end,
        });
    }
    out
}

/// `content` with each route whose handler is an action's id (`ROUTE('GET /x/', Products|count)`)
/// written the way Total.js 5 runs an action (`ROUTE('GET /x/ --> Products|count')`), and the
/// routes so changed as they are now. `None` when it has none to change.
pub fn fix_action_handlers(content: &str) -> Option<(String, Vec<String>)> {
    let lexed = crate::js::lex(content);
    let tokens = &lexed.tokens;
    let offset = |t: &Token| t.text.as_ptr() as usize - content.as_ptr() as usize;
    let mut fixed = content.to_string();
    let mut calls = Vec::new();
    for found in action_handlers(tokens).iter().rev() {
        let first = tokens.get(found.span.start)?;
        let last = tokens.get(found.span.end.checked_sub(1)?)?;
        if found.url.contains(['\'', '\\']) {
            continue;
        }
        let (start, end) = (offset(first), offset(last) + last.text.len());
        fixed.replace_range(start..end, &format!("'{} --> {}'", found.url, found.id));
        calls.push(found.fixed_call());
    }
    calls.reverse();
    (!calls.is_empty()).then_some((fixed, calls))
}

/// #17: a `+`/`-` route in a project without `AUTH()`. Needs [`ProjectContext::has_auth`].
pub(crate) fn auth_delegate(src: &Source, ctx: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    if ctx.has_auth != Some(false) || defines_auth(tokens) {
        return Hits::new();
    }
    let site = sites(tokens)
        .into_iter()
        .find(|s| route_str(s.value.trim()).auth.is_some());
    match site {
        Some(site) => vec![(
            site.line,
            format!(
                "route '{}' depends on a session but the project defines no AUTH(): '+' routes then run for everyone (and '+API' always answers 401); add definitions/auth.js that calls AUTH() with a function($) ending in $.success(user) for a signed-in request and $.invalid() otherwise",
                site.value.trim()
            ),
        )],
        None => Hits::new(),
    }
}
