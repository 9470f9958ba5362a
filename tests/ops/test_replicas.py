"""Two real `cosigner serve` processes on one PostgreSQL database agree.

One decision per request, each expiry once, long-polls answered on either. This test runs
the operator's own commands as subprocesses (`cosigner migrate`, `cosigner tenants create`,
two `cosigner serve`) on a fresh database and talks to them over real HTTP; both servers
run on one stepped clock (`COSIGNER_TEST_CLOCK`, moved by `POST /test/clock`), so nothing
waits on the real clock, and the test reads the job outbox to know when no work is left:

- a dashboard approval created on A, long-polled on both A and B, decided by 20 concurrent
  decision POSTs spread over A and B: exactly one 200, nineteen 409 ALREADY_DECIDED, and
  both long-polls answer the decision although their own wait cannot end (the clock stands
  still); the replica that did not decide counts the wake-up as another replica's NOTIFY;
- a quorum-3 approval answered by five admins at once, each three times, over A and B:
  exactly three distinct approvals are counted, it closes once, and its callback arrives
  once naming the three (`test_two_serve_processes_count_a_quorum_once`);
- approvals with `timeoutSeconds=60` and a `callbackUrl` on a loopback receiver, then both
  clocks moved past it: each expires once (one `expired` audit event) and each callback
  arrives exactly once, with a `webhook-id` never delivered twice and a valid Standard
  Webhooks signature.

Skipped unless COSIGNER_TEST_POSTGRES_URL=postgresql+asyncpg://user@host/db is set; the
test creates its own database `cosigner_ops_<random>` next to that one and drops it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from cosigner.webhooks import verify_request
from tests.harness import CallbackReceiver, until_async
from tests.processes import PROCESS_LIMIT

POSTGRES_ENV = "COSIGNER_TEST_POSTGRES_URL"
REPO = Path(__file__).resolve().parents[2]
SECRET = "ops-replicas-secret-" + "r" * 32
POLICY = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
redact = ["cardToken"]

[tools.wire_money]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 3

[tenants.acme]
admins = { dashboard = ["u_admin", "u_a", "u_b", "u_c", "u_d", "u_e"] }
"""
QUORUM_ADMINS = ["u_a", "u_b", "u_c", "u_d", "u_e"]
EXPIRING = 6  # approvals left to expire, each with a callback
TIMEOUT = 60  # their timeoutSeconds; the test moves the replicas' clock past it
START = float(int(time.time()))  # where both replicas' stepped clock starts (COSIGNER_TEST_CLOCK)
DECIDERS = 20  # concurrent decision POSTs, spread over both replicas

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get(POSTGRES_ENV),
        reason=f"needs PostgreSQL: set {POSTGRES_ENV}=postgresql+asyncpg://user@host/db "
        "(the test creates and drops its own database next to it)",
    ),
]


