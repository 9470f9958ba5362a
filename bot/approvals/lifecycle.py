"""One approval's life: the one transition, and what closing queues.

An approval is created `pending` (or already closed by policy, see `bot.approvals.intake`) and
closes once: `close` is the only step that writes `status`. It loads the approval, runs the
answer's own checks on it (who may answer: `bot.approvals.answerers`), and asks the pure
`bot.approvals.judging.judge` what the answer does; its UPDATE is conditional on
`status = 'pending'`, so of any number of concurrent answers exactly one wins and the rest get
`AlreadyDecided`. The same transaction appends the audit events (written from their models,
`contracts.audit_events`), queues the callback and the card update, records a run grant, and
(on PostgreSQL) notifies the other replicas.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from bot.approvals.bodies import actor_of
from bot.approvals.judging import (
    Asked,
    Counted,
    Passkeyed,
    Refused,
    Revised,
    Unchanged,
    judge,
)
from bot.approvals.run_grants import requester_key
from bot.policy.people import NOBODY_TIED, People
from contracts.answers import DecidedBy
from contracts.audit_events import MODELS, DecisionRefused, Edited, SetAside, written
from contracts.audit_events import Counted as CountedEvent
from contracts.enums import ApprovalStatus, AuditEvent, JobKind, SurfaceType
from contracts.errors import (
    ApprovalNotFound,
    CosignerError,
)
from contracts.names import fold
from storage import answers, jobs, ledger, operations
from storage.audit import Event
from storage.jobs import Delivery, Queued
from storage.records import Changes, Decided, Record
from storage.votes import joined
from storage.work import Work

CARD_UPDATE_WINDOW = 3600.0


def new_id(prefix: str) -> str:
    """A random, URL-safe identifier with a readable prefix."""
    return f"{prefix}_{secrets.token_urlsafe(15)}"


def stored(decided_by: DecidedBy) -> str:
    """A decider as the approvals table keeps it."""
    return decided_by.model_dump_json(exclude_none=True)


# --- the one transition ---------------------------------------------------------


@dataclass(frozen=True)
class Closing:
    """A requested transition: to what, by whom, the conditions it must meet, and what more
    to write with it.

    `check` refuses an answer that may not decide (see the checks above): `close` runs it on
    the approval as loaded in its transaction and hands what it refused to `judge`, which
    sees only data (`asked`). A refusal is audited in the same transaction when
    `audit_refusal`. `inbound` is the surface message that carried the answer: it is
    recorded in that transaction, and if it was recorded before, the answer was handled
    already and nothing changes.
    """

    to: ApprovalStatus
    decided_by: DecidedBy
    comment: str | None = None
    tenant: str | None = None
    check: Callable[[Record], None] | None = None
    audit_refusal: bool = False
    run_grant: str | None = None
    inbound: tuple[SurfaceType, str] | None = None
    # More to record in the same transaction when it closes as asked (a standing deny).
    also: Callable[[Work, Record, float], list[Event]] | None = None
    changes: Changes | None = None  # more written with the status (a handoff's check, an edit)
    data: Mapping[str, Any] | None = None  # more on the closing's audit event (the edited call)
    # The digest of the call the answer was given for (None: the agent's own). A person's
    # answer, or a closing that names one, is refused when the call was edited since.
    seen: str | None = None
    # An edit of a call a quorum must approve: the edited call (`changes.edit`) becomes the
    # current one, the editor's Approve its first, and every earlier Approve is set aside.
    revises: bool = False
    # The answering person's other ids, vouched for with this answer by an identity provider
    # (an inbox sign-in: the Slack user id, the verified email and phone). The person, not the
    # id, is compared with the requester and with everyone counted (`bot.policy.people`).
    ids: tuple[str, ...] = ()
    # Step-up: the passkey that confirmed this Approve (checked by the inbox before it closes:
    # the assertion, its user-verification flag and its challenge, bound to this approval and
    # the call shown). Without it an Approve of a step-up approval never counts.
    passkey: Passkeyed | None = None
    # Refused with this while the approval's time is not up (an expiry, a late Done).
    not_due: CosignerError | None = None

    @property
    def asked(self) -> Asked:
        """What is answered, as the plain data `judge` takes."""
        return Asked(
            self.to,
            self.decided_by,
            self.comment,
            self.seen,
            self.revises,
            self.ids,
            self.passkey,
            self.not_due,
        )

    @property
    def writes_more(self) -> bool:
        """Whether closing writes more than the approval's own row: the message that carried
        the answer, a closing step (`also`), a run grant."""
        return self.inbound is not None or self.also is not None or self.run_grant is not None


def checked(check: Callable[[Record], None] | None, rec: Record) -> CosignerError | None:
    """What an answer's own checks refuse it with on the approval as loaded (None: they
    pass), for `judge` to take as data."""
    if check is None:
        return None
    try:
        check(rec)
    except CosignerError as exc:
        return exc
    return None


EXECUTE_GRACE = 5.0
"""Seconds past an `execute` call's timeout before another attempt takes over its job."""


