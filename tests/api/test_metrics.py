"""The Prometheus metrics: waiting connections, requests and approvals, the job queue and retries."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from contracts.enums import JobKind
from storage import raw
from tests.api.test_approvals import start
from tests.databases import DESK, NOT_STORED, postgres_elsewhere
from tests.harness import CallbackReceiver, Harness, cosigner_app, until_async

# On PostgreSQL, the storage path of the tests marked runs in the tests these name.
POSTGRES_ELSEWHERE = postgres_elsewhere(DESK, NOT_STORED)

LOOPBACK = "127.0.0.0/8"


async def waiters(h: Harness) -> float:
    """The `cosigner_waiters` gauge as /metrics shows it."""
    text = (await h.client.get("/metrics")).text
    line = next(x for x in text.splitlines() if x.startswith("cosigner_waiters "))
    return float(line.split()[1])


@POSTGRES_ELSEWHERE
async def test_waiters_counts_each_waiting_connection(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = (await start(h, key))["approvalId"]
        other = (await start(h, key, call_id="c2", execution="run_2"))["approvalId"]
        polls = [
            asyncio.create_task(h.client.get(f"/v1/approvals/{aid}?wait=30", headers=h.auth(key)))
            for _ in range(6)
        ]
        polls.append(asyncio.create_task(h.client.get(f"/v1/approvals/{other}?wait=30", headers=h.auth(key))))

        async def stream() -> list[str]:
            async with h.client.stream("GET", f"/v1/approvals/{aid}/events", headers=h.auth(key)) as r:
                lines = []
                async for line in r.aiter_lines():
                    lines.append(line)
                return lines

        streams = [asyncio.create_task(stream()) for _ in range(2)]
        await gauge_reaches(h, 9)
        for path, verdict in ((aid, "deny"), (other, "approve")):
            r = await h.client.post(
                f"/v1/approvals/{path}/decision",
                headers=h.auth(h.approver_of(key)),
                json={"decision": verdict, "userId": "u_1"},
            )
            assert r.status_code == 200, r.text
        answers = await asyncio.wait_for(asyncio.gather(*polls), 10)
        assert {a.json()["status"] for a in answers} == {"denied", "approved"}
        events = await asyncio.wait_for(asyncio.gather(*streams), 10)
        assert all("event: approval_decided" in lines for lines in events)
        assert await waiters(h) == 0


async def gauge_reaches(h: Harness, expected: float, seconds: float = 10.0) -> None:
    """Wait until the gauge reads `expected`; fail naming the last value read."""
    seen: list[float] = []

    async def reached() -> bool:
        seen.append(await waiters(h))
        return seen[-1] == expected

    try:
        await until_async(reached, seconds)
    except AssertionError:
        raise AssertionError(f"cosigner_waiters stayed at {seen[-1:]}, expected {expected}") from None


@POSTGRES_ELSEWHERE
async def test_request_and_approval_counters_add_up_over_repeated_calls(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        ids = [(await start(h, key, call_id=f"c{i}", execution=f"run_{i}"))["approvalId"] for i in range(3)]
        for aid in ids[:2]:
            r = await h.client.post(
                f"/v1/approvals/{aid}/decision",
                headers=h.auth(h.approver_of(key)),
                json={"decision": "approve", "userId": "u_1"},
            )
            assert r.status_code == 200, r.text
        r = await h.client.post(f"/v1/approvals/{ids[2]}/cancel", headers=h.auth(key))
        assert r.status_code == 200, r.text
        text = (await h.client.get("/metrics")).text
        assert 'cosigner_http_requests_total{method="POST",route="create",status="201"} 3.0' in text
        assert 'cosigner_http_requests_total{method="POST",route="decision",status="200"} 2.0' in text
        assert 'cosigner_http_requests_total{method="POST",route="cancel",status="200"} 1.0' in text
        assert 'cosigner_approvals_total{event="created",status="pending"} 3.0' in text
        assert 'cosigner_approvals_total{event="closed",status="approved"} 2.0' in text
        assert 'cosigner_approvals_total{event="closed",status="cancelled"} 1.0' in text
        assert 'cosigner_time_to_decision_seconds_count{status="approved",surface="dashboard"} 2.0' in text


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample on /metrics, or None when it is not there."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    return None


@POSTGRES_ELSEWHERE
async def test_the_queue_depth_counts_the_due_unfinished_jobs_of_each_kind(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind, run_workers=False, callback_allow=LOOPBACK) as h:
        key = await h.create_tenant("acme")
        text = (await h.client.get("/metrics")).text
        assert {sample(text, "cosigner_jobs_due", kind=k.value) for k in JobKind} == {0.0}
        aid = (await start(h, key, callbackUrl="http://127.0.0.1:9/cb"))["approvalId"]
        r = await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "approve", "userId": "u_1"},
        )
        assert r.status_code == 200, r.text
        # No worker runs here: the callback waits in the queue, and each scrape reads it anew.
        text = (await h.client.get("/metrics")).text
        assert sample(text, "cosigner_jobs_due", kind="callback") == 1.0
        assert sample(text, "cosigner_jobs_due", kind="deliver") == 0.0


@POSTGRES_ELSEWHERE
async def test_a_failed_callback_attempt_counts_one_retry(db_kind: str) -> None:
    with CallbackReceiver(answers=[(503, {})]) as receiver:
        async with cosigner_app(database_kind=db_kind, callback_allow=LOOPBACK) as h:
            key = await h.create_tenant("acme")
            aid = (await start(h, key, callbackUrl=receiver.url))["approvalId"]
            r = await h.client.post(
                f"/v1/approvals/{aid}/decision",
                headers=h.auth(h.approver_of(key)),
                json={"decision": "approve", "userId": "u_1"},
            )
            assert r.status_code == 200, r.text

            async def retried() -> float | None:
                text = (await h.client.get("/metrics")).text
                return sample(text, "cosigner_jobs_total", kind="callback", outcome="retried")

            assert await until_async(retried) == 1.0
            assert len(receiver.snapshot()) == 1  # the next attempt waits for its time (1 s on)
            text = (await h.client.get("/metrics")).text
            # The retry is due later than now on the test clock: the queue holds nothing due.
            assert sample(text, "cosigner_jobs_due", kind="callback") == 0.0


async def test_metrics_are_scraped_without_the_queue_when_the_database_cannot_be_read(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind, run_workers=False) as h:
        text = (await h.client.get("/metrics")).text
        assert sample(text, "cosigner_jobs_due", kind="callback") == 0.0
        async with raw.write(h.parts.db) as conn:  # the read now fails, as on a broken database
            await conn.execute(sa.text("ALTER TABLE jobs RENAME TO jobs_elsewhere"))
        r = await h.client.get("/metrics")
        assert r.status_code == 200
        # No figure rather than the last one read; the rest is there as before.
        assert sample(r.text, "cosigner_jobs_due", kind="callback") is None
        assert sample(r.text, "cosigner_waiters") == 0.0
