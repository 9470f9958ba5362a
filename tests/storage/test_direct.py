"""The hot statements run on SQLite's driver directly read and write what SQLAlchemy would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from contracts.answers import PolicyDecider
from contracts.enums import ApprovalStatus
from storage import ledger
from storage.audit import GENESIS, Event
from storage.database import Conflict
from storage.direct import Direct
from storage.records import Changes, Decided
from storage.tables import approvals, audit_events
from storage.work import Work
from tests.harness import database


def values(approval_id: str, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": approval_id,
        "tenant": "acme",
        "execution_id": "run_1",
        "tool_call_id": f"call_{approval_id}",
        "tool_name": "lookup_order",
        "kind": "read",
        "mode": "none",
        "status": "pending",
        "parameters": '{"orderId":"o1"}',
        "parameters_digest": "sha256:" + "0" * 64,
        "reason": "Zoë's order",
        "surface": '{"type":"dashboard","userId":"u_1"}',
        "route": None,
        "delivered": None,
        "delivery_key": None,
        "short_code": "1234",
        "policy_rule": "tools.lookup_order",
        "callback_url": None,
        "created_at": 1000,  # an integer: bound as the Double it is declared as
        "expires_at": 4600.25,
        "decided_at": None,
        "decided_by": None,
        "comment": None,
        "trace_id": None,
        "trace_context": None,
        "operation": None,
        "handoff": None,
    }
    return row | changes


def through_sqlalchemy(conn: Connection, approval_id: str) -> Any:
    return conn.execute(sa.select(approvals).where(approvals.c.id == approval_id)).first()


async def test_rows_written_and_read_directly_match_sqlalchemys(db_kind: str) -> None:
    async with database(db_kind) as db:
        events = [Event("requested", {"kind": "agent"}, {"parameters": {"orderId": "o1"}})]
        rec = await db.run_write(lambda tx: ledger.insert_approval(tx, values("apv_1"), events))
        assert rec.created_at == 1000

        def read(tx: Work) -> tuple[Any, Any, Any, list[Any]]:
            direct = ledger._row_of_call(tx, "acme", "run_1", "call_apv_1")
            loaded = ledger.load(tx, "apv_1")
            return direct, loaded, through_sqlalchemy(tx.conn, "apv_1"), ledger.events_of(tx, "apv_1")

        direct, loaded, plain, rows = await db.run_read(read)
        assert direct._asdict() == plain._asdict()
        assert type(direct.created_at) is float and direct.created_at == 1000.0
        assert loaded == rec.replace(created_at=1000.0)
        assert [(r.seq, r.event, r.prev_hash) for r in rows] == [(1, "requested", GENESIS)]
        assert await db.run_read(lambda tx: ledger._row_of_call(tx, "acme", "run_1", "nope")) is None
        assert await db.run_read(lambda tx: ledger.load(tx, "apv_nope")) is None

        # The conditional UPDATE: it changes the row only while it is pending and unchanged.
        now = 2000.5
        closed = await db.run_write(
            lambda tx: ledger.append(
                tx,
                loaded,
                now,
                [Event("approved", {"kind": "policy"}, {})],
                Changes(decided=Decided(ApprovalStatus.APPROVED, now, PolicyDecider(rule="tools.t"), None)),
                only_pending=True,
            )
        )
        assert closed.status.value == "approved" and closed.audit_seq == 2
        assert (await db.run_read(lambda tx: ledger.load(tx, "apv_1"))) == closed
        with pytest.raises(Exception, match="changed while recording"):
            await db.run_write(
                lambda tx: ledger.append(
                    tx,
                    loaded,
                    now,
                    [Event("denied", {"kind": "policy"}, {})],
                    Changes(decided=Decided(ApprovalStatus.DENIED, now, PolicyDecider(rule="tools.t"), None)),
                    only_pending=True,
                )
            )
        count = await db.run_read(
            lambda tx: tx.conn.execute(sa.select(sa.func.count()).select_from(audit_events)).scalar_one()
        )
        assert count == 2


async def test_a_duplicate_row_is_a_conflict_and_rolls_back_alone(db_kind: str) -> None:
    async with database(db_kind) as db:
        await db.run_write(
            lambda tx: ledger.insert_approval(tx, values("apv_1"), [Event("requested", {}, {})])
        )
        with pytest.raises(Conflict):
            await db.run_write(
                lambda tx: ledger.insert_approval(
                    tx, values("apv_2", tool_call_id="call_apv_1"), [Event("x", {}, {})]
                )
            )
        assert await db.run_read(lambda tx: ledger.load(tx, "apv_2")) is None


async def test_a_driver_error_is_raised_as_sqlalchemys_without_the_parameters(db_kind: str) -> None:
    broken = Direct(sa.text("SELECT no_such_column FROM approvals WHERE id = :id").columns(sa.column("x")))
    async with database(db_kind) as db:
        with pytest.raises(sa.exc.DBAPIError) as caught:
            await db.run_read(lambda tx: broken.first(tx, {"id": "apv_secret_value"}))
        assert "apv_secret_value" not in str(caught.value)


async def test_a_duplicate_among_concurrent_creates_fails_alone(db_kind: str) -> None:
    async with database(db_kind) as db:

        def insert(i: int) -> Any:
            # Every third one repeats the call of the one before it.
            call = f"call_{i - 1 if i % 3 == 2 else i}"
            return lambda tx: ledger.insert_approval(
                tx, values(f"apv_{i}", tool_call_id=call), [Event("requested", {}, {"i": i})]
            )

        results = await asyncio.gather(*(db.run_write(insert(i)) for i in range(30)), return_exceptions=True)
        failed = {i for i, r in enumerate(results) if isinstance(r, Exception)}
        assert all(isinstance(results[i], Conflict) for i in failed)
        # Of each pair of creates of one call exactly one lost (which one is the database's race).
        pairs = [(i - 1, i) for i in range(30) if i % 3 == 2]
        assert all(len(failed & set(pair)) == 1 for pair in pairs) and len(failed) == len(pairs)
        stored = await db.run_read(
            lambda tx: sorted(tx.conn.execute(sa.select(audit_events.c.approval_id)).scalars())
        )
        assert stored == sorted(f"apv_{i}" for i in range(30) if i not in failed)


def test_a_statement_compiled_for_one_database_is_never_run_on_another() -> None:
    """Two dialects alive one after the other may share an id() (the first freed, the second
    allocated at its address); a cache keyed by id() then handed PostgreSQL the SQLite text.
    `id` is made to collide here so that the test does not depend on the allocator."""
    import storage.direct

    stmt = Direct(sa.select(approvals.c.id).where(approvals.c.id == sa.bindparam("id")).with_for_update())

    class On:
        def __init__(self, dialect: Any) -> None:
            self.dialect = dialect

    def nothing(*_: Any) -> None:
        return None

    lite = sa.create_mock_engine("sqlite://", nothing).dialect
    pg = sa.create_mock_engine("postgresql+asyncpg://", nothing).dialect
    collide = pytest.MonkeyPatch()
    collide.setattr(storage.direct, "id", lambda _: 1, raising=False)
    try:
        on_sqlite = stmt._for(On(lite))  # type: ignore[arg-type]
        on_postgres = stmt._for(On(pg))  # type: ignore[arg-type]
    finally:
        collide.undo()
    assert "FOR UPDATE" not in on_sqlite.sql, "SQLite has no row locks"
    assert "FOR UPDATE" in on_postgres.sql and "$1" in on_postgres.sql


# What storage/direct.py uses of SQLAlchemy and asyncpg that neither library promises
# (docs/performance.md says what it saves). A library upgrade that renames or reshapes
# any of it fails here, by name, before a request meets it.
_ADAPTER_PRIVATE = {
    "_execute_mutex": None,  # the adapter's lock around each execution
    "_transaction": None,  # None until the adapter has started its transaction
    "_start_transaction": "(self)",
    "_connection": None,  # the asyncpg connection itself (`executemany`)
    "_prepare": "(self, operation, invalidate_timestamp)",  # its prepared-statement cache
    "_handle_exception": "(self, error: 'Exception') -> 'NoReturn'",
}


def test_the_private_parts_of_sqlalchemy_it_relies_on_are_still_there() -> None:
    import inspect

    from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection as Adapter

    missing = []
    for name, signature in _ADAPTER_PRIVATE.items():
        owner = next((k for k in Adapter.__mro__ if name in vars(k)), None)
        if owner is None:
            missing.append(f"{name} is gone")
        elif signature is not None and str(inspect.signature(getattr(Adapter, name))) != signature:
            missing.append(f"{name}{inspect.signature(getattr(Adapter, name))} is not {name}{signature}")
    compiled = (
        sa.select(approvals.c.id)
        .where(approvals.c.id == sa.bindparam("id"))
        .compile(dialect=sa.create_mock_engine("postgresql+asyncpg://", lambda *_: None).dialect)
    )
    if getattr(compiled, "positiontup", None) != ["id"]:
        missing.append("SQLCompiler.positiontup no longer lists a positional statement's parameters")
    assert not missing, (
        f"SQLAlchemy {sa.__version__} changed what storage/direct.py relies on: "
        + "; ".join(missing)
        + ". Adapt storage/direct.py (_pg_run, _Compiled) to the new version, or pin the old one"
    )
