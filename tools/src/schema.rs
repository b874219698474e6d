//! Turns a tool's input type into the small, flat JSON Schema the model sees.
//!
//! schemars writes a complete schema; small models do better with less. We inline every subschema
//! and drop what carries no meaning for the model: `$schema`, `title`, `format`, `$defs`,
//! `additionalProperties` (unknown fields are refused on our side anyway) and `null` in the type of
//! optional fields (an optional field is simply not in `required`).

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The flattened parameter schema for `T`.
pub fn parameters<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    simplify(&mut value);
    if let Value::Object(map) = &mut value {
        // The tool's own description says what it does; the struct's doc would repeat it.
        map.remove("description");
        if !map.contains_key("properties") {
            map.insert("properties".into(), Value::Object(Map::new()));
        }
    }
    value
}

fn simplify(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for key in [
                "$schema",
                "title",
                "format",
                "$defs",
                "definitions",
                "additionalProperties",
            ] {
                map.remove(key);
            }
            if map.get("default").is_some_and(Value::is_null) {
                map.remove("default");
            }
            if let Some(Value::Array(types)) = map.get("type") {
                let kept: Vec<Value> = types
                    .iter()
                    .filter(|t| t.as_str() != Some("null"))
                    .cloned()
                    .collect();
                if kept.len() == 1 {
                    map.insert("type".into(), kept[0].clone());
                }
            }
            // `Option<Enum>` comes out as anyOf [enum, null]; keep the enum.
            if let Some(Value::Array(any)) = map.get("anyOf") {
                let kept: Vec<Value> = any
                    .iter()
                    .filter(|s| s.get("type").and_then(Value::as_str) != Some("null"))
                    .cloned()
                    .collect();
                if kept.len() == 1
                    && let Value::Object(inner) = &kept[0]
                {
                    let inner = inner.clone();
                    map.remove("anyOf");
                    for (k, v) in inner {
                        map.entry(k).or_insert(v);
                    }
                }
            }
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            for v in map.values_mut() {
                simplify(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(simplify),
        _ => {}
    }
}

/// A one-line summary of the expected arguments for error messages:
/// `{path: string, offset?: integer}`.
pub fn signature(parameters: &Value) -> String {
    let required: Vec<&str> = parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = parameters.get("properties").and_then(Value::as_object) else {
        return "{}".to_string();
    };
    let fields: Vec<String> = props
        .iter()
        .map(|(name, schema)| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!("{name}{optional}: {}", type_name(schema))
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

fn type_name(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let names: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        return names.join("|");
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("array") => match schema.get("items") {
            Some(items) if items.get("properties").is_some() => {
                format!("[{}]", signature(items))
            }
            Some(items) => format!("[{}]", type_name(items)),
            None => "array".to_string(),
        },
        Some(t) => t.to_string(),
        None => "value".to_string(),
    }
}

/// Property names, their JSON types and the required ones, as the repair step needs them.
pub(crate) struct Shape<'a> {
    pub properties: Vec<(&'a str, &'a str)>,
}

impl<'a> Shape<'a> {
    pub fn of(parameters: &'a Value) -> Self {
        let properties = parameters
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                p.iter()
                    .map(|(k, v)| {
                        let t = v.get("type").and_then(Value::as_str).unwrap_or("");
                        (k.as_str(), t)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self { properties }
    }

    pub fn has(&self, name: &str) -> bool {
        self.properties.iter().any(|(k, _)| *k == name)
    }

    pub fn type_of(&self, name: &str) -> Option<&'a str> {
        self.properties
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, t)| *t)
    }
}
