//! Stopping runs: `session.abort` during a command kills its whole process group; background jobs
//! outlive the run that started them and their output can be read by a later run.

mod agent_common;

use std::time::{Duration, Instant};

use agent_common::{Answer, Env, follow, last, next_event, results, text, tool};
use serde_json::json;
use totem_protocol::EventKind;

/// A process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_during_bash_kills_the_process_group() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "bash",
        json!({"command": "sleep 60 & echo $! > child.pid; sleep 60"}),
    )]);
    env.push(vec![text("never reached")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("run something long", json!({})).await;

    // Allow the command, then wait until it has started its background child.
    loop {
        let e = next_event(&mut events, 30).await;
        if let EventKind::PermissionAsked { question } = &e.kind {
            env.reply(&question.id, json!({"type": "once"})).await;
            break;
        }
    }
    let pid_file = env.project.path().join("child.pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    let child: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(alive(child));

    let started = Instant::now();
    let aborted = env
        .client
        .call_raw("session.abort", json!({"sessionId": env.session}))
        .await
        .expect("session.abort");
    assert_eq!(aborted["runId"], run);
    let events = follow(&env, &mut events, &run, Answer::None).await;
    assert!(
        matches!(last(&events), EventKind::RunAborted { .. }),
        "{:?}",
        last(&events)
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(child) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !alive(child),
        "the background child {child} of the command survived the abort"
    );
    // Only one model request: the run stopped instead of going on.
    assert_eq!(env.sim.chat_requests().len(), 1);

    // The session takes the next prompt.
    let session = env
        .client
        .call_raw("session.get", json!({"sessionId": env.session}))
        .await
        .expect("session.get");
    assert_eq!(session["status"], "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_outlives_its_run_and_its_output_is_read_later() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "job",
        json!({"action": "start", "command": "echo first-line; sleep 1; echo last-line"}),
    )]);
    env.push(vec![text("Started the job.")]);
    let mut events = env.subscribe().await;
    let run = env.prompt("start it", json!({})).await;
    let first = follow(&env, &mut events, &run, Answer::Once).await;
    assert!(matches!(last(&first), EventKind::RunDone { .. }));
    let started = results(&first);
    assert!(started[0].1.contains("j1"), "{started:?}");

    env.push(vec![tool(
        "c2",
        "job",
        json!({"action": "wait", "id": "j1", "timeout": 10}),
    )]);
    env.push(vec![text("It finished.")]);
    let run = env.prompt("how did it go?", json!({})).await;
    let second = follow(&env, &mut events, &run, Answer::Once).await;
    assert!(matches!(last(&second), EventKind::RunDone { .. }));
    let output = &results(&second)[0].1;
    assert!(output.contains("last-line"), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_while_a_question_waits_withdraws_it() {
    let env = Env::start().await;
    env.push(vec![tool(
        "c1",
        "write",
        json!({"path": "never.txt", "content": "x"}),
    )]);
    let mut events = env.subscribe().await;
    let run = env.prompt("write", json!({})).await;
    let question = loop {
        if let EventKind::PermissionAsked { question } = next_event(&mut events, 30).await.kind {
            break question;
        }
    };
    env.client
        .call_raw("session.abort", json!({"sessionId": env.session}))
        .await
        .expect("abort");
    let events = follow(&env, &mut events, &run, Answer::None).await;
    assert!(matches!(last(&events), EventKind::RunAborted { .. }));
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        EventKind::PermissionResolved { question_id, reply: None, reason } if *question_id == question.id && *reason == Some(totem_protocol::WithdrawnReason::Aborted)
    )));
    let open = env
        .client
        .call_raw("permission.list", json!({"sessionId": env.session}))
        .await
        .expect("permission.list");
    assert_eq!(open["questions"], json!([]));
    assert!(!env.project.path().join("never.txt").exists());
}
