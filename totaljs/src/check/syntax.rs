//! Just enough JavaScript structure on top of the token stream for the rules: calls and their
//! arguments, object literal properties, and where functions start and end. Everything here
//! tolerates half-written code: an unclosed bracket runs to the end of the file.

use std::ops::Range;

use crate::js::{Kind, Token};

/// Index of the bracket that closes the one at `open`; the end of the tokens if it never closes.
pub(crate) fn matching(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        if t.kind != Kind::Punct {
            continue;
        }
        match t.text {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// Token ranges of the comma-separated items between `open` and its closing bracket.
pub(crate) fn items(tokens: &[Token], open: usize) -> Vec<Range<usize>> {
    let close = matching(tokens, open);
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = open + 1;
    let end = close.min(tokens.len());
    for (i, t) in tokens.iter().enumerate().take(end).skip(open + 1) {
        if t.kind != Kind::Punct {
            continue;
        }
        match t.text {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth = depth.saturating_sub(1),
            "," if depth == 0 => {
                out.push(start..i);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < close.min(tokens.len()) {
        out.push(start..close.min(tokens.len()));
    }
    out
}

/// A call `name(...)`.
pub(crate) struct Call {
    /// Index of the callee's name token.
    pub at: usize,
    /// Index of the `(`.
    pub open: usize,
    pub args: Vec<Range<usize>>,
}

/// Calls of the global function `name` (not `x.name(...)`, not its declaration).
pub(crate) fn global_calls(tokens: &[Token], name: &str) -> Vec<Call> {
    let mut out = Vec::new();
    for i in 0..tokens.len() {
        if tokens[i].is_ident(name)
            && tokens.get(i + 1).is_some_and(|t| t.is_punct("("))
            && !prev_is(tokens, i, |p| p.is_punct(".") || p.is_ident("function"))
        {
            out.push(Call {
                at: i,
                open: i + 1,
                args: items(tokens, i + 1),
            });
        }
    }
    out
}

/// Calls of a method `name` on any receiver: `x.name(...)`.
pub(crate) fn method_calls(tokens: &[Token], name: &str) -> Vec<Call> {
    let mut out = Vec::new();
    for i in 1..tokens.len() {
        if tokens[i].is_ident(name)
            && tokens[i - 1].is_punct(".")
            && tokens.get(i + 1).is_some_and(|t| t.is_punct("("))
        {
            out.push(Call {
                at: i,
                open: i + 1,
                args: items(tokens, i + 1),
            });
        }
    }
    out
}

/// The source text from token `first` to the end of token `last`, as written. Tokens are slices
/// of `text`; None when they are not (a file lexed as empty) or the range is out of order.
pub(crate) fn code_between<'a>(
    text: &'a str,
    tokens: &[Token<'a>],
    first: usize,
    last: usize,
) -> Option<&'a str> {
    let base = text.as_ptr() as usize;
    let start = (tokens.get(first)?.text.as_ptr() as usize).checked_sub(base)?;
    let l = tokens.get(last)?;
    let end = (l.text.as_ptr() as usize).checked_sub(base)? + l.text.len();
    text.get(start..end)
}

pub(crate) fn prev_is(tokens: &[Token], i: usize, f: impl Fn(&Token) -> bool) -> bool {
    i > 0 && f(&tokens[i - 1])
}

/// The string literal that makes up the whole of `range`, if it is one.
pub(crate) fn string_in<'a>(
    tokens: &[Token<'a>],
    range: &Range<usize>,
) -> Option<(&'a str, usize)> {
    if range.len() != 1 {
        return None;
    }
    let t = tokens.get(range.start)?;
    t.str_value().map(|v| (v, t.line))
}

/// The value of property `key` in the object literal that makes up `range`. For a method
/// shorthand (`key(a) { ... }`) the range starts at the key.
pub(crate) fn property(tokens: &[Token], range: &Range<usize>, key: &str) -> Option<Range<usize>> {
    let open = range.start;
    if !tokens.get(open).is_some_and(|t| t.is_punct("{")) {
        return None;
    }
    for item in items(tokens, open) {
        let mut k = item.start;
        if tokens.get(k).is_some_and(|t| t.is_ident("async")) && item.len() > 1 {
            k += 1;
        }
        let Some(t) = tokens.get(k) else { continue };
        let name = match t.kind {
            Kind::Ident => t.text,
            Kind::Str => t.str_value().unwrap_or(""),
            _ => continue,
        };
        if name != key {
            continue;
        }
        match tokens.get(k + 1) {
            Some(n) if n.is_punct(":") => return Some(k + 2..item.end),
            Some(n) if n.is_punct("(") => return Some(k..item.end),
            _ => {}
        }
    }
    None
}

/// A function: its parameters and the token range of its body (braces included, or the
/// expression of an arrow function without braces).
#[derive(Debug, Clone)]
pub(crate) struct Func<'a> {
    /// Index of the first token (`async`, `function`, the parameter list or the method name).
    pub start: usize,
    pub name: Option<&'a str>,
    pub params: Vec<&'a str>,
    pub body: Range<usize>,
    pub arrow: bool,
}

/// Parameter names: identifiers right after `(` or `,` at the top level of the parentheses.
fn params<'a>(tokens: &[Token<'a>], open: usize) -> Vec<&'a str> {
    items(tokens, open)
        .into_iter()
        .filter_map(|r| tokens.get(r.start))
        .filter(|t| t.kind == Kind::Ident)
        .map(|t| t.text)
        .collect()
}

