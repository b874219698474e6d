//! Secret files ask first, even to read.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use totem_permission::{
    Access, Decision, PermissionState, Policy, Reason, Rules, SecretPatterns, SecretSettings,
    Source, is_secret,
};
use totem_protocol::PermissionReply;

#[test]
fn built_in_secret_files_are_recognised_at_any_depth() {
    for path in [
        ".env",
        ".env.local",
        ".env.production",
        "api/.env",
        "deep/er/.env.test",
        "certs/server.pem",
        "tls/private.key",
        "id_rsa",
        "home/.ssh/id_ed25519",
        "keys/id_ecdsa",
        "store.p12",
        "cert.pfx",
        ".npmrc",
        "pkg/.npmrc",
        ".netrc",
        ".pypirc",
        ".git-credentials",
        "credentials.json",
        "config/credentials.yml.enc",
        "vault.kdbx",
        ".aws/credentials",
        "x/.aws/credentials",
        ".ssh/config",
        ".ssh/known_hosts",
        "infra/terraform.tfstate",
        ".docker/config.json",
    ] {
        assert!(is_secret(path), "{path} should be secret");
    }
}

#[test]
fn templates_public_keys_and_ordinary_files_are_not_secret() {
    for path in [
        ".env.example",
        ".env.sample",
        ".env.template",
        "app/.env.example",
        "id_rsa.pub",
        ".ssh/id_ed25519.pub",
        "src/env.rs",
        "environment.ts",
        "README.md",
        "keyboard.rs",
        "src/monkey.js",
    ] {
        assert!(!is_secret(path), "{path} should not be secret");
    }
}

#[test]
fn secret_matching_ignores_case_and_leading_dot_slash() {
    assert!(is_secret("./.ENV"));
    assert!(is_secret("Certs/Server.PEM"));
}

#[test]
fn absolute_paths_are_matched_too() {
    assert!(is_secret("/home/me/.ssh/id_rsa"));
}

#[test]
fn secret_patterns_can_be_added_removed_and_excepted() {
    let settings = SecretSettings {
        add: vec!["*.secret".into(), "config/master.key".into()],
        remove: vec!["*.key".into()],
        except: vec!["fixtures/**".into()],
    };
    let secrets = SecretPatterns::from_settings(&settings).unwrap();
    assert!(secrets.is_secret("app.secret"));
    assert!(secrets.is_secret("config/master.key"));
    assert!(secrets.is_secret("nested/config/master.key"));
    assert!(!secrets.is_secret("i18n/en.key"));
    assert!(!secrets.is_secret("fixtures/test.pem"));
    assert!(secrets.is_secret("certs/test.pem"));
}

#[test]
fn removing_an_unknown_pattern_is_an_error_naming_it() {
    let settings = SecretSettings {
        remove: vec!["*.kee".into()],
        ..SecretSettings::default()
    };
    let err = SecretPatterns::from_settings(&settings).unwrap_err();
    assert!(err.to_string().contains("*.kee"), "{err}");
}

