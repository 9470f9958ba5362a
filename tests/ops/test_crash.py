"""A `cosigner serve` process killed with SIGKILL mid-flight loses nothing and approves nothing.

While decisions are being made and their callbacks are failing, the server is killed
outright. After a restart on the same SQLite file: every decision that was answered 200
stands, nothing else is approved, approvals that expired while it was down are expired,
every callback is delivered once the receiver recovers, and the audit chains verify.
"""

from __future__ import annotations

import http.server
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import httpx

from tests.processes import cosigner_env, create_tenant, free_port, serving

SECRET = "crash-test-secret-" + "k" * 32
POLICY = """
[tools.wire_money]
kind = "danger"
"""


class _Receiver(http.server.BaseHTTPRequestHandler):
    healthy: ClassVar[bool] = False
    received: ClassVar[list[dict[str, Any]]] = []
    lock: ClassVar[threading.Lock] = threading.Lock()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.lock:
            if self.healthy:
                self.received.append({"delivery": self.headers["Cosigner-Delivery"], **json.loads(body)})
        self.send_response(200 if self.healthy else 503)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_sigkill_mid_flight_loses_nothing(tmp_path: Path) -> None:
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    callback = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    env = cosigner_env(tmp_path, POLICY, SECRET)
    env["COSIGNER_CALLBACK_ALLOW"] = "127.0.0.1"  # the callback receiver is on loopback
    key = create_tenant(env, tmp_path, "acme")
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
                r = api.post(f"/v1/approvals/{aid}/decision", json={"decision": "approve", "userId": "u_1"})
                assert r.status_code == 200
                approved.add(aid)
            expiring = {ask(f"exp_{i}", timeout=1) for i in range(3)}
            time.sleep(0.3)  # callbacks are failing (503) and being retried right now
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        time.sleep(1.2)  # the short approvals expire while nothing runs
        _Receiver.healthy = True
        with serving(env, tmp_path, port), httpx.Client(base_url=url, headers=auth, timeout=10) as api:
            states = {
                aid: api.get(f"/v1/approvals/{aid}").json()["status"]
                for aid in approved | untouched | expiring
            }
            deadline = time.monotonic() + 30
            wanted = len(approved) + len(expiring)
            while time.monotonic() < deadline:
                with _Receiver.lock:
                    if len({c["approvalId"] for c in _Receiver.received}) >= wanted:
                        break
                time.sleep(0.2)
            time.sleep(0.5)
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
