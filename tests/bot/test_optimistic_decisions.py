"""A decision on PostgreSQL reads the approval without its row lock and writes with one
conditional statement (`Database.run_write(optimistic=True)`): what another step writes
between that read and that write makes the write match nothing, and the decision runs again
from a fresh read. These tests put the other step exactly there, through the clock the
decision reads between its read and its write, so every interleaving is deterministic."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.util import await_

from bot.approvals.lifecycle import Closed, Closing, close
from contracts.answers import PersonDecider
from contracts.enums import ApprovalStatus, SurfaceType
from contracts.errors import AlreadyDecided
from contracts.ports import Delivered
from storage import ledger, raw
from storage.audit import Event, verify_chains
from storage.database import Database
from storage.record_columns import delivered_to_json
from storage.steps import OPTIMISTIC_TRIES
from storage.tables import jobs, run_grants
from storage.work import Work
from tests.harness import database, postgres_url
from tests.storage.test_direct import values

NOW = 2000.0
ANN = PersonDecider(surface=SurfaceType.DASHBOARD, userId="u_ann")
BOB = PersonDecider(surface=SurfaceType.DASHBOARD, userId="u_bob")
RECEIPT_OF = Delivered(SurfaceType.DASHBOARD, "u_ann")
RECEIPT = delivered_to_json(RECEIPT_OF)

pytestmark = pytest.mark.skipif(
    not postgres_url(), reason="needs PostgreSQL (COSIGNER_TEST_POSTGRES_URL): SQLite has one writer"
)


class Interleaved:
    """The decision's clock: on its first `times` readings (each between the decision's read
    and its write) it first runs `other`, another step committed on another connection."""

    def __init__(self, db: Database, other: Callable[[Work], Any], times: int = 1) -> None:
        self.db, self.other, self.times = db, other, times
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        if self.readings <= self.times:
            await_(self.db.run_write(self.other))  # inside the decision's greenlet
        return NOW


def deciding(db: Database, approval_id: str, closing: Closing, clock: Callable[[], float]) -> Any:
    return db.run_write(
        lambda tx: close(tx, approval_id, closing, clock, callback_window=60.0),
        optimistic=True,
    )


def note(approval_id: str) -> Callable[[Work], None]:
    """Another step that changes the approval without closing it: a link on its chain."""

    def step(tx: Work) -> None:
        head = ledger.head(tx, approval_id, lock=True)
        assert head is not None
        ledger.add_events(tx, head, NOW, [Event("note", {"kind": "surface"}, {"n": 1})])

    return step


async def made(db: Database, **changes: Any) -> str:
    events = [Event("requested", {"kind": "agent"}, {})]
    row = values("apv_1", created_at=1000.5, **changes)  # a float, as the chain's hash reads it back
    rec = await db.run_write(lambda tx: ledger.insert_approval(tx, row, events))
    return rec.id


async def job_kinds(db: Database, approval_id: str) -> list[str]:
    async with raw.read(db) as conn:
        return list(
            (await conn.execute(sa.select(jobs.c.kind).where(jobs.c.approval_id == approval_id))).scalars()
        )


async def chain(db: Database, approval_id: str) -> list[str]:
    """The approval's events, after checking every chain in the database is unbroken."""
    _checked, findings = await db.run_read(verify_chains, snapshot=True)
    assert findings == []
    return [r.event for r in await db.run_read(lambda tx: ledger.events_of(tx, approval_id))]


async def test_a_decision_that_loses_the_race_reads_again_and_is_refused_as_closed() -> None:
    async with database("postgres") as db:
        aid = await made(db)
        denied = Closing(ApprovalStatus.DENIED, BOB)
        clock = Interleaved(db, lambda tx: close(tx, aid, denied, lambda: NOW, callback_window=60.0))
        done: Closed = await deciding(
            db, aid, Closing(ApprovalStatus.APPROVED, ANN, audit_refusal=True), clock
        )
        # Refused as a closed approval is (the engine raises it once the refusal is on the chain).
        assert isinstance(done.refusal, AlreadyDecided) and not done.changed
        assert done.refusal.details.get("status") == "denied"
        assert clock.readings == 2  # read, lost the write; read again, found it closed
        assert await chain(db, aid) == ["requested", "denied", "decision_refused"]
        stored = await db.run_read(lambda tx: ledger.load(tx, aid))
        assert stored is not None and stored.decided_by == BOB


async def test_a_decision_that_loses_the_race_to_a_note_decides_on_the_longer_chain() -> None:
    async with database("postgres") as db:
        aid = await made(db)
        clock = Interleaved(db, note(aid))
        done: Closed = await deciding(db, aid, Closing(ApprovalStatus.APPROVED, ANN), clock)
        assert done.changed and done.record.status is ApprovalStatus.APPROVED
        assert done.record.audit_seq == 3 and clock.readings == 2
        assert await chain(db, aid) == ["requested", "note", "approved"]


async def test_a_decision_that_keeps_losing_takes_the_row_lock() -> None:
    async with database("postgres") as db:
        aid = await made(db)
        clock = Interleaved(db, note(aid), times=OPTIMISTIC_TRIES)
        done: Closed = await deciding(db, aid, Closing(ApprovalStatus.APPROVED, ANN), clock)
        assert done.changed and clock.readings == OPTIMISTIC_TRIES + 1  # the last under the lock
        assert await chain(db, aid) == ["requested", *["note"] * OPTIMISTIC_TRIES, "approved"]


async def test_a_receipt_stored_after_the_read_still_gets_its_card_updated() -> None:
    # The receipt is the one column written without a link on the chain: a decision that read
    # none would queue no card update for a card posted meanwhile.
    async with database("postgres") as db:
        aid = await made(db)
        clock = Interleaved(db, lambda tx: ledger.set_receipt_if_pending(tx, aid, RECEIPT_OF))
        done: Closed = await deciding(db, aid, Closing(ApprovalStatus.DENIED, ANN), clock)
        assert done.changed and done.record.delivered is not None and clock.readings == 2
        kinds = await job_kinds(db, aid)
        assert kinds == ["show"]


async def test_a_decision_with_a_second_write_runs_in_a_transaction_and_writes_once() -> None:
    async with database("postgres") as db:
        aid = await made(db, mode="ask", delivered=RECEIPT)
        readings: list[float] = []

        def clock() -> float:
            readings.append(NOW)
            return NOW

        for_run = Closing(ApprovalStatus.APPROVED, ANN, run_grant="dashboard:u_ann")
        done: Closed = await deciding(db, aid, for_run, clock)
        assert done.changed and len(readings) == 2  # found it needs the grant, then locked
        assert await chain(db, aid) == ["requested", "approved"]
        async with raw.read(db) as conn:
            grants = (await conn.execute(sa.select(sa.func.count()).select_from(run_grants))).scalar_one()
        kinds = await job_kinds(db, aid)
        assert (grants, kinds) == (1, ["show"])


async def test_exactly_one_of_many_concurrent_decisions_wins() -> None:
    async with database("postgres") as db:
        aid = await made(db)
        people = [PersonDecider(surface=SurfaceType.DASHBOARD, userId=f"u_{i}") for i in range(12)]
        outcomes = await asyncio.gather(
            *(deciding(db, aid, Closing(ApprovalStatus.APPROVED, p), lambda: NOW) for p in people),
            return_exceptions=True,
        )
        won = [o for o in outcomes if isinstance(o, Closed)]
        assert len(won) == 1 and all(isinstance(o, AlreadyDecided) for o in outcomes if o not in won)
        assert await chain(db, aid) == ["requested", "approved"]
