//! Totem against a real local model server (issue 16): llama-cpp-python's OpenAI-compatible
//! server (built by pip from PyPI, cached with the other external tools) serving
//! SmolLM2-135M-Instruct, on a free loopback port, one thread, a small context.
//!
//! These test the wire, not the model: they assert on what Totem sends, what the server
//! accepts and what the user sees, never on what a 135M model answers. A pass-through recorder
//! between totemd and the server keeps every request and the status it got. Answers are capped
//! at a few tokens and the temperature is 0, so each test costs seconds of generation; most of
//! the time goes to the server evaluating Totem's first prompt (figures in BENCHMARKS.md).

mod agent_common;

use std::time::{Duration, Instant};

use agent_common::{Env, last, next_event, parts_text, results, text, tool};
use serde_json::{Value, json};
use totem_protocol::EventKind;
use totem_tests::llama::{Exchange, LlamaServer, MODEL, Recorder};

/// The output cap every local request carries (set as the model's `maxOutputTokens`).
const CAP: u64 = 24;

const LOCAL: &str = "local/smollm2";

struct Local {
    env: Env,
    recorder: Recorder,
    // Dropped last: the server outlives the daemon's last request.
    server: LlamaServer,
}

impl Local {
    /// totemd with the simulator as `sim` (to make history) and the real server, behind the
    /// recorder, as `local`, with the per-model settings a user would give a tiny local model.
    async fn start(chat_format: Option<&'static str>, settings: Value) -> Local {
        let server = tokio::task::spawn_blocking(move || LlamaServer::start(chat_format, 4096))
            .await
            .expect("server start");
        let recorder = Recorder::start(&server.root()).await;
        let local = Local {
            env: Env::start().await,
            recorder,
            server,
        };
        local.set(settings).await;
        local
    }

    /// Runs `text` with `model` to its end; returns the events and how long it took.
    async fn run(&self, text: &str, model: &str) -> (Vec<totem_protocol::SessionEvent>, Duration) {
        let started = Instant::now();
        let mut events = self.env.subscribe().await;
        let run = self.env.prompt(text, json!({"model": model})).await;
        // The server's first look at Totem's prompt takes a while on one thread: wait longer
        // between events than `follow` does.
        let mut out = Vec::new();
        loop {
            let event = next_event(&mut events, 300).await;
            // The subscription replays the session's earlier runs first.
            if out.is_empty()
                && !matches!(&event.kind, EventKind::RunStarted { run: r } if r.id == run)
            {
                continue;
            }
            let end = matches!(&event.kind,
                EventKind::RunDone { run: r } | EventKind::RunFailed { run: r }
                | EventKind::RunAborted { run: r } if r.id == run);
            out.push(event);
            if end {
                return (out, started.elapsed());
            }
        }
    }

    /// A new session in the same project.
    async fn new_session(&self) -> String {
        let session = self
            .env
            .client
            .call_raw("session.get", json!({"sessionId": self.env.session}))
            .await
            .expect("session.get");
        let created = self
            .env
            .client
            .call_raw("session.create", json!({"projectId": session["projectId"]}))
            .await
            .expect("session.create");
        created["id"].as_str().expect("session id").to_string()
    }

    /// Gives the model these settings (replacing the provider, behind the same recorder).
    async fn set(&self, settings: Value) {
        self.set_retrying(settings, 0).await;
    }

    /// [`Local::set`], with `retries` retries of a failed request allowed.
    async fn set_retrying(&self, settings: Value, retries: u32) {
        self.env
            .client
            .call_raw(
                "provider.add",
                json!({"name": "local", "kind": "openai", "url": self.recorder.url(),
                       "maxRetries": retries, "replace": true, "models": {MODEL: settings}}),
            )
            .await
            .expect("provider.add local");
    }

