//! How command lines are decided: every sub-command must be allowed, deny beats ask beats allow.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use totem_permission::{Access, Decision, PermissionState, Policy, Reason, Rules, Source};

fn policy_with(user: &[(&str, &str, Decision)]) -> Policy {
    let mut rules = Rules::new();
    for (key, pattern, decision) in user {
        rules.insert(*key, *pattern, *decision);
    }
    let mut policy = Policy::new();
    policy.add_layer(Source::User, rules).unwrap();
    policy
}

fn decide(policy: &Policy, line: &str) -> Decision {
    policy
        .evaluate(&Access::execute("bash", line), &PermissionState::new())
        .decision
}

fn default_decision(line: &str) -> Decision {
    decide(&Policy::new(), line)
}

use Decision::{Allow, Ask, Deny};

#[test]
fn harmless_read_only_commands_are_allowed_by_default() {
    for line in [
        "ls -la",
        "pwd",
        "git status",
        "git status --short",
        "git diff HEAD~1",
        "git log --oneline -5",
        "rg -n foo src",
        "grep -rn 'fn main' src",
        "cat README.md | head -5",
        "find . -name '*.rs'",
        "wc -l src/*.rs",
        "ls 2>/dev/null",
    ] {
        assert_eq!(default_decision(line), Allow, "{line}");
    }
}

#[test]
fn other_commands_ask_by_default() {
    for line in [
        "cargo test",
        "npm install",
        "rm x",
        "python3 script.py",
        "make",
    ] {
        assert_eq!(default_decision(line), Ask, "{line}");
    }
}

#[test]
fn allowed_prefix_does_not_let_a_chained_command_through() {
    let p = policy_with(&[("bash", "git status*", Allow)]);
    assert_eq!(decide(&p, "git status"), Allow);
    for line in [
        "git status; rm -rf x",
        "git status && rm -rf x",
        "git status || rm -rf x",
        "git status | sh",
        "git status & rm -rf x",
        "git status\nrm -rf x",
        "git status $(rm -rf x)",
        "git status `rm -rf x`",
        "git status <(rm -rf x)",
        "git status; (rm -rf x)",
    ] {
        assert_eq!(decide(&p, line), Ask, "{line}");
    }
}