@dataclass(frozen=True)
class Closed:
    """What `close` did: the record as it now stands, a refusal to raise, and whether it closed.

    `execute` is the approved operation's `execute` job when `close` claimed it for the
    caller (its first `execute` already counted as sent): the caller sends it at once."""

    record: Record
    refusal: CosignerError | None
    changed: bool
    execute: jobs.Job | None = None
    counted: bool = False  # an Approve was counted toward the quorum; the approval stays pending


def refused(decided_by: DecidedBy, exc: CosignerError, wanted: ApprovalStatus) -> Event:
    """The audit event of an answer that was not applied."""
    data = DecisionRefused(code=str(exc.code), message=exc.message, wanted=wanted.value)
    return Event(AuditEvent.DECISION_REFUSED, actor_of(decided_by), written(data))


def close(
    tx: Work,
    approval_id: str,
    c: Closing,
    clock: Callable[[], float],
    *,
    callback_window: float,
    send_execute: bool = False,
    people: People = NOBODY_TIED,
) -> Closed:
    """The one step that writes `status`, run inside one write transaction (`people`: which
    ids are one person, for the quorum and separation of duties).

    With `send_execute` (the caller can send `execute` itself), approving an operation also
    claims its `execute` job and counts the first `execute` as sent, in this transaction:
    one write fewer per operation than claiming it afterwards, with the same guarantees (if
    the caller dies before sending, the job's next attempt asks `status` first)."""
    loaded = answers.load(tx, approval_id, clock, c.inbound)
    if loaded is None or (c.tenant is not None and loaded.record.tenant != c.tenant):
        raise ApprovalNotFound(f"no approval {approval_id} for this caller")
    rec, now = loaded.record, loaded.now
    if not loaded.first:
        return Closed(rec, None, False)
    answer = judge(rec, c.asked, now, people, checked=checked(c.check, rec))
    if isinstance(answer, Unchanged):
        return Closed(rec, None, False)
    if isinstance(answer, Refused):
        if not (c.audit_refusal and answer.audited):
            raise answer.error
        return Closed(
            ledger.append(tx, rec, now, [refused(c.decided_by, answer.error, c.to)]), answer.error, False
        )
    if isinstance(answer, Revised):
        return Closed(revise(tx, rec, now, c, answer), None, False, counted=True)
    if isinstance(answer, Counted):
        counted = [counted_event(c.decided_by, answer.comment, answer.count, answer.quorum)]
        if c.also is not None:
            counted += c.also(tx, rec, now)  # who vouched for the person (an inbox answer)
        show = rec.delivered is not None
        return Closed(answers.count(tx, rec, now, counted, answer.vote, show=show), None, False, counted=True)
    to, decided_by, comment, refusal = answer.to, answer.decided_by, answer.comment, answer.refusal
    events: list[Event] = [] if refusal is None else [refused(c.decided_by, refusal, c.to)]
    data: dict[str, Any] = {"comment": comment, **(c.data if c.data is not None and to is c.to else {})}
    if answer.vote is not None:
        voted = joined(rec.votes, answer.vote)
        events.append(counted_event(decided_by, comment, people.count(v.ids for v in voted), rec.quorum))
        data["approvers"] = [{"by": v.by, "surface": v.surface.value} for v in voted]
    events.append(closing_event(to, decided_by, data))
    changes = replace(c.changes or Changes(), decided=Decided(to, now, decided_by, comment))
    kept = changes.edit or rec.edit
    if kept is not None and kept.sealed is not None:
        # A closed call is never edited: its sealed original is not kept.
        changes = replace(changes, edit=kept.model_copy(update={"sealed": None}))
    if c.also is not None and to is c.to:
        events += c.also(tx, rec, now)
    claim = None
    if rec.operation is not None and to is ApprovalStatus.APPROVED:
        # The claim pending → executing is this same conditional UPDATE: one answer wins it.
        if send_execute:
            executing, claim_events = operations.claimed_and_sending(rec.operation, rec.id)
            events += claim_events
            lock = now + rec.operation.execute_timeout + EXECUTE_GRACE
            claim = answers.Claim(now, now + callback_window, lock)
        else:
            executing, event = operations.claim(rec.operation)
            events.append(event)
        changes = replace(changes, operation=executing)
    after = replace(rec, status=to, operation=changes.operation or rec.operation)
    grant = None
    if c.run_grant is not None and to is ApprovalStatus.APPROVED:
        grant = answers.Grant(fold(rec.tool_name), requester_key(rec.surface), c.run_grant)
    queued = jobs_after(after, now, callback_window, executes_itself=send_execute)
    rec, execute = answers.write(
        tx,
        rec,
        now,
        events,
        changes,
        queued=queued,
        claim=claim,
        grant=grant,
        vote=answer.vote,
    )
    return Closed(rec, refusal, True, execute)


