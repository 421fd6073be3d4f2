"""A host application in another language driving `toolhost serve`: the
JSON API with httpx, `/mcp/{profile}` with the official MCP client (`mcp`
from PyPI) over streamable HTTP in both protocol eras. Prints what came
back as JSON for the Rust test to check.

Usage: serve_client.py BASE_URL TOKEN
"""

import asyncio
import json
import sys

import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def sse_events(response):
    """(id, event, data) of each Server-Sent Event of a streamed response."""
    event = {}
    for line in response.iter_lines():
        if line == "":
            if "data" in event:
                yield int(event["id"]), event["event"], json.loads(event["data"])
            event = {}
        elif not line.startswith(":") and ": " in line:
            name, value = line.split(": ", 1)
            event[name] = value


def drive_api(base, token):
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=auth, timeout=60) as http:
        tools = http.get("/v1/tools").json()["tools"]
        started = http.post(
            "/v1/runs",
            json={"profile": "writer", "model": "demo", "chat": "chat", "task": "Answer."},
        )
        run_id = started.json()["id"]
        with http.stream("GET", f"/v1/runs/{run_id}/events") as response:
            events = list(sse_events(response))
        run = http.get(f"/v1/runs/{run_id}").json()
        reply = http.get(f"/v1/runs/{run_id}/files/output/main.md").text
        unknown_model = http.post(
            "/v1/runs", json={"model": "openai:http://evil.example/v1", "chat": "chat"}
        )
        other_tenant = httpx.get(f"{base}/v1/runs/{run_id}", headers={"Authorization": "Bearer globex-secret"})
        return {
            "toolCount": len(tools),
            "startStatus": started.status_code,
            "eventTypes": [kind for _, kind, _ in events],
            "eventIds": [seq for seq, _, _ in events],
            "run": run,
            "reply": reply,
            "unknownModel": [unknown_model.status_code, unknown_model.json()["code"]],
            "otherTenant": [other_tenant.status_code, other_tenant.json()["code"]],
        }


def texts(result):
    return [block.text for block in result.content if getattr(block, "type", "") == "text"]


def is_error(result):
    return bool(getattr(result, "isError", getattr(result, "is_error", False)))


async def drive_mcp(base, token, mode):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with Client(streamable_http_client(f"{base}/mcp/writer", http_client=http), mode=mode) as client:
        listed = await client.list_tools()
        roll = await client.call_tool("dice_roll", {"formula": "2d6"})
        bad = await client.call_tool("dice_roll", {"formula": "2d6++"})
        return {
            "tools": [tool.name for tool in listed.tools],
            "roll": {"text": texts(roll), "isError": is_error(roll)},
            "badRoll": {"text": texts(bad), "isError": is_error(bad)},
        }


def main():
    base, token = sys.argv[1:3]
    answer = {"api": drive_api(base, token)}
    answer["mcpLegacy"] = asyncio.run(drive_mcp(base, token, "legacy"))
    answer["mcpModern"] = asyncio.run(drive_mcp(base, token, "2026-07-28"))
    print(json.dumps(answer))


main()
