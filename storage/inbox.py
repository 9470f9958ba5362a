"""What the inbox lists: a set of tenants' pending or decided approvals, newest first."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

import sqlalchemy as sa

from contracts.answers import PersonDecider
from contracts.enums import SurfaceType
from contracts.ports import Placed
from storage import votes
from storage.records import Record
from storage.tables import approvals
from storage.work import Work


def listed(
    tx: Work,
    tenants: Collection[str],
    *,
    pending: bool,
    tool: str | None = None,
    status: str | None = None,
    since: float | None = None,
    until: float | None = None,
    decided_by: str | None = None,
    limit: int = 100,
) -> list[Record]:
    """Approvals of `tenants`, pending or decided, filtered by tool, status, creation time
    (`since` ≤ created < `until`) and a part of the id of who decided (case-insensitive)."""
    if not tenants:
        return []
    q = sa.select(approvals).where(approvals.c.tenant.in_(sorted(tenants)))
    q = q.where(approvals.c.status == "pending") if pending else q.where(approvals.c.status != "pending")
    if tool:
        q = q.where(approvals.c.tool_name == tool)
    if status:
        q = q.where(approvals.c.status == status)
    if since is not None:
        q = q.where(approvals.c.created_at >= since)
    if until is not None:
        q = q.where(approvals.c.created_at < until)
    if decided_by:
        # The decider's JSON holds the id; the typed decider is checked again below.
        q = q.where(sa.func.lower(approvals.c.decided_by).contains(decided_by.lower(), autoescape=True))
    q = q.order_by(approvals.c.created_at.desc()).limit(limit)
    recs = [Record.from_row(r) for r in tx.conn.execute(q)]
    if decided_by:
        recs = [r for r in recs if decided_by.lower() in _decider_id(r).lower()]
    counted = votes.of_many(tx, [r.id for r in recs if r.quorum > 1])
    return [replace(r, votes=counted[r.id]) if r.id in counted else r for r in recs]


def _decider_id(rec: Record) -> str:
    """The id of the person who decided, or empty: the policy, a timeout, the agent."""
    by = rec.decided_by
    return by.userId if isinstance(by, PersonDecider) else ""


def naming(tx: Work, tenant: str, surface: SurfaceType, person: str, limit: int = 200) -> list[Placed]:
    """Pending requests of `tenant` routed to `surface` that name `person` as an approver."""
    found = []
    for rec in listed(tx, [tenant], pending=True, limit=limit):
        placed = rec.placed()
        if placed is not None and person in rec.approvers_on(surface):
            found.append(placed)
    return found


def texted(tx: Work, numbers: Collection[str], limit: int = 200) -> list[Record]:
    """Pending approvals of any tenant whose text or WhatsApp message went to one of `numbers`."""
    if not numbers:
        return []
    # The route's JSON names each number quoted; the match is checked again on the typed route.
    q = (
        sa.select(approvals)
        .where(
            approvals.c.status == "pending",
            approvals.c.delivery_key.like("sms:%"),
            sa.or_(*(approvals.c.route.contains(f'"{n}"', autoescape=True) for n in numbers)),
        )
        .order_by(approvals.c.created_at.desc())
        .limit(limit)
    )
    wanted = set(numbers)
    found = []
    for row in tx.conn.execute(q):
        rec = Record.from_row(row)
        if rec.route is not None and wanted & set(rec.route.approvers):
            found.append(rec)
    return found
