"""Inbound request bodies: read only up to a limit, and refused before any parser recurses.

Every route that takes a body reads it through `limited` (or `read_body`, `read_form`): past
the route's limit the read raises `BodyTooLarge` (`413 INVALID_REQUEST`, naming the limit)
and nothing more is read, so a body streamed without end costs at most the limit; a
declared `Content-Length` over it is refused before a byte is read. The 413 is sent at once;
uvicorn drops whatever of the body still arrives until the client stops sending or the
keep-alive timeout closes the connection (closing at once would reset it, and a client
still sending would lose the 413).

`too_deep` finds JSON nested past `MAX_DEPTH` from its text, without parsing it: Python's
`json` and pydantic recurse once per level and fail with `RecursionError` (a 500) some way
past 900 levels.

The API (`bot.http.decoding`), Slack, Teams, Twilio's webhooks, the inbox's forms and the
test clock all read through this one module; it lives in `surfaces/` so that both the
surfaces and `bot/` may import it.
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Any

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.types import Message

from contracts.errors import BodyTooLarge, InvalidRequest

__all__ = ["MAX_DEPTH", "limited", "read_body", "read_form", "refuse_deep", "too_deep", "too_deep_value"]

MAX_DEPTH = 64
"""The deepest JSON nesting any inbound body may have: Slack's and Teams' deepest payloads
are about 12 levels, and the API's parameters may nest 20 inside a few of their own."""

# A JSON string, escapes included, so that brackets inside strings are not counted.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256)]


def _declared(request: Request) -> int | None:
    length = request.headers.get("content-length")
    if length is None:
        return None
    # isascii: "²".isdigit() is True, and int("²") raises.
    if not (length.isascii() and length.isdigit()):
        raise InvalidRequest("Content-Length must be a whole number of bytes", field="body")
    return int(length)


def _too_large(limit: int, what: str) -> BodyTooLarge:
    return BodyTooLarge(
        f"{what}, over this route's limit of {limit} bytes; send a smaller body",
        field="body",
        limit=limit,
    )


def limited(request: Request, limit: int) -> Request:
    """`request`, its body readable (by `body()`, `form()`, `stream()`, or a library it is
    handed to) only up to `limit` bytes; reading past it, or any read when Content-Length
    declares more, raises `BodyTooLarge` before the chunk is kept."""
    seen = 0

    async def receive() -> Message:
        nonlocal seen
        declared = _declared(request)
        if declared is not None and declared > limit:
            raise _too_large(limit, f"Content-Length is {declared} bytes")
        message = await request.receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _too_large(limit, "the body is longer")
        return message

    return Request(request.scope, receive)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, at most `limit` bytes (else `BodyTooLarge`, having read no more)."""
    return await limited(request, limit).body()


async def read_form(request: Request, limit: int, *, max_fields: int) -> FormData:
    """The form fields of a body of at most `limit` bytes and `max_fields` fields (Starlette's
    own form limits, which it enforces for URL-encoded forms from 1.3.1); `BodyTooLarge` past
    the limit, `InvalidRequest` past the fields."""
    try:
        return await limited(request, limit).form(max_fields=max_fields, max_part_size=limit)
    except MultiPartException as exc:  # Starlette's form parser refusing (outside an app)
        raise InvalidRequest(f"the form is refused: {exc.message.rstrip('.')}", field="body") from exc
    except HTTPException as exc:  # the same, as the 400 it raises inside an app
        raise InvalidRequest(f"the form is refused: {str(exc.detail).rstrip('.')}", field="body") from exc


def too_deep(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """True when the JSON text `raw` nests arrays and objects more than `limit` deep, found
    without parsing (valid or not: text a parser would recurse into is counted as it would)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False  # fewer openings than the limit: the common case, at the cost of two counts
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def too_deep_value(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when a parsed JSON value nests more than `limit` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def refuse_deep(raw: bytes, what: str = "body", limit: int = MAX_DEPTH) -> None:
    """Raise `InvalidRequest` (field `what`) when `raw` nests deeper than `limit`."""
    if too_deep(raw, limit):
        raise InvalidRequest(
            f"the {what} nests arrays and objects more than {limit} levels deep; send it flatter",
            field=what,
        )
