"""A bare MCP passthrough over stdio, for bench/mcp_gateway.py: the gateway without Cosigner.

    .venv/bin/python bench/mcp_passthrough.py "python examples/mcp_server.py"

The same `mcp` pieces as `cosigner-mcp-gateway` (a low-level `Server` on the loop's pipes,
an `mcp.Client` to the upstream opened by the gateway's `upstream_client`) forwarding every
tools/call as it comes: what MCP over stdio costs one hop in front of a server, the floor
under what the gateway adds.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from typing import Any

from mcp import StdioServerParameters
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams

from cosigner.mcp_gateway import upstream_client
from cosigner.mcp_gateway.pipes import open_stdio


async def main(command: str) -> None:
    words = shlex.split(command)
    async with upstream_client(StdioServerParameters(command=words[0], args=words[1:])) as upstream:

        async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
            return await upstream.list_tools(cursor=params.cursor if params else None, cache_mode="bypass")

        async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
            return await upstream.call_tool(params.name, params.arguments or {})

        server: Server[Any] = Server("mcp-passthrough", on_list_tools=list_tools, on_call_tool=call_tool)
        stdin, stdout = await open_stdio()
        async with stdio_server(stdin, stdout) as (read, write):
            await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
