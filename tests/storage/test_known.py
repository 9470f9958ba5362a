"""A replica's copies of the pending approvals it created (`storage.known`): kept only while
every close is heard, forgotten at the first sign of change, and never taken as proof by a
decision (its write checks the copy; a try that wrote nothing runs again on the database)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from contracts.answers import PolicyDecider
from contracts.enums import ApprovalStatus, SurfaceType
from contracts.ports import Delivered
from storage import allowances, known, ledger
from storage.allowances import UsedUp
from storage.audit import GENESIS, Event
from storage.database import Database
from storage.direct import single_write
from storage.known import Known
from storage.records import Changes, Decided, Record
from storage.work import Work
from tests.harness import database, postgres_url
from tests.storage.test_direct import values

needs_postgres = pytest.mark.skipif(
    not postgres_url(), reason="optimistic steps are PostgreSQL's: set COSIGNER_TEST_POSTGRES_URL"
)


def pending(approval_id: str = "apv_1") -> Record:
    return Record.from_row(SimpleNamespace(**values(approval_id, audit_seq=0, audit_head=GENESIS)))


def test_nothing_is_kept_or_given_while_not_listening() -> None:
    known = Known()
    known.keep(pending(), known.epoch())
    assert known.get("apv_1") is None and len(known) == 0
    known.listening(True)
    known.keep(pending(), known.epoch())
    assert known.get("apv_1") is not None
    known.listening(False)  # the LISTEN connection was lost: a close may go unheard
    assert known.get("apv_1") is None and len(known) == 0
    known.listening(True)
    assert known.get("apv_1") is None  # not back: it was forgotten, not hidden


def test_only_pending_approvals_are_kept() -> None:
    known = Known()
    known.listening(True)
    known.keep(replace(pending(), status=ApprovalStatus.APPROVED), known.epoch())
    assert known.get("apv_1") is None


def test_a_close_heard_while_the_create_was_writing_wins_over_the_create() -> None:
    known = Known()
    known.listening(True)
    since = known.epoch()  # the create starts writing
    known.forget("apv_other")
    known.forget("apv_1")  # closed (another replica) before the create's step returned
    known.forget("apv_third")
    known.keep(pending("apv_1"), since)
    assert known.get("apv_1") is None
    known.keep(pending("apv_2"), since)  # others forgotten meanwhile do not matter
    assert known.get("apv_2") is not None


def test_a_connection_lost_while_the_create_was_writing_keeps_nothing_it_wrote() -> None:
    known = Known()
    known.listening(True)
    since = known.epoch()
    known.listening(False)
    known.listening(True)
    known.keep(pending(), since)
    assert known.get("apv_1") is None


def test_more_closes_than_it_remembers_during_a_create_keep_nothing() -> None:
    known = Known()
    known.listening(True)
    since = known.epoch()
    for i in range(5000):
        known.forget(f"apv_x{i}")
    known.keep(pending(), since)
    assert known.get("apv_1") is None


def test_the_oldest_copy_goes_first_beyond_the_size() -> None:
    known = Known(size=3)
    known.listening(True)
    for i in range(5):
        known.keep(pending(f"apv_{i}"), known.epoch())
    assert [known.get(f"apv_{i}") is not None for i in range(5)] == [False, False, True, True, True]


# --- an optimistic step's first try on the copy (PostgreSQL) ---------------------------------------


class Reads:
    """The reads of an approval's row that reach the database."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        stmt = ledger._LOAD
        outer = self

        class Counting:
            def first(self, tx: Any, params: dict[str, Any]) -> Any:
                outer.count += 1
                return stmt.first(tx, params)

        monkeypatch.setattr(ledger, "_LOAD", Counting())


async def kept(db: Database) -> Record:
    """apv_1 inserted, and kept as its creating replica keeps it."""
    rec = await db.run_write(lambda tx: ledger.insert_approval(tx, values("apv_1"), []))
    db.known.listening(True)
    db.known.keep(rec, db.known.epoch())
    assert db.known.get("apv_1") is rec
    return rec


def deny(tx: Work) -> Record:
    rec = ledger.load(tx, "apv_1")
    assert rec is not None
    change = Changes(decided=Decided(ApprovalStatus.DENIED, 2000.0, PolicyDecider(rule="tools.t"), None))
    return ledger.append(tx, rec, 2000.0, [Event("denied", {}, {})], change, only_pending=True)


def note(tx: Work) -> Record:
    rec = ledger.load(tx, "apv_1", lock=True)
    assert rec is not None
    return ledger.append(tx, rec, 1500.0, [Event("note", {}, {})])


async def elsewhere(db: Database, step: Callable[[Work], Any]) -> None:
    """Run `step` on another replica of the same database, whose writes this one's copies
    never hear of (its NOTIFY lost, or none sent)."""
    other = Database(db.url, schema=db.schema)
    try:
        await other.run_write(step)
    finally:
        await other.close()


