//! Repairs the tool calls small models get slightly wrong, and says precisely what is wrong when
//! they cannot be repaired.
//!
//! Shapes we recover: arguments as a JSON string (also double-encoded, fenced, or with trailing
//! garbage), wrapped in an extra `input`/`arguments`/`parameters`/`args`/`params` object or in a whole
//! `{name, arguments}` call, field names in another case or snake_case or a well-known alias
//! (`file_path`, `old_str`, `cmd`), numbers and booleans sent as strings, a bare string for a tool
//! with one required text field, tool names in another case or with a `functions.` prefix, and calls
//! written as JSON in the text of a model without native tool calling. [`RepeatGuard`] notices the
//! same call repeated in a row.

use serde_json::{Map, Value};

use crate::schema::Shape;

/// Keys models wrap the real arguments in.
const WRAPPERS: &[&str] = &[
    "input",
    "arguments",
    "parameters",
    "args",
    "params",
    "kwargs",
];

/// Prefixes some models put before tool names.
const NAME_PREFIXES: &[&str] = &["functions.", "function.", "tools.", "tool.", "default_api."];

/// Other names models use for the built-in tools.
const NAME_ALIASES: &[(&str, &str)] = &[
    ("read_file", "read"),
    ("view", "read"),
    ("cat", "read"),
    ("ls", "list"),
    ("list_dir", "list"),
    ("list_files", "list"),
    ("list_directory", "list"),
    ("find_files", "glob"),
    ("search", "grep"),
    ("search_files", "grep"),
    ("write_file", "write"),
    ("create_file", "write"),
    ("edit_file", "edit"),
    ("str_replace", "edit"),
    ("replace", "edit"),
    ("multi_edit", "patch"),
    ("multiedit", "patch"),
    ("apply_patch", "patch"),
    ("shell", "bash"),
    ("sh", "bash"),
    ("run", "bash"),
    ("run_command", "bash"),
    ("exec", "bash"),
    ("execute", "bash"),
    ("execute_command", "bash"),
    ("terminal", "bash"),
    ("todowrite", "todo"),
    ("todo_write", "todo"),
];

/// Other names models use for argument fields.
const FIELD_ALIASES: &[(&str, &str)] = &[
    ("file_path", "path"),
    ("filepath", "path"),
    ("file", "path"),
    ("filename", "path"),
    ("file_name", "path"),
    ("dir", "path"),
    ("directory", "path"),
    ("old_str", "oldString"),
    ("old", "oldString"),
    ("old_text", "oldString"),
    ("search", "oldString"),
    ("search", "pattern"),
    ("new_str", "newString"),
    ("new", "newString"),
    ("new_text", "newString"),
    ("replace", "newString"),
    ("cmd", "command"),
    ("script", "command"),
    ("text", "content"),
    ("contents", "content"),
    ("data", "content"),
    ("query", "pattern"),
    ("regex", "pattern"),
    ("glob", "include"),
    ("start_line", "offset"),
    ("line", "offset"),
    ("lines", "limit"),
    ("max_lines", "limit"),
    ("changes", "edits"),
];

/// Finds the tool a model meant: exact name, then another case, a `functions.`-style prefix, a
/// trailing `()`, or a well-known alias (`read_file` → `read`).
pub fn normalize_tool_name<'a>(raw: &str, known: &[&'a str]) -> Option<&'a str> {
    let mut name = raw
        .trim()
        .trim_matches(|c| c == '"' || c == '\'' || c == '`')
        .trim();
    name = name.strip_suffix("()").unwrap_or(name);
    if let Some(k) = known.iter().find(|k| **k == name) {
        return Some(k);
    }
    let lower = name.to_lowercase();
    let mut candidates = vec![lower.clone()];
    for prefix in NAME_PREFIXES {
        if let Some(rest) = lower.strip_prefix(prefix) {
            candidates.push(rest.to_string());
        }
    }
    if let Some((_, last)) = lower.rsplit_once('.') {
        candidates.push(last.to_string());
    }
    for candidate in &candidates {
        if let Some(k) = known.iter().find(|k| k.to_lowercase() == *candidate) {
            return Some(k);
        }
        let squashed = candidate.replace('-', "_");
        if let Some((_, target)) = NAME_ALIASES.iter().find(|(alias, _)| *alias == squashed)
            && let Some(k) = known.iter().find(|k| *k == target)
        {
            return Some(k);
        }
    }
    None
}

