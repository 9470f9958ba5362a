"""Races, replicas, restarts and callbacks: the lifecycle holds under pressure."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from bot.approvals.grants import callback_secret
from cosigner.errors import InvalidSignature
from cosigner.webhooks import verify_request
from storage import raw
from storage.database import Database
from storage.tables import audit_events, jobs
from tests.harness import (
    DROP,
    TEST_SECRET,
    CallbackReceiver,
    Harness,
    ManualClock,
    cosigner_app,
    database,
    postgres_url,
    until,
    until_async,
)

# Callbacks go to a real HTTP server on loopback, which the egress rules open with
# LOOPBACK; tests/bot/test_callback_egress.py covers name resolution and the address checks.
LOOPBACK = "127.0.0.0/8"


def call(call_id: str = "c1", **extra: Any) -> dict[str, Any]:
    body = {
        "executionId": "run_1",
        "toolCallId": call_id,
        "toolName": "issue_refund",
        "parameters": {"amountCents": 12900, "password": "hunter2"},
        "surface": {"type": "dashboard", "userId": "u_1"},
    }
    body.update(extra)
    return body


async def create(h: Harness, key: str, **kw: Any) -> str:
    r = await h.client.post("/v1/approvals", json=call(**kw), headers=h.auth(key))
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def test_of_many_concurrent_decisions_exactly_one_wins(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        for round_ in range(3):
            aid = await create(h, key, call_id=f"race{round_}")
            verdicts = ["approve", "deny"] * 25
            results = await asyncio.gather(
                *(
                    h.client.post(
                        f"/v1/approvals/{aid}/decision",
                        headers=h.auth(h.approver_of(key)),
                        json={"decision": v, "userId": "u_1"},
                    )
                    for v in verdicts
                )
            )
            winners = [r for r in results if r.status_code == 200]
            losers = [r for r in results if r.status_code != 200]
            assert len(winners) == 1
            assert {(r.status_code, r.json()["error"]["code"]) for r in losers} == {(409, "ALREADY_DECIDED")}
            final = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
            assert final["status"] == winners[0].json()["status"]
            async with raw.read(h.parts.db) as conn:
                closing = (
                    await conn.execute(
                        sa.select(audit_events.c.event).where(
                            audit_events.c.approval_id == aid,
                            audit_events.c.event.in_(["approved", "denied"]),
                        )
                    )
                ).all()
            assert len(closing) == 1


async def test_decision_racing_cancel_and_expiry(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = await create(h, key, timeoutSeconds=1)
        h.advance(1.0)  # due now: every answer below races the expiry
        answers, _expired = await asyncio.gather(
            asyncio.gather(
                h.client.post(f"/v1/approvals/{aid}/cancel", headers=h.auth(key)),
                *(
                    h.client.post(
                        f"/v1/approvals/{aid}/decision",
                        headers=h.auth(h.approver_of(key)),
                        json={"decision": "approve", "userId": "u_1"},
                    )
                    for _ in range(5)
                ),
            ),
            h.parts.engine.closer.expire_due(),
        )
        statuses = [r.status_code for r in answers]
        assert statuses.count(200) <= 1
        final = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
        assert final["status"] in ("cancelled", "approved", "expired")
        async with raw.read(h.parts.db) as conn:
            closing = (
                (
                    await conn.execute(
                        sa.select(audit_events.c.event).where(
                            audit_events.c.approval_id == aid,
                            audit_events.c.event.in_(["approved", "denied", "expired", "cancelled"]),
                        )
                    )
                )
                .scalars()
                .all()
            )
        assert closing == [final["status"]]


@asynccontextmanager
async def two_replicas(**kw: Any) -> AsyncIterator[tuple[Harness, Harness]]:
    """Two apps on one PostgreSQL schema: two `serve` processes behind a load balancer."""
    async with database("postgres") as db:
        other = Database(db.url, schema=db.schema)
        clock = ManualClock()
        async with (
            cosigner_app(db=db, clock=clock, **kw) as a,
            cosigner_app(db=other, clock=clock, **kw) as b,
        ):
            yield a, b


@pytest.mark.skipif(
    not postgres_url(), reason="replicas need PostgreSQL: set COSIGNER_TEST_POSTGRES_URL (.ci/run does)"
)
async def test_two_replicas_agree_on_one_decision_and_wake_each_others_long_polls() -> None:
    async with two_replicas() as (a, b):
        key = await a.create_tenant("acme")
        aid = await create(a, key)
        # b never re-reads on its own within the test: only a NOTIFY from a can wake it.
        b.engine.recheck_seconds = 3600
        poll = asyncio.create_task(b.client.get(f"/v1/approvals/{aid}?wait=30", headers=b.auth(key)))
        await b.waiters(1)
        assert not poll.done()
        results = await asyncio.gather(
            *(
                (a if i % 2 else b).client.post(
                    f"/v1/approvals/{aid}/decision",
                    headers=a.auth(a.approver_of(key)),
                    json={"decision": "approve", "userId": "u_1"},
                )
                for i in range(20)
            )
        )
        assert [r.status_code for r in results].count(200) == 1
        r = await asyncio.wait_for(poll, 30)
        assert r.json()["status"] == "approved"


@pytest.mark.skipif(
    not postgres_url(), reason="replicas need PostgreSQL: set COSIGNER_TEST_POSTGRES_URL (.ci/run does)"
)
async def test_a_replica_forgets_its_copy_when_another_decides_and_never_decides_on_a_stale_one() -> None:
    """The replica that created an approval keeps it while pending (`storage.known`); another
    replica's decision makes it forget it, and a copy that missed the decision (a NOTIFY lost
    with the LISTEN connection) can neither win a decision nor end a long-poll."""
    async with two_replicas() as (a, b):
        key = await a.create_tenant("acme")
        aid = await create(a, key)
        kept = a.parts.db.known
        copy = kept.get(aid)
        assert copy is not None and copy.status.value == "pending"
        assert b.parts.db.known.get(aid) is None  # b did not create it
        denied = await b.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=b.auth(b.approver_of(key)),
            json={"decision": "deny", "userId": "u_1", "comment": "no"},
        )
        assert denied.status_code == 200, denied.text
        await until(lambda: kept.get(aid) is None)  # a heard b's NOTIFY

        kept.keep(copy, kept.epoch())  # as if that NOTIFY had been lost
        late = await a.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=a.auth(a.approver_of(key)),
            json={"decision": "approve", "userId": "u_1"},
        )
        assert (late.status_code, late.json()["error"]["code"]) == (409, "ALREADY_DECIDED")
        assert kept.get(aid) is None  # a close attempt here forgets it too

        kept.keep(copy, kept.epoch())
        a.engine.recheck_seconds = 0.05  # the waiters' recheck covers a lost NOTIFY
        polled = await a.client.get(f"/v1/approvals/{aid}?wait=30", headers=a.auth(key))
        assert (polled.json()["status"], polled.json()["comment"]) == ("denied", "no")
        async with raw.read(a.parts.db) as conn:
            events = (
                (await conn.execute(sa.select(audit_events.c.event).where(audit_events.c.approval_id == aid)))
                .scalars()
                .all()
            )
        assert [e for e in events if e in ("approved", "denied")] == ["denied"]


@pytest.mark.skipif(
    not postgres_url(), reason="replicas need PostgreSQL: set COSIGNER_TEST_POSTGRES_URL (.ci/run does)"
)
async def test_two_replicas_expire_once_and_deliver_each_callback_attempt_once() -> None:
    with CallbackReceiver(answers=[(204, {})] * 10) as receiver:
        async with two_replicas(callback_allow=LOOPBACK) as (a, b):
            key = await a.create_tenant("acme")
            ids = [
                await create(
                    a,
                    key,
                    call_id=f"e{i}",
                    executionId=f"run_{i}",
                    timeoutSeconds=1,
                    callbackUrl=receiver.url,
                )
                for i in range(10)
            ]
            a.advance(1.2)
            b.advance(0)
            await asyncio.gather(
                a.engine.closer.expire_due(),
                b.engine.closer.expire_due(),
                a.engine.closer.expire_due(),
                b.engine.closer.expire_due(),
            )
            await until(lambda: len(receiver.snapshot()) >= 10, seconds=30)

            # Once no job is left unfinished neither worker has anything to send, so a second
            # delivery of any attempt would already be in `receiver.snapshot()`.
            async def all_jobs_finished() -> bool:
                async with raw.read(a.parts.db) as conn:
                    open_jobs = await conn.execute(
                        sa.select(sa.func.count()).select_from(jobs).where(jobs.c.done_at.is_(None))
                    )
                    return open_jobs.scalar_one() == 0

            await until_async(all_jobs_finished, seconds=30)
            async with raw.read(a.parts.db) as conn:
                expired = (
                    (
                        await conn.execute(
                            sa.select(audit_events.c.approval_id).where(audit_events.c.event == "expired")
                        )
                    )
                    .scalars()
                    .all()
                )
        assert sorted(expired) == sorted(ids)
        delivered = [c["delivery"] for c in receiver.snapshot()]
        assert len(delivered) == 10 and len(set(delivered)) == 10


async def test_callbacks_are_signed_retried_and_audited(db_kind: str) -> None:
    # The second attempt's connection is closed without an answer.
    with CallbackReceiver(answers=[(500, {}), DROP, (200, {})]) as receiver:
        async with cosigner_app(database_kind=db_kind, callback_allow=LOOPBACK) as h:
            key = await h.create_tenant("acme")
            aid = await create(h, key, callbackUrl=receiver.url)
            await h.client.post(
                f"/v1/approvals/{aid}/decision",
                headers=h.auth(h.approver_of(key)),
                json={"decision": "approve", "userId": "u_1"},
            )
            # backoff between attempts is on the app's clock: move it on until all three ran
            await h.advance_until(lambda: len(receiver.snapshot()) >= 3)

            async def attempts_recorded() -> list[Any]:
                r = await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))
                events: list[Any] = r.json()["events"]
                return events if sum(e["event"] == "callback_attempt" for e in events) == 3 else []

            audit = await until_async(attempts_recorded)
        calls = receiver.snapshot()
        assert len(calls) == 3
        body = calls[-1]["body"]
        signed = calls[-1]["headers"]
        assert verify_request(body, signed, callback_secret(TEST_SECRET, "acme"), now=h.clock())
        with pytest.raises(InvalidSignature):
            verify_request(body, signed, callback_secret(TEST_SECRET, "globex"), now=h.clock())
        decision = json.loads(body)
        assert decision["approvalId"] == aid and decision["status"] == "approved"
        assert "hunter2" not in body.decode()
        ids = {c["delivery"] for c in calls}
        assert len(ids) == 1, "one delivery id across its retries"
        attempts = [e for e in audit if e["event"] == "callback_attempt"]
        assert [a["data"]["status"] for a in attempts] == [500, None, 200]
        assert attempts[1]["data"]["error"] == "ServerDisconnectedError"


async def test_restart_expires_what_expired_while_down_and_delivers_the_outbox(db_kind: str) -> None:
    async with database(db_kind) as db:
        with CallbackReceiver() as receiver:
            clock = ManualClock()
            async with cosigner_app(db=db, run_workers=False, clock=clock, callback_allow=LOOPBACK) as h:
                key = await h.create_tenant("acme")
                decided = await create(h, key, call_id="d1", callbackUrl=receiver.url)
                await h.client.post(
                    f"/v1/approvals/{decided}/decision",
                    headers=h.auth(h.approver_of(key)),
                    json={"decision": "deny", "userId": "u_1"},
                )
                doomed = await create(h, key, call_id="d2", timeoutSeconds=1, callbackUrl=receiver.url)
            # the server is down: nothing delivered the callback, nothing expired d2
            assert receiver.snapshot() == []
            clock.advance(1.2)
            reopened = Database(db.url, schema=db.schema)
            async with cosigner_app(db=reopened, clock=clock, callback_allow=LOOPBACK) as h2:
                await until(lambda: len(receiver.snapshot()) >= 2)
                state = (await h2.client.get(f"/v1/approvals/{doomed}", headers=h2.auth(key))).json()

                async def outbox_empty() -> bool:
                    async with raw.read(h2.parts.db) as conn:
                        left = await conn.execute(
                            sa.select(sa.func.count()).select_from(jobs).where(jobs.c.done_at.is_(None))
                        )
                        return left.scalar_one() == 0

                await until_async(outbox_empty)
        assert state["status"] == "expired"
        bodies = sorted(
            (json.loads(c["body"])["approvalId"], json.loads(c["body"])["status"])
            for c in receiver.snapshot()
        )
        assert bodies == sorted([(decided, "denied"), (doomed, "expired")])


async def test_policy_decisions_also_call_back(db_kind: str) -> None:
    with CallbackReceiver() as receiver:
        async with cosigner_app(database_kind=db_kind, callback_allow=LOOPBACK) as h:
            key = await h.create_tenant("acme")
            r = await h.client.post(
                "/v1/approvals",
                headers=h.auth(key),
                json=call(toolName="lookup_order", callbackUrl=receiver.url),
            )
            assert r.status_code == 200
            await until(lambda: len(receiver.snapshot()) >= 1)
        assert json.loads(receiver.snapshot()[0]["body"])["decidedBy"]["kind"] == "policy"
