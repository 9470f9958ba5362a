"""The tenants store: names and the hashes of their API keys (never the keys)."""

from __future__ import annotations

import secrets

import sqlalchemy as sa

from storage.database import Tx
from storage.tables import tenants

_BY_HASH = sa.select(tenants.c.name).where(tenants.c.api_key_hash == sa.bindparam("digest"))


def insert(tx: Tx, name: str, key_hash: str, now: float) -> None:
    """Add a tenant; `storage.database.Conflict` (at commit) when the name is taken."""
    tx.execute(
        tenants.insert().values(
            id=f"ten_{secrets.token_hex(8)}", name=name, api_key_hash=key_hash, created_at=now
        )
    )


def replace_key(tx: Tx, name: str, key_hash: str) -> bool:
    """Store a tenant's new key hash; False when there is no such tenant."""
    result = tx.execute(tenants.update().where(tenants.c.name == name).values(api_key_hash=key_hash))
    return result.rowcount == 1


def names(tx: Tx) -> list[str]:
    """Every tenant name, sorted."""
    return list(tx.execute(sa.select(tenants.c.name).order_by(tenants.c.name)).scalars())


def name_for(tx: Tx, key_hash: str) -> str | None:
    """The tenant whose key hashes to `key_hash`."""
    name = tx.execute(_BY_HASH, {"digest": key_hash}).scalar_one_or_none()
    return name if isinstance(name, str) else None
