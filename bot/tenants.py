"""Tenant API keys: printed once at creation, stored only as a SHA-256 hash.

Keys are 256 random bits, so a fast hash is enough (no password stretching is needed for
secrets nobody chose). Lookups are cached briefly so the hot path does not touch the
database on every request.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable

from contracts.errors import InvalidRequest, Unauthenticated
from contracts.names import TENANT_NAME_PATTERN
from storage import tenants as store
from storage.database import Conflict, Database

_NAME = re.compile(TENANT_NAME_PATTERN)
CACHE_SECONDS = 30.0


def hash_key(key: str) -> str:
    """The stored form of an API key."""
    return hashlib.sha256(key.encode()).hexdigest()


class TenantKeys:
    """Creates tenants and resolves bearer keys to tenant names."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock
        self._cache: dict[str, tuple[str, float]] = {}

    async def create(self, name: str) -> str:
        """Create a tenant and return its API key (the only time it is shown)."""
        if not _NAME.fullmatch(name):
            raise InvalidRequest(
                f"tenant name {name!r} must be lower case letters, digits, - "
                "or _ (as in the policy's [tenants.NAME])",
                field="name",
            )
        key = f"csk_{secrets.token_urlsafe(32)}"
        now = self.clock()
        try:
            await self.db.run_write(lambda tx: store.insert(tx, name, hash_key(key), now))
        except Conflict as exc:
            raise InvalidRequest(
                f"tenant {name!r} already exists; use `cosigner tenants rotate {name}` for a new key",
                field="name",
            ) from exc
        return key

    async def rotate(self, name: str) -> str:
        """Replace a tenant's API key; the old one stops working within the cache window."""
        key = f"csk_{secrets.token_urlsafe(32)}"
        if not await self.db.run_write(lambda tx: store.replace_key(tx, name, hash_key(key))):
            raise InvalidRequest(f"no tenant {name!r}; create it with `cosigner tenants create`")
        self._cache.clear()
        return key

    async def names(self) -> list[str]:
        """Every tenant name."""
        return await self.db.run_read(store.names)

    async def resolve(self, authorization: str | None) -> str:
        """The tenant of an `Authorization: Bearer <key>` header, or `Unauthenticated`."""
        if not authorization or not authorization.startswith("Bearer "):
            raise Unauthenticated(
                "send the tenant API key as `Authorization: Bearer <key>`; "
                "create one with `cosigner tenants create NAME`"
            )
        digest = hash_key(authorization[7:].strip())
        now = time.monotonic()
        hit = self._cache.get(digest)
        if hit is not None and hit[1] > now:
            return hit[0]
        name = await self.db.run_read(lambda tx: store.name_for(tx, digest))
        if name is None:
            raise Unauthenticated(
                "this API key is not known; check for a copy-paste error or "
                "create a key with `cosigner tenants create NAME`"
            )
        if len(self._cache) > 10000:
            self._cache.clear()
        self._cache[digest] = (name, now + CACHE_SECONDS)
        return name
