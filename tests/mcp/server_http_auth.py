"""Knocks on Totem's MCP HTTP listener without the right token, and with it, using the MCP Python
SDK and plain HTTP requests; prints one JSON report on stdout.

    python server_http_auth.py URL TOKEN
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "auth-probe", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def sdk_connects(url, headers):
    """Whether the SDK can list tools with these headers; the error's text otherwise."""
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    try:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            tools = await client.list_tools()
            return {"ok": True, "tools": len(tools.tools)}
    except BaseException as e:  # the SDK raises exception groups from its task group
        return {"ok": False, "error": repr(e)[:500]}


async def raw(http, method, url, headers, body=None):
    response = await http.request(method, url, headers=headers, json=body)
    return {
        "status": response.status_code,
        "wwwAuthenticate": response.headers.get("www-authenticate"),
        "body": response.text[:300],
        "sessionId": response.headers.get("mcp-session-id"),
    }


async def main():
    url, token = sys.argv[1:]
    report = {}
    async with httpx2.AsyncClient(timeout=30) as http:
        report["none"] = await raw(http, "POST", url, ACCEPT, INITIALIZE)
        report["wrong"] = await raw(http, "POST", url, {**ACCEPT, "Authorization": "Bearer totem_wrong"}, INITIALIZE)
        right = {**ACCEPT, "Authorization": f"Bearer {token}"}
        report["badOrigin"] = await raw(http, "POST", url, {**right, "Origin": "https://evil.example"}, INITIALIZE)
        report["localOrigin"] = await raw(http, "POST", url, {**right, "Origin": "http://localhost:3000"}, INITIALIZE)
        started = await raw(http, "POST", url, right, INITIALIZE)
        report["right"] = started
        if started["sessionId"]:
            report["delete"] = await raw(
                http,
                "DELETE",
                url,
                {"Authorization": f"Bearer {token}", "Mcp-Session-Id": started["sessionId"], "MCP-Protocol-Version": "2025-11-25"},
            )
    report["sdkNone"] = await sdk_connects(url, {})
    report["sdkWrong"] = await sdk_connects(url, {"Authorization": "Bearer totem_wrong"})
    report["sdkRight"] = await sdk_connects(url, {"Authorization": f"Bearer {token}"})
    print(json.dumps(report))


asyncio.run(main())