fn block_or_expr(tokens: &[Token], start: usize, end: usize) -> Range<usize> {
    if tokens.get(start).is_some_and(|t| t.is_punct("{")) {
        start..(matching(tokens, start) + 1).min(tokens.len())
    } else {
        start..end.max(start)
    }
}

/// Parses the function expression that starts `range`: `function (...) {}`, `(...) => ...`,
/// `x => ...`, or a method shorthand `name(...) {}` (all optionally `async`).
pub(crate) fn function_at<'a>(tokens: &[Token<'a>], range: &Range<usize>) -> Option<Func<'a>> {
    let mut i = range.start;
    if tokens.get(i)?.is_ident("async") && range.len() > 1 {
        i += 1;
    }
    let t = tokens.get(i)?;
    if t.is_ident("function") {
        let mut j = i + 1;
        if tokens.get(j)?.is_punct("*") {
            j += 1;
        }
        let mut name = None;
        if tokens.get(j)?.kind == Kind::Ident {
            name = Some(tokens[j].text);
            j += 1;
        }
        if !tokens.get(j)?.is_punct("(") {
            return None;
        }
        let close = matching(tokens, j);
        let body_open = close + 1;
        if !tokens.get(body_open)?.is_punct("{") {
            return None;
        }
        return Some(Func {
            start: range.start,
            name,
            params: params(tokens, j),
            body: block_or_expr(tokens, body_open, range.end),
            arrow: false,
        });
    }
    if t.kind == Kind::Ident && tokens.get(i + 1)?.is_punct("=>") {
        return Some(Func {
            start: range.start,
            name: None,
            params: vec![t.text],
            body: block_or_expr(tokens, i + 2, range.end),
            arrow: true,
        });
    }
    if t.is_punct("(") {
        let close = matching(tokens, i);
        if tokens.get(close + 1)?.is_punct("=>") {
            return Some(Func {
                start: range.start,
                name: None,
                params: params(tokens, i),
                body: block_or_expr(tokens, close + 2, range.end),
                arrow: true,
            });
        }
        return None;
    }
    if t.kind == Kind::Ident && tokens.get(i + 1)?.is_punct("(") {
        let close = matching(tokens, i + 1);
        if tokens.get(close + 1)?.is_punct("{") {
            return Some(Func {
                start: range.start,
                name: Some(t.text),
                params: params(tokens, i + 1),
                body: block_or_expr(tokens, close + 1, range.end),
                arrow: false,
            });
        }
    }
    None
}

