//! The corpus of malformed tool calls small models produce, each recovered (or refused with a
//! precise message) by the registry.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use totem_tools::recover::{RepeatGuard, calls_from_text};
use totem_tools::{Registry, ToolContext};

fn ctx() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path()).unwrap();
    (dir, ctx)
}

/// The tool name and arguments the registry ends up with.
fn recovered(name: &str, raw: Value) -> (String, Value) {
    let (_dir, ctx) = ctx();
    let call = Registry::builtin()
        .prepare(name, raw, &ctx, false)
        .unwrap_or_else(|e| panic!("{name} was not recovered: {e}"));
    (call.name, call.arguments)
}

fn refused(name: &str, raw: Value) -> String {
    let (_dir, ctx) = ctx();
    Registry::builtin()
        .prepare(name, raw, &ctx, false)
        .unwrap_err()
        .to_string()
}

fn read_a() -> Value {
    json!({"path": "a.txt"})
}

// ── arguments ────────────────────────────────────────────────────────────────────────────

#[test]
fn arguments_as_json_string() {
    assert_eq!(recovered("read", json!("{\"path\":\"a.txt\"}")).1, read_a());
}

#[test]
fn arguments_double_encoded() {
    let once = serde_json::to_string(&read_a()).unwrap();
    let twice = serde_json::to_string(&once).unwrap();
    assert_eq!(recovered("read", Value::String(twice)).1, read_a());
}

#[test]
fn arguments_wrapped_in_input() {
    assert_eq!(
        recovered("read", json!({"input": {"path": "a.txt"}})).1,
        read_a()
    );
}

#[test]
fn arguments_wrapped_in_arguments() {
    assert_eq!(
        recovered("read", json!({"arguments": {"path": "a.txt"}})).1,
        read_a()
    );
}

#[test]
fn arguments_wrapped_in_parameters() {
    assert_eq!(
        recovered("read", json!({"parameters": {"path": "a.txt"}})).1,
        read_a()
    );
}

#[test]
fn arguments_wrapped_in_args() {
    assert_eq!(
        recovered("read", json!({"args": {"path": "a.txt"}})).1,
        read_a()
    );
}

#[test]
fn arguments_wrapped_in_params() {
    assert_eq!(
        recovered("read", json!({"params": {"path": "a.txt"}})).1,
        read_a()
    );
}

#[test]
fn wrapper_holding_a_json_string() {
    let raw = json!({"arguments": "{\"path\": \"a.txt\"}"});
    assert_eq!(recovered("read", raw).1, read_a());
}

#[test]
fn wrapper_inside_wrapper() {
    let raw = json!({"input": {"parameters": {"path": "a.txt"}}});
    assert_eq!(recovered("read", raw).1, read_a());
}

#[test]
fn whole_call_object_sent_as_arguments() {
    let raw = json!({"name": "read", "arguments": {"path": "a.txt"}});
    assert_eq!(recovered("read", raw).1, read_a());
}

#[test]
fn trailing_garbage_after_json() {
    assert_eq!(
        recovered("read", json!("{\"path\":\"a.txt\"} </tool_call>")).1,
        read_a()
    );
}

#[test]
fn trailing_second_object_is_ignored() {
    let raw = json!("{\"path\":\"a.txt\"}{\"path\":\"b.txt\"}");
    assert_eq!(recovered("read", raw).1, read_a());
}

#[test]
fn object_cut_short_after_a_whole_value_is_closed() {
    assert_eq!(recovered("read", json!("{\"path\": \"a.txt\"")).1, read_a());
    let raw = json!("{\"edits\": [{\"path\": \"a\", \"oldString\": \"x\", \"newString\": \"y\"}");
    assert_eq!(recovered("patch", raw).1["edits"][0]["newString"], "y");
}

#[test]
fn trailing_commas_are_dropped() {
    assert_eq!(
        recovered("read", json!("{\"path\": \"a.txt\",}")).1,
        read_a()
    );
}

#[test]
fn json_cut_inside_a_string_is_refused_saying_where() {
    let message = refused(
        "write",
        json!("{\"path\": \"a.txt\", \"content\": \"half a li"),
    );
    assert!(message.contains("not valid JSON"), "{message}");
    assert!(
        message.contains("\"content\": \"half a li⟨here⟩"),
        "{message}"
    );
    assert!(message.contains("at character 40"), "{message}");
    // Never taken as the path itself.
    assert!(!message.contains("not found"), "{message}");
}