    /// `totem ARGS` in the project, on this daemon's socket.
    fn totem(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(totem_tests::harness::binary("totem"));
        command
            .arg("--socket")
            .arg(&self.env.daemon.socket)
            .args(args)
            .current_dir(self.env.project.path())
            .env("TOTEM_HOME", &self.env.daemon.home)
            .env("OLLAMA_HOST", totem_tests::harness::closed_ollama_host())
            .env("NO_COLOR", "1")
            .env_remove("TOTEM_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command
    }

    /// The run's status once it has ended.
    async fn run_status(&self, run_id: &str) -> String {
        let outcome = self
            .env
            .client
            .call_raw("run.wait", json!({"runId": run_id, "timeoutMs": 120_000}))
            .await
            .expect("run.wait");
        outcome["run"]["status"].as_str().unwrap_or("").to_string()
    }

    /// `provider.test {probe: true}` for the model; returns its probe.
    async fn probe(&self) -> Value {
        let result = self
            .env
            .client
            .call_raw(
                "provider.test",
                json!({"name": "local", "probe": true, "model": MODEL}),
            )
            .await
            .expect("provider.test");
        result["probes"][0].clone()
    }

    /// The model's settings as settings.json now holds them.
    fn saved(&self) -> Value {
        let path = self.env.daemon.home.join("settings.json");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let file: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        file["providers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == "local")
            .map_or(Value::Null, |p| p["models"][MODEL].clone())
    }

    /// Every chat request was accepted; a failure shows the server's log.
    fn assert_all_accepted(&self) {
        self.assert_all_accepted_since(0);
    }

    /// Every chat request since the `before`th was accepted.
    fn assert_all_accepted_since(&self, before: usize) {
        let refused: Vec<u16> = self.chats()[before..]
            .iter()
            .map(|e| e.status)
            .filter(|s| *s != 200)
            .collect();
        assert!(
            refused.is_empty(),
            "refused: {refused:?}\nserver log:\n{}",
            self.server.log_tail()
        );
    }

    fn chats(&self) -> Vec<Exchange> {
        self.recorder.chats()
    }
}

/// A prompt a tiny model answers with a tool call written as text.
const WRITE_A_CALL: &str =
    r#"Reply with only this JSON and nothing else: {"name": "list", "arguments": {"path": "."}}"#;

/// llama-cpp-python reports no usage in a stream, so the cap is checked on the answer's text:
/// no token of this model is longer than a dozen characters.
const CAP_CHARS: usize = CAP as usize * 12;

fn done(events: &[totem_protocol::SessionEvent]) -> bool {
    matches!(last(events), EventKind::RunDone { .. })
}

/// The run ended because the answer reached the output cap: never shown as done (issue 31).
fn cut_at_the_cap(events: &[totem_protocol::SessionEvent]) -> bool {
    matches!(last(events), EventKind::RunFailed { run }
        if run.error.as_deref().is_some_and(|e| e.starts_with("The answer was cut")))
}

/// The model's own template (SmolLM2's, which ignores `tools`): a plain answer, a looping one
/// cut by the output cap, and a session whose history holds a tool call and its result, which
/// the server took with `content: null` as a validation error (HTTP 500; asked once, not five
/// times) and takes with `""`. Then `totem run` stopped by Ctrl-C (the run is aborted in the
/// daemon) and `totem run --detach` (the run goes on to its end), text tools and the probe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_template_answers_capped_and_takes_tool_history() {
    // No window given: the probe below finds it in the server's own error.
    let mut local = Local::start(None, json!({"maxOutputTokens": CAP, "temperature": 0.0})).await;

    // A greeting from this model may run past 24 tokens: then the run says it was cut.
    let (events, took) = local.run("Say hello.", LOCAL).await;
    local.assert_all_accepted();
    assert!(
        done(&events) || cut_at_the_cap(&events),
        "{:?}",
        last(&events)
    );
    let first = &local.chats()[0].body;
    assert_eq!(first["max_tokens"], json!(CAP), "the cap is sent: {first}");
    assert_eq!(first["temperature"], json!(0.0));
    assert_eq!(first["stream"], json!(true));
    let said = parts_text(&events);
    assert!(!said.is_empty() && said.len() <= CAP_CHARS, "{said:?}");
    eprintln!("plain answer: {took:?}, {said:?}");

    // A model asked to repeat itself stops at the cap. When the server reports the cap as the
    // end (`finish_reason: "length"`), the run says the answer was cut; llama-cpp-python does not
    // always, and then it is done.
    let (events, took) = local
        .run("Write the word go 500 times, separated by spaces.", LOCAL)
        .await;
    local.assert_all_accepted();
    assert!(
        done(&events) || cut_at_the_cap(&events),
        "{:?}",
        last(&events)
    );
    let said = parts_text(&events);
    assert!(
        said.len() <= CAP_CHARS,
        "past the cap of {CAP} tokens: {said:?}"
    );
    eprintln!("looping answer: {took:?}, {said:?}");

    // History with a tool call (made through the simulator), then the real server: the
    // assistant message carries its call with `content: ""` and the server accepts it.
    local
        .env
        .push(vec![tool("c1", "list", json!({"path": "."}))]);
    local.env.push(vec![text("There is a README.")]);
    let (events, _) = local.run("What is here?", agent_common::MODEL).await;
    assert!(done(&events), "{:?}", last(&events));
    assert_eq!(results(&events).len(), 1);

    // The old wire, `content: null` on that call (sent by the recorder as Totem sent it before
    // issue 16): the server refuses it with its own validation error, HTTP 500. That fails the
    // same way every time, so Totem asks once although retries are allowed, and the run fails
    // at once with the server's words.
    local
        .set_retrying(json!({"maxOutputTokens": CAP, "temperature": 0.0}), 3)
        .await;
    local.recorder.send_null_content(true);
    let before = local.chats().len();
    let (events, took) = local.run("Thanks. Say bye.", LOCAL).await;
    local.recorder.send_null_content(false);
    local
        .set(json!({"maxOutputTokens": CAP, "temperature": 0.0}))
        .await;
    let asked: Vec<u16> = local.chats()[before..]
        .iter()
        .filter(|e| e.body["messages"].to_string().contains("Say bye"))
        .map(|e| e.status)
        .collect();
    assert_eq!(asked, [500], "asked once\n{}", local.server.log_tail());
    let EventKind::RunFailed { run } = last(&events) else {
        panic!("{:?}", last(&events));
    };
    let error = run.error.clone().unwrap_or_default();
    assert!(error.contains("validation error"), "{error}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    eprintln!("validation error, asked once: {took:?}, {error:?}");
    let refused = local.chats().len();
    let (events, took) = local.run("Thanks. Say bye.", LOCAL).await;
    local.assert_all_accepted_since(refused);
    assert!(done(&events), "{:?}", last(&events));
    let chats = local.chats();
    let messages = chats.last().expect("a request").body["messages"].clone();
    let call = messages
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["tool_calls"].is_array())
        .unwrap_or_else(|| panic!("the tool call is sent back: {messages}"));
    assert_eq!(call["content"], json!(""), "{call}");
    assert!(
        messages
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["role"] == "tool" && m["tool_call_id"] == call["tool_calls"][0]["id"]),
        "{messages}"
    );
    eprintln!("tool history accepted: {took:?}");

