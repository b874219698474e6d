// The web client in a real browser: Debian's chromium driven by playwright-core, against the real
// totemd and the Ollama simulator (`tests/tests/web.rs` starts them, queues the model's answers and
// watches the session from a socket client). What a person does: open the link `totem web`
// printed, send a prompt and watch the answer stream, see hostile Markdown shown harmlessly,
// answer a question after reading its side-by-side diff, see a question another client answered
// leave, undo and redo, be told by a browser notification while the tab is hidden, watch the
// model's terminal and take it over, read the run timeline, and use it all on a phone-sized
// screen.
// Environment: TOTEM_E2E_URL (the one-time link), TOTEM_E2E_TOOLS and TOTEM_E2E_CHROMIUM (see
// browsers.mjs; web.rs runs this walk in the installed chromium and in the version before it),
// TOTEM_TEST_PROJECT, TOTEM_E2E_SIGNALS (this test
// writes `asked2` when the page shows the second question; web.rs answers it from the socket),
// TOTEM_E2E_SHOTS (where screenshots go).

import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { launchChromium, pageErrors, until } from "./browsers.mjs";

const env = process.env;
const project = env.TOTEM_TEST_PROJECT;
const shots = env.TOTEM_E2E_SHOTS ?? "/tmp";
const HOSTILE = "<img src=x onerror=window.__xss=3>.md";

