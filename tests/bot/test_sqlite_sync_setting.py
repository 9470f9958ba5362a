"""COSIGNER_SQLITE_SYNCHRONOUS reaches every SQLite connection of the server; it is refused
when it could never take effect."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.http.app import build_app, parts_of
from bot.policy.rules import load_policy
from bot.settings import SettingsError, load_settings
from storage.sqlite_sync import SqliteSync
from storage.work import Work
from tests.harness import DEFAULT_POLICY, TEST_SECRET


def synchronous(tx: Work) -> int:
    return int(tx.conn.exec_driver_sql("PRAGMA synchronous").scalar_one())


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in ("COSIGNER_SQLITE_SYNCHRONOUS", "COSIGNER_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COSIGNER_SECRET", TEST_SECRET)
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    return monkeypatch


@pytest.mark.parametrize(("value", "level"), [(None, 1), ("normal", 1), ("Full", 2), (" FULL ", 2)])
async def test_the_server_syncs_as_the_setting_says(
    env: pytest.MonkeyPatch, value: str | None, level: int
) -> None:
    if value is not None:
        env.setenv("COSIGNER_SQLITE_SYNCHRONOUS", value)
    settings = load_settings()
    app = build_app(settings, policy=load_policy(DEFAULT_POLICY), run_workers=False)
    db = parts_of(app).db
    try:
        assert db.sqlite_synchronous == (SqliteSync.FULL if level == 2 else SqliteSync.NORMAL)
        assert await db.run_write(synchronous) == level
        assert await db.run_read(synchronous) == level
    finally:
        await db.close()


def test_a_value_sqlite_does_not_offer_here_is_refused(env: pytest.MonkeyPatch) -> None:
    env.setenv("COSIGNER_SQLITE_SYNCHRONOUS", "OFF")  # SQLite has it; Cosigner does not offer it
    with pytest.raises(SettingsError, match=r"COSIGNER_SQLITE_SYNCHRONOUS must be one of NORMAL, FULL"):
        load_settings()


def test_on_postgresql_it_is_refused_not_ignored(env: pytest.MonkeyPatch) -> None:
    env.setenv("COSIGNER_DATABASE_URL", "postgresql+asyncpg://cosigner@127.0.0.1:5432/cosigner")
    env.setenv("COSIGNER_SQLITE_SYNCHRONOUS", "FULL")
    with pytest.raises(SettingsError, match="applies to SQLite only; unset it for PostgreSQL"):
        load_settings()
    env.delenv("COSIGNER_SQLITE_SYNCHRONOUS")
    assert load_settings().sqlite_synchronous is None
