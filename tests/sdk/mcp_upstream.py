"""An upstream MCP server over stdio for the gateway's crash test: it reports its own pid.

Run as a subprocess by tests/sdk/test_mcp_upstream_crash.py; `lookup_order` answers with
the process id, so the test can kill exactly this process.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("crashing-shop")


@server.tool()
def lookup_order(orderId: str) -> str:
    """Look up an order; the answer names this process."""
    return f"order {orderId} from pid {os.getpid()}"


@server.tool()
def issue_refund(orderId: str, amountCents: int) -> str:
    """Refund an order."""
    return f"refunded {amountCents} on {orderId}"


if __name__ == "__main__":
    server.run()
