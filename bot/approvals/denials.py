"""Standing denies, the engine side: set one while denying a request, refuse the requests it
covers, report it to admission, list and lift them.

Setting one is part of the same closing transaction as the deny it comes with
(`Closing.also`), after the same checks as Approve and Deny (`bot.approvals.answerers.check_answer`,
`check_dashboard`) and the scope check here. A request it covers is stored denied at
intake, never routed and never shown, and answered `403 PERMISSION_DENIED` naming it.
A standing deny only ever denies: nothing here can approve.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bot.approvals.lifecycle import new_id
from contracts.answers import PolicyDecider
from contracts.audit_events import StandingDenyLifted, StandingDenySet, written
from contracts.denials import Denial, DenialApprover, Scope, scope_of
from contracts.enums import ApprovalMode, ApprovalStatus, AuditEvent, SurfaceType
from contracts.errors import (
    ApprovalModeUnsupported,
    DenialNotFound,
    InvalidRequest,
    NotAnApprover,
    PermissionDenied,
)
from contracts.ports import Route
from contracts.surfaces import SurfaceLike
from storage import denials as denial_store
from storage import ledger
from storage.audit import Event
from storage.database import Database
from storage.denials import StandingDeny
from storage.record_columns import iso, ts
from storage.records import Record
from storage.work import Work

log = logging.getLogger("cosigner.denials")
RULE_PREFIX = "standing deny "
_RULE = re.compile(r"^standing deny (den_[A-Za-z0-9_-]{20})(?: |$)")
LIFT_HOW = "lift it with DELETE /v1/denials/{id}, `/cosigner` in Slack, or `cosigner denials lift {id}`"
Check = Callable[[Record], None]
Step = Callable[[Work, Record, float], list[Event]]
_ID = re.compile(r"den_[A-Za-z0-9_-]{20}")


def to_wire(d: StandingDeny) -> Denial:
    """A stored standing deny as its wire model."""
    surface = d.scope.surface.value
    return Denial(
        denialId=d.id,
        toolName=d.scope.tool_name,
        approver=DenialApprover(
            surface=surface,  # type: ignore[arg-type]  # only people's surfaces are stored
            userId=d.scope.approver,
            teamId=d.approver_team if d.scope.surface is SurfaceType.SLACK else None,
        ),
        requester=d.scope.requester,
        setAt=ts(d.created_at),
        approvalId=d.approval_id,
        liftedAt=ts(d.lifted_at) if d.lifted_at is not None else None,
        liftedBy=d.lifted_by,
    )


def setter(d: StandingDeny) -> str:
    """Who set it, as messages name a person: `slack:U1`."""
    return f"{d.scope.surface.value}:{d.scope.approver}"


def refusal(d: StandingDeny, approval_id: str | None = None) -> PermissionDenied:
    """The 403 for a request a standing deny covers: who set it and when, and how to lift it."""
    details: dict[str, Any] = {"denial": to_wire(d)}
    if approval_id is not None:
        details["approvalId"] = approval_id
    log.info(
        "request refused by standing deny %s",
        d.id,
        extra={"approval_id": approval_id, "tenant": d.scope.tenant, "tool": d.scope.tool_name},
    )
    then = (
        f"It was lifted since ({iso(d.lifted_at)}): a call with a new toolCallId is asked again."
        if d.lifted_at is not None
        else "Tell the user; to be asked again, " + LIFT_HOW.format(id=d.id) + "."
    )
    return PermissionDenied(
        f"{setter(d)} set a standing deny on {d.scope.tool_name} for runs of {d.scope.requester} "
        f"that they approve ({d.id}, {iso(d.created_at)}); it is refused without asking. {then}",
        **details,
    )


def decider(d: StandingDeny) -> PolicyDecider:
    """How a request refused by a standing deny shows who decided it."""
    return PolicyDecider(rule=f"{RULE_PREFIX}{d.id} (set by {setter(d)} at {iso(d.created_at)})")


def denial_of(rec: Record) -> str | None:
    """The standing deny that refused this request at intake, if one did."""
    by = rec.decided_by
    if rec.status is not ApprovalStatus.DENIED or not isinstance(by, PolicyDecider):
        return None
    match = _RULE.match(by.rule)
    return match.group(1) if match else None


def held_against(
    tx: Work,
    tenant: str,
    tool: str,
    mode: ApprovalMode,
    route: Route | ApprovalModeUnsupported | None,
    surface: SurfaceLike,
) -> StandingDeny | None:
    """The standing deny in force for the scope this request would be asked in, if any."""
    if route is None or isinstance(route, ApprovalModeUnsupported):
        return None
    scope = scope_of(tenant, tool, mode, route, surface)
    return denial_store.in_force(tx, scope) if scope is not None else None


def offered(rec: Record, person: str) -> Scope:
    """The scope an Always deny by `person` on this request covers; refused where it is not offered."""
    scope = scope_of(rec.tenant, rec.tool_name, rec.mode, rec.route, rec.surface)
    if scope is None:
        raise InvalidRequest(
            f"Always deny is not offered on approval {rec.id}: it needs a person-triggered run "
            "whose only approver is the one answering; answer deny instead",
            field="decision",
        )
    if scope.approver != person:
        raise NotAnApprover(f"{person} is not the approver of approval {rec.id}")
    return scope


def checked(check: Check, person: str) -> Check:
    """The answer's own checks (those of Approve/Deny), then the Always deny scope check."""

    def run(rec: Record) -> None:
        check(rec)
        offered(rec, person)

    return run


