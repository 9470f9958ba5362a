"""The tenants store: names, and their API keys as scoped rows holding hashes (never the keys)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import sqlalchemy as sa

from contracts.enums import KeyScope
from storage.notify import keys_channel_for
from storage.tables import api_keys, tenants
from storage.work import Work

_BY_HASH = sa.select(api_keys.c.tenant, api_keys.c.scope, api_keys.c.id).where(
    api_keys.c.key_hash == sa.bindparam("digest")
)


@dataclass(frozen=True, slots=True)
class KeyHolder:
    """Whose a key is and what it may do: its tenant, its scope and its id."""

    tenant: str
    scope: KeyScope
    key_id: str


def new_key_id() -> str:
    """A key's public id (what `tenants key revoke` takes); not a secret."""
    return f"key_{secrets.token_hex(6)}"


def insert(tx: Work, name: str, now: float) -> None:
    """Add a tenant; `storage.database.Conflict` (at commit) when the name is taken."""
    tx.conn.execute(tenants.insert().values(id=f"ten_{secrets.token_hex(8)}", name=name, created_at=now))


def exists(tx: Work, name: str) -> bool:
    """Whether there is a tenant of this name."""
    return tx.conn.execute(sa.select(tenants.c.id).where(tenants.c.name == name)).first() is not None


def add_key(tx: Work, tenant: str, key_id: str, scope: KeyScope, key_hash: str, now: float) -> None:
    """Store a key's hash under its id and scope."""
    tx.conn.execute(
        api_keys.insert().values(
            id=key_id, tenant=tenant, scope=scope.value, key_hash=key_hash, created_at=now
        )
    )


def revoke_key(tx: Work, tenant: str, key_id: str) -> bool:
    """Delete one of a tenant's keys and tell every replica (`keys_removed`); False when the
    tenant has no key of that id."""
    done = tx.conn.execute(api_keys.delete().where(api_keys.c.tenant == tenant, api_keys.c.id == key_id))
    if done.rowcount == 1:
        keys_removed(tx, tenant)
    return done.rowcount == 1


def revoke_scope(tx: Work, tenant: str, scope: KeyScope) -> int:
    """Delete every key of a tenant's in one scope and tell every replica; how many there were."""
    done = tx.conn.execute(
        api_keys.delete().where(api_keys.c.tenant == tenant, api_keys.c.scope == scope.value)
    )
    if done.rowcount:
        keys_removed(tx, tenant)
    return int(done.rowcount)


def keys_removed(tx: Work, tenant: str) -> None:
    """PostgreSQL: NOTIFY every replica's listener (at commit, so never before the keys are
    gone) that a tenant's keys were removed. SQLite has no other replica to tell."""
    if tx.conn.dialect.name != "sqlite":
        tx.conn.execute(sa.select(sa.func.pg_notify(keys_channel_for(tx.schema), tenant)))


def names(tx: Work) -> list[str]:
    """Every tenant name, sorted."""
    return list(tx.conn.execute(sa.select(tenants.c.name).order_by(tenants.c.name)).scalars())


def holder_of(tx: Work, key_hash: str) -> KeyHolder | None:
    """The tenant, scope and id of the key that hashes to `key_hash`."""
    row = tx.conn.execute(_BY_HASH, {"digest": key_hash}).first()
    if row is None:
        return None
    return KeyHolder(tenant=row.tenant, scope=KeyScope(row.scope), key_id=row.id)