#[test]
fn json_broken_in_the_middle_is_refused_saying_where() {
    let message = refused("read", json!("{\"path\" \"a.txt\"}"));
    assert!(message.contains("not valid JSON"), "{message}");
    assert!(message.contains("{\"path\" ⟨here⟩\"a.txt\"}"), "{message}");
}

#[test]
fn a_shell_block_is_still_a_bare_command() {
    assert_eq!(
        recovered("bash", json!("{ ls; pwd; }")).1,
        json!({"command": "{ ls; pwd; }"})
    );
}

#[test]
fn fenced_json_arguments() {
    let raw = json!("```json\n{\"path\": \"a.txt\"}\n```");
    assert_eq!(recovered("read", raw).1, read_a());
}

#[test]
fn prose_before_json_arguments() {
    let raw = json!("Sure, here are the arguments: {\"path\": \"a.txt\"}");
    assert_eq!(recovered("read", raw).1, read_a());
}

#[test]
fn arguments_in_a_one_element_array() {
    assert_eq!(recovered("read", json!([{"path": "a.txt"}])).1, read_a());
}

#[test]
fn snake_case_field_names() {
    let raw = json!({"path": "a.txt", "old_string": "x", "new_string": "y", "replace_all": true});
    assert_eq!(
        recovered("edit", raw).1,
        json!({"path": "a.txt", "oldString": "x", "newString": "y", "replaceAll": true})
    );
}

#[test]
fn field_name_in_other_case() {
    assert_eq!(recovered("read", json!({"Path": "a.txt"})).1, read_a());
}

#[test]
fn file_path_alias() {
    assert_eq!(recovered("read", json!({"file_path": "a.txt"})).1, read_a());
}

#[test]
fn cmd_alias_for_bash() {
    assert_eq!(
        recovered("bash", json!({"cmd": "ls"})).1,
        json!({"command": "ls"})
    );
}

#[test]
fn integer_sent_as_string() {
    assert_eq!(
        recovered("read", json!({"path": "a.txt", "offset": "10"})).1,
        json!({"path": "a.txt", "offset": 10})
    );
}

#[test]
fn integer_sent_as_float() {
    assert_eq!(
        recovered("read", json!({"path": "a.txt", "limit": 20.0})).1,
        json!({"path": "a.txt", "limit": 20})
    );
}

#[test]
fn boolean_sent_as_string() {
    let raw = json!({"pattern": "x", "literal": "true"});
    assert_eq!(
        recovered("grep", raw).1,
        json!({"pattern": "x", "literal": true})
    );
}

#[test]
fn null_for_an_optional_field() {
    let (_, args) = recovered("read", json!({"path": "a.txt", "offset": null}));
    assert_eq!(args["path"], "a.txt");
}

#[test]
fn null_arguments_for_a_tool_without_required_fields() {
    assert_eq!(recovered("list", Value::Null).1, json!({}));
}

#[test]
fn empty_string_arguments() {
    assert_eq!(recovered("list", json!("")).1, json!({}));
}

#[test]
fn bare_command_string_for_bash() {
    assert_eq!(
        recovered("bash", json!("ls -la | head")).1,
        json!({"command": "ls -la | head"})
    );
}

#[test]
fn patch_edits_sent_as_json_text() {
    let raw = json!({"edits": "[{\"path\":\"a\",\"oldString\":\"x\",\"newString\":\"y\"}]"});
    let (_, args) = recovered("patch", raw);
    assert_eq!(args["edits"][0]["path"], "a");
}

#[test]
fn patch_single_edit_instead_of_list() {
    let raw = json!({"edits": {"path": "a", "oldString": "x", "newString": "y"}});
    let (_, args) = recovered("patch", raw);
    assert_eq!(args["edits"].as_array().map(Vec::len), Some(1));
}

#[test]
fn todo_status_completed_means_done() {
    let raw = json!({"todos": [{"content": "a", "status": "completed"}]});
    assert_eq!(recovered("todo", raw).0, "todo");
}

// ── tool names ───────────────────────────────────────────────────────────────────────────

#[test]
fn tool_name_in_upper_case() {
    assert_eq!(recovered("READ", read_a()).0, "read");
}

#[test]
fn tool_name_capitalised() {
    assert_eq!(recovered("Grep", json!({"pattern": "x"})).0, "grep");
}

#[test]
fn tool_name_with_functions_prefix() {
    assert_eq!(recovered("functions.read", read_a()).0, "read");
}

#[test]
fn tool_name_with_default_api_prefix() {
    assert_eq!(recovered("default_api.list", json!({})).0, "list");
}

