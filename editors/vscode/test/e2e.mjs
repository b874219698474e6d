// The extension in a real VS Code: code-server (VS Code's server, from npm) with the packaged
// .vsix installed, its page driven by Debian's chromium through playwright-core
// (`tests/tests/editors_vscode.rs` starts code-server, the simulator with its replies queued and
// nothing else: the extension starts totemd itself). What a person does: open the chat, pick a
// mode and a reasoning level, type a prompt, watch the answer stream (an opened reasoning stays
// open, a selection stays), answer the question after looking at its diff, see the file change,
// the changes tree, undo and redo; ask about a selection and read the Markdown answer; see the
// REPL on the same session answer a question; rename the session; stop the daemon, see the views
// say so, start it with a changed command; deny with a note in the chat; retry a failed run; and
// the README's screenshots in the dark and light themes.
// Environment: TOTEM_E2E_URL (code-server with the project open), TOTEM_E2E_TOOLS and
// TOTEM_E2E_CHROMIUM (see web/test/browsers.mjs, which launches the browser), TOTEM_TEST_PROJECT,
// TOTEM_E2E_SIGNALS (a folder: this test writes `asked` when the chat shows the second question,
// editors_vscode.rs writes `repl-done` once the REPL has answered it and left; the wrapper of
// TOTEM_E2E_WRAPPER writes `wrapper-used` when it runs), TOTEM_E2E_SETTINGS (code-server's user
// settings.json), TOTEM_E2E_SHOTS (where the screenshots go).

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { launchChromium, until as untilWithin } from "../../../web/test/browsers.mjs";

const { TOTEM_E2E_URL: url, TOTEM_TEST_PROJECT: project } = process.env;

const signals = process.env.TOTEM_E2E_SIGNALS;
const file = () => readFileSync(join(project, "math.js"), "utf8");

// VS Code takes longer than the web client: 30 s unless a step says otherwise.
const until = (what, done, ms = 30000) => untilWithin(what, done, ms);

