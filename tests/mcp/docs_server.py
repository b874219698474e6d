"""A small Total.js documentation server for Totem's tests, written with the official MCP Python
SDK (mcp 2.x, whose FastMCP is now called MCPServer). It speaks MCP on stdio.

Tools: `search` (pages whose title or text share words with the query, best first),
`delete_pages`, which a whitelist must keep away from the model, and `add_page_tool`, which adds a
`read_page` tool and tells the client its tool list changed.

    python docs_server.py            serve
    python docs_server.py --broken   every search fails
    python docs_server.py --crash    exit before the handshake
"""

import sys

from mcp.server.mcpserver import Context, MCPServer

PAGES = [
    {
        "title": "Routing in Total.js 5",
        "content": "Routes are declared in controllers/*.js inside exports.install: "
        "ROUTE('GET /api/users/', 'users_list'); the action runs the request. "
        "(docs-marker-routing)",
    },
    {
        "title": "Actions with NEWACTION",
        "content": "NEWACTION('users_list', { name: 'List users', action: function($) "
        "{ $.callback([]); } }); (docs-marker-actions)",
    },
    {
        "title": "The config file",
        "content": "Each line is `key : value` with a space after the colon. (docs-marker-config)",
    },
]

if "--crash" in sys.argv:
    sys.stderr.write("docs server: crashing on purpose\n")
    sys.exit(3)

BROKEN = "--broken" in sys.argv

server = MCPServer("totaljs-docs")


@server.tool()
def search(query: str) -> list[dict]:
    """Search the Total.js 5 documentation; returns the best pages first."""
    if BROKEN:
        raise RuntimeError("the documentation index is unavailable")
    words = {w.strip(".,?!").lower() for w in query.split() if len(w) > 2}

    def score(page: dict) -> int:
        text = (page["title"] + " " + page["content"]).lower()
        return sum(1 for w in words if w in text)

    found = [p for p in PAGES if score(p) > 0]
    found.sort(key=score, reverse=True)
    return found


@server.tool()
def delete_pages() -> str:
    """Delete every page (never offered to the model: not in the whitelist)."""
    return "deleted"


def read_page(title: str) -> str:
    """Read one documentation page by its title."""
    for page in PAGES:
        if page["title"] == title:
            return page["content"]
    return "no such page"


@server.tool()
async def add_page_tool(ctx: Context) -> str:
    """Add the read_page tool (and send notifications/tools/list_changed)."""
    server.add_tool(read_page)
    await ctx.session.send_tool_list_changed()
    return "read_page is available now"


if __name__ == "__main__":
    server.run()
