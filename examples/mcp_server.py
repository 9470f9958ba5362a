"""An example MCP server for the gateway walkthrough (docs/mcp.md): a shop's order tools.

Run it behind the gateway, against the sandbox (`./run dev`):

    cosigner-mcp-gateway --upstream-cmd "python examples/mcp_server.py" \
        --surface slack:T0DEMO/C0DEMO/U0ALICE

`lookup_order` is a read (the sandbox policy lets it through with nobody asked);
`issue_refund` is danger and `send_email` is asked every time: their cards appear in the
sandbox page's Slack channel. Every call that reaches this server is printed on stderr,
so you can see that a denied call never arrives.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

shop = MCPServer("example-shop", instructions="Orders, refunds and customer email of an example shop.")


def _arrived(tool: str, **arguments: object) -> None:
    print(f"example-shop: {tool} {arguments}", file=sys.stderr, flush=True)


@shop.tool()
def lookup_order(order_id: str) -> dict[str, object]:
    """Look up an order by id."""
    _arrived("lookup_order", order_id=order_id)
    return {"orderId": order_id, "status": "delivered", "totalCents": 12900}


@shop.tool()
def issue_refund(order_id: str, amount_cents: int, card_token: str = "tok_visa") -> str:
    """Refund part or all of an order to the card it was paid with."""
    _arrived("issue_refund", order_id=order_id, amount_cents=amount_cents)
    return f"refunded {amount_cents} cents on {order_id}"


@shop.tool()
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email to a customer."""
    _arrived("send_email", to=to, subject=subject)
    return f"sent to {to}"


if __name__ == "__main__":
    shop.run()  # stdio
