//! #2: the boot file. Total.js 5 starts with `require('total5'); Total.run(options);` (or
//! `F.http(options)` / `Total.http(options)`, which framework5 defines too); the v4 forms
//! `require('total4/debug')(options)` and `F.http('debug', options)` do not exist in v5.

use super::{Hits, Source};
use crate::check::ProjectContext;
use crate::check::syntax::{module_refs, prev_is};

const BOOT: &str = "require('total5'); then Total.run({});";

pub(crate) fn boot_total5(src: &Source, ctx: &ProjectContext) -> Hits {
    // A library's index.js is its entry point, not an app's boot file.
    if ctx.not_app {
        return Hits::new();
    }
    let tokens = src.tokens();
    let mut hits = Hits::new();
    let refs = module_refs(tokens);
    for (name, line) in &refs {
        let legacy = ["total4", "total.js", "total3"]
            .iter()
            .any(|p| *name == *p || name.starts_with(&format!("{p}/")));
        if legacy {
            hits.push((
                *line,
                format!(
                    "require('{name}') boots Total.js 4 or older; Total.js 5 boots with {BOOT}"
                ),
            ));
        }
    }
    // v4's F.http('debug', options): a mode string first. v5's F.http(options) takes an object.
    let starts = |i: usize| -> Option<&str> {
        let t = &tokens[i];
        let on_framework = (t.is_ident("F") || t.is_ident("Total") || t.is_ident("framework"))
            && !prev_is(tokens, i, |p| p.is_punct("."))
            && tokens.get(i + 1).is_some_and(|n| n.is_punct("."))
            && tokens.get(i + 3).is_some_and(|n| n.is_punct("("));
        let method = tokens.get(i + 2)?.text;
        (on_framework && matches!(method, "run" | "http" | "https")).then_some(method)
    };
    for i in 0..tokens.len() {
        if starts(i).is_some_and(|m| m != "run")
            && tokens.get(i + 4).and_then(|a| a.str_value()).is_some()
        {
            hits.push((
                tokens[i].line,
                format!(
                    "F.http('mode', options) is the Total.js 4 start; Total.js 5 boots with {BOOT}"
                ),
            ));
        }
    }
    if !hits.is_empty() {
        return hits;
    }
    let requires_total5 = refs.iter().any(|(n, _)| *n == "total5");
    let runs = (0..tokens.len()).any(|i| starts(i).is_some());
    if !requires_total5 {
        hits.push((
            1,
            format!("index.js does not load the framework: it must start with {BOOT}"),
        ));
    } else if !runs {
        hits.push((
            1,
            "index.js never starts the app: call Total.run({}) after require('total5') (Total.run({ release: true, watcher: false }) for production)".to_string(),
        ));
    }
    hits
}
