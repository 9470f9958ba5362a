"""Which cases of a parametrised test run on PostgreSQL as well as SQLite.

A test that takes `db_kind` (tests/conftest.py) runs each case on both databases. Where the
cases differ only before storage is reached (a forged token, a click from the wrong place:
refused on the request, with the same writes whichever case it is), running every case on
PostgreSQL runs one storage path several times over; `sqlite_all_postgres_some` keeps every
case on SQLite and runs on PostgreSQL only the cases named, one per storage path:

    @sqlite_all_postgres_some("forgery", list(FORGERIES), postgres=["another issuer"])
    async def test_a_forged_token_decides_nothing(db_kind: str, forgery: str) -> None: ...

Where a whole test drives, on PostgreSQL, only statements other tests already drive there
(a surface's end-to-end flow over the same desk, ledger and job outbox as the API's own
tests), `postgres_elsewhere(where)` runs it on SQLite only and names where its storage path
runs on PostgreSQL. The claim is checked, not assumed: `tests/sqltrace.py` records the
statements each test sends PostgreSQL, and lists any that only a marked test would send
(none, when the marks were last set). `COSIGNER_TEST_EVERY_VARIANT=1` lifts every mark.
A test whose point is how the database behaves (concurrent writers, locks, NOTIFY between
replicas, unique indexes, migrations, the raw SQL of a store) is never marked.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pytest


def sqlite_all_postgres_some(
    argnames: str, cases: Sequence[Any], *, postgres: Sequence[Any]
) -> pytest.MarkDecorator:
    """`pytest.mark.parametrize` over `db_kind` and `argnames` (comma-separated, as pytest
    takes them): every case on SQLite, the `postgres` cases (some of `cases`) on PostgreSQL."""
    names = [name.strip() for name in argnames.split(",")]
    missing = [case for case in postgres if case not in cases]
    assert postgres and not missing, f"the PostgreSQL cases must be some of the cases: {missing}"

    def row(kind: str, case: Any) -> Any:
        values = tuple(case) if len(names) > 1 else (case,)
        # A case keeps its id on both databases: its values, or name and index (as pytest's own).
        index = list(cases).index(case)
        shown = [
            v if isinstance(v, str | int | float) else f"{n}{index}"
            for n, v in zip(names, values, strict=True)
        ]
        return pytest.param(kind, *values, id="-".join(str(part) for part in [kind, *shown]))

    rows = [row("sqlite", case) for case in cases] + [row("postgres", case) for case in postgres]
    # indirect: the values go through the db_kind fixture, which skips PostgreSQL without a URL.
    return pytest.mark.parametrize(["db_kind", *names], rows, indirect=["db_kind"])


EVERY_VARIANT_ENV = "COSIGNER_TEST_EVERY_VARIANT"


def every_variant() -> bool:
    """Whether COSIGNER_TEST_EVERY_VARIANT=1 runs tests marked `postgres_elsewhere` on
    PostgreSQL too (to trace them, or to check a change of storage against everything)."""
    return os.environ.get(EVERY_VARIANT_ENV) == "1"


def postgres_elsewhere(*where: str) -> pytest.MarkDecorator:
    """Run a test taking `db_kind` (or a module's: `pytestmark = postgres_elsewhere(...)`) on
    SQLite only: `where` names the tests that run its storage path on PostgreSQL (the
    constants below), or `NOT_STORED`."""
    assert where and all(w.strip() for w in where), "name where this storage path runs on PostgreSQL"
    return pytest.mark.postgres_elsewhere(*where)


# Where the storage paths of the tests marked `postgres_elsewhere` run on PostgreSQL.
DESK = "tests/api and tests/storage: the desk, ledger, job outbox and audit every surface writes through"
SLACK_STATE = "tests/surfaces/slack/test_installs.py, test_batch.py, tests/storage/test_slack_tables.py"
TEXT_STATE = "tests/storage/test_sms_state.py, tests/surfaces/sms/test_follow_ups.py and test_denials.py"
ALLOWANCES = "tests/allowances/test_api_allowances.py, test_decide.py and test_slack_allowances.py"
HANDOFFS = "tests/handoff/test_dashboard.py: a handoff's records"
OPERATIONS = "tests/operations/test_execution.py, test_sealing.py, test_lifecycle.py: an operation's records"
NOT_STORED = "nowhere needed: what differs is refused, counted or traced in the process, never stored"
