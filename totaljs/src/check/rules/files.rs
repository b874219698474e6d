//! Rules on files that are not JavaScript: `config` (#15), v4 config overlays (#16) and
//! `package.json` (#21).

use super::{Hits, Source};
use crate::check::ProjectContext;

/// v4 setting prefixes; v5 framework settings start with `$`.
const V4_KEY_PREFIXES: &[&str] = &["default_", "directory_"];

/// #15: `key : value` lines, a space after the colon (the parser drops the character right after
/// it), no JSON. Indentation is fine: the parser trims.
pub(crate) fn config_format(src: &Source, _: &ProjectContext) -> Hits {
    let mut hits = Hits::new();
    let first = src
        .text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("//"));
    if first.is_some_and(|l| l.starts_with('{') || l.starts_with('[')) {
        let line = src
            .text
            .lines()
            .position(|l| l.trim_start().starts_with(['{', '[']))
            .map_or(1, |p| p + 1);
        hits.push((
            line,
            "config is not JSON: write one 'key : value' per line".to_string(),
        ));
        return hits;
    }
    for (n, raw) in src.text.lines().enumerate() {
        let line = n + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with("//") {
            continue;
        }
        // The parser trims keys and values: an indented line loads like any other.
        let Some(colon) = l.find(':') else {
            hits.push((
                line,
                format!("'{l}' is not 'key : value': config lines are 'key : value'"),
            ));
            continue;
        };
        let key = l[..colon].trim();
        let after = l[colon + 1..].chars().next();
        if after.is_some_and(|c| !c.is_whitespace()) {
            hits.push((
                line,
                format!(
                    "no space after the colon in '{l}': the config parser drops the first character after ':', so write '{key} : {}'",
                    l[colon + 1..].trim()
                ),
            ));
        }
    }
    hits
}

/// The `key` of each `key : value` line of a config file, with its line.
fn config_keys(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(n, raw)| {
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with("//") {
            return None;
        }
        let key = l[..l.find(':')?].trim();
        Some((n + 1, key))
    })
}

/// #15b: v4 setting names (`default_*`, `directory_*`) that v5 ignores.
pub(crate) fn config_v4_key(src: &Source, _: &ProjectContext) -> Hits {
    let mut hits = Hits::new();
    for (line, key) in config_keys(src.text) {
        if let Some(prefix) = V4_KEY_PREFIXES.iter().find(|p| key.starts_with(**p)) {
            hits.push((
                line,
                format!(
                    "'{key}' is a Total.js 4 setting ({prefix}*) that v5 ignores: framework settings in v5 start with '$', e.g. $api, $port, $httpmaxsize, $cors"
                ),
            ));
        }
    }
    hits
}

/// #16: `config-debug` / `config-release` are never read by Total.js 5.
pub(crate) fn config_overlay(_: &Source, _: &ProjectContext) -> Hits {
    vec![(
        1,
        "Total.js 5 reads only the 'config' file; this overlay is never loaded: put the keys in config and branch on DEBUG in code where behaviour must differ".to_string(),
    )]
}

/// The 1-based line of the first occurrence of `needle`, or 1.
fn line_of(text: &str, needle: &str) -> usize {
    text.find(needle)
        .map_or(1, |at| text[..at].matches('\n').count() + 1)
}

/// #21: `package.json` parses and depends on `total5`, not `total4` / `total.js`.
pub(crate) fn package_total5(src: &Source, ctx: &ProjectContext) -> Hits {
    let json: serde_json::Value = match serde_json::from_str(src.text) {
        Ok(v) => v,
        Err(e) => {
            return vec![(
                e.line().max(1),
                format!(
                    "package.json is not valid JSON ({e}); npm cannot install anything until it is fixed"
                ),
            )];
        }
    };
    let deps: Vec<&str> = ["dependencies", "devDependencies"]
        .iter()
        .filter_map(|k| json.get(k).and_then(|d| d.as_object()))
        .flat_map(|d| d.keys().map(String::as_str))
        .collect();
    let mut hits = Hits::new();
    for legacy in ["total4", "total.js"] {
        if deps.contains(&legacy) {
            hits.push((
                line_of(src.text, &format!("\"{legacy}\"")),
                format!("package.json depends on '{legacy}' (Total.js 4 or older) but the code is Total.js 5: replace it with \"total5\""),
            ));
        }
    }
    if !deps.contains(&"total5") && !ctx.not_app {
        hits.push((
            line_of(src.text, "\"dependencies\""),
            "package.json does not depend on total5: add \"total5\" to \"dependencies\" (npm install total5)".to_string(),
        ));
    }
    hits
}
