// The extension in a real VS Code: code-server (VS Code's server, from npm) with the packaged
// .vsix installed, its page driven by Debian's chromium through playwright-core
// (`tests/tests/editors_vscode.rs` starts code-server, the simulator with its replies queued and
// nothing else: the extension starts totemd itself). What a person does: open the Totem view,
// type a prompt, watch the answer stream, answer the question after looking at its diff, see the
// file change, the changes tree, undo and redo; ask about a selection; see the REPL on the same
// session answer a question; stop the daemon and go on.
// Environment: TOTEM_E2E_URL (code-server with the project open), TOTEM_E2E_TOOLS (the folder
// whose node_modules holds playwright-core), TOTEM_E2E_CHROMIUM, TOTEM_TEST_PROJECT,
// TOTEM_E2E_SIGNALS (a folder: this test writes `asked` when the chat shows the second question,
// editors_vscode.rs writes `repl-done` once the REPL has answered it and left).

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { test } from "node:test";

const { TOTEM_E2E_URL: url, TOTEM_E2E_TOOLS: tools, TOTEM_E2E_CHROMIUM: chromiumPath, TOTEM_TEST_PROJECT: project } =
  process.env;
const { chromium } = createRequire(join(tools, "package.json"))("playwright-core");

const signals = process.env.TOTEM_E2E_SIGNALS;
const file = () => readFileSync(join(project, "math.js"), "utf8");

