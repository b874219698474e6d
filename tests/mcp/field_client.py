"""Drives `totem mcp` the way MCP hosts do; prints one JSON report on stdout.

    python field_client.py sessions PROJECT_DIR -- COMMAND ARGS...
        Starts the server with the environment the SDK gives by default (HOME, LOGNAME, PATH,
        SHELL, TERM and USER only) in PROJECT_DIR and lists projects and sessions. With
        FIELD_EXTRA_ENV (a JSON object) in its own environment, those variables are added; with
        FIELD_ASK_SESSION, it also asks that session (reporting the tool error it may get).
    python field_client.py timing SESSION_ID MODEL -- COMMAND ARGS...
        Calls session_ask without and then with a progress token and reports how long each took.
"""

import asyncio
import json
import os
import sys
import time

from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment


async def call(client, name, arguments, **kw):
    result = await client.call_tool(name, arguments, **kw)
    text = "".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        raise SystemExit(f"{name} failed: {text}")
    return result.structured_content


def texts(result):
    return [getattr(c, "text", "") for c in result.content]


async def sessions(project_dir, command):
    # env=None: the SDK's default environment, as hosts start servers.
    extra = json.loads(os.environ.get("FIELD_EXTRA_ENV", "{}"))
    env = {**get_default_environment(), **extra} if extra else None
    server = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=project_dir)
    async with Client(server, mode="legacy", read_timeout_seconds=60) as client:
        projects = await call(client, "project_list", {})
        listed = await client.call_tool("session_list", {})
        report = {
            "projects": [p["path"] for p in projects["items"]],
            "sessions": [s["id"] for s in listed.structured_content["items"]],
            "sessionListTexts": texts(listed),
            "instructions": client.instructions,
        }
        ask = os.environ.get("FIELD_ASK_SESSION")
        if ask:
            asked = await client.call_tool("session_ask", {"sessionId": ask, "text": "hi"})
            report["askIsError"] = bool(asked.is_error)
            report["askTexts"] = texts(asked)
        return report


async def timing(session_id, model, command):
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    report = {}
    async with Client(server, mode="legacy", read_timeout_seconds=60) as client:
        for name in ["plain", "progress", "plain2", "progress2"]:
            seen = []

            async def on_progress(value, total, message):
                seen.append(message)

            kw = {"progress_callback": on_progress} if name.startswith("progress") else {}
            start = time.monotonic()
            ask = await call(
                client, "session_ask", {"sessionId": session_id, "text": "say hi", "model": model}, **kw
            )
            report[name] = time.monotonic() - start
            report[name + "Status"] = ask["run"]["status"]
            report[name + "Notes"] = len(seen)
    return report


async def main():
    what, *rest = sys.argv[1:]
    cut = rest.index("--")
    args, command = rest[:cut], rest[cut + 1 :]
    if what == "sessions":
        report = await sessions(args[0], command)
    else:
        report = await timing(args[0], args[1], command)
    print(json.dumps(report))


asyncio.run(main())
