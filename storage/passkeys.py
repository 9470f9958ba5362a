"""Approvers' passkeys and the WebAuthn challenges handed out for them (step-up, 0016).

A passkey belongs to the person of an inbox sign-in (`person`: issuer and subject). Its
counter is moved only forward, by a conditional UPDATE, so of two assertions that carry the
same counter one is refused. A challenge is used once: `take` deletes it and returns it only
to the transaction whose DELETE removed the row, and only while it lasts.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from storage.tables import passkeys, step_up_challenges
from storage.work import Work


@dataclass(frozen=True, slots=True)
class Passkey:
    """One registered credential: its id (base64url), the COSE public key and the counter."""

    credential_id: str
    person: str
    name: str
    public_key: bytes
    sign_count: int
    created_at: float
    used_at: float | None = None


@dataclass(frozen=True, slots=True)
class Challenge:
    """A challenge handed to a browser (base64url): for a registration (no approval), or for
    confirming the Approve of `approval_id` for the call whose shown digest is `digest`."""

    challenge: str
    person: str
    expires_at: float
    approval_id: str | None = None
    digest: str | None = None


def _passkey(row: sa.Row[tuple[object, ...]]) -> Passkey:
    m = row._mapping
    return Passkey(
        str(m["credential_id"]),
        str(m["person"]),
        str(m["name"]),
        bytes(m["public_key"]),
        int(m["sign_count"]),
        float(m["created_at"]),
        None if m["used_at"] is None else float(m["used_at"]),
    )


def add(tx: Work, key: Passkey) -> bool:
    """Store a new passkey; False when its credential id is registered already."""
    if tx.conn.execute(
        sa.select(passkeys.c.person).where(passkeys.c.credential_id == key.credential_id)
    ).first():
        return False
    tx.conn.execute(
        passkeys.insert().values(
            credential_id=key.credential_id,
            person=key.person,
            name=key.name,
            public_key=key.public_key,
            sign_count=key.sign_count,
            created_at=key.created_at,
            used_at=key.used_at,
        )
    )
    return True


def of(tx: Work, person: str) -> list[Passkey]:
    """This person's passkeys, oldest first."""
    rows = tx.conn.execute(
        sa.select(passkeys).where(passkeys.c.person == person).order_by(passkeys.c.created_at)
    ).all()
    return [_passkey(r) for r in rows]


def find(tx: Work, person: str, credential_id: str) -> Passkey | None:
    """The passkey with this credential id, only if it is this person's."""
    row = tx.conn.execute(
        sa.select(passkeys).where(passkeys.c.credential_id == credential_id, passkeys.c.person == person)
    ).first()
    return _passkey(row) if row is not None else None


def remove(tx: Work, person: str, credential_id: str) -> bool:
    """Remove one of this person's passkeys; False when they hold none by that id."""
    done = tx.conn.execute(
        passkeys.delete().where(passkeys.c.credential_id == credential_id, passkeys.c.person == person)
    )
    return bool(done.rowcount)


def used(tx: Work, key: Passkey, sign_count: int, now: float) -> bool:
    """Record a verified assertion: its counter (kept as it was when the authenticator keeps
    none) and when; False when another assertion moved the counter meanwhile."""
    done = tx.conn.execute(
        passkeys.update()
        .where(passkeys.c.credential_id == key.credential_id, passkeys.c.sign_count == key.sign_count)
        .values(sign_count=sign_count, used_at=now)
    )
    return bool(done.rowcount)


def hand_out(tx: Work, c: Challenge, now: float) -> None:
    """Store a challenge until it is taken or expires; expired ones are swept."""
    tx.conn.execute(step_up_challenges.delete().where(step_up_challenges.c.expires_at <= now))
    tx.conn.execute(
        step_up_challenges.insert().values(
            challenge=c.challenge,
            person=c.person,
            approval_id=c.approval_id,
            digest=c.digest,
            expires_at=c.expires_at,
        )
    )


def take(tx: Work, challenge: str, person: str, now: float) -> Challenge | None:
    """The challenge, used up: None if it was never handed to this person, was used already,
    or has expired."""
    t = step_up_challenges
    row = tx.conn.execute(sa.select(t).where(t.c.challenge == challenge, t.c.person == person)).first()
    if row is None:
        return None
    gone = tx.conn.execute(t.delete().where(t.c.challenge == challenge, t.c.person == person))
    if not gone.rowcount:
        return None  # another transaction took it first
    m = row._mapping
    if float(m["expires_at"]) <= now:
        return None
    return Challenge(
        str(m["challenge"]), str(m["person"]), float(m["expires_at"]), m["approval_id"], m["digest"]
    )
