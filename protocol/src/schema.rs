//! The JSON Schema of the whole protocol, generated from the types. `protocol/schema/protocol.json`
//! is this document, checked in; a test fails when the two differ.

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::events::NOTIFICATIONS;
use crate::{ERROR_CODES, METHODS, PROTOCOL_VERSION};

/// Builds the protocol document: methods (params and result schemas), notifications, error codes
/// and the shared definitions they reference.
pub fn protocol_schema() -> Value {
    let mut generator = SchemaGenerator::new(SchemaSettings::draft2020_12());
    let mut methods = Map::new();
    for m in METHODS {
        let params = (m.params_schema)(&mut generator);
        let result = (m.result_schema)(&mut generator);
        methods.insert(
            m.name.to_string(),
            json!({
                "description": m.doc.trim(),
                "mcp": m.mcp,
                "subscription": m.subscription,
                "params": params,
                "result": result,
            }),
        );
    }
    let mut notifications = Map::new();
    for n in NOTIFICATIONS {
        let result = (n.result_schema)(&mut generator);
        notifications.insert(
            n.name.to_string(),
            json!({ "description": n.doc, "result": result }),
        );
    }
    let errors: Vec<Value> = ERROR_CODES
        .iter()
        .map(|e| json!({ "code": e.code.0, "name": e.name, "meaning": e.meaning }))
        .collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Totem protocol",
        "protocolVersion": PROTOCOL_VERSION,
        "methods": methods,
        "notifications": notifications,
        "errors": errors,
        "$defs": generator.take_definitions(true),
    })
}

/// The document as the checked-in file holds it: pretty JSON with a final newline.
pub fn protocol_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&protocol_schema()).unwrap_or_default();
    text.push('\n');
    text
}
