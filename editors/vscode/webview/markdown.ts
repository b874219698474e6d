// Model answers are Markdown, and untrusted: markdown-it renders them with raw HTML off (any tag
// in the text is shown as text, so no script, style or event attribute gets in), links limited to
// http(s), mailto and paths (no `command:`, `javascript:` or `data:`), and highlight.js colours
// fenced code. Each code block gets a head with its language and a Copy button.

import MarkdownIt from "markdown-it";
import hljs from "highlight.js/lib/common";

const md: MarkdownIt = new MarkdownIt({
  html: false,
  linkify: true,
  breaks: false,
  highlight: (code: string, lang: string): string => {
    const language = lang.split(/\s/)[0].toLowerCase();
    if (language && hljs.getLanguage(language)) {
      try {
        // highlight.js escapes the source; its output is spans with classes only.
        return hljs.highlight(code, { language, ignoreIllegals: true }).value;
      } catch {
        return "";
      }
    }
    return "";
  },
});

// Only links that cannot run anything in VS Code: web pages, mail, and paths (opened as project files).
md.validateLink = (url: string): boolean => {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url.trim())?.[1]?.toLowerCase();
  return scheme === undefined || scheme === "http" || scheme === "https" || scheme === "mailto";
};

const defaultFence = md.renderer.rules.fence;
md.renderer.rules.fence = (tokens, idx, options, env, self) => {
  const token = tokens[idx];
  const lang = token.info.trim().split(/\s/)[0];
  const inner = defaultFence ? defaultFence(tokens, idx, options, env, self) : self.renderToken(tokens, idx, options);
  return (
    '<div class="code"><div class="code-head"><span class="lang">' +
    md.utils.escapeHtml(lang) +
    '</span><button class="copy icon-button" title="Copy" aria-label="Copy code"><i class="codicon codicon-copy"></i><span>Copy</span></button></div>' +
    inner +
    "</div>"
  );
};

// Tables scroll sideways in a narrow view instead of squeezing their columns.
md.renderer.rules.table_open = () => '<div class="table"><table>';
md.renderer.rules.table_close = () => "</table></div>";

/** Markdown (untrusted) as HTML. */
export function markdownHtml(text: string): string {
  return md.render(text);
}
