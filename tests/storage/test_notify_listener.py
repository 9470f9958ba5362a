"""A replica's LISTEN connection comes back when the database ends it."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from storage.notify import Listener, channel_for, keys_channel_for
from tests.harness import postgres_url, until_async


def dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def listeners(admin: asyncpg.Connection, channel: str) -> list[int]:
    rows = await admin.fetch(
        "SELECT pid FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()", f'LISTEN "{channel}"'
    )
    return [r["pid"] for r in rows]


async def test_a_lost_listen_connection_is_opened_again_and_hears_the_next_decision() -> None:
    url = postgres_url()
    if not url:
        pytest.skip("needs PostgreSQL (COSIGNER_TEST_POSTGRES_URL): LISTEN is PostgreSQL's")
    schema = "t_listener_reconnect"  # a channel of its own: no other test notifies on it
    channel = channel_for(schema)
    heard: asyncio.Queue[str] = asyncio.Queue()
    removed: asyncio.Queue[str] = asyncio.Queue()  # API key removals, on the same connection
    states: list[bool] = []  # what the replica's copies are told: usable (True) or not
    listener = Listener()
    admin = await asyncpg.connect(dsn(url))
    try:
        await listener.start(url, schema, heard.put_nowait, states.append, removed.put_nowait)
        assert states == [True]
        [first] = await until_async(lambda: listeners(admin, channel))
        await admin.execute("SELECT pg_notify($1, 'apv_before')", channel)
        assert await asyncio.wait_for(heard.get(), 10) == "apv_before"

        await admin.execute("SELECT pg_terminate_backend($1)", first)
        [second] = await until_async(lambda: _other_than(admin, channel, first), seconds=10)
        assert second != first and listener.reconnects == 1
        assert states == [True, False, True]  # down in between: closes sent then went unheard
        await admin.execute("SELECT pg_notify($1, 'apv_after')", channel)
        assert await asyncio.wait_for(heard.get(), 10) == "apv_after"
        await admin.execute("SELECT pg_notify($1, 'acme')", keys_channel_for(schema))
        assert await asyncio.wait_for(removed.get(), 10) == "acme"
        assert heard.empty(), "a key removal is not an approval's close"
    finally:
        await listener.close()
        await admin.close()
    assert states == [True, False, True, False]
    # Closing is final: nothing listens any more, and nothing reopens it.
    admin = await asyncpg.connect(dsn(url))
    try:
        assert await listeners(admin, channel) == []
    finally:
        await admin.close()


async def _other_than(admin: asyncpg.Connection, channel: str, pid: int) -> list[int]:
    found = await listeners(admin, channel)
    return [p for p in found if p != pid]
