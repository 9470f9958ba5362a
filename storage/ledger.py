"""The ledger: synchronous reads and writes of approvals, their hash-chained audit events,
run grants, the job outbox and surface flags.

Every function takes a `Work`, the unit of work of a transaction (`Database.run_write`)
or of a read (`Database.run_read`), so a whole engine step is one call into the database
thread. The statements are built once here; SQLAlchemy
caches their compiled form, and on SQLite those every agent request runs go to the driver
directly (`storage.direct`). The differences between SQLite and PostgreSQL (row locks,
`ON CONFLICT`, `NOTIFY`) stay in this package.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from contracts.enums import ApprovalMode, ApprovalStatus
from contracts.errors import AlreadyDecided
from contracts.ports import Delivered, Route, SmsRoute
from storage import chain_writes, known, votes
from storage.audit import AuditRow, Event, chain_rows
from storage.chain_writes import EVENT_COLUMNS
from storage.direct import Direct, Raced, optimistic
from storage.jobs import Queued, queue
from storage.notify import channel_for
from storage.record_columns import delivered_to_json, delivery_key
from storage.records import Changes, Record
from storage.tables import approvals, audit_events, escalations, flags, run_grants
from storage.work import Work

_BY_ID = sa.select(approvals).where(approvals.c.id == sa.bindparam("id"))
_BY_CALL = sa.select(approvals).where(
    approvals.c.tenant == sa.bindparam("tenant"),
    approvals.c.execution_id == sa.bindparam("execution"),
    approvals.c.tool_call_id == sa.bindparam("call"),
)
GATED_IN_EXECUTION = (
    sa.select(sa.func.count())
    .select_from(approvals)
    .where(
        approvals.c.tenant == sa.bindparam("tenant"),
        approvals.c.execution_id == sa.bindparam("execution"),
        approvals.c.mode != ApprovalMode.NONE.value,
    )
)
# The statements every agent request runs go straight to the driver on SQLite (storage.direct).
_LOAD = Direct(_BY_ID)
_LOAD_LOCKED = Direct(_BY_ID.with_for_update())  # SQLite has no row locks and writes no FOR UPDATE
_MADE_BEFORE = Direct(_BY_CALL)
_GATED = Direct(GATED_IN_EXECUTION)
_INSERT_EVENTS = Direct(audit_events.insert(), EVENT_COLUMNS)
_INSERT_APPROVAL: dict[tuple[str, ...], Direct] = {}


def load(tx: Work, approval_id: str, *, lock: bool = False) -> Record | None:
    """One approval, with the approvals counted so far; `lock` takes the row lock on
    PostgreSQL (SQLite has one writer). Unlocked, in an optimistic step's first try, it is
    the replica's copy when it has one (`storage.known`)."""
    if not lock and (copy := known.offered(tx, approval_id)) is not None:
        return copy
    row = (_LOAD_LOCKED if lock else _LOAD).first(tx, {"id": approval_id})
    return with_votes(tx, Record.from_row(row)) if row else None


def with_votes(tx: Work, rec: Record) -> Record:
    """The record with its counted approvals (read only for a quorum above 1)."""
    if rec.quorum <= 1:
        return rec
    return replace(rec, votes=votes.of(tx, rec.id))


@dataclass(frozen=True)
class Head:
    """What appending to an approval's audit chain needs of it, read without the rest."""

    id: str
    tenant: str
    tool_name: str
    status: ApprovalStatus
    audit_seq: int
    audit_head: str
    operation: bool = False  # an operation: the application, not the agent, reports its outcome


_HEAD_COLUMNS = [
    *(approvals.c[name] for name in ("id", "tenant", "tool_name", "status", "audit_seq", "audit_head")),
    approvals.c.operation.is_not(None).label("is_operation"),
]
_HEAD = Direct(sa.select(*_HEAD_COLUMNS).where(approvals.c.id == sa.bindparam("id")))
_HEAD_LOCKED = Direct(sa.select(*_HEAD_COLUMNS).where(approvals.c.id == sa.bindparam("id")).with_for_update())


