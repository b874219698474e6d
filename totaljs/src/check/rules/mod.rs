//! The rules, one table. Each is a rule of TOTALJS.md §5 (its number is in the comment above it).
//!
//! Severity policy: a rule is an error only when the code it finds was verified to break at run
//! time on total5 (a crash, a TypeError, a 400, a route that never matches, a setting read wrong);
//! everything else is a warning or a note, which the model may leave alone. #5 and #15 are split
//! in two for this: an unknown route method is an error, a lowercase one a note (`Route()`
//! upper-cases it); a malformed config line is an error, a v4 key a warning.
//!
//! All H-confidence rules are implemented. Of the M/L ones:
//! - #3 `controller-install`, #12 `no-app-require`, #14 `success-envelope`, #19 `realtime-package`
//!   are on (warnings): the pattern is exact and the fix is always the framework's way.
//! - #13 `node-builtin` is on as a note: the match is exact, but `fs`/`path` are sometimes the
//!   right tool, so it only nudges.
//! - #18 `indent-tabs` is on as one note per file (not per line), so it never floods a result.
//! - #20 `process-env` is implemented but off by default (L/M): reading the environment in a
//!   feature file is a habit, not a bug, and the `config` file can already map env variables.
//! - Skipped part of #9: "files in `schemas/` use `NEWSCHEMA`, files in `actions/` use `NEWACTION`".
//!   A helper or an action in `schemas/` is legal and loads fine, so flagging it would be noise;
//!   only the v4 schema API (which does not exist in v5) is checked.
//! - Skipped part of #8: API endpoint names with `/` written directly in `ROUTE('API ...')` strings;
//!   only the `NEWACTION` case was verified, so only it is checked.

mod actions;
mod boot;
mod controllers;
mod files;
mod globals;
pub(crate) mod load;
mod modules;
pub(crate) mod routes;
mod style;

use super::file::{File, Kind};
use super::{Confidence, ProjectContext, Severity};
use crate::js::{Lexed, Token, lex};

/// A rule of the conventions check, as settings and documentation see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rule {
    /// Stable id, used in findings and settings.
    pub id: &'static str,
    /// Severity of its findings unless settings override it.
    pub severity: Severity,
    /// Whether it runs when settings say nothing about it.
    pub default_on: bool,
    /// How sure a finding of this rule is.
    pub confidence: Confidence,
    /// Which files it looks at.
    pub files: &'static str,
    /// What it enforces, in one line.
    pub summary: &'static str,
}

/// Every rule of the conventions check, in TOTALJS.md §5 order.
pub fn rules() -> impl Iterator<Item = &'static Rule> {
    DEFS.iter().map(|d| &d.rule)
}

/// A file prepared for the rules.
pub(crate) struct Source<'a> {
    pub file: File,
    /// Relative to the project root, with `/`.
    pub path: String,
    pub text: &'a str,
    pub lexed: Lexed<'a>,
}