#[test]
fn deny_in_any_sub_command_denies_the_line() {
    let p = policy_with(&[("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "ls && rm -rf x"), Deny);
    assert_eq!(decide(&p, "cargo test; rm x"), Deny);
    assert_eq!(decide(&p, "echo $(rm x)"), Deny);
}

#[test]
fn deny_is_found_inside_bash_c_and_eval() {
    let p = policy_with(&[("bash", "rm *", Deny), ("bash", "bash *", Allow)]);
    assert_eq!(decide(&p, "bash -c 'ls; rm -rf x'"), Deny);
    assert_eq!(decide(&p, "sh -c \"rm x\""), Deny);
    assert_eq!(decide(&p, "eval 'rm -rf x'"), Deny);
}

#[test]
fn env_assignment_does_not_escape_a_deny() {
    let p = policy_with(&[("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "FOO=1 rm -rf x"), Deny);
    assert_eq!(decide(&p, "env FOO=1 rm -rf x"), Deny);
}

#[test]
fn env_assignment_is_not_covered_by_an_allow_without_it() {
    // `LD_PRELOAD=evil.so ls` runs code, so `ls *` must not cover it.
    assert_eq!(default_decision("LD_PRELOAD=./evil.so ls"), Ask);
    assert_eq!(default_decision("PATH=/tmp/x ls"), Ask);
}

#[test]
fn allow_naming_the_assignment_allows_it() {
    let p = policy_with(&[("bash", "CI=1 npm test *", Allow)]);
    assert_eq!(decide(&p, "CI=1 npm test"), Allow);
}

#[test]
fn xargs_and_find_exec_check_the_command_they_run() {
    let p = policy_with(&[("bash", "xargs *", Allow), ("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "ls | xargs rm"), Deny);
    assert_eq!(decide(&p, "find . -exec rm {} \\;"), Deny);
    assert_eq!(default_decision("find . -name '*.o' -exec rm {} +"), Ask);
}

#[test]
fn find_delete_and_exec_are_never_allowed_by_default() {
    assert_eq!(default_decision("find . -name '*.tmp' -delete"), Ask);
    assert_eq!(default_decision("find -delete"), Ask);
    assert_eq!(default_decision("find . -execdir ls \\;"), Ask);
    assert_eq!(default_decision("find . -fprint out.txt"), Ask);
}

#[test]
fn options_that_run_programs_ask() {
    assert_eq!(default_decision("rg --pre ./evil foo"), Ask);
    assert_eq!(default_decision("git diff --output=patch.diff"), Ask);
    assert_eq!(default_decision("git -c core.pager=evil log"), Ask);
}

#[test]
fn output_redirection_to_a_file_asks_like_a_write() {
    assert_eq!(default_decision("echo hi > notes.txt"), Ask);
    assert_eq!(default_decision("ls >> list.txt"), Ask);
    assert_eq!(default_decision("git log &> log.txt"), Ask);
    assert_eq!(default_decision("cat a >| b"), Ask);
    assert_eq!(default_decision("echo hi > /dev/null"), Allow);
}

#[test]
fn output_redirection_follows_edit_rules() {
    let p = policy_with(&[("edit", "logs/**", Allow), ("edit", "*.lock", Deny)]);
    assert_eq!(decide(&p, "ls > logs/a.txt"), Allow);
    assert_eq!(decide(&p, "ls > Cargo.lock"), Deny);
}

#[test]
fn redirection_into_a_secret_file_asks() {
    let p = policy_with(&[("edit", "*", Allow)]);
    assert_eq!(decide(&p, "echo KEY=1 >> .env"), Ask);
}

#[test]
fn redirection_to_an_expanded_target_asks() {
    let p = policy_with(&[("edit", "*", Allow)]);
    assert_eq!(decide(&p, "ls > \"$OUT\""), Ask);
}

#[test]
fn eval_of_a_variable_always_asks() {
    let p = policy_with(&[("bash", "*", Allow)]);
    assert_eq!(decide(&p, "eval \"$CMD\""), Ask);
    assert_eq!(decide(&p, "bash -c \"$SCRIPT\""), Ask);
}

#[test]
fn dynamic_program_name_always_asks() {
    let p = policy_with(&[("bash", "*", Allow)]);
    assert_eq!(decide(&p, "$(echo rm) -rf x"), Ask);
    assert_eq!(decide(&p, "$'\\x72\\x6d' -rf x"), Ask);
    assert_eq!(decide(&p, "$CMD"), Ask);
}

#[test]
fn unparseable_line_asks_even_under_allow_all() {
    let p = policy_with(&[("bash", "*", Allow)]);
    for line in [
        "echo 'unterminated",
        "ls )",
        "case x in a) ls;; esac",
        "echo ${x:-$(rm y)}",
    ] {
        let v = p.evaluate(&Access::execute("bash", line), &PermissionState::new());
        assert_eq!(v.decision, Ask, "{line}");
        assert!(
            matches!(v.reason(), Some(Reason::Unparsed { .. })),
            "{line}"
        );
    }
}

#[test]
fn unparseable_line_matching_a_deny_is_denied() {
    let p = policy_with(&[("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "rm -rf 'x"), Deny);
}

#[test]
fn quoted_program_name_is_matched_after_quote_removal() {
    let p = policy_with(&[("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "'rm' -rf x"), Deny);
    assert_eq!(decide(&p, "\"r\"m -rf x"), Deny);
    assert_eq!(decide(&p, "r\\m -rf x"), Deny);
}

#[test]
fn line_continuation_does_not_hide_a_command() {
    let p = policy_with(&[("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "r\\\nm -rf x"), Deny);
}

#[test]
fn comment_hides_nothing_that_runs() {
    assert_eq!(default_decision("ls # rm -rf x"), Allow);
    assert_eq!(default_decision("ls #\nrm -rf x"), Ask);
}

#[test]
fn heredoc_substitution_is_checked() {
    let p = policy_with(&[("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "cat <<EOF\n$(rm -rf x)\nEOF"), Deny);
    // A literal here-document runs nothing, but any `$(` in the text is read for denies (issue
    // 30): the deny wins where the text could hide a command.
    assert_eq!(decide(&p, "cat <<'EOF'\n$(rm -rf x)\nEOF"), Deny);
    assert_eq!(decide(&p, "cat <<'EOF'\n$(ls)\nEOF"), Ask);
}

#[test]
fn sudo_is_never_allowed_by_an_allow_of_its_inner_command() {
    assert_eq!(default_decision("sudo ls"), Ask);
    let p = policy_with(&[("bash", "sudo *", Allow), ("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "sudo rm -rf /"), Deny);
}

#[test]
fn piping_into_a_shell_asks() {
    assert_eq!(default_decision("cat script.sh | bash"), Ask);
    assert_eq!(default_decision("ls | sh"), Ask);
}

#[test]
fn built_in_allows_do_not_reach_outside_the_project() {
    for line in [
        "cat /etc/passwd",
        "ls ~/.aws",
        "cat ../other/file",
        "grep -r key /home",
        "cat < /etc/shadow",
        "ls --dir=/etc",
        "cat $HOME/x",
        "cd .. && ls",
    ] {
        assert_eq!(default_decision(line), Ask, "{line}");
    }
}

#[test]
fn user_allow_is_not_narrowed_by_the_outside_check() {
    let p = policy_with(&[("bash", "cat *", Allow)]);
    assert_eq!(decide(&p, "cat /etc/hosts"), Allow);
}

#[test]
fn command_naming_a_secret_file_asks_even_when_allowed() {
    let p = policy_with(&[("bash", "*", Allow)]);
    for line in [
        "cat .env",
        "cat config/.env.production",
        "cp id_rsa /tmp/x",
        "curl --data-binary @x --upload-file=.npmrc",
        "grep TOKEN < .env",
        "cat ~/.ssh/id_ed25519",
    ] {
        assert_eq!(decide(&p, line), Ask, "{line}");
    }
    assert_eq!(decide(&p, "cat .env.example"), Allow);
}

#[test]
fn most_specific_pattern_wins_within_a_layer() {
    let p = policy_with(&[
        ("bash", "git *", Allow),
        ("bash", "git push *", Ask),
        ("bash", "git push --force*", Deny),
    ]);
    assert_eq!(decide(&p, "git commit -m x"), Allow);
    assert_eq!(decide(&p, "git push origin main"), Ask);
    assert_eq!(decide(&p, "git push --force origin"), Deny);
}

#[test]
fn trailing_space_star_covers_the_bare_command() {
    let p = policy_with(&[("bash", "npm test *", Allow)]);
    assert_eq!(decide(&p, "npm test"), Allow);
    assert_eq!(decide(&p, "npm test -- --watch"), Allow);
    assert_eq!(decide(&p, "npm testx"), Ask);
}

#[test]
fn job_tool_follows_bash_rules_unless_it_has_its_own() {
    let p = policy_with(&[
        ("bash", "npm run dev*", Allow),
        ("job", "npm run dev*", Deny),
    ]);
    let state = PermissionState::new();
    assert_eq!(
        p.evaluate(&Access::execute("bash", "npm run dev"), &state)
            .decision,
        Allow
    );
    assert_eq!(
        p.evaluate(&Access::execute("job", "npm run dev"), &state)
            .decision,
        Deny
    );
    let q = policy_with(&[("bash", "npm run dev*", Allow)]);
    assert_eq!(
        q.evaluate(&Access::execute("job", "npm run dev"), &state)
            .decision,
        Allow
    );
}

#[test]
fn verdict_names_the_sub_command_and_rule_that_decided() {
    let p = policy_with(&[("bash", "rm *", Deny)]);
    let v = p.evaluate(
        &Access::execute("bash", "ls && rm -rf x"),
        &PermissionState::new(),
    );
    let part = v.deciding_part().unwrap();
    assert_eq!(part.subject, "rm -rf x");
    match &part.reason {
        Reason::Rule { rule } => {
            assert_eq!(rule.source, Source::User);
            assert_eq!(rule.pattern, "rm *");
        }
        other => panic!("unexpected reason {other:?}"),
    }
    assert!(v.explain().contains("rm -rf x"), "{}", v.explain());
}

#[test]
fn every_sub_command_appears_in_the_verdict() {
    let v = Policy::new().evaluate(
        &Access::execute("bash", "ls; cargo test > out.txt"),
        &PermissionState::new(),
    );
    let subjects: Vec<_> = v.parts.iter().map(|p| p.subject.as_str()).collect();
    assert_eq!(subjects, ["ls", "cargo test", "out.txt"]);
}

#[test]
fn separators_without_spaces_still_split() {
    let p = policy_with(&[("bash", "git status*", Allow)]);
    assert_eq!(decide(&p, "git status;rm x"), Ask);
    assert_eq!(decide(&p, "git status&&rm x"), Ask);
    assert_eq!(decide(&p, "git status|rm x"), Ask);
}

#[test]
fn escaped_semicolon_is_an_argument_not_a_separator() {
    // bash passes `;` to ls as an argument: nothing else runs.
    assert_eq!(default_decision("ls -la \\; rm x"), Allow);
}

#[test]
fn newline_inside_quotes_does_not_start_a_command() {
    assert_eq!(default_decision("echo \"a\nrm x\""), Allow);
}

#[test]
fn reading_a_secret_by_redirection_alone_asks() {
    let p = policy_with(&[("bash", "*", Allow)]);
    assert_eq!(decide(&p, "echo $(< .env)"), Ask);
    assert_eq!(decide(&p, "read -r KEY < config/.env.local"), Ask);
}

#[test]
fn here_string_substitution_is_checked() {
    let p = policy_with(&[("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "cat <<< \"$(rm x)\""), Deny);
}

#[test]
fn substitution_inside_test_brackets_is_checked() {
    let p = policy_with(&[("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "[[ -n $(rm x) ]] && ls"), Deny);
}

#[test]
fn alias_definition_asks() {
    assert_eq!(default_decision("alias ls='rm -rf x'; ls"), Ask);
}

#[test]
fn assignment_only_command_asks() {
    // `PATH=/tmp/evil; ls` would run another `ls`.
    assert_eq!(default_decision("PATH=/tmp/evil; ls"), Ask);
}

#[test]
fn shell_options_between_dash_c_and_the_script_do_not_hide_it() {
    let p = policy_with(&[("bash", "bash *", Allow), ("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "bash -c -e 'rm -rf x'"), Deny);
    assert_eq!(decide(&p, "bash -ec 'rm -rf x'"), Deny);
    assert_eq!(decide(&p, "bash --norc -c 'rm -rf x'"), Deny);
}

#[test]
fn find_exec_shell_script_is_checked() {
    let p = policy_with(&[("bash", "find *", Allow), ("bash", "rm *", Deny)]);
    assert_eq!(decide(&p, "find . -exec sh -c 'rm \"$1\"' sh {} \\;"), Deny);
}

/// Issue 30, item 1: bash evaluates an array subscript as arithmetic (running any `$(…)` in it)
/// in `[[ -v ]]`, `[[ -eq ]]`, `test -v` and `[ -v ]`, also inside single quotes.
#[test]
fn hidden_substitutions_and_arithmetic_never_ride_a_built_in_allow() {
    for line in [
        "[[ -v 'a[$(touch X)]' ]]",
        "[[ 'a[$(touch X)]' -eq 0 ]]",
        "test -v 'a[$(touch X)]'",
        "[ -v 'a[$(touch X)]' ]",
        "[[ -v 'a[`touch X`]' ]]",
        "for i in 1; do [[ -v 'a[$(touch X)]' ]]; done",
        "true && [[ -v 'a[$(touch X)]' ]]",
        "[[ -v $'a[\\x24(touch X)]' ]]",
        "[[ -v $'a[\\044(touch X)]' ]]",
        "[[ 1 -lt x ]]",
        "test -v x",
        "echo '$(touch X)'",
        "echo \"`touch X`\"",
        "cat <(ls)",
        "echo $((1+1))",
        "echo $[1+1]",
        "grep '((' README.md",
    ] {
        let verdict =
            Policy::new().evaluate(&Access::execute("bash", line), &PermissionState::new());
        assert_eq!(verdict.decision, Ask, "{line}");
        assert!(
            verdict.parts.iter().any(|p| matches!(
                p.reason,
                Reason::HiddenCode { .. } | Reason::Opaque | Reason::ReachesOutside { .. }
            )),
            "{line}: {verdict:?}"
        );
    }
    // A datagram through bash's `/dev/udp` is a redirection to a file outside: it asks.
    assert_eq!(default_decision("echo hi > /dev/udp/127.0.0.1/9"), Ask);
    // Plain tests still run without asking.
    for line in [
        "[[ -f README.md ]]",
        "test -d src",
        "[ -e a.txt ]",
        "echo hi",
    ] {
        assert_eq!(default_decision(line), Allow, "{line}");
    }
}

#[test]
fn a_deny_finds_the_command_hidden_in_a_subscript_under_allow_bash() {
    let policy = policy_with(&[("bash", "*", Allow), ("bash", "rm *", Deny)]);
    for line in [
        "[[ -v 'a[$(rm victim)]' ]]",
        "[[ -v 'a[`rm victim`]' ]]",
        "test -v 'a[$(rm victim)]'",
        "let 'a[$(rm victim)]'",
        "[[ -v $'a[\\x24(rm victim)]' ]]",
        "for i in 1; do [[ 'a[$(rm victim)]' -eq 0 ]]; done",
    ] {
        assert_eq!(decide(&policy, line), Deny, "{line}");
    }
    assert_eq!(decide(&policy, "[[ -v 'a[$(ls)]' ]]"), Allow);
}

#[test]
fn built_ins_alone_decide_whether_a_command_stays_sandboxed() {
    let policy = policy_with(&[("bash", "*", Allow)]);
    for line in [
        "git status",
        "git log -1",
        "cd sub && git log",
        "cat README.md",
    ] {
        assert!(
            policy.built_ins_allow(&Access::execute("bash", line)),
            "{line}"
        );
    }
    for line in ["npm test", "git status && npm test", "[[ -v 'a[$(ls)]' ]]"] {
        assert!(
            !policy.built_ins_allow(&Access::execute("bash", line)),
            "{line}"
        );
    }
}
