//! The tool list, generated from the protocol's method table: every method marked `mcp` is a
//! tool named after it (`session.ask` → `session_ask`), described by its doc line, taking its
//! params and answering its result. Nothing here lists a method by hand.
//!
//! The schemas are made portable for clients that are strict about them (the MCP Inspector's
//! `--strict`, SDKs that validate formats, model APIs with a JSON Schema subset): only standard
//! formats, no schema that constrains nothing, `anyOf` instead of type arrays, each definition
//! once; output schemas carry no descriptions (the tool's description and the protocol's README
//! say what a result means), which halves the tool list.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde_json::Value;
use totem_protocol::{METHODS, MethodInfo};

/// One tool and the protocol method it calls.
#[derive(Debug, Clone)]
pub struct McpTool {
    /// What MCP clients see: name, description, input schema.
    pub tool: Tool,
    /// The protocol method the tool calls.
    pub method: &'static str,
}

/// The tool name of a method: its name with `_` for `.` (names with dots trouble some clients).
pub fn tool_name(method: &str) -> String {
    method.replace('.', "_")
}

/// Every tool, in the order of the method table.
pub fn tools() -> &'static [McpTool] {
    static TOOLS: OnceLock<Vec<McpTool>> = OnceLock::new();
    TOOLS.get_or_init(|| METHODS.iter().filter(|m| m.mcp).map(tool).collect())
}

/// A daemon message put in the words of this server's tools: protocol methods named by their
/// tool names (`session.list` → `session_list`), and the ones with no tool (`project.open`,
/// `session.prompt`) by what the caller can do instead.
pub fn in_tool_words(message: &str) -> String {
    let mut text = message
        .replace(
            "open one with `project.open {path}`",
            "project_list names the open ones",
        )
        .replace(" or session.prompt", "");
    for m in METHODS.iter().filter(|m| m.mcp) {
        text = text.replace(m.name, &tool_name(m.name));
    }
    text
}

/// The tool called `name`, if there is one.
pub fn find(name: &str) -> Option<&'static McpTool> {
    tools().iter().find(|t| t.tool.name == name)
}

fn tool(m: &MethodInfo) -> McpTool {
    let input = object_schema(
        m.params_schema,
        SchemaSettings::draft2020_12().for_deserialize(),
        Side::Input,
    );
    let output = object_schema(
        m.result_schema,
        SchemaSettings::draft2020_12().for_serialize(),
        Side::Output,
    );
    let mut tool = Tool::new(
        Cow::Owned(tool_name(m.name)),
        Cow::Owned(description(m.doc)),
        Arc::new(input),
    );
    tool = tool.with_raw_output_schema(Arc::new(output));
    if let Some(annotations) = annotations(m.name) {
        tool = tool.annotate(annotations);
    }
    McpTool {
        tool,
        method: m.name,
    }
}

/// What a tool does to the world, from its method's verb (the part after the last `.`): reading
/// verbs change nothing; `create` adds; `ask` runs the agent, which may change files; `abort`
/// stops a run. `None` for a verb not known here (clients then assume the worst).
fn annotations(method: &str) -> Option<ToolAnnotations> {
    let verb = method.rsplit('.').next().unwrap_or(method);
    let hints = ToolAnnotations::new().open_world(false);
    Some(match verb {
        "list" | "get" | "messages" | "diff" | "wait" | "check" => {
            hints.read_only(true).idempotent(true)
        }
        "create" => hints.read_only(false).destructive(false).idempotent(false),
        "ask" => hints.read_only(false).destructive(true).idempotent(false),
        "abort" => hints.read_only(false).destructive(true).idempotent(true),
        _ => return None,
    })
}

/// The method's doc as one paragraph: models read it, so line breaks carry nothing.
fn description(doc: &str) -> String {
    doc.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Which way a schema describes data: what the tool takes or what it answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Input,
    Output,
}

