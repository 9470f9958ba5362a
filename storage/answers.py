"""Closing an approval, the storage side: one locked read before the decision, one write after.

`load` locks the approval's row, reads the clock once it holds the lock, and records the
surface message that carried the answer (a copy of a handled message changes nothing);
`write` applies the transition in one conditional UPDATE with its audit events and the
jobs it queues, claims the job it asks for, records an "approve for this run" grant, and
(PostgreSQL) notifies the other replicas. Both run inside the same write transaction, or,
in an optimistic step on PostgreSQL, without one: the read unlocked, the write one
conditional statement (`storage.database.Database.answer` chooses, see `run_write`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from contracts.enums import ApprovalStatus, JobKind, SurfaceType
from storage import inbound, jobs, ledger, votes
from storage.audit import Event
from storage.direct import NeedsLock, optimistic
from storage.jobs import Job, Queued
from storage.notify import channel_for
from storage.records import Changes, Record
from storage.votes import Vote
from storage.work import Work


@dataclass(frozen=True)
class Loaded:
    """The approval as locked, the instant read under the lock, and whether the message
    that carried the answer is new (False: it was handled before)."""

    record: Record
    now: float
    first: bool = True


@dataclass(frozen=True)
class Grant:
    """An "approve for this run" to record: the folded tool name, the requester key, who."""

    tool_key: str
    requester: str
    granted_by: str


@dataclass(frozen=True)
class Claim:
    """An `execute` job the closing caller sends itself: due, deadline, held until."""

    due: float
    deadline: float
    locked_until: float


def load(
    tx: Work, approval_id: str, clock: Callable[[], float], message: tuple[SurfaceType, str] | None = None
) -> Loaded | None:
    """Lock and read the approval, then the clock; record `message` (None: no approval).

    In an optimistic step (`Database.run_write(optimistic=True)`) the read takes no lock,
    and what needs more than the one conditional write (the message to record, a quorum's
    votes) raises `NeedsLock` so the step runs in a transaction instead."""
    unlocked = optimistic(tx)
    if unlocked and message is not None:
        raise NeedsLock("recording the answer's message is a second write")
    rec = ledger.load(tx, approval_id, lock=not unlocked)
    if rec is None:
        return None
    if unlocked and rec.quorum > 1:
        raise NeedsLock("a quorum's votes are rows of their own")
    now = clock()  # read once the row is locked: the expiry check is against this instant
    first = message is None or inbound.record(tx, *message, now)
    return Loaded(rec, now, first)


def count(tx: Work, rec: Record, now: float, events: list[Event], vote: Vote, *, show: bool) -> Record:
    """Count one Approve toward the quorum (the approval stays pending): its audit events, its
    row, and (`show`) a card update so the surface shows the progress."""
    if optimistic(tx):
        raise NeedsLock("a vote is a row of its own")
    rec = ledger.append(tx, rec, now, events, None, only_pending=True)
    votes.add(tx, rec.id, vote)
    if show:
        jobs.queue(tx, JobKind.SHOW, rec.id, None, now, now + SHOW_WINDOW)
    return replace(rec, votes=votes.joined(rec.votes, vote))


def revise(
    tx: Work,
    rec: Record,
    now: float,
    events: list[Event],
    changes: Changes,
    vote: Vote,
    *,
    show: bool,
    retext: str | None = None,
) -> Record:
    """An edit of a call a quorum must approve (the approval stays pending): the new version
    of the call stored (`changes.edit`) with its audit events, every approval of an earlier
    version set aside, the editor's own Approve counted as the first of the new version,
    (`show`) a card update so the surface shows the edited call, and (`retext`, the new
    version's digest) a job texting it to the numbers an earlier version was texted to,
    due now and tried until the approval expires."""
    rec = ledger.append(tx, rec, now, events, changes, only_pending=True)
    votes.set_aside(tx, rec.id)
    votes.add(tx, rec.id, vote)
    if show:
        jobs.queue(tx, JobKind.SHOW, rec.id, None, now, now + SHOW_WINDOW)
    if retext is not None:
        jobs.queue(tx, JobKind.RETEXT, rec.id, jobs.Version(retext), now, max(rec.expires_at, now))
    return replace(rec, votes=(vote,))


SHOW_WINDOW = 3600.0
"""Seconds a progress update of a card may be retried (as a closed card's update)."""


def write(
    tx: Work,
    rec: Record,
    now: float,
    events: list[Event],
    changes: Changes,
    *,
    queued: Sequence[Queued] = (),
    claim: Claim | None = None,
    grant: Grant | None = None,
    vote: Vote | None = None,
) -> tuple[Record, Job | None]:
    """Apply the transition (only while pending), its jobs and grant, and count `vote` (the
    Approve that made the quorum); the record as it now stands and the `execute` job claimed
    for the caller, if one was asked for. The NOTIFY goes on the channel of the schema the
    work's connection is on (`Work.schema`)."""
    if optimistic(tx) and (vote is not None or claim is not None or grant is not None):
        raise NeedsLock("a vote, a claimed job or a run grant is a second write")
    # The NOTIFY and the queued jobs go with the UPDATE (PostgreSQL: in one statement; the
    # NOTIFY is sent at commit).
    rec = ledger.append(
        tx, rec, now, events, changes, only_pending=True, notify=channel_for(tx.schema), queued=queued
    )
    if vote is not None:
        votes.add(tx, rec.id, vote)
        rec = replace(rec, votes=votes.joined(rec.votes, vote))
    execute = None
    if claim is not None:
        execute = jobs.queue_claimed(
            tx, JobKind.EXECUTE, rec.id, claim.due, claim.deadline, claim.locked_until
        )
    if grant is not None and rec.status is ApprovalStatus.APPROVED:
        ledger.grant_for_run(tx, rec, grant.tool_key, grant.requester, grant.granted_by, now)
    return rec, execute
