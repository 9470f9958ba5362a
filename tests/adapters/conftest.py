"""What the framework adapters' tests share: the loopback Cosigner, a person deciding, a blocked agent.

Every test runs a real framework with its own fake model against the harness app served by
uvicorn on loopback (`tests.sdk.conftest`). A person answers through the dashboard decision
route, on behalf of the requester `u_1`; expiry moves the server's clock.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cosigner import Cosigner, Decision, HeadlessSurface
from tests.sdk.conftest import SURFACE, USER, Polling, Target, inprocess, live, results_of, run_id

__all__ = ["HEADLESS", "SURFACE", "Person", "inprocess", "live", "results_of", "run_id", "run_script"]

T = TypeVar("T")
HEADLESS = HeadlessSurface("api")
ROOT = Path(__file__).resolve().parents[2]


class Person:
    """The requester answering in the tenant's own app (the dashboard decision route)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.client = target.client()
        self.app = target.approver()

    def pending(self, approval_id: str) -> Decision:
        """The approval as the approver sees it."""
        return self.client.get(approval_id)

    def find(self, run: str, call_id: str, tool: str, parameters: dict[str, Any]) -> Decision:
        """The approval of a call an agent is waiting on (asking again is idempotent)."""
        return self.client.request_approval(
            execution_id=run,
            tool_call_id=call_id,
            tool_name=tool,
            parameters=parameters,
            surface=SURFACE,
            wait=False,
        )

    def approve(self, approval_id: str) -> Decision:
        """Press approve."""
        return self.app.decide(approval_id, decision="approve", user_id=USER)

    def edit(self, approval_id: str, **values: Any) -> Decision:
        """Edit the call, then approve the edited one."""
        return self.app.decide(approval_id, decision="approve", user_id=USER, edit=values)

    def deny(self, approval_id: str, comment: str) -> Decision:
        """Press deny with a comment."""
        return self.app.decide(approval_id, decision="deny", user_id=USER, comment=comment)

    def expire(self, approval_id: str) -> None:
        """Let the approval run out (the server's clock moves; nobody sleeps)."""
        self.target.expire(approval_id)

    def audit(self, approval_id: str) -> list[dict[str, Any]]:
        """The approval's audit events."""
        return self.client.audit(approval_id)


@pytest.fixture
def person(inprocess: Target) -> Iterator[Person]:
    """The requester of the acme tenant."""
    p = Person(inprocess)
    yield p
    p.client.close()


@pytest.fixture
def polling() -> Polling:
    """A transport that tells when the agent's client has started waiting."""
    return Polling()


@pytest.fixture
def agent_client(inprocess: Target, polling: Polling) -> Iterator[Cosigner]:
    """The agent's blocking client (tenant acme)."""
    with inprocess.client(transport=polling) as client:
        yield client


def in_background(fn: Callable[[], T]) -> Future[T]:
    """Run `fn` in a thread: an agent blocked on its approval."""
    pool = ThreadPoolExecutor(1)
    future = pool.submit(fn)
    pool.shutdown(wait=False)
    return future


def run_script(script: Path, env: dict[str, str], *args: str) -> str:
    """Run a resume script in a fresh Python process and return its stdout."""
    done = subprocess.run(
        [sys.executable, str(script), *args],
        # This tree's server and SDK, not whichever copy is installed in the environment.
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "sdk" / "python")]), **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
