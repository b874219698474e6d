"""A streamable HTTP MCP server that writes down its sessions, for Totem's tests of how long it
keeps a remote server's session; written with the official MCP Python SDK (mcp 2.x).

    python session_server.py LOG

Listens on 127.0.0.1 on a free port and prints the port on stdout. Every session the SDK opens
(its answer to `initialize` carries a new `mcp-session-id`) adds `open ID` to LOG, and every
`DELETE` that ends one adds `close ID`. Its one tool, `ping`, answers `pong`.
"""

import socket
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("session-server")
log = sys.argv[1]


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


def note(line):
    with open(log, "a") as f:
        f.write(line + "\n")


def counting(app):
    """The app, with each session's opening and its DELETE written to the log."""

    async def asgi(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        asked = dict(scope.get("headers") or []).get(b"mcp-session-id")
        if scope["method"] == "DELETE" and asked:
            note(f"close {asked.decode()}")

        async def sending(message):
            if message["type"] == "http.response.start" and not asked:
                given = dict(message.get("headers") or []).get(b"mcp-session-id")
                if given:
                    note(f"open {given.decode()}")
            await send(message)

        await app(scope, receive, sending)

    return asgi


listener = socket.socket()
listener.bind(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
config = uvicorn.Config(counting(server.streamable_http_app()), log_level="warning")
uvicorn.Server(config).run(sockets=[listener])