#[test]
fn tool_name_with_parentheses() {
    assert_eq!(recovered("read()", read_a()).0, "read");
}

#[test]
fn tool_name_alias_read_file() {
    assert_eq!(recovered("read_file", read_a()).0, "read");
}

#[test]
fn anthropic_str_replace_shape() {
    let raw = json!({"path": "a.txt", "old_str": "x", "new_str": "y"});
    let (name, args) = recovered("str_replace", raw);
    assert_eq!(name, "edit");
    assert_eq!(
        args,
        json!({"path": "a.txt", "oldString": "x", "newString": "y"})
    );
}

#[test]
fn tool_name_alias_shell() {
    assert_eq!(recovered("shell", json!({"command": "ls"})).0, "bash");
}

// ── calls written in text ────────────────────────────────────────────────────────────────

fn known() -> Vec<&'static str> {
    vec![
        "read", "list", "glob", "grep", "write", "edit", "patch", "bash", "job", "todo",
    ]
}

#[test]
fn fenced_json_call_in_text() {
    let text =
        "I will read it.\n```json\n{\"name\": \"read\", \"arguments\": {\"path\": \"a.txt\"}}\n```";
    let calls = calls_from_text(text, &known());
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "read");
    assert_eq!(calls[0].arguments, read_a());
}

#[test]
fn bare_call_object_in_text() {
    let text = "{\"name\": \"grep\", \"arguments\": {\"pattern\": \"fn main\"}}";
    let calls = calls_from_text(text, &known());
    assert_eq!(calls[0].name, "grep");
}

#[test]
fn a_call_whose_object_runs_on_past_its_arguments_is_read_from_its_whole_members() {
    // smollm2 135M at its token limit, as seen through llama.cpp: the call, then made-up fields
    // with a comment, cut short.
    let text = "```\n{\n  \"name\": \"list\",\n  \"arguments\": {\n    \"path\": \".\"\n  },\n  \"options\": {\n    \"skipBys\": 1, // skip every second line\n    \"maxLines";
    let calls = calls_from_text(text, &known());
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].name, "list");
    assert_eq!(calls[0].arguments, json!({"path": "."}));
    // Without whole arguments nothing is made up.
    let cut = "{\"name\": \"read\", \"arguments\": {\"path\": \"a.js";
    assert!(calls_from_text(cut, &known()).is_empty());
    let no_arguments = "{\"name\": \"list\", \"options\": // none";
    assert!(calls_from_text(no_arguments, &known()).is_empty());
}

#[test]
fn hermes_tool_call_tags_in_text() {
    let text = "<tool_call>\n{\"name\": \"list\", \"arguments\": {}}\n</tool_call>";
    assert_eq!(calls_from_text(text, &known())[0].name, "list");
}

#[test]
fn openai_function_shape_in_text() {
    let text =
        r#"{"type":"function","function":{"name":"read","arguments":"{\"path\":\"a.txt\"}"}}"#;
    let calls = calls_from_text(text, &known());
    assert_eq!(calls[0].name, "read");
    // The arguments are still a string; the registry repairs them.
    let (_dir, ctx) = ctx();
    let call = Registry::builtin()
        .prepare(&calls[0].name, calls[0].arguments.clone(), &ctx, false)
        .unwrap();
    assert_eq!(call.arguments, read_a());
}

#[test]
fn tool_and_args_keys_in_text() {
    let text = "```\n{\"tool\": \"Bash\", \"args\": {\"command\": \"ls\"}}\n```";
    let calls = calls_from_text(text, &known());
    assert_eq!(calls[0].name, "bash");
    assert_eq!(calls[0].arguments, json!({"command": "ls"}));
}

#[test]
fn two_calls_in_one_text() {
    let text = "{\"name\":\"read\",\"arguments\":{\"path\":\"a\"}}\nthen\n{\"name\":\"read\",\"arguments\":{\"path\":\"b\"}}";
    assert_eq!(calls_from_text(text, &known()).len(), 2);
}

#[test]
fn json_that_is_not_a_call_is_left_alone() {
    let text = "Your package.json:\n```json\n{\"name\": \"my-app\", \"version\": \"1.0.0\"}\n```";
    assert!(calls_from_text(text, &known()).is_empty());
}

#[test]
fn registry_finds_calls_in_text() {
    let calls = Registry::builtin().calls_from_text(
        "```json\n{\"name\":\"functions.glob\",\"arguments\":{\"pattern\":\"*.rs\"}}\n```",
    );
    assert_eq!(calls[0].name, "glob");
}

// ── what cannot be recovered is explained ────────────────────────────────────────────────

