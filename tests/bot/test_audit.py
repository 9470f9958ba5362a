"""The audit hash chain on a real database: intact chains verify, every tampering is found."""

from __future__ import annotations

import itertools
import json
from typing import Any

import sqlalchemy as sa

from storage import raw
from storage.audit import GENESIS, Event, Finding, chain_hash, chain_rows, event_to_json, verify_chains
from storage.tables import approvals, audit_events
from tests.harness import Harness, cosigner_app

DASH = {"type": "dashboard", "userId": "u_1"}


async def create(
    h: Harness, key: str, call_id: str, tool: str = "issue_refund", params: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    r = await h.client.post(
        "/v1/approvals",
        headers=h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": call_id,
            "toolName": tool,
            "parameters": params if params is not None else {"amountCents": 12900, "cardToken": "tok_x"},
            "reason": "Customer says the discount was not applied",
            "surface": DASH,
        },
    )
    assert r.status_code in (200, 201), r.text
    return r.status_code, dict(r.json())


async def populate(h: Harness) -> dict[str, str]:
    """Three approvals: decided with a reported result (3 events), by policy, still pending."""
    key = await h.create_tenant("acme")
    _, started = await create(h, key, "c1")
    full = started["approvalId"]
    r = await h.client.post(
        f"/v1/approvals/{full}/decision",
        headers=h.auth(h.approver_of(key)),
        json={"decision": "approve", "userId": "u_1", "comment": "ok, Zoë 日本"},
    )
    assert r.status_code == 200, r.text
    r = await h.client.post(
        f"/v1/approvals/{full}/result", headers=h.auth(key), json={"result": {"refundId": "re_1"}}
    )
    assert r.status_code == 200, r.text
    status, policy = await create(h, key, "c2", tool="lookup_order", params={"orderId": "o1"})
    assert status == 200
    _, pending = await create(h, key, "c3")
    return {"full": full, "policy": policy["approvalId"], "pending": pending["approvalId"]}


async def events_of(h: Harness, approval_id: str) -> list[Any]:
    async with raw.read(h.parts.db) as conn:
        return list(
            (
                await conn.execute(
                    sa.select(audit_events)
                    .where(audit_events.c.approval_id == approval_id)
                    .order_by(audit_events.c.seq)
                )
            ).all()
        )


async def check(h: Harness) -> tuple[int, list[Finding]]:
    return await h.parts.db.run_read(verify_chains, snapshot=True)


async def write(h: Harness, statement: Any) -> None:
    async with raw.write(h.parts.db) as conn:
        result = await conn.execute(statement)
        assert result.rowcount >= 1, "the tampering statement must hit a row"


def where(approval_id: str, seq: int) -> Any:
    return sa.and_(audit_events.c.approval_id == approval_id, audit_events.c.seq == seq)


async def test_intact_chains_verify(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        ids = await populate(h)
        full = await events_of(h, ids["full"])
        assert [e.seq for e in full] == [1, 2, 3]
        assert full[0].prev_hash == GENESIS
        assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(full))
        async with raw.read(h.parts.db) as conn:
            total = (await conn.execute(sa.select(sa.func.count()).select_from(audit_events))).scalar_one()
        checked, findings = await check(h)
        assert findings == []
        assert checked == total >= 5


