// Unified diffs (as totemd sends them in questions and `session.diff`) applied to a file's text:
// forward (the proposed file, for a question's "Show diff") and backward (the file before a run,
// for the changes tree). Both return undefined when the text does not match the diff.

interface Hunk {
  oldStart: number;
  newStart: number;
  lines: string[];
}

function hunks(diff: string): Hunk[] {
  const out: Hunk[] = [];
  let current: Hunk | undefined;
  for (const line of diff.split("\n")) {
    const m = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(line);
    if (m) {
      const oldCount = m[2] === undefined ? 1 : Number(m[2]);
      const newCount = m[4] === undefined ? 1 : Number(m[4]);
      // An empty side names the line before the change.
      current = {
        oldStart: oldCount === 0 ? Number(m[1]) + 1 : Number(m[1]),
        newStart: newCount === 0 ? Number(m[3]) + 1 : Number(m[3]),
        lines: [],
      };
      out.push(current);
    } else if (current && /^[ +-]/.test(line) && !line.startsWith("---") && !line.startsWith("+++")) {
      current.lines.push(line);
    } else if (current && line.startsWith("\\")) {
      // "\ No newline at end of file"
    } else if (current && (line.startsWith("---") || line.startsWith("+++"))) {
      current = undefined;
    }
  }
  return out;
}

function apply(text: string, diff: string, forward: boolean): string | undefined {
  const trailing = text.endsWith("\n");
  const source = text === "" ? [] : (trailing ? text.slice(0, -1) : text).split("\n");
  const result: string[] = [];
  let pos = 0;
  const keep = forward ? "-" : "+";
  const put = forward ? "+" : "-";
  for (const hunk of hunks(diff)) {
    const start = (forward ? hunk.oldStart : hunk.newStart) - 1;
    if (start < pos) {
      return undefined;
    }
    while (pos < start) {
      if (pos >= source.length) {
        return undefined;
      }
      result.push(source[pos++]);
    }
    for (const line of hunk.lines) {
      const mark = line[0];
      const body = line.slice(1);
      if (mark === " " || mark === keep) {
        if (source[pos] !== body) {
          return undefined;
        }
        pos++;
        if (mark === " ") {
          result.push(body);
        }
      } else if (mark === put) {
        result.push(body);
      }
    }
  }
  while (pos < source.length) {
    result.push(source[pos++]);
  }
  return result.length === 0 ? "" : result.join("\n") + (trailing || text === "" ? "\n" : "");
}

/** The text after the change. */
export function applyForward(before: string, diff: string): string | undefined {
  return apply(before, diff, true);
}

/** The text before the change. */
export function applyBackward(after: string, diff: string): string | undefined {
  return apply(after, diff, false);
}