#[test]
fn unknown_tool_lists_the_available_ones() {
    let msg = refused("browse_web", json!({}));
    assert!(msg.starts_with("unknown tool \"browse_web\""), "{msg}");
    assert!(msg.contains("read, list, glob, grep"), "{msg}");
}

#[test]
fn missing_field_names_it_and_the_expected_fields() {
    let msg = refused("edit", json!({"path": "a.txt", "newString": "y"}));
    assert!(msg.contains("missing field `oldString`"), "{msg}");
    assert!(msg.contains("oldString: string"), "{msg}");
    assert!(msg.contains("replaceAll?: boolean"), "{msg}");
    assert!(!msg.contains("line 1 column"), "{msg}");
}

#[test]
fn unknown_field_is_named() {
    let msg = refused("read", json!({"path": "a.txt", "encoding": "utf8"}));
    assert!(msg.contains("unknown field `encoding`"), "{msg}");
}

#[test]
fn wrong_type_is_named() {
    let msg = refused("read", json!({"path": "a.txt", "offset": "ten"}));
    assert!(
        msg.starts_with("invalid arguments for read: invalid type"),
        "{msg}"
    );
}

#[test]
fn non_object_arguments_are_refused() {
    let msg = refused("read", json!(42));
    assert!(msg.contains("arguments must be a JSON object"), "{msg}");
}

#[test]
fn unparseable_text_for_a_tool_with_several_fields() {
    let msg = refused("edit", json!("change foo to bar"));
    assert!(msg.contains("arguments are not a JSON object"), "{msg}");
    assert!(msg.contains("Expected {"), "{msg}");
}

#[test]
fn plan_mode_refuses_writing_tools() {
    let (_dir, ctx) = ctx();
    let err = Registry::builtin()
        .prepare("write", json!({"path": "a", "content": "b"}), &ctx, true)
        .unwrap_err();
    assert!(
        err.to_string().contains("not available in this mode"),
        "{err}"
    );
}

// ── repeats ──────────────────────────────────────────────────────────────────────────────

#[test]
fn third_identical_call_in_a_row_is_stuck() {
    let mut guard = RepeatGuard::default();
    let args = read_a();
    assert_eq!(guard.record("read", &args), 1);
    assert!(!guard.is_stuck());
    guard.record("read", &args);
    assert!(!guard.is_stuck());
    assert_eq!(guard.record("read", &args), 3);
    assert!(guard.is_stuck());
    assert!(guard.message().contains("read was called 3 times"));
}

#[test]
fn a_different_call_resets_the_repeat_count() {
    let mut guard = RepeatGuard::default();
    guard.record("read", &read_a());
    guard.record("read", &read_a());
    guard.record("read", &json!({"path": "b.txt"}));
    assert_eq!(guard.record("read", &read_a()), 1);
    assert!(!guard.is_stuck());
}

#[test]
fn repeats_compare_arguments_regardless_of_key_order() {
    let mut guard = RepeatGuard::default();
    guard.record("read", &json!({"path": "a", "offset": 1}));
    guard.record("read", &json!({"offset": 1, "path": "a"}));
    guard.record("read", &json!({"path": "a", "offset": 1}));
    assert!(guard.is_stuck());
}

#[test]
fn bare_command_with_json_inside_stays_a_command() {
    assert_eq!(
        recovered("bash", json!("echo {\"a\": 1} | jq .a")).1,
        json!({"command": "echo {\"a\": 1} | jq .a"})
    );
}

#[test]
fn bare_command_that_is_valid_json_stays_a_command() {
    assert_eq!(
        recovered("bash", json!("true")).1,
        json!({"command": "true"})
    );
}

#[test]
fn the_text_tools_prompt_lists_each_tool_and_its_call_shape_reads_back() {
    let list = serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}},
                                  "required": ["path"]});
    let prompt =
        totem_tools::recover::text_tools_prompt([("list", &list, "List a folder.")], false, false);
    assert!(
        prompt.contains("- list {path: string}: List a folder."),
        "{prompt}"
    );
    // A model that writes the shape the prompt shows, with the tool's name and arguments, is read.
    let written = r#"{"name": "list", "arguments": {"path": "."}}"#;
    // The shape is shown as a real call of a real tool: no placeholder name to copy.
    assert!(prompt.contains(written), "{prompt}");
    assert!(
        !prompt.contains("TOOL") && !prompt.contains('…'),
        "{prompt}"
    );
    let calls = totem_tools::recover::calls_from_text(written, &["list"]);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].arguments, serde_json::json!({"path": "."}));
}
