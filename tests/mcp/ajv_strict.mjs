// Compiles every tool's input and output schema of an MCP `tools/list` answer (read from stdin)
// with ajv's draft 2020-12 validator in strict mode, the way strict hosts check them.
//
//     AJV_DIR=…/node_modules node ajv_strict.mjs < tools.json
//
// Prints one JSON line: {"checked": N, "problems": ["TOOL SIDE: ajv's message", …]}.

import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const require = createRequire(process.env.AJV_DIR + "/");
const Ajv2020 = require("ajv/dist/2020").default;
const formats = require("ajv-formats");
const addFormats = formats.default ?? formats;

const listed = JSON.parse(readFileSync(0, "utf8"));
const problems = [];
let checked = 0;
for (const tool of listed.tools) {
  for (const side of ["inputSchema", "outputSchema"]) {
    const schema = tool[side];
    if (!schema) continue;
    // A validator per schema: one schema's `$defs` must not satisfy another's.
    const ajv = new Ajv2020({ strict: true, allErrors: true, logger: false });
    addFormats(ajv);
    try {
      ajv.compile(schema);
      checked++;
    } catch (e) {
      problems.push(`${tool.name} ${side}: ${e.message}`);
    }
  }
}
console.log(JSON.stringify({ checked, problems }));
