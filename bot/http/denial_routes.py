"""`GET /v1/denials` and `DELETE /v1/denials/{denialId}`: a tenant's own app lists the standing
denies its approvers set and lifts them (tenant-scoped by the API key, like every route; an
approver key only: the agent whose calls a deny stops must not be able to lift it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from bot.approvals import Denials, to_wire
from contracts.denials import DenialList

Handler = Callable[[Request, str], Awaitable[Response]]


def denial_handlers(denials: Denials, reply: Callable[[BaseModel], Response]) -> tuple[Handler, Handler]:
    """The handlers of `openapi.DENIALS` and `openapi.DENIAL_LIFT` (which give them approver
    keys), answered through the API's `reply` (a body serialised from its published model)."""

    async def listed(request: Request, tenant: str) -> Response:
        found = await denials.listed(tenant)
        return reply(DenialList(denials=[to_wire(d) for d in found]))

    async def lift(request: Request, tenant: str) -> Response:
        actor = {"kind": "approver_app", "tenant": tenant}
        lifted = await denials.lift(tenant, request.path_params["denialId"], "api", actor)
        return reply(to_wire(lifted))

    return listed, lift