def head(tx: Work, approval_id: str, *, lock: bool = False) -> Head | None:
    """An approval's tenant, tool, status and chain head (not its parameters or route);
    `lock` as for `load`."""
    row = (_HEAD_LOCKED if lock else _HEAD).first(tx, {"id": approval_id})
    if row is None:
        return None
    return Head(
        row.id,
        row.tenant,
        row.tool_name,
        ApprovalStatus(row.status),
        row.audit_seq,
        row.audit_head,
        bool(row.is_operation),
    )


def _row_of_call(tx: Work, tenant: str, execution_id: str, tool_call_id: str) -> Any:
    """The raw approvals row of this call (tenant, execution, tool call id), as the driver
    returns it; `load_call` is the typed read."""
    return _MADE_BEFORE.first(tx, {"tenant": tenant, "execution": execution_id, "call": tool_call_id})


def load_call(tx: Work, tenant: str, execution_id: str, tool_call_id: str) -> Record | None:
    """The approval of this call (tenant, execution, tool call id), if it was made before."""
    row = _row_of_call(tx, tenant, execution_id, tool_call_id)
    return with_votes(tx, Record.from_row(row)) if row is not None else None


def gated_count(tx: Work, tenant: str, execution_id: str) -> int:
    """How many of an execution's calls needed more than mode none (counted by the database:
    an execution may make any number of calls that need nobody)."""
    return int(_GATED.scalar(tx, {"tenant": tenant, "execution": execution_id}))


def short_code(tx: Work, route: Route) -> str:
    """Four digits; for SMS, unused among the number's pending requests (replies name it)."""
    if not isinstance(route, SmsRoute):
        return f"{secrets.randbelow(9000) + 1000}"
    key = delivery_key(route)
    for _ in range(20):
        code = f"{secrets.randbelow(9000) + 1000}"
        clash = tx.conn.execute(
            sa.select(approvals.c.id)
            .where(
                approvals.c.delivery_key == key,
                approvals.c.status == "pending",
                approvals.c.short_code == code,
            )
            .limit(1)
        ).first()
        if clash is None:
            return code
    return f"{secrets.randbelow(900000) + 100000}"


def insert_approval(
    tx: Work, values: Mapping[str, Any], events: list[Event], queued: Sequence[Queued] = ()
) -> Record:
    """Insert a new approval with the first links of its audit chain and its first jobs;
    return it as stored. On PostgreSQL this is one statement, so it needs no transaction
    around it (`Database.create`)."""
    rows, seq, head = chain_rows(values["id"], values["tenant"], 0, "0" * 64, values["created_at"], events)
    stored = {**values, "audit_seq": seq, "audit_head": head}
    columns = tuple(stored)
    if tx.conn.dialect.name == "postgresql":
        # One statement: the approval, its audit rows, its jobs (a duplicate call fails it whole).
        made = chain_writes.insert_with_events(columns)
        made.rowcount(tx, {**stored, **chain_writes.event_arrays(rows), **chain_writes.job_arrays(queued)})
        return Record.from_row(SimpleNamespace(**stored))
    insert = _INSERT_APPROVAL.get(columns)
    if insert is None:
        insert = _INSERT_APPROVAL[columns] = Direct(approvals.insert(), columns)
    insert.rowcount(tx, stored)
    _INSERT_EVENTS.many(tx, rows)
    for job in queued:
        queue(tx, job.kind, values["id"], job.payload, job.due, job.deadline)
    return Record.from_row(SimpleNamespace(**stored))


