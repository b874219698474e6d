//! The definitions the model sees: flat, small, and within the prompt budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use totem_tools::{READ_ONLY, Registry};

fn size(read_only: bool) -> usize {
    let defs = Registry::builtin().definitions(read_only);
    serde_json::to_string(&defs)
        .map(|s| s.len())
        .unwrap_or(usize::MAX)
}

#[test]
fn definitions_fit_the_prompt_budget() {
    let all = size(false);
    let plan = size(true);
    println!("tool definitions: build mode {all} bytes, plan mode {plan} bytes");
    for def in Registry::builtin().definitions(false) {
        println!("{}", serde_json::to_string(&def).unwrap());
    }
    assert!(all <= 5_500, "build-mode definitions are {all} bytes");
    assert!(plan <= 2_800, "plan-mode definitions are {plan} bytes");
}

#[test]
fn definitions_are_flat_without_refs_titles_or_formats() {
    let text = serde_json::to_string(&Registry::builtin().definitions(false)).unwrap();
    for noise in [
        "$ref",
        "$defs",
        "\"title\"",
        "\"format\"",
        "$schema",
        "\"null\"",
    ] {
        assert!(!text.contains(noise), "definitions contain {noise}: {text}");
    }
}

#[test]
fn plan_mode_offers_only_the_read_only_tools() {
    let names: Vec<String> = Registry::builtin()
        .definitions(true)
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, READ_ONLY);
    for writer in ["write", "edit", "patch", "bash", "job"] {
        assert!(!names.iter().any(|n| n == writer));
    }
}

#[test]
fn build_mode_offers_every_builtin_tool() {
    let names: Vec<String> = Registry::builtin()
        .definitions(false)
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(
        names,
        [
            "read", "list", "glob", "grep", "write", "edit", "patch", "bash", "job", "todo"
        ]
    );
}

#[test]
fn every_parameter_schema_is_an_object_with_properties() {
    for def in Registry::builtin().definitions(false) {
        assert_eq!(def.parameters["type"], "object", "{}", def.name);
        assert!(def.parameters["properties"].is_object(), "{}", def.name);
    }
}
