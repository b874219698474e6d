// Turning untrusted text into page elements. Model answers are Markdown: `marked` parses them,
// DOMPurify keeps only plain formatting (no script, no style, no event attribute, no form), and
// highlight.js colours code blocks. Everything else — file names, commands, tool output, diffs,
// notices — goes in as text nodes, never as HTML. All of it is made displayable first (the VS Code
// extension's `displayable`, the twin of totem_protocol::display): control characters, CR, ESC
// and bidi controls, which would reorder what is read, show as visible escapes.

import DOMPurify from "dompurify";
import { marked } from "marked";
import { parsePatch } from "diff";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import css from "highlight.js/lib/languages/css";
import diffLang from "highlight.js/lib/languages/diff";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";

import { displayable } from "../../editors/vscode/src/display";

export { displayable };

hljs.registerLanguage("bash", bash);
hljs.registerLanguage("css", css);
hljs.registerLanguage("diff", diffLang);
hljs.registerLanguage("javascript", javascript);
hljs.registerLanguage("json", json);
hljs.registerLanguage("python", python);
hljs.registerLanguage("rust", rust);
hljs.registerLanguage("typescript", typescript);
hljs.registerLanguage("xml", xml);

marked.setOptions({ gfm: true, breaks: false });

const PURIFY = {
  ALLOWED_TAGS: [
    "p", "br", "hr", "em", "strong", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td", "span", "input",
  ],
  ALLOWED_ATTR: ["href", "title", "class", "type", "checked", "disabled", "start", "align"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
};

// Links open in a new tab without telling the target where they came from.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
  if (node.tagName === "INPUT" && node.getAttribute("type") !== "checkbox") {
    node.remove();
  }
});

/** Markdown (untrusted) into `into`, sanitised, code highlighted. */
export function markdown(into: HTMLElement, text: string): void {
  const html = marked.parse(displayable(text), { async: false }) as string;
  into.innerHTML = DOMPurify.sanitize(html, PURIFY) as unknown as string;
  for (const code of into.querySelectorAll("pre code")) {
    const lang = [...code.classList].find((c) => c.startsWith("language-"))?.slice(9);
    const source = code.textContent ?? "";
    const result = lang && hljs.getLanguage(lang) ? hljs.highlight(source, { language: lang }) : undefined;
    if (result) {
      // highlight.js escapes the source; its output is spans with classes only. Sanitised again
      // all the same.
      code.innerHTML = DOMPurify.sanitize(result.value, { ALLOWED_TAGS: ["span"], ALLOWED_ATTR: ["class"] }) as unknown as string;
      code.classList.add("hljs");
    }
  }
}

/** An element with text content only, made displayable. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string,
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (className) {
    e.className = className;
  }
  if (text !== undefined) {
    e.textContent = displayable(text);
  }
  return e;
}

/** A unified diff (untrusted) as a side-by-side table: old on the left, new on the right. */
export function sideBySide(diffText: string): HTMLElement {
  const box = el("div", "diff");
  let patches;
  try {
    patches = parsePatch(diffText);
  } catch {
    box.append(el("pre", "diff-raw", diffText));
    return box;
  }
  for (const patch of patches) {
    const name = (patch.newFileName ?? patch.oldFileName ?? "").replace(/^[ab]\//, "");
    if (name) {
      box.append(el("div", "diff-file", name));
    }
    const table = el("table", "diff-table");
    for (const hunk of patch.hunks) {
      const head = el("tr", "diff-hunk");
      const cell = el("td", undefined, `@@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@`);
      cell.colSpan = 4;
      head.append(cell);
      table.append(head);
      let oldNo = hunk.oldStart;
      let newNo = hunk.newStart;
      let dels: string[] = [];
      let adds: string[] = [];
      const flush = () => {
        const n = Math.max(dels.length, adds.length);
        for (let i = 0; i < n; i++) {
          const row = el("tr");
          const d = dels[i];
          const a = adds[i];
          row.append(
            el("td", "ln", d !== undefined ? String(oldNo++) : ""),
            el("td", d !== undefined ? "del" : "empty", d ?? ""),
            el("td", "ln", a !== undefined ? String(newNo++) : ""),
            el("td", a !== undefined ? "add" : "empty", a ?? ""),
          );
          table.append(row);
        }
        dels = [];
        adds = [];
      };
      for (const line of hunk.lines) {
        const mark = line[0];
        const body = line.slice(1);
        if (mark === "-") {
          dels.push(body);
        } else if (mark === "+") {
          adds.push(body);
        } else if (mark === " ") {
          flush();
          const row = el("tr");
          row.append(el("td", "ln", String(oldNo++)), el("td", "ctx", body), el("td", "ln", String(newNo++)), el("td", "ctx", body));
          table.append(row);
        }
      }
      flush();
    }
    box.append(table);
  }
  if (patches.every((p) => p.hunks.length === 0)) {
    box.append(el("pre", "diff-raw", diffText));
  }
  return box;
}
