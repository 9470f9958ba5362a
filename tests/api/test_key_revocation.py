"""A revoked API key is refused: on PostgreSQL by every replica from its next request (the
removal's NOTIFY empties each one's key cache), on SQLite by a server whose key was removed
by another process (the CLI) once its cache entry runs out, 30 s on its clock.

Every replica here runs on one `ManualClock` that no test moves unless it says so: a
refusal without moving it is one that needed no time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from bot.http import TenantKeys
from bot.http.tenants import CACHE_SECONDS
from storage import tenants as tenant_store
from storage.database import Database
from storage.tenants import KeyHolder
from storage.work import Work
from tests.harness import Harness, ManualClock, cosigner_app, database, postgres_url, until

needs_postgres = pytest.mark.skipif(
    not postgres_url(), reason="replicas need PostgreSQL: set COSIGNER_TEST_POSTGRES_URL (.ci/run does)"
)


@asynccontextmanager
async def two_replicas() -> AsyncIterator[tuple[Harness, Harness, Database]]:
    """Two apps on one PostgreSQL schema, and the database the CLI would open beside them."""
    async with database("postgres") as db:
        other = Database(db.url, schema=db.schema)
        cli = Database(db.url, schema=db.schema)
        clock = ManualClock()
        try:
            async with cosigner_app(db=db, clock=clock) as a, cosigner_app(db=other, clock=clock) as b:
                yield a, b, cli
        finally:
            await cli.close()


async def status(h: Harness, key: str) -> int:
    """What a request with `key` gets: 200 while it is valid, 401 once it is not."""
    return (await h.client.get("/v1/approvals/apv_none/audit", headers=h.auth(key))).status_code


def heard(h: Harness) -> float:
    return h.parts.engine.metrics.registry.get_sample_value("cosigner_key_removals_heard_total") or 0.0


async def key_id(h: Harness, key: str) -> str:
    return (await h.parts.keys.resolve(f"Bearer {key}")).key_id


@needs_postgres
@pytest.mark.parametrize("by", ["a replica", "the cli"])
async def test_a_key_revoked_anywhere_is_refused_by_every_replica_at_its_next_request(by: str) -> None:
    async with two_replicas() as (a, b, cli):
        key = await a.create_tenant("acme")
        started = a.clock.now
        # Both replicas have checked the key, so each holds it in its cache.
        assert await status(a, key) == 404 and await status(b, key) == 404
        before = heard(b)
        revoker = a.parts.keys if by == "a replica" else TenantKeys(cli)
        await revoker.revoke("acme", await key_id(a, key))
        await until(lambda: heard(b) > before)  # b's listener heard the removal
        assert await status(b, key) == 401 and await status(a, key) == 401
        assert a.clock is b.clock and a.clock.now == started, "no time passed"


@needs_postgres
async def test_a_rotation_is_heard_by_every_replica_too() -> None:
    async with two_replicas() as (a, b, cli):
        key = await a.create_tenant("acme")
        assert await status(b, key) == 404
        before = heard(b)
        await TenantKeys(cli).rotate("acme")
        await until(lambda: heard(b) > before)
        assert await status(b, key) == 401


async def test_a_lookup_under_way_while_a_removal_is_heard_is_answered_but_not_kept(
    db_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with database(db_kind) as db:
        keys = TenantKeys(db, ManualClock())
        key = (await keys.create("acme")).agent.key
        reads: list[str] = []
        real = tenant_store.holder_of

        def holder_of(tx: Work, digest: str) -> KeyHolder | None:
            reads.append(digest)
            if len(reads) == 1:
                keys.heard("acme")  # the NOTIFY of a removal arrives while this lookup reads
            return real(tx, digest)

        monkeypatch.setattr("bot.http.tenants.tenant_store.holder_of", holder_of)
        await keys.resolve(f"Bearer {key}")
        await keys.resolve(f"Bearer {key}")
        assert len(reads) == 2, "the first answer was not kept: it may predate the removal"
        await keys.resolve(f"Bearer {key}")
        assert len(reads) == 2, "the second was"


async def test_on_sqlite_a_key_removed_by_another_process_is_refused_within_the_cache_window(
    db_kind: str,
) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        assert await status(h, key) == 404
        # The CLI's own process: another `TenantKeys` on the same database.
        cli = Database(h.parts.db.url, schema=h.parts.db.schema)
        try:
            await TenantKeys(cli).revoke("acme", await key_id(h, key))
        finally:
            await cli.close()
        if db_kind == "postgres":
            await until(lambda: heard(h) >= 1)
            assert await status(h, key) == 401, "PostgreSQL tells the server at once"
            return
        h.advance(CACHE_SECONDS - 1)
        assert await status(h, key) == 404, "SQLite: the server still holds the key it checked"
        h.advance(1)
        assert await status(h, key) == 401, "and refuses it once the 30 s have run out"


async def test_a_key_revoked_by_the_server_itself_is_refused_at_once(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        assert await status(h, key) == 404
        await h.parts.keys.revoke("acme", await key_id(h, key))
        assert await status(h, key) == 401


async def test_a_clock_set_back_does_not_keep_a_key_longer(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        assert await status(h, key) == 404
        cli = Database(h.parts.db.url, schema=h.parts.db.schema)
        try:
            await TenantKeys(cli).revoke("acme", await key_id(h, key))
        finally:
            await cli.close()
        h.clock.now -= 3600  # the system clock set back an hour
        assert await status(h, key) == 401
