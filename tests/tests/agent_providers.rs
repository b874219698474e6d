//! Providers as a run meets them in the field (issue 20), end to end: the real totemd against a
//! provider simulator taking on the wire variants of real servers.

mod agent_common;

use agent_common::{Answer, Env, follow, last, text};
use serde_json::json;
use totem_protocol::EventKind;

fn count(env: &Env, path: &str) -> usize {
    env.sim.requests().iter().filter(|r| r.path == path).count()
}

/// A run asks for the model list once (not once to resolve the model and again to stream),
/// and what `/api/show` said about each installed model is not asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_lists_models_once() {
    let env = Env::start().await;
    for answer in ["one", "two"] {
        env.push(vec![text(answer)]);
        let mut events = env.subscribe().await;
        let run = env.prompt("hi", json!({})).await;
        let events = follow(&env, &mut events, &run, Answer::None).await;
        assert!(
            matches!(last(&events), EventKind::RunDone { .. }),
            "{:?}",
            last(&events)
        );
    }
    // Three installed models, each shown once; the tags listed once.
    assert_eq!(count(&env, "/api/tags"), 1, "{:?}", env.sim.requests());
    assert_eq!(count(&env, "/api/show"), 3, "{:?}", env.sim.requests());
    assert_eq!(env.sim.chat_requests().len(), 2);
}
