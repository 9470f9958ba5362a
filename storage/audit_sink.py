"""The audit sink's queue: each approval's audit chain, read from where the sink left it.

Nothing is copied into a queue: `approvals.sink_seq` marks how far the sink has accepted an
approval's events (migration 0019), so an event is queued by being written to the chain and
survives any restart with it. The worker claims approvals the sink is behind on (a lease in
`sink_due_at`, with `FOR UPDATE SKIP LOCKED` on PostgreSQL, so one replica sends each
approval's events, in their order), reads the events after `sink_seq`, and moves the mark.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from storage.audit import AuditRow
from storage.tables import approvals, audit_events
from storage.work import Work


@dataclass(frozen=True)
class Behind:
    """An approval the sink is behind on: events after `sent` are still to send."""

    approval_id: str
    sent: int
    attempts: int


@dataclass(frozen=True)
class Backlog:
    """What the sink has still to accept: events, and the approvals they are on."""

    events: int
    approvals: int


_BEHIND = approvals.c.audit_seq > approvals.c.sink_seq


def claim(tx: Work, now: float, lock_seconds: float, batch: int) -> list[Behind]:
    """Lease up to `batch` approvals the sink is behind on and may be tried now, oldest first."""
    due = (
        sa.select(approvals.c.id)
        .where(_BEHIND, approvals.c.sink_due_at <= now)
        .order_by(approvals.c.sink_due_at, approvals.c.created_at)
        .limit(batch)
    )
    if tx.conn.dialect.name != "sqlite":
        due = due.with_for_update(skip_locked=True)
    stmt = (
        approvals.update()
        .where(approvals.c.id.in_(due.scalar_subquery()), approvals.c.sink_due_at <= now)
        .values(sink_due_at=now + lock_seconds)
        .returning(approvals.c.id, approvals.c.sink_seq, approvals.c.sink_attempts, approvals.c.created_at)
    )
    rows = sorted(tx.conn.execute(stmt).all(), key=lambda r: r.created_at)
    return [Behind(r.id, r.sink_seq, r.sink_attempts) for r in rows]


def unsent(tx: Work, approval_id: str, after: int, limit: int) -> list[AuditRow]:
    """The approval's events after seq `after`, in order, at most `limit`."""
    rows = tx.conn.execute(
        sa.select(audit_events)
        .where(audit_events.c.approval_id == approval_id, audit_events.c.seq > after)
        .order_by(audit_events.c.seq)
        .limit(limit)
    )
    return [AuditRow.from_row(r) for r in rows]


def sent(tx: Work, approval_id: str, upto: int, *, retry_at: float | None, attempts: int) -> None:
    """The sink accepted the approval's events up to seq `upto`; with `retry_at`, the next one
    failed (`attempts` in a row) and waits until then; else the lease ends now."""
    tx.conn.execute(
        approvals.update()
        .where(approvals.c.id == approval_id)
        .values(
            sink_seq=sa.func.max(approvals.c.sink_seq, upto)
            if tx.conn.dialect.name == "sqlite"
            else sa.func.greatest(approvals.c.sink_seq, upto),
            sink_due_at=retry_at if retry_at is not None else 0.0,
            sink_attempts=attempts,
        )
    )


def backlog(tx: Work) -> Backlog:
    """The sink's backlog, read through the index of approvals it is behind on."""
    row = tx.conn.execute(
        sa.select(
            sa.func.coalesce(sa.func.sum(approvals.c.audit_seq - approvals.c.sink_seq), 0),
            sa.func.count(),
        ).where(_BEHIND)
    ).one()
    return Backlog(int(row[0]), int(row[1]))
