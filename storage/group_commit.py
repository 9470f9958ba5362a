"""Group commit for SQLite: one writer thread runs queued transactions, several per COMMIT.

Each queued function runs inside its own SAVEPOINT, so one that raises is rolled back
alone and its caller gets the exception; the others' work commits together, and only
after COMMIT returns does any caller hear that its transaction succeeded. Under load this
turns many small commits into one, and many thread hand-offs into one per batch.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Connection, Engine

MAX_BATCH = 64
Job = tuple[Callable[[Connection], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


def _settle(results: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for fut, ok, value in results:
        if fut.done():
            continue  # the caller was cancelled; its transaction still committed or not
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


class GroupWriter:
    """The single SQLite writer: submit a function, await its committed result."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="cosigner-db-write", daemon=True)
        self._thread.start()
        self.batches = 0
        self.transactions = 0

    async def submit(self, fn: Callable[[Connection], Any]) -> Any:
        """Run `fn(conn)` in a write transaction and return what it returned."""
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

    def _commit(self, batch: list[Job]) -> list[tuple[bool, Any]]:
        outcomes: list[tuple[bool, Any]] = []
        try:
            with self._engine.connect() as conn, conn.begin():
                if len(batch) == 1:
                    return [(True, batch[0][0](conn))]
                for fn, _loop, _fut in batch:
                    savepoint = conn.begin_nested()
                    try:
                        value = fn(conn)
                    except Exception as exc:
                        savepoint.rollback()
                        outcomes.append((False, exc))
                    else:
                        savepoint.commit()
                        outcomes.append((True, value))
        except Exception as exc:
            # The COMMIT (or BEGIN) failed, or a lone transaction raised: nothing was written.
            return [(False, exc)] * len(batch)
        return outcomes
