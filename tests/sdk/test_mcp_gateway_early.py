"""The gateway puts a tools/call to Cosigner as it reads it (sdk/python/cosigner/mcp_gateway/early.py).

Against the harness Cosigner over loopback, with `mcp.Client` as the agent: a call after the
connection's first is asked about before the `mcp` server hands it to the gateway's handler,
each call is still asked about once, and a request the handler would not get as it is, or
one on a connection not yet proven, is not asked about early. A `Connection` is also fed
the `mcp` SDK's own messages directly, with the gateway's real ask. Last, the upstream is
connected with the initialize handshake, or as it offers when it refuses that.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx
from mcp import Client, StdioServerParameters
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCNotification, JSONRPCRequest, TextContent
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from cosigner import AsyncCosigner, parameters_digest
from cosigner.mcp_gateway import upstream_client
from cosigner.mcp_gateway.early import Connection
from tests.sdk.conftest import Target, results_of
from tests.sdk.mcp_shop import Recording, gateway, shop
from tests.sdk.mcp_upstream import no_handshake

VERSION = "2025-11-25"
UPSTREAM = Path(__file__).resolve().parent / "mcp_upstream.py"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


class Announcing(Recording):
    """`Recording`, which also tells a waiting test each time a call is put to Cosigner."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.traceparents: list[str | None] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/v1/approvals":
            self.traceparents.append(request.headers.get("traceparent"))
            self.asked.set()
        return await super().handle_async_request(request)


def asks(sent: Recording) -> int:
    return sent.sent.count("POST /v1/approvals")


async def test_a_call_is_put_to_cosigner_before_the_server_hands_it_to_the_gateway(inprocess: Target) -> None:
    sent = Announcing()
    calls: list[tuple[str, dict[str, Any]]] = []
    before_handler: list[int] = []

    async def waits_for_the_ask(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        # Between the server's reading of a call and the gateway's handler. From the
        # second call on, Cosigner has been asked by then: this waits for that ask, which
        # only the handler would make otherwise (the test would then fail on the timeout).
        if ctx.method == "tools/call":
            while before_handler and asks(sent) <= len(before_handler):
                sent.asked.clear()
                await asyncio.wait_for(sent.asked.wait(), timeout=30)
            before_handler.append(asks(sent))
        return await call_next(ctx)

    async with gateway(inprocess.url, inprocess.acme, shop(calls), transport=sent) as gw:
        gw.server.middleware.append(waits_for_the_ask)
        async with Client(gw.server, mode="legacy") as agent:
            results = [await agent.call_tool("lookup_order", {"orderId": f"ord_{i}"}) for i in range(3)]
        await gw.drain()
    assert [r.content[0].text for r in results if isinstance(r.content[0], TextContent)] == [
        f"order ord_{i}: delivered" for i in range(3)
    ]
    # The first call was asked about by the handler; the next two before it ran. Each once.
    assert before_handler == [0, 2, 3] and asks(sent) == 3
    assert calls == [("lookup_order", {"orderId": f"ord_{i}"}) for i in range(3)]
    reports = [s for s in sent.sent if s.endswith("/result")]
    async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme) as c:
        texts = [
            results_of(await c.audit(r.split("/")[3]))[0]["result"]["content"][0]["text"] for r in reports
        ]
    assert sorted(texts) == [f"order ord_{i}: delivered" for i in range(3)]


async def test_an_early_ask_carries_the_agents_trace_context_as_the_handlers_does(inprocess: Target) -> None:
    sent = Announcing()
    async with gateway(inprocess.url, inprocess.acme, shop([]), transport=sent) as gw:
        async with Client(gw.server, mode="legacy") as agent:
            for span in ("00f067aa0ba902b7", "00f067aa0ba902b8"):  # handler's ask, then an early one
                meta: Any = {"traceparent": f"00-{TRACE_ID}-{span}-01"}
                await agent.call_tool("lookup_order", {"orderId": "ord_1"}, meta=meta)
    assert sent.traceparents == [
        f"00-{TRACE_ID}-00f067aa0ba902b7-01",
        f"00-{TRACE_ID}-00f067aa0ba902b8-01",
    ]


def call(request_id: int, params: dict[str, Any]) -> SessionMessage:
    return SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/call", params=params))


