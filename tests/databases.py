"""Which cases of a parametrised test run on PostgreSQL as well as SQLite.

A test that takes `db_kind` (tests/conftest.py) runs each case on both databases. Where the
cases differ only before storage is reached (a forged token, a click from the wrong place:
refused on the request, with the same writes whichever case it is), running every case on
PostgreSQL runs one storage path several times over; `sqlite_all_postgres_some` keeps every
case on SQLite and runs on PostgreSQL only the cases named, one per storage path:

    @sqlite_all_postgres_some("forgery", list(FORGERIES), postgres=["another issuer"])
    async def test_a_forged_token_decides_nothing(db_kind: str, forgery: str) -> None: ...
"""

from __future__ import annotations

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
