"""The gateway's connection to its upstream MCP server, opened as cheaply as the server allows.

`upstream_client(target)` takes whatever `mcp.Client` takes (a URL, `StdioServerParameters`,
an in-process server) and raises `UpstreamUnavailable`, saying why, for one that cannot be
started, reached or connected to.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from mcp import Client, MCPError
from mcp.types import CONNECTION_CLOSED

__all__ = ["UpstreamUnavailable", "upstream_client"]

log = logging.getLogger("cosigner.mcp_gateway")


@asynccontextmanager
async def upstream_client(target: Any) -> AsyncIterator[Client]:
    """An `mcp.Client` of the upstream `target` (what `mcp.Client` takes), as the gateway uses it.

    It opens with the initialize handshake (protocol 2025-11-25 and before), which every MCP
    server speaks but one that keeps only the 2026-07-28 revision: over one long-lived
    connection its calls cost less than 2026-07-28's per-request envelopes, each with the
    client's capabilities, validated on both sides (about 0.35 ms a call over stdio). A
    server that refuses the handshake is connected to again, in the revision it offers; one
    that hangs up or cannot be reached is not tried again (`UpstreamUnavailable`, saying why).
    """
    async with AsyncExitStack() as stack:
        client: Client | None = None
        try:
            client = await stack.enter_async_context(Client(target, mode="legacy"))
        except Exception as exc:  # the SDK's task groups wrap the server's answer in groups
            refusals = [e for e in _leaves(exc) if isinstance(e, MCPError) and e.code != CONNECTION_CLOSED]
            if not refusals:
                raise UpstreamUnavailable(_reason(exc)) from exc
            log.info(
                "the upstream refused the initialize handshake (%s); connecting as it offers", refusals[0]
            )
        if client is None:
            try:
                client = await stack.enter_async_context(Client(target))
            except Exception as exc:
                raise UpstreamUnavailable(_reason(exc)) from exc
        yield client


class UpstreamUnavailable(Exception):
    """The upstream MCP server could not be started, reached or connected to; the text says why."""


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside `exc`'s (nested) exception groups, or `exc` itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _reason(exc: BaseException) -> str:
    """Why connecting failed, in one line: the innermost causes, not the task groups around them."""
    reasons: list[str] = []
    for leaf in _leaves(exc):
        if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
            text = "it hung up before the handshake ended (an upstream command that exited prints why above)"
        else:
            text = str(leaf) or type(leaf).__name__
        if text not in reasons:
            reasons.append(text)
    return "; ".join(reasons)
