"""The gateway tests' upstream: an in-process MCP server whose tools record every call.

`lookup_order` is a read in the tests' policy, `issue_refund` danger (tenant acme lets
amounts below 5000 through), `delete_account` a standing deny and `wipe_disk` a tool the
policy does not know (so danger).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from mcp.server.mcpserver import MCPServer
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
