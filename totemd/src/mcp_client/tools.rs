//! What the model sees of the servers: their tools under namespaced names (`server_tool`, only
//! the characters every provider accepts), one `mcp_prompt` tool for their prompts, one
//! `mcp_resource` tool to list and read their resources, and results turned into capped text.
//!
//! Plan mode offers an MCP tool only when the server marks it `readOnlyHint: true`. The hint is
//! the server's word, not a guarantee; a server the user allowed to start is trusted that far, and
//! calls still go through the permission rules (`mcp` asks by default). `mcp_prompt` and
//! `mcp_resource` only read, so Plan mode offers them too.

use serde_json::{Value, json};

use super::client::CallOutcome;

/// The one tool that gets a prompt of any server.
pub const PROMPT_TOOL: &str = "mcp_prompt";

/// The one tool that lists and reads the resources of any server.
pub const RESOURCE_TOOL: &str = "mcp_resource";

/// Longest text a result gives the model, as for the built-in tools' output.
pub const MAX_TEXT: usize = 30_000;

/// Longest namespaced name providers accept.
const MAX_NAME: usize = 64;

/// A server's tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    /// The name the model calls (`everything_echo`).
    pub exposed: String,
    /// The server's name in settings.
    pub server: String,
    /// The tool's own name on its server.
    pub tool: String,
    /// What the tool does, as the server describes it.
    pub description: String,
    /// The tool's input JSON Schema.
    pub parameters: Value,
    /// The server marks the tool read-only (`readOnlyHint`), so read-only runs may call it.
    pub read_only: bool,
}

impl OfferedTool {
    /// The permission target: `server/tool`.
    pub fn target(&self) -> String {
        format!("{}/{}", self.server, self.tool)
    }
}

/// `server_tool` with every character providers refuse replaced by `_`, cut to 64 characters.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let name: String = format!("{server}_{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    name.chars().take(MAX_NAME).collect()
}

/// The offered form of one listed tool (a `tools/list` entry as JSON).
pub fn offered(server: &str, listed: &Value) -> Option<OfferedTool> {
    let tool = listed.get("name")?.as_str()?.to_string();
    let mut description = listed
        .get("description")
        .and_then(Value::as_str)
        .or_else(|| listed.get("title").and_then(Value::as_str))
        .unwrap_or("")
        .trim()
        .to_string();
    // Long descriptions cost every request; the first paragraph usually says it.
    if let Some(cut) = description.find("\n\n") {
        description.truncate(cut);
    }
    if description.chars().count() > 600 {
        description = description.chars().take(600).collect::<String>() + "…";
    }
    let description = if description.is_empty() {
        format!("Tool `{tool}` of MCP server `{server}`.")
    } else {
        format!("[{server}] {description}")
    };
    let mut parameters = listed
        .get("inputSchema")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    if let Value::Object(map) = &mut parameters {
        map.remove("$schema");
        map.entry("properties").or_insert_with(|| json!({}));
    }
    let read_only = listed
        .pointer("/annotations/readOnlyHint")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Some(OfferedTool {
        exposed: exposed_name(server, &tool),
        server: server.to_string(),
        tool,
        description,
        parameters,
        read_only,
    })
}

