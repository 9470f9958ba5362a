"""Shared fixtures: every database-backed test runs on SQLite and, when given, PostgreSQL."""

from __future__ import annotations

import pytest

from tests.harness import POSTGRES_ENV, postgres_url


@pytest.fixture(params=["sqlite", "postgres"])
def db_kind(request: pytest.FixtureRequest) -> str:
    """The database a test runs on; PostgreSQL is skipped without a URL."""
    if request.param == "postgres" and not postgres_url():
        pytest.skip(
            f"PostgreSQL not configured: set {POSTGRES_ENV}=postgresql+asyncpg://... "
            "(.ci/run sets it) to run this test on PostgreSQL too"
        )
    return str(request.param)
