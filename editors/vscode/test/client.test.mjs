// The extension's protocol client against the real totemd and the Ollama simulator
// (`tests/tests/editors_vscode.rs` starts the simulator with its replies queued, type-checks
// `src/client.ts`, bundles it with esbuild and runs this file with `node --test`).
// Environment: TOTEM_HOME (settings.json names the simulator), TOTEM_BIN, TOTEM_TEST_PROJECT,
// TOTEM_CLIENT_MODULE (the bundle).

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

const { TotemClient, TotemError, socketPath } = await import(process.env.TOTEM_CLIENT_MODULE);

const { TOTEM_BIN: totem, TOTEM_TEST_PROJECT: project, TOTEM_HOME: home } = process.env;
const model = "sim/llama3.2:latest";

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

  const daemon = [];
  await client.subscribeDaemon((e) => daemon.push(e));
  const events = [];
  await client.subscribeSession(session.id, 0, (e) => events.push(e));

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

  // A write asks with its diff; the answer lets it through; files.changed names the file.
  const second = events.length;
  await client.request("session.prompt", { sessionId: session.id, text: "make b three", model });
  const asked = await until("the question", () => events.slice(second).find((e) => e.type === "permission.asked"));
  assert.match(asked.question.diff, /\+const b = 3;/);
  await until("the daemon's question", () => daemon.some((e) => e.type === "permission.asked"));
  await client.request("permission.reply", {
    sessionId: session.id,
    questionId: asked.question.id,
    reply: { type: "once" },
  });
  const changed = await until("files.changed", () => events.slice(second).find((e) => e.type === "files.changed"));
  assert.deepEqual(changed.paths, ["math.js"]);
  await until("the second run's end", () => ran(events, second));
  assert.equal(readFileSync(join(project, "math.js"), "utf8"), "const a = 1;\nconst b = 3;\n");

  // Undo puts it back and says so the same way.
  const third = events.length;
  const undone = await client.request("session.undo", { sessionId: session.id });
  assert.deepEqual(undone.files, ["math.js"]);
  await until("files.changed after undo", () => events.slice(third).some((e) => e.type === "files.changed"));
  assert.equal(readFileSync(join(project, "math.js"), "utf8"), "const a = 1;\nconst b = 2;\n");

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
  assert.ok(lines.some((l) => l.startsWith("→ ") && l.includes('"initialize"')));
  client.close();
  assert.equal(client.state, "closed");
});
