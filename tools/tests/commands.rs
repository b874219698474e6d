//! bash, job and todo: process groups, timeouts, cancellation, jobs outliving runs, events.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use totem_tools::context::ToolEvent;
use totem_tools::tool::todo::TodoStatus;
use totem_tools::{
    AccessKind, JobManager, MemoryBlobs, MemoryEvents, Registry, ToolContext, ToolOutput,
};

fn project() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path()).unwrap();
    (dir, ctx)
}

async fn call(ctx: &ToolContext, tool: &str, args: Value) -> ToolOutput {
    match Registry::builtin().prepare(tool, args, ctx, false) {
        Ok(call) => call.run(ctx).await,
        Err(e) => e.into(),
    }
}

/// Whether a process still runs (a zombie waiting for a reaper counts as gone).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

async fn gone_soon(pid: i32) -> bool {
    for _ in 0..50 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The pid a command wrote to `file` in the project.
async fn pid_from(root: &Path, file: &str) -> i32 {
    for _ in 0..50 {
        if let Ok(text) = std::fs::read_to_string(root.join(file))
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no pid in {file}");
}

const GRANDCHILD: &str = "sleep 300 & echo $! > gc.pid; wait";

// ── bash ─────────────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn bash_runs_in_the_project_root() {
    let (dir, ctx) = project();
    let out = call(&ctx, "bash", json!({"command": "pwd"})).await;
    assert!(!out.is_error, "{}", out.text);
    let root = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(out.text.trim(), root.to_string_lossy());
    assert_eq!(out.meta.exit_code, Some(0));
}

#[tokio::test]
async fn bash_reports_a_failing_exit_code() {
    let (_dir, ctx) = project();
    let out = call(&ctx, "bash", json!({"command": "echo oops; exit 3"})).await;
    assert!(out.is_error);
    assert_eq!(out.meta.exit_code, Some(3));
    assert_eq!(out.text, "oops\n[exit code 3]");
}

#[tokio::test]
async fn bash_collects_stdout_and_stderr() {
    let (_dir, ctx) = project();
    let out = call(&ctx, "bash", json!({"command": "echo out; echo err >&2"})).await;
    assert!(
        out.text.contains("out\n") && out.text.contains("err\n"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn bash_has_no_stdin() {
    let (_dir, ctx) = project();
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        call(&ctx, "bash", json!({"command": "cat; echo done"})),
    )
    .await
    .unwrap();
    assert_eq!(out.text, "done\n");
}

#[tokio::test]
async fn bash_timeout_kills_the_whole_process_group() {
    let (dir, ctx) = project();
    let started = std::time::Instant::now();
    let out = call(&ctx, "bash", json!({"command": GRANDCHILD, "timeout": 1})).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.is_error);
    assert!(out.meta.timed_out);
    assert!(out.text.contains("timed out after 1 s"), "{}", out.text);
    let grandchild = pid_from(dir.path(), "gc.pid").await;
    assert!(
        gone_soon(grandchild).await,
        "grandchild {grandchild} survived"
    );
}

#[tokio::test]
async fn bash_cancellation_kills_the_whole_process_group() {
    let (dir, ctx) = project();
    let token = CancellationToken::new();
    let ctx = ctx.with_cancel(token.clone());
    let cancel = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        token.cancel();
    });
    let out = call(&ctx, "bash", json!({"command": GRANDCHILD})).await;
    cancel.await.unwrap();
    assert!(out.meta.cancelled);
    assert!(out.text.contains("cancelled"), "{}", out.text);
    let grandchild = pid_from(dir.path(), "gc.pid").await;
    assert!(
        gone_soon(grandchild).await,
        "grandchild {grandchild} survived"
    );
}

#[tokio::test]
async fn bash_returns_without_waiting_for_background_leftovers_and_kills_them() {
    let (dir, ctx) = project();
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        call(
            &ctx,
            "bash",
            json!({"command": "sleep 300 & echo $! > gc.pid; echo started"}),
        ),
    )
    .await
    .expect("bash waited for a background process");
    assert_eq!(out.text, "started\n");
    let leftover = pid_from(dir.path(), "gc.pid").await;
    assert!(gone_soon(leftover).await);
}

#[tokio::test]
async fn bash_caps_output_and_keeps_the_full_output_as_a_blob() {
    let (_dir, ctx) = project();
    let blobs = Arc::new(MemoryBlobs::default());
    let ctx = ctx.with_blobs(blobs.clone());
    let out = call(&ctx, "bash", json!({"command": "seq 1 100000"})).await;
    assert!(!out.is_error);
    assert!(out.text.len() < 31_000, "{}", out.text.len());
    assert!(out.meta.truncated);
    assert!(out.text.starts_with("1\n2\n"));
    assert!(out.text.contains("100000\n"));
    assert!(
        out.text.contains("bytes omitted (output was 588895 bytes"),
        "{}",
        &out.text[9000..11000]
    );
    let full = blobs.get(out.meta.blob.as_deref().unwrap()).unwrap();
    assert_eq!(full.len(), 588_895);
}

