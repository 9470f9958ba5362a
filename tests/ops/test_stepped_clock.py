"""The stepped test clock of `cosigner serve`: off unless set, loopback only, forward only.

With `COSIGNER_TEST_CLOCK` a real server's time stands still and moves only by
`POST /test/clock`; an approval expires when the clock passes its time and not before.
Without the setting the route does not exist, and `serve` refuses the setting on a host
other people can reach.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from starlette.applications import Starlette

from bot.testing.stepped_clock import SteppedClock, is_loopback
from tests.harness import until
from tests.processes import cosigner, cosigner_env, create_tenant, free_port, serving

SECRET = "stepped-clock-secret-" + "t" * 32
POLICY = """
[tools.wire_money]
kind = "danger"
"""


def _ask(api: httpx.Client, call_id: str, timeout: int) -> str:
    r = api.post(
        "/v1/approvals",
        json={
            "executionId": call_id,
            "toolCallId": "c",
            "toolName": "wire_money",
            "parameters": {"amountCents": 1},
            "timeoutSeconds": timeout,
            "surface": {"type": "dashboard", "userId": "u_1"},
        },
    )
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


def test_time_moves_only_when_told(tmp_path: Path) -> None:
    env = cosigner_env(tmp_path, POLICY, SECRET)
    env["COSIGNER_TEST_CLOCK"] = "1800000000"
    key = create_tenant(env, tmp_path, "acme")
    port = free_port()
    with (
        serving(env, tmp_path, port),
        httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as api,
    ):
        aid = _ask(api, "run_1", timeout=60)
        for bad in ({"advanceSeconds": -5}, {"advanceSeconds": 0}, {"advanceSeconds": "5"}, {}):
            r = api.post("/test/clock", json=bad)
            assert r.status_code == 400 and "advanceSeconds" in r.json()["error"]["message"], (bad, r.text)
        r = api.post("/test/clock", json={"advanceSeconds": 59})
        assert r.status_code == 200 and r.json() == {"now": 1800000059.0}, r.text
        assert api.get(f"/v1/approvals/{aid}").json()["status"] == "pending"
        assert api.post("/test/clock", json={"advanceSeconds": 2}).status_code == 200
        # The sweeper was woken by the move; the reads below must not be what expires it.
        asyncio.run(until(lambda: _expired_in_audit(api, aid)))
        r = api.get(f"/v1/approvals/{aid}").json()
        assert r["status"] == "expired" and r["decidedAt"].startswith("2027-01-15T08:01:"), r


def _expired_in_audit(api: httpx.Client, aid: str) -> bool:
    return "expired" in [e["event"] for e in api.get(f"/v1/approvals/{aid}/audit").json()["events"]]


def test_without_the_setting_there_is_no_clock_route(tmp_path: Path) -> None:
    env = cosigner_env(tmp_path, POLICY, SECRET)
    port = free_port()
    with serving(env, tmp_path, port):
        r = httpx.post(f"http://127.0.0.1:{port}/test/clock", json={"advanceSeconds": 3600})
        assert r.status_code == 404, r.text


def test_serve_refuses_the_setting_on_a_reachable_host(tmp_path: Path) -> None:
    env = cosigner_env(tmp_path, POLICY, SECRET)
    env["COSIGNER_TEST_CLOCK"] = str(int(time.time()))
    done = cosigner(env, "serve", "--host", "0.0.0.0", "--port", str(free_port()), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: COSIGNER_TEST_CLOCK") and "--host 127.0.0.1" in done.stderr
    bad = cosigner({**env, "COSIGNER_TEST_CLOCK": "soon"}, "serve", "--port", str(free_port()), cwd=tmp_path)
    assert bad.returncode == 2 and "COSIGNER_TEST_CLOCK must be a UNIX time" in bad.stderr, bad.stderr


async def test_the_route_answers_loopback_callers_only() -> None:
    clock = SteppedClock(100.0)
    app = Starlette(routes=clock.routes())
    transport = httpx.ASGITransport(app=app, client=("203.0.113.9", 4000))
    async with httpx.AsyncClient(transport=transport, base_url="http://cosigner.test") as client:
        r = await client.post("/test/clock", json={"advanceSeconds": 10})
    assert r.status_code == 403 and clock() == 100.0
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("example.com")
