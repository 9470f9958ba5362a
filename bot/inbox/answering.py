"""An inbox answer: the dashboard surface's checks (`bot.approvals.lifecycle`), for the signed-in person.

The tenant is checked first (a request of a tenant the person does not belong to is "not
found", never answered), then the same `check_dashboard` and `check_verdict` the decision
endpoint runs, inside the one transition; the closing is audited with the issuer and subject.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.approvals import Closing, Engine, denials
from bot.approvals import lifecycle as approval
from bot.inbox.people import Person, dashboard_id
from contracts.answers import PersonDecider
from contracts.enums import ApprovalStatus, AuditEvent, SurfaceType, Verdict
from contracts.errors import ApprovalNotFound
from storage import approvals as ledger
from storage.audit import Event
from storage.database import Database, Tx
from storage.records import Record

VERDICTS = {
    Verdict.APPROVE: ApprovalStatus.APPROVED,
    Verdict.DENY: ApprovalStatus.DENIED,
    Verdict.ALWAYS_DENY: ApprovalStatus.DENIED,
}


def signed_in_event(person: Person, decider: PersonDecider) -> Callable[[Tx, Record, float], list[Event]]:
    """The closing step that records which issuer vouched for the person who answered."""

    def step(tx: Tx, rec: Record, now: float) -> list[Event]:
        actor = decider.model_dump(mode="json", exclude_none=True)
        return [Event(AuditEvent.SIGNED_IN, actor, {"issuer": person.issuer, "subject": person.subject})]

    return step


def both(
    first: Callable[[Tx, Record, float], list[Event]],
    second: Callable[[Tx, Record, float], list[Event]] | None,
) -> Callable[[Tx, Record, float], list[Event]]:
    """Two closing steps in order."""
    return first if second is None else (lambda tx, rec, now: [*first(tx, rec, now), *second(tx, rec, now)])


async def answer(
    engine: Engine,
    db: Database,
    person: Person,
    tenants: set[str],
    approval_id: str,
    verdict: Verdict,
    comment: str | None,
) -> Record:
    """Apply a signed-in person's answer; refusals are audited and raised as `CosignerError`."""
    rec = await db.run_read(lambda tx: ledger.load(tx, approval_id))
    if rec is None or rec.tenant not in tenants:
        raise ApprovalNotFound(f"approval {approval_id} does not exist")
    user = dashboard_id(person, rec)
    decider = PersonDecider(surface=SurfaceType.DASHBOARD, userId=user, teamId=person.slack_team)

    def check(r: Record) -> None:
        approval.check_dashboard(r, user)
        approval.check_verdict(r, verdict)

    checked: denials.Check = check
    standing = None
    if verdict is Verdict.ALWAYS_DENY:
        checked, standing = denials.checked(check, user), denials.setting(user, person.slack_team)
    closing = Closing(
        VERDICTS[verdict],
        decider,
        comment=comment or None,
        tenant=rec.tenant,
        check=checked,
        audit_refusal=True,
        also=both(signed_in_event(person, decider), standing),
    )
    return await engine.close(approval_id, closing)
