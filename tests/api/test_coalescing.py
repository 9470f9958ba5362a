"""One question, not two: an identical request while the first is pending is answered with it
(SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import sqlalchemy as sa

from cosigner.decision import parse_approval
from storage import raw
from storage.tables import approvals
from surfaces.slack.emulator import SlackEmulator
from tests.api.test_approvals import call
from tests.harness import DEFAULT_POLICY, Harness, cosigner_app, slack_app, until

SLACK = {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"}


async def create(h: Harness, key: str, **kw: Any) -> tuple[int, dict[str, Any]]:
    r = await h.client.post("/v1/approvals", json=call(**kw), headers=h.auth(key))
    return r.status_code, dict(r.json())


async def rows(h: Harness, table: sa.Table = approvals) -> int:
    async with raw.read(h.engine.db) as conn:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(table))).scalar_one())


async def events(h: Harness, key: str, aid: str) -> list[dict[str, Any]]:
    r = await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))
    assert r.status_code == 200, r.text
    return list(r.json()["events"])


async def test_an_identical_request_gets_the_pending_approval_and_its_decision(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        first_status, first = await create(h, key, call_id="c1")
        second_status, second = await create(h, key, call_id="c2")
        assert (first_status, second_status) == (201, 201)
        assert "coalesced" not in first, "the first request is asked, not coalesced"
        assert second["coalesced"] is True and second["approvalId"] == first["approvalId"]
        assert second["toolCallId"] == "c1", "the pending approval, as it was asked"
        assert parse_approval(json.dumps(second)).coalesced  # the SDK reads it
        assert not parse_approval(json.dumps(first)).coalesced
        assert await rows(h) == 1, "nothing stored for the second request"
        trail = await events(h, key, first["approvalId"])
        coalesced = [e for e in trail if e["event"] == "coalesced"]
        assert len(coalesced) == 1 and coalesced[0]["data"]["toolCallId"] == "c2"
        assert coalesced[0]["actor"] == {"kind": "agent", "tenant": "acme"}
        # Both callers wait on the same approval, and both get its one decision.
        aid = first["approvalId"]
        polls = [
            asyncio.create_task(h.client.get(f"/v1/approvals/{aid}?wait=30", headers=h.auth(key)))
            for _ in range(2)
        ]
        await h.waiters(2)
        decided = await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "approve", "userId": "u_1"},
        )
        assert decided.status_code == 200, decided.text
        answers = [(await asyncio.wait_for(p, 30)).json() for p in polls]
        assert [a["status"] for a in answers] == ["approved", "approved"]
        assert answers[0]["grant"] and answers[0]["parametersDigest"] == answers[1]["parametersDigest"]


async def test_the_same_call_id_again_is_a_replay_not_a_coalescing(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        _, first = await create(h, key, call_id="c1")
        status, again = await create(h, key, call_id="c1")
        assert status == 201 and again["approvalId"] == first["approvalId"]
        assert "coalesced" not in again
        assert not [e for e in await events(h, key, first["approvalId"]) if e["event"] == "coalesced"]


async def test_different_questions_are_each_asked(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        others: list[dict[str, Any]] = [
            {"params": {"orderId": "ord_2", "amountCents": 12900}},  # other parameters
            {"surface": {"type": "dashboard", "userId": "u_2"}},  # another requester
            {"execution": "run_other"},  # another execution
            {"callbackUrl": "https://agent.example/cb"},  # answered elsewhere
            {"acceptsEdits": True},  # accepts an edited call
            {"tool": "launch_rocket"},  # another tool
        ]
        for i, other in enumerate(others):
            _, first = await create(h, key, call_id="c1", execution=f"run_{i}")
            status, body = await create(h, key, **{"call_id": "c2", "execution": f"run_{i}", **other})
            assert status == 201 and "coalesced" not in body, other
            assert body["approvalId"] != first["approvalId"], other


async def test_a_decided_request_does_not_answer_a_new_one(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        _, first = await create(h, key, call_id="c1")
        await h.client.post(
            f"/v1/approvals/{first['approvalId']}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "deny", "userId": "u_1"},
        )
        status, again = await create(h, key, call_id="c2")
        assert status == 201 and "coalesced" not in again
        assert again["approvalId"] != first["approvalId"], "asked again, not given the old denial"


async def test_an_expired_twin_is_not_joined(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        _, first = await create(h, key, call_id="c1")
        h.clock.advance(3600)  # past its expiry, whether or not the sweeper has closed it yet
        status, again = await create(h, key, call_id="c2")
        assert status == 201 and "coalesced" not in again
        assert again["approvalId"] != first["approvalId"]
        old = await h.client.get(f"/v1/approvals/{first['approvalId']}", headers=h.auth(key))
        assert old.json()["status"] == "expired"


async def test_concurrent_identical_requests_make_one_approval(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        answers = await asyncio.gather(*(create(h, key, call_id=f"c{i}") for i in range(6)))
        assert {status for status, _ in answers} == {201}
        assert len({body["approvalId"] for _, body in answers}) == 1
        assert sum(1 for _, body in answers if body.get("coalesced")) == 5
        assert await rows(h) == 1
        aid = answers[0][1]["approvalId"]
        assert len([e for e in await events(h, key, aid) if e["event"] == "coalesced"]) == 5


async def test_slack_gets_one_card(db_kind: str) -> None:
    secret, app_id = "coalesce-secret", "A0COSIGNER"
    async with slack_app(DEFAULT_POLICY, secret=secret, app_id=app_id, database_kind=db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        _, first = await create(h, key, call_id="c1", surface=SLACK)
        _, second = await create(h, key, call_id="c2", surface=SLACK)
        assert second["coalesced"] is True and second["approvalId"] == first["approvalId"]
        await h.delivered(first["approvalId"])
        posted = await until(lambda: _posts(emu))
        # The delivery is the only job either request queued, and it posted once.
        assert len(posted) == 1 and await rows(h) == 1


def _posts(emu: SlackEmulator) -> list[Any]:
    return [m for m in emu.messages if m.method == "chat.postMessage"]
