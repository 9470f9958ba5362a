"""Four eyes: a quorum of distinct approvers, and separation of duties.

`quorum = N` (per tool or operation, tenant overrides as for every key) asks N distinct
approvers to approve; one Deny vetoes. With `separate_duties` (the default when N > 1) the
person who triggered the run never counts. Approvers are counted as persons, not ids: a
person may hold several ids (`bot.policy.people`), and every id they hold is compared, on
every surface. This module says who the requester is, whether an answer's ids are the
requester's, whom a route can ever count, and the policy problems of a quorum that could
never be met: a quorum on a handoff, or one larger than the persons its route can reach.
The count itself is `bot.approvals.judging.judge`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.policy.people import NOBODY_TIED, People, Someone
from bot.policy.schema import TenantPolicy
from contracts.enums import ApproverKind, SurfaceType
from contracts.errors import ApprovalModeUnsupported
from contracts.ports import Route
from contracts.surfaces import SurfaceLike, surface_fields

PERSON_SURFACES = (
    SurfaceType.SLACK,
    SurfaceType.SMS,
    SurfaceType.WHATSAPP,
    SurfaceType.TEAMS,
    SurfaceType.DASHBOARD,
)


def requester_ids(surface: SurfaceLike) -> tuple[str, ...]:
    """The ids the run's surface names its requester by (a Slack or Teams user id, a phone
    number, a dashboard user), compared on whichever surface an answer comes from; none when
    the run was triggered by no person."""
    surface = surface_fields(surface)
    if surface.get("type") not in {s.value for s in PERSON_SURFACES}:
        return ()
    return tuple(str(i) for i in (surface.get("userId"), surface.get("phone")) if i)


def is_requester(surface: SurfaceLike, ids: Iterable[str], people: People = NOBODY_TIED) -> bool:
    """True when the person holding `ids` (an answer's) triggered the run started on `surface`."""
    return people.same(ids, requester_ids(surface))


def countable(
    route: Route, surface: Mapping[str, Any], separate_duties: bool, people: People = NOBODY_TIED
) -> tuple[Someone, ...]:
    """The distinct persons among the approvers of `route` whose Approve counts toward the quorum."""
    persons = people.distinct(route.approvers)
    if not separate_duties:
        return persons
    requester = requester_ids(surface)
    return tuple(p for p in persons if not people.same(p.ids, requester))


def check_route(
    route: Route,
    surface: Mapping[str, Any],
    quorum: int,
    separate_duties: bool,
    path: str,
    tool: str,
    people: People = NOBODY_TIED,
) -> ApprovalModeUnsupported | None:
    """Refuse (fail closed) a route on which the quorum can never be met by distinct persons."""
    if quorum <= 1 and not separate_duties:
        return None
    can = countable(route, surface, separate_duties, people)
    if len(can) >= quorum:
        return None
    apart = " besides the requester (separate_duties)" if separate_duties else ""
    who = f": {'; '.join(map(str, can))}" if can else ""
    return ApprovalModeUnsupported(
        f"{path} asks {quorum} distinct approvers for {tool}, but this request's route ({route.surface}) "
        f"has {len(can)} distinct approver{'s' if len(can) != 1 else ''}{apart}{who}; ids that "
        "[people] ties count as one person. List more approvers there or lower the quorum",
        policy=path,
        surface=route.surface.value,
        tool=tool,
    )


@dataclass(frozen=True)
class Reach:
    """The most approvers one route can ever count: the surface, the distinct persons the
    policy names there, and whether the requester counts besides them (duties not separate)."""

    on: SurfaceType | None
    persons: tuple[Someone, ...] = ()
    requester: bool = False

    @property
    def count(self) -> int:
        """How many distinct approvers that is."""
        return len(self.persons) + self.requester


def reachable(
    approvers: tuple[ApproverKind, ...],
    tenant: TenantPolicy | None,
    staff: Mapping[SurfaceType, tuple[str, ...]],
    separate_duties: bool,
    people: People = NOBODY_TIED,
) -> Reach:
    """The most distinct approvers one route of these kinds can ever count, and on which surface.

    A route lives on one surface and asks the approvers of every listed kind found there
    (`bot.policy.routing`); each person counts once, whichever of their ids are listed (an
    admin who is also staff, two ids `[people]` ties), and the requester counts once unless
    duties are separate."""
    best = Reach(None)
    for on in PERSON_SURFACES:
        ids: list[str] = []
        requester = False
        for kind in approvers:
            if kind is ApproverKind.REQUESTER:
                requester = not separate_duties
            elif kind is ApproverKind.TENANT_ADMINS and tenant is not None:
                ids += admins_on(tenant, on)
            elif kind is ApproverKind.STAFF:
                ids += staff.get(on, ())
            elif kind is ApproverKind.EMAIL and tenant is not None and on is SurfaceType.DASHBOARD:
                ids += tenant.admins.email
        here = Reach(on, people.distinct(ids), requester)
        if here.count > best.count:
            best = here
    return best


def admins_on(tenant: TenantPolicy, on: SurfaceType) -> tuple[str, ...]:
    """A tenant's admins who can answer on surface `on`."""
    a = tenant.admins
    return {
        SurfaceType.SLACK: a.slack,
        SurfaceType.SMS: a.sms,
        SurfaceType.WHATSAPP: a.whatsapp,
        SurfaceType.DASHBOARD: a.dashboard,
        SurfaceType.TEAMS: a.teams,
    }.get(on, ())


def problem(
    path: str,
    quorum: int,
    approvers: tuple[ApproverKind, ...],
    tenant: TenantPolicy | None,
    staff: Mapping[SurfaceType, tuple[str, ...]],
    separate_duties: bool,
    handoff: str | None = None,
    people: People = NOBODY_TIED,
    name: str = "",
) -> str | None:
    """The policy problem of one effective rule's quorum, at its key path; None if it can be
    met by distinct persons."""
    if handoff is not None and quorum > 1:
        return (
            f"{path}: a quorum cannot be set on a handoff ({handoff}); a handoff is done by one "
            "person and checked by the application: remove quorum or the handoff section"
        )
    if quorum <= 1 and not separate_duties:
        return None
    reach = reachable(approvers, tenant, staff, separate_duties, people)
    most = reach.count
    if most >= quorum:
        return None
    who = ", ".join(k.value for k in approvers)
    whose = f" for tenant {tenant.name}" if tenant is not None and tenant.name else ""
    apart = " (the requester never counts: separate_duties)" if separate_duties else ""
    named = [str(p) for p in reach.persons] + (["the requester"] if reach.requester else [])
    persons = f", on {reach.on.value}: {'; '.join(named)}" if reach.on is not None and named else ""
    tied = (
        " (ids that [people] ties are one person)"
        if any(p.name and len(p.ids) > 1 for p in reach.persons)
        else ""
    )
    never = f"{name} could never be approved: " if name else ""
    return (
        f"{path}: quorum {quorum} is more than the {most} distinct approver{'s' if most != 1 else ''} "
        f"that approvers = [{who}] can ever reach{whose}{apart}{persons}{tied}; {never}list more "
        "approvers (admins, [staff]) or lower quorum"
    )