const KEYWORDS: &[&str] = &[
    "if", "for", "while", "switch", "catch", "function", "return", "with", "do", "else",
];

/// Every function that binds its own `this` (declarations, `function` expressions and method
/// shorthands), in source order. A `function` assigned with `name = function` or `name: function`
/// is given that name.
pub(crate) fn this_binding_functions<'a>(tokens: &[Token<'a>]) -> Vec<Func<'a>> {
    let mut out = Vec::new();
    for i in 0..tokens.len() {
        let t = &tokens[i];
        if t.is_ident("function") {
            if let Some(mut f) = function_at(tokens, &(i..tokens.len())) {
                if f.name.is_none()
                    && i >= 2
                    && (tokens[i - 1].is_punct("=") || tokens[i - 1].is_punct(":"))
                    && tokens[i - 2].kind == Kind::Ident
                {
                    f.name = Some(tokens[i - 2].text);
                }
                out.push(f);
            }
        } else if t.kind == Kind::Ident
            && !KEYWORDS.contains(&t.text)
            && prev_is(tokens, i, |p| p.is_punct("{") || p.is_punct(","))
            && tokens.get(i + 1).is_some_and(|n| n.is_punct("("))
            && let Some(f) = function_at(tokens, &(i..tokens.len()))
            && !f.arrow
        {
            out.push(f);
        }
    }
    out
}

/// Module names referenced by `require('x')`, `import ... from 'x'` and `import 'x'`, with lines.
pub(crate) fn module_refs<'a>(tokens: &[Token<'a>]) -> Vec<(&'a str, usize)> {
    let mut out = Vec::new();
    for i in 0..tokens.len() {
        let t = &tokens[i];
        let name_at = if t.is_ident("require")
            && tokens.get(i + 1).is_some_and(|n| n.is_punct("("))
            && !prev_is(tokens, i, |p| p.is_punct("."))
        {
            i + 2
        } else if (t.is_ident("from") || t.is_ident("import"))
            && tokens.get(i + 1).is_some_and(|n| n.kind == Kind::Str)
        {
            i + 1
        } else {
            continue;
        };
        if let Some(v) = tokens.get(name_at).and_then(|n| n.str_value()) {
            out.push((v, t.line));
        }
    }
    out
}

/// Whether the tokens call `AUTH(...)`: the session delegate that `+`/`-` routes depend on.
pub(crate) fn defines_auth(tokens: &[Token]) -> bool {
    !global_calls(tokens, "AUTH").is_empty()
}

/// Whether the token at `i` is a lone `=` (an assignment, not `==`, `===` or `=>`).
fn is_assign(tokens: &[Token], i: usize) -> bool {
    tokens.get(i).is_some_and(|t| t.is_punct("="))
        && !tokens
            .get(i + 1)
            .is_some_and(|t| t.is_punct("=") || t.is_punct(">"))
        && !prev_is(tokens, i, |p| {
            p.kind == Kind::Punct && matches!(p.text, "=" | "!" | "<" | ">")
        })
}

