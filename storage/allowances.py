"""The standing allows store: record one, find those a new call may be covered by, count a
use, list and revoke them.

A standing allow is matched by equality on tenant, tool, requester and the digest of the
arguments that must match, and only while it is unrevoked, unexpired and has uses left;
the `at_most` numbers are compared by the caller (`bot.approvals.intake.weigh`). Nothing
is cached: every create reads the table, so a revocation holds from the next call on
every replica. Revoking keeps the row (with when and by whom), so decisions that named it
stay explainable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from contracts.enums import SurfaceType
from storage.direct import Direct, NeedsLock, single_write
from storage.tables import metadata
from storage.work import Work

allowances = sa.Table(
    "allowances",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("tenant", sa.String(100), nullable=False),
    sa.Column("tool_name", sa.String(128), nullable=False),
    sa.Column("requester", sa.String(250), nullable=False),
    sa.Column("match_key", sa.String(80), nullable=False),
    sa.Column("match_shown", sa.Text, nullable=False),
    sa.Column("at_most", sa.Text, nullable=False),
    sa.Column("surface", sa.String(16), nullable=False),
    sa.Column("granted_by", sa.String(200), nullable=False),
    sa.Column("granted_team", sa.String(64)),
    sa.Column("approval_id", sa.String(40), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("expires_at", sa.Double, nullable=False),
    sa.Column("uses", sa.Integer, nullable=False),
    sa.Column("max_uses", sa.Integer, nullable=False),
    sa.Column("revoked_at", sa.Double),
    sa.Column("revoked_by", sa.String(250)),
    sa.Index("ix_allowances_scope", "tenant", "tool_name", "requester", "match_key"),
)
_T = allowances.c


@dataclass(frozen=True)
class Scope:
    """What a standing allow covers: calls of one tool from one requester in one conversation,
    in one tenant, with these arguments equal (their digest, `match_key`)."""

    tenant: str
    tool_name: str  # folded (`contracts.names.fold`)
    requester: str  # `bot.approvals.run_grants.requester_key`
    match_key: str


@dataclass(frozen=True)
class StandingAllow:
    """One standing allow as stored."""

    id: str
    scope: Scope
    match_shown: dict[str, Any]
    at_most: dict[str, float]
    surface: SurfaceType
    granted_by: str
    granted_team: str | None
    approval_id: str
    created_at: float
    expires_at: float
    uses: int
    max_uses: int
    revoked_at: float | None = None
    revoked_by: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> StandingAllow:
        """Build from a row of the allowances table."""
        return cls(
            row.id,
            Scope(row.tenant, row.tool_name, row.requester, row.match_key),
            json.loads(row.match_shown),
            json.loads(row.at_most),
            SurfaceType(row.surface),
            row.granted_by,
            row.granted_team,
            row.approval_id,
            row.created_at,
            row.expires_at,
            row.uses,
            row.max_uses,
            row.revoked_at,
            row.revoked_by,
        )

    def covers(self, numbers: dict[str, float]) -> bool:
        """Whether a call with these `at_most` numbers stays within it: the same paths, each
        at most the approved value."""
        return set(numbers) == set(self.at_most) and all(numbers[p] <= v for p, v in self.at_most.items())


# Built once with bound parameters: it runs in the create of every call of a tool that sets
# allow_for, and building and cache-keying the statement anew would cost more than the query.
_IN_FORCE = Direct(
    sa.select(allowances)
    .where(
        _T.tenant == sa.bindparam("tenant"),
        _T.tool_name == sa.bindparam("tool_name"),
        _T.requester == sa.bindparam("requester"),
        _T.match_key == sa.bindparam("match_key"),
        _T.revoked_at.is_(None),
        _T.expires_at > sa.bindparam("now"),
        _T.uses < _T.max_uses,
    )
    .order_by(_T.created_at, _T.id)
    .limit(20)
)
_USE = Direct(
    allowances.update()
    .where(
        _T.id == sa.bindparam("allowance_id"),
        _T.revoked_at.is_(None),
        _T.expires_at > sa.bindparam("now"),
        _T.uses < _T.max_uses,
    )
    .values(uses=_T.uses + 1)
)


class UsedUp(Exception):
    """A standing allow ran out (or was revoked) between the read and the use: a concurrent
    call took its last use. Nothing was written; the create runs again and reads anew."""


def in_force(tx: Work, scope: Scope, now: float) -> tuple[StandingAllow, ...]:
    """The standing allows in force at `now` for exactly this scope, oldest first."""
    params = {
        "tenant": scope.tenant,
        "tool_name": scope.tool_name,
        "requester": scope.requester,
        "match_key": scope.match_key,
        "now": now,
    }
    return tuple(StandingAllow.from_row(r) for r in _IN_FORCE.all(tx, params))


def use(tx: Work, allowance_id: str, now: float) -> None:
    """Count one use; `UsedUp` if it has none left, expired or was revoked meanwhile. A use
    is a write besides the approval's: a step allowed one write runs again in a transaction."""
    if single_write(tx):
        raise NeedsLock("a standing allow's use is a second write")
    if not _USE.rowcount(tx, {"allowance_id": allowance_id, "now": now}):
        raise UsedUp(allowance_id)


def record(tx: Work, held: StandingAllow) -> StandingAllow:
    """Put a standing allow in force."""
    tx.conn.execute(
        allowances.insert().values(
            id=held.id,
            tenant=held.scope.tenant,
            tool_name=held.scope.tool_name,
            requester=held.scope.requester,
            match_key=held.scope.match_key,
            match_shown=json.dumps(held.match_shown, separators=(",", ":"), ensure_ascii=False),
            at_most=json.dumps(held.at_most, separators=(",", ":")),
            surface=held.surface.value,
            granted_by=held.granted_by,
            granted_team=held.granted_team,
            approval_id=held.approval_id,
            created_at=held.created_at,
            expires_at=held.expires_at,
            uses=held.uses,
            max_uses=held.max_uses,
        )
    )
    return held


def load(tx: Work, allowance_id: str) -> StandingAllow | None:
    """One standing allow by id, revoked or not."""
    row = tx.conn.execute(sa.select(allowances).where(_T.id == allowance_id)).first()
    return StandingAllow.from_row(row) if row else None


def listed(
    tx: Work,
    tenant: str | None,
    now: float,
    *,
    surface: SurfaceType | None = None,
    granted_by: str | None = None,
    limit: int = 500,
) -> list[StandingAllow]:
    """Standing allows in force at `now`, newest first: all, one tenant's, or one person's."""
    q = sa.select(allowances).where(_T.revoked_at.is_(None), _T.expires_at > now, _T.uses < _T.max_uses)
    if tenant is not None:
        q = q.where(_T.tenant == tenant)
    if surface is not None and granted_by is not None:
        q = q.where(_T.surface == surface.value, _T.granted_by == granted_by)
    q = q.order_by(_T.created_at.desc(), _T.id).limit(limit)
    return [StandingAllow.from_row(r) for r in tx.conn.execute(q)]


def revoke(tx: Work, allowance_id: str, by: str, now: float) -> bool:
    """Mark a standing allow revoked; False if it was revoked already (the first one stands)."""
    result = tx.conn.execute(
        allowances.update()
        .where(_T.id == allowance_id, _T.revoked_at.is_(None))
        .values(revoked_at=now, revoked_by=by)
    )
    return bool(result.rowcount)