def append(
    tx: Work,
    rec: Record,
    now: float,
    events: list[Event],
    changes: Changes | None = None,
    *,
    only_pending: bool = False,
    notify: str | None = None,
    queued: Sequence[Queued] = (),
) -> Record:
    """Chain `events` onto the approval, apply `changes` and queue `queued` in one
    conditional UPDATE (on PostgreSQL one statement with the audit rows and the jobs).

    The UPDATE requires the chain length we read, so a concurrent append (on PostgreSQL)
    fails loudly instead of forking the chain; with `only_pending` it also requires the
    approval to be pending, which is what makes exactly one decision win. `notify` is the
    channel (`storage.notify.channel_for`) on which the other replicas hear that the
    approval closed, as `notify_closed` tells them, here in the same statement; SQLite
    has no other replicas and ignores it.

    In an optimistic step (`Database.run_write(optimistic=True)`, the row read without its
    lock) the UPDATE also requires a receipt to be still missing if there was none when
    read (the one column written without a link on the chain), and a mismatch raises
    `Raced` so the step runs again, instead of `AlreadyDecided`.
    """
    columns = changes.columns() if changes is not None else None
    values = _chain(
        tx,
        rec.id,
        rec.tenant,
        rec.audit_seq,
        rec.audit_head,
        now,
        events,
        columns,
        only_pending,
        notify,
        queued,
        undelivered=rec.delivered is None,
    )
    return rec.replace(**values)


def add_events(tx: Work, approval: Head, now: float, events: list[Event]) -> None:
    """Chain `events` onto the approval, changing nothing else (as `append` does)."""
    _chain(
        tx,
        approval.id,
        approval.tenant,
        approval.audit_seq,
        approval.audit_head,
        now,
        events,
        None,
        False,
        None,
    )


def note(tx: Work, approval_id: str, now: float, events: list[Event]) -> bool:
    """Chain `events` onto the approval under its lock, changing nothing else (`add_events`);
    False, with nothing written, when there is no such approval."""
    approval = head(tx, approval_id, lock=True)
    if approval is None:
        return False
    add_events(tx, approval, now, events)
    return True


def _chain(
    tx: Work,
    approval_id: str,
    tenant: str,
    seq: int,
    head: str,
    now: float,
    events: list[Event],
    changes: Mapping[str, Any] | None,
    only_pending: bool,
    notify: str | None,
    queued: Sequence[Queued] = (),
    *,
    undelivered: bool = False,
) -> dict[str, Any]:
    known.changed(tx, approval_id)
    rows, new_seq, new_head = chain_rows(approval_id, tenant, seq, head, now, events)
    values = {**(changes or {}), "audit_seq": new_seq, "audit_head": new_head}
    params = {f"set_{k}": v for k, v in values.items()}
    params |= {"where_id": approval_id, "where_seq": seq}
    columns = tuple(values)
    if tx.conn.dialect.name == "postgresql":
        # One round trip: the UPDATE, the audit rows and jobs only if it matched, the NOTIFY.
        raced = optimistic(tx)
        key = (columns, only_pending, notify is not None, bool(queued), raced and undelivered)
        stmt = chain_writes.chain(key)
        if notify is not None:
            params["channel"] = notify
        if queued:
            params |= chain_writes.job_arrays(queued)
        if stmt.scalar(tx, params | chain_writes.event_arrays(rows)) != 1:
            if raced:
                raise Raced(f"approval {approval_id} changed since it was read")
            raise AlreadyDecided(f"approval {approval_id} changed while recording; it is closed")
        return values
    if chain_writes.update(columns, only_pending).rowcount(tx, params) != 1:
        raise AlreadyDecided(f"approval {approval_id} changed while recording; it is closed")
    _INSERT_EVENTS.many(tx, rows)
    for job in queued:
        queue(tx, job.kind, approval_id, job.payload, job.due, job.deadline)
    return values


_IGNORING: dict[tuple[str, str, tuple[str, ...]], Direct] = {}


def insert_ignore(tx: Work, table: sa.Table, values: Mapping[str, Any]) -> bool:
    """INSERT … ON CONFLICT DO NOTHING on either database; True when a row was inserted."""
    key = (tx.conn.dialect.name, table.name, tuple(values))
    stmt = _IGNORING.get(key)
    if stmt is None:
        if tx.conn.dialect.name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        else:
            from sqlalchemy.dialects.postgresql import insert as dialect_insert  # type: ignore[assignment]
        insert = dialect_insert(table).values({c: sa.bindparam(c) for c in values}).on_conflict_do_nothing()
        stmt = _IGNORING[key] = Direct(insert)
    return stmt.rowcount(tx, values) > 0


