"""Standing allows, the engine side: grant one with an "Allow for …" answer, let the calls it
covers through at intake, list and revoke them.

Granting is part of the closing transaction of the approval it comes with (`Closing.also`),
after the same checks as Approve (`bot.approvals.answerers.check_answer`) and the checks
here: the tool offers it (`allow_for`), the length is one offered and within the cap, one
approver decides (no quorum), the run has a person behind it, and the arguments it is
matched on were shown whole. A call it covers is approved at intake with
`decidedBy.kind = "allowance"` and an `allowance_used` audit event; a standing deny is read
first and always wins. Nothing is cached: the table is read at every create, so a
revocation holds from the next call, on every replica.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bot.approvals.lifecycle import new_id
from bot.approvals.run_grants import requester_key
from bot.policy import Policy, Ruling
from bot.policy.allow_for import AllowFor, Terms, shown_terms, terms_of
from contracts.allowances import Allowance, AllowanceGrantor, choices_up_to
from contracts.answers import AllowanceDecider
from contracts.audit_events import AllowanceGranted, AllowanceRevoked, AllowanceUsed, written
from contracts.enums import ApprovalMode, AuditEvent, SurfaceType
from contracts.errors import AllowanceNotFound, InvalidRequest
from contracts.names import fold
from storage import allowances as allowance_store
from storage import ledger
from storage.allowances import Scope, StandingAllow
from storage.audit import Event
from storage.database import Database
from storage.record_columns import iso, ts
from storage.records import Record
from storage.work import Work

log = logging.getLogger("cosigner.allowances")
Check = Callable[[Record], None]
Step = Callable[[Work, Record, float], list[Event]]
_ID = re.compile(r"alw_[A-Za-z0-9_-]{20}")
# Runs nobody triggered: a standing allow for one would cover every such run of the tenant.
HEADLESS = frozenset({SurfaceType.SCHEDULE, SurfaceType.BATCH, SurfaceType.API, SurfaceType.WEB_WIDGET})
REVOKE_HOW = "revoke it with DELETE /v1/allowances/{id}, the inbox, or `cosigner allowances revoke {id}`"


def covered_by(
    ruling: Ruling, parameters: Mapping[str, Any], shown: Mapping[str, Any], surface: str
) -> Terms | None:
    """What a standing allow would have to cover for this call to pass at once; None where no
    standing allow may decide it (the tool offers none, a quorum or a threshold decides, a
    `when` block could not be evaluated, a headless run, or its arguments cannot be matched)."""
    rule = ruling.rule
    allow = rule.allow_for
    if allow is None or ruling.deny or ruling.threshold is not None or ruling.unevaluable is not None:
        return None
    if rule.mode in (ApprovalMode.NONE, ApprovalMode.HANDOFF) or rule.quorum > 1 or rule.handoff is not None:
        return None
    if rule.step_up:  # a `when` block asking for a passkey: every Approve needs one, never a standing allow
        return None
    if surface in HEADLESS:
        return None
    return terms_of(allow, parameters, shown)


def allowance_decider(held: StandingAllow) -> AllowanceDecider:
    """How a call a standing allow let through shows who decided it: the allowance and the
    person who granted it."""
    team = held.granted_team if held.surface is SurfaceType.SLACK else None
    return AllowanceDecider(allowanceId=held.id, surface=held.surface, userId=held.granted_by, teamId=team)


def used_event(held: StandingAllow) -> Event:
    """The audit event of one use (the count includes this one)."""
    data = AllowanceUsed(
        allowanceId=held.id,
        use=held.uses + 1,
        maxUses=held.max_uses,
        grantedOn=held.approval_id,
        expiresAt=iso(held.expires_at),
    )
    return Event(
        AuditEvent.ALLOWANCE_USED,
        allowance_decider(held).model_dump(mode="json", exclude_none=True),
        written(data),
    )


def offered(policy: Policy, rec: Record) -> tuple[str, ...]:
    """The lengths a pending request's card offers ("15m", "1h", …), none where it offers none."""
    if (
        rec.closed
        or rec.operation is not None
        or rec.handoff is not None
        or rec.step_up
        or SurfaceType(rec.surface.type) in HEADLESS
    ):
        return ()
    rule = policy.rule_for(rec.tenant, rec.tool_name)
    if rule.allow_for is None or rec.quorum > 1 or rec.mode in (ApprovalMode.NONE, ApprovalMode.HANDOFF):
        return ()
    if isinstance(shown_terms(rule.allow_for, rec.parameters), str):
        return ()
    return tuple(c.name for c in choices_up_to(rule.allow_for.cap))