test("stream, hostile text, questions, another client, undo and redo, notifications, terminal, runs, phone", async (t) => {
  const browser = await launchChromium();
  t.after(() => browser.close());
  console.log(`chromium ${browser.version()}`);
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.grantPermissions(["notifications"], { origin: new URL(env.TOTEM_E2E_URL).origin });
  // Notifications shown are recorded; `window.__hidden` makes the tab hidden, as when another
  // tab is in front.
  await context.addInitScript(() => {
    window.__notes = [];
    window.__hidden = false;
    const Real = window.Notification;
    window.Notification = class extends Real {
      constructor(title, options) {
        window.__notes.push({ title, body: options?.body ?? "" });
        super(title, options);
      }
    };
    const hidden = Object.getOwnPropertyDescriptor(Document.prototype, "hidden");
    Object.defineProperty(Document.prototype, "hidden", {
      configurable: true,
      get() {
        return window.__hidden || hidden.get.call(this);
      },
    });
  });
  // A slow daemon: the page's first `session.get` waits 600 ms, so the first prompt is sent while
  // the session is still opening (under load it was, now and then, and went to a new session).
  await context.addInitScript(() => {
    const send = WebSocket.prototype.send;
    let slowed = false;
    WebSocket.prototype.send = function (data) {
      if (!slowed && String(data).includes('"method":"session.get"')) {
        slowed = true;
        setTimeout(() => send.call(this, data), 600);
        return;
      }
      send.call(this, data);
    };
  });
  const page = await context.newPage();
  const errors = pageErrors(page);
  const shot = (name) => page.screenshot({ path: join(shots, `${name}.png`) });

  const started = Date.now();
  await page.goto(env.TOTEM_E2E_URL);
  // The token left the address bar; the session of the project is open.
  await until("the page to connect", async () => (await page.locator(".session").count()) > 0);
  assert.equal(new URL(page.url()).search, "");
  console.log(`first paint to session list: ${Date.now() - started} ms`);

  // 1. An answer streams: part of it shows while the run still goes. The prompt is sent at once,
  // before the session has opened: it goes to that session, not to a new one.
  await page.locator(".prompt").fill("stream please");
  await page.locator(".prompt").press("Enter");
  const streaming = page.locator(".block.text.streaming");
  await streaming.waitFor({ timeout: 20000 });
  await until("the first words", async () => (await streaming.innerText().catch(() => "")).includes("First"));
  assert.equal(await streaming.count(), 1, "still streaming when the first words show");
  await page.locator(".block.end").first().waitFor({ timeout: 20000 });
  assert.equal(await page.locator(".session").count(), 1, "the prompt made no session of its own");
  const answer = page.locator(".block.text").first();
  assert.match(await answer.innerText(), /Last words\./);
  // Control and bidi characters show as visible escapes, as in the other clients.
  const said = await answer.innerText();
  assert.ok(said.includes("Named <U+202E>txt.exe \\x1b]0;pwned\\x07 here."), said);
  assert.ok(!/[\u202e\u001b\u0007]/.test(said), said);
  // Markdown with highlighted code; hostile HTML inert.
  assert.ok((await answer.locator("pre code.hljs span").count()) > 0, "highlighted code");
  assert.equal(await page.locator("img[onerror], script:not([src]), [onclick]").count(), 0);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  await shot("web-chat");

  // 2. A question with its diff, answered here; a second one answered by the socket client.
  await page.locator(".prompt").fill("write the files");
  await page.locator(".prompt").press("Enter");
  const question = page.locator(".block.question").filter({ has: page.locator(".answers") });
  await question.first().waitFor({ timeout: 20000 });
  const q1 = question.first();
  assert.equal(await q1.locator(".qline").innerText(), `Totem wants to change ${HOSTILE}.`);
  assert.ok((await q1.locator(".diff-table td.add").count()) > 0, "the diff side by side");
  assert.match(await q1.locator(".diff-table").innerText(), /<script>window.__xss=4<\/script>/);
  // "Always" says in words what it would store, the rule and the exact file.
  const remembers = await q1.locator("button.always-session").getAttribute("title");
  assert.match(remembers, /^Remembers: \w+\(.*\.md\)$/);
  await shot("web-question");
  await q1.locator("button.once").click();
  await until("the first file", () => existsSync(join(project, HOSTILE)));
  // The second question: the socket client answers it; the page withdraws its buttons.
  await until("the second question", async () => (await page.locator(".block.question .answers").count()) === 1 && (await page.locator(".block.question").count()) === 2);
  writeFileSync(join(env.TOTEM_E2E_SIGNALS, "asked2"), "");
  await until("the other client's answer to show", async () => (await page.locator(".block.question .answers").count()) === 0);
  assert.match(await page.locator(".block.question").nth(1).locator(".answered").innerText(), /once/);
  await until("the run to end", async () => (await page.locator(".block.end").count()) === 2);
  assert.equal(readFileSync(join(project, "docs", "second.txt"), "utf8"), "two\n");
  assert.equal(await page.locator("img[onerror], script:not([src])").count(), 0);
  assert.equal(await page.evaluate(() => window.__xss), undefined);

  // The changes: a file tree (a folder above its file), the hostile name as text.
  await page.locator(".changes-toggle").click();
  const file = page.locator(".tree .file .path", { hasText: "onerror" });
  await file.waitFor();
  assert.equal(await page.locator(".tree .folder").innerText(), "docs/");
  assert.equal(await page.locator(".tree .file[data-path='docs/second.txt'] .path").innerText(), "second.txt");
  await page.locator(".tree .folder").click();
  assert.ok(!(await page.locator(".tree .file[data-path='docs/second.txt']").isVisible()), "the folder folds");
  await page.locator(".tree .folder").click();
  await file.click();
  await page.locator(".file-diff .diff-table").waitFor();

  // 3. Undo and redo.
  await until("undo to be enabled", async () => !(await page.locator("button.undo").isDisabled()));
  await page.locator("button.undo").click();
  await until("the files to go", () => !existsSync(join(project, "docs", "second.txt")) && !existsSync(join(project, HOSTILE)));
  await until("the run dimmed", async () => (await page.locator(".block.undone").count()) > 0);
  // The prompt comes back with undo's answer, which may be read after the event that dims the run.
  await until("the undone prompt offered again", async () => (await page.locator(".prompt").inputValue()) === "write the files");
  await page.locator("button.redo").click();
  await until("the files back", () => existsSync(join(project, "docs", "second.txt")) && existsSync(join(project, HOSTILE)));
  await until("the run no longer dimmed", async () => (await page.locator(".block.undone").count()) === 0);
  assert.deepEqual(errors, []);

  // 4. The tab hidden: a question, then the run's end, each a browser notification (none came
  // while it was in front).
  assert.deepEqual(await page.evaluate(() => window.__notes), []);
  await page.evaluate(() => (window.__hidden = true));
  await page.locator(".prompt").fill("open a shell");
  await page.locator(".prompt").press("Enter");
  await until("the question's notification", async () => (await page.evaluate(() => window.__notes)).length === 1);
  const asked = (await page.evaluate(() => window.__notes))[0];
  assert.equal(asked.title, "Totem asks");
  const q3 = page.locator(".block.question").filter({ has: page.locator(".answers") }).first();
  await q3.locator("button.once").click();
  await until("the end's notification", async () => (await page.evaluate(() => window.__notes)).length === 2);
  assert.deepEqual((await page.evaluate(() => window.__notes))[1], { title: "Totem", body: "The run finished." });
  await page.evaluate(() => (window.__hidden = false));

  // 5. The model's terminal, live in xterm.js: watched, then taken over.
  await page.locator(".terminals-toggle").click();
  const rows = page.locator(".terminals .xterm-rows");
  await until("the shell's prompt", async () => /bash-[\d.]+[$#]/.test(await rows.innerText().catch(() => "")));
  assert.equal(await page.locator(".take-over").innerText(), "Take over");
  await page.locator(".take-over").click();
  assert.equal(await page.locator(".take-over").innerText(), "Give back");
  await page.keyboard.type("echo taken-$((6*7))");
  await page.keyboard.press("Enter");
  await until("the shell's answer", async () => (await rows.innerText()).includes("taken-42"));
  await shot("web-terminal");
  await page.locator(".take-over").click();
  assert.equal(await page.locator(".take-over").innerText(), "Take over");

  // 6. The run timeline: a column and a row per run, with its tokens.
  await page.locator(".runs-toggle").click();
  await until("the timeline", async () => (await page.locator(".timeline .run").count()) === 3);
  assert.equal(await page.locator(".run-table .run-row").count(), 3);
  assert.match(await page.locator(".run-summary").innerText(), /^3 runs: \S+ tokens/);
  await shot("web-runs");
  assert.deepEqual(errors, []);

  // 7. A phone: nothing wider than the screen, every control within it, the session list behind
  // the menu button, the terminal scrolling inside its own box.
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, storageState: await context.storageState() });
  const small = await phone.newPage();
  await small.goto(new URL("/", env.TOTEM_E2E_URL).href);
  // The same session from its stored messages.
  await small.locator(".block.text", { hasText: "Both written." }).waitFor({ timeout: 20000 });
  const width = await small.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `the page is ${width} px wide`);
  assert.ok(await small.locator(".menu").isVisible());
  assert.ok(!(await small.locator(".side").isVisible()) || (await small.locator(".side").boundingBox()).x < -100, "the list is tucked away");
  assert.ok(await small.locator(".prompt").isVisible());
  for (const control of [".toolbar button", ".pickers select", ".pickers button.send", ".menu", ".project"]) {
    for (const box of await small.locator(control).evaluateAll((es) => es.map((e) => e.getBoundingClientRect().toJSON()))) {
      assert.ok(box.x >= 0 && box.x + box.width <= 390 && box.y >= 0 && box.y + box.height <= 844, `${control} off the screen: ${JSON.stringify(box)}`);
    }
  }
  await small.screenshot({ path: join(shots, "web-phone.png") });
  await small.locator(".terminals-toggle").click();
  await small.locator(".terminals .xterm-rows").waitFor();
  await until("the terminal drawn", async () => (await small.locator(".terminals .xterm-rows").innerText()).includes("taken-42"));
  const wide = await small.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(wide <= 390, `with the terminal open the page is ${wide} px wide`);
  await small.locator(".terminals-toggle").click();
  await small.locator(".menu").click();
  await until("the list to slide in", async () => (await small.locator(".side").boundingBox())?.x >= 0);
  await small.locator(".session").first().waitFor();
  await phone.close();
});
