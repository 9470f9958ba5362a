"""The one reader of inbound bodies: a limit counted as the body arrives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.requests import Request
from starlette.types import Message

from contracts.errors import BodyTooLarge, InvalidRequest
from surfaces.bodies import read_body, read_form


def request(chunks: list[bytes], headers: dict[str, str] | None = None) -> tuple[Request, list[int]]:
    """A request whose body arrives in `chunks`, and the list of chunk sizes handed out."""
    handed: list[int] = []
    queue: Iterator[bytes] = iter(chunks)

    async def receive() -> Message:
        chunk = next(queue, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        handed.append(len(chunk))
        return {"type": "http.request", "body": chunk, "more_body": True}

    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request({"type": "http", "method": "POST", "headers": raw}, receive), handed


async def test_a_body_up_to_the_limit_is_read_whole() -> None:
    got, _ = request([b"a" * 5, b"b" * 5])
    assert await read_body(got, 10) == b"a" * 5 + b"b" * 5


async def test_reading_stops_at_the_first_chunk_past_the_limit() -> None:
    got, handed = request([b"x" * 4] * 1000)
    with pytest.raises(BodyTooLarge) as refused:
        await read_body(got, 10)
    assert handed == [4, 4, 4]  # the third crossed the limit and was not kept; no fourth was read
    assert refused.value.status == 413 and refused.value.details == {"field": "body", "limit": 10}
    assert "limit of 10 bytes" in refused.value.message


async def test_a_content_length_over_the_limit_is_refused_before_reading() -> None:
    got, handed = request([b"x"], {"Content-Length": "11"})
    with pytest.raises(BodyTooLarge, match="Content-Length is 11 bytes"):
        await read_body(got, 10)
    assert handed == []


@pytest.mark.parametrize("length", ["²", "-1", "1e3", ""])
async def test_a_malformed_content_length_is_a_bad_request(length: str) -> None:
    got, _ = request([b"x"], {"Content-Length": length})
    with pytest.raises(InvalidRequest) as refused:
        await read_body(got, 10)
    assert refused.value.status == 400


async def test_a_form_is_bounded_as_a_whole_and_in_fields() -> None:
    got, _ = request([b"a=1&b=2"], {"Content-Type": "application/x-www-form-urlencoded"})
    assert dict(await read_form(got, 100, max_fields=2)) == {"a": "1", "b": "2"}
    got, _ = request([b"a=1&b=2&c=3"], {"Content-Type": "application/x-www-form-urlencoded"})
    with pytest.raises(InvalidRequest, match="fields"):
        await read_form(got, 100, max_fields=2)
    # Separators alone make no field: only the byte limit stops them.
    got, handed = request([b"&" * 64] * 1000, {"Content-Type": "application/x-www-form-urlencoded"})
    with pytest.raises(BodyTooLarge):
        await read_form(got, 1000, max_fields=2)
    assert sum(handed) <= 1000 + 64