    // Ctrl-C on `totem run` aborts the run in the daemon, and the server's stream with it;
    // `--detach` leaves the run going. A long answer is asked for, so the run is still
    // streaming when the signal comes.
    local
        .set(json!({"maxOutputTokens": 400, "temperature": 0.0}))
        .await;
    let before = local.chats().len();
    let child = local
        .totem(&[
            "run",
            "--json",
            "--model",
            LOCAL,
            "Write a long story about a dragon.",
        ])
        .spawn()
        .expect("spawn totem run");
    let (out, took) = tokio::task::spawn_blocking(move || {
        totem_tests::harness::signal_after_first_delta(child, nix::sys::signal::Signal::SIGINT)
    })
    .await
    .expect("totem run");
    let seen = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{seen}");
    assert!(took < Duration::from_secs(5), "totem took {took:?} to stop");
    let end: Value = seen
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("events");
    assert_eq!(end["type"], "run.aborted", "{seen}");
    let run_id = end["run"]["id"].as_str().expect("run id").to_string();
    assert_eq!(local.run_status(&run_id).await, "aborted");
    // One request for the run, and the daemon did not ask the server again.
    let asked = local.chats()[before..]
        .iter()
        .filter(|e| e.body["messages"].to_string().contains("dragon"))
        .count();
    assert_eq!(asked, 1);
    eprintln!("Ctrl-C: totem stopped {took:?} after the signal, the run aborted");

