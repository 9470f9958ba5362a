"""The job outbox: rows written in the same transaction as the change that needs them.

A worker claims due rows by moving `locked_until` forward (with `FOR UPDATE SKIP LOCKED` on
PostgreSQL), so each attempt runs on one replica only, and none is lost across a crash.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from contracts.enums import JobKind
from storage.direct import Direct
from storage.tables import jobs
from storage.work import Work

_INSERT = jobs.insert()
_QUEUE = Direct(
    _INSERT, ("kind", "approval_id", "payload", "due_at", "deadline_at", "attempts", "locked_until")
)


@dataclass(frozen=True)
class Job:
    """One claimed attempt of a job."""

    id: int
    kind: JobKind
    approval_id: str
    payload: Mapping[str, Any]
    attempts: int
    deadline_at: float


@dataclass(frozen=True)
class Queued:
    """A job to add with a new approval: its kind, when it is due, until when it is tried."""

    kind: JobKind
    due: float
    deadline: float
    payload: Mapping[str, Any] = field(default_factory=dict)


def queue(
    tx: Work, kind: JobKind, approval_id: str, payload: Mapping[str, Any], due: float, deadline: float
) -> None:
    """Add a job, in the caller's transaction."""
    _QUEUE.rowcount(
        tx,
        {
            "kind": kind.value,
            "approval_id": approval_id,
            "payload": json.dumps(dict(payload)),
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
    return Job(id=row.id, kind=kind, approval_id=approval_id, payload={}, attempts=1, deadline_at=deadline)


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
            payload=json.loads(row.payload),
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
        payload=json.loads(row.payload),
        attempts=row.attempts,
        deadline_at=row.deadline_at,
    )


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
