"""A `cosigner serve` killed with SIGKILL while an operation executes: after a restart it
asks the application's `status` and stores the outcome; the operation ran exactly once."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.operations.application import SECRET, SECRET_ENV, contract_application, policy_for
from tests.operations.test_lifecycle import proposal
from tests.processes import cosigner_env, free_port, serving, tenant_keys

SERVER_SECRET = "operation-crash-secret-" + "k" * 32


@pytest.mark.slow
def test_sigkill_while_executing_executes_once(tmp_path: Path) -> None:
    with contract_application(server_secret=SERVER_SECRET) as app:
        app.shop.hold_execute = threading.Event()  # the refund happens; its answer never comes
        env = cosigner_env(tmp_path, policy_for(app.url, execute_timeout="2s"), SERVER_SECRET)
        env.update({SECRET_ENV: SECRET, "COSIGNER_CALLBACK_ALLOW": "127.0.0.1"})
        key, approver = tenant_keys(env, tmp_path, "acme")
        port = free_port()
        auth = {"Authorization": f"Bearer {key}"}
        with (
            serving(env, tmp_path, port) as proc,
            httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=auth, timeout=10) as api,
        ):
            r = api.post("/v1/approvals", json=proposal())
            assert r.status_code == 201, r.text
            aid = r.json()["approvalId"]
            r = api.post(
                f"/v1/approvals/{aid}/decision",
                json={"decision": "approve", "userId": "u_1"},
                headers={"Authorization": f"Bearer {approver}"},
            )
            assert r.status_code == 200
            deadline = time.monotonic() + 20
            while app.shop.calls["execute"] < 1:
                assert time.monotonic() < deadline, "execute was never sent"
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)  # while the application is still executing
            proc.wait(timeout=10)
        with (
            serving(env, tmp_path, port),
            httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=auth, timeout=70) as api,
        ):
            done = api.get(f"/v1/approvals/{aid}", params={"wait": 60}).json()
            events = [e["event"] for e in api.get(f"/v1/approvals/{aid}/audit").json()["events"]]
        app.shop.hold_execute.set()
    assert done["status"] == "approved"
    assert done["outcome"]["type"] == "succeeded", done
    assert app.shop.calls["execute"] == 1 and app.shop.refunds == 1
    assert app.shop.calls["status"] >= 1
    assert events.count("execute_sent") == 1 and events.count("claimed") == 1
