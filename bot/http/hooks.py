"""`POST /v1/hooks/claude-code`: Claude Code's `http` PreToolUse hook, answered by Cosigner.

The body is the hook's JSON; the surface where the person is asked comes in the
`Cosigner-Surface` header, written as for the MCP gateway (`slack:TEAM/CHANNEL/USER`,
`sms:+15550100200`, `dashboard:USER_ID`), and the agent key as for every agent route. The
call is asked with the session as the execution and the tool use as the call, then the
route long-polls up to `?wait=N` seconds (default 50, at most 590) and answers the hook's
JSON. It fails closed: every error, a bad key or body included, is answered `200` with a
`deny` naming the problem, because Claude Code runs the tool after a hook that fails with
an error status unless the hook is set to block on failure. A request still pending when
the wait ends is withdrawn (cancelled), so that nobody approves a call that did not run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from bot.approvals import Engine
from bot.http.decoding import read_body, validation_error
from contracts.answers import Decision
from contracts.errors import AlreadyDecided, CosignerError, InvalidRequest
from contracts.hooks import answer_of
from contracts.wire import ApprovalRequest
from cosigner.hooks.event import Agent, BadHookInput, ToolUse, read_tool_use
from cosigner.hooks.verdict import Verdict, deny, verdict_of
from cosigner.mcp_gateway.surface_spec import SurfaceSpecError, parse_surface

__all__ = ["DEFAULT_WAIT", "MAX_WAIT", "SURFACE_HEADER", "ClaudeCodeHook", "hook_handler"]

log = logging.getLogger("cosigner.hooks")
SURFACE_HEADER = "Cosigner-Surface"
DEFAULT_WAIT = 50
MAX_WAIT = 590  # under the 600 s Claude Code gives a hook by default
Handler = Callable[[Request, str], Awaitable[Response]]


def verdict_of_decision(decision: Decision) -> Verdict:
    """The hook's answer for a decision object."""
    by = decision.decidedBy
    return verdict_of(
        status=decision.status.value,
        decider=by.kind,
        user_id=getattr(by, "userId", None),
        surface=getattr(by, "surface", None),
        rule=getattr(by, "rule", None),
        comment=decision.comment,
    )


class ClaudeCodeHook:
    """The route's handler: read, ask, wait, answer; a deny for anything that goes wrong."""

    def __init__(
        self,
        engine: Engine,
        tenant_of: Callable[[Request], Awaitable[str]],
        answer: Callable[[BaseModel], Response],
        waiting: Callable[[], AbstractContextManager[object]],
    ) -> None:
        self.engine = engine
        self.tenant_of = tenant_of
        self.answer = answer
        self.waiting = waiting  # counts the long-poll among the waiting connections

    async def __call__(self, request: Request, _tenant: str) -> Response:
        try:
            verdict = await self._verdict(request)
        except CosignerError as exc:
            verdict = deny(f"Cosigner refused the call ({exc.code}): {exc.message}")
        except Exception:
            log.exception("the Claude Code hook failed; answered deny")
            verdict = deny("Cosigner failed to decide (an internal error, in its log); the call was not run")
        return self.answer(answer_of(verdict))

    async def _verdict(self, request: Request) -> Verdict:
        tenant = await self.tenant_of(request)
        wait = _wait(request)
        raw = await read_body(request)
        try:
            use = read_tool_use(raw, Agent.CLAUDE_CODE)
        except BadHookInput as exc:
            return deny(f"Cosigner refused the hook's input: {exc}")
        spec = request.headers.get(SURFACE_HEADER)
        if not spec:
            return deny(
                f"the {SURFACE_HEADER} header is missing: add it to the hook's headers, e.g. "
                '"slack:T0ACME/D0ALICE/U0ALICE", to say where the person is asked'
            )
        try:
            surface = parse_surface(spec)
        except SurfaceSpecError as exc:
            return deny(f"the {SURFACE_HEADER} header: {exc}".replace("--surface ", ""))
        _, body = await self.engine.create(tenant, _request(use, surface.to_json()))
        if isinstance(body, Decision):
            return verdict_of_decision(body)
        if body.type != "approval_start":
            return deny(f"{use.tool_name} is a handoff (a step a person does), which a hook cannot wait for")
        aid = body.approvalId
        with self.waiting():
            settled = self.engine.body(await self.engine.wait(tenant, aid, wait))
        if isinstance(settled, Decision):
            return verdict_of_decision(settled)
        try:
            withdrawn = self.engine.body(await self.engine.cancel(tenant, aid))
        except AlreadyDecided:
            withdrawn = self.engine.body(await self.engine.record(aid, tenant))
        if isinstance(withdrawn, Decision) and withdrawn.status.value != "cancelled":
            return verdict_of_decision(withdrawn)
        return deny(
            f"no answer in Cosigner within {wait} s, so the request was withdrawn and the call not run; "
            "raise ?wait= (and the hook's timeout) to give the person longer"
        )


def _request(use: ToolUse, surface: dict[str, object]) -> ApprovalRequest:
    try:
        return ApprovalRequest.model_validate(
            {
                "executionId": use.session_id,
                "toolCallId": use.tool_use_id,
                "toolName": use.tool_name,
                "parameters": use.tool_input,
                "reason": use.reason(),
                "surface": surface,
            }
        )
    except ValidationError as exc:
        raise validation_error(exc) from exc


def _wait(request: Request) -> int:
    raw = request.query_params.get("wait")
    if raw is None:
        return DEFAULT_WAIT
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_WAIT:
        raise InvalidRequest(f"wait must be a whole number of seconds from 0 to {MAX_WAIT}", field="wait")
    return int(raw)


def hook_handler(
    engine: Engine,
    tenant_of: Callable[[Request], Awaitable[str]],
    answer: Callable[[BaseModel], Response],
    waiting: Callable[[], AbstractContextManager[object]],
) -> Handler:
    """The handler of `POST /v1/hooks/claude-code`."""
    return ClaudeCodeHook(engine, tenant_of, answer, waiting)
