// Untrusted text made safe to show (the TypeScript twin of totem_protocol::display): model,
// project and daemon text goes through `displayable` before it reaches the chat webview or a
// notification. HTML escaping keeps markup out of the webview; this keeps out what HTML escaping
// does not: control characters (but newline and tab), CR, ESC, DEL, C1 controls, bidi controls
// (U+202A–202E, U+2066–2069, U+200E/F, U+061C) that reorder what is read, and the line and
// paragraph separators. Each becomes a visible escape: `\x1b`, `\r`, `<U+202E>`. Character by
// character, so streamed pieces give the same text as the whole; idempotent.

// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;
// eslint-disable-next-line no-control-regex
const UNSAFE_LINE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

function escape(c: string): string {
  const code = c.charCodeAt(0);
  if (c === "\r") return "\\r";
  if (c === "\n") return "\\n";
  if (c === "\t") return "\\t";
  if (code < 0x20 || code === 0x7f) return "\\x" + code.toString(16).padStart(2, "0");
  return "<U+" + code.toString(16).toUpperCase().padStart(4, "0") + ">";
}

/** `text` with every character a screen would obey or reorder by shown as a visible escape;
 * newlines and tabs stay unless `oneLine`. */
export function displayable(text: string, oneLine = false): string {
  return String(text).replace(oneLine ? UNSAFE_LINE : UNSAFE, escape);
}

/** A copy of `value` with every string in it (object keys too) made displayable. */
export function displayableJson<T>(value: T): T {
  if (typeof value === "string") {
    return displayable(value) as T;
  }
  if (Array.isArray(value)) {
    return value.map((v) => displayableJson(v)) as T;
  }
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      out[displayable(k)] = displayableJson(v);
    }
    return out as T;
  }
  return value;
}
