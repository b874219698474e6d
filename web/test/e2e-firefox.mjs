// The web client in Firefox: Debian's Firefox ESR driven over WebDriver BiDi by playwright-core
// 1.54 (browsers.mjs; later playwright-core versions ask Firefox for BiDi commands ESR 140
// lacks). A shorter walk than e2e.mjs, over what differs between engines: the stylesheet's
// layout, streaming Markdown with highlighted code, a question with its diff and one with its
// command answered, the model's terminal in
// xterm.js taken over, the run timeline's SVG, and the phone layout.
// Playwright over BiDi reads the page (bounding boxes, clicks) through eval in the page's own
// world, which the page's Content-Security-Policy forbids: the page's answer is let through with
// `'unsafe-eval'` added to `script-src` for the driver, the rest of the policy as served, and
// a preload script (not bound by the policy) records in an attribute of <html> whatever the
// policy blocked — xterm.js's `<style>` elements, say, if their nonce did not work in Firefox.
// Environment: TOTEM_E2E_URL, TOTEM_E2E_TOOLS (playwright-core 1.54), TOTEM_E2E_FIREFOX.

import assert from "node:assert/strict";
import { test } from "node:test";
import { launchFirefox, pageErrors, until } from "./browsers.mjs";

const env = process.env;
const HOSTILE = "<img src=x onerror=window.__xss=3>.md";

test("firefox: stream, question, terminal taken over, runs, phone", async (t) => {
  const browser = await launchFirefox();
  t.after(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.route(/\/(\?token=.*)?$/, async (route) => {
    const response = await route.fetch({ maxRedirects: 0 });
    const headers = response.headers();
    const policy = headers["content-security-policy"];
    assert.match(policy, /script-src 'self';/);
    headers["content-security-policy"] = policy.replace("script-src 'self';", "script-src 'self' 'unsafe-eval';");
    await route.fulfill({ response, headers });
  });
  await context.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      const html = document.documentElement;
      html.setAttribute("data-blocked", `${html.getAttribute("data-blocked") ?? ""}${e.violatedDirective} ${e.blockedURI};`);
    });
  });
  const page = await context.newPage();
  const blocked = () => page.locator("html").getAttribute("data-blocked");
  const errors = pageErrors(page);
  await page.goto(env.TOTEM_E2E_URL);
  await until("the page to connect", async () => (await page.locator(".session").count()) > 0);
  assert.match(browser.version(), /^\d+\./);
  // The stylesheet applied: the toolbar is a row.
  const undo = await page.locator("button.undo").boundingBox();
  const redo = await page.locator("button.redo").boundingBox();
  assert.ok(Math.abs(undo.y - redo.y) < 2 && redo.x > undo.x + undo.width, "the toolbar laid out");

  await page.locator(".prompt").fill("stream please");
  await page.locator(".prompt").press("Enter");
  const streaming = page.locator(".block.text.streaming");
  await streaming.waitFor({ timeout: 20000 });
  await page.locator(".block.end").first().waitFor({ timeout: 20000 });
  const answer = page.locator(".block.text").first();
  assert.ok((await answer.locator("pre code.hljs span").count()) > 0, "highlighted code");
  assert.equal(await page.locator("img[onerror], script:not([src])").count(), 0);

  // A question with its diff side by side, the hostile file name and content as text.
  await page.locator(".prompt").fill("write the file");
  await page.locator(".prompt").press("Enter");
  const question = page.locator(".block.question").filter({ has: page.locator(".answers") }).first();
  await question.waitFor({ timeout: 20000 });
  assert.equal(await question.locator(".qline").innerText(), `Totem wants to change ${HOSTILE}.`);
  assert.ok((await question.locator(".diff-table td.add").count()) > 0, "the diff side by side");
  assert.match(await question.locator(".diff-table").innerText(), /<script>window.__xss=4<\/script>/);
  await question.locator("button.once").click();
  await until("the run to end", async () => (await page.locator(".block.end").count()) === 2);

  await page.locator(".prompt").fill("open a shell");
  await page.locator(".prompt").press("Enter");
  await question.waitFor({ timeout: 20000 });
  await question.locator("button.once").click();
  await until("the run to end", async () => (await page.locator(".block.end").count()) === 3);
  assert.equal(await page.locator("img[onerror], script:not([src])").count(), 0);

  await page.locator(".terminals-toggle").click();
  const rows = page.locator(".terminals .xterm-rows");
  await until("the shell's prompt", async () => /bash-[\d.]+[$#]/.test(await rows.innerText().catch(() => "")));
  await page.locator(".take-over").click();
  await page.keyboard.type("echo firefox-$((6*7))");
  await page.keyboard.press("Enter");
  await until("the shell's answer", async () => (await rows.innerText()).includes("firefox-42"));
  // xterm.js's own `<style>` elements were let in (their nonce): the policy blocked nothing.
  assert.equal(await blocked(), null);
  await page.locator(".take-over").click();

  await page.locator(".runs-toggle").click();
  await until("the timeline", async () => (await page.locator(".timeline .run").count()) === 3);
  assert.deepEqual(errors, []);

  await page.setViewportSize({ width: 390, height: 844 });
  await until("the phone layout", async () => await page.locator(".menu").isVisible());
  for (const control of await page.locator(".top, .toolbar, .log, .composer, .terminals, .runs, .toolbar button, .pickers button.send").all()) {
    const box = await control.boundingBox();
    if (box) {
      assert.ok(box.x >= 0 && box.x + box.width <= 390, `wider than the phone: ${JSON.stringify(box)}`);
    }
  }
});
