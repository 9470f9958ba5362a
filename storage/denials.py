"""The standing denies store: record one in force per scope, find it, list and lift them.

A scope is matched by equality on every field (`contracts.denials.Scope`), never by
pattern, so a standing deny cannot cover more than the requests it was set for. Lifting
keeps the row (with when and by whom), so refusals that named it stay explainable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from contracts.denials import Scope
from contracts.enums import SurfaceType
from storage.direct import Direct
from storage.ledger import insert_ignore
from storage.tables import metadata
from storage.work import Work

standing_denies = sa.Table(
    "standing_denies",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("tenant", sa.String(100), nullable=False),
    sa.Column("tool_name", sa.String(128), nullable=False),
    sa.Column("surface", sa.String(16), nullable=False),
    sa.Column("approver", sa.String(200), nullable=False),
    sa.Column("approver_team", sa.String(64)),
    sa.Column("requester", sa.String(250), nullable=False),
    sa.Column("approval_id", sa.String(40), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("lifted_at", sa.Double),
    sa.Column("lifted_by", sa.String(250)),
)
_T = standing_denies.c


@dataclass(frozen=True)
class StandingDeny:
    """One standing deny as stored."""

    id: str
    scope: Scope
    approver_team: str | None
    approval_id: str
    created_at: float
    lifted_at: float | None
    lifted_by: str | None

    @classmethod
    def from_row(cls, row: Any) -> StandingDeny:
        """Build from a row of the standing_denies table."""
        scope = Scope(row.tenant, row.tool_name, SurfaceType(row.surface), row.approver, row.requester)
        return cls(
            row.id, scope, row.approver_team, row.approval_id, row.created_at, row.lifted_at, row.lifted_by
        )


# Built once with bound parameters: this lookup runs in every gated request's write
# transaction, and building and cache-keying the statement anew cost more than the query.
_IN_FORCE = Direct(
    sa.select(standing_denies).where(
        _T.tenant == sa.bindparam("tenant"),
        _T.tool_name == sa.bindparam("tool_name"),
        _T.surface == sa.bindparam("surface"),
        _T.approver == sa.bindparam("approver"),
        _T.requester == sa.bindparam("requester"),
        _T.lifted_at.is_(None),
    )
)


def in_force(tx: Work, scope: Scope) -> StandingDeny | None:
    """The standing deny in force for exactly this scope, if any."""
    row = _IN_FORCE.first(
        tx,
        {
            "tenant": scope.tenant,
            "tool_name": scope.tool_name,
            "surface": scope.surface.value,
            "approver": scope.approver,
            "requester": scope.requester,
        },
    )
    return StandingDeny.from_row(row) if row else None


def record(
    tx: Work, denial_id: str, scope: Scope, team: str | None, approval_id: str, now: float
) -> StandingDeny:
    """Put a standing deny in force for `scope`; if one already is, that one is kept and returned."""
    insert_ignore(
        tx,
        standing_denies,
        {
            "id": denial_id,
            "tenant": scope.tenant,
            "tool_name": scope.tool_name,
            "surface": scope.surface.value,
            "approver": scope.approver,
            "approver_team": team,
            "requester": scope.requester,
            "approval_id": approval_id,
            "created_at": now,
        },
    )
    found = in_force(tx, scope)
    if found is None:  # only if it was lifted between the two statements, which one writer rules out
        raise LookupError(f"standing deny for {scope} vanished while it was recorded")
    return found


def load(tx: Work, denial_id: str) -> StandingDeny | None:
    """One standing deny by id, lifted or not."""
    row = tx.conn.execute(sa.select(standing_denies).where(_T.id == denial_id)).first()
    return StandingDeny.from_row(row) if row else None


def listed(
    tx: Work,
    tenant: str | None = None,
    *,
    surface: SurfaceType | None = None,
    approver: str | None = None,
    limit: int = 500,
) -> list[StandingDeny]:
    """Standing denies in force, newest first: all, one tenant's, or one person's in a tenant."""
    q = sa.select(standing_denies).where(_T.lifted_at.is_(None))
    if tenant is not None:
        q = q.where(_T.tenant == tenant)
    if surface is not None and approver is not None:
        q = q.where(_T.surface == surface.value, _T.approver == approver)
    q = q.order_by(_T.created_at.desc(), _T.id).limit(limit)
    return [StandingDeny.from_row(r) for r in tx.conn.execute(q)]


def lift(tx: Work, denial_id: str, by: str, now: float) -> bool:
    """Mark a standing deny lifted; False if it was lifted already (the first lift stands)."""
    result = tx.conn.execute(
        standing_denies.update()
        .where(_T.id == denial_id, _T.lifted_at.is_(None))
        .values(lifted_at=now, lifted_by=by)
    )
    return bool(result.rowcount)