def revise(tx: Work, rec: Record, now: float, c: Closing, answer: Revised) -> Record:
    """Store an edit of a call a quorum must approve: the edit (who, the edited call, both
    digests), the approvals it sets aside and why, and the editor's Approve as the first of
    the edited call, each its own link of the audit chain."""
    assert c.changes is not None and c.changes.edit is not None  # an edit carries its call
    edited = Edited.model_validate(dict(c.data or {}))
    events = [Event(AuditEvent.CALL_EDITED, actor_of(c.decided_by), written(edited))]
    if answer.set_aside:
        new = c.changes.edit.result.digest if c.changes.edit.result is not None else rec.digest
        aside = SetAside(
            approvers=[{"by": v.by, "surface": v.surface.value} for v in answer.set_aside],
            approvedDigest=rec.call_digest,
            digest=new,
            reason="they approved a version of the call that an edit replaced",
        )
        events.append(Event(AuditEvent.APPROVALS_SET_ASIDE, actor_of(c.decided_by), written(aside)))
    events.append(counted_event(c.decided_by, answer.comment, 1, answer.quorum))
    if c.also is not None:
        events += c.also(tx, rec, now)  # who vouched for the person (an inbox answer)
    show = rec.delivered is not None or bool(rec.escalated)
    new = c.changes.edit.result.digest if c.changes.edit.result is not None else rec.digest
    retext = new if texted(rec) else None
    return answers.revise(
        tx, rec, now, events, Changes(edit=c.changes.edit), answer.vote, show=show, retext=retext
    )


TEXTED = frozenset({SurfaceType.SMS, SurfaceType.WHATSAPP})


def texted(rec: Record) -> bool:
    """True when the request was texted to a phone (SMS or WhatsApp, on its own route or an
    escalation step's): an edit of its call is then texted again (`JobKind.RETEXT`)."""
    steps = [(rec.route, rec.delivered), *((e.route, e.delivered) for e in rec.escalated)]
    return any(r is not None and r.surface in TEXTED and d is not None for r, d in steps)


def counted_event(by: DecidedBy, comment: str | None, n: int, quorum: int) -> Event:
    """The audit event of one Approve toward a quorum: each approver's is its own link."""
    data = CountedEvent(count=n, quorum=quorum, comment=comment)
    return Event(AuditEvent.APPROVAL_COUNTED, actor_of(by), written(data))


def closing_event(to: ApprovalStatus, by: DecidedBy, data: Mapping[str, Any]) -> Event:
    """The audit event of the closing itself, its kind the status it closed as: the comment,
    the approvers of a quorum and what more the closing carries (the edited call), as the
    status's model (`contracts.audit_events`) checks them."""
    return Event(to.value, actor_of(by), written(MODELS[to.value].model_validate(dict(data))))


def jobs_after(
    rec: Record, now: float, callback_window: float, *, executes_itself: bool = False
) -> list[Queued]:
    """The jobs a closing queues for the approval as it will stand: an approved operation's
    `execute` (unless the closing caller sends it), then once settled the callback and the
    card update."""
    queued: list[Queued] = []
    if rec.operation is not None and rec.status is ApprovalStatus.APPROVED and not executes_itself:
        queued.append(Queued(JobKind.EXECUTE, now, now + callback_window))
    if rec.callback_url and rec.settled:
        queued.append(Queued(JobKind.CALLBACK, now, now + callback_window, Delivery(new_id("dlv"))))
    if (rec.delivered is not None or rec.escalated) and rec.settled:
        queued.append(Queued(JobKind.SHOW, now, now + CARD_UPDATE_WINDOW))
    return queued


# --- what a transition queues ---------------------------------------------------


def queue_callback(tx: Work, approval_id: str, now: float, window: float) -> None:
    """Queue the POST of the decision to the agent's `callbackUrl`."""
    jobs.queue(tx, JobKind.CALLBACK, approval_id, Delivery(new_id("dlv")), now, now + window)


def queue_card_update(tx: Work, approval_id: str, now: float) -> None:
    """Queue showing the outcome where the approval was delivered."""
    jobs.queue(tx, JobKind.SHOW, approval_id, None, now, now + CARD_UPDATE_WINDOW)


def queue_execution(tx: Work, approval_id: str, now: float, window: float) -> None:
    """Queue carrying out an approved operation at its application."""
    jobs.queue(tx, JobKind.EXECUTE, approval_id, None, now, now + window)
