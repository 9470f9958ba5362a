"""The gateway's open calls: one per session, tool and arguments, run at most once.

An MCP client cannot hold a call open for the minutes a person takes, so the gateway
answers a pending call at once and expects the same call again. The ledger is what makes
"the same call" one thing: a re-call with the same tool and arguments in the same session
finds the open call (its tool call id, hence the same approval), and once approved the
upstream runs once however many re-calls race; every one of them gets that one result.
When the call has run, or was refused, it leaves the ledger, so an identical call after
that is a new request.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from mcp.types import CallToolResult

__all__ = ["CallKey", "Ledger", "OpenCall"]

CallKey = tuple[str, str, str]
"""(execution id, tool name as the policy sees it, parameters digest)."""


@dataclass
class OpenCall:
    """A tool call that has been asked about and has not run or been refused yet."""

    key: CallKey
    tool_call_id: str
    approval_id: str | None = None
    elicited: bool = False
    """Whether the person at the client was sent to the inbox for it (once per call)."""
    result: asyncio.Future[CallToolResult] | None = field(default=None, repr=False)
    """The one run of the upstream call, once approved."""


class Ledger:
    """The open calls of every session this gateway serves."""

    def __init__(self) -> None:
        self._open: dict[CallKey, OpenCall] = {}

    def attach(self, key: CallKey, tool_call_id: str | None = None) -> OpenCall:
        """The open call for `key`, or a new one (with `tool_call_id`, else a fresh id)."""
        call = self._open.get(key)
        if call is not None and (tool_call_id is None or call.tool_call_id == tool_call_id):
            return call
        fresh = OpenCall(key, tool_call_id or f"mcp-{uuid.uuid4().hex}")
        # A resumed call whose key is held by a newer call keeps its own id and stays out of
        # the ledger: Cosigner's idempotency still maps that id to its own approval.
        if call is None:
            self._open[key] = fresh
        return fresh

    def close(self, call: OpenCall) -> None:
        """Forget `call`: the next identical call asks again."""
        if self._open.get(call.key) is call:
            del self._open[call.key]

    def pending_approvals(self) -> list[str]:
        """The approval ids of the open calls that are waiting for a person."""
        return [c.approval_id for c in self._open.values() if c.approval_id and c.result is None]

    async def run_once(self, call: OpenCall, run: Callable[[], Awaitable[CallToolResult]]) -> CallToolResult:
        """Run `call` unless it already runs or ran; every caller gets the one result.

        The run is a task of its own, so a caller that goes away (a client timeout) does not
        stop an upstream call half-way: it completes, and its result is still reported.
        """
        if call.result is None:
            # No await between the check and the assignment: of racing callers on this
            # event loop exactly one starts the run.
            call.result = asyncio.ensure_future(run())
            call.result.add_done_callback(lambda _: self.close(call))
        return await asyncio.shield(call.result)
