"""The job outbox: rows written in the same transaction as the change that needs them.

A worker claims due rows by moving `locked_until` forward (with `FOR UPDATE SKIP LOCKED` on
PostgreSQL), so each attempt runs on one replica only, and none is lost across a crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlalchemy as sa

from contracts.enums import ApproverKind, JobKind
from contracts.ports import Route
from storage.direct import Direct
from storage.record_columns import route_fields, route_from_fields
from storage.tables import jobs
from storage.work import Work

_INSERT = jobs.insert()
_QUEUE = Direct(
    _INSERT, ("kind", "approval_id", "payload", "due_at", "deadline_at", "attempts", "locked_until")
)


@dataclass(frozen=True)
class Delivery:
    """What a callback or a handoff check carries: the id of its delivery (the receiver
    deduplicates on it; a handoff check runs for the delivery it was queued for only)."""

    id: str


@dataclass(frozen=True)
class EscalationStep:
    """What an escalation carries: its step, whom it asks, the route it delivers on."""

    step: int
    to: ApproverKind
    route: Route
    oncall: str | None = None  # a rotation (`oncall:pagerduty:EP1:2`) asked first, `route` its fallback


@dataclass(frozen=True)
class Version:
    """What a retext carries: the digest of the edited call to text (a later edit queues
    its own; a retext of a version replaced since texts nothing)."""

    digest: str


# A job's payload, by kind: callback and verify a Delivery, escalate an EscalationStep,
# retext a Version, the others nothing. Stored as the JSON object it always was.
Payload = Delivery | EscalationStep | Version | None


def payload_json(payload: Payload) -> str:
    """The jobs table's `payload` text."""
    if isinstance(payload, Delivery):
        return json.dumps({"delivery": payload.id})
    if isinstance(payload, EscalationStep):
        step = {"step": payload.step, "to": payload.to.value, "route": route_fields(payload.route)}
        if payload.oncall is not None:
            step["oncall"] = payload.oncall
        return json.dumps(step)
    if isinstance(payload, Version):
        return json.dumps({"digest": payload.digest})
    return "{}"


def payload_from_json(text: str) -> Payload:
    """Rebuild a stored payload."""
    d = json.loads(text)
    if "delivery" in d:
        return Delivery(str(d["delivery"]))
    if "step" in d:
        oncall = d.get("oncall")
        return EscalationStep(
            int(d["step"]),
            ApproverKind(d["to"]),
            route_from_fields(d["route"]),
            str(oncall) if oncall is not None else None,
        )
    if "digest" in d:
        return Version(str(d["digest"]))
    return None


@dataclass(frozen=True)
class Job:
    """One claimed attempt of a job."""

    id: int
    kind: JobKind
    approval_id: str
    payload: Payload
    attempts: int
    deadline_at: float

    @property
    def delivery(self) -> str | None:
        """The delivery id of a callback or a handoff check (None for other kinds)."""
        return self.payload.id if isinstance(self.payload, Delivery) else None


@dataclass(frozen=True)
class Queued:
    """A job to add with a new approval: its kind, when it is due, until when it is tried."""

    kind: JobKind
    due: float
    deadline: float
    payload: Payload = None


def queue(tx: Work, kind: JobKind, approval_id: str, payload: Payload, due: float, deadline: float) -> None:
    """Add a job, in the caller's transaction."""
    _QUEUE.rowcount(
        tx,
        {
            "kind": kind.value,
            "approval_id": approval_id,
            "payload": payload_json(payload),
            "due_at": due,
            "deadline_at": deadline,
            "attempts": 0,
            "locked_until": 0,
        },
    )


