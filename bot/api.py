"""The agent API of DESIGN.md as Starlette routes: JSON in, JSON out, errors with codes."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bot.bodies import decision_body, start_body
from bot.engine import Engine
from bot.redaction import redact
from bot.tenants import TenantKeys
from contracts.errors import CosignerError, InvalidRequest
from contracts.wire import AdmitRequest, ApprovalRequest, DecisionRequest, ResultReport
from storage.audit import event_to_json

log = logging.getLogger("cosigner.api")
MAX_BODY = 1024 * 1024
MAX_WAIT = 60
M = TypeVar("M", bound=BaseModel)
Handler = Callable[[Request], Awaitable[Response]]


class JSON(JSONResponse):
    """Compact JSON responses."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode()


def error_response(exc: CosignerError) -> JSON:
    """The wire error body with its status."""
    return JSON(exc.body(), status_code=exc.status)


def field_path(loc: tuple[Any, ...]) -> str:
    """`('surface', 'slack', 'teamId')` → `surface.teamId` (the union tag is not a field)."""
    tags = {"slack", "sms", "dashboard", "api", "schedule", "batch", "web_widget"}
    parts = [str(p) for i, p in enumerate(loc) if not (i > 0 and loc[i - 1] == "surface" and p in tags)]
    return ".".join(parts) or "body"


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


async def parse(request: Request, model: type[M]) -> M:
    """Read a bounded JSON body and validate it against `model`."""
    length = request.headers.get("content-length")
    if length is not None and length.isascii() and length.isdigit() and int(length) > MAX_BODY:
        raise InvalidRequest(f"body is {length} bytes; the limit is {MAX_BODY}", field="body")
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise InvalidRequest(f"body is over {MAX_BODY} bytes", field="body")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise InvalidRequest(
                f"body is not valid JSON ({first['msg']}); send a JSON object as application/json",
                field="body",
            ) from exc
        if first["type"] == "model_type" and not first["loc"]:
            raise InvalidRequest("body must be a JSON object", field="body") from exc
        raise validation_error(exc) from exc


class Api:
    """Routes for agents: create, admit, read, wait, stream, cancel, result, audit, decide."""

    def __init__(self, engine: Engine, keys: TenantKeys) -> None:
        self.engine = engine
        self.keys = keys

    def routes(self) -> list[Route]:
        """The `/v1` routes."""
        w = self._wrap
        return [
            Route("/v1/approvals", w(self.create, "create"), methods=["POST"]),
            Route("/v1/runs/admit", w(self.admit, "admit"), methods=["POST"]),
            Route("/v1/approvals/{approval_id}", w(self.get, "get"), methods=["GET"]),
            Route("/v1/approvals/{approval_id}/events", w(self.events, "events"), methods=["GET"]),
            Route("/v1/approvals/{approval_id}/cancel", w(self.cancel, "cancel"), methods=["POST"]),
            Route("/v1/approvals/{approval_id}/result", w(self.result, "result"), methods=["POST"]),
            Route("/v1/approvals/{approval_id}/audit", w(self.audit, "audit"), methods=["GET"]),
            Route("/v1/approvals/{approval_id}/decision", w(self.decide, "decision"), methods=["POST"]),
            Route("/v1/keys", w(self.jwks, "keys", auth=False), methods=["GET"]),
        ]

    def _wrap(
        self, fn: Callable[[Request, str], Awaitable[Response]], name: str, auth: bool = True
    ) -> Handler:
        metrics = self.engine.metrics.requests

        @functools.wraps(fn)
        async def handler(request: Request) -> Response:
            try:
                tenant = await self.keys.resolve(request.headers.get("authorization")) if auth else ""
                response = await fn(request, tenant)
            except CosignerError as exc:
                response = error_response(exc)
            metrics.labels(request.method, name, str(response.status_code)).inc()
            return response

        return handler

    async def create(self, request: Request, tenant: str) -> Response:
        req = await parse(request, ApprovalRequest)
        status, body = await self.engine.create(tenant, req)
        return JSON(body, status_code=status)

    async def admit(self, request: Request, tenant: str) -> Response:
        req = await parse(request, AdmitRequest)
        await self.engine.admit(tenant, req)
        return JSON({"admitted": True})

    async def get(self, request: Request, tenant: str) -> Response:
        approval_id = request.path_params["approval_id"]
        raw = request.query_params.get("wait")
        if raw is None:
            rec = await self.engine.record(approval_id, tenant)
        else:
            # isascii: "²".isdigit() is True, and int("²") would raise (a 500).
            if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_WAIT:
                raise InvalidRequest(
                    f"wait must be a whole number of seconds from 0 to {MAX_WAIT}", field="wait"
                )
            rec = await self.engine.wait(tenant, approval_id, int(raw))
        return JSON(self.engine.body(rec))

    async def events(self, request: Request, tenant: str) -> Response:
        approval_id = request.path_params["approval_id"]
        rec = await self.engine.record(approval_id, tenant)
        return StreamingResponse(
            self._stream(tenant, rec.id, start_body(rec)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _stream(self, tenant: str, approval_id: str, start: dict[str, Any]) -> AsyncIterator[str]:
        yield f"event: approval_start\ndata: {json.dumps(start)}\n\n"
        while True:
            rec = await self.engine.wait(tenant, approval_id, 15)
            if rec.closed:
                body = decision_body(rec, self.engine.signer, self.engine.grant_ttl)
                yield f"event: approval_decided\ndata: {json.dumps(body)}\n\n"
                return
            yield ": keep-alive\n\n"
            await asyncio.sleep(0)

    async def cancel(self, request: Request, tenant: str) -> Response:
        rec = await self.engine.cancel(tenant, request.path_params["approval_id"])
        return JSON(self.engine.body(rec))

    async def result(self, request: Request, tenant: str) -> Response:
        report = await parse(request, ResultReport)
        rec = await self.engine.report_result(tenant, request.path_params["approval_id"], report)
        return JSON({"approvalId": rec.id, "recorded": True})

    async def audit(self, request: Request, tenant: str) -> Response:
        approval_id = request.path_params["approval_id"]
        rows = await self.engine.audit_trail(tenant, approval_id)
        return JSON({"approvalId": approval_id, "events": [event_to_json(r) for r in rows]})

    async def decide(self, request: Request, tenant: str) -> Response:
        req = await parse(request, DecisionRequest)
        rec = await self.engine.dashboard_decide(tenant, request.path_params["approval_id"], req)
        return JSON(self.engine.body(rec))

    async def jwks(self, request: Request, tenant: str) -> Response:
        return JSON(self.engine.signer.jwks(), headers={"Cache-Control": "max-age=300"})
