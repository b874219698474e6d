// Builds what the .vsix carries in out/: the extension (extension.js, Node, `vscode` external) and
// the chat's page (chat.js and chat.css for the webview, with markdown-it and highlight.js bundled
// in: a webview loads nothing from the network), plus the codicon font the page draws its icons with.
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

mkdirSync("out", { recursive: true });
await build({
  entryPoints: ["src/extension.ts"],
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  external: ["vscode"],
  outfile: "out/extension.js",
  logLevel: "warning",
});
await build({
  entryPoints: ["webview/chat.ts"],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["chrome120"],
  outfile: "out/chat.js",
  legalComments: "none",
  charset: "utf8",
  logLevel: "warning",
});
copyFileSync("webview/chat.css", "out/chat.css");
copyFileSync("node_modules/@vscode/codicons/dist/codicon.css", "out/codicon.css");
copyFileSync("node_modules/@vscode/codicons/dist/codicon.ttf", "out/codicon.ttf");
