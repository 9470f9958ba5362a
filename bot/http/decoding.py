"""Request bodies: bounded, unambiguous JSON, validated strictly against a wire model.

Every JSON route reads its body through `parse` (or `read_body` and `decode_json`), so no
route can accept what another refuses: a body over `MAX_BODY` bytes (`413`, read no
further: `surfaces.bodies`), JSON nested deeper than `MAX_DEPTH` (refused before any parser
recurses), a key twice in one object (which value counts would depend on the parser), `NaN`
or `Infinity` (not JSON; they break canonical digests), or a value of the wrong JSON type.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from bot.policy import redact
from contracts.enums import SurfaceType
from contracts.errors import InvalidRequest
from cosigner import strict_json
from surfaces import bodies

MAX_BODY = 1024 * 1024
M = TypeVar("M", bound=BaseModel)


def _show_key(key: str) -> str:
    return f'the key "{redact(key[:64])}"'


def decode_json(raw: bytes) -> Any:
    """The JSON value of `raw`; raises InvalidRequest (field `body`) if it nests deeper than
    `surfaces.bodies.MAX_DEPTH` or is not plain JSON (`cosigner.strict_json`, the reader the
    MCP gateway uses too)."""
    bodies.refuse_deep(raw)
    reading = strict_json.read(raw, show_key=_show_key)
    if reading.ambiguous:
        raise InvalidRequest(reading.problems[0], field="body")
    exc = reading.error
    if exc is not None:
        # JSONDecodeError says where (never quoting input); other errors may quote bytes.
        where = (
            f" ({exc.msg} at line {exc.lineno} column {exc.colno})"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        raise InvalidRequest(
            f"body is not valid JSON{where}; send a JSON object as application/json", field="body"
        ) from exc
    return reading.value


def field_path(loc: tuple[Any, ...]) -> str:
    """`('surface', 'slack', 'teamId')` → `surface.teamId` (the union tag is not a field)."""
    tags = {t.value for t in SurfaceType}
    parts = [str(p) for i, p in enumerate(loc) if not (i > 0 and loc[i - 1] == "surface" and p in tags)]
    # A key the caller sent may hold NUL, which no error body may carry: it is written escaped.
    return ".".join(parts).replace("\x00", "\\u0000") or "body"


def problem(error: Any) -> dict[str, str]:
    """One pydantic error as `{field, message}`, quoting nothing the caller sent."""
    loc, message = tuple(error["loc"]), str(error["msg"])
    if error["type"] == "extra_forbidden" and loc:
        # The unknown key is input: keep it for spotting typos, but not if it looks like a key.
        loc = (*loc[:-1], redact(str(loc[-1])))
    elif error["type"] == "union_tag_invalid":
        # pydantic's message quotes the tag that was sent, which may be anything.
        loc = (*loc, "type")
        message = f"must be one of {error.get('ctx', {}).get('expected_tags', 'the known types')}"
    return {"field": field_path(loc), "message": message}


def validation_error(exc: ValidationError) -> InvalidRequest:
    """A pydantic error as INVALID_REQUEST naming every field and what to send instead."""
    problems = [problem(e) for e in exc.errors()]
    first = problems[0]
    return InvalidRequest(f"{first['field']}: {first['message']}", field=first["field"], problems=problems)


async def read_body(request: Request) -> bytes:
    """The raw body, read no further than MAX_BODY bytes (`BodyTooLarge`, a 413, past it)."""
    return await bodies.read_body(request, MAX_BODY)


async def parse(request: Request, model: type[M], *, optional: bool = False) -> M:
    """Read a bounded JSON body and validate it against `model` (an empty body is `{}`
    when `optional`)."""
    return validate(await read_body(request), model, optional=optional)


def validate(raw: bytes, model: type[M], *, optional: bool = False) -> M:
    """Validate a body already read (`read_body`) against `model`, as `parse` does."""
    if optional and not raw.strip():
        raw = b"{}"
    if not isinstance(decode_json(raw), dict):
        raise InvalidRequest("body must be a JSON object", field="body")
    try:
        # Validated from the text, not the decoded value: pydantic's JSON mode also refuses
        # lone surrogates, and reads datetimes and URLs as JSON strings.
        return model.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise InvalidRequest(
                "body is not valid JSON; send a JSON object as application/json", field="body"
            ) from exc
        raise validation_error(exc) from exc
