"""Steps waiting for a PostgreSQL connection are served in the order they asked."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.util import await_

from storage.database import Database
from storage.work import Work
from tests.harness import postgres_url


async def test_steps_waiting_for_a_connection_get_one_in_the_order_they_asked() -> None:
    url = postgres_url()
    if not url:
        pytest.skip("needs PostgreSQL (COSIGNER_TEST_POSTGRES_URL): SQLite's steps queue on its threads")
    db = Database(url, pool_size=1)  # two connections: two steps at a time
    release = asyncio.Event()
    served: list[str] = []

    def step(name: str, hold: bool) -> Callable[[Work], None]:
        def fn(_work: Work) -> None:
            served.append(name)
            if hold:
                await_(release.wait())  # keeps the connection until released

        return fn

    try:
        holders = [asyncio.create_task(db.run_read(step(n, True))) for n in ("h1", "h2")]
        while len(served) < 2:
            await asyncio.sleep(0)
        waiting = []
        for name in ("w1", "w2", "w3", "w4", "w5", "w6"):
            waiting.append(asyncio.create_task(db.run_read(step(name, False))))
            await asyncio.sleep(0.01)  # each asks after the one before
        release.set()
        # Newcomers ask while the released connections are being handed on.
        late = []
        for name in ("n1", "n2", "n3"):
            late.append(asyncio.create_task(db.run_read(step(name, False))))
            await asyncio.sleep(0)
        await asyncio.gather(*holders, *waiting, *late)
        assert served[2:8] == ["w1", "w2", "w3", "w4", "w5", "w6"], served
        assert sorted(served[8:]) == ["n1", "n2", "n3"]
    finally:
        await db.close()


async def test_a_step_that_finds_no_connection_free_in_time_fails_as_the_pool_would() -> None:
    url = postgres_url()
    if not url:
        pytest.skip("needs PostgreSQL (COSIGNER_TEST_POSTGRES_URL): SQLite's steps queue on its threads")
    db = Database(url, pool_size=1)
    assert db._gate is not None
    db._gate.timeout = 0.0  # no waiting at all: the test needs no clock to pass
    release = asyncio.Event()
    holding: list[int] = []

    def hold(_work: Work) -> None:
        holding.append(1)
        await_(release.wait())

    try:
        holders = [asyncio.create_task(db.run_read(hold)) for _ in range(2)]
        while len(holding) < 2:
            await asyncio.sleep(0)
        with pytest.raises(sa.exc.TimeoutError, match="no database connection came free"):
            await db.run_read(lambda _work: None)
        release.set()
        await asyncio.gather(*holders)
        # The step that gave up took no place with it: two steps hold connections at once again.
        release.clear()
        holders = [asyncio.create_task(db.run_read(hold)) for _ in range(2)]
        while len(holding) < 4:
            await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*holders)
    finally:
        await db.close()
