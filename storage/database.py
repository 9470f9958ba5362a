"""The database handle: engines for SQLite or PostgreSQL, write transactions, migrations.

SQLite allows one writer at a time. Rather than let concurrent transactions collide and
retry on SQLITE_BUSY, writes go through a one-connection engine whose transactions begin
with `BEGIN IMMEDIATE`, and reads use a small pool of their own (WAL lets them run beside
the writer). PostgreSQL uses one pooled engine for both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from alembic import command

MIGRATIONS = Path(__file__).parent / "migrations"


def default_sqlite_url(directory: str | Path = ".") -> str:
    """The default database: a SQLite file in the working directory."""
    return f"sqlite+aiosqlite:///{Path(directory) / 'cosigner.db'}"


class DatabaseUrlError(ValueError):
    """COSIGNER_DATABASE_URL names a driver Cosigner does not run on."""


class Database:
    """Engines and transactions for one database URL."""

    def __init__(self, url: str, *, schema: str | None = None, pool_size: int = 10) -> None:
        parsed = make_url(url)
        self.url = url
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            if parsed.get_driver_name() != "aiosqlite":
                raise DatabaseUrlError(
                    f"{url!r}: use the async driver, e.g. sqlite+aiosqlite:///cosigner.db")
            if not parsed.database or parsed.database == ":memory:":
                raise DatabaseUrlError(f"{url!r}: give SQLite a file path; in-memory is not shared")
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            self.writer = create_async_engine(url, pool_size=1, max_overflow=0, pool_timeout=60)
            self.reader = create_async_engine(url, pool_size=4, max_overflow=0, pool_timeout=60)
            _configure_sqlite(self.writer, immediate=True)
            _configure_sqlite(self.reader, immediate=False)
        elif self.dialect == "postgresql":
            if parsed.get_driver_name() != "asyncpg":
                raise DatabaseUrlError(
                    f"{url!r}: use the async driver, e.g. postgresql+asyncpg://user@host/db")
            connect_args: dict[str, Any] = {}
            if schema:
                connect_args["server_settings"] = {"search_path": schema}
            self.writer = create_async_engine(url, pool_size=pool_size, max_overflow=pool_size,
                                              connect_args=connect_args, pool_pre_ping=True)
            self.reader = self.writer
        else:
            raise DatabaseUrlError(
                f"{url!r}: Cosigner runs on sqlite+aiosqlite:// or postgresql+asyncpg://")
        self.schema = schema

    @property
    def is_sqlite(self) -> bool:
        """True on SQLite, where one process owns the database."""
        return self.dialect == "sqlite"

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction, committed on exit and rolled back on error."""
        async with self.writer.begin() as conn:
            yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read-only connection."""
        async with self.reader.connect() as conn:
            yield conn

    async def migrate(self) -> None:
        """Bring the schema to the newest revision (idempotent)."""
        async with self.writer.begin() as conn:
            await conn.run_sync(_upgrade)

    async def revision(self) -> str | None:
        """The schema revision in the database, or None when it was never migrated."""
        async with self.reader.connect() as conn:
            return await conn.run_sync(_current_revision)

    async def ping(self) -> None:
        """Raise if the database cannot answer a trivial query."""
        async with self.reader.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def close(self) -> None:
        """Dispose of every pooled connection."""
        await self.writer.dispose()
        if self.reader is not self.writer:
            await self.reader.dispose()


def _configure_sqlite(engine: AsyncEngine, *, immediate: bool) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take over transaction control from the driver so BEGIN IMMEDIATE is ours to send.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=10000")
        cur.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _alembic_config(connection: Any) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def _upgrade(connection: Any) -> None:
    command.upgrade(_alembic_config(connection), "head")


def _current_revision(connection: Any) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()