/// Turns whatever a model sent as arguments into the object the tool's `parameters` schema
/// describes, as far as that can be done without guessing. The result still goes through strict
/// deserialisation; what is left wrong is reported then.
pub fn repair_arguments(raw: Value, parameters: &Value) -> Result<Value, String> {
    let shape = Shape::of(parameters);
    let required: Vec<&str> = parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut map = to_object(raw, &shape, &required, 0)?;
    for _ in 0..3 {
        match unwrap_once(&map, &shape) {
            Some(inner) => map = to_object(inner, &shape, &required, 0)?,
            None => break,
        }
    }
    rename_fields(&mut map, &shape);
    coerce_types(&mut map, &shape);
    Ok(Value::Object(map))
}

fn to_object(
    raw: Value,
    shape: &Shape<'_>,
    required: &[&str],
    depth: usize,
) -> Result<Map<String, Value>, String> {
    match raw {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map),
        Value::Array(mut items) if items.len() == 1 && items[0].is_object() => {
            to_object(items.remove(0), shape, required, depth + 1)
        }
        Value::String(text) => {
            if depth > 3 {
                return Err("arguments are nested in too many JSON strings".to_string());
            }
            let trimmed = strip_fence(text.trim());
            // JSON from the start, or an object after some prose — the latter only when it names
            // one of the tool's fields, so `echo {"a":1}` stays a command.
            let parsed = first_value(trimmed).or_else(|| {
                let start = trimmed.find('{')?;
                first_value(&trimmed[start..]).filter(|v| {
                    v.as_object().is_some_and(|m| {
                        m.keys()
                            .any(|k| shape.has(k) || WRAPPERS.contains(&k.as_str()))
                    })
                })
            });
            match parsed {
                Some(value @ (Value::Object(_) | Value::String(_) | Value::Array(_))) => {
                    to_object(value, shape, required, depth + 1)
                }
                _ if trimmed.is_empty() => Ok(Map::new()),
                // An object cut short or with a stray comma: closed when that is all it lacks,
                // else the model hears where its JSON went wrong.
                _ if looks_like_json_object(trimmed) => match close_json(trimmed)
                    .and_then(|closed| serde_json::from_str::<Value>(&closed).ok())
                {
                    Some(value) => to_object(value, shape, required, depth + 1),
                    None => Err(invalid_json(trimmed)),
                },
                _ => match single_text_field(shape, required) {
                    // `bash("ls -la")`: the one required text field, given bare.
                    Some(field) => {
                        let mut map = Map::new();
                        map.insert(field.to_string(), Value::String(text));
                        Ok(map)
                    }
                    None => Err(format!(
                        "arguments are not a JSON object: {}",
                        clip(trimmed, 60)
                    )),
                },
            }
        }
        other => Err(format!(
            "arguments must be a JSON object, got {}",
            clip(&other.to_string(), 60)
        )),
    }
}

/// `{` then a key or `}`: JSON an object was meant to be, not a shell block (`{ ls; }`).
fn looks_like_json_object(text: &str) -> bool {
    text.strip_prefix('{')
        .map(str::trim_start)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['"', '}']))
}