#[tokio::test]
async fn bash_asks_to_execute_the_command() {
    let (_dir, ctx) = project();
    let call = Registry::builtin()
        .prepare("bash", json!({"command": " git status "}), &ctx, false)
        .unwrap();
    assert_eq!(call.plan.access[0].kind, AccessKind::Execute);
    assert_eq!(call.plan.access[0].target, "git status");
    assert!(call.plan.executes() && !call.plan.writes_files());
}

#[tokio::test]
async fn plans_say_whether_a_call_executes_or_writes_files() {
    let (_dir, ctx) = project();
    let plan = |tool: &str, args: Value| {
        Registry::builtin()
            .prepare(tool, args, &ctx, false)
            .unwrap()
            .plan
    };
    let start = plan("job", json!({"action": "start", "command": "sleep 1"}));
    assert!(start.executes(), "starting a job runs a command");
    let status = plan("job", json!({"action": "list"}));
    assert!(
        !status.executes() && !status.changes_unnamed_files(),
        "listing jobs runs nothing"
    );
    assert!(
        start.changes_unnamed_files(),
        "a command's changes are found by a scan"
    );
    let write = plan("write", json!({"path": "a.txt", "content": "x"}));
    assert!(write.writes_files() && !write.executes());
    let glob = plan("glob", json!({"pattern": "*"}));
    assert!(!glob.writes_files() && !glob.executes());
}

#[tokio::test]
async fn bash_refuses_an_empty_command() {
    let (_dir, ctx) = project();
    let out = call(&ctx, "bash", json!({"command": "  "})).await;
    assert!(out.is_error);
    assert_eq!(out.text, "command is empty");
}

// ── job ──────────────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn job_outlives_its_run_and_its_output_can_be_read_later() {
    let (dir, first_run) = project();
    let jobs = first_run.jobs.clone();
    let run_token = CancellationToken::new();
    let first_run = first_run.with_cancel(run_token.clone());
    let out = call(
        &first_run,
        "job",
        json!({"action": "start", "command": "echo start; sleep 1; echo done"}),
    )
    .await;
    assert_eq!(out.meta.job_id.as_deref(), Some("j1"), "{}", out.text);
    // The run ends (aborted, even); the session's jobs go on.
    run_token.cancel();
    drop(first_run);
    let second_run = ToolContext::new(dir.path()).unwrap().with_jobs(jobs);
    let out = call(
        &second_run,
        "job",
        json!({"action": "wait", "id": "j1", "timeout": 20}),
    )
    .await;
    assert_eq!(out.text, "start\ndone\n[job j1: ended, exit code 0]");
    assert_eq!(out.meta.exit_code, Some(0));
}