    // Room for a whole greeting: a run cut at the cap ends `failed` (issue 31), and this one is
    // to go on to its end.
    local
        .set(json!({"maxOutputTokens": 256, "temperature": 0.0}))
        .await;
    let started = Instant::now();
    let out = local
        .totem(&["run", "--detach", "--model", LOCAL, "Say hello."])
        .output()
        .expect("totem run --detach");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "--detach returns at once"
    );
    assert!(text.contains("attach --session ses_"), "{text}");
    let run_id = text
        .split_whitespace()
        .find(|w| w.starts_with("run_"))
        .expect("the run is named")
        .trim_end_matches(|c: char| !c.is_alphanumeric())
        .to_string();
    assert_eq!(local.run_status(&run_id).await, "done", "{text}");
    local.assert_all_accepted_since(before);

    // `tools: none`: no tools are sent or described, and whatever call the model writes in
    // its text stays text (the model is asked to write one; it does, or answers otherwise).
    local
        .set(json!({"maxOutputTokens": 4 * CAP, "temperature": 0.0, "tools": "none"}))
        .await;
    local.env.session = local.new_session().await;
    let before = local.chats().len();
    let (events, took) = local.run(WRITE_A_CALL, LOCAL).await;
    local.assert_all_accepted_since(before);
    assert!(done(&events), "{:?}", last(&events));
    assert!(results(&events).is_empty(), "{:?}", results(&events));
    let chats = local.chats();
    let asked = &chats[before..];
    assert_eq!(asked.len(), 1, "one step, nothing sent back");
    assert!(asked[0].body.get("tools").is_none(), "{}", asked[0].body);
    assert!(!asked[0].body.to_string().contains("Tools: call one"));
    let said = parts_text(&events);
    let wrote_call = !totem_tools::recover::calls_from_text(&said, &["list"]).is_empty();
    eprintln!("tools none: {took:?}, the model wrote a call: {wrote_call}, {said:?}");

    // Text tools (this template drops `tools`): the request carries the text form and no
    // `tools`, and a call the model writes in that shape is executed.
    // A new session, so the earlier answers do not lead the model; room for a call written
    // with spaces, newlines and a fence (a 135M model writes all three; 48 tokens cut one short).
    local
        .set(
            json!({"maxOutputTokens": 4 * CAP, "temperature": 0.0, "tools": "text",
                    "constrained": false}),
        )
        .await;
    // A 135M model at temperature 0 sometimes runs on past the call with keys of its own until
    // the cap cuts it (seen in CI once the tool list named arguments in their declared order):
    // a fresh session is asked again, up to three times, and one call must run.
    let mut attempt = 0;
    let (events, took) = loop {
        attempt += 1;
        local.env.session = local.new_session().await;
        let (events, took) = local.run(WRITE_A_CALL, LOCAL).await;
        let ran_list = results(&events)
            .iter()
            .any(|(tool, _, is_error)| tool == "list" && !is_error);
        if ran_list || attempt == 3 {
            break (events, took);
        }
        eprintln!(
            "text tools: attempt {attempt} wrote no runnable call: {:?}",
            parts_text(&events)
        );
    };
    local.assert_all_accepted_since(refused);
    let sent = &local.chats().last().expect("a request").body.clone();
    let first = local
        .chats()
        .into_iter()
        .rev()
        .find(|e| {
            e.body["messages"]
                .to_string()
                .contains("Reply with only this JSON")
        })
        .expect("the text-tools request");
    assert!(first.body.get("tools").is_none(), "{}", first.body);
    let system = first.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("Tools: call one by writing only a JSON object"),
        "{system}"
    );
    let ran = results(&events);
    assert!(
        ran.iter()
            .any(|(tool, _, is_error)| tool == "list" && !is_error),
        "the call written in text ran: {:?}; answer {:?}; last request {sent}",
        ran,
        parts_text(&events)
    );
    eprintln!("text tools: {took:?}, {} steps", ran.len() + 1);
    local
        .set(json!({"maxOutputTokens": CAP, "temperature": 0.0}))
        .await;

    // The probe: this template drops `tools`, so no native call; the window comes from the
    // server's refusal of an oversized request; the findings are saved.
    let started = Instant::now();
    let probe = local.probe().await;
    assert_eq!(probe["answers"], true, "{probe}");
    assert_eq!(probe["nativeTools"], false, "{probe}");
    assert_eq!(probe["contextWindow"], 4096, "{probe}");
    assert!(
        probe["tokensPerSecond"].as_f64().is_some_and(|t| t > 0.0),
        "{probe}"
    );
    let tools = if probe["textTools"] == true {
        "text"
    } else {
        "none"
    };
    assert_eq!(probe["settings"]["tools"], tools, "{probe}");
    assert_eq!(probe["settings"]["contextWindow"], 4096, "{probe}");
    assert_eq!(local.saved()["tools"], tools);
    let text_form = local.chats().iter().any(|e| {
        e.body.get("tools").is_none()
            && e.body["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.contains("- list {path: string}"))
    });
    assert!(
        text_form,
        "the text-tools question lists the tool in the prompt"
    );
    eprintln!("probe: {:?}, {probe}", started.elapsed());
}

