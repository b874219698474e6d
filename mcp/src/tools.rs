//! The tool list, generated from the protocol's method table: every method marked `mcp` is a
//! tool named after it (`session.ask` → `session_ask`), described by its doc line, taking its
//! params and answering its result. Nothing here lists a method by hand.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool};
use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde_json::Value;
use totem_protocol::{METHODS, MethodInfo};

/// One tool and the protocol method it calls.
#[derive(Debug, Clone)]
pub struct McpTool {
    pub tool: Tool,
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

/// The tool called `name`, if there is one.
pub fn find(name: &str) -> Option<&'static McpTool> {
    tools().iter().find(|t| t.tool.name == name)
}

fn tool(m: &MethodInfo) -> McpTool {
    let input = object_schema(
        m.params_schema,
        SchemaSettings::draft2020_12().for_deserialize(),
    );
    let output = object_schema(
        m.result_schema,
        SchemaSettings::draft2020_12().for_serialize(),
    );
    let mut tool = Tool::new(
        Cow::Owned(tool_name(m.name)),
        Cow::Owned(description(m.doc)),
        Arc::new(input),
    );
    tool = tool.with_raw_output_schema(Arc::new(output));
    McpTool {
        tool,
        method: m.name,
    }
}

/// The method's doc as one paragraph: models read it, so line breaks carry nothing.
fn description(doc: &str) -> String {
    doc.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A self-contained JSON Schema object: the type's own schema at the top (tools need
/// `"type": "object"` there, not a `$ref`), the definitions it refers to under `$defs`.
fn object_schema(make: fn(&mut SchemaGenerator) -> Schema, settings: SchemaSettings) -> JsonObject {
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
    // Everything else refers to definitions by `#/$defs/…`, which stay beside it.
    if !defs.is_empty() {
        object.insert("$defs".into(), Value::Object(defs));
    }
    object
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    object
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
