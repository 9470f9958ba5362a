"""The signed-in session: a random id in the inbox's signed cookie, naming a row on the server
(`storage.inbox_sessions`) that every request reads, and the session's CSRF token.

Starlette's SessionMiddleware signs the cookie, which carries only the session id and the
CSRF token (and authlib's state while signing in). Who signed in, the tenants the policy
named them in and the expiry are on the server, which keeps only the id's SHA-256: Sign out,
`cosigner inbox sign-out` and a policy that no longer names the person delete the row, and
every copy of the cookie is signed out with it. The expiry is checked against the app's
clock, so tests move the clock instead of waiting.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request

from bot.inbox.people import PHONE, PHONE_VERIFIED, Person, tenants_of, verified_phone
from bot.policy.rules import Policy
from storage import inbox_sessions as stored
from storage.database import Database

log = logging.getLogger("cosigner.inbox")
SID, CSRF = "sid", "csrf"


def digest(session_id: str) -> str:
    """How the server names a session: the SHA-256 of its id (256 random bits, so no salt and
    no slow hash are needed; a copy of the table opens no session)."""
    return hashlib.sha256(session_id.encode()).hexdigest()


def person_ids(person: Person) -> tuple[str, ...]:
    """Every id an operator may end this person's sessions by: the Slack user id, the verified
    email and the verified phone number the sign-in gave."""
    return tuple(i for i in (*person.ids, person.phone) if i)


def operator_id(text: str) -> str:
    """An id as an operator typed it: a phone number is read as the sign-in reads one
    (`+1 (555) 000-0002` is `+15550000002`); anything else as it is."""
    return verified_phone({PHONE: text, PHONE_VERIFIED: True}) or text.strip()


async def end_every(db: Database, person_id: str) -> int:
    """End every session of the person holding `person_id`; how many there were."""
    return await db.run_write(lambda tx: stored.end_every(tx, operator_id(person_id)))


@dataclass(frozen=True)
class Signed:
    """A live session: its person and the hash that names it on the server."""

    person: Person
    id_hash: str


class Sessions:
    """The inbox's sessions on one database, against one policy and the app's clock."""

    def __init__(self, db: Database, policy: Policy, clock: Callable[[], float], lifetime: float) -> None:
        self.db, self.policy, self.clock, self.lifetime = db, policy, clock, lifetime

    async def start(self, request: Request, person: Person) -> None:
        """Start a session for `person` (a fresh id and CSRF token), ending the one this
        browser held; expired sessions are swept."""
        held = request.session.get(SID)
        replacing = digest(held) if isinstance(held, str) else None
        session_id, now = secrets.token_urlsafe(32), self.clock()
        tenants = tenants_of(self.policy, person)
        await self.db.run_write(
            lambda tx: stored.start(
                tx,
                digest(session_id),
                person.to_json(),
                person_ids(person),
                tenants,
                now,
                now + self.lifetime,
                replacing=replacing,
            )
        )
        request.session.clear()
        request.session[SID] = session_id
        request.session[CSRF] = secrets.token_urlsafe(24)

    async def current(self, request: Request) -> Signed | None:
        """The live session this request's cookie names (one read by primary key), or None.

        A session whose person the policy no longer names in any of the tenants it named them
        in at sign-in is ended here, not only shown nothing: they sign in again, and the
        policy they are then named by decides. (A session that started named in no tenant,
        such as a phone number that only reads what was texted to it, acts for no tenant.)"""
        held = request.session.get(SID)
        if not isinstance(held, str):
            return None
        id_hash, now = digest(held), self.clock()
        found = await self.db.run_read(lambda tx: stored.live(tx, id_hash, now))
        if found is None:
            request.session.pop(SID, None)  # ended, expired or never ours: the browser forgets it
            return None
        person = Person.from_json(found.person)
        if found.tenants and not set(found.tenants) & set(tenants_of(self.policy, person)):
            log.info(
                "inbox session ended: the policy no longer names its person in the tenants they signed in to"
            )
            await self.end(request)
            return None
        return Signed(person, id_hash)

    async def alive(self, id_hash: str) -> bool:
        """True while the session named by `id_hash` lasts (an open event stream asks)."""
        now = self.clock()
        return await self.db.run_read(lambda tx: stored.live(tx, id_hash, now)) is not None

    async def end(self, request: Request) -> None:
        """Sign out: end the session on the server, for every copy of the cookie, and clear it."""
        held = request.session.get(SID)
        if isinstance(held, str):
            await self.db.run_write(lambda tx: stored.end(tx, digest(held)))
        request.session.clear()


def csrf_token(request: Request) -> str:
    """The session's CSRF token, for every form."""
    token = request.session.get(CSRF)
    if not isinstance(token, str):
        token = request.session[CSRF] = secrets.token_urlsafe(24)
    return token


def csrf_ok(request: Request, sent: object) -> bool:
    """True if a posted form carries the session's CSRF token."""
    token = request.session.get(CSRF)
    return isinstance(token, str) and isinstance(sent, str) and hmac.compare_digest(token, sent)
