"""An upstream MCP server over stdio for the gateway's tests: it reports its own pid.

Run as a subprocess by tests/sdk/test_mcp_gateway_transports.py (the crash test);
`lookup_order` answers with the process id, so the test can kill exactly this process.
With `--no-handshake` it refuses the initialize handshake, as a server that speaks only
the 2026-07-28 revision does (tests/sdk/test_mcp_gateway_early.py).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.types import METHOD_NOT_FOUND

server = MCPServer("crashing-shop")


async def no_handshake(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Refuse `initialize`; serve everything else."""
    if ctx.method == "initialize":
        raise MCPError(code=METHOD_NOT_FOUND, message="this server speaks 2026-07-28 only")
    return await call_next(ctx)


@server.tool()
def lookup_order(orderId: str) -> str:
    """Look up an order; the answer names this process."""
    return f"order {orderId} from pid {os.getpid()}"


@server.tool()
def issue_refund(orderId: str, amountCents: int) -> str:
    """Refund an order."""
    return f"refunded {amountCents} on {orderId}"


if __name__ == "__main__":
    if "--no-handshake" in sys.argv[1:]:
        server._lowlevel_server.middleware.append(no_handshake)
    server.run()
