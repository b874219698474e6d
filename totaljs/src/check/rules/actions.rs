//! Action and schema rules: API action ids (#8), the v4 schema API (#9), controller-only methods
//! on an action's `$` (#10) and hand-made success envelopes (#14).

use super::{Hits, Source};
use crate::check::ProjectContext;
use crate::check::syntax::{
    Func, function_at, global_calls, method_calls, prev_is, property, route_str, string_in,
};
use crate::js::{Kind, Token};

/// #8: `NEWACTION('Ns/name', { route: 'API ?' })`: the framework names the API endpoint after the
/// id, the endpoint is split on `/`, so every `Ns/...` action collides and the last one registered
/// answers all of them. `ROUTE('+API /api/ -name --> Ns/name')` is not affected.
pub(crate) fn api_action_id(src: &Source, _: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    let mut hits = Hits::new();
    for call in global_calls(tokens, "NEWACTION") {
        let Some((id, line)) = call.args.first().and_then(|a| string_in(tokens, a)) else {
            continue;
        };
        if !id.contains('/') {
            continue;
        }
        let api = call
            .args
            .get(1)
            .and_then(|o| property(tokens, o, "route"))
            .and_then(|r| string_in(tokens, &r))
            .is_some_and(|(r, _)| {
                // With its own `--> id` the route names its endpoint itself (`+API /api/ -x
                // --> Ns/name` is fine); without, the framework appends `+Ns/name --> Ns/name`.
                route_str(r.trim()).method.eq_ignore_ascii_case("API") && !r.contains("-->")
            });
        if api {
            let fixed = id.replacen('/', "|", 1);
            hits.push((
                line,
                format!(
                    "action id '{id}' with an API route: API endpoints split on '/', so every '{}/...' action collides; name it '{fixed}'",
                    id.split('/').next().unwrap_or(id)
                ),
            ));
        }
    }
    hits
}

const V4_SCHEMA_METHODS: &[&str] = &[
    "define",
    "setSave",
    "setQuery",
    "setRead",
    "setGet",
    "setInsert",
    "setUpdate",
    "setPatch",
    "setRemove",
    "setList",
    "setDefault",
    "setPrefix",
    "setValidate",
    "addWorkflow",
    "addTask",
    "addOperation",
    "addHook",
    "addTransform",
];

/// #9: `schema.define()`, `setSave()`, `addWorkflow()`… do not exist on a v5 schema, which has only
/// `action()`; nor does `$.model.$clean()` or `NEWSCHEMA(...).make()`.
pub(crate) fn schema_v4_api(src: &Source, _: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    let mut schema_names = vec!["schema"];
    let schemas = global_calls(tokens, "NEWSCHEMA");
    for call in &schemas {
        if let Some(f) = call.args.get(1).and_then(|a| function_at(tokens, a))
            && let Some(p) = f.params.first()
        {
            schema_names.push(p);
        }
    }
    let fix = "a v5 schema only has schema.action(), whose action function gets ($, model); or use NEWACTION()";
    // `typeof(x.$clean) === 'function' ? x.$clean() : x` (or `x.$clean && x.$clean()`) is code
    // that runs on both versions: the call is guarded, not a v4 API use.
    let clean_guarded = (0..tokens.len()).any(|i| {
        tokens[i].is_ident("$clean")
            && !tokens.get(i + 1).is_some_and(|n| n.is_punct("("))
            && (tokens[i.saturating_sub(4)..i]
                .iter()
                .any(|p| p.is_ident("typeof"))
                || tokens
                    .get(i + 1)
                    .is_some_and(|n| n.is_punct("&") || n.is_punct("?")))
    });
    let mut hits = Hits::new();
    for i in 0..tokens.len() {
        let t = &tokens[i];
        let next_is = |off: usize, f: &dyn Fn(&Token) -> bool| tokens.get(i + off).is_some_and(f);
        if t.kind == Kind::Ident
            && schema_names.contains(&t.text)
            && !prev_is(tokens, i, |p| p.is_punct("."))
            && next_is(1, &|n| n.is_punct("."))
            && next_is(2, &|n| V4_SCHEMA_METHODS.contains(&n.text))
            && next_is(3, &|n| n.is_punct("("))
        {
            hits.push((
                t.line,
                format!(
                    "{}.{}() is the Total.js 4 schema API and does not exist in v5: {fix}",
                    t.text,
                    tokens[i + 2].text
                ),
            ));
        } else if t.is_ident("$clean")
            && !clean_guarded
            && prev_is(tokens, i, |p| p.is_punct("."))
            && next_is(1, &|n| n.is_punct("("))
        {
            hits.push((
                t.line,
                "$clean() is Total.js 4; in v5 the validated model is the action's second argument (action: function($, model)), already clean".to_string(),
            ));
        }
    }
    for call in &schemas {
        let close = crate::check::syntax::matching(tokens, call.open);
        if tokens.get(close + 1).is_some_and(|t| t.is_punct("."))
            && tokens.get(close + 2).is_some_and(|t| t.is_ident("make"))
        {
            hits.push((
                tokens[close + 2].line,
                format!("NEWSCHEMA().make() is Total.js 4: in v5 NEWSCHEMA() takes the name and a function(schema) that declares it; {fix}"),
            ));
        }
    }
    hits
}

