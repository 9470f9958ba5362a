"""The inbox's "Your standing allows": the standing allows the signed-in person granted with
"Allow for …" (on the dashboard, under any of their ids), until when and how often, each
with **Revoke**. A page and a form of their own, beside the inbox's other pages.

Revoke is a signed-in POST checked like every form of the inbox (session, CSRF token), and
revokes only a standing allow the person granted; anyone else's is not found. The next call
it covered is asked again, on every replica.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from bot.approvals import Allowances
from bot.inbox.people import tenants_of
from contracts.allowances import Allowance
from contracts.enums import SurfaceType
from contracts.errors import AllowanceNotFound

if TYPE_CHECKING:
    from bot.inbox.site import Inbox

PATH = "/allowances"


def allowance_routes(inbox: Inbox, allowances: Allowances) -> list[Route]:
    """The page and its Revoke form, mounted under `/inbox`."""

    async def listed(request: Request) -> Response:
        person = await inbox.who(request)
        if person is None:
            return RedirectResponse("/inbox/", status_code=303)
        found: list[Allowance] = []
        for tenant in tenants_of(inbox.policy, person):
            for own in person.ids:
                found += await allowances.allowances_of(tenant, SurfaceType.DASHBOARD, own)
        return inbox.page(request, "allowances.html", person=person, allowances=found)

    async def revoke(request: Request) -> Response:
        signed = await inbox.signed_form(request)
        if isinstance(signed, Response):
            return signed
        person, _ = signed
        allowance_id = request.path_params["allowance_id"]
        for tenant in tenants_of(inbox.policy, person):
            for own in person.ids:
                with contextlib.suppress(AllowanceNotFound):
                    await allowances.revoke_own(tenant, SurfaceType.DASHBOARD, own, allowance_id)
                    return RedirectResponse(f"/inbox{PATH}", status_code=303)
        return inbox.refused(request, person, f"no standing allow {allowance_id} that you may revoke", 404)

    return [
        Route(PATH, listed, methods=["GET"]),
        Route(PATH + "/{allowance_id}/revoke", revoke, methods=["POST"]),
    ]
