"""What the inbox lists: a set of tenants' pending or decided approvals, newest first."""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa

from storage.database import Tx
from storage.records import Record
from storage.tables import approvals


def listed(
    tx: Tx,
    tenants: Collection[str],
    *,
    pending: bool,
    tool: str | None = None,
    status: str | None = None,
    since: float | None = None,
    limit: int = 100,
) -> list[Record]:
    """Approvals of `tenants`, pending or decided, filtered by tool, status and creation time."""
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
    q = q.order_by(approvals.c.created_at.desc()).limit(limit)
    return [Record.from_row(r) for r in tx.execute(q)]
