"""Four eyes: a quorum of distinct approvers, and separation of duties.

`quorum = N` (per tool or operation, tenant overrides as for every key) asks N distinct
approvers to approve; one Deny vetoes. With `separate_duties` (the default when N > 1) the
person who triggered the run never counts. This module says who that person is on a route,
whom a route can ever count, and the policy problems of a quorum that could never be met:
a quorum on a handoff, or one larger than the approvers its route can reach. The count
itself is `bot.approvals.lifecycle.decide`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.policy.schema import TenantPolicy
from contracts.enums import ApproverKind, SurfaceType
from contracts.errors import ApprovalModeUnsupported
from contracts.ports import Route

PERSON_SURFACES = (
    SurfaceType.SLACK,
    SurfaceType.SMS,
    SurfaceType.WHATSAPP,
    SurfaceType.TEAMS,
    SurfaceType.DASHBOARD,
)


def requester_on(surface: Mapping[str, Any], on: SurfaceType) -> str | None:
    """The identity the requester answers with on surface `on`, as routes name approvers (a
    Slack or Teams user id, a phone number, `whatsapp:+E164`, a dashboard user); None when
    the run was triggered elsewhere or by no person."""
    if surface.get("type") != on.value:
        return None
    if on in (SurfaceType.SMS, SurfaceType.WHATSAPP):
        phone = surface.get("phone")
        if not phone:
            return None
        return f"whatsapp:{phone}" if on is SurfaceType.WHATSAPP else str(phone)
    user = surface.get("userId")
    return str(user) if user else None


def countable(route: Route, surface: Mapping[str, Any], separate_duties: bool) -> tuple[str, ...]:
    """The approvers of `route` whose Approve counts toward the quorum."""
    if not separate_duties:
        return route.approvers
    requester = requester_on(surface, route.surface)
    return tuple(a for a in route.approvers if a != requester)


def check_route(
    route: Route, surface: Mapping[str, Any], quorum: int, separate_duties: bool, path: str, tool: str
) -> ApprovalModeUnsupported | None:
    """Refuse (fail closed) a route on which the quorum can never be met."""
    if quorum <= 1 and not separate_duties:
        return None
    can = countable(route, surface, separate_duties)
    if len(can) >= quorum:
        return None
    apart = " besides the requester (separate_duties)" if separate_duties else ""
    return ApprovalModeUnsupported(
        f"{path} asks {quorum} distinct approvers, but this request's route ({route.surface}) has "
        f"{len(can)} approver{'s' if len(can) != 1 else ''}{apart}; list more approvers there or "
        "lower the quorum",
        policy=path,
        surface=route.surface.value,
        tool=tool,
    )


def reachable(
    approvers: tuple[ApproverKind, ...],
    tenant: TenantPolicy | None,
    staff: Mapping[SurfaceType, int],
    separate_duties: bool,
) -> tuple[int, SurfaceType | None]:
    """The most approvers one route of these kinds can ever count, and on which surface.

    A route lives on one surface and asks the approvers of every listed kind found there
    (`bot.policy.routing`); the requester counts once unless duties are separate."""
    best, where = 0, None
    for on in PERSON_SURFACES:
        n = 0
        for kind in approvers:
            if kind is ApproverKind.REQUESTER:
                n += 0 if separate_duties else 1
            elif kind is ApproverKind.TENANT_ADMINS and tenant is not None:
                n += len(admins_on(tenant, on))
            elif kind is ApproverKind.STAFF:
                n += staff.get(on, 0)
        if n > best:
            best, where = n, on
    return best, where


def admins_on(tenant: TenantPolicy, on: SurfaceType) -> tuple[str, ...]:
    """A tenant's admins who can answer on surface `on`."""
    a = tenant.admins
    return {
        SurfaceType.SLACK: a.slack,
        SurfaceType.SMS: a.sms,
        SurfaceType.DASHBOARD: a.dashboard,
        SurfaceType.TEAMS: a.teams,
    }.get(on, ())


def problem(
    path: str,
    quorum: int,
    approvers: tuple[ApproverKind, ...],
    tenant: TenantPolicy | None,
    staff: Mapping[SurfaceType, int],
    separate_duties: bool,
    handoff: str | None = None,
) -> str | None:
    """The policy problem of one effective rule's quorum, at its key path; None if it can be met."""
    if handoff is not None and quorum > 1:
        return (
            f"{path}: a quorum cannot be set on a handoff ({handoff}); a handoff is done by one "
            "person and checked by the application: remove quorum or the handoff section"
        )
    if quorum <= 1 and not separate_duties:
        return None
    most, _on = reachable(approvers, tenant, staff, separate_duties)
    if most >= quorum:
        return None
    who = ", ".join(k.value for k in approvers)
    whose = f" for tenant {tenant.name}" if tenant is not None and tenant.name else ""
    apart = " (the requester never counts: separate_duties)" if separate_duties else ""
    return (
        f"{path}: quorum {quorum} is more than the {most} distinct approver{'s' if most != 1 else ''} "
        f"that approvers = [{who}] can ever reach{whose}{apart}; list more approvers "
        f"(admins, [staff]) or lower quorum"
    )