/// Methods of the HTTP controller's `$` that an action's `$` (an Options object) does not have.
const CONTROLLER_ONLY: &[&str] = &[
    "json", "view", "file", "plain", "html", "binary", "filefs", "stream",
];

/// Functions whose `$` is an Options object: `action` of NEWACTION / `schema.action`, and AUTH.
fn action_bodies<'a>(tokens: &[Token<'a>]) -> Vec<Func<'a>> {
    let mut out = newaction_bodies(tokens);
    for call in global_calls(tokens, "AUTH") {
        if let Some(f) = call.args.first().and_then(|a| function_at(tokens, a)) {
            out.push(f);
        }
    }
    out
}

/// The `action:` functions of the NEWACTION definitions in `tokens`.
fn newaction_bodies<'a>(tokens: &[Token<'a>]) -> Vec<Func<'a>> {
    let mut out = Vec::new();
    let calls = global_calls(tokens, "NEWACTION")
        .into_iter()
        .chain(method_calls(tokens, "action"));
    for call in calls {
        let is_def = call
            .args
            .first()
            .and_then(|a| string_in(tokens, a))
            .is_some();
        if !is_def {
            continue;
        }
        if let Some(f) = call
            .args
            .get(1)
            .and_then(|o| property(tokens, o, "action"))
            .and_then(|v| function_at(tokens, &v))
        {
            out.push(f);
        }
    }
    out
}

/// A NEWACTION whose options have no `action` function: a request to it never answers
/// (total5 0.0.14: "TypeError: action.action is not a function"). The 0.5B wrote
/// `NEWACTION('Contact|create', { name: 'Hammer', email: 'hammer@example.com' });` (c34).
pub(crate) fn action_function(src: &Source, _: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    let mut hits = Hits::new();
    for call in global_calls(tokens, "NEWACTION") {
        let Some((id, line)) = call.args.first().and_then(|a| string_in(tokens, a)) else {
            continue;
        };
        let Some(options) = call.args.get(1) else {
            continue;
        };
        if !tokens.get(options.start).is_some_and(|t| t.is_punct("{")) {
            continue;
        }
        if property(tokens, options, "action").is_none() {
            hits.push((
                line,
                format!(
                    "NEWACTION('{id}') has no action function, so a request to it never answers: put it in the options, action: function($, model) {{ $.success(); }}"
                ),
            ));
        }
    }
    hits
}