/// `text` with commas before a closing bracket dropped and the brackets still open at its end
/// closed, or `None` when it ends inside a string or after a key: nothing is made up.
fn close_json(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 4);
    let mut open = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => open.push('}'),
            '[' => open.push(']'),
            '}' | ']' => {
                if open.pop() != Some(c) {
                    return None;
                }
                let kept = out.trim_end().len();
                out.truncate(kept);
                if out.ends_with(',') {
                    out.pop();
                }
            }
            _ => {}
        }
        out.push(c);
    }
    if in_string {
        return None;
    }
    let kept = out.trim_end().len();
    out.truncate(kept);
    if out.ends_with(',') {
        out.pop();
    }
    if out.ends_with(':') {
        return None;
    }
    out.extend(open.iter().rev());
    Some(out)
}

/// Where JSON arguments stop being JSON, in words a model can act on.
fn invalid_json(text: &str) -> String {
    let Err(error) = serde_json::from_str::<Value>(text) else {
        return "arguments are not a JSON object".to_string();
    };
    // serde counts lines from 1 and bytes within the line from 1, at the byte it stopped on.
    let offset: usize = text
        .split_inclusive('\n')
        .take(error.line().saturating_sub(1))
        .map(str::len)
        .sum();
    let at = if error.classify() == serde_json::error::Category::Eof {
        text.len()
    } else {
        text.floor_char_boundary(offset + error.column().saturating_sub(1))
    };
    let before: String = {
        let chars: Vec<char> = text[..at].chars().collect();
        let from = chars.len().saturating_sub(40);
        let start = if from > 0 { "…" } else { "" };
        format!("{start}{}", chars[from..].iter().collect::<String>())
    };
    let after = clip(&text[at..], 20);
    format!(
        "arguments are not valid JSON ({}, at character {}): {before}⟨here⟩{after}; send them again as one complete JSON object",
        describe_serde_error(&error),
        text[..at].chars().count() + 1
    )
}

fn single_text_field<'a>(shape: &Shape<'a>, required: &[&'a str]) -> Option<&'a str> {
    match required {
        [only] if shape.type_of(only) == Some("string") => Some(only),
        _ => None,
    }
}

/// Parses the first JSON value in `text`, tolerating code fences, leading prose and trailing
/// garbage.
pub fn parse_lenient(text: &str) -> Option<Value> {
    let trimmed = strip_fence(text.trim());
    if let Some(v) = first_value(trimmed) {
        return Some(v);
    }
    let start = trimmed.find(['{', '['])?;
    first_value(&trimmed[start..])
}

fn first_value(text: &str) -> Option<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .next()?
        .ok()
}

fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let body = match rest.find('\n') {
        Some(i) => &rest[i + 1..],
        None => rest,
    };
    match body.rfind("```") {
        Some(end) => body[..end].trim(),
        None => body.trim(),
    }
}

/// One level of wrapping removed, if there is one the schema does not explain.
fn unwrap_once(map: &Map<String, Value>, shape: &Shape<'_>) -> Option<Value> {
    let wrapper_keys: Vec<&String> = map
        .keys()
        .filter(|k| WRAPPERS.contains(&k.as_str()) && !shape.has(k))
        .collect();
    if wrapper_keys.len() != 1 {
        return None;
    }
    let key = wrapper_keys[0];
    // Alone, or beside the tool's name/type (a whole call object sent as its arguments).
    let others_are_call_fields = map.keys().filter(|k| *k != key).all(|k| {
        matches!(k.as_str(), "name" | "tool" | "type" | "id" | "function") && !shape.has(k)
    });
    if !others_are_call_fields {
        return None;
    }
    match &map[key] {
        v @ (Value::Object(_) | Value::String(_) | Value::Null) => Some(v.clone()),
        _ => None,
    }
}

