"""What the app answers when a request fails: always an `ErrorBody` with a code in `ErrorCode`.

Starlette's own refusals (no such route, method not allowed) become `INVALID_REQUEST`; our
errors carry their own code and status; anything else is `INTERNAL`, logged by type only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from contracts.answers import ErrorBody
from contracts.enums import ErrorCode
from contracts.errors import CosignerError, InternalError

log = logging.getLogger("cosigner.app")


async def http_error(request: Request, exc: Exception) -> Response:
    """A route Starlette could not match, or a method the route does not take."""
    assert isinstance(exc, HTTPException)  # Starlette calls this for that type only
    message = (
        "no such route; see /openapi.json"
        if exc.status_code == 404
        else f"{exc.detail}; see /openapi.json for the methods each route takes"
    )
    body = ErrorBody.of(ErrorCode.INVALID_REQUEST, message, {})
    # A 405 carries `Allow` (RFC 9110): keep the headers Starlette set.
    return JSONResponse(body.dump(), status_code=exc.status_code, headers=exc.headers)


async def cosigner_error(request: Request, exc: Exception) -> Response:
    """One of ours: its code, message and status."""
    assert isinstance(exc, CosignerError)  # Starlette calls this for that type only
    return JSONResponse(exc.body(), status_code=exc.status)


async def server_error(request: Request, exc: Exception) -> Response:
    """A bug: nothing was decided, so the caller may retry."""
    # Log the type only: an exception message may quote request data.
    log.error("unhandled error", extra={"route": request.url.path, "code": type(exc).__name__})
    internal = InternalError("internal error; nothing was decided. Retry the request.")
    return JSONResponse(internal.body(), status_code=internal.status)


EXCEPTION_HANDLERS: Mapping[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    HTTPException: http_error,
    CosignerError: cosigner_error,
    Exception: server_error,
}
