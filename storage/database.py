"""The database handle: engines for SQLite or PostgreSQL, transactions, migrations.

The hot path runs each transaction as one synchronous function: `await db.run_write(fn)`.
On SQLite the whole function runs in the single writer thread, so a transaction costs one
hop between the event loop and a thread rather than one per statement, SQLite's one
writer is never contended inside the process (its transactions begin with
`BEGIN IMMEDIATE`), and transactions queued together share one COMMIT
(`storage.group_commit`); reads run in a small thread pool beside it, which WAL allows. On
PostgreSQL the whole step (check-out, BEGIN, the function, COMMIT, check-in) runs in one
greenlet on the async engine's connection, whose asyncpg driver it awaits; reads run in
autocommit (no BEGIN or ROLLBACK round trips), a step that only reads and then writes
one statement (`single_write`, a create) runs without a transaction, and so does a
decision (`optimistic`), its one statement conditional on what it read and the step run
again when that changed. The hot statements go to asyncpg's prepared statements directly
(`storage.direct`).

Each function runs in a unit of work (`storage.work.Work`) that storage owns: code outside
storage/ hands it to storage's functions and never sees a connection. The engines are
storage's too (`storage.raw` opens connections on them for tests, `storage.slack_installs`
gives slack_sdk's stores the writer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.util import greenlet_spawn

from storage.direct import NeedsLock
from storage.group_commit import GroupWriter
from storage.known import CREATED, HELD, Known
from storage.permissions import make_private
from storage.records import Record
from storage.sqlite_sync import SqliteSync
from storage.steps import Gate, optimistic_on, read_on, single_write_on, snapshot_on, write_on
from storage.urls import DatabaseUrlError, safe_url
from storage.work import SCHEMA, Work

MIGRATIONS = Path(__file__).parent / "migrations"
# Every engine hides bound parameters from its error messages: they hold reasons, comments
# and redacted parameters, and a database error may end up in a traceback in the log.
T = TypeVar("T")
READ_THREADS = 3


def head_revision() -> str | None:
    """The newest schema revision this code knows."""
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg).get_current_head()


# Any failure of the database or its driver, for callers that report it (the CLI).
DatabaseError = sa.exc.DBAPIError


class Conflict(Exception):
    """A write collided with a row another transaction wrote first (a unique key)."""


class Database:
    """Engines and transactions for one database URL."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_size: int = 10,
        sqlite_synchronous: SqliteSync = SqliteSync.NORMAL,
    ) -> None:
        try:
            parsed = make_url(url)
        except sa.exc.ArgumentError as exc:
            raise DatabaseUrlError(
                "COSIGNER_DATABASE_URL is not a database URL; write e.g. sqlite+aiosqlite:///cosigner.db"
            ) from exc
        self.url = url
        shown = safe_url(url)  # messages never carry the password
        self.dialect = parsed.get_backend_name()
        self.sqlite_synchronous: SqliteSync | None = None  # how SQLite syncs commits; None elsewhere
        if self.dialect == "sqlite":
            if parsed.get_driver_name() != "aiosqlite":
                raise DatabaseUrlError(
                    f"{shown!r}: use the async driver, e.g. sqlite+aiosqlite:///cosigner.db"
                )
            if not parsed.database or parsed.database == ":memory:":
                raise DatabaseUrlError(f"{shown!r}: give SQLite a file path; in-memory is not shared")
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            make_private(Path(parsed.database))
            self._writer = create_async_engine(
                url, pool_size=1, max_overflow=0, pool_timeout=60, hide_parameters=True
            )
            self._reader = create_async_engine(
                url, pool_size=2, max_overflow=0, pool_timeout=60, hide_parameters=True
            )
            sync = self.sqlite_synchronous = SqliteSync(sqlite_synchronous)
            _configure_sqlite(self._writer.sync_engine, sync, begin="BEGIN IMMEDIATE")
            _configure_sqlite(self._reader.sync_engine, sync, begin="BEGIN")
            sync_url = parsed.set(drivername="sqlite+pysqlite")
            self._sync_writer: Engine | None = sa.create_engine(
                sync_url,
                pool_size=1,
                max_overflow=0,
                connect_args={"check_same_thread": False},
                hide_parameters=True,
            )
            self._sync_reader: Engine | None = sa.create_engine(
                sync_url,
                pool_size=READ_THREADS,
                max_overflow=0,
                connect_args={"check_same_thread": False},
                hide_parameters=True,
            )
            _configure_sqlite(self._sync_writer, sync, begin=None)  # GroupWriter sends BEGIN IMMEDIATE
            _configure_sqlite(self._sync_reader, sync, begin="BEGIN")
            self._group: GroupWriter | None = GroupWriter(self._sync_writer)
            self._gate: Gate | None = None
            self._read_threads: ThreadPoolExecutor | None = ThreadPoolExecutor(
                READ_THREADS, thread_name_prefix="cosigner-db-read"
            )
        elif self.dialect == "postgresql":
            if parsed.get_driver_name() != "asyncpg":
                raise DatabaseUrlError(
                    f"{shown!r}: use the async driver, e.g. postgresql+asyncpg://user@host/db"
                )
            connect_args: dict[str, Any] = {}
            if schema:
                connect_args["server_settings"] = {"search_path": schema}
            # At most twice `pool_size` connections, as before, but every one opened is kept:
            # an overflow connection is closed when returned to a full pool and opened again
            # at the next burst (a connect, authentication, the driver's type setup, every
            # prepared statement prepared anew), which at 64 concurrent round trips opened
            # about 15 connections a second.
            self._writer = create_async_engine(
                url,
                pool_size=2 * pool_size,
                max_overflow=0,
                connect_args=connect_args,
                pool_recycle=1800,
                hide_parameters=True,
            )
            self._reader = self._writer
            # Steps queue here for a connection, first come first served, never in the
            # pool (see `Gate`).
            self._gate = Gate(2 * pool_size)
            self._sync_writer = self._sync_reader = None
            self._group = None
            self._read_threads = None
        else:
            raise DatabaseUrlError(
                f"{shown!r}: Cosigner runs on sqlite+aiosqlite:// or postgresql+asyncpg://"
            )
        self.schema = schema
        # The pending approvals this replica created, usable while it hears every close
        # (PostgreSQL's LISTEN; see `storage.known`). SQLite never listens: nothing is kept.
        self.known = Known()
        if self.dialect == "postgresql":
            # Each connection carries them, so that each write of an approval forgets its copy.
            known = self.known

            @event.listens_for(self._writer.sync_engine, "connect")
            def _hold_known(_dbapi_conn: Any, record: Any) -> None:
                record.info[HELD] = known
                record.info[SCHEMA] = schema  # the NOTIFY channels' (`Work.schema`)

    @property
    def is_sqlite(self) -> bool:
        """True on SQLite, where one process owns the database."""
        return self.dialect == "sqlite"

    async def run_write(
        self, fn: Callable[[Work], T], *, single_write: bool = False, optimistic: bool = False
    ) -> T:
        """Run `fn(work)` in one write transaction: committed if it returns, rolled back if
        it raises. `fn` is synchronous and must not block on anything but the database.

        `single_write`: `fn` reads, then writes with at most one statement (e.g.
        `storage.intake.write`), so on PostgreSQL it runs without BEGIN and COMMIT, two
        round trips fewer: under READ COMMITTED each read sees what it would see inside a
        transaction, and one statement is atomic by itself. A second write raises
        `SecondWrite` before it is sent. SQLite runs it in a transaction as any other.

        `optimistic` (PostgreSQL; a decision): `fn` runs as with `single_write`, its reads
        taking no row lock (`storage.direct.optimistic(conn)` is true), and its one write
        is conditional on the row being as it read it. When that write matches nothing
        (`Raced`: a concurrent write got there first) `fn` runs again from its reads, up to
        `OPTIMISTIC_TRIES` times, then in a transaction; when `fn` finds it needs more than
        one write (`NeedsLock`, raised before anything is written) it runs at once in a
        transaction, where its reads lock. Its first try may read the approval from the
        replica's copy (`self.known`, `storage.known`), which its conditional write checks;
        a first try that read the copy and ends without writing runs again on the database.
        SQLite runs it in a transaction as any other."""
        try:
            if self._group is not None:
                result: T = await self._group.submit(fn)
                return result
            # One greenlet for the whole transaction (connect, BEGIN, fn, COMMIT, check-in):
            # `AsyncEngine.begin()` and `run_sync` would spawn one for each step.
            if optimistic and self.dialect == "postgresql":
                return await self._gated(self._optimistic_on, fn)
            if single_write and self.dialect == "postgresql":
                return await self._gated(single_write_on, fn)
            return await self._gated(write_on, fn)
        except sa.exc.IntegrityError as exc:
            raise Conflict("a concurrent write created the same row") from exc

    async def create(self, fn: Callable[[Work], T]) -> T:
        """Run an intake step: `fn` reads, then stores one new approval (`storage.intake.write`),
        having first taken a use of a standing allow if it found one. Storage chooses how: on
        PostgreSQL without a transaction (`single_write`: one INSERT), and in one when `fn`
        must write twice (`storage.allowances.use` raises `NeedsLock` before anything is
        written). The approval it stores is kept, while pending, in this replica's copy
        (`storage.known`) for the agent's long-poll and the decision's first look."""
        since = self.known.epoch()  # before the write: a close heard meanwhile is not missed
        made: list[Record] = []

        def step(work: Work) -> T:
            info = work.conn.info
            info[CREATED] = made
            try:
                return fn(work)
            finally:
                info.pop(CREATED, None)

        try:
            result = await self.run_write(step, single_write=True)
        except NeedsLock:
            made.clear()
            result = await self.run_write(step)
        for rec in made:
            self.known.keep(rec, since)
        return result

    def pending_copy(self, approval_id: str) -> Record | None:
        """The pending approval as this replica created it (`create`), while it hears every
        close (PostgreSQL's LISTEN; never on SQLite), else None: enough to start waiting on
        it, never proof of its state."""
        return self.known.get(approval_id)

    async def answer(self, fn: Callable[[Work], T], *, writes_more: bool = False) -> T:
        """Run an answer's step (`storage.answers.load`, then `write`, `count` or `revise`):
        storage chooses its transaction. One that writes nothing but the approval's own
        conditional UPDATE is decided optimistically on PostgreSQL (`run_write`'s
        `optimistic`: an unlocked read, of this replica's copy when it created the approval,
        then one conditional write); `writes_more` (the message that carried the answer, a
        standing deny or allow, who vouched for the person, a run grant) runs it in a
        transaction whose read locks the row. SQLite runs each in a transaction."""
        return await self.run_write(fn, optimistic=not writes_more)

    async def run_read(self, fn: Callable[[Work], T], *, snapshot: bool = False) -> T:
        """Run the synchronous `fn(work)` on a read connection (no transaction held).

        `snapshot`: `fn` sees the database as it was at its first statement throughout, and
        may stream rows it does not hold at once (a statement with `yield_per`): for long
        reads off the hot path (audit export and verification, policy replay). On
        PostgreSQL it runs in one read-only REPEATABLE READ transaction, whose server-side
        cursors stream; SQLite's reads always run in one transaction, which WAL keeps at
        its snapshot."""
        if self._read_threads is not None:
            return await asyncio.get_running_loop().run_in_executor(
                self._read_threads, self._on_connection, self._sync_reader, fn
            )
        if snapshot:
            return await self._gated(snapshot_on, fn)
        return await self._gated(read_on, fn)

    async def _gated(self, on: Callable[[Engine, Callable[[Work], T]], T], fn: Callable[[Work], T]) -> T:
        """`on(engine, fn)` in one greenlet, once the gate lets the step have a connection."""
        gate = self._gate
        if gate is None:  # SQLite, after `close` took its writer and read threads: ungated
            return await greenlet_spawn(on, self._writer.sync_engine, fn)
        semaphore = gate.semaphore()
        if semaphore.locked():  # every connection taken: wait in line, as long as the pool would
            try:
                async with asyncio.timeout(gate.timeout):
                    await semaphore.acquire()
            except TimeoutError:
                raise sa.exc.TimeoutError(
                    f"no database connection came free within {gate.timeout:g} s: all "
                    f"{gate.size} of this replica's were busy (COSIGNER_DATABASE_POOL_SIZE sets "
                    "half that); the database is slow to answer, or the pool is too small for the load"
                ) from None
        else:
            await semaphore.acquire()
        try:
            return await greenlet_spawn(on, self._writer.sync_engine, fn)
        finally:
            semaphore.release()

    def _optimistic_on(self, engine: Engine, fn: Callable[[Work], T]) -> T:
        return optimistic_on(engine, fn, self.known if self.known.live else None)

    @staticmethod
    def _on_connection(engine: Engine | None, fn: Callable[[Work], T]) -> T:
        if engine is None:
            raise RuntimeError("the database is closed")
        with engine.connect() as conn:
            try:
                return fn(Work(conn))
            finally:
                conn.rollback()

    async def migrate(self) -> None:
        """Bring the schema to the newest revision (idempotent)."""
        async with self._writer.begin() as conn:
            await conn.run_sync(_upgrade)

    async def revision(self) -> str | None:
        """The schema revision in the database, or None when it was never migrated."""
        async with self._reader.connect() as conn:
            return await conn.run_sync(_current_revision)

    async def ping(self) -> None:
        """Raise if the database cannot answer a trivial query."""
        async with self._reader.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def close(self) -> None:
        """Dispose of every pooled connection."""
        await self._writer.dispose()
        if self._reader is not self._writer:
            await self._reader.dispose()
        if self._group is not None:
            self._group.close()
        if self._read_threads is not None:
            self._read_threads.shutdown(wait=True)
        for engine in (self._sync_writer, self._sync_reader):
            if engine is not None:
                engine.dispose()
        self._group = None
        self._read_threads = None
        self._sync_writer = self._sync_reader = None


def _configure_sqlite(engine: Engine, synchronous: SqliteSync, *, begin: str | None) -> None:
    """WAL, `synchronous` and a busy timeout on every connection; `begin` is the
    statement that opens a transaction (None: the caller sends its own, as `GroupWriter`
    does, which keeps SQLAlchemy's per-statement event dispatch off that engine)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take over transaction control from the driver so BEGIN IMMEDIATE is ours to send.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA synchronous={synchronous.value}")  # a member of the enum, never input
        cur.execute("PRAGMA busy_timeout=10000")
        cur.close()

    if begin is None:
        return

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql(begin)


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