/// `old_string` → `oldString`, `Path` → `path`, `file_path` → `path`.
fn rename_fields(map: &mut Map<String, Value>, shape: &Shape<'_>) {
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if shape.has(&key) {
            continue;
        }
        let squashed = squash(&key);
        let by_case = shape
            .properties
            .iter()
            .find(|(p, _)| squash(p) == squashed)
            .map(|(p, _)| *p);
        let by_alias = || {
            FIELD_ALIASES
                .iter()
                .find(|(alias, target)| squash(alias) == squashed && shape.has(target))
                .map(|(_, target)| *target)
        };
        if let Some(target) = by_case.or_else(by_alias)
            && !map.contains_key(target)
            && let Some(value) = map.remove(&key)
        {
            map.insert(target.to_string(), value);
        }
    }
}

fn squash(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Numbers and booleans sent as strings, arrays sent as JSON text, `null` for optional fields.
fn coerce_types(map: &mut Map<String, Value>, shape: &Shape<'_>) {
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let Some(expected) = shape.type_of(&key) else {
            continue;
        };
        let Some(value) = map.get_mut(&key) else {
            continue;
        };
        let replacement = match (expected, &*value) {
            ("integer", Value::String(s)) => s.trim().parse::<i64>().ok().map(Value::from),
            ("integer", Value::Number(n)) if n.is_f64() => n
                .as_f64()
                .filter(|f| f.fract() == 0.0)
                .map(|f| Value::from(f as i64)),
            ("number", Value::String(s)) => s.trim().parse::<f64>().ok().map(Value::from),
            ("boolean", Value::String(s)) => match s.trim().to_lowercase().as_str() {
                "true" | "yes" | "1" => Some(Value::Bool(true)),
                "false" | "no" | "0" => Some(Value::Bool(false)),
                _ => None,
            },
            ("boolean", Value::Number(n)) => n.as_i64().map(|i| Value::Bool(i != 0)),
            ("string", Value::Number(n)) => Some(Value::String(n.to_string())),
            ("array", Value::String(s)) => parse_lenient(s).filter(Value::is_array),
            ("array", Value::Object(_)) => Some(Value::Array(vec![value.clone()])),
            _ => None,
        };
        if let Some(replacement) = replacement {
            *value = replacement;
        }
    }
}

/// A serde error in a few words, without line/column noise.
pub fn describe_serde_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.find(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}

/// A tool call found in the text of a model that has no native tool calling.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCall {
    /// The tool's canonical name.
    pub name: String,
    /// The arguments as written (repair them with the tool's schema before use).
    pub arguments: Value,
}

/// Finds tool calls written as JSON in a model's text: fenced ```json blocks or bare objects such as
/// `{"name": "read", "arguments": {...}}`, `{"tool": ..., "args": ...}`, `{"function": {...}}` or
/// `<tool_call>{...}</tool_call>`. Only objects naming a known tool count, so JSON the model merely
/// shows (a package.json) is not mistaken for a call.
pub fn calls_from_text(text: &str, known: &[&str]) -> Vec<TextCall> {
    let mut calls = Vec::new();
    let mut i = 0;
    while let Some(offset) = text[i..].find('{') {
        let start = i + offset;
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(value)) => {
                let end = start + stream.byte_offset();
                if let Some(call) = call_from_value(&value, known) {
                    calls.push(call);
                    i = end;
                } else {
                    i = start + 1;
                }
            }
            _ => {
                // A call cut short or followed by junk inside its object (a small model writing
                // on past `arguments` until its token limit): its complete leading members.
                if let Some(call) = leading_members(&text[start..])
                    .filter(|map| WRAPPERS.iter().any(|k| map.contains_key(*k)))
                    .and_then(|map| call_from_value(&Value::Object(map), known))
                {
                    calls.push(call);
                }
                i = start + 1;
            }
        }
    }
    calls
}

