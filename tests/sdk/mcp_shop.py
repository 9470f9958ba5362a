"""The gateway tests' upstreams: in-process MCP servers whose tools record every call.

`lookup_order` is a read in the tests' policy, `issue_refund` danger (tenant acme lets
amounts below 5000 through), `delete_account` a standing deny and `wipe_disk` a tool the
policy does not know (so danger). `Shelf` is an upstream whose tool definitions a test
changes while the gateway runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from pydantic import BaseModel

from cosigner import AsyncCosigner, DashboardSurface, Surface
from cosigner.mcp_gateway import Gateway, GatewayOptions, upstream_client

USER = "u_1"
SURFACE = DashboardSurface(user_id=USER)


def shop(calls: list[tuple[str, dict[str, Any]]]) -> MCPServer:
    """A fresh upstream that appends (tool, arguments) to `calls` each time a tool runs."""
    server = MCPServer("shop")

    @server.tool()
    def lookup_order(orderId: str) -> str:
        """Look up an order."""
        calls.append(("lookup_order", {"orderId": orderId}))
        return f"order {orderId}: delivered"

    @server.tool()
    def issue_refund(orderId: str, amountCents: int) -> str:
        """Refund an order."""
        calls.append(("issue_refund", {"orderId": orderId, "amountCents": amountCents}))
        return f"refunded {amountCents} on {orderId}"

    @server.tool()
    def delete_account(accountId: str) -> str:
        """Delete an account."""
        calls.append(("delete_account", {"accountId": accountId}))
        return "deleted"

    @server.tool()
    def wipe_disk(device: str) -> str:
        """Wipe a disk."""
        calls.append(("wipe_disk", {"device": device}))
        return "wiped"

    return server


class Branch(BaseModel):
    """A tree-shaped argument: its input schema refers to itself (`$ref` to `#/$defs/Branch`)."""

    name: str
    children: list[Branch] = []


def orchard(calls: list[tuple[str, dict[str, Any]]]) -> MCPServer:
    """An upstream whose `plant_tree` takes a tree, so its input schema is recursive: a
    `parametersSchema` Cosigner refuses (it cannot be applied in bounded work)."""
    server = MCPServer("orchard")

    @server.tool()
    def plant_tree(tree: Branch) -> str:
        """Plant a tree."""
        calls.append(("plant_tree", {"tree": tree.model_dump()}))
        return f"planted {tree.name} with {len(tree.children)} branches"

    return server


ORDER = {"type": "object", "properties": {"orderId": {"type": "string"}}, "required": ["orderId"]}
REFUND_SCHEMA = {
    "type": "object",
    "properties": {"orderId": {"type": "string"}, "amountCents": {"type": "integer"}},
    "required": ["orderId", "amountCents"],
}


class Shelf:
    """An upstream (a low-level `mcp` server) whose tools are `tools`, changed at will; each
    call is appended to `calls`."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.calls = calls
        self.tools: dict[str, Tool] = {
            "lookup_order": Tool(
                name="lookup_order",
                description="Look up an order.",
                input_schema=ORDER,
                annotations=ToolAnnotations(read_only_hint=True),
            ),
            "issue_refund": Tool(
                name="issue_refund", description="Refund an order.", input_schema=REFUND_SCHEMA
            ),
        }
        self.twins: list[Tool] = []
        """More tools listed after `tools`, names repeated or not."""
        self.server: Server[Any] = Server("shelf", on_list_tools=self._list, on_call_tool=self._call)

    def change(self, name: str, **fields: Any) -> None:
        """Give tool `name` (a new one if absent) these definition fields."""
        if name in self.tools:
            self.tools[name] = self.tools[name].model_copy(update=fields)
        else:
            self.tools[name] = Tool(name=name, **{"input_schema": ORDER, **fields})

    async def _list(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=[*self.tools.values(), *self.twins])

    async def _call(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        arguments = dict(params.arguments or {})
        self.calls.append((params.name, arguments))
        return CallToolResult(content=[TextContent(type="text", text=f"{params.name} ran")])


@asynccontextmanager
async def gateway(
    url: str,
    key: str,
    upstream: Any,
    *,
    surface: Surface = SURFACE,
    transport: httpx.AsyncBaseTransport | None = None,
    **options: Any,
) -> AsyncIterator[Gateway]:
    """A gateway in front of `upstream` (anything `mcp.Client` takes), asking Cosigner at `url`
    as the command does (over kept-alive connections, or through `transport` when given)."""
    options.setdefault("hold_seconds", 0)
    cosigner = AsyncCosigner(url=url, api_key=key, transport=transport)
    async with cosigner, upstream_client(upstream) as client:
        gw = Gateway(client, cosigner, GatewayOptions(surface=surface, **options))
        yield gw
        await gw.drain()


class Recording(httpx.AsyncHTTPTransport):
    """The gateway's HTTP transport to Cosigner, noting each request's method and path."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(f"{request.method} {request.url.path}")
        return await super().handle_async_request(request)