def _length(seconds: float) -> str:
    return f"{seconds / 3600:g}h" if seconds >= 3600 else f"{seconds / 60:g}m"


def terms(policy: Policy, rec: Record, seconds: float | None) -> tuple[AllowFor, Terms]:
    """The standing allow an "Allow for `seconds`" on this request would put in force, or
    `InvalidRequest` naming why it is not offered here (nothing is created then)."""
    rule = policy.rule_for(rec.tenant, rec.tool_name)
    allow = rule.allow_for
    if allow is None:
        raise InvalidRequest(
            f"Allow for is not offered on {rec.tool_name}: the policy sets no allow_for for it; "
            "answer approve or deny",
            field="allowFor",
        )
    if rec.quorum > 1:
        raise InvalidRequest(
            f"Allow for is not offered when {rec.quorum} approvers must approve; answer approve",
            field="allowFor",
        )
    if rec.operation is not None or rec.handoff is not None or rec.mode is ApprovalMode.HANDOFF:
        raise InvalidRequest("Allow for is offered only on tool calls; answer approve", field="allowFor")
    if SurfaceType(rec.surface.type) in HEADLESS:
        raise InvalidRequest(
            "Allow for is offered only on runs a person triggered: a headless run's would cover "
            "every such run; answer approve",
            field="allowFor",
        )
    lengths = choices_up_to(allow.cap)
    if seconds is None or seconds not in {c.seconds for c in lengths}:
        asked = "no length" if seconds is None else _length(seconds)
        raise InvalidRequest(
            f"Allow for {asked} is not offered on {rec.tool_name}, only up to {_length(allow.cap)} "
            f"({rule.origin('allow_for')}); choose " + (", ".join(c.name for c in lengths) or "approve"),
            field="allowFor",
        )
    got = shown_terms(allow, rec.parameters)
    if isinstance(got, str):
        raise InvalidRequest(
            f"Allow for is not offered on approval {rec.id}: {got}; answer approve", field="allowFor"
        )
    return allow, got


def checked(check: Check, policy: Policy, seconds: float | None) -> Check:
    """The answer's own checks (those of Approve), then the Allow for checks."""

    def run(rec: Record) -> None:
        check(rec)
        terms(policy, rec, seconds)

    return run


def granting(policy: Policy, surface: SurfaceType, person: str, team: str | None, seconds: float) -> Step:
    """The closing step that puts the standing allow in force, with its audit event."""

    def step(tx: Work, rec: Record, now: float) -> list[Event]:
        allow, got = terms(policy, rec, seconds)
        scope = Scope(rec.tenant, fold(rec.tool_name), requester_key(rec.surface), got.key)
        held = allowance_store.record(
            tx,
            StandingAllow(
                new_id("alw"),
                scope,
                got.shown,
                got.numbers,
                surface,
                person,
                team if surface is SurfaceType.SLACK else None,
                rec.id,
                now,
                now + seconds,
                0,
                allow.uses,
            ),
        )
        data = AllowanceGranted(
            allowanceId=held.id,
            toolName=rec.tool_name,
            requester=scope.requester,
            match=got.shown,
            atMost=got.numbers,
            expiresAt=iso(held.expires_at),
            maxUses=held.max_uses,
        )
        actor = {"kind": "person", "surface": surface.value, "userId": person}
        return [Event(AuditEvent.ALLOWANCE_GRANTED, actor, written(data))]

    return step


