// The extension's protocol client against the real totemd and the Ollama simulator
// (`tests/tests/editors_vscode.rs` starts the simulator with its replies queued, type-checks
// `src/client.ts`, bundles it with esbuild and runs this file with `node --test`).
// Environment: TOTEM_HOME (settings.json names the simulator), TOTEM_BIN, TOTEM_TEST_PROJECT,
// TOTEM_VSCODE_OUT (the bundles of src/client.ts and src/state.ts).

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

const out = process.env.TOTEM_VSCODE_OUT;
const { TotemClient, TotemError, socketPath } = await import(join(out, "client.mjs"));
const { SessionsState, Transcript, toolLine } = await import(join(out, "state.mjs"));

const { TOTEM_BIN: totem, TOTEM_TEST_PROJECT: project, TOTEM_HOME: home } = process.env;
const model = "sim/llama3.2:latest";

/** Blocks without their run's id and undone mark, to compare by content. */
const plain = (blocks) => blocks.map(({ runId, undone, ...rest }) => rest);

async function until(what, done, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = done();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      assert.fail(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

const ran = (events, after) => events.slice(after).find((e) => e.type === "run.done");

test("the socket is found as totem finds it", () => {
  assert.equal(socketPath(undefined, { TOTEM_HOME: "/h", XDG_RUNTIME_DIR: "/r" }), "/h/run/totemd.sock");
  assert.equal(socketPath(undefined, { XDG_RUNTIME_DIR: "/r", HOME: "/u" }), "/r/totem/totemd.sock");
  assert.equal(socketPath(undefined, { HOME: "/u" }), "/u/.totem/run/totemd.sock");
  assert.equal(socketPath("/s.sock", { TOTEM_HOME: "/h" }), "/s.sock");
});

test("a tool call is one line", () => {
  assert.equal(toolLine("edit", { path: "a.js", oldString: "x" }), "edit a.js");
  assert.equal(toolLine("bash", { command: "ls\nrm x" }), "bash ls");
  assert.equal(toolLine("todo", { todos: [] }), "todo");
});

test("connect, prompt, stream, answer, files changed, undo, daemon restart", async () => {
  const lines = [];
  // No daemon answers yet: the client starts one.
  const client = await TotemClient.connect({ totem, log: (l) => lines.push(l) });
  assert.equal(client.server.protocolVersion, 1);
  assert.ok(client.server.capabilities.methods.includes("daemon.subscribe"));
  assert.equal(client.socketPath, join(home, "run", "totemd.sock"));
  const states = [];
  client.onState((s) => states.push(s));

  const proj = await client.request("project.open", { path: project });
  const session = await client.request("session.create", { projectId: proj.id });
  const list = await client.request("session.list", { projectId: proj.id });
  assert.deepEqual(list.items.map((s) => s.id), [session.id]);

  // The views' state follows the same events.
  const sessions = new SessionsState(proj.id);
  sessions.load(list.items);
  const chat = new Transcript();
  let firstDelta;
  const daemon = [];
  await client.subscribeDaemon((e) => {
    daemon.push(e);
    sessions.apply(e);
  });
  const events = [];
  await client.subscribeSession(session.id, 0, (e) => {
    events.push(e);
    chat.apply(e);
    if (e.type === "part.delta" && !firstDelta) {
      firstDelta = structuredClone(chat.blocks.at(-1));
    }
  });

  // A prompt; the answer streams in deltas, then the run ends.
  await client.request("session.prompt", { sessionId: session.id, text: "hi", model });
  await until("the first run's end", () => ran(events, 0));
  const streamed = events
    .filter((e) => e.type === "part.delta")
    .map((e) => e.text ?? e.delta ?? "")
    .join("");
  assert.equal(streamed, "Hello from the sim.");
  assert.ok(daemon.some((e) => e.type === "session.status" && e.status === "running"));
  assert.ok(daemon.some((e) => e.type === "run.ended"));
  // The answer grew in place: at the first delta the block held only the start of it.
  assert.equal(firstDelta.kind, "text");
  assert.equal(firstDelta.streaming, true);
  assert.ok(
    firstDelta.text.length < "Hello from the sim.".length && "Hello from the sim.".startsWith(firstDelta.text),
    firstDelta.text,
  );
  const run1 = chat.blocks[0].runId;
  assert.match(run1, /^run_/);
  assert.ok(chat.blocks.every((b) => b.runId === run1), "every block knows its run");
  assert.deepEqual(plain(chat.blocks), [
    { kind: "user", text: "hi", attachments: [], sent: [] },
    { kind: "text", text: "Hello from the sim.", streaming: false },
    { kind: "end", status: "done", error: undefined },
  ]);

  // A write asks with its diff; the answer lets it through; files.changed names the file.
  const second = events.length;
  await client.request("session.prompt", { sessionId: session.id, text: "make b three", model });
  const asked = await until("the question", () => events.slice(second).find((e) => e.type === "permission.asked"));
  assert.match(asked.question.diff, /\+const b = 3;/);
  await until("the daemon's question", () => daemon.some((e) => e.type === "permission.asked"));
  await until("the waiting badge", () => sessions.badge() === 1 && sessions.get(session.id).activity === "waiting");
  await client.request("permission.reply", {
    sessionId: session.id,
    questionId: asked.question.id,
    reply: { type: "once" },
  });
  const changed = await until("files.changed", () => events.slice(second).find((e) => e.type === "files.changed"));
  assert.deepEqual(changed.paths, ["math.js"]);
  await until("the second run's end", () => ran(events, second));
  assert.equal(sessions.badge(), 0);
  await until("idle again", () => sessions.get(session.id).activity === "idle");
  const asked2 = chat.blocks.find((b) => b.kind === "question");
  assert.equal(asked2.line, "Totem wants to change math.js.");
  assert.equal(asked2.answer, "once");
  assert.match(asked2.diff, /-const b = 2;/);
  const tool = chat.blocks.find((b) => b.kind === "tool");
  assert.equal(tool.line, "edit math.js");
  assert.equal(tool.error, false);
  assert.deepEqual(plain([chat.blocks.at(-2)]), [{ kind: "text", text: "Edited.", streaming: false }]);
  assert.equal(readFileSync(join(project, "math.js"), "utf8"), "const a = 1;\nconst b = 3;\n");

  // Undo puts it back and says so the same way.
  const third = events.length;
  const undone = await client.request("session.undo", { sessionId: session.id });
  assert.deepEqual(undone.files, ["math.js"]);
  await until("files.changed after undo", () => events.slice(third).some((e) => e.type === "files.changed"));
  assert.equal(readFileSync(join(project, "math.js"), "utf8"), "const a = 1;\nconst b = 2;\n");
  await until("the undo in the chat", () => chat.blocks.at(-1).kind === "changes");
  assert.deepEqual(chat.blocks.at(-1).files, ["math.js"]);
  assert.equal(chat.blocks.at(-1).verb, "undid");
  // The undo takes the run back: its prompt comes back to offer again, its blocks are undone
  // (the chat dims them), the first run's are not.
  assert.equal(undone.prompt, "make b three");
  const run2 = chat.blocks.find((b) => b.kind === "user" && b.text === "make b three").runId;
  assert.equal(undone.runId, run2);
  const ofRun = (id) => chat.blocks.filter((b) => b.kind !== "changes" && b.runId === id);
  assert.deepEqual(ofRun(run2).map((b) => b.kind), ["user", "tool", "question", "text", "end"]);
  assert.ok(ofRun(run2).every((b) => b.undone === true));
  assert.ok(ofRun(run1).every((b) => !b.undone));

  // Sessions made, renamed and deleted elsewhere show in the list.
  const other = await client.request("session.create", { projectId: proj.id, title: "Other" });
  await until("the new session listed", () => sessions.get(other.id)?.title === "Other");
  await client.request("session.rename", { sessionId: other.id, title: "Renamed" });
  await until("the new title", () => sessions.get(other.id)?.title === "Renamed");
  assert.deepEqual(sessions.sorted().map((s) => s.id), [other.id, session.id]);
  await client.request("session.delete", { sessionId: other.id });
  await until("the session gone", () => sessions.get(other.id) === undefined);

  // The daemon stops; the client waits, starts it again, and follows the session from where it was.
  const stop = spawnSync(totem, ["daemon", "stop"], { env: process.env });
  assert.equal(stop.status, 0, String(stop.stderr));
  await until("reconnecting", () => states.includes("reconnecting"));
  await assert.rejects(client.request("session.list", {}), TotemError);
  await until("connected again", () => client.state === "connected" && states.at(-1) === "connected");
  const fourth = events.length;
  await client.request("session.prompt", { sessionId: session.id, text: "again", model });
  await until("the run after the restart", () => ran(events, fourth));
  const seqs = events.filter((e) => e.type !== "part.delta").map((e) => e.seq);
  assert.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b), "no event twice, none out of order");
  assert.ok(events.slice(fourth).some((e) => e.type === "part.delta"));
  const users = chat.blocks.filter((b) => b.kind === "user").map((b) => b.text);
  assert.deepEqual(users, ["hi", "make b three", "again"]);
  assert.deepEqual(plain(chat.blocks.slice(-2)), [
    { kind: "text", text: "Back again.", streaming: false },
    { kind: "end", status: "done", error: undefined },
  ]);
  assert.ok(lines.some((l) => l.startsWith("→ ") && l.includes('"initialize"')));
  client.close();
  assert.equal(client.state, "closed");
});

test("a question's diff gives the proposed file, a run's diff the file before it", async () => {
  const { applyForward, applyBackward } = await import(join(out, "patch.mjs"));
  const before = "const a = 1;\nconst b = 2;\nconst c = 3;\n";
  const diff = "--- a/m.js\n+++ b/m.js\n@@ -1,3 +1,4 @@\n const a = 1;\n-const b = 2;\n+const b = 3;\n+const d = 4;\n const c = 3;\n";
  const after = "const a = 1;\nconst b = 3;\nconst d = 4;\nconst c = 3;\n";
  assert.equal(applyForward(before, diff), after);
  assert.equal(applyBackward(after, diff), before);
  // A file that changed since does not match: no made-up text.
  assert.equal(applyForward("something else\n", diff), undefined);
  // A new file.
  assert.equal(applyForward("", "--- /dev/null\n+++ b/n.js\n@@ -0,0 +1,2 @@\n+x\n+y\n"), "x\ny\n");
});