def queue_claimed(
    tx: Work, kind: JobKind, approval_id: str, due: float, deadline: float, locked_until: float
) -> Job:
    """Add a job already claimed by its caller (its first attempt counted), in the caller's
    transaction: the caller runs it at once, and the worker takes it over after
    `locked_until` only if that attempt never finished it."""
    row = tx.conn.execute(
        _INSERT.returning(jobs.c.id),
        {
            "kind": kind.value,
            "approval_id": approval_id,
            "payload": "{}",
            "due_at": due,
            "deadline_at": deadline,
            "attempts": 1,
            "locked_until": locked_until,
        },
    ).one()
    return Job(id=row.id, kind=kind, approval_id=approval_id, payload=None, attempts=1, deadline_at=deadline)


def claim(tx: Work, now: float, lock_seconds: float, batch: int) -> list[Job]:
    """Lock up to `batch` due jobs for `lock_seconds` and count the attempt."""
    due = (
        sa.select(jobs.c.id)
        .where(jobs.c.done_at.is_(None), jobs.c.due_at <= now, jobs.c.locked_until <= now)
        .order_by(jobs.c.due_at)
        .limit(batch)
    )
    if tx.conn.dialect.name != "sqlite":
        due = due.with_for_update(skip_locked=True)
    stmt = (
        jobs.update()
        .where(jobs.c.id.in_(due.scalar_subquery()), jobs.c.locked_until <= now)
        .values(locked_until=now + lock_seconds, attempts=jobs.c.attempts + 1)
        .returning(
            jobs.c.id, jobs.c.kind, jobs.c.approval_id, jobs.c.payload, jobs.c.attempts, jobs.c.deadline_at
        )
    )
    return [
        Job(
            id=row.id,
            kind=JobKind(row.kind),
            approval_id=row.approval_id,
            payload=payload_from_json(row.payload),
            attempts=row.attempts,
            deadline_at=row.deadline_at,
        )
        for row in tx.conn.execute(stmt).all()
    ]


def claim_one(tx: Work, approval_id: str, kind: JobKind, now: float, lock_seconds: float) -> Job | None:
    """Claim one approval's due job of `kind` right away (as `claim` would), if nobody holds it."""
    stmt = (
        jobs.update()
        .where(
            jobs.c.approval_id == approval_id,
            jobs.c.kind == kind.value,
            jobs.c.done_at.is_(None),
            jobs.c.due_at <= now,
            jobs.c.locked_until <= now,
        )
        .values(locked_until=now + lock_seconds, attempts=jobs.c.attempts + 1)
        .returning(
            jobs.c.id, jobs.c.kind, jobs.c.approval_id, jobs.c.payload, jobs.c.attempts, jobs.c.deadline_at
        )
    )
    row = tx.conn.execute(stmt).first()
    if row is None:
        return None
    return Job(
        id=row.id,
        kind=JobKind(row.kind),
        approval_id=row.approval_id,
        payload=payload_from_json(row.payload),
        attempts=row.attempts,
        deadline_at=row.deadline_at,
    )


def due_by_kind(tx: Work, now: float) -> dict[JobKind, int]:
    """How many unfinished jobs of each kind are due at `now` (waiting for a worker or running)."""
    stmt = (
        sa.select(jobs.c.kind, sa.func.count())
        .where(jobs.c.done_at.is_(None), jobs.c.due_at <= now)
        .group_by(jobs.c.kind)
    )
    return {JobKind(kind): int(count) for kind, count in tx.conn.execute(stmt).all()}


def finish(tx: Work, job_id: int, now: float, error: str | None = None) -> None:
    """Mark a job done (successfully, or given up with `error`)."""
    tx.conn.execute(jobs.update().where(jobs.c.id == job_id).values(done_at=now, last_error=error))


def reschedule(tx: Work, job_id: int, retry_at: float, error: str) -> None:
    """Release a job for another attempt at `retry_at`."""
    tx.conn.execute(
        jobs.update().where(jobs.c.id == job_id).values(due_at=retry_at, locked_until=0, last_error=error)
    )


def relock(tx: Work, job_id: int, until: float) -> None:
    """Hold a claimed job until `until` (a long call), or release it sooner after a crash."""
    tx.conn.execute(jobs.update().where(jobs.c.id == job_id).values(locked_until=until))