def allowance_to_wire(held: StandingAllow) -> Allowance:
    """A stored standing allow as its wire model."""
    return Allowance(
        allowanceId=held.id,
        toolName=held.scope.tool_name,
        requester=held.scope.requester,
        grantedBy=AllowanceGrantor(
            surface=held.surface.value, userId=held.granted_by, teamId=held.granted_team
        ),
        approvalId=held.approval_id,
        match=held.match_shown,
        atMost=held.at_most,
        grantedAt=ts(held.created_at),
        expiresAt=ts(held.expires_at),
        uses=held.uses,
        maxUses=held.max_uses,
        revokedAt=ts(held.revoked_at) if held.revoked_at is not None else None,
        revokedBy=held.revoked_by,
    )


def revoke_tx(
    tx: Work,
    allowance_id: str,
    by: str,
    actor: Mapping[str, Any],
    now: float,
    allowed: Callable[[StandingAllow], bool],
) -> StandingAllow:
    """Revoke one standing allow, with its audit event on the request where it was granted."""
    found = allowance_store.load(tx, allowance_id)
    if found is None or not allowed(found):
        raise AllowanceNotFound(
            f"no standing allow {allowance_id} for this caller; GET /v1/allowances (or `cosigner "
            "allowances list`) shows the ones in force"
        )
    if allowance_store.revoke(tx, allowance_id, by, now):
        revoked = AllowanceRevoked(allowanceId=allowance_id, by=by)
        ledger.note(
            tx, found.approval_id, now, [Event(AuditEvent.ALLOWANCE_REVOKED, dict(actor), written(revoked))]
        )
    return allowance_store.load(tx, allowance_id) or found


class Allowances:
    """Standing allows for the API, the CLI and the surfaces (a `contracts.allowances.AllowanceDesk`)."""

    def __init__(self, db: Database, clock: Callable[[], float]) -> None:
        self.db = db
        self.clock = clock

    async def listed(self, tenant: str | None) -> list[StandingAllow]:
        """Standing allows in force: one tenant's, or every tenant's (None)."""
        now = self.clock()
        return await self.db.run_read(lambda tx: allowance_store.listed(tx, tenant, now))

    async def revoke(
        self, tenant: str | None, allowance_id: str, by: str, actor: Mapping[str, Any]
    ) -> StandingAllow:
        """Revoke a standing allow of `tenant` (None: any tenant, for the operator)."""
        return await self._revoke(
            allowance_id, by, actor, lambda a: tenant is None or a.scope.tenant == tenant
        )

    async def allowances_of(self, tenant: str, surface: SurfaceType, person: str) -> Sequence[Allowance]:
        """The standing allows in force that `person` granted on `surface` in `tenant`."""
        now = self.clock()
        found = await self.db.run_read(
            lambda tx: allowance_store.listed(tx, tenant, now, surface=surface, granted_by=person)
        )
        return [allowance_to_wire(a) for a in found]

    async def revoke_own(
        self, tenant: str, surface: SurfaceType, person: str, allowance_id: str
    ) -> Allowance:
        """Revoke a standing allow that `person` granted; anyone else's is not found."""

        def allowed(a: StandingAllow) -> bool:
            return (a.scope.tenant, a.surface, a.granted_by) == (tenant, surface, person)

        actor = {"kind": "person", "surface": surface.value, "userId": person}
        return allowance_to_wire(
            await self._revoke(allowance_id, f"{surface.value}:{person}", actor, allowed)
        )

    async def _revoke(
        self, allowance_id: str, by: str, actor: Mapping[str, Any], allowed: Callable[[StandingAllow], bool]
    ) -> StandingAllow:
        if not _ID.fullmatch(allowance_id):
            raise AllowanceNotFound(
                "no standing allow with this id; an id is alw_ and 20 letters, digits, - or _"
            )
        now = self.clock()
        revoked = await self.db.run_write(lambda tx: revoke_tx(tx, allowance_id, by, actor, now, allowed))
        log.info(
            "standing allow %s revoked by %s",
            allowance_id,
            by.partition(":")[0],  # operator, api, or the surface: never a person's number
            extra={"tenant": revoked.scope.tenant, "tool": revoked.scope.tool_name},
        )
        return revoked