async def test_only_calls_the_handler_would_get_as_they_are_are_asked_about_early(inprocess: Target) -> None:
    sent = Announcing()
    async with gateway(inprocess.url, inprocess.acme, shop([]), transport=sent) as gw:
        connection = Connection(gw.ledger, gw._ask, "", {"lookup_order"}.__contains__)
        connection.read(call(1, {"name": "lookup_order", "arguments": {"orderId": "o1"}}))
        assert connection.version is None and not connection._asked  # no tools/call handled yet
        connection.version = VERSION
        for item in (
            call(2, {"name": "lookup_order", "arguments": {"orderId": "o1"}, "requestState": "sealed"}),
            call(3, {"name": "lookup_order", "arguments": ["not", "an", "object"]}),
            call(4, {"arguments": {"orderId": "o1"}}),  # no name
            call(9, {"name": "lookup_orders", "arguments": {"orderId": "o1"}}),  # not listed
            call(5, {"name": "lookup_order", "arguments": {"amount": 2**60}}),  # no canonical digest
            SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")),
            SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=6, method="tools/list")),
            ValueError("a line that was not JSON-RPC"),
        ):
            connection.read(item)
        assert not connection._asked and asks(sent) == 0
        connection.read(call(7, {"name": "lookup_order", "arguments": {"orderId": "o1"}}))
        connection.read(call(7, {"name": "lookup_order", "arguments": {"orderId": "o2"}}))  # id still open
        assert list(connection._asked) == [7]
        key = (connection.execution_id, "lookup_order", parameters_digest({"orderId": "o1"}))
        assert (
            connection.take(
                7, (connection.execution_id, "lookup_order", parameters_digest({"orderId": "o2"}))
            )
            is None
        )
        connection.read(call(8, {"name": "lookup_order", "arguments": {"orderId": "o1"}}))
        early = connection.take(8, key)
        assert early is not None and early.call.key == key
        decision = await early.answer
    assert decision.approved and decision.execution_id == connection.execution_id
    # Request 7 (taken with the wrong key: dropped) and 8 were the same call: one open call,
    # one tool call id, so Cosigner made one approval of both asks.
    assert asks(sent) == 2 and early.call.tool_call_id == decision.tool_call_id


async def test_a_refusal_to_an_early_ask_is_answered_as_the_handlers_own(inprocess: Target) -> None:
    sent = Announcing()
    calls: list[tuple[str, dict[str, Any]]] = []
    async with gateway(inprocess.url, inprocess.acme, shop(calls), transport=sent) as gw:
        async with Client(gw.server, mode="legacy") as agent:
            await agent.call_tool("lookup_order", {"orderId": "ord_1"})  # the connection is proven
            refused = await agent.call_tool("delete_account", {"accountId": "acc_1"})  # asked early
            again = await agent.call_tool("delete_account", {"accountId": "acc_1"})
    for result in (refused, again):
        assert result.is_error and isinstance(result.content[0], TextContent)
        assert result.content[0].text.startswith("PERMISSION_DENIED:")
    # A refused call leaves the ledger, so the identical call after it was asked about anew.
    assert calls == [("lookup_order", {"orderId": "ord_1"})] and asks(sent) == 3 and not gw.ledger._open


async def test_the_upstream_is_connected_with_the_handshake(inprocess: Target) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with upstream_client(shop(calls)) as upstream:
        assert upstream.protocol_version not in MODERN_PROTOCOL_VERSIONS
        result = await upstream.call_tool("lookup_order", {"orderId": "ord_1"})
    assert not result.is_error and calls == [("lookup_order", {"orderId": "ord_1"})]


async def test_an_upstream_that_refuses_the_handshake_is_connected_as_it_offers(inprocess: Target) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    upstream = shop(calls)
    handshakes: list[str] = []

    async def counted(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "initialize":
            handshakes.append(ctx.method)
        return await call_next(ctx)

    upstream._lowlevel_server.middleware += [counted, no_handshake]
    sent = Announcing()
    async with gateway(inprocess.url, inprocess.acme, upstream, transport=sent) as gw:
        assert gw.upstream.protocol_version in MODERN_PROTOCOL_VERSIONS
        async with Client(gw.server, mode="legacy") as agent:
            result = await agent.call_tool("lookup_order", {"orderId": "ord_1"})
    assert handshakes == ["initialize"] and not result.is_error
    assert calls == [("lookup_order", {"orderId": "ord_1"})] and asks(sent) == 1


async def test_over_stdio_too_an_upstream_that_refuses_the_handshake_is_connected_as_it_offers() -> None:
    script = UPSTREAM
    for args, modern in (([str(script)], False), ([str(script), "--no-handshake"], True)):
        async with upstream_client(StdioServerParameters(command=sys.executable, args=args)) as upstream:
            assert (upstream.protocol_version in MODERN_PROTOCOL_VERSIONS) is modern
            result = await upstream.call_tool("lookup_order", {"orderId": "ord_1"})
        assert not result.is_error and isinstance(result.content[0], TextContent)
        assert result.content[0].text.startswith("order ord_1 from pid")