def setting(person: str, team: str | None) -> Step:
    """The closing step that puts the standing deny in force, with its audit event."""

    def step(tx: Work, rec: Record, now: float) -> list[Event]:
        scope = offered(rec, person)
        held = denial_store.record(tx, new_id("den"), scope, team, rec.id, now)
        data = StandingDenySet(
            denialId=held.id,
            toolName=scope.tool_name,
            requester=scope.requester,
            alreadyInForce=held.approval_id != rec.id,
        )
        actor = {"kind": "person", "surface": scope.surface.value, "userId": person}
        return [Event(AuditEvent.STANDING_DENY_SET, actor, written(data))]

    return step


def lift_tx(
    tx: Work, denial_id: str, by: str, actor: Mapping[str, Any], now: float, allowed: Callable[[Scope], bool]
) -> StandingDeny:
    """Lift one standing deny, with its audit event on the request where it was set."""
    found = denial_store.load(tx, denial_id)
    if found is None or not allowed(found.scope):
        raise DenialNotFound(
            f"no standing deny {denial_id} for this caller; GET /v1/denials (or `cosigner denials "
            "list`) shows the ones in force"
        )
    if denial_store.lift(tx, denial_id, by, now):
        lifted = StandingDenyLifted(denialId=denial_id, by=by)
        ledger.note(
            tx, found.approval_id, now, [Event(AuditEvent.STANDING_DENY_LIFTED, dict(actor), written(lifted))]
        )
    return denial_store.load(tx, denial_id) or found


class Denials:
    """Standing denies for the API, the CLI and the surfaces (a `contracts.denials.DenialDesk`)."""

    def __init__(self, db: Database, clock: Callable[[], float]) -> None:
        self.db = db
        self.clock = clock

    async def refuse_again(self, rec: Record) -> None:
        """A replayed call that a standing deny refused is refused again, the same way."""
        denial_id = denial_of(rec)
        if denial_id is None:
            return
        found = await self.db.run_read(lambda tx: denial_store.load(tx, denial_id))
        if found is not None:
            raise refusal(found, rec.id)

    async def held(
        self, tenant: str, tool: str, mode: ApprovalMode, route: Route, surface: Mapping[str, Any]
    ) -> Denial | None:
        """The standing deny a request for `tool` on this route would be refused by."""
        found = await self.db.run_read(lambda tx: held_against(tx, tenant, tool, mode, route, surface))
        return to_wire(found) if found is not None else None

    async def listed(self, tenant: str | None) -> list[StandingDeny]:
        """Standing denies in force: one tenant's, or every tenant's (None)."""
        return await self.db.run_read(lambda tx: denial_store.listed(tx, tenant))

    async def lift(
        self, tenant: str | None, denial_id: str, by: str, actor: Mapping[str, Any]
    ) -> StandingDeny:
        """Lift a standing deny of `tenant` (None: any tenant, for the operator)."""

        def allowed(scope: Scope) -> bool:
            return tenant is None or scope.tenant == tenant

        return await self._lift(denial_id, by, actor, allowed)

    async def denials_of(self, tenant: str, surface: SurfaceType, person: str) -> Sequence[Denial]:
        """The standing denies in force that `person` set on `surface` in `tenant`."""
        found = await self.db.run_read(
            lambda tx: denial_store.listed(tx, tenant, surface=surface, approver=person)
        )
        return [to_wire(d) for d in found]

    async def lift_own(self, tenant: str, surface: SurfaceType, person: str, denial_id: str) -> Denial:
        """Lift a standing deny that `person` set; anyone else's is not found."""

        def allowed(scope: Scope) -> bool:
            return (scope.tenant, scope.surface, scope.approver) == (tenant, surface, person)

        actor = {"kind": "person", "surface": surface.value, "userId": person}
        return to_wire(await self._lift(denial_id, f"{surface.value}:{person}", actor, allowed))

    async def _lift(
        self, denial_id: str, by: str, actor: Mapping[str, Any], allowed: Callable[[Scope], bool]
    ) -> StandingDeny:
        if not _ID.fullmatch(denial_id):
            raise DenialNotFound(
                "no standing deny with this id; an id is den_ and 20 letters, digits, - or _"
            )
        now = self.clock()
        lifted = await self.db.run_write(lambda tx: lift_tx(tx, denial_id, by, actor, now, allowed))
        log.info(
            "standing deny %s lifted by %s",
            denial_id,
            by.partition(":")[0],  # operator, api, or the surface: never a person's number
            extra={"tenant": lifted.scope.tenant, "tool": lifted.scope.tool_name},
        )
        return lifted
