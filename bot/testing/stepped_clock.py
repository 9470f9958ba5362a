"""A clock that tests move from outside a real `cosigner serve` process; never on in production.

With `COSIGNER_TEST_CLOCK=<UNIX seconds>` (accepted only with a loopback `--host`), `serve`
runs on a `SteppedClock` that starts at that instant and stands still, and adds one route,
`POST /test/clock` with `{"advanceSeconds": N}`, that moves it forward and wakes the expiry
sweeper and the job worker, as `Harness.advance` does in-process. Replicas started with the
same instant and advanced by the same amounts share one time. Nothing on the serving path
imports this module (an import-linter contract says so); `serve` loads it only when the
setting is on.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot.http import parts_of
from contracts.errors import InvalidRequest
from surfaces.bodies import read_body

log = logging.getLogger("cosigner.clock")
LOOPBACK_NAMES = {"localhost"}
MAX_BODY = 1024  # `{"advanceSeconds": N}`


def is_loopback(host: str) -> bool:
    """Whether `host` (a --host value or a peer address) is this machine only."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class SteppedClock:
    """UNIX seconds that stand still until `advance` moves them forward."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move forward by `seconds` (never back) and return the new time."""
        self.now += seconds
        return self.now

    def routes(self) -> list[BaseRoute]:
        """`POST /test/clock`: move this process's clock and wake its sweeper and worker."""

        async def advance_route(request: Request) -> Response:
            peer = request.client.host if request.client else ""
            if not is_loopback(peer):
                return _refused(403, "the test clock answers loopback callers only")
            try:
                raw = await read_body(request, MAX_BODY)
            except InvalidRequest as exc:  # BodyTooLarge (413), or a malformed Content-Length
                return JSONResponse(exc.body(), status_code=exc.status)
            try:
                seconds = json.loads(raw)["advanceSeconds"]
            except (ValueError, KeyError, TypeError):
                return _refused(400, 'send {"advanceSeconds": N} with N a positive number')
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int | float)
                or not 0 < seconds < math.inf
            ):
                return _refused(400, "advanceSeconds must be a positive number; the clock never goes back")
            now = self.advance(float(seconds))
            parts_of(request.app).wakeups.all()
            log.warning(f"test clock advanced by {float(seconds)} s")
            return JSONResponse({"now": now})

        return [Route("/test/clock", advance_route, methods=["POST"])]


def _refused(status: int, message: str) -> Response:
    return JSONResponse(InvalidRequest(message).body(), status_code=status)
