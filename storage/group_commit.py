"""Group commit for SQLite: one writer thread runs queued transactions, several per COMMIT.

Each queued function runs inside its own SAVEPOINT, so one that raises is rolled back
alone and its caller gets the exception; the others' work commits together, and only
after COMMIT returns does any caller hear that its transaction succeeded. Under load this
turns many small commits into one, and many thread hand-offs into one per batch.

The thread keeps its one connection between batches and sends `BEGIN IMMEDIATE` itself on
the driver's cursor: checking a connection out of the pool per batch, and a `begin` event
listener on the engine (which makes SQLAlchemy dispatch its execution events around every
statement), cost more than a small transaction's own statements. A batch that fails for
any reason drops the connection; the next batch opens a fresh one.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from storage.work import Work

MAX_BATCH = 64
Job = tuple[Callable[[Work], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


def _settle(results: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for fut, ok, value in results:
        if fut.done():
            continue  # the caller was cancelled; its transaction still committed or not
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


def _begin_immediate(conn: Connection) -> None:
    """`BEGIN IMMEDIATE` on the driver's connection (SQLAlchemy's `begin` only marks the
    transaction: pysqlite in autocommit mode sends nothing); a driver error is raised as
    SQLAlchemy's, as `exec_driver_sql` would."""
    dbapi = conn.connection.dbapi_connection
    assert dbapi is not None
    cursor = dbapi.cursor()
    try:
        cursor.execute("BEGIN IMMEDIATE")
    except conn.dialect.loaded_dbapi.Error as exc:
        raise sa.exc.DBAPIError.instance(
            "BEGIN IMMEDIATE",
            None,
            exc,
            conn.dialect.loaded_dbapi.Error,
            hide_parameters=True,
            dialect=conn.dialect,
        ) from exc
    finally:
        cursor.close()


class GroupWriter:
    """The single SQLite writer: submit a function, await its committed result."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None  # used by the writer thread only
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="cosigner-db-write", daemon=True)
        self._thread.start()
        self.batches = 0
        self.transactions = 0

    async def submit(self, fn: Callable[[Work], Any]) -> Any:
        """Run `fn(work)` in a write transaction and return what it returned."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._queue.put((fn, loop, fut))
        return await fut

    def close(self) -> None:
        """Finish what is queued, then stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                self._drop()
                return
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stopping = True
                    break
                batch.append(nxt)
            outcomes = self._commit(batch)
            self.batches += 1
            self.transactions += len(batch)
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
            for (_fn, loop, fut), (ok, value) in zip(batch, outcomes, strict=True):
                by_loop.setdefault(loop, []).append((fut, ok, value))
            for loop, results in by_loop.items():
                try:
                    loop.call_soon_threadsafe(_settle, results)
                except RuntimeError:
                    pass  # that loop is closed: nobody is waiting any more
        self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass  # a broken connection: the pool discards it

    def _commit(self, batch: list[Job]) -> list[tuple[bool, Any]]:
        outcomes: list[tuple[bool, Any]] = []
        try:
            if self._conn is None:
                self._conn = self._engine.connect()
            conn = self._conn
            with conn.begin():
                _begin_immediate(conn)
                if len(batch) == 1:
                    return [(True, batch[0][0](Work(conn)))]
                for fn, _loop, _fut in batch:
                    savepoint = conn.begin_nested()
                    try:
                        value = fn(Work(conn))
                    except Exception as exc:
                        savepoint.rollback()
                        outcomes.append((False, exc))
                    else:
                        savepoint.commit()
                        outcomes.append((True, value))
        except Exception as exc:
            # The COMMIT (or BEGIN) failed, or a lone transaction raised: nothing was written.
            held = self._conn
            if held is not None and (
                isinstance(exc, sa.exc.DBAPIError) or held.invalidated or held.in_transaction()
            ):
                self._drop()  # it may be unusable; the next batch opens another
            return [(False, exc)] * len(batch)
        return outcomes