def _asyncpg_dsn(url: str, database: str | None = None) -> str:
    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cosigner(env: dict[str, str], *args: str) -> str:
    """Run a `cosigner` command the way an operator would; return its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=PROCESS_LIMIT,
    )
    assert done.returncode == 0, (
        f"cosigner {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


@pytest.fixture
def fresh_database() -> Iterator[str]:
    """A new, empty PostgreSQL database; dropped afterwards whatever happens."""
    import asyncpg

    base = os.environ[POSTGRES_ENV]
    name = f"cosigner_ops_{secrets.token_hex(6)}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(_asyncpg_dsn(base))
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        # WITH (FORCE) (PostgreSQL 13+) ends connections a killed server may have left.
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def operator_env(fresh_database: str, tmp_path: Path) -> dict[str, str]:
    """The environment an operator would export: database, secret, policy; no surfaces."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSIGNER_", "SLACK_", "TWILIO_"))}
    env.update(
        COSIGNER_DATABASE_URL=fresh_database,
        COSIGNER_SECRET=SECRET,
        COSIGNER_POLICY=str(policy),
        COSIGNER_CALLBACK_ALLOW="127.0.0.1",  # the callback receiver is on loopback
        COSIGNER_LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture
def tenant(operator_env: dict[str, str]) -> tuple[str, str, str]:
    """`cosigner migrate`, then `cosigner tenants create acme`: (agent key, callback secret, approver key)."""
    assert "database is at revision" in _cosigner(operator_env, "migrate")
    out = _cosigner(operator_env, "tenants", "create", "acme")
    key = re.search(r"^agent key[^:]*: (\S+)", out, re.M)
    approver = re.search(r"^approver key[^:]*: (\S+)", out, re.M)
    secret = re.search(r"callback signing secret: (\S+)", out)
    assert key and secret and approver, out
    return key.group(1), secret.group(1), approver.group(1)


@pytest.fixture
def servers(
    operator_env: dict[str, str], tenant: tuple[str, str, str], tmp_path: Path
) -> Iterator[list[tuple[str, subprocess.Popen[bytes], Path]]]:
    """Two `cosigner serve` processes on the same database and one stepped clock (both start
    at START and are moved together by `_advance`): (url, process, log); always stopped."""
    env = {**operator_env, "COSIGNER_TEST_CLOCK": str(START)}
    started: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    try:
        for name in ("a", "b"):
            port = _free_port()
            log = tmp_path / f"serve-{name}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "bot.cli", "serve", "--port", str(port)],
                    env=env,
                    cwd=REPO,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            started.append((f"http://127.0.0.1:{port}", proc, log))
        yield started
    finally:
        for _, proc, _ in started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc, log in started:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
            text = log.read_text(errors="replace")
            if "Traceback" in text:
                print(f"--- {log.name} ---\n{text}")


@pytest.fixture
async def replicas(servers: list[tuple[str, subprocess.Popen[bytes], Path]]) -> list[str]:
    """The two servers' URLs, once both answer `/readyz`."""
    async with httpx.AsyncClient(timeout=1) as client:
        for url, proc, log in servers:

            async def ready(url: str = url, proc: subprocess.Popen[bytes] = proc, log: Path = log) -> bool:
                if proc.poll() is not None:
                    text = await asyncio.to_thread(log.read_text)
                    pytest.fail(f"serve exited {proc.returncode}:\n{text}")
                try:
                    return (await client.get(f"{url}/readyz")).status_code == 200
                except httpx.HTTPError:
                    return False

            await until_async(ready, seconds=PROCESS_LIMIT, interval=0.1)
    return [url for url, _, _ in servers]


def _request(call_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "executionId": f"run_{call_id}",
        "toolCallId": call_id,
        "toolName": "issue_refund",
        "parameters": {"orderId": "ord_1", "amountCents": 12900, "cardToken": "tok_x"},
        "reason": "ops test",
        "surface": {"type": "dashboard", "userId": "u_42"},
        **extra,
    }


async def _audit(client: httpx.AsyncClient, url: str, key: str, approval_id: str) -> list[Any]:
    r = await client.get(
        f"{url}/v1/approvals/{approval_id}/audit", headers={"Authorization": f"Bearer {key}"}
    )
    assert r.status_code == 200, r.text
    events: list[Any] = r.json()["events"]
    return events


def _names(events: list[Any]) -> list[str]:
    return [e["event"] for e in events]


async def _metric(client: httpx.AsyncClient, url: str, name: str) -> float:
    text = (await client.get(f"{url}/metrics")).text
    return next((float(x.split()[1]) for x in text.splitlines() if x.startswith(f"{name} ")), 0.0)


async def _advance(client: httpx.AsyncClient, urls: list[str], seconds: float) -> None:
    """Move every replica's stepped clock forward by the same amount."""
    for url in urls:
        r = await client.post(f"{url}/test/clock", json={"advanceSeconds": seconds})
        assert r.status_code == 200, r.text


async def _jobs_left(database_url: str) -> int:
    """Outbox rows not finished yet: while none is left, no further callback can be sent."""
    import asyncpg

    conn = await asyncpg.connect(_asyncpg_dsn(database_url))
    try:
        return int(await conn.fetchval("SELECT count(*) FROM jobs WHERE done_at IS NULL"))
    finally:
        await conn.close()


async def test_two_serve_processes_agree(
    tenant: tuple[str, str, str], replicas: list[str], operator_env: dict[str, str]
) -> None:
    api_key, callback_secret, approver_key = tenant
    auth = {"Authorization": f"Bearer {api_key}"}
    a, b = replicas
    database_url = operator_env["COSIGNER_DATABASE_URL"]

    with CallbackReceiver() as receiver:
        async with httpx.AsyncClient(timeout=60, headers=auth) as client:
            # --- one decision per request; the long-poll on the other replica wakes ------
            r = await client.post(f"{a}/v1/approvals", json=_request("decide_1", callbackUrl=receiver.url))
            assert r.status_code == 201, r.text
            approval_id = r.json()["approvalId"]

            # One long-poll parked on each replica. The clock stands still, so neither
            # long-poll's own 30 s can run out: only the decision can answer them.
            polls = {
                url: asyncio.create_task(client.get(f"{url}/v1/approvals/{approval_id}?wait=30"))
                for url in replicas
            }
            for url in replicas:
                await until_async(functools.partial(_parked, client, url))
            assert not any(p.done() for p in polls.values()), "a long-poll answered before anyone decided"

            async def decide(i: int) -> tuple[str, httpx.Response]:
                url = (a, b)[i % 2]
                resp = await client.post(
                    f"{url}/v1/approvals/{approval_id}/decision",
                    json={"decision": "approve", "userId": "u_42", "comment": f"#{i}"},
                    headers={"Authorization": f"Bearer {approver_key}"},
                )
                return url, resp

            answers = await asyncio.gather(*(decide(i) for i in range(DECIDERS)))
            codes = sorted(resp.status_code for _, resp in answers)
            assert codes == [200] + [409] * (DECIDERS - 1), [r.text for _, r in answers]
            for _, resp in answers:
                if resp.status_code == 409:
                    assert resp.json()["error"]["code"] == "ALREADY_DECIDED", resp.text
            won_on, winner = next((url, resp.json()) for url, resp in answers if resp.status_code == 200)
            other = b if won_on == a else a

            for poll in polls.values():
                polled = await poll
                assert polled.status_code == 200, polled.text
                assert polled.json()["status"] == "approved", polled.json()
                assert polled.json()["comment"] == winner["comment"]
            # The replica that did not decide woke its waiter on the winner's NOTIFY, not on
            # its slow recheck (which would leave this counter at 0).
            assert await _metric(client, other, "cosigner_replica_wakeups_total") >= 1

            events = _names(await _audit(client, other, api_key, approval_id))
            assert events.count("approved") == 1, events
            assert events.count("decision_refused") == DECIDERS - 1, events

            # --- each expiry once, each callback once ------------------------------------
            expiring = []
            for i in range(EXPIRING):
                r = await client.post(
                    f"{(a, b)[i % 2]}/v1/approvals",
                    json=_request(f"expire_{i}", timeoutSeconds=TIMEOUT, callbackUrl=receiver.url),
                )
                assert r.status_code == 201, r.text
                expiring.append(r.json()["approvalId"])
            for i, apv in enumerate(expiring):
                r = await client.get(f"{(b, a)[i % 2]}/v1/approvals/{apv}")
                assert r.json()["status"] == "pending", r.text

            # Both replicas' sweepers wake at the same moment and race to expire each one.
            await _advance(client, replicas, TIMEOUT + 1)
            wanted = {approval_id, *expiring}

            async def all_called_back() -> bool:
                got = {json.loads(c["body"])["approvalId"] for c in receiver.snapshot()}
                return got >= wanted and await _jobs_left(database_url) == 0

            # Once every job is finished no replica has anything left to send, so the
            # counts below are final without waiting for a duplicate to show up.
            await until_async(all_called_back, seconds=30, interval=0.1)

            for i, apv in enumerate(expiring):
                r = await client.get(f"{(b, a)[i % 2]}/v1/approvals/{apv}")
                assert r.status_code == 200 and r.json()["status"] == "expired", r.text
                assert r.json()["decidedBy"] == {"kind": "timeout"}, r.text
                events = _names(await _audit(client, (a, b)[i % 2], api_key, apv))
                assert events.count("expired") == 1, (apv, events)
                assert events.count("callback_attempt") == 1, (apv, events)

    calls = receiver.snapshot()
    by_approval: dict[str, list[dict[str, Any]]] = {}
    for c in calls:
        # Signed on the replicas' stepped clock, which started at START (when this module
        # was imported, minutes ago in a long run) and was moved once by TIMEOUT + 1.
        now = START + TIMEOUT + 1
        assert verify_request(c["body"], c["headers"], callback_secret, now=now) == c["delivery"], c
        by_approval.setdefault(json.loads(c["body"])["approvalId"], []).append(c)
    assert set(by_approval) == wanted, f"missing callbacks for {wanted - set(by_approval)}"
    for apv, calls_for in by_approval.items():
        assert len(calls_for) == 1, (
            f"{apv} was called back {len(calls_for)} times: {[c['delivery'] for c in calls_for]}"
        )
    deliveries = [c["delivery"] for c in calls]
    assert all(deliveries) and len(set(deliveries)) == len(deliveries), deliveries
    assert json.loads(by_approval[approval_id][0]["body"])["status"] == "approved"
    for apv in expiring:
        body = json.loads(by_approval[apv][0]["body"])
        assert body["status"] == "expired" and body["decidedBy"] == {"kind": "timeout"}, body


async def _parked(client: httpx.AsyncClient, url: str) -> bool:
    return await _metric(client, url, "cosigner_waiters") >= 1


async def test_two_serve_processes_count_a_quorum_once(
    tenant: tuple[str, str, str], replicas: list[str], operator_env: dict[str, str]
) -> None:
    api_key, callback_secret, approver_key = tenant
    a, b = replicas
    database_url = operator_env["COSIGNER_DATABASE_URL"]
    with CallbackReceiver() as receiver:
        async with httpx.AsyncClient(timeout=60, headers={"Authorization": f"Bearer {api_key}"}) as client:
            body = _request("quorum_1", callbackUrl=receiver.url, toolName="wire_money")
            r = await client.post(f"{a}/v1/approvals", json=body)
            assert r.status_code == 201, r.text
            approval_id = r.json()["approvalId"]

            async def approve(i: int, who: str) -> httpx.Response:
                return await client.post(
                    f"{(a, b)[i % 2]}/v1/approvals/{approval_id}/decision",
                    json={"decision": "approve", "userId": who},
                    headers={"Authorization": f"Bearer {approver_key}"},
                )

            votes = [who for _ in range(3) for who in QUORUM_ADMINS]
            answers = await asyncio.gather(*(approve(i, who) for i, who in enumerate(votes)))
            closing = [r for r in answers if r.status_code == 200 and r.json()["type"] == "approval_decided"]
            assert len(closing) == 1, [r.text for r in answers]
            for r in answers:
                assert r.status_code == 200 or r.json()["error"]["code"] == "ALREADY_DECIDED", r.text
            decided = closing[0].json()
            assert decided["status"] == "approved" and decided["quorum"] == 3
            approvers = [x["by"] for x in decided["approvals"]]
            assert len(approvers) == 3 and len(set(approvers)) == 3, approvers

            events = _names(await _audit(client, b, api_key, approval_id))
            assert events.count("approval_counted") == 3 and events.count("approved") == 1, events

            async def called_back() -> bool:
                return bool(receiver.snapshot()) and await _jobs_left(database_url) == 0

            await until_async(called_back, seconds=30, interval=0.1)
    (call,) = receiver.snapshot()
    assert verify_request(call["body"], call["headers"], callback_secret, now=START) == call["delivery"]
    told = json.loads(call["body"])
    assert told["status"] == "approved" and [x["by"] for x in told["approvals"]] == approvers


async def test_a_key_revoked_with_the_cli_is_refused_by_both_serve_processes_at_once(
    replicas: list[str], operator_env: dict[str, str]
) -> None:
    """`cosigner tenants key revoke` in a third process: its NOTIFY empties both servers' key
    caches, so each refuses the key from its next request while their clock stands still
    (without it each would accept the key it had checked for 30 s more)."""
    made = re.search(
        r"id (key_\w+)\): (\S+)",
        _cosigner(operator_env, "tenants", "key", "create", "acme", "--scope", "agent"),
    )
    assert made, "tenants key create printed no key"
    key_id, key = made.groups()
    async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {key}"}) as client:
        for url in replicas:  # each server checks the key, and keeps it in its cache
            assert (await client.get(f"{url}/v1/approvals/apv_none")).status_code == 404
        said = _cosigner(operator_env, "tenants", "key", "revoke", "acme", key_id)
        assert "refused by every running server from its next request" in said, said

        async def both_heard() -> bool:
            heard = [await _metric(client, url, "cosigner_key_removals_heard_total") for url in replicas]
            return min(heard) >= 1

        await until_async(both_heard, seconds=20, interval=0.05)
        for url in replicas:
            r = await client.get(f"{url}/v1/approvals/apv_none")
            assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHENTICATED", r.text
