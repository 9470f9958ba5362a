"""The steps PostgreSQL runs in fewer statements read and write what SQLite's separate
statements do, inside the transaction they belong to (or, for a create, without one)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.pool import QueuePool

from contracts.answers import PolicyDecider
from contracts.denials import Scope
from contracts.enums import ApprovalStatus, JobKind, SurfaceType
from contracts.errors import AlreadyDecided
from storage import denials, intake, ledger, raw
from storage.audit import GENESIS, Event
from storage.database import Database
from storage.direct import SecondWrite
from storage.jobs import Delivery, Queued
from storage.notify import channel_for
from storage.records import Changes, Decided
from storage.tables import approvals, audit_events, jobs, run_grants
from storage.work import Work
from tests.harness import database, postgres_url
from tests.storage.test_direct import values

SCOPE = Scope("acme", "issue_refund", SurfaceType.DASHBOARD, "u_boss", "dashboard:u_1")


async def seed(db: Database) -> None:
    """Run run_1: two gated calls and one that needed nobody, a run grant, a standing deny."""

    def fill(tx: Work) -> None:
        for i, mode in enumerate(("ask", "ask_always", "none")):
            ledger.insert_approval(tx, values(f"apv_{i}", tool_call_id=f"call_{i}", mode=mode), [])
        ledger.insert_ignore(
            tx,
            run_grants,
            {
                "tenant": "acme",
                "execution_id": "run_1",
                "tool_name": "issue_credit",
                "requester": "dashboard:u_1",
                "approval_id": "apv_0",
                "granted_by": "dashboard:u_boss",
                "created_at": 1.0,
            },
        )
        denials.record(tx, "sdn_1", SCOPE, None, "apv_1", 2.0)

    await db.run_write(fill)


def question(call: str = "call_new", **asks: Any) -> intake.Question:
    return intake.Question("acme", "run_1", call, **asks)


async def test_a_new_calls_snapshot_is_the_same_read_at_once_or_piece_by_piece(db_kind: str) -> None:
    async with database(db_kind) as db:
        await seed(db)

        async def load(q: intake.Question) -> intake.Snapshot:
            return await db.run_write(lambda tx: intake.load(tx, q), single_write=True)

        earlier = await load(
            question("call_1", count=True, grant=("issue_credit", "dashboard:u_1"), scope=SCOPE)
        )
        assert earlier.earlier is not None and earlier.earlier.id == "apv_1"
        assert (earlier.gated, earlier.grant, earlier.standing) == (0, None, None)

        held = await load(question(count=True, grant=("issue_credit", "dashboard:u_1"), scope=SCOPE))
        assert held.standing is not None and held.standing.id == "sdn_1" and held.standing.scope == SCOPE
        assert (held.earlier, held.gated, held.grant) == (None, 0, None)  # a standing deny ends it

        other = Scope("acme", "issue_refund", SurfaceType.DASHBOARD, "u_boss", "dashboard:u_2")
        free = await load(question(count=True, grant=("issue_credit", "dashboard:u_1"), scope=other))
        assert free == intake.Snapshot(gated=2, grant=intake.RunGrant("apv_0", "dashboard:u_boss"))

        assert await load(question(count=True)) == intake.Snapshot(gated=2)
        assert await load(question(grant=("issue_credit", "dashboard:u_9"))) == intake.Snapshot()
        assert await load(question()) == intake.Snapshot()


async def test_a_new_approval_its_chain_and_its_jobs_are_written_together(db_kind: str) -> None:
    async with database(db_kind) as db:
        events = [Event("requested", {"kind": "agent"}, {"n": 1}), Event("note", {}, {"ü": "Zoë"})]
        queued = [
            Queued(JobKind.DELIVER, 1000.0, 4600.0),
            Queued(JobKind.CALLBACK, 1001.5, 5000.0, Delivery("dlv_1")),
        ]
        rec = await db.run_write(
            lambda tx: ledger.insert_approval(tx, values("apv_1"), events, queued), single_write=True
        )
        assert rec.audit_seq == 2

        def read(tx: Work) -> tuple[list[Any], list[Any]]:
            chain = tx.conn.execute(
                sa.select(
                    audit_events.c.seq, audit_events.c.event, audit_events.c.data, audit_events.c.prev_hash
                )
                .where(audit_events.c.approval_id == "apv_1")
                .order_by(audit_events.c.seq)
            ).all()
            outbox = tx.conn.execute(
                sa.select(jobs.c.kind, jobs.c.payload, jobs.c.due_at, jobs.c.attempts, jobs.c.locked_until)
                .where(jobs.c.approval_id == "apv_1")
                .order_by(jobs.c.due_at)
            ).all()
            return list(chain), list(outbox)

        chain, outbox = await db.run_read(read)
        assert [(s, e) for s, e, _d, _p in chain] == [(1, "requested"), (2, "note")]
        assert chain[0][3] == GENESIS and json.loads(chain[1][2]) == {"ü": "Zoë"}
        assert [tuple(r) for r in outbox] == [
            ("deliver", "{}", 1000.0, 0, 0.0),
            ("callback", '{"delivery": "dlv_1"}', 1001.5, 0, 0.0),
        ]
        # A duplicate call writes nothing at all: not its chain, not its jobs.
        with pytest.raises(Exception, match="same row"):
            await db.run_write(
                lambda tx: ledger.insert_approval(
                    tx, values("apv_2", tool_call_id="call_apv_1"), events, queued
                ),
                single_write=True,
            )
        counts = await db.run_read(
            lambda tx: [
                tx.conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                for t in (approvals, audit_events, jobs)
            ]
        )
        assert counts == [1, 2, 2]


async def test_a_write_on_the_driver_is_rolled_back_with_its_transaction(db_kind: str) -> None:
    async with database(db_kind) as db:
        rec = await db.run_write(lambda tx: ledger.insert_approval(tx, values("apv_1"), []))

        def decide_then_fail(tx: Work) -> None:
            now = 2000.0
            by = PolicyDecider(rule="tools.t")
            ledger.append(
                tx,
                rec,
                now,
                [Event("approved", {}, {})],
                Changes(decided=Decided(ApprovalStatus.APPROVED, now, by, None)),
                only_pending=True,
            )
            raise RuntimeError("the step fails after its writes")

        with pytest.raises(RuntimeError):
            await db.run_write(decide_then_fail)
        assert await db.run_read(lambda tx: ledger.load(tx, "apv_1")) == rec
        assert await db.run_read(lambda tx: ledger.events_of(tx, "apv_1")) == []


async def test_a_second_write_without_a_transaction_is_refused_before_it_is_sent() -> None:
    if not postgres_url():
        pytest.skip("needs PostgreSQL (COSIGNER_TEST_POSTGRES_URL): SQLite always runs a transaction")
    async with database("postgres") as db:

        def two(tx: Work) -> None:
            ledger.insert_approval(tx, values("apv_1"), [])
            ledger.insert_approval(tx, values("apv_2", tool_call_id="call_2"), [])

        with pytest.raises(SecondWrite, match="run it in a transaction"):
            await db.run_write(two, single_write=True)
        stored = await db.run_read(lambda tx: list(tx.conn.execute(sa.select(approvals.c.id)).scalars()))
        assert stored == ["apv_1"]  # the first committed on its own; the second was never sent
        # The connection goes back to the pool clean: the next step runs in a transaction.
        await db.run_write(lambda tx: ledger.insert_approval(tx, values("apv_3", tool_call_id="c3"), []))
        await db.run_write(lambda tx: ledger.insert_approval(tx, values("apv_4", tool_call_id="c4"), []))


async def test_a_decision_notifies_in_its_own_statement_and_only_if_it_won() -> None:
    url = postgres_url()
    if not url:
        pytest.skip("needs PostgreSQL (COSIGNER_TEST_POSTGRES_URL): NOTIFY is PostgreSQL's")
    async with database("postgres") as db:
        heard: asyncio.Queue[str] = asyncio.Queue()
        listener = await asyncpg.connect(make_url(url).set(drivername="postgresql").render_as_string(False))
        try:
            await listener.add_listener(channel_for(db.schema), lambda *a: heard.put_nowait(a[3]))
            rec = await db.run_write(lambda tx: ledger.insert_approval(tx, values("apv_1"), []))
            by = PolicyDecider(rule="tools.t")

            def close(status: ApprovalStatus) -> Any:
                change = Changes(decided=Decided(status, 2000.0, by, None))
                return lambda tx: ledger.append(
                    tx,
                    rec,
                    2000.0,
                    [Event(status.value, {}, {})],
                    change,
                    only_pending=True,
                    notify=channel_for(db.schema),
                )

            closed = await db.run_write(close(ApprovalStatus.APPROVED))
            assert closed.status is ApprovalStatus.APPROVED
            assert await asyncio.wait_for(heard.get(), 10) == "apv_1"
            with pytest.raises(AlreadyDecided):
                await db.run_write(close(ApprovalStatus.DENIED))
            # The loser's statement changed nothing and told nobody (its NOTIFY rolled back).
            await listener.execute("SELECT 1")  # a round trip: a pending notification arrives first
            assert heard.empty()
            assert [r.event for r in await db.run_read(lambda tx: ledger.events_of(tx, "apv_1"))] == [
                "approved"
            ]
        finally:
            await listener.close()


async def test_connections_a_burst_opens_are_kept_for_the_next_one() -> None:
    url = postgres_url()
    if not url:
        pytest.skip("needs PostgreSQL (COSIGNER_TEST_POSTGRES_URL): SQLite keeps its own connections")
    async with database("postgres") as made:
        db = Database(url, schema=made.schema, pool_size=1)
        try:
            held = asyncio.Event()

            async def hold() -> None:
                async with raw.read(db) as conn:  # two at once: the pool's size, then one more
                    await conn.execute(sa.select(1))
                    await held.wait()

            waiting = [asyncio.create_task(hold()) for _ in range(2)]
            pool = db._writer.sync_engine.pool
            assert isinstance(pool, QueuePool)
            while pool.checkedout() < 2:
                await asyncio.sleep(0)
            held.set()
            await asyncio.gather(*waiting)
            # Both stay open (opening one again costs a connect and every statement prepared
            # anew), and twice the pool size is still the most ever open.
            assert pool.checkedin() == 2
            assert pool.size() == 2 and pool._max_overflow == 0
        finally:
            await db.close()