#[tokio::test]
async fn job_output_returns_only_what_is_new() {
    let (_dir, ctx) = project();
    call(
        &ctx,
        "job",
        json!({"action": "start", "command": "echo a; sleep 1; echo b; sleep 30"}),
    )
    .await;
    let mut first = String::new();
    for _ in 0..50 {
        first = call(&ctx, "job", json!({"action": "output", "id": "j1"}))
            .await
            .text;
        if first.contains("a\n") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(first.starts_with("a\n"), "{first}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let second = call(&ctx, "job", json!({"action": "output", "id": "j1"}))
        .await
        .text;
    assert_eq!(second, "b\n[job j1: running]");
    let third = call(&ctx, "job", json!({"action": "output", "id": "j1"}))
        .await
        .text;
    assert_eq!(third, "(no new output)\n[job j1: running]");
    ctx.jobs.kill_all();
}

#[tokio::test]
async fn job_wait_returns_at_the_timeout_while_still_running() {
    let (_dir, ctx) = project();
    call(
        &ctx,
        "job",
        json!({"action": "start", "command": "sleep 30"}),
    )
    .await;
    let started = std::time::Instant::now();
    let out = call(
        &ctx,
        "job",
        json!({"action": "wait", "id": "j1", "timeout": 1}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(out.text.ends_with("[job j1: running]"), "{}", out.text);
    ctx.jobs.kill_all();
}

#[tokio::test]
async fn job_kill_kills_the_whole_process_group() {
    let (dir, ctx) = project();
    call(
        &ctx,
        "job",
        json!({"action": "start", "command": GRANDCHILD}),
    )
    .await;
    let grandchild = pid_from(dir.path(), "gc.pid").await;
    let out = call(&ctx, "job", json!({"action": "kill", "id": "j1"})).await;
    assert_eq!(out.text, "killed job j1");
    assert!(gone_soon(grandchild).await);
    let listed = call(&ctx, "job", json!({"action": "list"})).await.text;
    // SIGTERM first, SIGKILL for the group 500 ms later (3b32747): either ends the leader.
    assert!(
        listed.starts_with("j1 [ended, killed by signal 15]")
            || listed.starts_with("j1 [ended, killed by signal 9]"),
        "{listed}"
    );
}

#[tokio::test]
async fn dropping_the_job_manager_kills_its_jobs() {
    let (dir, ctx) = project();
    call(
        &ctx,
        "job",
        json!({"action": "start", "command": GRANDCHILD}),
    )
    .await;
    let grandchild = pid_from(dir.path(), "gc.pid").await;
    assert!(alive(grandchild));
    drop(ctx); // the last handle: the session is gone
    assert!(gone_soon(grandchild).await, "job survived its session");
}

#[tokio::test]
async fn job_list_shows_every_job() {
    let (_dir, ctx) = project();
    call(&ctx, "job", json!({"action": "start", "command": "true"})).await;
    call(
        &ctx,
        "job",
        json!({"action": "start", "command": "sleep 30"}),
    )
    .await;
    ctx.jobs
        .wait("j1", Duration::from_secs(5), &CancellationToken::new())
        .await;
    let out = call(&ctx, "job", json!({"action": "list"})).await;
    let lines: Vec<&str> = out.text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("j1 [ended, exit code 0]") && lines[0].ends_with(": true"));
    assert!(lines[1].starts_with("j2 [running]") && lines[1].ends_with(": sleep 30"));
    ctx.jobs.kill_all();
}

#[tokio::test]
async fn job_with_an_unknown_id_is_an_error() {
    let (_dir, ctx) = project();
    let out = call(&ctx, "job", json!({"action": "output", "id": "j9"})).await;
    assert!(out.is_error);
    assert!(out.text.contains("no job \"j9\""));
}

#[tokio::test]
async fn job_start_asks_to_execute_and_needs_a_command() {
    let (_dir, ctx) = project();
    let registry = Registry::builtin();
    let prepared = registry
        .prepare(
            "job",
            json!({"action": "start", "command": "npm run dev"}),
            &ctx,
            false,
        )
        .unwrap();
    assert_eq!(prepared.plan.access[0].kind, AccessKind::Execute);
    assert_eq!(prepared.plan.access[0].target, "npm run dev");
    let err = registry
        .prepare("job", json!({"action": "start"}), &ctx, false)
        .unwrap_err();
    assert_eq!(err.to_string(), "job start needs a command");
}

#[tokio::test]
async fn job_manager_shared_by_clones() {
    let jobs = JobManager::new();
    let dir = tempfile::tempdir().unwrap();
    let id = jobs
        .start("echo hi", dir.path(), &Default::default())
        .unwrap();
    let other = jobs.clone();
    other
        .wait(&id, Duration::from_secs(5), &CancellationToken::new())
        .await;
    assert_eq!(jobs.output(&id).unwrap().text, "hi\n");
}

// ── todo ─────────────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn todo_emits_the_plan_as_an_event() {
    let (_dir, ctx) = project();
    let events = Arc::new(MemoryEvents::default());
    let ctx = ctx.with_events(events.clone());
    let out = call(
        &ctx,
        "todo",
        json!({"todos": [
            {"content": "read the code", "status": "done"},
            {"content": "fix the bug", "status": "in_progress"},
            {"content": "run tests", "status": "pending"}
        ]}),
    )
    .await;
    assert_eq!(
        out.text,
        "[x] read the code\n[>] fix the bug\n[ ] run tests\n"
    );
    let events = events.events();
    assert_eq!(events.len(), 1);
    let ToolEvent::Todos { todos } = &events[0] else {
        panic!("not a todo event: {:?}", events[0]);
    };
    assert_eq!(todos.len(), 3);
    assert_eq!(todos[1].status, TodoStatus::InProgress);
}

#[tokio::test]
async fn todo_needs_no_permission_and_is_allowed_in_plan_mode() {
    let (_dir, ctx) = project();
    let call = Registry::builtin()
        .prepare("todo", json!({"todos": []}), &ctx, true)
        .unwrap();
    assert!(call.plan.access.is_empty());
    assert!(call.plan.writes.is_empty());
}

#[tokio::test]
async fn bash_output_loses_colour_codes_and_progress_redraws() {
    let (_dir, ctx) = project();
    let out = call(
        &ctx,
        "bash",
        json!({"command": "printf '\\033[32mok\\033[0m\\n10%%\\r100%%\\n'"}),
    )
    .await;
    assert_eq!(out.text, "ok\n100%\n");
}
