"""Tenant API keys: printed once when made, stored only as a SHA-256 hash, each with a scope.

An `agent` key asks (create, read, wait, cancel, result, admit); an `approver` key answers
(dashboard decisions, standing denies). The agent holds its key, so a key that could do
both would let it approve itself.

Keys are 256 random bits, so a fast hash is enough (no password stretching is needed for
secrets nobody chose). Lookups are cached for up to 30 s (`CACHE_SECONDS`, on the injected
clock) so the hot path does not touch the database on every request. A removal empties
the cache of the process that made it at once; on PostgreSQL it also tells every replica
(a NOTIFY sent at commit, heard on the LISTEN connection approvals use), whose cache is
emptied as it is heard, and again whenever that connection comes back after a loss. A
removal made by another process on SQLite (the CLI beside a running server) reaches the
server's cache only as its entries run out: within 30 s.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from contracts.enums import KeyScope
from contracts.errors import InvalidRequest, Unauthenticated
from contracts.names import TENANT_NAME_PATTERN
from storage import tenants as tenant_store
from storage.database import Conflict, Database
from storage.tenants import KeyHolder
from storage.work import Work

_NAME = re.compile(TENANT_NAME_PATTERN)
CACHE_SECONDS = 30.0
# The prefix tells a person holding a key what it is for; the scope itself is the stored row's.
PREFIX = {KeyScope.AGENT: "csk_", KeyScope.APPROVER: "csa_"}


def hash_key(key: str) -> str:
    """The stored form of an API key."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A key as made: its id (to revoke it by), its scope, and the key itself (shown once)."""

    key_id: str
    scope: KeyScope
    key: str


@dataclass(frozen=True, slots=True)
class NewTenant:
    """A tenant's first keys: one agent key and one approver key."""

    agent: IssuedKey
    approver: IssuedKey


def _issue(scope: KeyScope) -> IssuedKey:
    return IssuedKey(tenant_store.new_key_id(), scope, PREFIX[scope] + secrets.token_urlsafe(32))


class TenantKeys:
    """Creates tenants and their keys, and resolves bearer keys to who holds them."""

    def __init__(
        self,
        db: Database,
        clock: Callable[[], float] = time.time,
        on_heard: Callable[[], None] = lambda: None,
    ) -> None:
        self.db = db
        self.clock = clock
        self._cache: dict[str, tuple[KeyHolder, float]] = {}  # key hash → (holder, when checked)
        # Bumped whenever the cache is emptied: a lookup that read the database before a
        # removal was heard must not put back what the removal took away.
        self._epoch = 0
        self._on_heard = on_heard

    def heard(self, tenant: str) -> None:
        """Some process removed keys of `tenant` (a PostgreSQL NOTIFY): forget every key checked."""
        self._forget()
        self._on_heard()

    def listening(self, up: bool) -> None:
        """The LISTEN connection came up or went down: removals told meanwhile went unheard,
        so forget every key checked (while it is down, entries last at most `CACHE_SECONDS`)."""
        self._forget()

    def _forget(self) -> None:
        self._epoch += 1
        self._cache.clear()

    async def create(self, name: str) -> NewTenant:
        """Create a tenant with an agent key and an approver key (the only time they are shown)."""
        if not _NAME.fullmatch(name):
            raise InvalidRequest(
                f"tenant name {name!r} must be lower case letters, digits, - "
                "or _ (as in the policy's [tenants.NAME])",
                field="name",
            )
        made = NewTenant(agent=_issue(KeyScope.AGENT), approver=_issue(KeyScope.APPROVER))
        now = self.clock()

        def write(tx: Work) -> None:
            tenant_store.insert(tx, name, now)
            for k in (made.agent, made.approver):
                tenant_store.add_key(tx, name, k.key_id, k.scope, hash_key(k.key), now)

        try:
            await self.db.run_write(write)
        except Conflict as exc:
            raise InvalidRequest(
                f"tenant {name!r} already exists; add a key with "
                f"`cosigner tenants key create {name} --scope agent|approver`",
                field="name",
            ) from exc
        return made

    async def add_key(self, tenant: str, scope: KeyScope) -> IssuedKey:
        """Give a tenant another key of `scope` (shown once)."""
        made = _issue(scope)
        now = self.clock()

        def write(tx: Work) -> bool:
            if not tenant_store.exists(tx, tenant):
                return False
            tenant_store.add_key(tx, tenant, made.key_id, scope, hash_key(made.key), now)
            return True

        if not await self.db.run_write(write):
            raise InvalidRequest(f"no tenant {tenant!r}; create it with `cosigner tenants create`")
        return made

    async def revoke(self, tenant: str, key_id: str) -> None:
        """Remove one key; it stops working here at once, on PostgreSQL replicas as soon as they
        hear it, and in another process on SQLite within 30 s."""
        if not await self.db.run_write(lambda tx: tenant_store.revoke_key(tx, tenant, key_id)):
            raise InvalidRequest(
                f"tenant {tenant!r} has no key {key_id!r}; the id is the key_… printed when the key was made"
            )
        self._forget()

    async def rotate(self, name: str) -> str:
        """Replace every agent key of a tenant with one new one; the old ones stop as `revoke`'s do."""
        made = _issue(KeyScope.AGENT)
        now = self.clock()

        def write(tx: Work) -> bool:
            if not tenant_store.exists(tx, name):
                return False
            tenant_store.revoke_scope(tx, name, KeyScope.AGENT)
            tenant_store.add_key(tx, name, made.key_id, KeyScope.AGENT, hash_key(made.key), now)
            return True

        if not await self.db.run_write(write):
            raise InvalidRequest(f"no tenant {name!r}; create it with `cosigner tenants create`")
        self._forget()
        return made.key

    async def names(self) -> list[str]:
        """Every tenant name."""
        return await self.db.run_read(tenant_store.names)

    async def resolve(self, authorization: str | None) -> KeyHolder:
        """Who holds the key of an `Authorization: Bearer <key>` header, or `Unauthenticated`."""
        if not authorization or not authorization.startswith("Bearer "):
            raise Unauthenticated(
                "send the tenant API key as `Authorization: Bearer <key>`; "
                "create one with `cosigner tenants create NAME`"
            )
        digest = hash_key(authorization[7:].strip())
        now = self.clock()
        hit = self._cache.get(digest)
        # A clock set back since the check makes it stale too, rather than valid for longer.
        if hit is not None and hit[1] <= now < hit[1] + CACHE_SECONDS:
            return hit[0]
        since = self._epoch
        holder = await self.db.run_read(lambda tx: tenant_store.holder_of(tx, digest))
        if holder is None:
            raise Unauthenticated(
                "this API key is not known; check for a copy-paste error, or make keys with "
                "`cosigner tenants create NAME` or "
                "`cosigner tenants key create TENANT --scope agent|approver`"
            )
        if self._epoch != since:
            return holder  # keys were removed while it was read: this answer is not kept
        if len(self._cache) > 10000:
            self._cache.clear()
        self._cache[digest] = (holder, now)
        return holder