/// An action that uses `model` without taking it: `action: function($) { $.success(model.name); }`
/// fails with "model is not defined" when it runs (the request times out). The 1.5B copied
/// `$.success(model.title)` from NEWACTION's options into an action that took only `$`.
pub(crate) fn model_param(src: &Source, _: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    let declared = tokens.windows(2).any(|w| {
        (w[0].is_ident("var") || w[0].is_ident("let") || w[0].is_ident("const"))
            && w[1].is_ident("model")
    });
    if declared {
        return Hits::new();
    }
    let mut hits = Hits::new();
    for f in newaction_bodies(tokens) {
        if f.params.contains(&"model") {
            continue;
        }
        let used = f.body.clone().find(|&i| {
            tokens[i].is_ident("model")
                && !prev_is(tokens, i, |p| p.is_punct("."))
                && !tokens.get(i + 1).is_some_and(|n| n.is_punct(":"))
        });
        if let Some(i) = used {
            let dollar = f.params.first().copied().unwrap_or("$");
            hits.push((
                tokens[i].line,
                format!(
                    "model is not defined here: the action's function gets the input as its second parameter, action: function({dollar}, model) {{ … }}"
                ),
            ));
        }
    }
    hits
}

/// #10: `$.json()`, `$.view()`, `$.file()`… inside an action or AUTH body.
pub(crate) fn controller_methods(src: &Source, _: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    let mut hits = Hits::new();
    for f in action_bodies(tokens) {
        let dollar = f.params.first().copied().unwrap_or("$");
        for i in f.body.clone() {
            let t = &tokens[i];
            if t.is_ident(dollar)
                && !prev_is(tokens, i, |p| p.is_punct("."))
                && tokens.get(i + 1).is_some_and(|n| n.is_punct("."))
                && tokens
                    .get(i + 2)
                    .is_some_and(|n| CONTROLLER_ONLY.contains(&n.text))
                && tokens.get(i + 3).is_some_and(|n| n.is_punct("("))
            {
                let m = tokens[i + 2].text;
                // The code to copy ends the message: the 1.5B copied the words after
                // "$.success(value)" into its action as code (c39).
                let why = if m == "view" {
                    "views are rendered by a controller's route handler"
                } else {
                    "it exists only on a controller's route handler"
                };
                hits.push((
                    t.line,
                    format!("{dollar}.{m}() does not exist on an action's $: {why}. In an action, answer with $.callback(value) for a value as it is, or with: {dollar}.success();"),
                ));
            }
        }
    }
    hits
}

/// #14: `$.json({ success: true, value })`, the framework's own envelope made by hand, instead of
/// `$.success(value)`. Only that shape: an object with `success: true|false` and at most `value`
/// besides. Any other shape (`{ ok: true }`, `{ success: true, items }`) is an API the code spells
/// out on purpose (often one the user asked for), so it is left alone.
pub(crate) fn success_envelope(src: &Source, _: &ProjectContext) -> Hits {
    let tokens = src.tokens();
    let mut hits = Hits::new();
    for call in method_calls(tokens, "json")
        .into_iter()
        .chain(method_calls(tokens, "callback"))
    {
        let Some(arg) = call.args.first() else {
            continue;
        };
        if !tokens.get(arg.start).is_some_and(|t| t.is_punct("{")) {
            continue;
        }
        let mut keys = Vec::new();
        let mut success_bool = false;
        for item in crate::check::syntax::items(tokens, arg.start) {
            let key = tokens.get(item.start).and_then(|k| match k.kind {
                Kind::Ident => Some(k.text),
                Kind::Str => k.str_value(),
                _ => None,
            });
            let colon = tokens.get(item.start + 1).is_some_and(|t| t.is_punct(":"));
            let Some(key) = key.filter(|_| colon || item.len() == 1) else {
                keys.clear();
                break;
            };
            if key == "success" {
                success_bool = item.len() == 3
                    && (tokens[item.start + 2].is_ident("true")
                        || tokens[item.start + 2].is_ident("false"));
            }
            keys.push(key);
        }
        let envelope = success_bool
            && keys.contains(&"success")
            && keys.iter().all(|k| matches!(*k, "success" | "value"));
        if envelope {
            hits.push((
                tokens[call.at].line,
                "hand-made success envelope: Total.js sends { success: true, value } itself with $.success(value), and an error with $.invalid(error)".to_string(),
            ));
        }
    }
    hits
}