/// Names a file makes global: `global.X = ...`, `globalThis.X = ...`, `global['X'] = ...` and,
/// when `top_level`, the names it declares or assigns at its top level (`var X`, `function X`,
/// `X = ...`). These are the project's own names, whatever Total.js 4 meant by them.
pub(crate) fn defined_globals<'a>(tokens: &[Token<'a>], top_level: bool) -> Vec<&'a str> {
    let mut out = Vec::new();
    let depth = depths(tokens);
    for i in 0..tokens.len() {
        let t = &tokens[i];
        if (t.is_ident("global") || t.is_ident("globalThis"))
            && !prev_is(tokens, i, |p| p.is_punct("."))
        {
            let dotted = tokens.get(i + 1).is_some_and(|n| n.is_punct("."))
                && tokens.get(i + 2).is_some_and(|n| n.kind == Kind::Ident)
                && is_assign(tokens, i + 3);
            let indexed = tokens.get(i + 1).is_some_and(|n| n.is_punct("["))
                && tokens.get(i + 2).and_then(|n| n.str_value()).is_some()
                && tokens.get(i + 3).is_some_and(|n| n.is_punct("]"))
                && is_assign(tokens, i + 4);
            if dotted {
                out.push(tokens[i + 2].text);
            } else if let Some(name) = indexed.then(|| tokens[i + 2].str_value()).flatten() {
                out.push(name);
            }
            continue;
        }
        if !top_level || depth[i] != 0 || t.kind != Kind::Ident {
            continue;
        }
        let declared = prev_is(tokens, i, |p| {
            p.kind == Kind::Ident
                && matches!(p.text, "var" | "let" | "const" | "function" | "class")
        });
        let assigned = is_assign(tokens, i + 1)
            && (i == 0
                || prev_is(tokens, i, |p| {
                    p.kind == Kind::Punct && matches!(p.text, ";" | "}" | ")")
                }));
        if declared || assigned {
            out.push(t.text);
        }
    }
    out
}

/// Bracket depth before each token (all of `(`, `[`, `{` count).
pub(crate) fn depths(tokens: &[Token]) -> Vec<usize> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut depth = 0usize;
    for t in tokens {
        if t.kind == Kind::Punct && matches!(t.text, ")" | "]" | "}") {
            depth = depth.saturating_sub(1);
        }
        out.push(depth);
        if t.kind == Kind::Punct && matches!(t.text, "(" | "[" | "{") {
            depth += 1;
        }
    }
    out
}

/// Splits a route string (`'+GET /url/ @flag --> Action'`) into its auth prefix and method.
pub(crate) struct RouteStr<'a> {
    /// `+`, `-` or none.
    pub auth: Option<char>,
    /// The method as written (without the prefix); empty when the string is empty.
    pub method: &'a str,
    /// Whitespace-separated words after the method (the URL first).
    pub rest: Vec<&'a str>,
}

pub(crate) fn route_str(s: &str) -> RouteStr<'_> {
    let mut words = s.split_whitespace();
    let first = words.next().unwrap_or("");
    let (auth, method) = match first.chars().next() {
        Some(c @ ('+' | '-')) => (Some(c), &first[1..]),
        _ => (None, first),
    };
    RouteStr {
        auth,
        method,
        rest: words.collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::js::lex;

    #[test]
    fn call_arguments_split_at_top_level_commas() {
        let l = lex("ROUTE('GET /', function($) { f(a, b); }, ['upload'], 1024);");
        let calls = global_calls(&l.tokens, "ROUTE");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].args.len(), 4);
    }

    #[test]
    fn object_properties_and_functions_are_found() {
        let l = lex("NEWACTION('A|b', { route: 'API ?', action($, model) { $.success(); } });");
        let call = &global_calls(&l.tokens, "NEWACTION")[0];
        let route = property(&l.tokens, &call.args[1], "route").unwrap();
        assert_eq!(string_in(&l.tokens, &route).map(|s| s.0), Some("API ?"));
        let action = property(&l.tokens, &call.args[1], "action").unwrap();
        let f = function_at(&l.tokens, &action).unwrap();
        assert_eq!(f.params, vec!["$", "model"]);
        assert!(l.tokens[f.body.start].is_punct("{"));
    }

    #[test]
    fn arrow_functions_with_expression_bodies_parse() {
        let l = lex("x($ => $.json(1), (a, b) => { a(); })");
        let call = &global_calls(&l.tokens, "x")[0];
        let f = function_at(&l.tokens, &call.args[0]).unwrap();
        assert!(f.arrow);
        assert_eq!(f.params, vec!["$"]);
        assert_eq!(f.body.len(), 6);
    }
}
