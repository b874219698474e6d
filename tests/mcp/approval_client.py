"""An agent host that answers Totem's permission questions through MCP elicitation, with the
official MCP Python SDK; prints one JSON report on stdout.

    python approval_client.py ANSWER SESSION_ID MODEL ARGS_JSON stdio -- COMMAND ARGS...
    python approval_client.py ANSWER SESSION_ID MODEL ARGS_JSON http URL TOKEN

Calls session_ask once (its arguments: sessionId, a prompt, model, and ARGS_JSON merged in).
ANSWER is what the person at the host does with each form:
    once / always / deny  choose that option;
    decline               decline the form;
    cancel                dismiss it;
    late                  write the file named by $TOTEM_ELICITED, then wait (up to 20 s) for
                          the server to withdraw the form, and choose deny if it does not;
    none                  no elicitation support at all.
"""

import asyncio
import json
import os
import sys

import anyio
from mcp import Client, types
from server_client import server_for

CHOICE = {"once": "once", "always": "alwaysSession", "deny": "deny"}


async def main():
    answer, session_id, model, extra, kind, *rest = sys.argv[1:]
    report = {"elicitations": [], "withdrawn": False, "lateAnswer": False}

    async def on_elicit(context, params):
        report["elicitations"].append(
            {"message": params.message, "schema": params.requested_schema}
        )
        if answer in CHOICE:
            return types.ElicitResult(action="accept", content={"answer": CHOICE[answer]})
        if answer in ("decline", "cancel"):
            return types.ElicitResult(action=answer)
        # late: someone else answers meanwhile; the server should take the form back.
        with open(os.environ["TOTEM_ELICITED"], "w") as f:
            f.write("asked")
        try:
            await anyio.sleep(20)
        except anyio.get_cancelled_exc_class():
            report["withdrawn"] = True
            raise
        report["lateAnswer"] = True
        return types.ElicitResult(action="accept", content={"answer": "deny"})

    callback = None if answer == "none" else on_elicit
    arguments = {"sessionId": session_id, "text": "change a.txt", "model": model}
    arguments.update(json.loads(extra))
    async with Client(
        server_for(kind, rest), mode="legacy", read_timeout_seconds=120, elicitation_callback=callback
    ) as client:
        result = await client.call_tool("session_ask", arguments)
        report["isError"] = bool(result.is_error)
        report["text"] = "".join(getattr(c, "text", "") for c in result.content)
        report["ask"] = result.structured_content
    print(json.dumps(report))


asyncio.run(main())
