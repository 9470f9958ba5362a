"""The reads that walk the whole audit log (export, verification, policy replay) stream it
inside one unit of work that sees the database at one moment (`run_read(snapshot=True)`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.util import await_only

from storage import ledger
from storage.audit import Event, stream_requests, stream_since, verify_chains
from storage.database import Database
from storage.work import Work
from tests.harness import database
from tests.storage.test_direct import values

EVENTS = 600  # more than the reads fetch at a time, so they stream in several batches


def requested(n: int) -> list[Event]:
    return [Event("requested", {"kind": "agent"}, {"n": 0})] + [
        Event("note", {"kind": "system"}, {"n": i}) for i in range(1, n)
    ]


def meanwhile(db: Database, loop: asyncio.AbstractEventLoop, step: Callable[[], Awaitable[Any]]) -> None:
    """Run `step` to completion from inside a read's function: SQLite's reads run on a thread
    beside the event loop, PostgreSQL's in a greenlet on it."""
    if db.is_sqlite:
        asyncio.run_coroutine_threadsafe(step(), loop).result()  # type: ignore[arg-type]
    else:
        await_only(step())


async def test_the_whole_log_streams_in_order(db_kind: str) -> None:
    async with database(db_kind) as db:
        await db.run_write(
            lambda tx: ledger.insert_approval(tx, values("apv_1", created_at=1000.0), requested(EVENTS))
        )
        await db.run_write(
            lambda tx: ledger.insert_approval(
                tx, values("apv_2", tool_call_id="c2", created_at=2000.0), requested(2)
            )
        )
        rows = await db.run_read(lambda tx: list(stream_since(tx, 0.0)), snapshot=True)
        assert [(r.approval_id, r.seq) for r in rows] == [("apv_1", s) for s in range(1, EVENTS + 1)] + [
            ("apv_2", 1),
            ("apv_2", 2),
        ]
        later = await db.run_read(lambda tx: [r.approval_id for r in stream_since(tx, 1500.0)], snapshot=True)
        assert later == ["apv_2", "apv_2"]
        asked = await db.run_read(lambda tx: list(stream_requests(tx, 0.0)), snapshot=True)
        assert [(r.approval_id, r.tenant, r.at) for r in asked] == [
            ("apv_1", "acme", 1000),
            ("apv_2", "acme", 2000),
        ]
        assert await db.run_read(verify_chains, snapshot=True) == (EVENTS + 2, [])
        # The connection goes back to the pool as it was: read-write, READ COMMITTED.
        await db.run_write(
            lambda tx: ledger.insert_approval(tx, values("apv_3", tool_call_id="c3"), requested(1))
        )
        assert await db.run_read(lambda tx: ledger.load(tx, "apv_3")) is not None


async def test_a_snapshot_sees_nothing_committed_after_its_first_statement(db_kind: str) -> None:
    async with database(db_kind) as db:
        await db.run_write(
            lambda tx: ledger.insert_approval(tx, values("apv_1", created_at=1000.0), requested(3))
        )
        loop = asyncio.get_running_loop()
        more = requested(2)

        async def another() -> None:
            await db.run_write(
                lambda tx: ledger.insert_approval(tx, values("apv_2", tool_call_id="c2"), more)
            )

        def export(tx: Work) -> tuple[int, list[str]]:
            first = len(ledger.events_of(tx, "apv_1"))
            meanwhile(db, loop, another)  # committed while the read is under way
            return first, sorted({r.approval_id for r in stream_since(tx, 0.0)})

        assert await db.run_read(export, snapshot=True) == (3, ["apv_1"])
        # A verification that read the approvals first and the events after would see events
        # of an approval it never read: it sees neither.
        assert await db.run_read(lambda tx: len(list(stream_since(tx, 0.0))), snapshot=True) == 5
