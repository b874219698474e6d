"""An MCP server for Totem's process-lifetime tests, written with the official MCP Python SDK
(mcp 2.x). It speaks MCP on stdio.

    python slow_server.py --marker M [--start-delay SECS] [--log FILE]

`--marker` only marks the process (tests count processes by it). `--start-delay` sleeps before
serving, and `--log` gets the line `start NAME T0 T1` (seconds since the epoch around that sleep),
so a test can see whether two servers were starting at the same time. The tool `wait` blocks for
`seconds` (a server busy in a call: it does not notice its stdin closing until the call ends).
"""

import sys
import time

from mcp.server.mcpserver import MCPServer


def option(name, default=None):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


began = time.time()
time.sleep(float(option("--start-delay", "0")))
log = option("--log")
if log:
    with open(log, "a") as f:
        f.write(f"start {option('--marker')} {began} {time.time()}\n")

server = MCPServer("slow")


@server.tool()
def wait(seconds: float) -> str:
    """Waits `seconds` seconds, then says so."""
    time.sleep(seconds)
    return f"waited {seconds} s"


server.run()
