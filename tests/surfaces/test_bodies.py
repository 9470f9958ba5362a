"""The one reader of inbound bodies: a limit counted as the body arrives, JSON depth from text."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.requests import Request
from starlette.types import Message

from contracts.errors import BodyTooLarge, InvalidRequest
from surfaces.bodies import MAX_DEPTH, read_body, read_form, refuse_deep, too_deep, too_deep_value


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


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        ("[" * MAX_DEPTH + "]" * MAX_DEPTH, False),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), True),
        ('{"a": ' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1), True),
        (json.dumps(["[" * 500, "{" * 500]), False),  # brackets inside strings
        (json.dumps({'k"[[': '\\"' + "[" * 100}), False),  # escaped quotes
        ("[" * 10 + "]" * 10 + "," + "[" * 60 + "]" * 60, False),  # many, but side by side
        ('"' + "[" * 100, True),  # no closing quote: a parser would recurse into the rest
        ("[" * 5000, True),  # invalid, and deep before it is invalid
    ],
)
def test_depth_is_found_from_the_text(text: str, deep: bool) -> None:
    assert too_deep(text.encode()) is deep


def test_a_parsed_value_is_measured_the_same_way() -> None:
    fits = json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert not too_deep_value(fits) and too_deep_value([fits]) and not too_deep_value("[[[")


def test_refusing_depth_names_the_field_and_the_limit() -> None:
    with pytest.raises(InvalidRequest) as refused:
        refuse_deep(b"[" * 100, "payload")
    assert refused.value.details == {"field": "payload"} and f"{MAX_DEPTH} levels" in refused.value.message
