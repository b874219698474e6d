// Builds the page totemd embeds (totemd/src/server/web.rs): dist/index.html, dist/app.js and
// dist/app.css. Deterministic: same sources and package-lock.json, same bytes (CI checks it).
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

mkdirSync("dist", { recursive: true });
await build({
  entryPoints: { app: "src/app.ts" },
  bundle: true,
  minify: true,
  format: "iife",
  target: ["chrome120", "firefox120", "safari16"],
  outdir: "dist",
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});
copyFileSync("src/index.html", "dist/index.html");
