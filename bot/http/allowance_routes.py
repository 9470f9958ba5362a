"""`GET /v1/allowances` and `DELETE /v1/allowances/{allowanceId}`: a tenant's own app lists the
standing allows its approvers gave ("Allow for …") and revokes them (tenant-scoped by the
API key, like every route; an approver key only: the agent whose calls an allowance lets
through must not be able to see or change it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from bot.approvals import Allowances, allowance_to_wire
from contracts.allowances import AllowanceList

Handler = Callable[[Request, str], Awaitable[Response]]


def allowance_handlers(
    allowances: Allowances, reply: Callable[[BaseModel], Response]
) -> tuple[Handler, Handler]:
    """The handlers of `GET /v1/allowances` and `DELETE /v1/allowances/{id}` (the route table,
    `bot.http.openapi`, gives them approver keys), answered through the API's `reply`."""

    async def listed(request: Request, tenant: str) -> Response:
        found = await allowances.listed(tenant)
        return reply(AllowanceList(allowances=[allowance_to_wire(a) for a in found]))

    async def revoke(request: Request, tenant: str) -> Response:
        actor = {"kind": "approver_app", "tenant": tenant}
        revoked = await allowances.revoke(tenant, request.path_params["allowanceId"], "api", actor)
        return reply(allowance_to_wire(revoked))

    return listed, revoke
