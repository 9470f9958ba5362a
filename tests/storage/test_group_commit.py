"""Group commit: queued SQLite transactions share a COMMIT but fail alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from storage.database import Conflict, Database
from storage.tables import flags
from storage.work import Work


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'g.db'}")
    await database.migrate()
    yield database
    await database.close()


def put(key: str, fail: bool = False) -> Callable[[Work], str]:
    def tx(work: Work) -> str:
        work.conn.execute(flags.insert().values(namespace="t", key=key, value="1", created_at=0.0))
        if fail:
            raise ValueError(f"refused {key}")
        return key

    return tx


def count(conn: Connection) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(flags)).scalar_one())


def counted(work: Work) -> int:
    return count(work.conn)


async def test_a_failing_transaction_is_rolled_back_alone(db: Database) -> None:
    calls = [db.run_write(put(f"k{i}", fail=i % 10 == 3)) for i in range(200)]
    results = await asyncio.gather(*calls, return_exceptions=True)
    failed = [r for r in results if isinstance(r, Exception)]
    assert len(failed) == 20 and all(isinstance(r, ValueError) for r in failed)
    assert await db.run_read(counted) == 180
    rows = await db.run_read(lambda c: set(c.conn.execute(sa.select(flags.c.key)).scalars()))
    assert "k3" not in rows and "k4" in rows
    group = db._group
    assert group is not None and group.transactions == 200
    assert group.batches < 200, "concurrent transactions shared commits"


async def test_duplicate_keys_conflict_inside_one_batch(db: Database) -> None:
    results = await asyncio.gather(
        *(db.run_write(put(f"k{i // 2}")) for i in range(100)), return_exceptions=True
    )
    assert sum(isinstance(r, Conflict) for r in results) == 50
    assert await db.run_read(counted) == 50


async def test_nothing_is_reported_committed_before_it_is(db: Database, tmp_path: Path) -> None:
    await db.run_write(put("durable"))
    other = sa.create_engine(f"sqlite:///{tmp_path / 'g.db'}")
    with other.connect() as conn:
        assert count(conn) == 1, "another connection sees the row once run_write returned"
    other.dispose()


async def test_the_writer_keeps_its_connection_between_batches(db: Database) -> None:
    def connection(work: Work) -> object:
        return work.conn

    first = await db.run_write(connection)
    await db.run_write(put("a"))
    with pytest.raises(ValueError):
        await db.run_write(put("b", fail=True))  # a refusal, not a database error
    assert await db.run_write(connection) is first
    assert await db.run_read(counted) == 1


async def test_a_database_error_drops_the_connection_and_the_next_batch_gets_a_fresh_one(
    db: Database,
) -> None:
    def connection(work: Work) -> object:
        return work.conn

    def broken(work: Work) -> None:
        work.conn.exec_driver_sql("INSERT INTO no_such_table VALUES (1)")

    first = await db.run_write(connection)
    with pytest.raises(sa.exc.OperationalError):
        await db.run_write(broken)
    assert await db.run_write(connection) is not first
    assert await db.run_write(put("after")) == "after"
    assert await db.run_read(counted) == 1


async def test_begin_immediate_refused_is_a_sqlalchemy_error_and_nothing_runs(
    db: Database, tmp_path: Path
) -> None:
    # Another process holds SQLite's write lock; the writer does not wait for it here.
    await db.run_write(lambda work: work.conn.exec_driver_sql("PRAGMA busy_timeout=0"))
    other = sa.create_engine(f"sqlite:///{tmp_path / 'g.db'}", isolation_level="AUTOCOMMIT")
    with other.connect() as holder:
        holder.exec_driver_sql("BEGIN IMMEDIATE")
        with pytest.raises(sa.exc.OperationalError, match="locked"):
            await db.run_write(put("blocked"))
        holder.exec_driver_sql("ROLLBACK")
    other.dispose()
    assert await db.run_write(put("later")) == "later"
    assert await db.run_read(lambda c: set(c.conn.execute(sa.select(flags.c.key)).scalars())) == {"later"}