/// The members of the object `text` starts with that are whole JSON, up to the first that is
/// not; nothing after it is guessed.
fn leading_members(text: &str) -> Option<Map<String, Value>> {
    let mut rest = text.strip_prefix('{')?;
    let mut map = Map::new();
    loop {
        rest = rest.trim_start();
        let mut keys = serde_json::Deserializer::from_str(rest).into_iter::<String>();
        let Some(Ok(key)) = keys.next() else { break };
        rest = rest[keys.byte_offset()..].trim_start();
        let Some(after) = rest.strip_prefix(':') else {
            break;
        };
        let mut values = serde_json::Deserializer::from_str(after).into_iter::<Value>();
        let Some(Ok(value)) = values.next() else {
            break;
        };
        map.insert(key, value);
        rest = after[values.byte_offset()..].trim_start();
        match rest.strip_prefix(',') {
            Some(next) => rest = next,
            None => break,
        }
    }
    (!map.is_empty()).then_some(map)
}

fn call_from_value(value: &Value, known: &[&str]) -> Option<TextCall> {
    let map = value.as_object()?;
    for nested in ["function", "tool_call", "toolCall", "function_call"] {
        if let Some(inner @ Value::Object(_)) = map.get(nested)
            && let Some(call) = call_from_value(inner, known)
        {
            return Some(call);
        }
    }
    let raw_name = ["name", "tool", "tool_name", "toolName", "function"]
        .iter()
        .find_map(|k| map.get(*k).and_then(Value::as_str))?;
    let name = normalize_tool_name(raw_name, known)?;
    let arguments = WRAPPERS
        .iter()
        .find_map(|k| map.get(*k))
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    Some(TextCall {
        name: name.to_string(),
        arguments,
    })
}

/// The tools described in a system prompt for a model that is given no native ones: one call
/// shape, which [`calls_from_text`] reads back, shown as a real call (a placeholder name gets
/// copied by small models), and one line per tool with its arguments. `tools` are `(name,
/// parameters schema, description)`. With `constrained`, the server holds every answer to one
/// JSON object, so the final answer has its own shape too ([`answer_from_json`] reads it).
pub fn text_tools_prompt<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a Value, &'a str)>,
    constrained: bool,
    done: bool,
) -> String {
    let tools: Vec<(&str, &Value, &str)> = tools.into_iter().collect();
    let names: Vec<&str> = tools.iter().map(|(n, _, _)| *n).collect();
    let example = example_call(&names);
    let mut out = if constrained && done {
        format!(
            "Answer with one JSON object. To call a tool, write the tool's name and its arguments, e.g. {example}, then wait for the result. Start by looking at the files the task is about. Only when the work is done, write {DONE}; you are then asked for your answer in plain words.\nTools:\n"
        )
    } else if constrained {
        format!(
            "Answer with one JSON object. To call a tool, write the tool's name and its arguments, e.g. {example}, then wait for the result. Start by looking at the files the task is about. Only when the work is done, write an object with the one key \"answer\": one sentence, in your own words, on what you changed or found.\nTools:\n"
        )
    } else {
        format!(
            "Tools: call one by writing only a JSON object with the tool's name and its arguments, e.g. {example}, then wait for the result. When the task is done, answer in plain words.\n"
        )
    };
    for (name, parameters, description) in tools {
        out.push_str(&format!(
            "- {name} {}: {description}\n",
            crate::schema::signature(parameters)
        ));
    }
    out
}

