"""Shared fixtures: every database-backed test runs on SQLite and, when given, PostgreSQL.

The suite runs on parallel worker processes (pytest-xdist; `./run test` starts them, see
docs/architecture.md#testing): a test shares nothing with another but what it makes itself
(a database, a temporary folder, a port picked by the system).
"""

from __future__ import annotations

from collections import Counter

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


def pytest_configure(config: pytest.Config) -> None:
    """Name the suite's own marker (warnings are errors here, an unknown marker too)."""
    config.addinivalue_line(
        "markers",
        "slow: takes tens of seconds on its own (an install, mypy, real servers); run first so "
        "that parallel workers never wait for it at the end",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `slow` first, each kind in its own order: a worker that starts one at
    the end would keep the whole run waiting while the other workers have nothing left.
    And one node id per test: the workers are sent tests by node id."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    # Schemathesis names each API operation's test `test…[POST /v1/approvals]`, but under
    # pytest 9 gives them all the function's node id: sent by that id, one would run of all.
    shared = Counter(item.nodeid for item in items)
    for item in items:
        if shared[item.nodeid] > 1 and item.parent is not None and hasattr(item.parent, "id"):
            item._id = item.parent.id.child(item.name)  # as pytest makes any other test's id
    left = sorted(nodeid for nodeid, count in Counter(item.nodeid for item in items).items() if count > 1)
    if left:
        raise pytest.UsageError(f"tests share a node id, so parallel workers would run one of each: {left}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Say how the tests ran, just above pytest's closing "N passed in X s" line."""
    if hasattr(config, "workerinput"):
        return  # a worker's own report goes nowhere; the controller says it
    workers = len(config.getoption("tx", None) or ()) if config.getoption("dist", "no") != "no" else 0
    if workers:
        how = f"{workers} parallel workers (pytest-xdist, --dist {config.getoption('dist')})"
    else:
        how = "one process"
    terminalreporter.write_line(f"ran on {how}")