async function until(what, done, ms = 30000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await done();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      assert.fail(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("prompt, stream, question with its diff, changes, undo, selection, another client, restart", async (t) => {
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
  t.after(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const shot = async (name) => page.screenshot({ path: join(process.env.TOTEM_E2E_SHOTS ?? "/tmp", `${name}.png`) });
  try {
    // code-server takes a moment to listen.
    await until("code-server to answer", () => page.goto(url).then(() => true, () => false), 60000);
    await page.locator(".monaco-workbench").waitFor({ timeout: 60000 });
    const status = page.locator(".statusbar");

    // The extension activates on startup, starts totemd and says which model it uses.
    await until("the status bar item", async () => (await status.innerText()).includes("Totem: llama3.2:latest"), 60000);

    // The Totem view in the activity bar: the chat's webview (an iframe in an iframe).
    await page.locator('.activitybar a.action-label[aria-label="Totem"]').click();
    const chat = page.frameLocator("iframe.webview.ready").frameLocator("#active-frame");
    const prompt = chat.locator("#prompt");
    await prompt.waitFor({ timeout: 30000 });
    await prompt.fill("make b three");
    await prompt.press("Enter");

    // The question: a notification with the answers and "Show diff"; the status bar waits.
    const toast = page.locator(".notification-toast", { hasText: "edit wants to write math.js" });
    await toast.waitFor({ timeout: 30000 });
    await until("the status bar to wait", async () => (await status.innerText()).includes("Totem: waiting for you"));
    // The chat shows it too, with its diff, after the reasoning (folded) and the tool call's line.
    await chat.locator(".question", { hasText: "+const b = 3;" }).waitFor();
    const reasoning = chat.locator("details.reasoning");
    assert.ok((await reasoning.textContent()).includes("Weighing b."));
    assert.equal(await reasoning.getAttribute("open"), null, "the reasoning is folded");
    await chat.locator(".tool", { hasText: "⚙ edit math.js" }).waitFor();
    // The sessions view says the session waits, and the Totem icon carries a badge.
    await page.locator(".monaco-list-row", { hasText: "make b three" }).filter({ hasText: "1 waiting" }).waitFor();
    const icon = page.locator('.activitybar li.action-item[aria-label^="Totem"]');
    assert.equal(await icon.getAttribute("aria-label"), "Totem - 1 question waits for you");
    assert.equal((await icon.locator(".badge-content").innerText()).trim(), "1");
    await toast.getByRole("button", { name: "Show diff" }).click();
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
    await shot("vscode-question");
    // The notification is asked again after the diff: allow once.
    const again = page.locator(".notification-toast", { hasText: "edit wants to write math.js" });
    await again.getByRole("button", { name: "Allow once" }).click();

    // The file is written; the answer streams into the chat, part by part.
    await until("math.js to change", () => file().includes("const b = 3;"));
    const text = chat.locator("#log");
    await until("the first words", async () => (await text.innerText()).includes("First words."));
    const early = await text.innerText();
    assert.ok(!early.includes("Last words."), `the answer came at once, not as it streamed:\n${early}`);
    await until("the run's end", async () => (await text.innerText()).includes("✓ done"));
    assert.ok((await text.innerText()).includes("Last words."));
    await until("the status bar to be idle", async () => (await status.innerText()).includes("Totem: llama3.2:latest"));
    await shot("vscode-answer");

    // The changes tree lists math.js; Undo (its title bar button) puts the file back.
    const changes = page.locator(".pane", { hasText: "Totem changes" });
    await until("math.js in the changes tree", async () =>
      (await changes.locator(".monaco-list-row").allInnerTexts()).some((t) => t.includes("math.js")),
    );
    await changes.locator(".pane-header").hover();
    await changes.locator('.pane-header [aria-label="Undo the Last Run\'s Changes"]').click();
    await until("math.js to be put back", () => file() === "const a = 1;\nconst b = 2;\n");
    await page.locator(".notification-toast", { hasText: "Undid the changes to math.js; its prompt is back" }).waitFor();
    // The run is taken back in the chat too: dimmed, its prompt marked, and offered again in the box.
    await chat.locator(".undone .user", { hasText: "make b three (undone)" }).waitFor();
    await until("the prompt back in the box", async () => (await prompt.inputValue()) === "make b three");
    // Redo (beside it) writes it again.
    await changes.locator('.pane-header [aria-label="Redo the Undone Changes"]').click();
    await until("math.js to be written again", () => file() === "const a = 1;\nconst b = 3;\n");
    await page.locator(".notification-toast", { hasText: "Redid the changes to math.js" }).waitFor();
    await until("the run back in the chat", async () => (await chat.locator(".undone").count()) === 0);
    await until("the box emptied", async () => (await prompt.inputValue()) === "");

    // "Ask Totem about Selection" from the command palette: the selected line goes with the prompt.
    const palette = async (command) => {
      await page.keyboard.press("F1");
      await page.locator(".quick-input-widget input.input").waitFor();
      await page.keyboard.type(command);
      await until(`"${command}" in the palette`, async () =>
        (await page.locator(".quick-input-list .monaco-list-row").first().innerText().catch(() => "")).includes(command),
      );
      await page.keyboard.press("Enter");
    };
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
    const input = page.locator(".quick-input-widget input.input");
    await until("the prompt's input box", async () => (await page.locator(".quick-input-widget").innerText()).includes("Ask Totem about math.js (lines 1–1)"));
    await input.fill("what is a");
    await page.keyboard.press("Enter");
    await until("the attachment in the chat", async () => (await text.innerText()).includes("📎 math.js (lines 1–1)"));
    await until("its answer", async () => (await text.innerText()).includes("a is one."));

    // A question answered in the REPL attached to the same session (editors_vscode.rs types `o`
    // there): the chat drops its buttons, the status bar stops waiting.
    await prompt.fill("make b four");
    await prompt.press("Enter");
    await until("the second question in the chat", async () => (await chat.locator(".question button").count()) > 0);
    writeFileSync(join(signals, "asked"), "");
    await until("the REPL's answer", async () => (await chat.locator(".question button").count()) === 0, 60000);
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
    const stopped = spawnSync(process.env.TOTEM_BIN, ["daemon", "stop"], { encoding: "utf8" });
    assert.equal(stopped.status, 0, stopped.stderr);
    await page.locator(".notification-toast", { hasText: "reconnected to totemd" }).waitFor({ timeout: 30000 });
    await until("the status bar after the restart", async () => (await status.innerText()).includes("Totem: llama3.2:latest"));
    // "Add File to Totem Prompt" (the open math.js, or its selection) goes with the next prompt.
    await palette("Totem: Add File to Totem Prompt");
    await page.locator(".notification-toast", { hasText: "attached math.js" }).waitFor();
    await until("the attachment under the prompt box", async () => (await chat.locator("#attached").innerText()).includes("📎 math.js"));
    await prompt.fill("still there?");
    await prompt.press("Enter");
    await until("the answer after the restart", async () => (await text.innerText()).includes("Back again."));
    assert.ok((await text.innerText()).split("still there?")[1].includes("📎 math.js"), "the file went with the prompt");
    const log = await text.innerText();
    assert.equal(log.split("Done again.").length, 2, `the chat repeated events after the restart:\n${log}`);
    await shot("vscode-end");
  } catch (e) {
    await shot("vscode-failure").catch(() => undefined);
    console.error(String(e?.stack ?? e));
    throw e;
  }
});