/// A real, harmless call of one of `names` for the prompt's example: listing the project root.
fn example_call(names: &[&str]) -> String {
    let (name, arguments) = if names.contains(&"list") {
        ("list", r#"{"path": "."}"#)
    } else if names.contains(&"read") {
        ("read", r#"{"path": "README.md"}"#)
    } else if names.contains(&"glob") {
        ("glob", r#"{"pattern": "**/*.js"}"#)
    } else {
        (names.first().copied().unwrap_or("list"), "{}")
    };
    format!(r#"{{"name": "{name}", "arguments": {arguments}}}"#)
}

/// The step that ends a constrained run whose answer is asked for next, in plain words
/// ([`answer_schema`] with `done`).
pub const DONE: &str = r#"{"done": true}"#;

/// Whether `text` is the [`DONE`] object (spaces aside).
pub fn is_done(text: &str) -> bool {
    serde_json::from_str::<Value>(text.trim()).is_ok_and(|v| v == serde_json::json!({"done": true}))
}

/// The JSON schema a server holds a constrained answer to: one call of one of `tools` (`name`
/// fixed to the tool's, `arguments` its parameters schema) or, with `answer`, a final
/// `{"answer": text}` (with `done`, [`DONE`] instead). Tools without properties accept any object as arguments. A run's first
/// step offers no answer: a small model otherwise answers before it has looked at anything.
pub fn answer_schema<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a Value)>,
    answer: bool,
    done: bool,
) -> Value {
    let mut branches: Vec<Value> = tools
        .into_iter()
        .map(|(name, parameters)| {
            serde_json::json!({
                "type": "object",
                "properties": {
                    "name": {"const": name},
                    "arguments": grammar_safe(parameters),
                },
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    if done && (answer || branches.is_empty()) {
        branches.push(serde_json::json!({
            "type": "object",
            "properties": {"done": {"const": true}},
            "required": ["done"],
            "additionalProperties": false,
        }));
    } else if answer || branches.is_empty() {
        branches.push(serde_json::json!({
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": false,
        }));
    }
    serde_json::json!({ "oneOf": branches })
}

/// A tool's parameters schema as grammar engines take it: the keys that only document
/// (`description`, `title`, `examples`, `default`, `$schema`) dropped, `pattern` dropped (llama.cpp
/// refuses the patterns it cannot turn into a grammar), everything else kept.
fn grammar_safe(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                match key.as_str() {
                    "description" | "title" | "examples" | "default" | "$schema" | "pattern"
                    | "format" => {}
                    "properties" => {
                        let props = value
                            .as_object()
                            .map(|p| {
                                p.iter()
                                    .map(|(k, v)| (k.clone(), grammar_safe(v)))
                                    .collect::<Map<String, Value>>()
                            })
                            .unwrap_or_default();
                        out.insert(key.clone(), Value::Object(props));
                    }
                    _ => {
                        out.insert(key.clone(), grammar_safe(value));
                    }
                }
            }
            if !out.contains_key("type") && out.get("properties").is_some() {
                out.insert("type".into(), "object".into());
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(grammar_safe).collect()),
        other => other.clone(),
    }
}

/// The final answer of a constrained step (`{"answer": "..."}`), or `None` when `text` is not one.
pub fn answer_from_json(text: &str) -> Option<String> {
    let value: Value = serde_json::from_str(text.trim()).ok()?;
    let map = value.as_object()?;
    if map.len() != 1 {
        return None;
    }
    map.get("answer")?.as_str().map(str::to_owned)
}

/// A JSON object in `text` written as a tool call (`{"name": ..., "arguments": ...}` and the
/// other shapes [`calls_from_text`] reads) that names no known tool, or that is not valid JSON:
/// what the model is told so it can write the call again.
#[derive(Debug, Clone, PartialEq)]
pub enum BadCall {
    /// A call of a tool that does not exist (`name` as written).
    UnknownTool {
        /// The name the model wrote.
        name: String,
        /// The arguments as written.
        arguments: Value,
    },
    /// Something that starts like a call but is not JSON: the parse error.
    Unreadable {
        /// Where and how the JSON goes wrong.
        error: String,
    },
}

/// Looks for a call [`calls_from_text`] could not take: call-shaped JSON naming an unknown tool, or
/// an object that starts like a call (`{"name": "...", "arguments"` …) but does not parse (a
/// comment inside, a missing bracket). `None` when the text holds nothing like a call.
pub fn bad_call_in_text(text: &str) -> Option<BadCall> {
    let mut i = 0;
    while let Some(offset) = text[i..].find('{') {
        let start = i + offset;
        let rest = &text[start..];
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        match stream.next() {
            Some(Ok(Value::Object(map))) => {
                if let Some((name, arguments)) = call_name(&map) {
                    return Some(BadCall::UnknownTool { name, arguments });
                }
                i = start + stream.byte_offset().max(1);
                continue;
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => {
                if starts_like_call(rest) {
                    let body = rest.trim_end();
                    let body = body.rfind('}').map_or(body, |end| &body[..=end]);
                    let error = match serde_json::from_str::<Value>(body) {
                        Err(e) => invalid_json_at(body, &e),
                        Ok(_) => "the call is not one JSON object".to_string(),
                    };
                    return Some(BadCall::Unreadable { error });
                }
            }
        }
        i = start + 1;
    }
    None
}

/// The tool name of a call-shaped object: a name key and an arguments key (or a nested
/// `function` object that has them).
fn call_name(map: &Map<String, Value>) -> Option<(String, Value)> {
    for nested in ["function", "tool_call", "toolCall", "function_call"] {
        if let Some(Value::Object(inner)) = map.get(nested)
            && let Some(found) = call_name(inner)
        {
            return Some(found);
        }
    }
    let name = ["name", "tool", "tool_name", "toolName", "function"]
        .iter()
        .find_map(|k| map.get(*k).and_then(Value::as_str))?;
    let arguments = WRAPPERS.iter().find_map(|k| map.get(*k))?;
    Some((name.to_string(), arguments.clone()))
}

/// `{"name": "…", "arguments"`-like openings (in either order of the first two keys).
fn starts_like_call(text: &str) -> bool {
    let head: String = text.chars().take(200).collect();
    let keys = ["\"name\"", "\"tool\"", "\"function\""];
    let has_name = keys.iter().any(|k| head.contains(k));
    let has_args = WRAPPERS.iter().any(|w| head.contains(&format!("\"{w}\"")));
    head.trim_start_matches('{').trim_start().starts_with('"') && has_name && has_args
}

/// A parse error in words, with the text around where it happened.
fn invalid_json_at(text: &str, error: &serde_json::Error) -> String {
    let offset: usize = text
        .split_inclusive('\n')
        .take(error.line().saturating_sub(1))
        .map(str::len)
        .sum();
    let at = text.floor_char_boundary((offset + error.column().saturating_sub(1)).min(text.len()));
    let before: String = {
        let chars: Vec<char> = text[..at].chars().collect();
        let from = chars.len().saturating_sub(30);
        chars[from..].iter().collect()
    };
    format!(
        "{} near: {before}⟨here⟩{}",
        describe_serde_error(error),
        clip(&text[at..], 20)
    )
}

/// Notices a model calling the same tool with the same arguments again and again.
#[derive(Debug, Default)]
pub struct RepeatGuard {
    last: Option<(String, Value)>,
    count: usize,
}

impl RepeatGuard {
    /// How many times in a row the run has now made exactly this call — record every call.
    pub fn record(&mut self, name: &str, arguments: &Value) -> usize {
        match &self.last {
            Some((n, a)) if n == name && a == arguments => self.count += 1,
            _ => {
                self.last = Some((name.to_string(), arguments.clone()));
                self.count = 1;
            }
        }
        self.count
    }

    /// How many times in a row the last recorded call was made.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The tool of the last call when it was made at least twice in a row with the same
    /// arguments.
    pub fn repeated(&self) -> Option<&str> {
        self.last
            .as_ref()
            .filter(|_| self.count >= 2)
            .map(|(name, _)| name.as_str())
    }

    /// True when the last recorded call was the third (or later) identical one in a row: stop the
    /// call and tell the model to change course.
    pub fn is_stuck(&self) -> bool {
        self.count >= 3
    }

    /// The message for the model when it is stuck.
    pub fn message(&self) -> String {
        let name = self.last.as_ref().map_or("", |(n, _)| n.as_str());
        format!(
            "stopped: {name} was called {} times in a row with the same arguments. \
             Change the arguments or try a different approach.",
            self.count
        )
    }
}
