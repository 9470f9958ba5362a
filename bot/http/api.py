"""The agent API as Starlette routes: JSON in, JSON out (from the wire models), errors with codes."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bot.approvals import Allowances, Denials, Engine, GrantSigner, Start, start_body
from bot.http import openapi
from bot.http.allowance_routes import allowance_handlers
from bot.http.decoding import decode_json, parse, read_body, validate
from bot.http.denial_routes import denial_handlers
from bot.http.hooks import hook_handler
from bot.http.openapi import AGENT_ONLY, ANY_SCOPE, Endpoint
from bot.http.tenants import TenantKeys
from bot.observability import Metrics, SpanName, Tracing
from bot.operations import Proposals
from contracts.answers import AdmitResponse, AuditEvent, AuditTrail, Jwks, ResultRecorded
from contracts.enums import KeyScope
from contracts.errors import ApprovalNotFound, CosignerError, InvalidRequest, WrongKeyScope
from contracts.wire import (
    APPROVAL_ID_PATTERN,
    AdmitRequest,
    ApprovalRequest,
    CancelRequest,
    DecisionRequest,
    OperationRequest,
    ResultReport,
)
from storage.audit import event_to_json

log = logging.getLogger("cosigner.api")
MAX_WAIT = 60
Handler = Callable[[Request], Awaitable[Response]]
_APPROVAL_ID = re.compile(APPROVAL_ID_PATTERN)
# Which key scopes each route takes: an agent asks, an approval app answers, both may read.


class JSON(JSONResponse):
    """Compact JSON responses."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode()


