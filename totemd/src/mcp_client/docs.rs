//! The docs server (`role: "docs"`): before a run's first step in a Total.js project, Totem
//! searches it with the user's prompt, tells the user which pages it found and gives the best
//! ones to the model. Any failure means no pages: the run goes on with the primer alone.

use serde_json::{Value, json};

use super::client::Connection;
use super::tools::content_text;

/// Pages given to the model.
const TOP_PAGES: usize = 3;
/// Characters of one page, and of all pages together.
const PAGE_CHARS: usize = 3_000;
const TOTAL_CHARS: usize = 8_000;

/// One page the search found.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The page's title, as the server gives it.
    pub title: String,
    /// The page's text as the server returned it; it is cut when the model is shown it.
    pub text: String,
}

/// The tool a docs server searches with: the configured `searchTool`, else the first whitelisted
/// tool with `search` in its name.
fn search_tool(connection: &Connection) -> Option<Value> {
    let tools = connection.tools();
    let wanted = connection.config.settings.search_tool.as_deref();
    tools.into_iter().find(|t| {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            return false;
        };
        match wanted {
            Some(w) => name == w,
            None => connection.config.offers(name) && name.to_ascii_lowercase().contains("search"),
        }
    })
}

/// The argument the query goes in: `query` when the tool has it, else its first string field.
fn query_field(tool: &Value) -> String {
    let properties = tool
        .pointer("/inputSchema/properties")
        .and_then(Value::as_object);
    let Some(properties) = properties else {
        return "query".into();
    };
    if properties.contains_key("query") {
        return "query".into();
    }
    let required: Vec<&str> = tool
        .pointer("/inputSchema/required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let is_string = |name: &str| {
        properties
            .get(name)
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            == Some("string")
    };
    required
        .iter()
        .find(|n| is_string(n))
        .map(|n| n.to_string())
        .or_else(|| properties.keys().find(|n| is_string(n)).cloned())
        .unwrap_or_else(|| "query".into())
}

/// Searches the docs server with `query`; the best pages first.
pub async fn search(connection: &Connection, query: &str) -> Result<Vec<Page>, String> {
    let tool = search_tool(connection).ok_or_else(|| {
        format!(
            "docs server `{}` has no search tool; name it with `searchTool`",
            connection.name()
        )
    })?;
    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
    let field = query_field(&tool);
    let outcome = connection
        .call_tool(name, json!({ field: query }))
        .await
        .map_err(|e| e.to_string())?;
    if outcome.is_error {
        return Err(format!(
            "the search failed: {}",
            content_text(&outcome.content)
        ));
    }
    let mut pages = Vec::new();
    if let Some(structured) = &outcome.structured {
        collect(structured, &mut pages);
    }
    if pages.is_empty() {
        for item in outcome.content.as_array().into_iter().flatten() {
            let Some(text) = item.get("text").and_then(Value::as_str) else {
                continue;
            };
            match serde_json::from_str::<Value>(text) {
                Ok(value @ (Value::Array(_) | Value::Object(_))) => collect(&value, &mut pages),
                _ => pages.extend(markdown_page(text)),
            }
        }
    }
    pages.truncate(TOP_PAGES);
    Ok(pages)
}

/// Pages from a JSON search result: a list of pages, or an object holding one under `results`,
/// `result` or `pages`, or one page.
fn collect(value: &Value, pages: &mut Vec<Page>) {
    match value {
        Value::Array(items) => items.iter().for_each(|i| collect(i, pages)),
        Value::Object(map) => {
            for key in ["results", "result", "pages", "items"] {
                if let Some(inner @ (Value::Array(_) | Value::Object(_))) = map.get(key) {
                    collect(inner, pages);
                    return;
                }
            }
            let field = |names: &[&str]| {
                names
                    .iter()
                    .find_map(|n| map.get(*n).and_then(Value::as_str))
                    .map(str::to_string)
            };
            let title = field(&["title", "name", "path", "url"]);
            let text = field(&["content", "text", "body", "markdown", "snippet", "excerpt"]);
            if let Some(title) = title {
                pages.push(Page {
                    title,
                    text: text.unwrap_or_default(),
                });
            }
        }
        _ => {}
    }
}

/// A page written as Markdown: its first line is the title.
fn markdown_page(text: &str) -> Option<Page> {
    let text = text.trim();
    let first = text.lines().next()?.trim_start_matches('#').trim();
    (!first.is_empty()).then(|| Page {
        title: first.to_string(),
        text: text.to_string(),
    })
}

/// The pages as the block added to the prompt the model reads.
pub fn context(server: &str, pages: &[Page]) -> String {
    let mut out = format!(
        "Total.js documentation pages found for this request (from `{server}`); prefer them over memory:\n"
    );
    let mut left = TOTAL_CHARS;
    for page in pages {
        if left == 0 {
            break;
        }
        let take = PAGE_CHARS.min(left);
        let text: String = page.text.chars().take(take).collect();
        left = left.saturating_sub(text.chars().count());
        out.push_str(&format!("\n## {}\n{}\n", page.title, text.trim()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_come_from_json_lists_objects_or_markdown() {
        let mut pages = Vec::new();
        collect(
            &json!({"result": [{"title": "Routing", "content": "ROUTE(...)"}, {"name": "Schemas", "text": "NEWSCHEMA"}]}),
            &mut pages,
        );
        assert_eq!(pages.len(), 2);
        assert_eq!(pages[1].title, "Schemas");
        let page = markdown_page("# Actions\nNEWACTION(...)").unwrap();
        assert_eq!(page.title, "Actions");
    }

    #[test]
    fn the_query_goes_in_query_or_the_first_string_field() {
        let tool = json!({"inputSchema": {"properties": {"limit": {"type": "integer"}, "q": {"type": "string"}}, "required": ["q"]}});
        assert_eq!(query_field(&tool), "q");
        let tool = json!({"inputSchema": {"properties": {"query": {"type": "string"}}}});
        assert_eq!(query_field(&tool), "query");
    }

    #[test]
    fn context_is_capped() {
        let pages = vec![
            Page {
                title: "A".into(),
                text: "a".repeat(10_000),
            },
            Page {
                title: "B".into(),
                text: "b".repeat(10_000),
            },
            Page {
                title: "C".into(),
                text: "c".repeat(10_000),
            },
        ];
        let text = context("docs", &pages);
        assert!(text.len() < TOTAL_CHARS + 400, "{}", text.len());
        assert!(text.contains("## C"));
    }
}