/// The `mcp_prompt` definition, listing the prompts on offer (`None` when there are none).
pub fn prompt_tool(prompts: &[(String, Value)]) -> Option<(String, Value)> {
    if prompts.is_empty() {
        return None;
    }
    let mut list = Vec::new();
    for (server, prompt) in prompts.iter().take(40) {
        let Some(name) = prompt.get("name").and_then(Value::as_str) else {
            continue;
        };
        let args: Vec<String> = prompt
            .get("arguments")
            .and_then(Value::as_array)
            .map(|args| {
                args.iter()
                    .filter_map(|a| {
                        let n = a.get("name")?.as_str()?;
                        let required = a.get("required").and_then(Value::as_bool) == Some(true);
                        Some(if required {
                            format!("{n}*")
                        } else {
                            n.to_string()
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        if args.is_empty() {
            list.push(format!("{server}/{name}"));
        } else {
            list.push(format!("{server}/{name}({})", args.join(", ")));
        }
    }
    let description = format!(
        "Get a prompt template from an MCP server; its text comes back as the result. Prompts (* = required argument): {}",
        list.join(", ")
    );
    let parameters = json!({
        "type": "object",
        "properties": {
            "server": {"type": "string", "description": "the MCP server"},
            "name": {"type": "string", "description": "the prompt's name"},
            "arguments": {"type": "object", "description": "the prompt's arguments, as strings", "additionalProperties": {"type": "string"}}
        },
        "required": ["server", "name"]
    });
    Some((description, parameters))
}

/// A server's resources and resource templates, as it lists them.
pub struct ServerResources {
    /// The server's name in settings.
    pub server: String,
    /// Its resources, as listed (`resources/list`).
    pub resources: Vec<Value>,
    /// Its resource templates, as listed (`resources/templates/list`).
    pub templates: Vec<Value>,
}

/// The `mcp_resource` definition, naming the servers with resources (`None` when none has any).
pub fn resource_tool(servers: &[ServerResources]) -> Option<(String, Value)> {
    let offering: Vec<String> = servers
        .iter()
        .filter(|s| !s.resources.is_empty() || !s.templates.is_empty())
        .map(|s| {
            format!(
                "{} ({} resources, {} templates)",
                s.server,
                s.resources.len(),
                s.templates.len()
            )
        })
        .collect();
    if offering.is_empty() {
        return None;
    }
    let description = format!(
        "Read the resources (documents, files, data) of MCP servers. Without `uri` it lists the resources and URI templates of `server` (or of every server); with `uri` it reads that resource (fill a template's {{placeholders}} first). Servers with resources: {}",
        offering.join(", ")
    );
    let parameters = json!({
        "type": "object",
        "properties": {
            "server": {"type": "string", "description": "the MCP server"},
            "uri": {"type": "string", "description": "the resource to read; leave out to list them"}
        }
    });
    Some((description, parameters))
}

/// The resources and templates of `servers` as a list the model reads, capped at [`MAX_TEXT`].
pub fn resource_list(servers: &[ServerResources]) -> String {
    let line = |uri: &str, item: &Value| {
        let field = |name: &str| item.get(name).and_then(Value::as_str).unwrap_or("");
        let mut text = format!("- {uri}");
        let name = field("title").trim();
        let name = if name.is_empty() {
            field("name").trim()
        } else {
            name
        };
        if !name.is_empty() && !uri.ends_with(name) {
            text.push_str(&format!("  {name}"));
        }
        if !field("mimeType").is_empty() {
            text.push_str(&format!(" ({})", field("mimeType")));
        }
        let description = field("description").lines().next().unwrap_or("").trim();
        if !description.is_empty() {
            let short: String = description.chars().take(200).collect();
            text.push_str(&format!(": {short}"));
        }
        text
    };
    let mut out = Vec::new();
    for server in servers {
        if server.resources.is_empty() && server.templates.is_empty() {
            out.push(format!("{}: no resources", server.server));
            continue;
        }
        out.push(format!("{}:", server.server));
        for resource in &server.resources {
            if let Some(uri) = resource.get("uri").and_then(Value::as_str) {
                out.push(line(uri, resource));
            }
        }
        if !server.templates.is_empty() {
            out.push("  templates (fill the {placeholders}, then read the URI):".into());
            for template in &server.templates {
                if let Some(uri) = template.get("uriTemplate").and_then(Value::as_str) {
                    out.push(line(uri, template));
                }
            }
        }
    }
    cap(out.join("\n"))
}

/// The contents of a `resources/read` result as text: text as is, binary as a note with its type
/// and size; capped at [`MAX_TEXT`].
pub fn resource_text(result: &Value) -> String {
    let contents: Vec<&Value> = result
        .get("contents")
        .and_then(Value::as_array)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    let several = contents.len() > 1;
    let mut pieces = Vec::new();
    for content in contents {
        let uri = content.get("uri").and_then(Value::as_str).unwrap_or("?");
        let mime = content.get("mimeType").and_then(Value::as_str);
        if let Some(text) = content.get("text").and_then(Value::as_str) {
            pieces.push(match several {
                true => format!("[resource {uri}]\n{text}"),
                false => text.to_string(),
            });
        } else if let Some(blob) = content.get("blob").and_then(Value::as_str) {
            let bytes = blob.trim_end_matches('=').len() * 3 / 4;
            pieces.push(format!(
                "[binary resource {uri} ({}, {bytes} bytes) not shown]",
                mime.unwrap_or("unknown type")
            ));
        }
    }
    if pieces.is_empty() {
        return "(the resource is empty)".into();
    }
    cap(pieces.join("\n"))
}

/// A tool result as the model reads it: text as is, a short placeholder for images, audio and
/// binary resources, capped at [`MAX_TEXT`].
pub fn result_text(outcome: &CallOutcome) -> String {
    let mut out = content_text(&outcome.content);
    if out.trim().is_empty()
        && let Some(structured) = &outcome.structured
    {
        out = structured.to_string();
    }
    if out.trim().is_empty() {
        out = if outcome.is_error {
            "the tool failed without saying why".into()
        } else {
            "(no output)".into()
        };
    }
    cap(out)
}

/// The text of MCP content blocks (a `content` array).
pub fn content_text(content: &Value) -> String {
    let items: Vec<&Value> = match content {
        Value::Array(items) => items.iter().collect(),
        Value::Object(_) => vec![content],
        _ => Vec::new(),
    };
    let mut pieces = Vec::new();
    for item in items {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        let mime = item
            .get("mimeType")
            .and_then(Value::as_str)
            .unwrap_or("unknown type");
        let piece = match kind {
            "text" => item
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            "image" | "audio" => {
                let bytes = item
                    .get("data")
                    .and_then(Value::as_str)
                    .map_or(0, |d| d.len() * 3 / 4);
                format!("[{kind} ({mime}, about {bytes} bytes) not shown]")
            }
            "resource" => {
                let resource = item.get("resource").cloned().unwrap_or(Value::Null);
                let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("?");
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => format!("[resource {uri}]\n{text}"),
                    None => format!(
                        "[resource {uri} ({}) not shown]",
                        resource
                            .get("mimeType")
                            .and_then(Value::as_str)
                            .unwrap_or("binary")
                    ),
                }
            }
            "resource_link" => format!(
                "[resource link {} {}]",
                item.get("uri").and_then(Value::as_str).unwrap_or("?"),
                item.get("name").and_then(Value::as_str).unwrap_or("")
            )
            .trim_end()
            .replace(" ]", "]"),
            other => format!("[{other} content not shown]"),
        };
        pieces.push(piece);
    }
    pieces.join("\n")
}

/// The messages of a `prompts/get` result as text.
pub fn prompt_text(result: &Value) -> String {
    let mut out = String::new();
    if let Some(description) = result.get("description").and_then(Value::as_str) {
        out.push_str(description);
        out.push_str("\n\n");
    }
    for message in result
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        let text = content_text(message.get("content").unwrap_or(&Value::Null));
        out.push_str(&format!("{role}: {text}\n"));
    }
    cap(out.trim_end().to_string())
}

/// Cuts `text` to [`MAX_TEXT`] characters and says so.
pub fn cap(text: String) -> String {
    if text.len() <= MAX_TEXT {
        return text;
    }
    let end = text.floor_char_boundary(MAX_TEXT);
    format!(
        "{}\n… [output cut at {MAX_TEXT} characters of {}]",
        &text[..end],
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_only_what_providers_accept() {
        assert_eq!(exposed_name("everything", "echo"), "everything_echo");
        assert_eq!(exposed_name("gh", "repo.list/all"), "gh_repo_list_all");
        assert_eq!(exposed_name("s", &"x".repeat(100)).len(), 64);
    }

    #[test]
    fn images_become_placeholders_and_text_is_capped() {
        let outcome = CallOutcome {
            content: json!([{"type": "text", "text": "hello"},
                            {"type": "image", "data": "AAAA", "mimeType": "image/png"}]),
            structured: None,
            is_error: false,
        };
        let text = result_text(&outcome);
        assert!(text.starts_with("hello\n[image (image/png"), "{text}");
        let long = cap("é".repeat(MAX_TEXT));
        assert!(long.contains("output cut"));
    }

    #[test]
    fn resources_list_with_templates_and_binary_is_a_note() {
        let servers = [ServerResources {
            server: "everything".into(),
            resources: vec![json!({"uri": "demo://doc/a.md", "name": "a.md",
                                   "mimeType": "text/markdown", "description": "A doc\nmore"})],
            templates: vec![json!({"uriTemplate": "demo://text/{id}", "name": "Dynamic"})],
        }];
        let list = resource_list(&servers);
        assert!(
            list.contains("- demo://doc/a.md (text/markdown): A doc\n"),
            "{list}"
        );
        assert!(list.contains("- demo://text/{id}  Dynamic"), "{list}");
        assert!(!list.contains("more"), "{list}");
        let (description, _) = resource_tool(&servers).unwrap();
        assert!(description.contains("everything (1 resources, 1 templates)"));
        let empty = [ServerResources {
            server: "x".into(),
            resources: vec![],
            templates: vec![],
        }];
        assert!(resource_tool(&empty).is_none());

        let text = resource_text(&json!({"contents": [{"uri": "u", "text": "hello"}]}));
        assert_eq!(text, "hello");
        let blob = resource_text(&json!({"contents": [
            {"uri": "u1", "text": "hi"},
            {"uri": "u2", "blob": "AAAAAA==", "mimeType": "image/png"}]}));
        assert_eq!(
            blob,
            "[resource u1]\nhi\n[binary resource u2 (image/png, 4 bytes) not shown]"
        );
        let long =
            resource_text(&json!({"contents": [{"uri": "u", "text": "x".repeat(MAX_TEXT + 10)}]}));
        assert!(long.contains("output cut"), "capped");
    }

    #[test]
    fn read_only_comes_from_the_annotation() {
        let tool = offered(
            "docs",
            &json!({"name": "search", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}),
        )
        .unwrap();
        assert!(tool.read_only);
        assert_eq!(tool.parameters["properties"], json!({}));
        let tool = offered("docs", &json!({"name": "write"})).unwrap();
        assert!(!tool.read_only);
    }
}
