"""Reminders and escalations, the storage side: each step recorded once, on the audit chain.

A step is written while the approval is pending, under its row lock, with its audit event:
`escalate` inserts the step's row in `escalations` (its primary key is the approval and the
step, so a step is taken once whichever worker or replica runs it) and the route it goes
to; `receipt` stores where it was delivered, which is what lets its approvers answer there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contracts.enums import ApproverKind, JobKind
from contracts.ports import Delivered, Route
from storage import jobs, ledger
from storage.audit import Event
from storage.record_columns import Escalation, FollowUps, delivery_key
from storage.records import Changes, Record
from storage.tables import escalations
from storage.work import Work

SHOW_WINDOW = 3600.0


@dataclass(frozen=True)
class Taken:
    """An escalation step as recorded: the approval as it now stands and the step, or None
    when the approval is no longer pending."""

    record: Record
    step: Escalation


def escalate(
    tx: Work,
    approval_id: str,
    step: int,
    to: ApproverKind,
    route: Route,
    clock: Callable[[], float],
    event: Callable[[Escalation], Event],
    sending: Delivered | None = None,
) -> Taken | None:
    """Record escalation `step` to `route` (with `sending`, a receipt before anything is sent,
    as SMS stores one); the step as taken before if it was; None once the approval closed."""
    rec = ledger.load(tx, approval_id, lock=True)
    if rec is None or rec.closed:
        return None
    state = rec.follow_ups or FollowUps()
    done = state.step(step)
    if done is not None:
        return Taken(rec, done)  # a retried job: the step stands, its delivery may not
    now = clock()
    if rec.expires_at <= now:
        return None
    taken = Escalation(step=step, to=to, at=now, route=route, delivered=sending)
    ledger.insert_ignore(
        tx,
        escalations,
        {"approval_id": approval_id, "step": step, "delivery_key": delivery_key(route), "at": now},
    )
    rec = ledger.append(
        tx, rec, now, [event(taken)], Changes(follow_ups=state.with_step(taken)), only_pending=True
    )
    return Taken(rec, taken)


def receipt(
    tx: Work, approval_id: str, step: int, delivered: Delivered, clock: Callable[[], float], event: Event
) -> bool:
    """Store where escalation `step` was delivered; True when the approval closed meanwhile
    (its card update is queued, so the escalated card is closed too)."""
    rec = ledger.load(tx, approval_id, lock=True)
    if rec is None or rec.follow_ups is None:
        return False
    taken = rec.follow_ups.step(step)
    if taken is None:
        return False
    now = clock()
    updated = Escalation(taken.step, taken.to, taken.at, taken.route, delivered)
    ledger.append(tx, rec, now, [event], Changes(follow_ups=rec.follow_ups.with_step(updated)))
    if rec.closed:
        jobs.queue(tx, JobKind.SHOW, rec.id, None, now, now + SHOW_WINDOW)
        return True
    return False


def remind(tx: Work, approval_id: str, clock: Callable[[], float], event: Event) -> bool:
    """Record the reminder on a pending approval, once; False if closed or reminded already."""
    rec = ledger.load(tx, approval_id, lock=True)
    if rec is None or rec.closed:
        return False
    state = rec.follow_ups or FollowUps()
    if state.reminded_at is not None:
        return False
    now = clock()
    changes = Changes(follow_ups=FollowUps(reminded_at=now, escalations=state.escalations))
    ledger.append(tx, rec, now, [event], changes, only_pending=True)
    return True
