"""A real third-party MCP client (the official Python SDK, `mcp` from PyPI)
driving `toolhost mcp serve` over stdio: list the tools, call a few, print
what came back as JSON for the Rust test to check.

Usage: mcp_client.py COMMAND [ARGS...]   (the server command line)
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def texts(result):
    return [block.text for block in result.content if getattr(block, "type", "") == "text"]


def is_error(result):
    return bool(getattr(result, "isError", getattr(result, "is_error", False)))


async def main():
    command, *args = sys.argv[1:]
    params = StdioServerParameters(command=command, args=args)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            calls = {}
            for label, name, arguments in [
                ("roll", "dice_roll", {"formula": "2d6"}),
                ("badRoll", "dice_roll", {"formula": "2d6++"}),
                ("write", "workspace_write_file", {"path": "output/a.md", "content": "hello"}),
                ("read", "workspace_read_file", {"path": "output/a.md"}),
                ("overBudget", "dice_roll", {"formula": "d4"}),
            ]:
                result = await session.call_tool(name, arguments)
                calls[label] = {"text": texts(result), "isError": is_error(result)}
            print(json.dumps({"tools": [tool.name for tool in listed.tools], "calls": calls}))


asyncio.run(main())
