"""Which SQL statements each test sends PostgreSQL: the evidence for running a test once.

A test that takes `db_kind` runs on SQLite and PostgreSQL; one marked `postgres_elsewhere`
(tests/databases.py) runs on SQLite only, because the storage path it drives on PostgreSQL
is driven by tests that still run there. This module is how to check that claim: with
`COSIGNER_TEST_SQL_TRACE=FILE` set, every test process appends one JSON line per test to
FILE, naming the test and the distinct statements it sent PostgreSQL, in-process (a
`cosigner serve` subprocess is not traced), with literal values, bound-parameter counts
and schema names taken out:

    COSIGNER_TEST_SQL_TRACE=/tmp/sql.jsonl ./run test -k postgres
    python -m tests.sqltrace /tmp/sql.jsonl     # the statements no kept test sends

`python -m tests.sqltrace` reads such a file and lists, per statement that only a test
marked `postgres_elsewhere` would send, that test. Run it against a trace taken with the
marks lifted (`COSIGNER_TEST_EVERY_VARIANT=1`, which runs every test on both databases).
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

TRACE_ENV = "COSIGNER_TEST_SQL_TRACE"

_SCHEMA = re.compile(r"\b[a-z]+_(?:template_)?[0-9a-f]{12}\b")
_CAST = re.compile(
    r"::(?:TIMESTAMP WITH(?:OUT)? TIME ZONE|DOUBLE PRECISION|CHARACTER VARYING|[A-Za-z_]+)(?:\[\])?"
)
_PARAMS = re.compile(r"\$\d+(?:\s*,\s*\$\d+)*")
_SPACE = re.compile(r"\s+")
POSTGRES_ID = re.compile(r"\[(?:.*-)?postgres(?:-.*)?\]$")
_CHANNEL = re.compile(r"'cosigner[^']*'")


def normalize(statement: str) -> str:
    """One statement's shape: no schema name, parameter list or run of whitespace."""
    shape = _SCHEMA.sub("t_SCHEMA", statement)
    shape = _PARAMS.sub("$n", _CAST.sub("", shape))
    shape = _CHANNEL.sub("'CHANNEL'", shape)
    return _SPACE.sub(" ", shape).strip()


class Tracer:
    """Collects the statements sent PostgreSQL while each test runs; one line per test."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.current: str | None = None
        self.seen: set[str] = set()
        event.listen(Engine, "before_cursor_execute", self._record)

    def _record(self, conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if conn.dialect.name != "postgresql":
            return
        with self.lock:
            if self.current is not None:
                self.seen.add(normalize(statement))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Any:
        with self.lock:
            self.current, self.seen = item.nodeid, set()
        yield
        with self.lock:
            line = {"test": item.nodeid, "statements": sorted(self.seen)}
            self.current, self.seen = None, set()
        if line["statements"]:
            with self.path.open("a") as out:
                out.write(json.dumps(line) + "\n")


def register(config: pytest.Config) -> None:
    """Trace this process's tests when COSIGNER_TEST_SQL_TRACE names a file."""
    path = os.environ.get(TRACE_ENV)
    if path:
        config.pluginmanager.register(Tracer(Path(path)), "cosigner-sqltrace")


def uncovered(lines: list[dict[str, Any]], elsewhere: set[str]) -> dict[str, list[str]]:
    """Each statement that only tests in `elsewhere` (node ids, the `[postgres]` variants of
    tests marked `postgres_elsewhere`) send, with those tests."""
    kept: set[str] = set()
    only: dict[str, list[str]] = defaultdict(list)
    lines = [{**line, "statements": {normalize(s) for s in line["statements"]}} for line in lines]
    for line in lines:
        if line["test"] not in elsewhere:
            kept.update(line["statements"])
    for line in lines:
        if line["test"] in elsewhere:
            for statement in line["statements"]:
                if statement not in kept:
                    only[statement].append(line["test"])
    return dict(only)


def main(argv: list[str]) -> int:
    """`python -m tests.sqltrace TRACE [MARKED]`: TRACE a trace file; MARKED a file of the
    node ids (one a line) whose PostgreSQL variant is marked away (default: read the marks
    by collecting the suite)."""
    lines = [json.loads(line) for line in Path(argv[0]).read_text().splitlines() if line.strip()]
    if len(argv) > 1:
        elsewhere = set(Path(argv[1]).read_text().split())
    else:
        elsewhere = _marked()
    found = uncovered(lines, elsewhere)
    for statement, tests in sorted(found.items()):
        print(f"{statement}\n    only in: {', '.join(sorted(tests))}")
    traced = {line["test"] for line in lines}
    print(
        f"{len(traced)} tests traced, {len(elsewhere & traced)} of them marked postgres_elsewhere; "
        f"{len(found)} statements only those send"
    )
    return 1 if found else 0


def _marked() -> set[str]:
    """The `[postgres]` node ids the marks take away: collected with every variant on."""

    class Collect:
        def __init__(self) -> None:
            self.ids: set[str] = set()

        def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
            for item in items:
                if item.get_closest_marker("postgres_elsewhere") and POSTGRES_ID.search(item.nodeid):
                    self.ids.add(item.nodeid)

    os.environ["COSIGNER_TEST_EVERY_VARIANT"] = "1"
    os.environ.setdefault("COSIGNER_TEST_POSTGRES_URL", "postgresql+asyncpg://unused/unused")
    collect = Collect()
    pytest.main(["--collect-only", "-qq", "-p", "no:cacheprovider"], plugins=[collect])
    return collect.ids


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