#[test]
fn secret_settings_reject_unknown_fields() {
    let parsed: Result<SecretSettings, _> = serde_json::from_str(r#"{"ad": ["*.x"]}"#);
    assert!(parsed.is_err());
}

fn read(policy: &Policy, state: &PermissionState, path: &str) -> Decision {
    policy.evaluate(&Access::read("read", path), state).decision
}

#[test]
fn reading_a_secret_asks_although_reading_is_allowed() {
    let policy = Policy::new();
    let state = PermissionState::new();
    assert_eq!(read(&policy, &state, "src/main.rs"), Decision::Allow);
    let v = policy.evaluate(&Access::read("read", "api/.env"), &state);
    assert_eq!(v.decision, Decision::Ask);
    assert_eq!(
        v.reason(),
        Some(&Reason::Secret {
            pattern: ".env".into()
        })
    );
}

#[test]
fn secret_asks_even_where_a_rule_allows_it() {
    let mut rules = Rules::new();
    rules.insert("read", "*", Decision::Allow);
    rules.insert("read", ".env", Decision::Allow);
    let mut policy = Policy::new();
    policy.add_layer(Source::User, rules).unwrap();
    assert_eq!(
        read(&policy, &PermissionState::new(), ".env"),
        Decision::Ask
    );
}

#[test]
fn secret_deny_rule_still_denies() {
    let mut rules = Rules::new();
    rules.insert("read", "*.pem", Decision::Deny);
    let mut policy = Policy::new();
    policy.add_layer(Source::Project, rules).unwrap();
    assert_eq!(
        read(&policy, &PermissionState::new(), "a/b.pem"),
        Decision::Deny
    );
}

#[test]
fn grep_and_list_tools_are_covered_by_the_secret_check() {
    let policy = Policy::new();
    let state = PermissionState::new();
    assert_eq!(
        policy
            .evaluate(&Access::read("grep", ".env"), &state)
            .decision,
        Decision::Ask
    );
    assert_eq!(
        policy
            .evaluate(&Access::write("edit", "id_rsa"), &state)
            .decision,
        Decision::Ask
    );
}

#[test]
fn only_an_answer_for_that_exact_file_lifts_a_secret() {
    let policy = Policy::new();
    let mut state = PermissionState::new();
    // A broad remembered allow does not count.
    let mut broad = Rules::new();
    broad.insert("read", "*", Decision::Allow);
    state
        .remember(totem_permission::Scope::Session, &broad)
        .unwrap();
    assert_eq!(read(&policy, &state, ".env"), Decision::Ask);

    let v = policy.evaluate(&Access::read("read", ".env"), &state);
    state.answer(&v, &PermissionReply::AlwaysSession).unwrap();
    assert_eq!(read(&policy, &state, ".env"), Decision::Allow);
    // Same name elsewhere is another file.
    assert_eq!(read(&policy, &state, "api/.env"), Decision::Ask);
    assert_eq!(read(&policy, &state, ".env.local"), Decision::Ask);
}

#[test]
fn custom_secret_patterns_apply_to_the_policy() {
    let mut policy = Policy::new();
    let settings = SecretSettings {
        add: vec!["*.vault".into()],
        ..SecretSettings::default()
    };
    policy.set_secrets(SecretPatterns::from_settings(&settings).unwrap());
    assert_eq!(
        read(&policy, &PermissionState::new(), "x/prod.vault"),
        Decision::Ask
    );
}

#[test]
fn the_first_listed_pattern_that_matches_is_named() {
    let secrets = SecretPatterns::default();
    // `.env.*` and `credentials*`-style overlaps: the order of the list decides.
    assert_eq!(secrets.matching_pattern("api/.env"), Some(".env"));
    assert_eq!(secrets.matching_pattern("api/.env.local"), Some(".env.*"));
    assert_eq!(
        secrets.matching_pattern("./deploy/prod.tfstate.backup"),
        Some("*.tfstate.*")
    );
    assert_eq!(
        secrets.matching_pattern(".aws/credentials"),
        Some("credentials*")
    );
    assert_eq!(
        secrets.matching_pattern("home/.ssh/id_rsa"),
        Some("id_rsa*")
    );
    assert_eq!(
        secrets.matching_pattern("home/.ssh/id_rsa.pub"),
        None,
        "an exception wins"
    );
    assert_eq!(secrets.matching_pattern("src/main.rs"), None);
}

#[test]
fn an_invalid_added_pattern_is_an_error_naming_it() {
    let settings = SecretSettings {
        add: vec!["ok/*.secret".into(), "bad[".into()],
        ..SecretSettings::default()
    };
    let err = SecretPatterns::from_settings(&settings).unwrap_err();
    assert!(err.to_string().contains("bad["), "{err}");
}

/// Issue 30 item 7: `--allow edit` (or a remembered "always") does not cover writes under `.git/`
/// or `.totem/`: they ask every time, and the question says why.
#[test]
fn writes_under_git_and_totem_always_ask_and_say_why() {
    let mut policy = Policy::new();
    let mut allow = Rules::new();
    allow.insert("edit", "*", Decision::Allow);
    allow.insert("bash", "*", Decision::Allow);
    policy.add_layer(Source::Run, allow).unwrap();
    let mut state = PermissionState::new();
    let write =
        |state: &PermissionState, path: &str| policy.evaluate(&Access::write("write", path), state);
    for path in [
        ".git/hooks/pre-commit",
        ".git/config",
        "sub/.git/config",
        ".GIT/config",
        ".totem/settings.json",
        ".totem/commands/review.md",
    ] {
        let v = write(&state, path);
        assert_eq!(v.decision, Decision::Ask, "{path}: {v:?}");
        assert!(
            matches!(v.parts[0].reason, Reason::ControlFolder { .. }),
            "{path}: {v:?}"
        );
        assert!(v.explain().contains("always asks"), "{}", v.explain());
    }
    assert!(
        write(&state, ".git/hooks/x")
            .explain()
            .contains("git run code")
    );
    // An "always" answer does not turn the next write into an allow.
    let v = write(&state, ".git/hooks/pre-commit");
    state.answer(&v, &PermissionReply::AlwaysSession).unwrap();
    assert_eq!(
        write(&state, ".git/hooks/pre-commit").decision,
        Decision::Ask
    );
    // Ordinary files and look-alikes are what the rules say.
    for path in [
        "src/main.rs",
        ".github/workflows/ci.yml",
        ".gitignore",
        "a.git/x",
    ] {
        assert_eq!(write(&state, path).decision, Decision::Allow, "{path}");
    }
    // A deny still denies.
    let mut deny = Rules::new();
    deny.insert("edit", ".git/**", Decision::Deny);
    policy.add_layer(Source::User, deny).unwrap();
    assert_eq!(
        policy
            .evaluate(&Access::write("write", ".git/config"), &state)
            .decision,
        Decision::Deny
    );
}

/// A command under `--allow bash` that redirects into `.git/` asks too.
#[test]
fn a_redirection_into_git_asks_under_allow_bash() {
    let mut policy = Policy::new();
    let mut allow = Rules::new();
    allow.insert("bash", "*", Decision::Allow);
    allow.insert("edit", "*", Decision::Allow);
    policy.add_layer(Source::Run, allow).unwrap();
    let v = policy.evaluate(
        &Access::execute("bash", "echo 'touch x' > .git/hooks/pre-commit"),
        &PermissionState::new(),
    );
    assert_eq!(v.decision, Decision::Ask, "{v:?}");
}
