"""A tools/call sent to Cosigner as soon as it is read, while the MCP server dispatches it.

Between reading a request off its stream and calling the gateway's handler, the `mcp`
server validates the request against the connection's protocol version, starts a task for
it and runs its middleware. Cosigner's answer takes longer still, in another process. So on
the connections the gateway serves through `Server.run` (stdio, and in-process clients in
`mode="legacy"`), each tools/call is put to Cosigner as the server reads it, and the
handler, when it runs, takes that answer instead of asking again: the policy's work and
the server's dispatch overlap.

What keeps it as safe as asking from the handler:

- Nothing reaches the upstream any sooner: the handler still waits for Cosigner's answer,
  checks the grant, then calls the upstream.
- A call is asked about early only on a connection one of whose tools/calls has reached
  the handler already (initialized, its protocol version known), only when the same parse
  the handler's parameters get (`mcp_types.methods.parse_client_request`) accepts it, and
  never with a multi-round-trip state (whose seal the server's middleware checks first).
- The handler takes the early answer only for the same execution, tool and arguments.
- An early ask whose request then never reaches the handler (say the client cancelled it
  first) leaves what a client that asked and went away leaves: the open call, to which an
  identical re-call attaches.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCRequest, RequestId
from mcp_types.methods import parse_client_request
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from cosigner import Decision, parameters_digest
from cosigner.mcp_gateway.ledger import CallKey, Ledger, OpenCall

__all__ = ["Connection", "EarlyAsk", "GatewayServer"]

FORGET_SECONDS = 60.0
"""How long an early answer no handler took is kept before it is dropped."""

Ask = Callable[[OpenCall, str, dict[str, Any]], Awaitable[Decision]]
"""Put one call to Cosigner: (open call, tool name for the policy, arguments) -> decision."""


@dataclass(frozen=True)
class EarlyAsk:
    """A call put to Cosigner as it was read: the open call and Cosigner's answer to come."""

    key: CallKey
    call: OpenCall
    answer: asyncio.Future[Decision]


class Connection:
    """One connection's execution id and the tools/calls asked about as they were read."""

    def __init__(self, ledger: Ledger, ask: Ask, tool_prefix: str, lists: Callable[[str], bool]) -> None:
        self.execution_id = f"mcp-{uuid.uuid4().hex}"
        self.version: str | None = None
        """The protocol version of the connection's first tools/call to reach the handler;
        until then nothing is asked early."""
        self._ledger = ledger
        self._ask = ask
        self._prefix = tool_prefix
        self._lists = lists
        """Whether the upstream is known to list a tool name: others wait for the handler."""
        self._asked: dict[RequestId, EarlyAsk] = {}
        self.session: ServerSession | None = None
        """A session of this connection's (its last tools/list): notifications reach the client
        through it."""

    def read(self, item: SessionMessage | Exception) -> None:
        """Put `item` to Cosigner now if it is a tools/call the handler will get as it is."""
        if self.version is None or not isinstance(item, SessionMessage):
            return
        request = item.message
        if not isinstance(request, JSONRPCRequest) or request.method != "tools/call":
            return
        raw = request.params or {}
        if request.id in self._asked or raw.get("requestState") is not None or raw.get("inputResponses"):
            return
        try:
            params = parse_client_request("tools/call", self.version, raw).params
            if not self._lists(params.name):
                return  # perhaps no such tool: the handler looks it up before anyone is asked
            arguments: dict[str, Any] = params.arguments or {}
            key = (self.execution_id, self._prefix + params.name, parameters_digest(arguments))
        except Exception:  # the server or the handler answers it, as without an early ask
            return
        call = self._ledger.attach(key)
        answer = asyncio.ensure_future(self._asked_in(_trace_of(raw), call, key[1], arguments))
        early = EarlyAsk(key, call, answer)
        self._asked[request.id] = early
        answer.add_done_callback(lambda done: self._settled(request.id, early, done))

    def take(self, request_id: RequestId | None, key: CallKey) -> EarlyAsk | None:
        """The early ask of this request, if it was made for exactly `key`."""
        early = self._asked.pop(request_id, None) if request_id is not None else None
        return early if early is not None and early.key == key else None

    async def _asked_in(
        self, trace_context: otel_context.Context | None, call: OpenCall, tool: str, arguments: dict[str, Any]
    ) -> Decision:
        # Under the agent's trace context from the request's `_meta`, as the handler's ask
        # would be (its server span is not open yet).
        token = otel_context.attach(trace_context) if trace_context is not None else None
        try:
            return await self._ask(call, tool, arguments)
        finally:
            if token is not None:
                otel_context.detach(token)

    def _settled(self, request_id: RequestId, early: EarlyAsk, done: asyncio.Future[Decision]) -> None:
        if not done.cancelled():
            done.exception()  # retrieved: a handler that takes it raises it again
        if self._asked.get(request_id) is early:  # answered before its handler ran (or never will)
            asyncio.get_running_loop().call_later(FORGET_SECONDS, self._forget, request_id, early)

    def _forget(self, request_id: RequestId, early: EarlyAsk) -> None:
        if self._asked.get(request_id) is early:
            del self._asked[request_id]


_CONNECTION: ContextVar[Connection | None] = ContextVar("cosigner_mcp_connection", default=None)


def current_connection() -> Connection | None:
    """The connection `GatewayServer.run` is serving in this context; None where the server
    reads no stream of its own (Streamable HTTP, in-process 2026-07-28 clients)."""
    return _CONNECTION.get()


class GatewayServer(Server[dict[str, Any]]):
    """The `mcp` low-level server, whose `run` (stdio, in-process legacy) reads tools/calls early."""

    def __init__(
        self, *args: Any, connect: Callable[[], Connection], tools_change: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._connect = connect
        self._tools_change = tools_change

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        """The server's options; with `tools_change` it declares `tools.listChanged` (tools held
        for an approval are offered once it is given, and the clients are told)."""
        if notification_options is None and self._tools_change:
            notification_options = NotificationOptions(tools_changed=True)
        return super().create_initialization_options(
            notification_options, experimental_capabilities, extensions
        )

    async def run(
        self,
        read_stream: Any,
        write_stream: Any,
        initialization_options: InitializationOptions,
        raise_exceptions: bool = False,
    ) -> None:
        connection = self._connect()
        token = _CONNECTION.set(connection)  # the lifespan, entered inside, picks it up
        try:
            await super().run(
                Peeking(read_stream, connection.read), write_stream, initialization_options, raise_exceptions
            )
        finally:
            _CONNECTION.reset(token)


class Peeking:
    """A read stream that shows each item to `seen` as it passes."""

    def __init__(self, inner: Any, seen: Callable[[SessionMessage | Exception], None]) -> None:
        # `inner` is a stream of the `mcp` SDK's ReadStream protocol (not exported by it).
        self._inner = inner
        self._seen = seen

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item, where the stream keeps it (`mcp` reads it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        item: SessionMessage | Exception = await self._inner.receive()
        self._seen(item)
        return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        item: SessionMessage | Exception = await self._inner.__anext__()
        self._seen(item)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        exited: bool | None = await self._inner.__aexit__(exc_type, exc_val, exc_tb)
        return exited


def _trace_of(params: dict[str, Any]) -> otel_context.Context | None:
    """The W3C trace context in a request's `_meta`, if it holds a valid one."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or "traceparent" not in meta:
        return None
    try:
        extracted = propagate.extract(meta)
    except (ValueError, TypeError):
        return None
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None
