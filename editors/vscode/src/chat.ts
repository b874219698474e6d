// The chat view: a webview that shows the open session as it streams and a prompt box with the
// mode, model and reasoning pickers. Its page is `webview/chat.ts` (bundled to out/chat.js with
// markdown-it and highlight.js, styled by out/chat.css, icons from the codicon font), loaded from
// the extension's own folder: the page fetches nothing from the network. The extension posts it
// the whole state after each change; the page redraws only what changed.

import * as vscode from "vscode";

import type { Block } from "./state.js";
import { displayableJson } from "./display.js";

export type DaemonState = "up" | "starting" | "down" | "reconnecting";

export interface ChatState {
  daemon: DaemonState;
  /** Why the daemon could not be started or reached, when `daemon` is "down". */
  daemonError?: string;
  session?: { id: string; title: string };
  activity: string;
  blocks: Block[];
  /** Ids of the questions of this session that wait for an answer. */
  open: string[];
  attachments: string[];
  mode: string;
  modes: string[];
  model: string;
  reasoning: string;
  models: string[];
  defaultModel: string;
  /** What a picker's choice does not do (reasoning on a model that cannot think), or "". */
  hint: string;
  /** Whether the model of the next prompt can think (the reasoning levels say "no effect" if not). */
  thinks: boolean;
  /** The models that cannot think (with a reasoning level picked, the model picker says so). */
  cannotThink: string[];
  /** The run a Retry is offered for: the session's last run, when it failed. */
  retry?: string;
}

export class ChatView implements vscode.WebviewViewProvider {
  private view: vscode.WebviewView | undefined;
  private last: ChatState | undefined;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly onMessage: (message: { type: string; [field: string]: unknown }) => void,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const out = vscode.Uri.joinPath(this.extensionUri, "out");
    view.webview.options = { enableScripts: true, localResourceRoots: [out] };
    const asset = (name: string) => view.webview.asWebviewUri(vscode.Uri.joinPath(out, name)).toString();
    view.webview.html = page(nonce(), view.webview.cspSource, asset);
    view.webview.onDidReceiveMessage((m) => this.onMessage(m));
    view.onDidDispose(() => (this.view = undefined));
    if (this.last) {
      void view.webview.postMessage({ type: "state", state: this.last });
    }
  }

  get visible(): boolean {
    return this.view?.visible ?? false;
  }

  /** Every string of the state is made displayable (see display.ts) before the webview gets it. */
  show(state: ChatState): void {
    state = displayableJson(state);
    this.last = state;
    if (this.view) {
      void this.view.webview.postMessage({ type: "state", state });
    }
  }

  /** Puts a prompt that was not taken back (or an undone run's) into the box, when it is empty. */
  restorePrompt(text: string): void {
    void this.view?.webview.postMessage({ type: "restore", text });
  }

  /** Empties the box if it still holds `text` as [restorePrompt] put it (after a redo). */
  unrestorePrompt(text: string): void {
    void this.view?.webview.postMessage({ type: "unrestore", text });
  }

  /** Scrolls the chat to the question that waits. */
  revealQuestion(): void {
    void this.view?.webview.postMessage({ type: "reveal" });
  }

  /** The prompt `text` was taken: the box is emptied if it still holds it. */
  sent(text: string): void {
    void this.view?.webview.postMessage({ type: "sent", text });
  }
}

function nonce(): string {
  const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  let out = "";
  for (let i = 0; i < 32; i++) {
    out += chars[Math.floor(Math.random() * chars.length)];
  }
  return out;
}

function page(n: string, csp: string, asset: (name: string) => string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${csp}; font-src ${csp}; script-src 'nonce-${n}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${asset("codicon.css")}">
<link rel="stylesheet" href="${asset("chat.css")}">
</head>
<body>
<div id="head"><span id="title">Totem</span><span id="activity"></span><button id="stop" class="secondary" title="Stop the run" hidden><i class="codicon codicon-debug-stop" aria-hidden="true"></i><span>Stop</span></button></div>
<div id="banner" role="status" hidden></div>
<div id="log" role="log" aria-live="polite"></div>
<div id="foot">
  <div id="attached"></div>
  <textarea id="prompt" placeholder="Ask Totem… (Enter sends, Shift+Enter for a new line)" aria-label="Prompt"></textarea>
  <div id="pickers">
    <select id="mode" title="The mode of the next prompts" aria-label="Mode"></select>
    <select id="model" title="The model of the next prompts" aria-label="Model"></select>
    <select id="reasoning" title="How much the model thinks first" aria-label="Reasoning"></select>
    <button id="send" title="Send (Enter)"><i class="codicon codicon-send" aria-hidden="true"></i><span>Send</span></button>
  </div>
  <div id="hint" hidden></div>
</div>
<script nonce="${n}" src="${asset("chat.js")}"></script>
</body>
</html>`;
}
