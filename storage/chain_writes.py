"""The statements that write an approval's row together with the links of its audit chain
and its jobs (`storage.ledger`'s `insert_approval` and `append`), built once each.

PostgreSQL writes a step's rows in one statement: the audit rows travel as one array per
column and `unnest` turns them back into rows, so the statement is the same prepared one
whatever the number of events; data-modifying CTEs run once each, in the same snapshot.
SQLite runs the plain conditional UPDATE (`update`) and inserts the rows after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from storage.direct import Direct
from storage.jobs import Queued, payload_json
from storage.tables import approvals, audit_events, jobs

EVENT_COLUMNS = ("approval_id", "tenant", "seq", "at", "event", "actor", "data", "prev_hash", "hash")

_EVENT_ARRAYS = [
    sa.bindparam(f"ev_{c}", type_=postgresql.ARRAY(audit_events.c[c].type)) for c in EVENT_COLUMNS
]
_CHAINS: dict[tuple[tuple[str, ...], bool, bool, bool, bool], Direct] = {}
_INSERT_WITH_EVENTS: dict[tuple[str, ...], Direct] = {}


_JOB_ARRAYS = {
    c: sa.bindparam(f"job_{c}", type_=postgresql.ARRAY(jobs.c[c].type))
    for c in ("kind", "payload", "due_at", "deadline_at")
}


def event_arrays(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {f"ev_{c}": [r[c] for r in rows] for c in EVENT_COLUMNS}


def job_arrays(queued: Sequence[Queued]) -> dict[str, list[Any]]:
    return {
        "job_kind": [j.kind.value for j in queued],
        "job_payload": [payload_json(j.payload) for j in queued],
        "job_due_at": [j.due for j in queued],
        "job_deadline_at": [j.deadline for j in queued],
    }


def _events_from_arrays(only_after: Any = None) -> sa.Insert:
    linked = sa.func.unnest(*_EVENT_ARRAYS).table_valued(*EVENT_COLUMNS).render_derived()
    rows = sa.select(*(linked.c[c] for c in EVENT_COLUMNS))
    if only_after is not None:
        rows = rows.where(sa.exists(sa.select(only_after.c.id)))
    return audit_events.insert().from_select(list(EVENT_COLUMNS), rows)


def _jobs_from_arrays(approval_id: str, only_after: Any = None) -> sa.Insert:
    """The jobs of the `job_*` arrays for the approval bound as `approval_id` (with
    `only_after`, only if that CTE has a row)."""
    due = sa.func.unnest(*_JOB_ARRAYS.values()).table_valued(*_JOB_ARRAYS).render_derived()
    rows = sa.select(
        sa.bindparam(approval_id, type_=approvals.c.id.type),
        *(due.c[c] for c in _JOB_ARRAYS),
        sa.literal(0, sa.Integer),
        sa.literal(0.0, sa.Double),
    )
    if only_after is not None:
        rows = rows.where(sa.exists(sa.select(only_after.c.id)))
    return jobs.insert().from_select(
        ["approval_id", "kind", "payload", "due_at", "deadline_at", "attempts", "locked_until"], rows
    )


def _insert_with_events(columns: tuple[str, ...]) -> sa.Insert:
    made = approvals.insert().values({c: sa.bindparam(c) for c in columns}).cte("made")
    return _events_from_arrays().add_cte(made).add_cte(_jobs_from_arrays("id").cte("queued"))


def _update_with_events(
    columns: tuple[str, ...], only_pending: bool, notify: bool, with_jobs: bool, undelivered: bool
) -> sa.Select[Any]:
    update = _update_stmt(columns, only_pending)
    if undelivered:
        update = update.where(approvals.c.delivered.is_(None))
    changed = update.returning(approvals.c.id).cte("changed")
    chained = _events_from_arrays(changed).cte("chained")
    counts = [sa.select(sa.func.count()).select_from(changed).scalar_subquery().label("changed")]
    if notify:
        told = sa.select(sa.func.pg_notify(sa.bindparam("channel"), changed.c.id)).cte("told")
        counts.append(sa.select(sa.func.count()).select_from(told).scalar_subquery().label("told"))
    out = sa.select(*counts).add_cte(chained)
    if with_jobs:
        out = out.add_cte(_jobs_from_arrays("where_id", changed).cte("queued"))
    return out


# The conditional UPDATEs `append` runs, one per set of columns, built once with bound
# parameters: a statement object built per call costs more than running it (SQLAlchemy
# derives its cache key from the structure each time). The column sets are the few that
# the code writes, so this stays small.
_UPDATES: dict[tuple[tuple[str, ...], bool], Direct] = {}


def _update_stmt(columns: tuple[str, ...], only_pending: bool) -> sa.Update:
    where = [
        approvals.c.id == sa.bindparam("where_id"),
        approvals.c.audit_seq == sa.bindparam("where_seq"),
    ]
    if only_pending:
        where.append(approvals.c.status == "pending")
    return approvals.update().where(*where).values({c: sa.bindparam(f"set_{c}") for c in columns})


def update(columns: tuple[str, ...], only_pending: bool) -> Direct:
    stmt = _UPDATES.get((columns, only_pending))
    if stmt is None:
        stmt = _UPDATES[(columns, only_pending)] = Direct(_update_stmt(columns, only_pending))
    return stmt


def insert_with_events(columns: tuple[str, ...]) -> Direct:
    """PostgreSQL's one INSERT of a new approval (these columns), its audit rows and its jobs."""
    made = _INSERT_WITH_EVENTS.get(columns)
    if made is None:
        made = _INSERT_WITH_EVENTS[columns] = Direct(_insert_with_events(columns), writes=True)
    return made


def chain(key: tuple[tuple[str, ...], bool, bool, bool, bool]) -> Direct:
    """PostgreSQL's one conditional UPDATE of an approval with its audit rows, its jobs and
    its NOTIFY: `key` is (columns, only pending, notify, with jobs, only while undelivered)."""
    stmt = _CHAINS.get(key)
    if stmt is None:
        stmt = _CHAINS[key] = Direct(_update_with_events(*key), writes=True)
    return stmt