async def test_edited_event_data_is_found(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        ids = await populate(h)
        await write(
            h,
            audit_events.update()
            .where(where(ids["full"], 2))
            .values(data=json.dumps({"comment": "nothing to see"})),
        )
        _, findings = await check(h)
        assert [(f.approval_id, f.seq) for f in findings] == [(ids["full"], 2)]
        assert "edited" in findings[0].problem


async def test_edited_actor_event_or_time_is_found(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        ids = await populate(h)
        row = (await events_of(h, ids["policy"]))[0]
        for change in [
            {"actor": '{"kind":"person","userId":"U_EVIL"}'},
            {"event": "denied"},
            {"at": row.at + 1},
            {"tenant": "globex"},
        ]:
            await write(h, audit_events.update().where(where(ids["policy"], 1)).values(**change))
            _, findings = await check(h)
            assert findings, f"changing {change} went unnoticed"
            assert {f.approval_id for f in findings} == {ids["policy"]}
            await write(
                h,
                audit_events.update()
                .where(where(ids["policy"], 1))
                .values(actor=row.actor, event=row.event, at=row.at, tenant=row.tenant),
            )
        assert (await check(h))[1] == []


async def test_edit_with_its_own_hash_recomputed_is_found(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        ids = await populate(h)
        row = (await events_of(h, ids["full"]))[1]
        data = json.dumps({"comment": "forged"})
        forged = chain_hash(
            row.prev_hash, row.approval_id, row.tenant, row.seq, row.at, row.event, row.actor, data
        )
        await write(h, audit_events.update().where(where(ids["full"], 2)).values(data=data, hash=forged))
        _, findings = await check(h)
        assert findings and {f.approval_id for f in findings} == {ids["full"]}
        assert any(f.seq == 3 and "link" in f.problem for f in findings)


async def test_deleted_middle_event_is_found(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        ids = await populate(h)
        await write(h, audit_events.delete().where(where(ids["full"], 2)))
        _checked, findings = await check(h)
        assert findings and {f.approval_id for f in findings} == {ids["full"]}
        assert any(f.seq == 2 and "deleted" in f.problem for f in findings)


async def test_deleted_newest_event_is_found(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        ids = await populate(h)
        await write(h, audit_events.delete().where(where(ids["full"], 3)))
        _, findings = await check(h)
        assert len(findings) == 1
        assert findings[0].approval_id == ids["full"]
        assert "deleted" in findings[0].problem and "3" in findings[0].problem


async def test_deleted_single_newest_event_of_a_pending_approval_is_found(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        ids = await populate(h)
        count = len(await events_of(h, ids["pending"]))
        await write(h, audit_events.delete().where(where(ids["pending"], count)))
        _, findings = await check(h)
        assert [f.approval_id for f in findings] == [ids["pending"]]


async def test_all_events_of_an_approval_deleted_is_found(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        ids = await populate(h)
        await write(h, audit_events.delete().where(audit_events.c.approval_id == ids["full"]))
        _, findings = await check(h)
        assert len(findings) == 1
        assert findings[0].approval_id == ids["full"]
        assert "all 3 events were deleted" in findings[0].problem


async def test_events_of_a_deleted_approval_row_are_found(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        ids = await populate(h)
        await write(h, approvals.delete().where(approvals.c.id == ids["policy"]))
        _, findings = await check(h)
        assert [f.approval_id for f in findings] == [ids["policy"]]
        assert "gone" in findings[0].problem


async def test_rewritten_chain_without_the_head_is_found(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        ids = await populate(h)
        rows = await events_of(h, ids["full"])
        fresh, seq, _head = chain_rows(
            ids["full"],
            "acme",
            0,
            GENESIS,
            rows[0].at,
            [Event(r.event, json.loads(r.actor), {"rewritten": True}) for r in rows],
        )
        assert seq == 3
        async with raw.write(h.parts.db) as conn:
            await conn.execute(audit_events.delete().where(audit_events.c.approval_id == ids["full"]))
            await conn.execute(audit_events.insert(), fresh)
        _, findings = await check(h)
        assert [f.approval_id for f in findings] == [ids["full"]], (
            "a consistent rewrite still disagrees with the head kept on the approval row"
        )


def test_chain_rows_link_and_continue() -> None:
    events = [
        Event("requested", {"kind": "agent"}, {"x": 1}),
        Event("approved", {"kind": "person", "userId": "U1"}, {"comment": "ü"}),
    ]
    rows, seq, head = chain_rows("apv_1", "acme", 0, GENESIS, 1700000000.25, events)
    assert seq == 2 and head == rows[-1]["hash"]
    assert rows[0]["prev_hash"] == GENESIS and rows[1]["prev_hash"] == rows[0]["hash"]
    for r in rows:
        assert r["hash"] == chain_hash(
            r["prev_hash"], "apv_1", "acme", r["seq"], r["at"], r["event"], r["actor"], r["data"]
        )
    more, seq2, head2 = chain_rows("apv_1", "acme", seq, head, 1700000001.0, [Event("result", {}, {})])
    assert more[0]["seq"] == 3 and more[0]["prev_hash"] == head and seq2 == 3
    assert head2 != head
    other, _, _ = chain_rows("apv_2", "acme", 0, GENESIS, 1700000000.25, events)
    assert other[0]["hash"] != rows[0]["hash"], "the approval id is part of the hash"


async def test_event_to_json(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        ids = await populate(h)
        out = [event_to_json(r) for r in await events_of(h, ids["full"])]
        assert [e["seq"] for e in out] == [1, 2, 3]
        assert out[0]["event"] == "requested"
        assert out[0]["data"]["parameters"]["cardToken"] == "[REDACTED]"
        assert "tok_x" not in json.dumps(out)
        assert out[1]["actor"]["userId"] == "u_1"
        assert out[1]["data"]["comment"] == "ok, Zoë 日本"
        assert out[2]["prevHash"] == out[1]["hash"]
