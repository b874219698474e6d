// The browsers the end-to-end tests drive, launched one way for all of them (the web client's
// walks in e2e*.mjs, the VS Code extension's in editors/vscode/test/e2e.mjs). The Rust side
// installs each browser and its driver (tests/src/external.rs) and names them here through the
// environment:
// - TOTEM_E2E_TOOLS: the folder whose node_modules holds the driver library (playwright-core for
//   chromium and Firefox, selenium-webdriver for WebKit);
// - TOTEM_E2E_CHROMIUM: a chromium binary (Debian's, or an older one unpacked beside it);
// - TOTEM_E2E_FIREFOX: Debian's Firefox ESR;
// - TOTEM_E2E_WEBDRIVER and TOTEM_E2E_MINIBROWSER: a running WebKitWebDriver's URL and the
//   WebKitGTK MiniBrowser it starts (the engine Safari is built on; no Safari runs on Linux).

import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { join } from "node:path";

const env = process.env;
const driverLibrary = (name) => createRequire(join(env.TOTEM_E2E_TOOLS, "package.json"))(name);

/** Polls `done` every 50 ms until it returns something truthy (returned), failing after `ms`. */
export async function until(what, done, ms = 20000) {
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

/** Headless chromium through playwright-core (its own browser download does not work here). */
export function launchChromium() {
  return driverLibrary("playwright-core").chromium.launch({ executablePath: env.TOTEM_E2E_CHROMIUM, args: ["--no-sandbox"] });
}

/** Firefox ESR over WebDriver BiDi: playwright-core's `_bidiFirefox`, the driver Playwright tests
 * stock Firefox with (its own patched Firefox cannot be downloaded here). */
export function launchFirefox() {
  return driverLibrary("playwright-core")._bidiFirefox.launch({ executablePath: env.TOTEM_E2E_FIREFOX, headless: true });
}

/** A WebKitGTK window over W3C WebDriver, through selenium-webdriver: `{ driver, By, Key }`.
 * Playwright's WebKit is a patched build it downloads; stock WebKit speaks only WebDriver. */
export async function launchWebKit() {
  const { Builder, By, Key } = driverLibrary("selenium-webdriver");
  const driver = await new Builder()
    .usingServer(env.TOTEM_E2E_WEBDRIVER)
    .withCapabilities({
      browserName: "MiniBrowser",
      "webkitgtk:browserOptions": { binary: env.TOTEM_E2E_MINIBROWSER, args: ["--automation"] },
    })
    .build();
  return { driver, By, Key };
}

/** The errors a playwright page reports (console errors, uncaught exceptions), as they come. */
export function pageErrors(page) {
  const errors = [];
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  page.on("pageerror", (e) => errors.push(String(e)));
  return errors;
}
