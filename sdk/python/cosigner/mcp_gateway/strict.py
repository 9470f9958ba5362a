"""Refuse a JSON-RPC message that two JSON parsers could read differently.

What counts as ambiguous is `cosigner.strict_json`, the reader the server uses too. The
gateway checks a call against the policy as it parsed it, so a message like that is refused, never resolved by
picking one reading: it is answered with a JSON-RPC error (`-32600`, naming the fix) and
goes no further. Text that is not JSON is left to the `mcp` SDK, which drops it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, Protocol

from cosigner import strict_json

__all__ = ["GuardedLines", "guard_http", "refusal"]

INVALID_REQUEST = -32600


def refusal(text: str | bytes) -> dict[str, Any] | None:
    """The JSON-RPC error answering `text` if it is ambiguous JSON, else None."""
    reading = strict_json.read(text)
    if reading.error is not None:
        return None  # not JSON: the SDK's own parser refuses it
    if not reading.ambiguous:
        return None
    message = reading.value
    request_id = message.get("id") if isinstance(message, dict) and "id" not in reading.top_repeated else None
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": INVALID_REQUEST, "message": f"refused: {reading.problems[0]}"},
    }


class _Writer(Protocol):
    async def write(self, text: str, /) -> Any: ...
    async def flush(self) -> Any: ...


class GuardedLines:
    """The lines of `source` (what `stdio_server` reads) that are unambiguous; each other one
    is answered on `out` with `refusal`'s error and not passed on."""

    def __init__(self, source: Any, out: _Writer) -> None:
        self._source, self._out = source, out

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._source:
            refused = refusal(line)
            if refused is None:
                yield line
                continue
            await self._out.write(json.dumps(refused, separators=(",", ":")) + "\n")
            await self._out.flush()


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


MAX_BODY = 4 * 1024 * 1024
"""The largest POST body `guard_http` reads (the `mcp` SDK's own default limit)."""


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def guard_http(app: App, *, max_body: int = MAX_BODY) -> App:
    """`app` (the gateway's Streamable HTTP app) behind the same check: an ambiguous POST body
    is answered `400` with the JSON-RPC error and never reaches it. A body over `max_body`
    bytes is answered `413` unread; raise both limits together if you raise the SDK's."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await receive()
            if event["type"] == "http.disconnect":
                return
            chunk = event.get("body", b"")
            size += len(chunk)
            if size > max_body:
                error = {"code": INVALID_REQUEST, "message": f"refused: the body is over {max_body} bytes"}
                await _answer(send, 413, {"jsonrpc": "2.0", "id": None, "error": error})
                return
            chunks.append(chunk)
            if not event.get("more_body", False):
                break
        body = b"".join(chunks)
        refused = refusal(body)
        if refused is not None:
            await _answer(send, 400, refused)
            return
        replayed = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return guarded
