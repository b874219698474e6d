// The web client in WebKit: WebKitGTK's MiniBrowser (the engine Safari is built on: WebCore and
// JavaScriptCore) under Xvfb, driven over W3C WebDriver by WebKitWebDriver through
// selenium-webdriver (browsers.mjs). The walk e2e-firefox.mjs takes, over what differs between
// engines, plus the changes and undo: the stylesheet's layout, streaming Markdown with highlighted
// code and hostile HTML inert, a question with its diff and one with its command answered in the
// page, the changes tree, undo and redo, the model's terminal in xterm.js taken over (its
// `<style>` elements bearing the nonce), the run timeline's SVG, and the phone layout at 390 px.
// WebDriver has no console log: right after the page loads, listeners record in `window.__errors`
// every uncaught error, rejected promise, console.error and blocked resource (the
// Content-Security-Policy's `securitypolicyviolation`), and the walk expects none.
// Environment: TOTEM_E2E_URL, TOTEM_E2E_TOOLS (selenium-webdriver), TOTEM_E2E_WEBDRIVER,
// TOTEM_E2E_MINIBROWSER, TOTEM_E2E_SHOTS (where screenshots go, if set).

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { launchWebKit, until } from "./browsers.mjs";

const env = process.env;
const HOSTILE = "<img src=x onerror=window.__xss=3>.md";

