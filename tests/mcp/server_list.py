"""Starts `totem mcp` the way an agent configures a stdio MCP server (a command run in its
project folder) and lists what it offers; prints one JSON report on stdout.

    python server_list.py PROJECT_DIR COMMAND ARGS...
"""

import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters


async def main():
    project_dir, *command = sys.argv[1:]
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ), cwd=project_dir)
    async with Client(server, mode="legacy", read_timeout_seconds=60) as client:
        tools = await client.list_tools()
        projects = await client.call_tool("project_list", {})
        print(json.dumps({
            "tools": sorted(t.name for t in tools.tools),
            "projects": [p["path"] for p in projects.structured_content["items"]],
            "instructions": client.instructions,
        }))


asyncio.run(main())
