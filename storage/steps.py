"""How one step runs on a PostgreSQL connection (`Database.run_write`, `run_read`): in a
transaction, in autocommit with at most one write (`single_write`), optimistically with
one conditional write, or as a read; and the gate that queues steps for a connection.

Each runs inside one greenlet (`Database._gated`), from check-out to check-in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.engine import Engine

from storage.direct import OPTIMISTIC, SINGLE_WRITE, NeedsLock, Raced
from storage.known import OFFERED, USED, Known
from storage.work import Work

T = TypeVar("T")
POOL_TIMEOUT = 30.0
"""Seconds a PostgreSQL step waits for a pooled connection before it fails (SQLAlchemy's
default `pool_timeout`, which the pool keeps as a backstop)."""


class Gate:
    """How many steps may hold a pooled connection at once (the pool's size), the others
    waiting their turn in arrival order.

    Waiting in the pool itself is neither cheap nor fair: each waiter runs
    `asyncio.wait_for` on a queue (a task and a timer per wait), and a connection returned
    while its next waiter is being woken goes to whichever step asks first, sending the
    waiter to the back of the queue. Under 256 concurrent round trips that put some
    requests seconds behind the rest. An `asyncio.Semaphore` queues in order (a newcomer
    waits behind every earlier waiter) for the price of one future. A step that waits
    longer than the pool would have (`timeout`) fails as it would have, with SQLAlchemy's
    `TimeoutError`. The semaphore belongs to the event loop that first waits on it, so one
    is made per loop."""

    def __init__(self, size: int, timeout: float = POOL_TIMEOUT) -> None:
        self.size = size
        self.timeout = timeout  # seconds a step waits for a connection, then fails
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the one `_semaphore` belongs to

    def semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or loop is not self._loop:
            self._loop = loop
            self._semaphore = asyncio.Semaphore(self.size)
        return self._semaphore


def write_on(engine: Engine, fn: Callable[[Work], T]) -> T:
    """`fn` in one transaction of `engine` (inside a greenlet, on PostgreSQL)."""
    with engine.begin() as conn:
        return fn(Work(conn))


def single_write_on(engine: Engine, fn: Callable[[Work], T]) -> T:
    """`fn` on a connection of `engine` in autocommit, allowed one write statement."""
    with engine.connect() as conn:
        auto = conn.execution_options(isolation_level="AUTOCOMMIT")
        auto.info[SINGLE_WRITE] = 0
        try:
            return fn(Work(auto))
        finally:
            auto.info.pop(SINGLE_WRITE, None)


OPTIMISTIC_TRIES = 3
"""Optimistic runs of a step before it runs in a transaction: each lost race means another
step changed the row meanwhile, and under that much contention the row lock is cheaper."""


def _unchecked(info: dict[Any, Any]) -> bool:
    """Whether the optimistic try that just ended read the replica's copy and wrote nothing
    that would have checked it."""
    return bool(info.pop(USED, False)) and not info[SINGLE_WRITE]


def read_on(engine: Engine, fn: Callable[[Work], T]) -> T:
    """`fn` on a connection of `engine` in autocommit: a read needs no BEGIN or ROLLBACK
    round trips to the server, and under READ COMMITTED each statement sees the same
    committed data it would inside a transaction."""
    with engine.connect() as conn:
        return fn(Work(conn.execution_options(isolation_level="AUTOCOMMIT")))


def snapshot_on(engine: Engine, fn: Callable[[Work], T]) -> T:
    """`fn` in one read-only REPEATABLE READ transaction of `engine`, rolled back after."""
    with engine.connect() as conn:
        snap = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        try:
            return fn(Work(snap))
        finally:
            snap.rollback()


def optimistic_on(engine: Engine, fn: Callable[[Work], T], known: Known | None) -> T:
    """`fn` in autocommit with one conditional write (reads unlocked), again while it
    loses the race, then in one transaction (see `run_write`). The first try is offered
    the replica's copies; a try that read one and wrote nothing (it refused, or raised)
    runs again, on the database. `known`: the replica's copies, when it hears every close."""
    with engine.connect() as conn:
        auto = conn.execution_options(isolation_level="AUTOCOMMIT")
        info = auto.info
        try:
            for _ in range(OPTIMISTIC_TRIES + (known is not None)):
                info[SINGLE_WRITE] = 0
                info[OPTIMISTIC] = True
                info.pop(USED, None)
                if known is not None:
                    info[OFFERED], known = known, None
                try:
                    result = fn(Work(auto))
                except Raced:
                    continue
                except NeedsLock:
                    break
                except Exception:
                    if _unchecked(info):
                        continue  # refused on the copy: ask the database
                    raise
                finally:
                    info.pop(OFFERED, None)
                if _unchecked(info):
                    continue  # decided on the copy without a write to check it
                return result
        finally:
            for key in (SINGLE_WRITE, OPTIMISTIC, OFFERED, USED):
                info.pop(key, None)
    return write_on(engine, fn)
