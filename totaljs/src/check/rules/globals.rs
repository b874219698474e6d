//! Global rules: globals that exist only in Total.js 4 (#11) and `process.env` in feature code (#20).
//!
//! The v4 list is the difference between the global assignments of framework4 and total5 0.0.14
//! (`GETSCHEMA`, `NEWTASK`/`TASK`, `CONVERT`, `LOGGER` included, checked absent from total5).
//! `F.route()`, `F.http()` and `Total.http()` exist in v5 and are not on it.

use std::collections::HashSet;

use super::{Hits, Source};
use crate::check::ProjectContext;
use crate::check::syntax::{defined_globals, prev_is};
use crate::js::{Kind, Token};

/// v4-only globals (TOTALJS.md §1.7, §1.11) and what to write in v5 instead.
const V4_GLOBALS: &[(&str, &str)] = &[
    ("TABLE", "DATA or NOSQL()"),
    ("TEXTDB", "DATA or NOSQL()"),
    ("INMEMORY", "MAIN (runtime state) or CACHE"),
    ("COUNTER", "DATA/NOSQL documents"),
    ("MODULE", "MODS"),
    ("MODEL", "MODS, or NEWSCHEMA() and NEWACTION()"),
    ("MAKE", "a plain object literal"),
    ("FAKE", "a plain object literal"),
    ("WORKFLOW", "NEWACTION() and ACTION()"),
    ("SCHEDULE", "CRON()"),
    ("WEBSOCKET", "a ROUTE() with the SOCKET method"),
    ("VIEW", "$.view() in a controller handler"),
    ("FILE", "a ROUTE() with the FILE method"),
    ("RESOURCE", "TRANSLATE()"),
    ("PREF", "CONF or a NOSQL() document"),
    ("SESSION", "AUTH() and $.user"),
    ("WORKER", "NEWTHREAD() or NEWFORK()"),
    ("WORKER2", "NEWTHREAD() or NEWFORK()"),
    ("HTTP", "Total.run() in index.js"),
    ("HTTPS", "Total.run() with its https options in index.js"),
    ("NEWCOMMAND", "ON()/EMIT() or NEWACTION"),
    ("CMD", "EMIT() or ACTION()"),
    ("NEWEXTENSION", "a file in modules/ or plugins/"),
    ("NEWJSONSCHEMA", "NEWSCHEMA() with an @ name"),
    ("JSONSCHEMA", "NEWSCHEMA() with an @ name"),
    ("UID16", "UID()"),
    ("UID1", "UID()"),
    ("STATUS", "MAIN or a NOSQL document"),
    ("MAP", "a ROUTE() with the FILE method"),
    ("REDIRECT", "$.redirect() in a handler"),
    ("UPDATE", "a script or an action"),
    ("MODIFY", "a script or an action"),
    ("NEWOPERATION", "NEWACTION()"),
    ("OPERATION", "ACTION().promise($)"),
    ("RUN", "ACTION().promise($)"),
    (
        "GETSCHEMA",
        "NEWSCHEMA() with an @ name, used as an action's input",
    ),
    ("NEWTASK", "NEWACTION() and ACTION()"),
    ("TASK", "ACTION().promise($)"),
    (
        "CONVERT",
        "an action's input string, or .toJSONSchema() on a schema string",
    ),
    ("LOGGER", "console.log() or $.audit() in an action"),
];

/// Names the file itself declares (a local `function MAP()` is not the v4 global).
fn declared<'a>(tokens: &[Token<'a>]) -> HashSet<&'a str> {
    let mut out = HashSet::new();
    for i in 1..tokens.len() {
        if tokens[i].kind == Kind::Ident
            && matches!(
                tokens[i - 1].text,
                "function" | "var" | "let" | "const" | "class"
            )
            && tokens[i - 1].kind == Kind::Ident
        {
            out.insert(tokens[i].text);
        }
    }
    out
}

/// #11: calls of v4-only globals and `PREF.x`, unless the project or the file defines the name.
pub(crate) fn v4_globals(src: &Source, ctx: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    let mut local = declared(tokens);
    local.extend(defined_globals(tokens, true));
    let mut hits = Hits::new();
    for i in 0..tokens.len() {
        let t = &tokens[i];
        if t.kind != Kind::Ident || prev_is(tokens, i, |p| p.is_punct(".")) {
            continue;
        }
        let Some((name, fix)) = V4_GLOBALS.iter().find(|(g, _)| *g == t.text) else {
            continue;
        };
        let next = tokens.get(i + 1);
        let used = next.is_some_and(|n| n.is_punct("("))
            || (*name == "PREF" && next.is_some_and(|n| n.is_punct(".") || n.is_punct("[")));
        if used && !local.contains(name) && !ctx.globals.contains(*name) {
            hits.push((
                t.line,
                format!("{name} is a Total.js 4 global that does not exist in v5: use {fix}"),
            ));
        }
    }
    hits
}

/// #20: `process.env.X` in feature code instead of `CONF.x`.
pub(crate) fn process_env(src: &Source, _: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    (0..tokens.len())
        .filter(|&i| {
            tokens[i].is_ident("process")
                && !prev_is(tokens, i, |p| p.is_punct("."))
                && tokens.get(i + 1).is_some_and(|t| t.is_punct("."))
                && tokens.get(i + 2).is_some_and(|t| t.is_ident("env"))
        })
        .map(|i| {
            (
                tokens[i].line,
                "process.env in feature code: read settings from CONF.key and map variables in config with 'key (env) : VARIABLE'".to_string(),
            )
        })
        .collect()
}
