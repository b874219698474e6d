"""Drives Totem's MCP server with the official MCP Python SDK, as another agent would.

    python server_client.py stdio MODE PROJECT_DIR MODEL -- COMMAND ARGS...
    python server_client.py http MODE PROJECT_DIR MODEL URL TOKEN

MODE is the SDK's connect mode: `legacy` (the 2025-11-25 `initialize` handshake) or `auto`
(probes the stateless 2026-07-28 `server/discover` first). Lists the tools, finds the project,
creates a session, asks the agent (collecting progress notifications), reads the run, the
messages and the diff, and prints one JSON report on stdout for the Rust test to check.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def server_for(kind, rest):
    if kind == "stdio":
        command = rest[rest.index("--") + 1 :]
        return StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    url, token = rest
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    return streamable_http_client(url, http_client=http)


async def call(client, name, arguments, **kw):
    result = await client.call_tool(name, arguments, **kw)
    text = "".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        raise SystemExit(f"{name} failed: {text}")
    return result.structured_content, text


async def main():
    kind, mode, project_dir, model, *rest = sys.argv[1:]
    report = {}
    async with Client(server_for(kind, rest), mode=mode, read_timeout_seconds=120) as client:
        report["protocolVersion"] = client.protocol_version
        report["serverName"] = client.server_info.name if client.server_info else None
        listed = await client.list_tools()
        report["tools"] = sorted(t.name for t in listed.tools)
        report["toolsWithOutputSchema"] = sorted(t.name for t in listed.tools if t.output_schema)

        projects, _ = await call(client, "project_list", {})
        project = next(p for p in projects["items"] if p["path"] == os.path.realpath(project_dir))
        session, _ = await call(client, "session_create", {"projectId": project["id"], "title": "from mcp"})
        report["session"] = session

        progress = []

        async def on_progress(value, total, message):
            progress.append({"progress": value, "message": message})

        ask, ask_text = await call(
            client,
            "session_ask",
            {"sessionId": session["id"], "text": "Say hello", "model": model, "timeoutMs": 60000},
            progress_callback=on_progress,
        )
        report["ask"] = ask
        report["askText"] = ask_text
        report["progress"] = progress

        run, _ = await call(client, "run_get", {"runId": ask["run"]["id"]})
        report["runGet"] = run
        waited, _ = await call(client, "run_wait", {"runId": ask["run"]["id"], "timeoutMs": 1000})
        report["runWait"] = waited
        messages, _ = await call(client, "session_messages", {"sessionId": session["id"]})
        report["messages"] = messages["messages"]
        diff, _ = await call(client, "session_diff", {"sessionId": session["id"]})
        report["diff"] = diff
        sessions, _ = await call(client, "session_list", {"projectId": project["id"]})
        report["sessionIds"] = [s["id"] for s in sessions["items"]]

        missing = await client.call_tool("session_get", {"sessionId": "ses_missing"})
        report["missingIsError"] = bool(missing.is_error)
        report["missingText"] = "".join(getattr(c, "text", "") for c in missing.content)
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
