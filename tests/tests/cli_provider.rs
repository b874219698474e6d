//! `totem provider …` and `totem models` against the real daemon and the provider simulators:
//! a key given on stdin reaches the provider, never the screen; models list with their context
//! window, capabilities and prices.

mod cli_common;

use cli_common::{Cli, assert_exit, stderr, stdout};
use totem_tests::sim::{Reply, Sim, SimEvent, SimKind};

const KEY: &str = "sk-cli-test-7f3a9c1e5b";

#[tokio::test(flavor = "multi_thread")]
async fn provider_add_list_test_remove_with_a_key_from_stdin() {
    let sim = Sim::start(SimKind::Openrouter).await;
    let cli = Cli::new();
    let url = sim.url();
    let out = cli.run_with_input(
        &[
            "provider",
            "add",
            "router",
            "--kind",
            "openai",
            "--url",
            &url,
            "--key-stdin",
        ],
        &format!("{KEY}\n"),
    );
    assert_exit(&out, 0);
    let shown = format!("{}{}", stdout(&out), stderr(&out));
    assert!(shown.contains("Added provider router"), "{shown}");
    assert!(
        !shown.contains(KEY),
        "the key must never be printed: {shown}"
    );

    let out = cli.run(["provider", "list"]);
    assert_exit(&out, 0);
    let listed = stdout(&out);
    assert!(
        listed.contains("router") && listed.contains("key set"),
        "{listed}"
    );
    assert!(!listed.contains(KEY));

    let out = cli.run(["provider", "test", "router"]);
    assert_exit(&out, 0);
    assert!(!stdout(&out).contains(KEY));

    let out = cli.run(["models"]);
    assert_exit(&out, 0);
    let models = stdout(&out);
    assert!(
        models.contains("router/anthropic/claude-sonnet-4"),
        "{models}"
    );
    assert!(models.contains("200000"), "context window shown: {models}");
    assert!(models.contains("3.00/15.00"), "prices shown: {models}");
    assert!(models.contains("thinking"), "capabilities shown: {models}");

    // The key reached the provider, in its header.
    let sent = sim.requests();
    assert!(
        sent.iter()
            .any(|r| r.header("authorization") == Some(format!("Bearer {KEY}").as_str())),
        "the simulator saw the key"
    );

    let out = cli.run(["provider", "remove", "router"]);
    assert_exit(&out, 0);
    let out = cli.run(["provider", "list"]);
    assert!(!stdout(&out).contains("router"), "{}", stdout(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn models_lists_an_ollama_provider_and_json_is_the_method_result() {
    let sim = Sim::start(SimKind::Ollama).await;
    let cli = Cli::new();
    let out = cli.run([
        "provider",
        "add",
        "local",
        "--kind",
        "ollama",
        "--url",
        &sim.url(),
    ]);
    assert_exit(&out, 0);
    let out = cli.run(["models", "--provider", "local", "--json"]);
    assert_exit(&out, 0);
    let list: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let names: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"local/qwen3:8b"), "{names:?}");
    let qwen = listed(&list, "local/qwen3:8b");
    assert_eq!(qwen["contextWindow"], 40960);
    assert_eq!(qwen["capabilities"]["thinking"], true);
}

/// Per-model settings in settings.json (for servers that do not tell) win over what the
/// server lists, and `totem models` shows them.
#[tokio::test(flavor = "multi_thread")]
async fn models_shows_the_per_model_settings() {
    let sim = Sim::start(SimKind::Ollama).await;
    let cli = Cli::new();
    let settings = serde_json::json!({"providers": [{"name": "local", "kind": "ollama",
        "url": sim.url(), "models": {"qwen3:8b": {"contextWindow": 8192, "maxOutputTokens": 512,
        "tools": "text", "stream": false, "reducedTools": false}}}]});
    std::fs::write(cli.home().join("settings.json"), settings.to_string()).unwrap();
    let out = cli.run(["models", "--provider", "local"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("local/qwen3:8b "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(" 8192 ") && line.contains("tools:text"),
        "{line}"
    );
    assert!(
        text.contains(
            "settings: contextWindow 8192, maxOutputTokens 512, tools text, stream false, reducedTools false"
        ),
        "{text}"
    );
    let out = cli.run(["models", "--provider", "local", "--json"]);
    let list: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let qwen = listed(&list, "local/qwen3:8b");
    assert_eq!(
        qwen["contextWindow"], 8192,
        "the setting wins over the listed 40960"
    );
    assert_eq!(qwen["maxOutputTokens"], 512);
    assert_eq!(qwen["settings"]["tools"], "text");
    assert_eq!(qwen["settings"]["reducedTools"], false);

    // A typo in a model's settings is reported with its name, and the daemon keeps serving.
    let bad = settings
        .to_string()
        .replace("maxOutputTokens", "maxOutputToken");
    std::fs::write(cli.home().join("settings.json"), bad).unwrap();
    let out = cli.run(["provider", "list"]);
    assert!(stderr(&out).contains("maxOutputToken"), "{}", stderr(&out));
}

/// `totem models --probe MODEL` asks the model the scripted questions (here a simulator that
/// answers, calls natively, cannot stream that call, and writes the call in text too), prints
/// what it can do and saves it as the model's settings.
#[tokio::test(flavor = "multi_thread")]
async fn models_probe_reports_and_saves_what_a_model_can_do() {
    use totem_tests::sim::{Reply, SimEvent};
    let sim = Sim::start(SimKind::Openai).await;
    sim.push(Reply::stream([
        SimEvent::text("Hello there, friend."),
        SimEvent::usage(20, 6),
    ]));
    sim.push(Reply::stream([SimEvent::tool_call(
        "c1",
        "list",
        serde_json::json!({"path": "."}),
    )]));
    sim.push(Reply::error(
        500,
        "Automatic streaming tool choice is not supported",
    ));
    sim.push(Reply::stream([SimEvent::text(
        r#"{"name": "list", "arguments": {"path": "."}}"#,
    )]));
    let cli = Cli::new();
    let url = sim.url();
    assert_exit(
        &cli.run(["provider", "add", "s", "--kind", "openai", "--url", &url]),
        0,
    );
    let out = cli.run(["models", "--probe", "s/gpt-4o-mini"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains("s/gpt-4o-mini: answers yes, native tools yes, not when streamed, text tools yes, window 128000"),
        "{text}"
    );
    assert!(text.contains("saved: tools native, stream false"), "{text}");

    let chats = sim.chat_requests();
    assert_eq!(chats.len(), 4, "four questions, no retries");
    assert_eq!(chats[1].body["stream"], false);
    assert_eq!(chats[1].body["tools"][0]["function"]["name"], "list");
    assert_eq!(
        chats[2].body["stream"], true,
        "the streamed question is not asked again"
    );
    assert!(chats[3].body.get("tools").is_none());
    let system = chats[3].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(system.contains("- list {path: string}"), "{system}");

    // Saved: `totem models` shows it, and runs will not stream to this model.
    let out = cli.run(["models", "--provider", "s"]);
    let text = stdout(&out);
    assert!(text.contains("tools:native"), "{text}");
    assert!(
        text.contains("settings: tools native, stream false"),
        "{text}"
    );
}

#[test]
fn a_provider_that_does_not_answer_makes_test_fail_with_advice() {
    let cli = Cli::new();
    let out = cli.run([
        "provider",
        "add",
        "gone",
        "--kind",
        "ollama",
        "--url",
        "http://127.0.0.1:9",
    ]);
    assert_exit(&out, 0);
    let out = cli.run(["provider", "test", "gone"]);
    assert_exit(&out, 1);
    assert!(!stdout(&out).trim().is_empty());
}

/// `totem provider test` checks the default model is one the provider has, and says which to
/// pick when it is not; model names are never empty (Gemini lists them as `models/…`).
#[tokio::test(flavor = "multi_thread")]
async fn provider_test_checks_the_default_model() {
    let sim = Sim::start(SimKind::Gemini).await;
    let cli = Cli::new();
    let url = sim.url();
    let add = |name: &str, default: Option<&str>| {
        let mut args = vec!["provider", "add", name, "--kind", "gemini", "--url", &url];
        if let Some(default) = default {
            args.extend(["--default-model", default]);
        }
        let out = cli.run_with_input(&[&args[..], &["--key-stdin"]].concat(), "k\n");
        assert_exit(&out, 0);
    };
    add("good", Some("gemini-2.5-flash"));
    let out = cli.run(["provider", "test", "good"]);
    assert_exit(&out, 0);
    let said = stdout(&out);
    assert!(
        said.contains("its default model gemini-2.5-flash is there"),
        "{said}"
    );

    add("stale", Some("gemini-1.0-pro"));
    let out = cli.run(["provider", "test", "stale"]);
    assert_exit(&out, 1);
    let said = stdout(&out);
    assert!(
        said.contains("its default model gemini-1.0-pro is not among them")
            && said.contains("(e.g. stale/gemini-2.5-flash)"),
        "{said}"
    );

    add("none", None);
    let out = cli.run(["provider", "test", "none"]);
    assert_exit(&out, 0);
    let said = stdout(&out);
    assert!(
        said.contains(
            "no default model is set; name one as none/MODEL, e.g. none/gemini-2.5-flash"
        ),
        "{said}"
    );
}

/// The entry of `name` in a `totem models --json` list.
fn listed<'a>(list: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    list["models"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not listed: {list}"))
}

/// `totem run` without `--model` uses the provider's `--default-model`, not the first model it
/// lists; and an answer cut at the output limit is no finished answer: the run exits 1 saying so.
#[tokio::test(flavor = "multi_thread")]
async fn run_uses_the_providers_default_model_and_a_cut_answer_exits_1() {
    let sim = Sim::start(SimKind::Openai).await;
    let cli = Cli::new();
    let url = sim.url();
    let args = [
        "provider",
        "add",
        "work",
        "--kind",
        "openai",
        "--url",
        &url,
        "--default-model",
        "o3-mini",
        "--key-stdin",
    ];
    assert_exit(&cli.run_with_input(&args, "k\n"), 0);
    sim.push(Reply::stream([SimEvent::text("hello")]));
    let out = cli.run(["run", "say hi"]);
    assert_exit(&out, 0);
    assert_eq!(sim.chat_requests()[0].body["model"], "o3-mini");

    sim.push(Reply::stream([
        SimEvent::text("The first half of an"),
        SimEvent::Finish {
            reason: "length".into(),
        },
    ]));
    let out = cli.run(["run", "say more"]);
    assert_exit(&out, 1);
    assert!(stderr(&out).contains("output limit"), "{}", stderr(&out));
}
