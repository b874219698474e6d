//! Rules about what a file requires or imports: other web frameworks (#1), app files (#12), Node
//! built-ins the framework wraps (#13) and job/socket packages (#19).

use super::{Hits, Source};
use crate::check::file::Kind;
use crate::check::syntax::{global_calls, module_refs, prev_is};
use crate::js::Token;

/// What replaces a web-framework package, or None when the package is not one.
fn web_framework(name: &str) -> Option<&'static str> {
    let base = name.strip_prefix("node:").unwrap_or(name);
    Some(match base {
        "cors" => "call CORS('*') in definitions/ or set `$cors : *` in config",
        "body-parser" => "Total.js parses request bodies itself: read $.body",
        "express" | "koa" | "fastify" | "hapi" | "restify" => {
            "declare routes with ROUTE('GET /url/', handler) in controllers/"
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
            hits.push((
                line,
                format!(
                    "app.{m}() is Express; declare routes in controllers/ with ROUTE('GET /url/', handler) inside exports.install, and let Total.run() listen"
                ),
            ));
        } else if let Some(m) = member_call(
            tokens,
            i,
            "res",
            &["json", "send", "status", "sendFile", "render", "end"],
        ) {
            hits.push((
                line,
                format!(
                    "res.{m}() is Express; answer with the handler's $: $.json(obj), $.success(value), $.view(name), $.plain(text)"
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
                    "require('{name}') of an app file: Total.js loads modules/, definitions/, actions/ and schemas/ by itself; use MODS.name, FUNC.name or ACTION('Ns|name') instead"
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
                "setInterval() for a job: use CRON('*/5 * * * *', fn) or ON('service', fn) (runs every minute)"
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
                    "schedule jobs with CRON('*/5 * * * *', fn) or ON('service', fn)"
                }
                "socket.io" | "ws" | "sockjs" => {
                    "serve websockets with ROUTE('SOCKET /ws/', handler) and $.on('message', fn)"
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