def answer(model: BaseModel, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    """An answer body serialised from its wire model, by pydantic's own JSON writer (the same
    compact UTF-8 bytes as `JSON`, without building a dict first)."""
    body = model.__pydantic_serializer__.to_json(model)
    return Response(body, status_code=status_code, headers=headers, media_type="application/json")


def error_response(exc: CosignerError) -> JSON:
    """The wire error body with its status."""
    return JSON(exc.body(), status_code=exc.status)


def approval_id(request: Request) -> str:
    """The path's approval id; one not of the form ids are made in cannot exist (and a NUL
    byte in it would be refused by PostgreSQL), so it is not found without a lookup."""
    value: str = request.path_params["approval_id"]
    if not _APPROVAL_ID.fullmatch(value):
        raise ApprovalNotFound(
            "no approval with this id; an approval id is apv_ and 20 letters, digits, - or _ "
            "as returned by POST /v1/approvals"
        )
    return value


def _object(raw: bytes) -> dict[str, Any]:
    """The body's top-level object, or {} (parse then says what is wrong with it)."""
    try:
        value = decode_json(raw)
    except CosignerError:
        return {}
    return value if isinstance(value, dict) else {}


def sse(event: str, model: BaseModel) -> str:
    """One server-sent event carrying a wire model."""
    return f"event: {event}\ndata: {model.model_dump_json()}\n\n"


class Api:
    """Routes for agents: create, admit, read, wait, stream, cancel, result, audit, decide."""

    def __init__(
        self,
        engine: Engine,
        keys: TenantKeys,
        proposals: Proposals,
        *,
        denials: Denials,
        metrics: Metrics,
        tracing: Tracing,
        signer: GrantSigner,
        allowances: Allowances,
    ) -> None:
        self.engine = engine
        self.allowances = allowances
        self.denials = denials
        self.metrics = metrics
        self.tracing = tracing
        self.signer = signer
        self.keys = keys
        self.proposals = proposals

    def routes(self) -> list[Route]:
        """The `/v1` routes: each entry of the route table (`bot.http.openapi`) with its handler.
        A new route is one line here (and its entry in `ENDPOINTS`, which a test holds to this)."""
        listed, lift = denial_handlers(self.denials, answer)
        allowances, revoke = allowance_handlers(self.allowances, answer)
        hook = hook_handler(self.engine, self._agent, answer, self.metrics.waiting.track_inprogress)
        return [
            self._route(openapi.CREATE, self.create),
            self._route(openapi.ADMIT, self.admit),
            self._route(openapi.GET, self.get),
            self._route(openapi.EVENTS, self.events),
            self._route(openapi.CANCEL, self.cancel),
            self._route(openapi.RESULT, self.result),
            self._route(openapi.AUDIT, self.audit),
            self._route(openapi.DECISION, self.decide),
            self._route(openapi.HOOK_CLAUDE_CODE, hook),
            self._route(openapi.KEYS, self.jwks),
            self._route(openapi.DENIALS, listed),
            self._route(openapi.DENIAL_LIFT, lift),
            self._route(openapi.ALLOWANCES, allowances),
            self._route(openapi.ALLOWANCE_REVOKE, revoke),
        ]

    def _route(self, endpoint: Endpoint, fn: Callable[[Request, str], Awaitable[Response]]) -> Route:
        """`fn` served at the endpoint's path and method, behind its key scopes."""
        scopes = endpoint.scopes or ANY_SCOPE
        handler = self._wrap(
            fn, endpoint.name, scopes, auth=bool(endpoint.scopes) and not endpoint.fails_closed
        )
        return Route(endpoint.path, handler, methods=[endpoint.method.upper()])

    def _wrap(
        self,
        fn: Callable[[Request, str], Awaitable[Response]],
        name: str,
        scopes: frozenset[KeyScope],
        auth: bool = True,
    ) -> Handler:
        metrics = self.metrics

        @functools.wraps(fn)
        async def handler(request: Request) -> Response:
            try:
                tenant = await self._tenant(request, name, scopes) if auth else ""
                with self.tracing.incoming(request.headers):
                    response = await fn(request, tenant)
            except CosignerError as exc:
                response = error_response(exc)
            metrics.request(request.method, name, response.status_code)
            return response

        return handler

    async def _tenant(self, request: Request, name: str, scopes: frozenset[KeyScope]) -> str:
        holder = await self.keys.resolve(request.headers.get("authorization"))
        if holder.scope not in scopes:
            (needs,) = scopes  # a route either scope may use never gets here
            raise WrongKeyScope(
                f"the {name} route needs an {needs.value} key and this is an "
                f"{holder.scope.value} key; make one with "
                f"`cosigner tenants key create {holder.tenant} --scope {needs.value}`",
                needs=needs.value,
                scope=holder.scope.value,
            )
        # The agent a Cedar policy names as principal (docs/cedar.md): the key's id.
        request.state.key_id = holder.key_id
        return holder.tenant

    async def _agent(self, request: Request) -> str:
        """The tenant of a route that checks its own agent key (a hook's)."""
        return await self._tenant(request, "hook", AGENT_ONLY)

    async def create(self, request: Request, tenant: str) -> Response:
        raw = await read_body(request)
        if b'"operation"' in raw and "operation" in _object(raw):
            operation = validate(raw, OperationRequest)
            status, body = await self.proposals.propose(tenant, operation, agent=request.state.key_id)
            return answer(body, status)
        req = validate(raw, ApprovalRequest)
        status, body = await self.engine.create(tenant, req, agent=request.state.key_id)
        return answer(body, status)

    async def admit(self, request: Request, tenant: str) -> Response:
        req = await parse(request, AdmitRequest)
        admit = self.engine.admit(tenant, req, agent=request.state.key_id)
        held = await self.tracing.run(None, SpanName.ADMIT, admit, execution_id=req.executionId)
        return answer(AdmitResponse(standingDenies=held))

    async def get(self, request: Request, tenant: str) -> Response:
        raw = request.query_params.get("wait")
        # isascii: "²".isdigit() is True, and int("²") would raise (a 500).
        if raw is not None and (not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_WAIT):
            raise InvalidRequest(f"wait must be a whole number of seconds from 0 to {MAX_WAIT}", field="wait")
        aid = approval_id(request)
        if raw is None:
            rec = await self.engine.record(aid, tenant)
        else:
            with self.metrics.waiting.track_inprogress():
                rec = await self.engine.wait(tenant, aid, int(raw))
        return answer(self.engine.body(rec))

    async def events(self, request: Request, tenant: str) -> Response:
        rec = await self.engine.record(approval_id(request), tenant)
        return StreamingResponse(
            self._stream(tenant, rec.id, start_body(rec)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _stream(self, tenant: str, aid: str, start: Start) -> AsyncIterator[str]:
        # The whole stream counts as one waiting connection, keep-alives included.
        with self.metrics.waiting.track_inprogress():
            yield sse(start.type, start)
            while True:
                rec = await self.engine.wait(tenant, aid, 15)
                if rec.settled:
                    yield sse("approval_decided", self.engine.decision(rec))
                    return
                yield ": keep-alive\n\n"
                await asyncio.sleep(0)

    async def cancel(self, request: Request, tenant: str) -> Response:
        aid = approval_id(request)
        await parse(request, CancelRequest, optional=True)
        rec = await self.engine.cancel(tenant, aid)
        return answer(self.engine.body(rec))

    async def result(self, request: Request, tenant: str) -> Response:
        aid = approval_id(request)
        report = await parse(request, ResultReport)
        recorded = await self.engine.report_result(tenant, aid, report)
        return answer(ResultRecorded(approvalId=recorded))

    async def audit(self, request: Request, tenant: str) -> Response:
        aid = approval_id(request)
        rows = await self.engine.audit_trail(tenant, aid)
        events = [AuditEvent.model_validate(event_to_json(r), strict=False) for r in rows]
        return answer(AuditTrail(approvalId=aid, events=events))

    async def decide(self, request: Request, tenant: str) -> Response:
        aid = approval_id(request)
        req = await parse(request, DecisionRequest)
        rec = await self.engine.closer.dashboard_decide(tenant, aid, req)
        return answer(self.engine.body(rec))

    async def jwks(self, request: Request, tenant: str) -> Response:
        keys = Jwks.model_validate(self.signer.jwks())
        return answer(keys, headers={"Cache-Control": "max-age=300"})