/// `chatml-function-calling`: native tool calls, which this server cannot stream. The model
/// is asked to list the project; the server breaks the streamed answer off ("Automatic
/// streaming tool choice is not supported" in its log, an empty 200 stream on the wire), Totem
/// asks once more without streaming (and remembers it for the model), the call
/// runs, and the next step, carrying the call and its result, is accepted by the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_calling_template_runs_a_native_call_without_streaming() {
    let local = Local::start(
        Some("chatml-function-calling"),
        json!({"maxOutputTokens": CAP, "temperature": 0.0, "contextWindow": 4096}),
    )
    .await;
    let started = Instant::now();
    let mut stream = local.env.subscribe().await;
    local
        .env
        .prompt(
            "Call the list tool to list the files in the folder.",
            json!({"model": LOCAL}),
        )
        .await;
    // Follow until a tool result and the step after it; the model may go on calling tools, so
    // the test stops the run there, as a user would.
    let mut seen = Vec::new();
    loop {
        let event = next_event(&mut stream, 300).await;
        let end = agent_common::is_run_end(&event.kind);
        seen.push(event);
        let stepped = local
            .chats()
            .iter()
            .any(|e| e.status == 200 && sent_tool_result(&e.body));
        if end || (stepped && !results(&seen).is_empty()) {
            break;
        }
    }
    let took = started.elapsed();
    let _ = local
        .env
        .client
        .call_raw("session.abort", json!({"sessionId": local.env.session}))
        .await;
    let chats = local.chats();
    let summary: Vec<_> = chats
        .iter()
        .map(|e| (e.body["stream"].clone(), e.status))
        .collect();
    assert!(
        !results(&seen).is_empty(),
        "a native call ran: {:?}; requests {summary:?}\nserver log:\n{}",
        last(&seen),
        local.server.log_tail()
    );
    // The first request streamed, and the server broke that stream off at once (its headers
    // already said 200); the same request without streaming was answered, with no retries.
    assert_eq!(chats[0].body["stream"], json!(true));
    assert_eq!(chats[1].body["stream"], json!(false), "{summary:?}");
    assert_eq!(chats[1].body["messages"], chats[0].body["messages"]);
    assert_eq!(chats[1].status, 200, "{summary:?}");
    // The next step carries the call with content "" and its result; the server took it, and
    // was not asked to stream again.
    let step2 = chats
        .iter()
        .find(|e| sent_tool_result(&e.body))
        .expect("a request with the tool result");
    assert_eq!(
        step2.status,
        200,
        "{summary:?}\n{}",
        local.server.log_tail()
    );
    assert_eq!(
        step2.body["stream"],
        json!(false),
        "remembered: {summary:?}"
    );
    let call = step2.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["tool_calls"].is_array())
        .expect("the call is sent back");
    assert_eq!(call["content"], json!(""), "{call}");
    assert!(
        chats[1..]
            .iter()
            .all(|e| e.status == 200 && e.body["stream"] == json!(false)),
        "one streamed request only, every other one answered: {summary:?}"
    );
    eprintln!("native call round trip: {took:?}, {} requests", chats.len());

    // The probe tells the same: native calls, but not streamed; saved so runs do not stream.
    let started = Instant::now();
    let probe = local.probe().await;
    assert_eq!(probe["answers"], true, "{probe}");
    assert_eq!(probe["nativeTools"], true, "{probe}");
    assert_eq!(probe["streamsToolCalls"], false, "{probe}");
    assert_eq!(probe["settings"]["tools"], "native", "{probe}");
    assert_eq!(probe["settings"]["stream"], false, "{probe}");
    assert_eq!(local.saved()["stream"], false);
    eprintln!("probe: {:?}, {probe}", started.elapsed());
}

fn sent_tool_result(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
}