/// A self-contained JSON Schema object: the type's own schema at the top (tools need
/// `"type": "object"` there, not a `$ref`), the definitions it still refers to under `$defs`,
/// made portable (see the module's doc).
fn object_schema(
    make: fn(&mut SchemaGenerator) -> Schema,
    settings: SchemaSettings,
    side: Side,
) -> JsonObject {
    let mut generator = settings.into_generator();
    let schema = make(&mut generator).to_value();
    let defs = generator.take_definitions(true);
    let mut object = match schema {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    };
    let referenced = object
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .map(str::to_string);
    if let Some(name) = referenced
        && let Some(Value::Object(def)) = defs.get(&name)
    {
        object.remove("$ref");
        for (key, value) in def {
            object.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    // Everything else refers to definitions by `#/$defs/…`, which stay beside it; the ones
    // nothing refers to any more (the type inlined above) go.
    let defs = referenced_defs(&object, defs);
    if !defs.is_empty() {
        object.insert("$defs".into(), Value::Object(defs));
    }
    object
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    let mut schema = Value::Object(object);
    portable(&mut schema, side);
    match schema {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

/// The definitions reachable from `root` through `$ref`s, following refs inside definitions.
fn referenced_defs(root: &JsonObject, mut defs: JsonObject) -> JsonObject {
    let mut wanted: Vec<String> = Vec::new();
    let mut queue = vec![Value::Object(root.clone())];
    while let Some(value) = queue.pop() {
        for name in refs(&value) {
            if !wanted.contains(&name) {
                if let Some(def) = defs.get(&name) {
                    queue.push(def.clone());
                }
                wanted.push(name);
            }
        }
    }
    defs.retain(|name, _| wanted.contains(name));
    defs
}

/// The definition names `value` refers to (`#/$defs/NAME`), anywhere inside it.
fn refs(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(object) => {
                if let Some(name) = object
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                {
                    out.push(name.to_string());
                }
                stack.extend(object.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    out
}

/// The formats JSON Schema (2020-12) defines; others (`uint64`, `double`, …) are schemars' own
/// and make validating clients complain.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keywords whose value is a map of names to schemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is one schema.
const SCHEMA_ONE: &[&str] = &[
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
];
/// Keywords whose value is a list of schemas.
const SCHEMA_LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];

/// Rewrites one schema (and every schema inside it) into the portable spelling.
fn portable(schema: &mut Value, side: Side) {
    if constrains_nothing(schema) {
        // Any JSON value, said with keywords a strict client accepts.
        *schema = serde_json::json!({"anyOf": [
            {"type": "object"}, {"type": "array"}, {"type": "string"},
            {"type": "number"}, {"type": "boolean"}, {"type": "null"}
        ]});
        return;
    }
    let Value::Object(object) = schema else {
        return;
    };
    if object
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
    {
        object.remove("format");
    }
    if side == Side::Output {
        object.remove("description");
    }
    // `"type": ["string", "null"]`: an optional input is simply left out, so the type alone
    // says it; an answer may hold null, so it becomes `anyOf`.
    if let Some(Value::Array(types)) = object.get("type").cloned() {
        let others: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        let nullable = others.len() < types.len();
        match (side, others.as_slice()) {
            (Side::Input, [one]) => {
                object.insert("type".into(), one.clone());
            }
            _ => {
                object.remove("type");
                // Keywords for one type go into that type's branch: beside an `anyOf` with no
                // `type`, strict validators (ajv's strictTypes) refuse them.
                let mut branches: Vec<Value> = others
                    .into_iter()
                    .map(|t| {
                        let mut branch = JsonObject::new();
                        let kind = t.as_str().unwrap_or_default();
                        for keyword in keywords_of(kind) {
                            if let Some(value) = object.remove(*keyword) {
                                branch.insert((*keyword).to_string(), value);
                            }
                        }
                        branch.insert("type".into(), t);
                        Value::Object(branch)
                    })
                    .collect();
                if nullable {
                    branches.push(serde_json::json!({"type": "null"}));
                }
                object.insert("anyOf".into(), Value::Array(branches));
            }
        }
    }
    for (key, value) in object.iter_mut() {
        if SCHEMA_MAPS.contains(&key.as_str()) {
            if let Value::Object(map) = value {
                map.values_mut().for_each(|s| portable(s, side));
            }
        } else if SCHEMA_ONE.contains(&key.as_str()) {
            portable(value, side);
        } else if SCHEMA_LISTS.contains(&key.as_str())
            && let Value::Array(list) = value
        {
            list.iter_mut().for_each(|s| portable(s, side));
        }
    }
}

/// The keywords that apply to values of one JSON type only.
fn keywords_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "number" | "integer" => &[
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        ],
        "string" => &[
            "minLength",
            "maxLength",
            "pattern",
            "format",
            "contentEncoding",
            "contentMediaType",
        ],
        "array" => &[
            "items",
            "prefixItems",
            "minItems",
            "maxItems",
            "uniqueItems",
            "contains",
            "minContains",
            "maxContains",
            "unevaluatedItems",
        ],
        "object" => &[
            "properties",
            "required",
            "additionalProperties",
            "patternProperties",
            "propertyNames",
            "minProperties",
            "maxProperties",
            "dependentRequired",
            "dependentSchemas",
            "unevaluatedProperties",
        ],
        _ => &[],
    }
}

/// `true`, or an object with no keyword that says anything about the value.
fn constrains_nothing(schema: &Value) -> bool {
    const SAYS_NOTHING: &[&str] = &["description", "title", "default", "examples", "$comment"];
    match schema {
        Value::Bool(true) => true,
        Value::Object(object) => object.keys().all(|k| SAYS_NOTHING.contains(&k.as_str())),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mcp_method_is_a_tool_with_object_schemas() {
        let marked: Vec<&str> = METHODS.iter().filter(|m| m.mcp).map(|m| m.name).collect();
        let named: Vec<&str> = tools().iter().map(|t| t.method).collect();
        assert_eq!(marked, named);
        for t in tools() {
            assert!(!t.tool.name.contains('.'), "{}", t.tool.name);
            assert_eq!(t.tool.input_schema["type"], "object", "{}", t.tool.name);
            let output = t.tool.output_schema.as_ref().expect("an output schema");
            assert_eq!(output["type"], "object", "{}", t.tool.name);
            assert!(!output.contains_key("$ref"), "{}", t.tool.name);
            let description = t.tool.description.as_deref().unwrap_or("");
            assert!(
                !description.is_empty() && !description.contains('\n'),
                "{description}"
            );
        }
    }

    /// Every schema inside `value`, with its path, for checks over all of them.
    fn walk<'a>(value: &'a Value, path: String, out: &mut Vec<(String, &'a Value)>) {
        out.push((path.clone(), value));
        if let Value::Object(object) = value {
            for (key, child) in object {
                if SCHEMA_MAPS.contains(&key.as_str()) {
                    for (name, s) in child.as_object().into_iter().flatten() {
                        walk(s, format!("{path}.{key}.{name}"), out);
                    }
                } else if SCHEMA_ONE.contains(&key.as_str()) {
                    walk(child, format!("{path}.{key}"), out);
                } else if SCHEMA_LISTS.contains(&key.as_str()) {
                    for (i, s) in child.as_array().into_iter().flatten().enumerate() {
                        walk(s, format!("{path}.{key}[{i}]"), out);
                    }
                }
            }
        }
    }

    #[test]
    fn schemas_are_portable_and_small() {
        let mut total = 0;
        for t in tools() {
            let schemas = [
                Value::Object((*t.tool.input_schema).clone()),
                Value::Object(t.tool.output_schema.as_deref().cloned().unwrap_or_default()),
            ];
            for (side, schema) in schemas.iter().enumerate() {
                total += schema.to_string().len();
                let mut all = Vec::new();
                walk(schema, t.tool.name.to_string(), &mut all);
                for (path, s) in all {
                    assert!(!constrains_nothing(s), "{path} constrains nothing");
                    assert!(!s["type"].is_array(), "{path} has a type array");
                    if let Some(format) = s["format"].as_str() {
                        assert!(STANDARD_FORMATS.contains(&format), "{path}: {format}");
                    }
                    if side == 1 {
                        assert!(s.get("description").is_none(), "{path} has a description");
                    }
                    // Strict validators want a keyword for one type beside that `type`.
                    if s.get("type").is_none() {
                        for kind in ["number", "string", "array", "object"] {
                            for keyword in keywords_of(kind) {
                                assert!(
                                    s.get(*keyword).is_none(),
                                    "{path}: {keyword} without type"
                                );
                            }
                        }
                    }
                }
                // Each definition is referred to (none left over from inlining).
                let defs = schema["$defs"].as_object().cloned().unwrap_or_default();
                let used = refs(schema);
                for name in defs.keys() {
                    assert!(used.contains(name), "{}: $defs.{name} unused", t.tool.name);
                }
            }
        }
        // The list was 42.6 KB (compact JSON) before it was made portable, under 22 KB after. The
        // input fields' descriptions (totem-protocol's docs, 6dacc39) brought it to 23.9 KB: they
        // are kept, since they tell the host's model what each argument means. The third round
        // (a terminal shared with the model, where a server takes the output limit, a project's
        // kind) brought it to 25.3 KB.
        assert!(total < 26_000, "the tool schemas take {total} bytes");
    }

    #[test]
    fn errors_name_tools_not_methods() {
        assert_eq!(
            in_tool_words("no session ses_1; list sessions with `session.list`"),
            "no session ses_1; list sessions with `session_list`"
        );
        assert_eq!(
            in_tool_words("no run run_1; a run id comes from session.ask or session.prompt"),
            "no run run_1; a run id comes from session_ask"
        );
        assert_eq!(
            in_tool_words("no project prj_1; open one with `project.open {path}`"),
            "no project prj_1; project_list names the open ones"
        );
    }

    #[test]
    fn tools_say_what_they_do_to_the_world() {
        let hint = |name: &str| {
            find(name)
                .and_then(|t| t.tool.annotations.clone())
                .unwrap_or_else(|| panic!("{name} has annotations"))
        };
        assert_eq!(hint("session_list").read_only_hint, Some(true));
        assert_eq!(hint("run_wait").read_only_hint, Some(true));
        assert_eq!(hint("model_list").read_only_hint, Some(true));
        assert_eq!(hint("session_ask").destructive_hint, Some(true));
        assert_eq!(hint("session_create").destructive_hint, Some(false));
        assert_eq!(hint("session_abort").idempotent_hint, Some(true));
        for t in tools() {
            assert!(
                t.tool.annotations.is_some(),
                "{} has annotations",
                t.tool.name
            );
        }
    }

    #[test]
    fn session_ask_takes_no_permission_rules() {
        let ask = find("session_ask").expect("session_ask");
        let properties = ask.tool.input_schema["properties"]
            .as_object()
            .expect("properties");
        assert!(properties.contains_key("sessionId") && properties.contains_key("text"));
        assert!(!properties.contains_key("allow"));
        assert!(find("session_prompt").is_none());
    }
}