test("chat, questions, changes, selection, another client, daemon away, retry, both themes", async (t) => {
  const browser = await launchChromium();
  t.after(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(url).origin });
  const page = await context.newPage();
  const shots = process.env.TOTEM_E2E_SHOTS ?? "/tmp";
  const shot = async (name) => page.screenshot({ path: join(shots, `${name}.png`) });
  try {
    // code-server takes a moment to listen.
    await until("code-server to answer", () => page.goto(url).then(() => true, () => false), 60000);
    await page.locator(".monaco-workbench").waitFor({ timeout: 60000 });
    const status = page.locator(".statusbar");

    // The extension activates on startup, starts totemd and says which model it uses.
    await until("the status bar item", async () => (await status.innerText()).includes("Totem: llama3.2:latest"), 60000);

    // The chat has a view container of its own: it takes the whole side bar.
    const chatIcon = page.locator('.activitybar a.action-label[aria-label="Totem Chat"]');
    // Its item, not its label: the badge covers the label.
    const sessionsIcon = page.locator('.activitybar li.action-item:has(> a.action-label[aria-label^="Totem"]:not([aria-label="Totem Chat"]))');
    await chatIcon.click();
    const chatFrame = page.locator("iframe.webview.ready");
    const chat = page.frameLocator("iframe.webview.ready").frameLocator("#active-frame");
    const prompt = chat.locator("#prompt");
    await prompt.waitFor({ timeout: 30000 });
    const height = (await chatFrame.boundingBox()).height;
    assert.ok(height > 600, `the chat is ${height} px high in a 800 px window`);
    // Its page, to look at what a locator cannot (selection, scroll, styles).
    const frame = await (await (await chatFrame.elementHandle()).contentFrame()).locator("#active-frame").elementHandle().then((h) => h.contentFrame());
    const inChat = (fn, arg) => frame.evaluate(fn, arg);

    const palette = async (command) => {
      await page.keyboard.press("F1");
      await page.locator(".quick-input-widget input.input").waitFor();
      await page.keyboard.type(command);
      await until(`"${command}" in the palette`, async () =>
        (await page.locator(".quick-input-list .monaco-list-row").first().innerText().catch(() => "")).includes(command),
      );
      await page.keyboard.press("Enter");
    };
    // Changes the user settings as a person does: settings.json in the editor, saved.
    const settings = async (patch) => {
      const path = process.env.TOTEM_E2E_SETTINGS;
      const next = JSON.stringify({ ...JSON.parse(readFileSync(path, "utf8")), ...patch }, null, 2);
      await palette("Preferences: Open User Settings (JSON)");
      await until("settings.json open", async () => (await page.locator(".tab.active .label-name").innerText().catch(() => "")) === "settings.json");
      await until("the editor to have focus", () => page.evaluate(() => !!document.activeElement?.closest(".monaco-editor")));
      await page.evaluate((text) => navigator.clipboard.writeText(text), next);
      await page.keyboard.press("Control+A");
      await page.keyboard.press("Control+V");
      await page.keyboard.press("Control+S");
      await until("settings.json saved", () => {
        try {
          const saved = JSON.parse(readFileSync(path, "utf8"));
          return Object.entries(patch).every(([k, v]) => saved[k] === v);
        } catch {
          return false;
        }
      });
      await page.keyboard.press("Control+W");
    };

    // Labels fit: no button or picker of the chat cuts its text.
    const cut = () =>
      inChat(() =>
        [...document.querySelectorAll("button, select")]
          .filter((e) => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
          .map((e) => e.textContent.trim().slice(0, 40)),
      );
    assert.deepEqual(await cut(), [], "labels cut off in the chat");

    // Pickers: reasoning on a model that cannot think says it has no effect.
    await chat.locator("#reasoning").selectOption("high");
    await until("the no-effect hint", async () => (await chat.locator("#hint").innerText().catch(() => "")).includes("has no effect"));
    assert.match(await chat.locator("#hint").innerText(), /Reasoning has no effect: .*llama3\.2:latest does not think\./);
    assert.ok((await chat.locator("#reasoning option[value=high]").innerText()).includes("(no effect)"));
    assert.match(await chat.locator("#model option").first().innerText(), /llama3\.2:latest\) \(does not think\)$/);
    await chat.locator("#reasoning").selectOption("");
    await until("the hint gone", async () => !(await chat.locator("#hint").isVisible()));
    // A mode picked in the chat holds until totem.defaultMode changes; then the setting wins.
    await chat.locator("#mode").selectOption("plan");
    await until("plan picked", async () => (await chat.locator("#mode").inputValue()) === "plan");
    await settings({ "totem.defaultMode": "review" });
    await until("the changed default mode", async () => (await chat.locator("#mode").inputValue()) === "review");
    await settings({ "totem.defaultMode": "build" });
    await until("build again", async () => (await chat.locator("#mode").inputValue()) === "build");

    await prompt.fill("make b three");
    await prompt.press("Enter");

    // The question: a notification with a sentence and four short actions; the status bar waits.
    const toast = page.locator(".notification-toast", { hasText: "Totem wants to change math.js." });
    await toast.waitFor({ timeout: 30000 });
    const toastText = await toast.innerText();
    assert.ok(!toastText.includes("`") && !/wants to write|rule/.test(toastText), `the notification says:\n${toastText}`);
    for (const action of ["Allow", "Always…", "Deny", "Diff"]) {
      const link = toast.locator("a", { hasText: action });
      const box = await link.boundingBox();
      const outer = await toast.boundingBox();
      assert.ok(box && box.x + box.width <= outer.x + outer.width, `"${action}" does not fit in the notification`);
    }
    // A question waits for the person: no running bar under it as under work in progress.
    await until("no running bar under the question", async () => (await toast.locator(".monaco-progress-container.infinite").count()) === 0, 5000);
    assert.equal(await toast.locator(".monaco-progress-container").count(), 1, "the toast is not a progress notification (it could not be withdrawn)");
    await until("the status bar to wait", async () => (await status.innerText()).includes("Totem: waiting for you"));
    // The chat shows it too, with its diff, after the reasoning (folded) and the tool call's line.
    await chat.locator(".question", { hasText: "+const b = 3;" }).waitFor();
    const reasoning = chat.locator("details.reasoning");
    assert.ok((await reasoning.textContent()).includes("Weighing b."));
    assert.equal(await reasoning.getAttribute("open"), null, "the reasoning is folded");
    await chat.locator(".tool", { hasText: "edit math.js" }).waitFor();
    // Icons are codicons (a font VS Code ships), not emoji that need an emoji font.
    const iconFont = await inChat(() => getComputedStyle(document.querySelector(".tool .codicon"), "::before").fontFamily);
    assert.match(iconFont, /codicon/);
    assert.ok(!/\p{Extended_Pictographic}/u.test(await chat.locator("#log").innerText()), "emoji in the chat");
    // The sessions view says the session waits, and the Totem icon carries a badge.
    const icon = page.locator('.activitybar li.action-item[aria-label^="Totem - "]');
    assert.equal(await icon.getAttribute("aria-label"), "Totem - 1 question waits for you");
    assert.equal((await icon.locator(".badge-content").innerText()).trim(), "1");
    await sessionsIcon.click();
    const sessionRow = page.locator(".monaco-list-row", { hasText: "make b three" });
    await sessionRow.filter({ hasText: "1 waiting" }).waitFor();
    await chatIcon.click();
    await toast.locator("a", { hasText: "Diff" }).click();
    // VS Code's diff editor on the proposed change: the old line on the left, the new one on the right.
    const tab = page.locator(".tab", { hasText: "math.js ↔ proposed by Totem" });
    await tab.waitFor({ timeout: 15000 });
    const diffEditor = page.locator(".monaco-diff-editor");
    await until("both sides of the diff", async () => {
      // Monaco draws spaces as no-break spaces.
      const text = (await diffEditor.innerText().catch(() => "")).replace(/\u00a0/g, " ");
      return text.includes("const b = 2;") && text.includes("const b = 3;");
    });
    assert.equal(file(), "const a = 1;\nconst b = 2;\n", "nothing written before the answer");

    // Open the reasoning and select the prompt: both stay while the answer streams.
    await reasoning.locator("summary").click();
    await inChat(() => {
      const user = document.querySelector(".user .utext");
      user.dataset.kept = "yes";
      const range = document.createRange();
      range.selectNodeContents(user);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
    });
    // The notification is still up after the diff: allow once.
    await toast.locator("a", { hasText: "Allow" }).click();
    await until("the notification withdrawn", async () => (await toast.count()) === 0);

    // The file is written; the answer streams into the chat, part by part.
    await until("math.js to change", () => file().includes("const b = 3;"));
    const text = chat.locator("#log");
    await until("the first words", async () => (await text.innerText()).includes("First words."));
    const early = await text.innerText();
    assert.ok(!early.includes("Last words."), `the answer came at once, not as it streamed:\n${early}`);
    await until("the middle words", async () => (await text.innerText()).includes("Middle words."));
    // Streaming appended to the last block: the rest of the log was not drawn again.
    assert.equal(await reasoning.getAttribute("open"), "", "the opened reasoning closed while the answer streamed");
    assert.equal(await inChat(() => getSelection().toString()), "make b three", "the selection went while the answer streamed");
    assert.equal(await inChat(() => document.querySelector(".user .utext").dataset.kept), "yes", "the prompt was drawn again");
    await until("the run's end", async () => (await chat.locator(".end.done").count()) === 1);
    assert.ok((await text.innerText()).includes("Last words."));
    await until("the status bar to be idle", async () => (await status.innerText()).includes("Totem: llama3.2:latest"));


    // The changes tree lists math.js; Undo (its title bar button) puts the file back.
    await sessionsIcon.click();
    const changes = page.locator(".pane", { hasText: "Totem changes" });
    await until("math.js in the changes tree", async () =>
      (await changes.locator(".monaco-list-row").allInnerTexts()).some((t) => t.includes("math.js")),
    );
    await changes.locator(".pane-header").hover();
    await changes.locator('.pane-header [aria-label="Undo the Last Run\'s Changes"]').click();
    await until("math.js to be put back", () => file() === "const a = 1;\nconst b = 2;\n");
    await page.locator(".notification-toast", { hasText: "Undid the changes to math.js; its prompt is back" }).waitFor();
    // The run is taken back in the chat too: dimmed, its prompt marked, and offered again in the box.
    await chatIcon.click();
    await chat.locator(".undone.user", { hasText: "(undone)" }).waitFor();
    await until("the prompt back in the box", async () => (await prompt.inputValue()) === "make b three");
    // Redo (beside it) writes it again.
    await sessionsIcon.click();
    await changes.locator(".pane-header").hover();
    await changes.locator('.pane-header [aria-label="Redo the Undone Changes"]').click();
    await until("math.js to be written again", () => file() === "const a = 1;\nconst b = 3;\n");
    await page.locator(".notification-toast", { hasText: "Redid the changes to math.js" }).waitFor();
    await chatIcon.click();
    await until("the run back in the chat", async () => (await chat.locator(".undone").count()) === 0);
    await until("the box emptied", async () => (await prompt.inputValue()) === "");

    // Rename is in the session's context menu, not a button over its status.
    await sessionsIcon.click();
    assert.equal(await sessionRow.locator(".actions .action-label").count(), 0, "an inline action on the session");
    // Renamed through it: the new title in the Sessions view, the chat, and the daemon's list
    // (`totem sessions`, another client).
    // VS Code's menu listens for a click on its entries only once a 100 ms timer of its own has
    // fired (vs/base/browser/ui/menu/menu.ts, so that the right button's release does not pick an
    // entry). On a loaded machine chromium runs a queued click before that overdue timer, and the
    // click is lost: the menu stays open with the entry highlighted and no input box (CI, three
    // times). A timer of the page set after the menu is drawn fires after the menu's own.
    await sessionRow.click({ button: "right" });
    const entry = page.locator(".monaco-menu .action-label", { hasText: "Rename…" });
    await entry.waitFor();
    await page.evaluate(() => new Promise((r) => setTimeout(r, 150)));
    await entry.click();
    const input = page.locator(".quick-input-widget input.input");
    await input.waitFor({ timeout: 10000 });
    assert.equal(await input.inputValue(), "make b three", "the input box offers the session's title");
    await input.fill("b and friends");
    await page.keyboard.press("Enter");
    await page.locator(".monaco-list-row", { hasText: "b and friends" }).waitFor();
    const listed = spawnSync(process.env.TOTEM_BIN, ["sessions", "--json"], { cwd: project, encoding: "utf8" });
    assert.equal(listed.status, 0, listed.stderr);
    assert.deepEqual(JSON.parse(listed.stdout).items.map((s) => s.title), ["b and friends"]);
    await chatIcon.click();
    await until("the new title in the chat", async () => (await chat.locator("#title").innerText()) === "b and friends");

    // "Ask Totem about Selection" from the command palette: the selected line goes with the prompt.
    await palette("View: Close All Editors");
    await page.keyboard.press("Control+P");
    await page.keyboard.type("math.js");
    await until("math.js in quick open", async () =>
      (await page.locator(".quick-input-list .monaco-list-row").first().innerText().catch(() => "")).includes("math.js"),
    );
    await page.keyboard.press("Enter");
    // Quick open leaves the cursor in the opened file.
    await until("math.js open", async () => (await page.locator(".tab.active .label-name").innerText().catch(() => "")) === "math.js");
    await until("the editor to have focus", () => page.evaluate(() => !!document.activeElement?.closest(".monaco-editor")));
    await page.keyboard.press("Control+Home");
    await page.keyboard.press("Shift+End");
    await palette("Totem: Ask Totem about Selection");
    await until("the prompt's input box", async () => (await page.locator(".quick-input-widget").innerText()).includes("Ask Totem about math.js (lines 1–1)"));
    await input.fill("what is a");
    await page.keyboard.press("Enter");
    await until("the attachment in the chat", async () => (await chat.locator(".user .att", { hasText: "math.js (lines 1–1)" }).count()) > 0);
    await until("its answer", async () => (await text.innerText()).includes("a is one."));

    // The answer's Markdown: a table, a quote, links, highlighted code with a Copy button, and a
    // word too long for the view wrapped instead of widening it.
    const answer = chat.locator(".text", { hasText: "a is one." });
    await until("the answer complete", async () => (await answer.innerText()).includes("in_one_word."));
    assert.equal(await answer.locator("table td").first().innerText(), "a");
    assert.ok((await answer.locator("blockquote").innerText()).includes("Constants cannot be assigned again."));
    assert.ok((await answer.locator(".code .hljs-keyword").count()) > 0, "the code is not highlighted");
    assert.equal(await answer.locator('a[href^="https://developer.mozilla.org/"]').count(), 1);
    assert.ok(
      await inChat(() => document.querySelector("#log").scrollWidth <= document.querySelector("#log").clientWidth + 1),
      "a long word widens the chat",
    );
    await answer.locator(".code button.copy").click();
    await until("Copied", async () => (await answer.locator(".code button.copy").innerText()).includes("Copied"));
    await until("the code in the clipboard", async () =>
      (await page.evaluate(() => navigator.clipboard.readText()).catch(() => "")).includes("function twice(x)"),
    );
    // A link to a project file opens it in the editor.
    await palette("View: Close All Editors");
    await answer.locator('a[href="math.js"]').click();
    await until("math.js opened from the link", async () => (await page.locator(".tab.active .label-name").innerText().catch(() => "")) === "math.js");

    // A question answered in the REPL attached to the same session (editors_vscode.rs types `o`
    // there): its notification goes, the chat drops its buttons, the status bar stops waiting.
    // Sending scrolls to the end, and the question is brought into view.
    const inView = () =>
      inChat(() => {
        const log = document.querySelector("#log").getBoundingClientRect();
        const q = [...document.querySelectorAll(".question.open .buttons")].pop()?.getBoundingClientRect();
        return !!q && q.top >= log.top - 1 && q.bottom <= log.bottom + 1;
      });
    await inChat(() => (document.querySelector("#log").scrollTop = 0));
    await prompt.fill("make b four");
    await prompt.press("Enter");
    // It comes while the Sessions view is shown; the status bar's "waiting for you" brings the
    // chat back at the question.
    await until("the prompt sent", async () => (await chat.locator(".user", { hasText: "make b four" }).count()) === 1);
    await until("the end in view", () =>
      inChat(() => {
        const log = document.querySelector("#log");
        return log.scrollHeight - log.scrollTop - log.clientHeight < 20;
      }),
    5000);
    await sessionsIcon.click();
    const toast2 = page.locator(".notification-toast", { hasText: "Totem wants to change math.js." });
    await toast2.waitFor();
    await inChat(() => (document.querySelector("#log").scrollTop = 0));
    await status.locator(".statusbar-item", { hasText: "Totem: waiting for you" }).click();
    await until("the question in view", inView, 5000);
    await until("the second question in the chat", async () => (await chat.locator(".question button").count()) > 0);
    writeFileSync(join(signals, "asked"), "");
    await until("the REPL's answer", async () => (await chat.locator(".question button").count()) === 0, 60000);
    await until("the notification withdrawn", async () => (await toast2.count()) === 0);
    await until("the second run's end", async () => (await text.innerText()).includes("Done again."));
    await until("math.js to change", () => file().includes("const b = 4;"));
    // The open editor reloads by itself.
    await until("the editor to show the change", async () =>
      (await page.locator(".editor-instance .view-lines").first().innerText()).replace(/\u00a0/g, " ").includes("const b = 4;"),
    );
    await until("the status bar to be idle", async () => (await status.innerText()).includes("Totem: llama3.2:latest"));

    // The daemon stops (once the REPL has left): the extension starts it again, says so once,
    // and the chat goes on.
    await until("the REPL to leave", () => existsSync(join(signals, "repl-done")), 60000);
    const stop = () => {
      const stopped = spawnSync(process.env.TOTEM_BIN, ["daemon", "stop"], { encoding: "utf8" });
      assert.equal(stopped.status, 0, stopped.stderr);
    };
    stop();
    await page.locator(".notification-toast", { hasText: "reconnected to totemd" }).waitFor({ timeout: 30000 });
    await until("the status bar after the restart", async () => (await status.innerText()).includes("Totem: llama3.2:latest"));
    // "Add File to Totem Prompt" (the open math.js, or its selection) goes with the next prompt.
    await palette("Totem: Add File to Totem Prompt");
    await page.locator(".notification-toast", { hasText: "attached math.js" }).waitFor();
    await until("the attachment under the prompt box", async () => (await chat.locator("#attached").innerText()).includes("math.js"));

    // The daemon stops and cannot be started (totem.command names nothing): the views say so
    // and offer to start it; a prompt typed meanwhile stays in the box.
    // The extension host hears of a saved setting a moment after the file is written: a daemon
    // stopped before that is started again with the old command (seen once in five runs), and
    // is stopped again here until the new one is in use.
    await settings({ "totem.command": "/nonexistent/totem" });
    const down = async () => (await chat.locator("#banner").innerText().catch(() => "")).includes("Totem's daemon is not running.");
    for (let tries = 0; tries < 5 && !(await down()); tries++) {
      spawnSync(process.env.TOTEM_BIN, ["daemon", "stop"], { encoding: "utf8" });
      await until("the daemon stopped or started again", async () => (await down()) || (await status.innerText()).includes("Totem: llama3.2:latest"), 30000);
      await new Promise((r) => setTimeout(r, 1000));
    }
    await until("the chat to say the daemon is not running", down);
    await prompt.fill("still there?");
    await prompt.press("Enter");
    // Sending tries to start it again (the command still names nothing): the prompt stays.
    await until("the start tried again", async () =>
      (await chat.locator("#banner").innerText().catch(() => "")).includes("/nonexistent/totem"),
    );
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(await prompt.inputValue(), "still there?");
    assert.equal(await chat.locator(".user", { hasText: "still there?" }).count(), 0);
    await sessionsIcon.click();
    const welcome = page.locator(".pane", { hasText: "Sessions" }).locator(".welcome-view-content");
    await until("the Sessions view to say so", async () => (await welcome.innerText().catch(() => "")).includes("Totem's daemon is not running."));
    assert.ok(!(await welcome.innerText()).includes("No Totem sessions"));
    await chatIcon.click();
    // A changed totem.command is used at the next start, without a reload.
    await settings({ "totem.command": process.env.TOTEM_E2E_WRAPPER });
    // Clicked again if the extension host had not heard of the new setting yet (see above).
    const used = () => existsSync(join(signals, "wrapper-used"));
    for (let tries = 0; tries < 5 && !used(); tries++) {
      await chat.locator("#banner button", { hasText: "Start Totem" }).click().catch(() => undefined);
      await until("the new command used", used, 5000).catch(() => undefined);
    }
    await until("the daemon started by the new command", used);
    await until("the banner gone", async () => !(await chat.locator("#banner").isVisible()));
    assert.equal(await prompt.inputValue(), "still there?");
    await prompt.press("Enter");
    await until("the answer after the restart", async () => (await text.innerText()).includes("Back again."));
    assert.ok((await text.innerText()).split("still there?").pop().includes("math.js"), "the file went with the prompt");
    const log = await text.innerText();
    assert.equal(log.split("Done again.").length, 2, `the chat repeated events after the restart:\n${log}`);

    // Deny in the chat takes a note; the notification goes with the answer. The README's
    // screenshots: the question in the dark theme, then the light one.
    await prompt.fill("make b five");
    await prompt.press("Enter");
    const question3 = chat.locator(".question.open", { hasText: "+const b = 5;" });
    await question3.waitFor();
    const toast3 = page.locator(".notification-toast", { hasText: "Totem wants to change math.js." });
    await toast3.waitFor();
    // The README's screenshots, the side bar widened as a reader would, the Markdown answer in view.
    const sash = (await page.locator(".monaco-sash.vertical").evaluateAll((sashes) =>
      sashes.map((s) => s.getBoundingClientRect()).find((r) => r.left > 300 && r.left < 400 && r.height > 400),
    ));
    if (sash) {
      await page.mouse.move(sash.left + sash.width / 2, 400);
      await page.mouse.down();
      await page.mouse.move(560, 400, { steps: 5 });
      await page.mouse.up();
      await page.mouse.move(900, 300);
    }
    await inChat(() => [...document.querySelectorAll(".text")].find((e) => e.textContent.includes("a is one.")).scrollIntoView({ block: "start" }));
    await settings({ "workbench.colorTheme": "Default Dark Modern" });
    await until("the dark theme", () => page.evaluate(() => document.querySelector(".monaco-workbench").classList.contains("vs-dark")));
    await new Promise((r) => setTimeout(r, 500));
    await shot("vscode-dark");
    await settings({ "workbench.colorTheme": "Default Light Modern" });
    await until("the light theme", () => page.evaluate(() => document.querySelector(".monaco-workbench").classList.contains("vs")));
    await new Promise((r) => setTimeout(r, 500));
    // Readable in the light theme: a prompt stands out from the page.
    const [userBg, pageBg, userFg] = await inChat(() => {
      const u = getComputedStyle(document.querySelector(".user"));
      return [u.backgroundColor, getComputedStyle(document.body).backgroundColor, u.color];
    });
    assert.notEqual(userBg, pageBg, "a prompt is drawn on the page's own colour");
    assert.notEqual(userFg, userBg);
    await shot("vscode-light");
    await question3.locator("button", { hasText: "Deny" }).click();
    await question3.locator("input.note").fill("keep b at four");
    await question3.locator("input.note").press("Enter");
    await until("the notification withdrawn", async () => (await toast3.count()) === 0);
    await chat.locator(".question .answer", { hasText: "Denied" }).waitFor();
    await until("the model's answer to the denial", async () => (await text.innerText()).includes("Understood, b stays four."));
    assert.ok(file().includes("const b = 4;"));
    assert.ok((await chat.locator(".tool.error").last().innerText()).includes("keep b at four"), "the note did not reach the model");

    // The model cannot be reached: Retry beside the error sends the prompt again.
    await prompt.fill("one more");
    await prompt.press("Enter");
    const failed = chat.locator(".end.failed").last();
    await failed.waitFor();
    await failed.locator("button", { hasText: "Retry" }).click();
    await until("the retried answer", async () => (await text.innerText()).includes("Retried and answered."));
    assert.equal((await text.innerText()).split("one more").length, 3, "the retry sent the prompt again");
    await until("no Retry left", async () => (await chat.locator(".end button", { hasText: "Retry" }).count()) === 0);

  } catch (e) {
    await shot("vscode-failure").catch(() => undefined);
    console.error(String(e?.stack ?? e));
    throw e;
  }
});
