"""The approvals counted so far toward a quorum above 1: one row per approver and approval.

Rows are written only under the approval's lock (`storage.answers.load`), in the same
transaction as the audit event that records them; the primary key (approval, approver)
is the last guard against counting one id twice. A row also keeps the other ids an identity
provider vouched for with the answer (`tied`), so a later answer is compared with every id
the approver held (`bot.policy.people`).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import sqlalchemy as sa

from contracts.enums import SurfaceType
from storage.direct import Direct
from storage.records import Vote
from storage.tables import approval_votes
from storage.work import Work

__all__ = ["Vote", "add", "joined", "of", "of_many", "set_aside"]

# Every answer to a quorum and every read of one run these: straight to the driver on SQLite.
_COLUMNS = (
    approval_votes.c.approval_id,
    approval_votes.c.approver,
    approval_votes.c.surface,
    approval_votes.c.at,
    approval_votes.c.tied,
)
_OF = Direct(
    sa.select(*_COLUMNS)
    .where(approval_votes.c.approval_id == sa.bindparam("id"))
    .order_by(approval_votes.c.at, approval_votes.c.approver)
)
_ADD = Direct(approval_votes.insert(), ("approval_id", "approver", "surface", "at", "tied"))
_SET_ASIDE = approval_votes.delete().where(approval_votes.c.approval_id == sa.bindparam("id"))
_OF_MANY = (
    sa.select(*_COLUMNS)
    .where(approval_votes.c.approval_id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(approval_votes.c.at, approval_votes.c.approver)
)


def _vote(r: Any) -> Vote:
    return Vote(r.approver, SurfaceType(r.surface), r.at, tuple(json.loads(r.tied)) if r.tied else ())


def of(tx: Work, approval_id: str) -> tuple[Vote, ...]:
    """The approvals counted for one request, oldest first."""
    return tuple(_vote(r) for r in _OF.all(tx, {"id": approval_id}))


def of_many(tx: Work, approval_ids: Collection[str]) -> dict[str, tuple[Vote, ...]]:
    """The approvals counted for each of several requests (those with none are left out)."""
    if not approval_ids:
        return {}
    found: dict[str, list[Vote]] = {}
    for r in tx.conn.execute(_OF_MANY, {"ids": sorted(approval_ids)}).all():
        found.setdefault(r.approval_id, []).append(_vote(r))
    return {k: tuple(v) for k, v in found.items()}


def joined(counted: tuple[Vote, ...], vote: Vote) -> tuple[Vote, ...]:
    """The votes with one more, in the order `of` reads them (time, then approver), so a
    body built from the record in memory lists them as a later read will."""
    return tuple(sorted((*counted, vote), key=lambda v: (v.at, v.by)))


def add(tx: Work, approval_id: str, vote: Vote) -> None:
    """Count one approver's Approve (the caller holds the approval's lock)."""
    tied = json.dumps(list(vote.tied)) if vote.tied else None
    _ADD.rowcount(
        tx,
        {
            "approval_id": approval_id,
            "approver": vote.by,
            "surface": vote.surface.value,
            "at": vote.at,
            "tied": tied,
        },
    )


def set_aside(tx: Work, approval_id: str) -> None:
    """Count none of the approvals so far: they approved a version of the call an edit
    replaced (the caller holds the approval's lock, and puts who they were on the audit chain)."""
    tx.conn.execute(_SET_ASIDE, {"id": approval_id})
