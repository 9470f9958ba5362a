"""The SQLite database file and its WAL companions are readable by their owner only."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from storage.database import Database
from storage.tables import flags


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_new_database_and_its_wal_files_are_owner_only(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)  # the usual umask, which would give 0644
    try:
        db = Database(f"sqlite+aiosqlite:///{tmp_path / 'new.db'}")
        await db.migrate()
        await db.run_write(
            lambda c: c.conn.execute(flags.insert().values(namespace="t", key="k", value="1", created_at=0.0))
        )
        files = {name: mode(tmp_path / name) for name in ("new.db", "new.db-wal", "new.db-shm")}
        await db.close()
    finally:
        os.umask(old_umask)
    assert files["new.db"] == 0o600
    assert files["new.db-wal"] == 0o600
    assert files["new.db-shm"] == 0o600


async def test_a_world_readable_database_is_tightened_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "old.db"
    first = Database(f"sqlite+aiosqlite:///{path}")
    await first.migrate()
    await first.close()
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="cosigner.storage"):
        db = Database(f"sqlite+aiosqlite:///{path}")
    await db.close()
    assert mode(path) == 0o600
    assert "mode 644; tightened to 600" in caplog.text