@needs_postgres
async def test_every_write_of_an_approvals_row_on_this_replica_forgets_its_copy() -> None:
    async with database("postgres") as db:
        await kept(db)
        await db.run_write(note)  # a link on its chain
        assert db.known.get("apv_1") is None
        await kept_again(db)
        receipt = Delivered(SurfaceType.SLACK, "C1", ("1700000000.000100",))
        await db.run_write(lambda tx: ledger.set_receipt_if_pending(tx, "apv_1", receipt))
        assert db.known.get("apv_1") is None


async def kept_again(db: Database) -> None:
    rec = await db.run_read(lambda tx: ledger.load(tx, "apv_1"))
    assert rec is not None
    db.known.keep(rec, db.known.epoch())
    assert db.known.get("apv_1") is rec


@needs_postgres
@pytest.mark.parametrize("stale", [False, True], ids=["true copy", "stale copy"])
async def test_a_decision_reads_nothing_on_a_true_copy_and_loses_its_race_on_a_stale_one(
    stale: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with database("postgres") as db:
        await kept(db)
        if stale:
            await elsewhere(db, note)  # the row changed and the copy was not told (a lost NOTIFY)
        reads = Reads(monkeypatch)
        closed = await db.run_write(deny, optimistic=True)
        # Stale: its write matched nothing, and the step read the row and decided again.
        assert closed.status is ApprovalStatus.DENIED and reads.count == (1 if stale else 0)
        events = await db.run_read(lambda tx: ledger.events_of(tx, "apv_1"))
        chain = [(1, "note"), (2, "denied")] if stale else [(1, "denied")]
        assert [(e.seq, e.event) for e in events] == chain, "one chain, not forked"


@needs_postgres
async def test_what_a_copy_says_without_a_write_to_check_it_is_asked_of_the_database_again() -> None:
    async with database("postgres") as db:
        copy = await kept(db)
        await elsewhere(db, deny)  # closed, and the copy still says pending
        assert db.known.get("apv_1") is copy

        def status(tx: Work) -> ApprovalStatus:
            rec = ledger.load(tx, "apv_1")
            assert rec is not None
            return rec.status

        assert await db.run_write(status, optimistic=True) is ApprovalStatus.DENIED

        def refuse_pending(tx: Work) -> str:
            rec = ledger.load(tx, "apv_1")
            assert rec is not None
            if rec.status is ApprovalStatus.PENDING:
                raise ValueError("refused: it is pending")
            return "closed"

        db.known.keep(copy, db.known.epoch())  # still stale
        assert await db.run_write(refuse_pending, optimistic=True) == "closed"


@needs_postgres
async def test_a_copy_is_offered_only_while_listening_and_only_to_the_first_try(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with database("postgres") as db:
        copy = await kept(db)
        db.known.listening(False)
        db.known.listening(True)
        reads = Reads(monkeypatch)

        def twice(tx: Work) -> None:
            ledger.load(tx, "apv_1")
            ledger.load(tx, "apv_1")

        await db.run_write(twice, optimistic=True)
        assert reads.count == 2  # forgotten when the connection was lost: both from the database
        db.known.keep(copy, db.known.epoch())
        reads.count = 0
        await db.run_write(twice, optimistic=True)
        # The copy once, then the database; and a try that wrote nothing runs again, all from it.
        assert reads.count == 1 + 2


def store_one(tx: Work) -> Record:
    """An intake step's one write, as `storage.intake.write` ends: the approval inserted and
    handed to the replica's copy."""
    rec = ledger.insert_approval(tx, values("apv_1"), [])
    known.created(tx, rec)
    return rec


@pytest.mark.parametrize("db_kind", ["sqlite", "postgres"])
async def test_a_create_keeps_what_it_stored_while_the_replica_listens(db_kind: str) -> None:
    if db_kind == "postgres" and not postgres_url():
        pytest.skip("set COSIGNER_TEST_POSTGRES_URL")
    async with database(db_kind) as db:
        db.known.listening(db_kind == "postgres")  # SQLite never listens: nothing is kept
        rec = await db.create(store_one)
        copy = db.pending_copy("apv_1")
        assert copy is (rec if db_kind == "postgres" else None)
        assert db.pending_copy("apv_2") is None


@needs_postgres
async def test_a_create_that_must_write_twice_runs_again_in_a_transaction() -> None:
    """A create runs as one write on PostgreSQL; a step that finds it must write twice (a
    standing allow's use, `storage.allowances.use`) says so before writing, and runs again
    in a transaction, where both writes go."""
    seen: list[bool] = []

    def step(tx: Work) -> Record:
        seen.append(single_write(tx))
        allowances.use(tx, "alw_missing", 1500.0)  # raises NeedsLock in a one-write step
        return store_one(tx)

    async with database("postgres") as db:
        with pytest.raises(UsedUp):  # in the transaction: the allow is not there to use
            await db.create(step)
        assert seen == [True, False]
        assert await db.run_read(lambda tx: ledger.load(tx, "apv_1")) is None, "nothing was written"
