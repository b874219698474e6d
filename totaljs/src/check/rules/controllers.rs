//! Controller rules: routes are declared in `exports.install` (#3), and handlers use their `$`
//! argument because v5 calls them as `route.action(ctrl)`, with `this` not the controller (#4).

use std::ops::Range;

use super::{Hits, Source};
use crate::check::ProjectContext;
use crate::check::syntax::{
    code_between, depths, function_at, global_calls, matching, prev_is, route_str, string_in,
    this_binding_functions,
};
use crate::js::Kind;

/// #3: `exports.install = function() { ROUTE(...) }`, no `ROUTE()` at the top level.
pub(crate) fn install(src: &Source, _: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    let has_install = (2..tokens.len()).any(|i| {
        tokens[i].is_ident("install")
            && tokens[i - 1].is_punct(".")
            && tokens[i - 2].is_ident("exports")
            && tokens.get(i + 1).is_some_and(|t| t.is_punct("="))
    });
    let routes = global_calls(tokens, "ROUTE");
    // The project's own calls, as written, when they are short enough to quote on one line.
    let quoted: Vec<&str> = routes
        .iter()
        .filter_map(|c| code_between(src.text, tokens, c.at, matching(tokens, c.open)))
        .filter(|code| code.len() <= 120 && !code.contains('\n'))
        .collect();
    if !has_install {
        let line = routes.first().map(|c| tokens[c.at].line).unwrap_or(1);
        let message = if !routes.is_empty() && quoted.len() == routes.len() && routes.len() <= 3 {
            format!(
                "a controller declares its routes inside exports.install, which Total.js 5 calls at load: write exports.install = function() {{ {}; }} with the handler functions below it",
                quoted.join("; ")
            )
        } else {
            "a controller declares its routes with ROUTE() inside exports.install = function() {}, which Total.js 5 calls at load, with the handler functions below it".to_string()
        };
        return vec![(line, message)];
    }
    let depth = depths(tokens);
    routes
        .iter()
        .filter(|c| depth[c.at] == 0 && !prev_is(tokens, c.at, |p| p.is_punct("=>")))
        .map(|c| {
            let call = code_between(src.text, tokens, c.at, matching(tokens, c.open))
                .filter(|code| code.len() <= 120 && !code.contains('\n'))
                .unwrap_or("ROUTE()");
            (
                tokens[c.at].line,
                format!(
                    "{call} at the top level of a controller: move this call inside exports.install"
                ),
            )
        })
        .collect()
}

/// Controller members a v4 handler reaches through `this`/`self`.
const CONTROLLER_MEMBERS: &[&str] = &[
    "json",
    "view",
    "success",
    "invalid",
    "plain",
    "redirect",
    "callback",
    "done",
    "html",
    "file",
    "binary",
    "empty",
    "content",
    "layout",
    "text",
    "xml",
    "stream",
    "filefs",
    "image",
    "proxy",
    "throw400",
    "throw401",
    "throw403",
    "throw404",
    "throw500",
    "body",
    "query",
    "params",
    "user",
    "files",
    "headers",
    "req",
    "res",
    // v4 schema operations run through the controller.
    "$save",
    "$query",
    "$read",
    "$get",
    "$insert",
    "$update",
    "$patch",
    "$remove",
    "$workflow",
    "$exec",
    "$async",
];

/// #4: `this`/`var self = this` inside non-SOCKET route handlers.
pub(crate) fn handler_this(src: &Source, _: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    // SOCKET handlers are called as action.call(ws, ws): `this` is right there.
    let mut socket_names = Vec::new();
    let mut socket_bodies: Vec<Range<usize>> = Vec::new();
    for call in super::routes::route_calls(tokens) {
        let Some((route, _)) = call.args.first().and_then(|a| string_in(tokens, a)) else {
            continue;
        };
        let method = route_str(route).method.to_ascii_uppercase();
        if method != "SOCKET" && method != "WEBSOCKET" {
            continue;
        }
        let Some(handler) = call.args.get(1) else {
            continue;
        };
        if handler.len() == 1 && tokens[handler.start].kind == Kind::Ident {
            socket_names.push(tokens[handler.start].text);
        } else if let Some(f) = function_at(tokens, handler) {
            socket_bodies.push(f.body);
        }
    }
    let funcs = this_binding_functions(tokens);
    let mut hits = Hits::new();
    for i in 0..tokens.len() {
        if !tokens[i].is_ident("this") || prev_is(tokens, i, |p| p.is_punct(".")) {
            continue;
        }
        let member = tokens
            .get(i + 2)
            .filter(|_| tokens.get(i + 1).is_some_and(|t| t.is_punct(".")))
            .map(|t| t.text)
            .filter(|m| CONTROLLER_MEMBERS.contains(m));
        let alias = i >= 3
            && tokens[i - 1].is_punct("=")
            && tokens[i - 2].kind == Kind::Ident
            && matches!(tokens[i - 3].text, "var" | "let" | "const")
            && !tokens
                .get(i + 1)
                .is_some_and(|t| t.is_punct(".") || t.is_punct("["));
        if member.is_none() && !alias {
            continue;
        }
        let enclosing = funcs
            .iter()
            .filter(|f| f.body.start < i && i < f.body.end)
            .min_by_key(|f| f.body.len());
        if let Some(f) = enclosing {
            let is_socket = f.name.is_some_and(|n| socket_names.contains(&n))
                || socket_bodies.iter().any(|b| b.start == f.body.start);
            // A capitalised function is a constructor, where `this` is the new object.
            let constructor = f
                .name
                .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_uppercase()));
            // `X.prototype.name = function` is a method of a class, not a handler.
            let s = f.start;
            let prototype_method = s >= 4
                && tokens[s - 1].is_punct("=")
                && tokens[s - 3].is_punct(".")
                && tokens[s - 4].is_ident("prototype");
            if is_socket || constructor || prototype_method {
                continue;
            }
        }
        let handler = enclosing
            .and_then(|f| f.name)
            .map_or("the handler".to_string(), |n| format!("{n}()"));
        let message = match member {
            Some(m) => format!(
                "this.{m} in a route handler: Total.js 5 passes the controller as the handler's argument and `this` is not it; give {handler} a parameter $ and call $.{m}()"
            ),
            None => format!(
                "`var {alias} = this` in a route handler: Total.js 5 passes the controller as the argument and `this` is not it, so {alias}.json() throws; give {handler} a parameter $ and use $ instead of {alias}",
                alias = tokens[i - 2].text,
            ),
        };
        hits.push((tokens[i].line, message));
    }
    hits
}
