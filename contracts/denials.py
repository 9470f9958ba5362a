"""Standing denies: their wire models (from the agent SDK), the scope one covers, and the
narrow port a surface uses to let a person see and lift their own.

A standing deny covers exactly one `Scope`: a tool, in a tenant, for requests whose
approver set is one person and whose run that same requester triggered. It is offered only
where that scope exists (`scope_of`), so it can never deny on behalf of anyone else, and
it is matched by equality, so it never widens. The tool is held in its folded form
(`contracts.names.fold`): tool names match case-insensitively, so `Issue_credit` is the
same tool as `issue_credit` and cannot slip past a deny on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from contracts.enums import ApprovalMode, SurfaceType
from contracts.names import fold
from contracts.ports import Route
from contracts.surfaces import SurfaceLike, surface_fields
from cosigner.denials import DENIAL_ID_PATTERN, Denial, DenialApprover, DenialList

__all__ = [
    "DENIAL_ID_PATTERN",
    "PEOPLE_SURFACES",
    "Denial",
    "DenialApprover",
    "DenialDesk",
    "DenialList",
    "Scope",
    "requester_of",
    "scope_of",
]

PEOPLE_SURFACES = frozenset({SurfaceType.SLACK, SurfaceType.SMS, SurfaceType.DASHBOARD})


@dataclass(frozen=True)
class Scope:
    """What one standing deny covers; two requests share it only if every field is equal."""

    tenant: str
    tool_name: str  # folded: `issue_credit` for a call of `Issue_Credit` too
    surface: SurfaceType  # where the approver answers
    approver: str  # the one approver: Slack user id, E.164 number or the tenant app's user id
    requester: str  # the run's trigger: `slack:U1`, `sms:+1555…`, `dashboard:u_42`


def requester_of(surface: SurfaceLike) -> str | None:
    """The person who triggered a run (`slack:U1`), or None for headless runs: nobody to name."""
    surface = surface_fields(surface)
    kind = surface.get("type")
    ident = surface.get("userId") or surface.get("phone")
    if kind not in PEOPLE_SURFACES or not isinstance(ident, str) or not ident:
        return None
    return f"{kind}:{ident}"


def scope_of(
    tenant: str, tool_name: str, mode: ApprovalMode, route: Route | None, surface: SurfaceLike
) -> Scope | None:
    """The scope an Always deny on this request would cover, or None where it is not offered.

    Not offered when no person is asked (mode `none`, no route), when the approver set has
    more than one person (one of them must not deny for the others), or when the run has
    no identifiable requester (a scheduled or batch run: the deny would cover every such run).
    """
    if mode is ApprovalMode.NONE or route is None or len(route.approvers) != 1:
        return None
    requester = requester_of(surface)
    if requester is None:
        return None
    return Scope(tenant, fold(tool_name), SurfaceType(route.surface), route.approvers[0], requester)


@runtime_checkable
class DenialDesk(Protocol):
    """What a surface may do with standing denies: show a person theirs and lift one of them."""

    async def denials_of(self, tenant: str, surface: SurfaceType, person: str) -> Sequence[Denial]:
        """The standing denies in force that `person` set on `surface` in `tenant`."""
        ...

    async def lift_own(self, tenant: str, surface: SurfaceType, person: str, denial_id: str) -> Denial:
        """Lift a standing deny `person` set; `DenialNotFound` for any other (or none)."""
        ...
