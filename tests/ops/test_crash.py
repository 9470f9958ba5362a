"""A `cosigner serve` process killed with SIGKILL mid-flight loses nothing and approves nothing.

While decisions are being made and their callbacks are failing, the server is killed
outright. After a restart on the same SQLite file: every decision that was answered 200
stands, nothing else is approved, approvals that expired while it was down are expired,
every callback is delivered once the receiver recovers, and the audit chains verify.

Both runs use a stepped clock (`COSIGNER_TEST_CLOCK`): the restart starts two minutes
after the first run's instant, which is how "while it was down" passes without sleeping.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from tests.harness import until
from tests.processes import cosigner_env, free_port, serving, tenant_keys

SECRET = "crash-test-secret-" + "k" * 32
POLICY = """
[tools.wire_money]
kind = "danger"
"""


class _Receiver(http.server.BaseHTTPRequestHandler):
    healthy: ClassVar[bool] = False
    refused: ClassVar[int] = 0
    received: ClassVar[list[dict[str, Any]]] = []
    lock: ClassVar[threading.Lock] = threading.Lock()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.lock:
            _Receiver.refused += not self.healthy
            if self.healthy:
                self.received.append({"delivery": self.headers["webhook-id"], **json.loads(body)})
        self.send_response(200 if self.healthy else 503)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _jobs_left(database: Path) -> int:
    """Outbox rows not finished yet: while none is left, no further callback can be sent."""
    with sqlite3.connect(database) as conn:
        return int(conn.execute("SELECT count(*) FROM jobs WHERE done_at IS NULL").fetchone()[0])


def _received() -> set[str]:
    with _Receiver.lock:
        return {c["approvalId"] for c in _Receiver.received}


@pytest.mark.slow
def test_sigkill_mid_flight_loses_nothing(tmp_path: Path) -> None:
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    callback = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    env = cosigner_env(tmp_path, POLICY, SECRET)
    env["COSIGNER_CALLBACK_ALLOW"] = "127.0.0.1"  # the callback receiver is on loopback
    start = float(int(time.time()))
    env["COSIGNER_TEST_CLOCK"] = str(start)
    key, approver = tenant_keys(env, tmp_path, "acme")
    auth = {"Authorization": f"Bearer {key}"}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    approved: set[str] = set()
    untouched: set[str] = set()
    expiring: set[str] = set()
    try:
        with (
            serving(env, tmp_path, port) as proc,
            httpx.Client(base_url=url, headers=auth, timeout=10) as api,
        ):

            def ask(call_id: str, timeout: int = 300) -> str:
                r = api.post(
                    "/v1/approvals",
                    json={
                        "executionId": call_id,
                        "toolCallId": "c",
                        "toolName": "wire_money",
                        "parameters": {"amountCents": 1},
                        "timeoutSeconds": timeout,
                        "surface": {"type": "dashboard", "userId": "u_1"},
                        "callbackUrl": callback,
                    },
                )
                assert r.status_code == 201, r.text
                return str(r.json()["approvalId"])

            for i in range(20):
                aid = ask(f"run_{i}")
                if i % 2:
                    untouched.add(aid)
                    continue
                r = api.post(
                    f"/v1/approvals/{aid}/decision",
                    json={"decision": "approve", "userId": "u_1"},
                    headers={"Authorization": f"Bearer {approver}"},
                )
                assert r.status_code == 200
                approved.add(aid)
            expiring = {ask(f"exp_{i}", timeout=60) for i in range(3)}
            asyncio.run(until(lambda: _Receiver.refused >= 5))  # callbacks are failing (503) right now
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        # The short approvals expire while nothing runs: the restart begins past their time.
        env["COSIGNER_TEST_CLOCK"] = str(start + 120)
        _Receiver.healthy = True
        with serving(env, tmp_path, port), httpx.Client(base_url=url, headers=auth, timeout=10) as api:
            states = {
                aid: api.get(f"/v1/approvals/{aid}").json()["status"]
                for aid in approved | untouched | expiring
            }
            wanted = approved | expiring
            # Once every job is finished nothing is left to send, so the counts are final.
            asyncio.run(
                until(lambda: _received() >= wanted and _jobs_left(tmp_path / "c.db") == 0, seconds=30)
            )
        verify = subprocess.run(
            [sys.executable, "-m", "bot.cli", "audit", "verify"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        receiver.shutdown()
    assert {states[a] for a in approved} == {"approved"}
    assert {states[a] for a in untouched} == {"pending"}
    assert {states[a] for a in expiring} == {"expired"}
    got = {c["approvalId"]: c["status"] for c in _Receiver.received}
    assert got == {**{a: "approved" for a in approved}, **{a: "expired" for a in expiring}}
    deliveries = [c["delivery"] for c in _Receiver.received]
    assert len(deliveries) == len(set(deliveries)), "each delivery arrived once"
    assert verify.returncode == 0, verify.stdout + verify.stderr
