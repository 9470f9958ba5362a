"""An inbox answer: the dashboard surface's checks (`bot.approvals.answerers`), for the signed-in person.

The tenant is checked first (a request of a tenant the person does not belong to is "not
found", never answered), then the same `check_dashboard` and `check_verdict` the decision
endpoint runs, inside the one transition; the closing is audited with the issuer and subject.
Every id the issuer vouched for goes with the answer, so the person (not the one id it is
given by) is compared with the requester and with whoever approved before.
An edit goes the decision endpoint's way too (`Closer.check_edit`, `Closer.approve_edited` of
`bot.approvals.closing`): the fields, their types and current values always come from the
stored approval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bot.approvals import Closing, Engine, allowances, answerers, denials
from bot.approvals.edits import form_fields
from bot.approvals.judging import closed_error
from bot.inbox.people import Person, dashboard_id
from bot.policy.rules import Policy
from contracts.answers import PersonDecider
from contracts.audit_events import SignedIn, written
from contracts.edits import Change, EditField
from contracts.enums import ApprovalStatus, AuditEvent, SurfaceType, Verdict
from contracts.errors import ApprovalNotFound, InvalidRequest
from storage import ledger
from storage.audit import Event
from storage.database import Database
from storage.records import Record
from storage.work import Work

VERDICTS = {
    Verdict.APPROVE: ApprovalStatus.APPROVED,
    Verdict.DENY: ApprovalStatus.DENIED,
    Verdict.ALWAYS_DENY: ApprovalStatus.DENIED,
    Verdict.ALLOW_FOR: ApprovalStatus.APPROVED,
}


def signed_in_event(person: Person, decider: PersonDecider) -> Callable[[Work, Record, float], list[Event]]:
    """The closing step that records which issuer vouched for the person who answered."""

    def step(tx: Work, rec: Record, now: float) -> list[Event]:
        actor = decider.model_dump(mode="json", exclude_none=True)
        data = SignedIn(issuer=person.issuer, subject=person.subject)
        return [Event(AuditEvent.SIGNED_IN, actor, written(data))]

    return step


def both(
    first: Callable[[Work, Record, float], list[Event]],
    second: Callable[[Work, Record, float], list[Event]] | None,
) -> Callable[[Work, Record, float], list[Event]]:
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
    seen: str | None = None,
    allow_for: float | None = None,
) -> Record:
    """Apply a signed-in person's answer to the call shown with digest `seen` (with
    `Verdict.ALLOW_FOR`, `allow_for` seconds); refusals are audited and raised as `CosignerError`."""
    rec = await db.run_read(lambda tx: ledger.load(tx, approval_id))
    if rec is None or rec.tenant not in tenants:
        raise ApprovalNotFound(f"approval {approval_id} does not exist")
    return await engine.close(
        approval_id,
        closing_of(rec, person, verdict, comment, seen, policy=engine.policy, allow_for=allow_for),
    )


def closing_of(
    rec: Record,
    person: Person,
    verdict: Verdict,
    comment: str | None,
    seen: str | None,
    *,
    policy: Policy | None = None,
    allow_for: float | None = None,
) -> Closing:
    """The closing a signed-in person's answer to `rec` asks for, with its checks and audit;
    an "Allow for …" (`Verdict.ALLOW_FOR`, `allow_for` seconds) needs the `policy` that caps it."""
    user = dashboard_id(person, rec)
    decider = PersonDecider(surface=SurfaceType.DASHBOARD, userId=user, teamId=person.slack_team)

    def check(r: Record) -> None:
        answerers.check_dashboard(r, user)
        answerers.check_verdict(r, verdict)

    checked: denials.Check = check
    standing = None
    if verdict is Verdict.ALWAYS_DENY:
        checked, standing = denials.checked(check, user), denials.setting(user, person.slack_team)
    elif verdict is Verdict.ALLOW_FOR:
        if policy is None:
            raise InvalidRequest("answer Allow for … on the request itself, not in a selection")
        checked = allowances.checked(check, policy, allow_for)
        standing = allowances.granting(policy, SurfaceType.DASHBOARD, user, None, allow_for or 0.0)
    return Closing(
        VERDICTS[verdict],
        decider,
        comment=comment or None,
        tenant=rec.tenant,
        check=checked,
        audit_refusal=True,
        also=both(signed_in_event(person, decider), standing),
        seen=seen,
        ids=person.vouched,
    )


async def editable(
    engine: Engine, db: Database, person: Person, tenants: set[str], approval_id: str
) -> tuple[Record, tuple[EditField, ...]]:
    """A pending request this person may edit, with its editable fields (typed from the
    tool's schema, as the policy lists them now); a `CosignerError` says why not."""
    rec = await db.run_read(lambda tx: ledger.load(tx, approval_id))
    if rec is None or rec.tenant not in tenants:
        raise ApprovalNotFound(f"approval {approval_id} does not exist")
    answerers.check_dashboard(rec, dashboard_id(person, rec))
    if rec.closed:
        raise closed_error(rec)
    if rec.edit is None or not rec.edit.fields:
        raise InvalidRequest(f"approval {rec.id} offers no edit; approve or deny the call as it is")
    rule = engine.policy.rule_for(rec.tenant, rec.tool_name)
    fields = tuple(
        f
        for f in form_fields(rec.edit, rec.call_shown)
        if rule.editable is True or (rule.editable and f.name in rule.editable)
    )
    if not fields:
        raise InvalidRequest(f"the policy no longer lets {rec.tool_name} be edited; approve or deny it")
    return rec, fields


async def review(
    engine: Engine,
    db: Database,
    person: Person,
    tenants: set[str],
    approval_id: str,
    values: Mapping[str, Any],
) -> tuple[Record, tuple[Change, ...]]:
    """Check an edit for the review step (old → new); nothing is written. An `InvalidRequest`
    carries `problems`, each a field and why."""
    rec, _ = await editable(engine, db, person, tenants, approval_id)
    return rec, (await engine.closer.check_edit(rec, values)).changes


async def approve_edited(
    engine: Engine,
    db: Database,
    person: Person,
    tenants: set[str],
    approval_id: str,
    values: Mapping[str, Any],
    comment: str | None,
    seen: str | None = None,
) -> Record:
    """Approve the edited call as the signed-in person: the engine checks the answer and the
    edit (of the call with digest `seen`) again, puts the edited call to the policy, and
    audits who vouched for the person."""
    rec = await db.run_read(lambda tx: ledger.load(tx, approval_id))
    if rec is None or rec.tenant not in tenants:
        raise ApprovalNotFound(f"approval {approval_id} does not exist")
    user = dashboard_id(person, rec)
    decider = PersonDecider(surface=SurfaceType.DASHBOARD, userId=user, teamId=person.slack_team)

    def check(r: Record) -> None:
        answerers.check_dashboard(r, user)
        answerers.check_verdict(r, Verdict.APPROVE)

    return await engine.closer.approve_edited(
        approval_id,
        values,
        decider,
        check,
        comment=comment,
        tenant=rec.tenant,
        also=signed_in_event(person, decider),
        seen=seen,
        ids=person.vouched,
    )