impl<'a> Source<'a> {
    pub fn new(file: File, path: &str, text: &'a str) -> Source<'a> {
        let lexed = lex(if file.is_js() { text } else { "" });
        let path = path.replace('\\', "/").trim_start_matches("./").to_string();
        Source {
            file,
            path,
            text,
            lexed,
        }
    }

    pub fn tokens(&self) -> &[Token<'a>] {
        &self.lexed.tokens
    }
}

/// What a rule reports: (line, message).
pub(crate) type Hits = Vec<(usize, String)>;

pub(crate) struct Def {
    pub rule: Rule,
    pub applies: fn(&File) -> bool,
    pub run: fn(&Source, &ProjectContext) -> Hits,
}

fn js(f: &File) -> bool {
    f.is_js()
}

const ALL_JS: &str = "server-side .js files";

pub(crate) const DEFS: &[Def] = &[
    // 1
    Def {
        rule: Rule {
            id: "no-express",
            severity: Severity::Warning,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "No Express/Koa/Fastify/Nest: no require('express'), app.get(), res.json().",
        },
        applies: js,
        run: modules::no_express,
    },
    // 2
    Def {
        rule: Rule {
            id: "boot-total5",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: "index.js",
            summary: "index.js boots with require('total5') and Total.run() (or F.http(options)), not total4/total.js/F.http('debug').",
        },
        applies: |f| f.kind == Kind::Index,
        run: boot::boot_total5,
    },
    // 3
    Def {
        rule: Rule {
            id: "controller-install",
            severity: Severity::Warning,
            default_on: true,
            confidence: Confidence::Medium,
            files: "controllers/*.js",
            summary: "Controllers define exports.install = function() { ROUTE(...) }; no top-level ROUTE().",
        },
        applies: |f| f.kind == Kind::Controller,
        run: controllers::install,
    },
    // 4
    Def {
        rule: Rule {
            id: "handler-this",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: "controllers/*.js",
            summary: "Route handlers use their $ argument, not this/self (SOCKET handlers excepted).",
        },
        applies: |f| f.kind == Kind::Controller,
        run: controllers::handler_this,
    },
    // 5
    Def {
        rule: Rule {
            id: "route-method",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "Route strings start with [+-]GET|POST|PUT|PATCH|DELETE|API|SOCKET|FILE or #code.",
        },
        applies: js,
        run: routes::method,
    },
    // 5, the style half: lowercase verbs work (`Route()` upper-cases them).
    Def {
        rule: Rule {
            id: "route-method-case",
            severity: Severity::Info,
            default_on: true,
            confidence: Confidence::Low,
            files: ALL_JS,
            summary: "Route methods are written in uppercase (lowercase works; a style note).",
        },
        applies: js,
        run: routes::method_case,
    },
    // 6
    Def {
        rule: Rule {
            id: "route-v4-schema",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "No v4 '*Schema --> action' in route strings; write '--> Schema/action' or '--> Ns|action'.",
        },
        applies: js,
        run: routes::v4_schema,
    },
    // 7
    Def {
        rule: Rule {
            id: "route-flags-array",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "ROUTE(url, handler, bytes): no flags array, no 4th argument; flags go in the url string.",
        },
        applies: js,
        run: routes::flags_array,
    },
    // 8
    Def {
        rule: Rule {
            id: "api-action-id",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "NEWACTION ids with route: 'API ?' (no '-->') use 'Ns|action', never 'Ns/action'.",
        },
        applies: js,
        run: actions::api_action_id,
    },
    // 9
    Def {
        rule: Rule {
            id: "schema-v4-api",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "No v4 schema API (schema.define, setSave, setQuery, addWorkflow, $clean, .make()).",
        },
        applies: js,
        run: actions::schema_v4_api,
    },
    // 10
    Def {
        rule: Rule {
            id: "action-controller-method",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "Inside NEWACTION/schema.action/AUTH bodies, $ has no json/view/file/plain.",
        },
        applies: js,
        run: actions::controller_methods,
    },
    // 11
    Def {
        rule: Rule {
            id: "v4-global",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "No globals that only exist in Total.js 4 (TABLE, SCHEDULE, MODULE, GETSCHEMA, TASK, ...) unless the project defines them.",
        },
        applies: js,
        run: globals::v4_globals,
    },
    // 12
    Def {
        rule: Rule {
            id: "no-app-require",
            severity: Severity::Warning,
            default_on: true,
            confidence: Confidence::Medium,
            files: "controllers/, schemas/, actions/, definitions/, plugins/",
            summary: "No require('./...') of app files; use MODS.x, FUNC.x or auto-loading.",
        },
        applies: |f| {
            f.plugin
                || matches!(
                    f.kind,
                    Kind::Controller | Kind::Schema | Kind::Action | Kind::Definition
                )
        },
        run: modules::no_app_require,
    },
    // 13
    Def {
        rule: Rule {
            id: "node-builtin",
            severity: Severity::Info,
            default_on: true,
            confidence: Confidence::Medium,
            files: "feature folders (controllers/, schemas/, actions/, definitions/, modules/, plugins/)",
            summary: "Prefer PATH, Total.Fs, RESTBuilder and CRON over fs/path/http(s) and setInterval.",
        },
        applies: File::is_feature,
        run: modules::node_builtin,
    },
    // 14
    Def {
        rule: Rule {
            id: "success-envelope",
            severity: Severity::Warning,
            default_on: true,
            confidence: Confidence::Medium,
            files: ALL_JS,
            summary: "No hand-made { success: ... } envelopes; use $.success(value).",
        },
        applies: js,
        run: actions::success_envelope,
    },
    // 15
    Def {
        rule: Rule {
            id: "config-format",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: "config",
            summary: "config lines are 'key : value' with a space after the colon; no JSON.",
        },
        applies: |f| f.kind == Kind::Config,
        run: files::config_format,
    },
    // 15, the v4 keys half: ignored by v5, but nothing breaks.
    Def {
        rule: Rule {
            id: "config-v4-key",
            severity: Severity::Warning,
            default_on: true,
            confidence: Confidence::High,
            files: "config",
            summary: "Framework settings use the v5 '$' keys ($api, $port), not v4 default_*/directory_*.",
        },
        applies: |f| f.kind == Kind::Config,
        run: files::config_v4_key,
    },
    // 16
    Def {
        rule: Rule {
            id: "config-overlay",
            severity: Severity::Warning,
            default_on: true,
            confidence: Confidence::High,
            files: "config-debug, config-release, config-test",
            summary: "Total.js 5 reads only config; config-debug/config-release are never loaded.",
        },
        applies: |f| f.kind == Kind::ConfigOverlay,
        run: files::config_overlay,
    },
    // 17
    Def {
        rule: Rule {
            id: "auth-delegate",
            severity: Severity::Warning,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "+/- routes need an AUTH() delegate (in definitions/); needs project context.",
        },
        applies: js,
        run: routes::auth_delegate,
    },
    // 18
    Def {
        rule: Rule {
            id: "indent-tabs",
            severity: Severity::Info,
            default_on: true,
            confidence: Confidence::Medium,
            files: ALL_JS,
            summary: "Indent with tabs, not spaces (one finding per file).",
        },
        applies: js,
        run: style::indent_tabs,
    },
    // 19
    Def {
        rule: Rule {
            id: "realtime-package",
            severity: Severity::Warning,
            default_on: true,
            confidence: Confidence::Medium,
            files: ALL_JS,
            summary: "Use CRON()/ON('service')/ROUTE('SOCKET ...') instead of node-cron, cron, socket.io, ws.",
        },
        applies: js,
        run: modules::realtime_package,
    },
    // 20
    Def {
        rule: Rule {
            id: "process-env",
            severity: Severity::Info,
            default_on: false,
            confidence: Confidence::Low,
            files: "server-side .js files except index.js",
            summary: "Feature code reads CONF.key, not process.env.KEY (off by default).",
        },
        applies: |f| f.is_js() && f.kind != Kind::Index,
        run: globals::process_env,
    },
    // 21
    Def {
        rule: Rule {
            id: "package-total5",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: "package.json",
            summary: "package.json is valid JSON and depends on total5, not total4 or total.js.",
        },
        applies: |f| f.kind == Kind::PackageJson,
        run: files::package_total5,
    },
    // #32: mistakes that break the app at boot or leave a route silently broken (verified live).
    Def {
        rule: Rule {
            id: "schema-load-order",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "input: '@X' needs NEWSCHEMA('@X', ...) loaded before the action (modules/ or above it), not in schemas/ or a later actions/ file.",
        },
        applies: js,
        run: load::schema_load_order,
    },
    Def {
        rule: Rule {
            id: "view-layout",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "$.view() needs views/layout.html or @{layout('')} in the view; otherwise the request hangs.",
        },
        applies: js,
        run: load::view_layout,
    },
    Def {
        rule: Rule {
            id: "plugin-index",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: "plugins/<id>/",
            summary: "Every folder in plugins/ has an index.js; otherwise the boot crashes.",
        },
        applies: |f| f.plugin,
        run: load::plugin_index,
    },
    Def {
        rule: Rule {
            id: "api-route-duplicate",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "At most one schema.action of a schema uses route 'API ?'; more collide on one endpoint.",
        },
        applies: js,
        run: load::api_route_duplicate,
    },
    Def {
        rule: Rule {
            id: "route-middleware",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "A #name route flag names a MIDDLEWARE('name', ...) the project defines; unknown ones are skipped.",
        },
        applies: js,
        run: load::route_middleware,
    },
    Def {
        rule: Rule {
            id: "action-function",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "A NEWACTION's options hold its action: function($, model) { … }.",
        },
        applies: js,
        run: actions::action_function,
    },
    Def {
        rule: Rule {
            id: "action-model-param",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "An action that uses model takes it: action: function($, model) { … }.",
        },
        applies: js,
        run: actions::model_param,
    },
    Def {
        rule: Rule {
            id: "route-action-handler",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "An action is named in the route string (ROUTE('GET /x/ --> Ns|action')), never passed as the handler.",
        },
        applies: js,
        run: routes::action_as_handler,
    },
    Def {
        rule: Rule {
            id: "install-argument",
            severity: Severity::Error,
            default_on: true,
            confidence: Confidence::High,
            files: ALL_JS,
            summary: "exports.install gets no argument: no framework.route() inside it.",
        },
        applies: js,
        run: load::install_argument,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_ids_are_unique_and_kebab_case() {
        let ids: Vec<_> = rules().map(|r| r.id).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len());
        assert!(ids.iter().all(|id| {
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        }));
    }
}
