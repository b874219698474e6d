"""An MCP server that needs a secret, for `totem mcp add|test` with stored secrets; written with
the official MCP Python SDK (mcp 2.x). Its one tool, `whoami`, says which transport it serves.

    python token_server.py --stdio NEKOT       stdio; exits 3 unless $TOKEN_FOR_TEST is NEKOT
                                               reversed (so the command line does not hold it)
    python token_server.py --http PORT TOKEN   streamable HTTP on 127.0.0.1:PORT/mcp; answers 401
                                               unless `Authorization: Bearer TOKEN` is sent
"""

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("token-server")


@server.tool()
def whoami() -> str:
    """Say which transport this server serves."""
    return "stdio" if sys.argv[1] == "--stdio" else "http"


def guarded(app, token):
    """The app behind a bearer-token check."""
    wanted = f"Bearer {token}".encode()

    async def asgi(scope, receive, send):
        if scope["type"] == "http" and dict(scope.get("headers") or []).get(b"authorization") != wanted:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"missing or wrong token"})
            return
        await app(scope, receive, send)

    return asgi


if sys.argv[1] == "--stdio":
    if os.environ.get("TOKEN_FOR_TEST") != sys.argv[2][::-1]:
        sys.stderr.write("token server: wrong token in TOKEN_FOR_TEST\n")
        sys.exit(3)
    server.run("stdio")
else:
    import uvicorn

    port, token = int(sys.argv[2]), sys.argv[3]
    uvicorn.run(guarded(server.streamable_http_app(), token), host="127.0.0.1", port=port,
                log_level="warning")
