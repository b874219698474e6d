//! Rules about what a file requires or imports: other web frameworks (#1), app files (#12), Node
//! built-ins the framework wraps (#13) and job/socket packages (#19).

use super::{Hits, Source};
use crate::check::file::Kind;
use crate::check::syntax::{global_calls, items, module_refs, prev_is, string_in};
use crate::js::Token;

/// What replaces a web-framework package, or None when the package is not one.
fn web_framework(name: &str) -> Option<&'static str> {
    let base = name.strip_prefix("node:").unwrap_or(name);
    Some(match base {
        "cors" => "call CORS('*') in definitions/ or set `$cors : *` in config",
        "body-parser" => "Total.js parses request bodies itself: read $.body",
        "express" | "koa" | "fastify" | "hapi" | "restify" => {
            "declare routes with ROUTE() inside exports.install in controllers/, and let Total.run() listen"
        }
        n if n.starts_with("express-")
            || n.starts_with("koa-")
            || n.starts_with("@koa/")
            || n.starts_with("@fastify/")
            || n.starts_with("@hapi/")
            || n.starts_with("@nestjs/") =>
        {
            "use the Total.js 5 equivalent (ROUTE, MIDDLEWARE, AUTH, $.body)"
        }
        _ => return None,
    })
}

fn member_call<'a>(tokens: &[Token<'a>], i: usize, obj: &str, methods: &[&str]) -> Option<&'a str> {
    let t = tokens.get(i)?;
    if !t.is_ident(obj) || prev_is(tokens, i, |p| p.is_punct(".")) {
        return None;
    }
    let m = tokens.get(i + 2)?;
    (tokens.get(i + 1)?.is_punct(".")
        && methods.contains(&m.text)
        && tokens.get(i + 3)?.is_punct("("))
    .then_some(m.text)
}

/// What an Express `app.METHOD(url, handler)` call is in Total.js 5: the project's own route
/// rewritten when its url is a string and its handler a name, words otherwise (no example route a
/// model could copy into the app as its own).
fn express_route(tokens: &[Token], open: usize, m: &str) -> String {
    let args = items(tokens, open);
    let method = m.to_ascii_uppercase();
    let url = args
        .first()
        .and_then(|a| string_in(tokens, a))
        .map(|(v, _)| v);
    let handler = args
        .get(1)
        .filter(|a| a.len() == 1)
        .and_then(|a| tokens.get(a.start))
        .filter(|t| t.kind == crate::js::Kind::Ident);
    let route = matches!(m, "get" | "post" | "put" | "patch" | "delete");
    match (route, url, handler) {
        (true, Some(url), Some(h)) if !url.contains(['\'', '\\']) => format!(
            "app.{m}() is Express; in Total.js 5 this is ROUTE('{method} {url}', {}) inside exports.install in a controller, and Total.run() listens",
            h.text
        ),
        _ => format!(
            "app.{m}() is Express; declare routes with ROUTE() inside exports.install in controllers/, and let Total.run() listen"
        ),
    }
}

/// #1: Express, Koa, Fastify, Nest and their habits (`app.get(`, `res.json(`).
pub(crate) fn no_express(src: &Source, _: &crate::check::ProjectContext) -> Hits {
    let tokens = src.tokens();
    let mut hits = Hits::new();
    for (name, line) in module_refs(tokens) {
        if let Some(fix) = web_framework(name) {
            hits.push((
                line,
                format!(
                    "'{name}' is another web framework; Total.js 5 is the framework here: {fix}"
                ),
            ));
        }
    }
    for i in 0..tokens.len() {
        let line = tokens[i].line;
        if let Some(m) = member_call(
            tokens,
            i,
            "app",
            &[
                "get", "post", "put", "patch", "delete", "use", "listen", "route",
            ],
        ) {
            hits.push((line, express_route(tokens, i + 3, m)));
        } else if let Some(m) = member_call(
            tokens,
            i,
            "res",
            &["json", "send", "status", "sendFile", "render", "end"],
        ) {
            let answer = match m {
                "json" => "$.json()",
                "send" | "end" => "$.plain() or $.html()",
                "sendFile" => "$.file()",
                "render" => "$.view()",
                _ => "$.json(), $.success(), $.invalid() or $.view()",
            };
            hits.push((
                line,
                format!(
                    "res.{m}() is Express; a Total.js handler answers with its $ argument: {answer}"
                ),
            ));
        }
    }
    hits
}

/// #12: `require('./...')` of the app's own files.
pub(crate) fn no_app_require(src: &Source, _: &crate::check::ProjectContext) -> Hits {
    module_refs(src.tokens())
        .into_iter()
        .filter(|(name, _)| name.starts_with("./") || name.starts_with("../"))
        .map(|(name, line)| {
            (
                line,
                format!(
                    "require('{name}') of an app file: Total.js loads modules/, definitions/, actions/ and schemas/ by itself; reach its code through MODS, FUNC or ACTION() instead"
                ),
            )
        })
        .collect()
}

/// #13: Node built-ins the framework already wraps, and `setInterval` jobs.
pub(crate) fn node_builtin(src: &Source, _: &crate::check::ProjectContext) -> Hits {
    let tokens = src.tokens();
    let mut hits = Hits::new();
    for (name, line) in module_refs(tokens) {
        let fix = match name.strip_prefix("node:").unwrap_or(name) {
            "fs" => "prefer Total.Fs (the framework's fs) with PATH.root()/PATH.databases() paths",
            "path" => "prefer PATH.root(), PATH.public(), PATH.databases(), PATH.join()",
            "http" | "https" => {
                "prefer RESTBuilder.GET(url).callback(fn) or REQUEST() for outgoing HTTP"
            }
            _ => continue,
        };
        hits.push((line, format!("require('{name}') in app code: {fix}")));
    }
    if matches!(src.file.kind, Kind::Definition | Kind::Module) {
        for call in global_calls(tokens, "setInterval") {
            hits.push((
                tokens[call.at].line,
                "setInterval() for a job: use CRON() with a cron expression, or an ON('service') listener (runs every minute)"
                    .to_string(),
            ));
        }
    }
    hits
}

/// #19: cron and websocket packages the framework replaces.
pub(crate) fn realtime_package(src: &Source, _: &crate::check::ProjectContext) -> Hits {
    module_refs(src.tokens())
        .into_iter()
        .filter_map(|(name, line)| {
            let fix = match name {
                "node-cron" | "cron" | "node-schedule" | "agenda" => {
                    "schedule jobs with CRON() or an ON('service') listener"
                }
                "socket.io" | "ws" | "sockjs" => {
                    "serve websockets with a ROUTE() of the SOCKET method and its $.on('message') listener"
                }
                _ => return None,
            };
            Some((
                line,
                format!("'{name}' is not needed with Total.js 5: {fix}"),
            ))
        })
        .collect()
}
