"""How SQLite syncs commits (`PRAGMA synchronous`): NORMAL unless the operator asks for FULL,
on every connection Cosigner opens, hot path and CLI alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Connection

from storage import raw
from storage.database import Database
from storage.sqlite_sync import SqliteSync
from storage.work import Work

# SQLite reports the level as a number.
LEVEL = {SqliteSync.NORMAL: 1, SqliteSync.FULL: 2}


def synchronous(conn: Connection) -> int:
    return int(conn.exec_driver_sql("PRAGMA synchronous").scalar_one())


def on_work(tx: Work) -> int:
    return synchronous(tx.conn)


@pytest.mark.parametrize("sync", list(SqliteSync))
async def test_every_connection_syncs_as_configured(sync: SqliteSync, tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 's.db'}", sqlite_synchronous=sync)
    try:
        await db.migrate()
        assert db.sqlite_synchronous is sync
        assert await db.run_write(on_work) == LEVEL[sync]  # the group-commit writer
        assert await db.run_read(on_work) == LEVEL[sync]  # the read threads
        async with raw.write(db) as conn:  # the async engines, off the hot path
            assert await conn.run_sync(synchronous) == LEVEL[sync]
        async with raw.read(db) as conn:
            assert await conn.run_sync(synchronous) == LEVEL[sync]
    finally:
        await db.close()


async def test_normal_is_the_default(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 's.db'}")
    try:
        assert db.sqlite_synchronous is SqliteSync.NORMAL
        assert await db.run_write(on_work) == LEVEL[SqliteSync.NORMAL]
    finally:
        await db.close()
