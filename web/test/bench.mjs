// Figures for BENCHMARKS.md (`cargo run -p totem-tests --bin bench-web` starts totemd, imports
// the sessions and runs this): first paint of a small session, the time to open a 5,000-message
// session and scroll through it, the page's CPU while idle, and the bundle's size gzipped.
// Environment: TOTEM_E2E_URL (a one-time link), TOTEM_E2E_TOOLS, TOTEM_E2E_CHROMIUM,
// BENCH_SMALL and BENCH_LARGE (session ids), BENCH_DIST (web/dist).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { launchChromium } from "./browsers.mjs";

const env = process.env;
const browser = await launchChromium();
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const page = await context.newPage();
await page.goto(env.TOTEM_E2E_URL);
await page.locator(".session").first().waitFor();
const origin = new URL(env.TOTEM_E2E_URL).origin;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// Opening a session from a fresh load: navigation start to its last block drawn, and to its
// whole history in (the older messages load after the newest are drawn).
async function openTime(id, lastText) {
  await page.goto("about:blank");
  await page.goto(`${origin}/#session=${id}`);
  await page.locator(".block", { hasText: lastText }).last().waitFor({ timeout: 30000 });
  const drawn = await page.evaluate(() => performance.now());
  await page.locator("body[data-history=complete]").waitFor({ timeout: 30000 });
  return [drawn, await page.evaluate(() => performance.now())];
}

const small = [];
const large = [];
const whole = [];
for (let i = 0; i < 5; i++) {
  small.push((await openTime(env.BENCH_SMALL, "small answer 9"))[0]);
  const [drawn, all] = await openTime(env.BENCH_LARGE, "answer 2499");
  large.push(drawn);
  whole.push(all);
}

// Scrolling from the bottom to the top in 120 steps, one per frame: the median and longest
// frame, and the most blocks in the page meanwhile.
const scroll = () =>
  page.evaluate(async () => {
    const log = document.querySelector(".log");
    const step = log.scrollHeight / 120;
    const gaps = [];
    let most = 0;
    let last = performance.now();
    for (let i = 0; i < 120; i++) {
      log.scrollTop = log.scrollHeight - (i + 1) * step;
      await new Promise((r) => requestAnimationFrame(r));
      const now = performance.now();
      gaps.push(now - last);
      last = now;
      most = Math.max(most, document.querySelectorAll(".block").length);
    }
    gaps.sort((a, b) => a - b);
    return { p50: gaps[60], max: gaps[gaps.length - 1], most };
  });
const frames = await scroll();

// Every block of the 5,000 messages is reachable by scrolling up (jumping to the top until the
// first question shows), and back down to the last.
const reach = await page.evaluate(async () => {
  const log = document.querySelector(".log");
  const settle = () => new Promise((r) => setTimeout(r, 20));
  let first = false;
  for (let i = 0; i < 400 && !first; i++) {
    log.scrollTop = 0;
    await settle();
    first = [...document.querySelectorAll(".block")].some((b) => b.textContent.includes("question 0:"));
  }
  const atTop = document.querySelectorAll(".block").length;
  let lastSeen = false;
  for (let i = 0; i < 400 && !lastSeen; i++) {
    log.scrollTop = log.scrollHeight;
    await settle();
    lastSeen = [...document.querySelectorAll(".block")].some((b) => b.textContent.includes("answer 2499"));
  }
  return { first, lastSeen, atTop, atBottom: document.querySelectorAll(".block").length };
});

// The same scroll again after that trip to the top and back (before windowing, every block
// stayed in the page by now).
const again = await scroll();

// The reader's place is kept while blocks are drawn and dropped around it: scrolling up in
// 150-px steps, a block on screen moves by the step (the largest difference, in px).
const drift = await page.evaluate(async () => {
  const log = document.querySelector(".log");
  log.scrollTop = log.scrollHeight;
  const frame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  await new Promise((r) => setTimeout(r, 300));
  let worst = 0;
  for (let i = 0; i < 150; i++) {
    const view = log.getBoundingClientRect();
    const on = [...document.querySelectorAll(".block")].find((b) => b.getBoundingClientRect().top > view.top + view.height / 3);
    if (!on) continue;
    const before = on.getBoundingClientRect().top;
    log.scrollTop -= 150;
    await frame();
    if (on.isConnected) worst = Math.max(worst, Math.abs(on.getBoundingClientRect().top - before - 150));
  }
  return worst;
});

// Idle: CPU time the page's main thread spends over 5 s with nothing happening.
const cdp = await context.newCDPSession(page);
await cdp.send("Performance.enable");
const before = await cdp.send("Performance.getMetrics");
await new Promise((r) => setTimeout(r, 5000));
const after = await cdp.send("Performance.getMetrics");
const metric = (m, name) => m.metrics.find((x) => x.name === name)?.value ?? 0;
const idleMs = (metric(after, "TaskDuration") - metric(before, "TaskDuration")) * 1000;

const js = readFileSync(join(env.BENCH_DIST, "app.js"));
const css = readFileSync(join(env.BENCH_DIST, "app.css"));
const html = readFileSync(join(env.BENCH_DIST, "index.html"));
const gz = (b) => gzipSync(b, { level: 9 }).length;

console.log(`first paint, 10-message session (median of 5): ${median(small).toFixed(0)} ms`);
console.log(`open, 5,000-message session (median of 5): ${median(large).toFixed(0)} ms to its last block drawn, ${median(whole).toFixed(0)} ms to its whole history in`);
console.log(`scroll through it, 120 frames: median frame ${frames.p50.toFixed(1)} ms, longest ${frames.max.toFixed(1)} ms, at most ${frames.most} blocks in the page`);
console.log(`reach: first block ${reach.first ? "reached" : "NOT reached"} (${reach.atTop} blocks in the page there), last block ${reach.lastSeen ? "reached" : "NOT reached"} (${reach.atBottom} blocks)`);
console.log(`scroll again after the top and back: median frame ${again.p50.toFixed(1)} ms, longest ${again.max.toFixed(1)} ms, at most ${again.most} blocks in the page`);
console.log(`place kept scrolling up 150 steps of 150 px: largest drift ${drift.toFixed(0)} px`);
console.log(`idle main-thread CPU over 5 s: ${idleMs.toFixed(1)} ms`);
console.log(`bundle: app.js ${js.length} B (${gz(js)} B gzipped), app.css ${css.length} B (${gz(css)} B gzipped), index.html ${html.length} B; total gzipped ${gz(js) + gz(css) + gz(html)} B`);
await browser.close();
