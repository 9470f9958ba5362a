"""Which of our modules one approval runs through: the walk `bench/walk.py` prints and
docs/architecture.md shows (`tests/docs_map.py`).

Builds the in-process test app (SQLite, a manual clock, no background workers, so that
only the requests' own code runs while it is traced), warms it with one approval, then
traces a second one with `sys.setprofile` and `threading.setprofile` (the database thread
included) in three steps: the agent's `POST /v1/approvals` (a person asked on the
dashboard), the dashboard's decision, and the agent's read of the decided approval. The
transactions' own functions, which run on the database's threads, are traced there
(`Database.run_write` and `run_read` are wrapped for it, while the walk runs). A module
counts when one of its functions is called; only Cosigner's packages are counted (`bot`,
`storage`, `surfaces`, `contracts`, and the SDK's `cosigner`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from storage.database import Database
from tests.api.test_approvals import call
from tests.harness import cosigner_app

OURS = ("bot", "storage", "surfaces", "contracts", "cosigner")
STEPS = ("create", "decide", "read")
Profile = Any
tracing: list[Profile] = []  # the profile function while a step is traced


@contextmanager
def modules_run(found: set[str]) -> Iterator[None]:
    """Record in `found` every module of ours whose functions are called inside the block."""

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if isinstance(name, str) and name.split(".", 1)[0] in OURS:
                found.add(name)

    tracing.append(profile)
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        tracing.clear()


def traced_on_its_thread(fn: Any) -> Any:
    """`fn` (a transaction's function) traced on whichever thread runs it."""

    def run(conn: Any) -> Any:
        if not tracing:
            return fn(conn)
        sys.setprofile(tracing[0])
        try:
            return fn(conn)
        finally:
            sys.setprofile(None)

    return run


@contextmanager
def transactions_traced() -> Iterator[None]:
    """While inside, every transaction's function is traced on its thread too."""
    write, read = Database.run_write, Database.run_read

    async def run_write(
        self: Database, fn: Any, *, single_write: bool = False, optimistic: bool = False
    ) -> Any:
        return await write(self, traced_on_its_thread(fn), single_write=single_write, optimistic=optimistic)

    async def run_read(self: Database, fn: Any, *, snapshot: bool = False) -> Any:
        return await read(self, traced_on_its_thread(fn), snapshot=snapshot)

    Database.run_write = run_write  # type: ignore[method-assign]
    Database.run_read = run_read  # type: ignore[method-assign]
    try:
        yield
    finally:
        Database.run_write = write  # type: ignore[method-assign]
        Database.run_read = read  # type: ignore[method-assign]


def package_of(module: str) -> str:
    """`bot.approvals` for `bot.approvals.engine`; the top package for any other module."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "bot" and len(parts) > 2 else parts[0]


async def walk() -> dict[str, set[str]]:
    """The modules of ours each step of one approval runs (`STEPS`, in order)."""
    steps: dict[str, set[str]] = {step: set() for step in STEPS}
    with transactions_traced():
        async with cosigner_app(run_workers=False) as h:
            key = await h.create_tenant("acme")
            approver = h.approver_key("acme")
            for n, record in enumerate((False, True)):
                body = call(call_id=f"c{n}")
                with modules_run(steps["create"]) if record else _nothing():
                    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
                assert r.status_code == 201, r.text
                approval = r.json()["approvalId"]
                with modules_run(steps["decide"]) if record else _nothing():
                    d = await h.client.post(
                        f"/v1/approvals/{approval}/decision",
                        json={"decision": "approve", "userId": "u_1"},
                        headers=h.auth(approver),
                    )
                assert d.status_code == 200, d.text
                with modules_run(steps["read"]) if record else _nothing():
                    got = await h.client.get(f"/v1/approvals/{approval}", headers=h.auth(key))
                assert got.status_code == 200, got.text
    return steps


@contextmanager
def _nothing() -> Iterator[None]:
    yield
