"""The inbox's signed-in sessions: started at sign-in, read on every request, ended at Sign
out, by the operator, or when the policy no longer names the person.

A session is named by the SHA-256 of its random id (`bot.inbox.session` hashes it; the id
itself is only in the browser's signed cookie). Every id its person holds is kept case-folded
beside it, so ending "every session of ada@acme.example" also ends one signed in as
`Ada@Acme.example` or through Slack with that email. Expired rows are swept at each sign-in.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from storage.tables import inbox_session_ids, inbox_sessions
from storage.work import Work

# The one read every inbox request makes: by primary key.
_LIVE = sa.select(inbox_sessions.c.person, inbox_sessions.c.tenants, inbox_sessions.c.expires_at).where(
    inbox_sessions.c.id_hash == sa.bindparam("id_hash")
)


@dataclass(frozen=True, slots=True)
class Session:
    """A live session: who signed in (as `Person.to_json` wrote it), the tenants the policy
    named them in at sign-in, and when it ends."""

    person: dict[str, Any]
    tenants: tuple[str, ...]
    expires_at: float


def folded(person_id: str) -> str:
    """How a person's id is kept and looked up: case-folded, so a change of case ends the same
    sessions (ending more than asked is safe; fewer is not)."""
    return person_id.strip().casefold()


def start(
    tx: Work,
    id_hash: str,
    person: Mapping[str, Any],
    person_ids: Collection[str],
    tenants: Collection[str],
    now: float,
    expires_at: float,
    *,
    replacing: str | None = None,
) -> None:
    """Store a new session (and end `replacing`, the one the browser held before); sweep the
    sessions that have expired."""
    if replacing is not None:
        end(tx, replacing)
    sweep(tx, now)
    tx.conn.execute(
        inbox_sessions.insert().values(
            id_hash=id_hash,
            person=json.dumps(dict(person), sort_keys=True),
            tenants=json.dumps(sorted(tenants)),
            created_at=now,
            expires_at=expires_at,
        )
    )
    ids = sorted({folded(i) for i in person_ids if i.strip()})
    if ids:
        tx.conn.execute(inbox_session_ids.insert(), [{"session": id_hash, "person_id": i} for i in ids])


def live(tx: Work, id_hash: str, now: float) -> Session | None:
    """The session of this id hash while it lasts; None once ended or expired."""
    row = tx.conn.execute(_LIVE, {"id_hash": id_hash}).first()
    if row is None or row.expires_at <= now:
        return None
    return Session(json.loads(row.person), tuple(json.loads(row.tenants)), row.expires_at)


def end(tx: Work, id_hash: str) -> bool:
    """End one session; False when there was none (already ended or swept)."""
    return _delete(tx, inbox_sessions.c.id_hash == id_hash) == 1


def end_every(tx: Work, person_id: str) -> int:
    """End every session whose person holds `person_id` (any case); how many there were."""
    holding = sa.select(inbox_session_ids.c.session).where(inbox_session_ids.c.person_id == folded(person_id))
    # Read first: the ids it is found by are deleted before the sessions.
    sessions = list(tx.conn.execute(holding).scalars())
    return _delete(tx, inbox_sessions.c.id_hash.in_(sessions)) if sessions else 0


def sweep(tx: Work, now: float) -> int:
    """Delete the sessions that have expired; how many there were."""
    return _delete(tx, inbox_sessions.c.expires_at <= now)


def _delete(tx: Work, which: sa.ColumnElement[bool]) -> int:
    """Delete the sessions `which` selects (a condition on `inbox_sessions` alone) and their ids."""
    sessions = sa.select(inbox_sessions.c.id_hash).where(which)
    tx.conn.execute(inbox_session_ids.delete().where(inbox_session_ids.c.session.in_(sessions)))
    done = tx.conn.execute(inbox_sessions.delete().where(which))
    return int(done.rowcount)