def grant_for_run(tx: Work, rec: Record, tool_key: str, requester: str, granted_by: str, now: float) -> None:
    """Record "approve for this run": later calls of the tool in the execution, from the same
    requester and conversation, need nobody."""
    insert_ignore(
        tx,
        run_grants,
        {
            "tenant": rec.tenant,
            "execution_id": rec.execution_id,
            "tool_name": tool_key,
            "requester": requester,
            "approval_id": rec.id,
            "granted_by": granted_by,
            "created_at": now,
        },
    )


_NOTIFY = Direct(sa.select(sa.func.pg_notify(sa.bindparam("channel"), sa.bindparam("id"))))


def notify_closed(tx: Work, approval_id: str) -> None:
    """Tell the other replicas (PostgreSQL NOTIFY, sent at commit) that an approval closed."""
    if tx.conn.dialect.name != "sqlite":
        _NOTIFY.first(tx, {"channel": channel_for(tx.schema), "id": approval_id})


def set_receipt_if_pending(tx: Work, approval_id: str, receipt: Delivered) -> None:
    """Store a first receipt (before anything is sent) on a pending approval that has none."""
    known.changed(tx, approval_id)
    tx.conn.execute(
        approvals.update()
        .where(
            approvals.c.id == approval_id,
            approvals.c.status == ApprovalStatus.PENDING.value,
            approvals.c.delivered.is_(None),
        )
        .values(delivered=delivered_to_json(receipt))
    )


def by_delivery(tx: Work, key: str, *, pending: bool, limit: int) -> list[Record]:
    """Approvals delivered at `key` (e.g. `sms:+1555…`), or escalated to it, newest first."""
    escalated = sa.select(escalations.c.approval_id).where(escalations.c.delivery_key == key)
    q = sa.select(approvals).where(
        sa.or_(approvals.c.delivery_key == key, approvals.c.id.in_(escalated.scalar_subquery()))
    )
    if pending:
        q = q.where(approvals.c.status == "pending")
    q = q.order_by(approvals.c.created_at.desc()).limit(limit)
    return [Record.from_row(r) for r in tx.conn.execute(q)]


def due_ids(tx: Work, now: float, limit: int) -> list[str]:
    """Pending approvals whose time is up, oldest first."""
    return list(
        tx.conn.execute(
            sa.select(approvals.c.id)
            .where(approvals.c.status == "pending", approvals.c.expires_at <= now)
            .order_by(approvals.c.expires_at)
            .limit(limit)
        ).scalars()
    )


def next_expiry(tx: Work) -> float | None:
    """When the next pending approval expires."""
    value = tx.conn.execute(
        sa.select(sa.func.min(approvals.c.expires_at)).where(approvals.c.status == "pending")
    ).scalar_one()
    return float(value) if value is not None else None


def events_of(tx: Work, approval_id: str) -> list[AuditRow]:
    """An approval's audit rows, oldest first."""
    rows = tx.conn.execute(
        sa.select(audit_events).where(audit_events.c.approval_id == approval_id).order_by(audit_events.c.seq)
    )
    return [AuditRow.from_row(r) for r in rows]


def get_flag(tx: Work, namespace: str, key: str) -> str | None:
    """A durable flag's value."""
    value = tx.conn.execute(
        sa.select(flags.c.value).where(flags.c.namespace == namespace, flags.c.key == key)
    ).scalar_one_or_none()
    return str(value) if value is not None else None


def mark_once(tx: Work, namespace: str, key: str, now: float) -> bool:
    """Record `key` in `namespace`; True the first time, False for a repeat."""
    return insert_ignore(tx, flags, {"namespace": namespace, "key": key, "value": "1", "created_at": now})


def set_flag(tx: Work, namespace: str, key: str, value: str | None, now: float) -> None:
    """Set or clear a durable flag."""
    tx.conn.execute(flags.delete().where(flags.c.namespace == namespace, flags.c.key == key))
    if value is not None:
        tx.conn.execute(flags.insert().values(namespace=namespace, key=key, value=value, created_at=now))
