"""Shared fixtures: every database-backed test runs on SQLite and, when given, PostgreSQL.

The suite runs on parallel worker processes (pytest-xdist; `./run test` starts them, see
docs/architecture.md#testing): a test shares nothing with another but what it makes itself
(a database, a temporary folder, a port picked by the system).
"""

from __future__ import annotations

import ssl
import time
import types
from collections import Counter
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

from tests import sqltrace
from tests.databases import every_variant
from tests.harness import POSTGRES_ENV, postgres_url

# Hypothesis's default deadline (200 ms per example) is a wall-clock bound: a loaded machine
# breaks it at random ("FlakyFailure: Unreliable test timings"). The suite asserts behaviour,
# never time, so no property test has one.
hypothesis_settings.register_profile("cosigner", deadline=None)
hypothesis_settings.load_profile("cosigner")


@pytest.fixture
def db_kind(request: pytest.FixtureRequest) -> str:
    """The database a test runs on (each test that takes it runs on both, see
    `pytest_generate_tests`); PostgreSQL is skipped without a URL."""
    if request.param == "postgres" and not postgres_url():
        pytest.skip(
            f"PostgreSQL not configured: set {POSTGRES_ENV}=postgresql+asyncpg://... "
            "(.ci/run sets it) to run this test on PostgreSQL too"
        )
    return str(request.param)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes `db_kind` runs on SQLite and PostgreSQL; one marked
    `postgres_elsewhere` on SQLite only (COSIGNER_TEST_EVERY_VARIANT=1 runs it on both), and one
    that parametrises `db_kind` itself (`tests.databases.sqlite_all_postgres_some`) as it says."""
    if "db_kind" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if "db_kind" in ([n.strip() for n in names.split(",")] if isinstance(names, str) else names):
            return
    kinds = ["sqlite", "postgres"]
    if metafunc.definition.get_closest_marker("postgres_elsewhere") and not every_variant():
        kinds = ["sqlite"]
    metafunc.parametrize("db_kind", kinds, indirect=True)


def pytest_configure(config: pytest.Config) -> None:
    """Name the suite's own markers (warnings are errors here, an unknown marker too); with
    COSIGNER_TEST_SQL_TRACE set, record the statements each test sends PostgreSQL."""
    config.addinivalue_line(
        "markers",
        "slow: takes tens of seconds on its own (an install, mypy, real servers); run first so "
        "that parallel workers never wait for it at the end",
    )
    config.addinivalue_line(
        "markers",
        "postgres_elsewhere(where): runs on SQLite only, as the storage path it drives runs on "
        "PostgreSQL in the tests named by `where` (tests/databases.py)",
    )
    sqltrace.register(config)
    share_the_default_tls_context()


class _SharedDefaultTls(types.ModuleType):
    """`ssl` as `bot.egress.transport` sees it in tests: `create_default_context()` with no
    arguments (each app's callback client makes one) returns one context, made once."""

    def __init__(self) -> None:
        super().__init__("ssl")
        self._default: ssl.SSLContext | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(ssl, name)

    def create_default_context(self, *args: Any, **kwargs: Any) -> ssl.SSLContext:
        if args or kwargs:
            return ssl.create_default_context(*args, **kwargs)
        if self._default is None:
            self._default = ssl.create_default_context()
        return self._default


def share_the_default_tls_context() -> None:
    """Loading the system's trusted roots into a new context took about 20 ms of CPU for
    every app a test built; the apps of a test process share one default context instead,
    as nothing changes it (a test that trusts its own roots passes its own context)."""
    from bot.egress import transport

    if not isinstance(getattr(transport, "ssl"), _SharedDefaultTls):  # noqa: B009
        setattr(transport, "ssl", _SharedDefaultTls())  # noqa: B010


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


STARTED = pytest.StashKey[float]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Note when the run started, for the closing line."""
    session.config.stash[STARTED] = time.monotonic()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Say how many tests ran, in how long and how, just above pytest's closing "N passed in
    X s" line: "3,282 tests in 7m12s on 3 parallel workers (pytest-xdist, --dist loadgroup)"."""
    if hasattr(config, "workerinput") or config.getoption("collectonly"):
        return  # a worker's own report goes nowhere; the controller says it
    workers = len(config.getoption("tx", None) or ()) if config.getoption("dist", "no") != "no" else 0
    if workers:
        how = f"{workers} parallel workers (pytest-xdist, --dist {config.getoption('dist')})"
    else:
        how = "one process"
    outcomes = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
    ran = {
        getattr(report, "nodeid", None) or repr(report)
        for outcome in outcomes
        for report in terminalreporter.stats.get(outcome, [])
    }
    seconds = round(time.monotonic() - config.stash.get(STARTED, time.monotonic()))
    minutes, seconds = divmod(seconds, 60)
    took = f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
    terminalreporter.write_line(f"{len(ran):,} tests in {took} on {how}")