test("webkit: stream, questions, changes, undo and redo, terminal taken over, runs, phone", async (t) => {
  const { driver, By, Key } = await launchWebKit();
  t.after(() => driver.quit());
  const js = (fn, ...args) => driver.executeScript(fn, ...args);
  const count = (css) => js((css) => document.querySelectorAll(css).length, css);
  const text = (css) => js((css) => document.querySelector(css)?.innerText ?? "", css);
  const rect = (css) => js((css) => document.querySelector(css)?.getBoundingClientRect().toJSON() ?? null, css);
  const click = async (css) => (await driver.findElement(By.css(css))).click();
  const errors = () => js(() => window.__errors);
  const shot = async (name) => {
    if (env.TOTEM_E2E_SHOTS) {
      writeFileSync(join(env.TOTEM_E2E_SHOTS, `${name}.png`), Buffer.from(await driver.takeScreenshot(), "base64"));
    }
  };

  await driver.manage().window().setRect({ width: 1280, height: 800 });
  await driver.get(env.TOTEM_E2E_URL);
  await js(() => {
    const errors = (window.__errors = []);
    addEventListener("error", (e) => errors.push(`error: ${e.message}`));
    addEventListener("unhandledrejection", (e) => errors.push(`rejected: ${e.reason}`));
    document.addEventListener("securitypolicyviolation", (e) => errors.push(`blocked: ${e.violatedDirective} ${e.blockedURI}`));
    const consoleError = console.error;
    console.error = (...args) => {
      errors.push(`console: ${args.join(" ")}`);
      consoleError(...args);
    };
  });
  // The token traded for the cookie left the address bar; the project's session is listed.
  await until("the page to connect", async () => (await count(".session")) > 0);
  assert.equal(new URL(await driver.getCurrentUrl()).search, "");
  const version = (await driver.getCapabilities()).get("browserVersion");
  console.log(`WebKitGTK ${version}`);
  assert.match(version, /^\d+\.\d+/);
  // The stylesheet applied: the grid puts the list beside the chat, the toolbar is a row.
  const undo = await rect("button.undo");
  const redo = await rect("button.redo");
  assert.ok(Math.abs(undo.y - redo.y) < 2 && redo.x > undo.x + undo.width, "the toolbar laid out");
  assert.ok((await rect(".side")).right <= (await rect(".main")).left + 1, "the list beside the chat");

  // The Enter that confirms an input method's composition does not send: Safari fires its
  // keydown after compositionend (isComposing false, keyCode 229; WebKit bug 165004).
  const prompt = await driver.findElement(By.css(".prompt"));
  await prompt.sendKeys("にほん");
  const imeEnter = await js(() => {
    const enter = new KeyboardEvent("keydown", { key: "Enter", keyCode: 229, bubbles: true, cancelable: true });
    document.querySelector(".prompt").dispatchEvent(enter);
    return { keyCode: enter.keyCode, sent: enter.defaultPrevented };
  });
  assert.deepEqual(imeEnter, { keyCode: 229, sent: false });
  assert.equal(await prompt.getAttribute("value"), "にほん");
  await prompt.clear();

  // An answer streams: its first words show while the run still goes.
  await prompt.sendKeys("stream please", Key.ENTER);
  await until("the first words", async () => (await text(".block.text.streaming")).includes("First"));
  assert.equal(await count(".block.end"), 0, "the first words show before the answer ends");
  await until("the answer to end", async () => (await count(".block.end")) === 1);
  assert.equal(await count(".block.text.streaming"), 0);
  assert.match(await text(".block.text"), /Last words\./);
  assert.ok((await count(".block.text pre code.hljs span")) > 0, "highlighted code");
  assert.equal(await count("img[onerror], script:not([src])"), 0);
  assert.equal(await js(() => window.__xss), null);
  await shot("webkit-chat");

  // Questions answered here: a write with its diff side by side (the hostile file name and
  // content as text), then a command shown as text.
  await prompt.sendKeys("write the file", Key.ENTER);
  const open = ".block.question:has(.answers)";
  await until("the write's question", async () => (await count(`${open} button.once`)) === 1);
  assert.equal(await text(`${open} .qline`), `Totem wants to change ${HOSTILE}.`);
  assert.ok((await count(`${open} .diff-table td.add`)) > 0, "the diff side by side");
  assert.match(await text(`${open} .diff-table`), /<script>window.__xss=4<\/script>/);
  const columns = await js((css) => [...document.querySelector(css).rows].find((r) => r.querySelector("td.add"))?.cells.length, `${open} .diff-table`);
  assert.equal(columns, 4, "two sides, each with its line numbers");
  await shot("webkit-question");
  await click(`${open} button.once`);
  await until("the question answered", async () => (await count(".block.question .answers")) === 0);
  await until("the run to end", async () => (await count(".block.end")) === 2);

  // The changes: the hostile name as text in the tree, its diff on a click; undo and redo.
  await click(".changes-toggle");
  await until("the changed file", async () => (await text(".tree .file .path")) === HOSTILE);
  await click(".tree .file");
  await until("the file's diff", async () => (await count(".file-diff .diff-table td.add")) > 0);
  await click(".changes-toggle");
  await until("undo to be enabled", () => js(() => !document.querySelector("button.undo").disabled));
  await click("button.undo");
  await until("the run dimmed", async () => (await count(".block.undone")) > 0);
  // The prompt comes back with undo's answer, which may be read after the event that dims the run.
  await until("the undone prompt offered again", async () => (await prompt.getAttribute("value")) === "write the file");
  await click("button.redo");
  await until("the run no longer dimmed", async () => (await count(".block.undone")) === 0);
  await prompt.clear();

  await prompt.sendKeys("open a shell", Key.ENTER);
  await until("the shell's question", async () => (await count(`${open} button.once`)) === 1);
  assert.match(await text(`${open} .command`), /bash --norc --noprofile -i/);
  await click(`${open} button.once`);
  await until("the run to end", async () => (await count(".block.end")) === 3);
  assert.equal(await count("img[onerror], script:not([src])"), 0);
  assert.equal(await js(() => window.__xss), null);

  // The model's terminal in xterm.js: watched, taken over, typed into.
  await click(".terminals-toggle");
  await until("the shell's prompt", async () => /bash-[\d.]+[$#]/.test(await text(".terminals .xterm-rows")));
  await click(".take-over");
  assert.equal(await text(".take-over"), "Give back");
  await driver.actions().sendKeys("echo webkit-$((6*7))", Key.ENTER).perform();
  await until("the shell's answer", async () => (await text(".terminals .xterm-rows")).includes("webkit-42"));
  // xterm.js's own `<style>` elements bear the page's nonce and were applied. (A `<style>` without
  // it, added through WebDriver, applies all the same here: WebKit's automation relaxes the inline
  // style check, so this cannot watch the policy refuse one.)
  const styles = await js(() => [...document.querySelectorAll("style")].map((s) => ({ nonce: s.nonce, rules: s.sheet?.cssRules.length ?? 0 })));
  const nonce = await js(() => document.querySelector('meta[name="totem-style-nonce"]').content);
  assert.ok(styles.length > 0, "xterm.js wrote its styles");
  assert.deepEqual(styles.filter((s) => s.nonce !== nonce || s.rules === 0), [], "every <style> with the nonce, applied");
  await shot("webkit-terminal");
  await click(".take-over");
  assert.equal(await text(".take-over"), "Take over");

  // The run timeline: an SVG column a run.
  await click(".runs-toggle");
  await until("the timeline", async () => (await count(".timeline .run")) === 3);
  assert.ok((await rect(".timeline")).height > 20, "the timeline drawn");
  assert.deepEqual(await errors(), []);

  // A phone's width: the list tucked behind the menu button, nothing wider than the screen, the
  // composer at the bottom of the window.
  await driver.manage().window().setRect({ width: 390, height: 844 });
  await until("a 390 px viewport", async () => (await js(() => innerWidth)) === 390);
  await until("the phone layout", async () => (await rect(".menu")).width > 0);
  await until("the list tucked away", async () => (await rect(".side")).right <= 0);
  const width = await js(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `the page is ${width} px wide`);
  for (const control of [".top", ".toolbar", ".log", ".composer", ".terminals", ".runs", ".toolbar button", ".pickers select", ".pickers button.send", ".menu"]) {
    const boxes = await js((css) => [...document.querySelectorAll(css)].map((e) => e.getBoundingClientRect().toJSON()), control);
    for (const box of boxes.filter((b) => b.width > 0)) {
      assert.ok(box.x >= 0 && box.right <= 390, `${control} wider than the phone: ${JSON.stringify(box)}`);
    }
  }
  // Fields at 16 px or more, so that iOS Safari does not zoom into one when it is focused.
  const small = await js(() =>
    [...document.querySelectorAll("input, select, textarea")].filter((e) => e.getClientRects().length && parseFloat(getComputedStyle(e).fontSize) < 16).map((e) => e.className),
  );
  assert.deepEqual(small, [], "fields under 16 px on a phone");
  const bottom = (await rect(".composer")).bottom;
  const height = await js(() => innerHeight);
  assert.ok(Math.abs(bottom - height) <= 1, `the composer ends at ${bottom} in a ${height} px window`);
  await shot("webkit-phone");
  await click(".menu");
  await until("the list to slide in", async () => (await rect(".side")).x >= 0);
  assert.deepEqual(await errors(), []);
});
