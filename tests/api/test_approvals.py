"""The agent API through httpx.ASGITransport on a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
from functools import partial
from typing import Any

import pytest
import sqlalchemy as sa

from contracts.digest import parameters_digest
from contracts.grants import verify_grant
from storage import ledger, raw
from storage.tables import approvals, audit_events
from tests.harness import DEFAULT_POLICY, Harness, cosigner_app, postgres_url, slack_app, until

DASH = {"type": "dashboard", "userId": "u_1"}


def call(
    tool: str = "issue_refund",
    call_id: str = "c1",
    execution: str = "run_1",
    params: dict[str, Any] | None = None,
    surface: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body = {
        "executionId": execution,
        "toolCallId": call_id,
        "toolName": tool,
        "parameters": params
        if params is not None
        else {"orderId": "ord_1", "amountCents": 12900, "cardToken": "tok_live_secret"},
        "reason": "Customer says the discount was not applied",
        "surface": surface or DASH,
    }
    body.update(extra)
    return body


async def start(h: Harness, key: str, **kw: Any) -> dict[str, Any]:
    r = await h.client.post("/v1/approvals", json=call(**kw), headers=h.auth(key))
    assert r.status_code == 201, r.text
    return dict(r.json())


async def test_modes_decide_without_a_person_or_ask(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        read = await h.client.post(
            "/v1/approvals", headers=h.auth(key), json=call("lookup_order", params={"orderId": "o1"})
        )
        assert read.status_code == 200
        assert read.json()["status"] == "approved"
        assert read.json()["decidedBy"]["kind"] == "policy"
        assert read.json()["grant"]
        unknown = await h.client.post(
            "/v1/approvals", headers=h.auth(key), json=call("launch_rocket", call_id="c2", params={})
        )
        assert unknown.status_code == 201, "a tool the policy does not know is danger"
        denied = await h.client.post(
            "/v1/approvals", headers=h.auth(key), json=call("delete_account", call_id="c9", params={})
        )
        assert denied.status_code == 403
        err = denied.json()["error"]
        assert err["code"] == "PERMISSION_DENIED"
        assert "support staff" in err["message"]
        assert err["policy"] == "tools.delete_account"


async def test_start_body_is_redacted_and_digest_binds_unredacted(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        params = {
            "orderId": "ord_1",
            "amountCents": 12900,
            "cardToken": "tok_live_secret",
            "customer": {"email": "a@b.example", "name": "Ann"},
        }
        body = await start(h, key, params=params)
        assert body["parameters"]["cardToken"] == "[REDACTED]"
        assert body["parameters"]["customer"] == {"email": "[REDACTED]", "name": "Ann"}
        assert body["parametersDigest"] == parameters_digest(params)
        assert body["status"] == "pending" and body["timeout"] == 300_000
        async with raw.read(h.parts.db) as conn:
            stored = (await conn.execute(sa.select(approvals))).first()
            events = (await conn.execute(sa.select(audit_events))).all()
        assert stored is not None
        dump = json.dumps([tuple(stored), [tuple(e) for e in events]])
        assert "tok_live_secret" not in dump and "a@b.example" not in dump


async def test_idempotent_create_and_parameters_mismatch(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        first = await start(h, key)
        again = await start(h, key)
        assert again["approvalId"] == first["approvalId"]
        r = await h.client.post(
            "/v1/approvals", headers=h.auth(key), json=call(params={"orderId": "ord_1", "amountCents": 99999})
        )
        assert r.status_code == 409
        assert r.json()["error"]["code"] == "PARAMETERS_MISMATCH"
        assert r.json()["error"]["approvalId"] == first["approvalId"]


async def test_concurrent_identical_creates_make_one_approval(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        results = await asyncio.gather(
            *(h.client.post("/v1/approvals", headers=h.auth(key), json=call()) for _ in range(10))
        )
        assert {r.status_code for r in results} == {201}
        assert len({r.json()["approvalId"] for r in results}) == 1


async def test_allow_below_threshold_and_tool_call_cap(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        small = await h.client.post(
            "/v1/approvals", headers=h.auth(key), json=call(params={"orderId": "o", "amountCents": 4999})
        )
        assert small.status_code == 200
        assert "allow_below" in small.json()["decidedBy"]["rule"]
        weird = await h.client.post(
            "/v1/approvals",
            headers=h.auth(key),
            json=call(call_id="c2", params={"orderId": "o", "amountCents": "10"}),
        )
        assert weird.status_code == 400, "a threshold parameter that is no number is refused, not guessed"
        error = weird.json()["error"]
        assert error["code"] == "INVALID_REQUEST" and error["field"] == "parameters.amountCents"
        assert error["policy"] == "tenants.acme.tools.issue_refund.allow_below"
        for i in range(2, 6):  # each its own call: identical pending ones are one question, not counted
            await start(h, key, call_id=f"c{i}", params={"orderId": f"o{i}", "amountCents": 12900})
        capped = await h.client.post("/v1/approvals", headers=h.auth(key), json=call(call_id="c99"))
        assert capped.status_code == 429
        assert capped.json()["error"]["code"] == "TOOL_CALL_CAP_EXCEEDED"
        other_run = await h.client.post(
            "/v1/approvals", headers=h.auth(key), json=call(call_id="c99", execution="run_2")
        )
        assert other_run.status_code == 201


async def test_headless_surfaces_fail_closed_unless_routed(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        globex = await h.create_tenant("globex")
        acme = await h.create_tenant("acme")
        for surface in (
            {"type": "schedule"},
            {"type": "batch"},
            {"type": "api"},
            {"type": "web_widget", "tokenKind": "client"},
        ):
            r = await h.client.post(
                "/v1/approvals", headers=h.auth(globex), json=call(surface=surface, call_id=surface["type"])
            )
            assert r.status_code == 422, surface
            err = r.json()["error"]
            assert err["code"] == "APPROVAL_MODE_UNSUPPORTED"
            assert err["policy"] == "tools.issue_refund"
            assert err["surface"].startswith(surface["type"])
            assert "headless" in err["message"]
        routed = await h.client.post(
            "/v1/approvals", headers=h.auth(acme), json=call(surface={"type": "schedule"})
        )
        assert routed.status_code == 201
        aid = routed.json()["approvalId"]
        wrong = await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_key("acme")),
            json={"decision": "approve", "userId": "u_1"},
        )
        assert wrong.json()["error"]["code"] == "NOT_AN_APPROVER"
        ok = await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_key("acme")),
            json={"decision": "approve", "userId": "u_admin"},
        )
        assert ok.json()["status"] == "approved"
        assert ok.json()["decidedBy"] == {"kind": "person", "surface": "dashboard", "userId": "u_admin"}


async def test_admission_preflight(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        globex = await h.create_tenant("globex")
        r = await h.client.post(
            "/v1/runs/admit",
            headers=h.auth(globex),
            json={
                "executionId": "run_1",
                "surface": {"type": "schedule"},
                "tools": ["lookup_order", "issue_refund", "issue_credit"],
            },
        )
        assert r.status_code == 422
        err = r.json()["error"]
        assert err["code"] == "APPROVAL_MODE_UNSUPPORTED"
        assert err["tools"] == ["issue_refund", "issue_credit"]
        assert "tools.issue_refund" in err["policy"]
        ok = await h.client.post(
            "/v1/runs/admit",
            headers=h.auth(globex),
            json={"executionId": "run_1", "surface": {"type": "schedule"}, "tools": ["lookup_order"]},
        )
        assert ok.json() == {"admitted": True}
        dash = await h.client.post(
            "/v1/runs/admit",
            headers=h.auth(globex),
            json={"executionId": "run_1", "surface": DASH, "tools": ["issue_refund"]},
        )
        assert dash.json() == {"admitted": True}


async def test_tenant_isolation(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        acme = await h.create_tenant("acme")
        globex = await h.create_tenant("globex")
        aid = (await start(h, acme))["approvalId"]
        for method, path, body in (
            ("GET", f"/v1/approvals/{aid}", None),
            ("GET", f"/v1/approvals/{aid}/audit", None),
            ("POST", f"/v1/approvals/{aid}/cancel", None),
            ("POST", f"/v1/approvals/{aid}/decision", {"decision": "approve", "userId": "u_1"}),
        ):
            other = h.approver_key("globex") if path.endswith("/decision") else globex
            r = await h.client.request(method, path, json=body, headers=h.auth(other))
            assert r.status_code == 404, (path, r.text)
            assert r.json()["error"]["code"] == "APPROVAL_NOT_FOUND"
        same_ids = await h.client.post("/v1/approvals", headers=h.auth(globex), json=call())
        assert same_ids.status_code == 201, "ids are scoped per tenant"
        assert same_ids.json()["approvalId"] != aid
        r = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(acme))
        assert r.json()["status"] == "pending"
        slack = await h.client.post(
            "/v1/approvals",
            headers=h.auth(globex),
            json=call(
                call_id="s1", surface={"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"}
            ),
        )
        assert slack.status_code == 403
        assert slack.json()["error"]["code"] == "WRONG_TENANT"


async def test_bad_input_names_the_field(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        auth = h.auth(key)
        post = h.client.post
        r = await post("/v1/approvals", content=b"{not json", headers=auth)
        assert (r.status_code, r.json()["error"]["code"]) == (400, "INVALID_REQUEST")
        missing = call()
        del missing["toolName"]
        r = await post("/v1/approvals", json=missing, headers=auth)
        assert r.json()["error"]["field"] == "toolName"
        r = await post("/v1/approvals", json=call(surface={"type": "fax"}), headers=auth)
        assert r.status_code == 400 and r.json()["error"]["field"].startswith("surface")
        r = await post(
            "/v1/approvals", json=call(surface={"type": "slack", "teamId": "T0ACME"}), headers=auth
        )
        assert "surface.channelId" in {p["field"] for p in r.json()["error"]["problems"]}
        r = await post("/v1/approvals", json=call(timeoutSeconds="soon"), headers=auth)
        assert r.json()["error"]["field"] == "timeoutSeconds"
        deep: dict[str, Any] = {}
        node = deep
        for _ in range(40):
            node["x"] = {}
            node = node["x"]
        r = await post("/v1/approvals", json=call(params=deep), headers=auth)
        assert (r.status_code, r.json()["error"]["field"]) == (400, "parameters")
        r = await post("/v1/approvals", json=call(params={"blob": "x" * 70_000}), headers=auth)
        assert (r.status_code, r.json()["error"]["field"]) == (400, "parameters")
        r = await post("/v1/approvals", json=call())
        assert (r.status_code, r.json()["error"]["code"]) == (401, "UNAUTHENTICATED")
        r = await post("/v1/approvals", json=call(), headers=h.auth("csk_nope"))
        assert (r.status_code, r.json()["error"]["code"]) == (401, "UNAUTHENTICATED")
        r = await h.client.get("/v1/approvals/apv_x?wait=61", headers=auth)
        assert r.json()["error"]["field"] == "wait"
        async with raw.read(h.parts.db) as conn:
            count = await conn.execute(sa.select(sa.func.count()).select_from(approvals))
            assert count.scalar_one() == 0, "no half-written rows"


async def test_long_poll_is_woken_by_the_decision(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = (await start(h, key))["approvalId"]
        # No re-read on its own within the test: only the push can answer the long-poll.
        h.engine.recheck_seconds = 3600
        poll = asyncio.create_task(h.client.get(f"/v1/approvals/{aid}?wait=30", headers=h.auth(key)))
        await h.waiters(1)
        assert not poll.done()
        await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "deny", "userId": "u_1", "comment": "no"},
        )
        r = await asyncio.wait_for(poll, 30)
        assert r.json()["status"] == "denied" and r.json()["comment"] == "no"
        assert r.json()["grant"] is None


class RowReads:
    """Counts the reads of one approval's row that reach the database (`storage.ledger.load`'s
    two statements, unlocked and locked)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ids: list[str] = []
        for name in ("_LOAD", "_LOAD_LOCKED"):
            stmt = getattr(ledger, name)
            monkeypatch.setattr(ledger, name, self._counting(stmt))

    def _counting(self, stmt: Any) -> Any:
        reads = self.ids

        class Counting:
            def first(self, tx: Any, params: dict[str, Any]) -> Any:
                reads.append(params["id"])
                return stmt.first(tx, params)

        return Counting()


async def test_a_long_poll_woken_by_a_decision_on_its_own_replica_reads_the_approval_once(
    db_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision hands the closed record to the long-poll waiting on the same process. On
    PostgreSQL the decision's own NOTIFY reaches this process's listener too, often before the
    deciding step has returned: it must not wake the long-poll to read the row a second time.
    And there the replica that created the approval keeps it while it is pending
    (`storage.known`): neither the long-poll nor the decision reads its row from the database."""
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        h.engine.recheck_seconds = 3600
        reads: list[str] = []
        read = h.engine.record

        async def counted(approval_id: str, tenant: str | None = None) -> Any:
            reads.append(approval_id)
            return await read(approval_id, tenant)

        h.engine.record = counted  # type: ignore[method-assign]
        rows = RowReads(monkeypatch)
        for i in range(20):
            aid = (await start(h, key, execution=f"run_{i}"))["approvalId"]
            poll = asyncio.create_task(h.client.get(f"/v1/approvals/{aid}?wait=30", headers=h.auth(key)))
            await h.waiters(1)
            decided = await h.client.post(
                f"/v1/approvals/{aid}/decision",
                headers=h.auth(h.approver_of(key)),
                json={"decision": "approve", "userId": "u_1", "comment": "ok"},
            )
            assert decided.status_code == 200, decided.text
            r = await asyncio.wait_for(poll, 30)
            assert r.json()["status"] == "approved" and r.json()["grant"]
            if db_kind == "postgres":
                assert (reads.count(aid), rows.ids.count(aid)) == (0, 0), (
                    f"round trip {i}: the long-poll read the approval {reads.count(aid)} times, "
                    f"the database was asked for its row {rows.ids.count(aid)} times"
                )
            else:  # SQLite reads in process: the long-poll once, the decision under its lock
                assert (reads.count(aid), rows.ids.count(aid)) == (1, 2), (
                    f"round trip {i}: the long-poll read the approval {reads.count(aid)} times"
                )
        # The copies went with the decisions: nothing closed is kept.
        assert len(h.parts.db.known) == 0


async def test_the_copy_a_replica_keeps_is_the_row_as_the_database_reads_it() -> None:
    """What the creating replica keeps (`storage.known`) stands in for a read of the row: it
    must be that read, field for field, for every kind of route and column a create writes."""
    if not postgres_url():
        pytest.skip("only PostgreSQL keeps copies: set COSIGNER_TEST_POSTGRES_URL")
    from contracts.ports import ApprovalDesk
    from surfaces.slack import SlackAdapter, SlackConfig
    from surfaces.slack.emulator import SlackEmulator

    async with SlackEmulator.running(team_id="T0ACME", app_id="A0COPY") as emu:
        config = SlackConfig(
            signing_secret="s" * 32, bot_token="xoxb-acme", api_url=emu.api_url, app_id="A0COPY"
        )

        def slack(desk: ApprovalDesk) -> SlackAdapter:
            return SlackAdapter(config, desk)

        # No workers: nothing is delivered, so nothing changes the rows after their create.
        async with cosigner_app(database_kind="postgres", surfaces=[slack], run_workers=False) as h:
            await compare_copies(h)


async def compare_copies(h: Harness) -> None:
    key = await h.create_tenant("acme")
    made = [
        await start(h, key, call_id="dash"),  # dashboard, an edit offered, a redacted token
        await start(
            h,
            key,
            call_id="slack",
            surface={"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
            params={"orderId": "ord_2", "amountCents": 99000, "note": "Zoë ✓", "nested": {"a": [1, 2.5]}},
        ),
        # Headless: to the tenant's admins in their Slack channel.
        await start(h, key, tool="issue_credit", call_id="credit", surface={"type": "schedule"}),
    ]
    routes = set()
    for body in made:
        aid: str = body["approvalId"]
        copy = h.parts.db.known.get(aid)
        assert copy is not None and copy.route is not None, f"{aid} was not kept with its route"
        stored = await h.parts.db.run_read(partial(ledger.load, approval_id=aid))
        assert copy == stored
        routes.add(type(copy.route))
    assert len(routes) >= 2  # a dashboard route and a Slack one


async def test_a_delivered_card_makes_the_replica_forget_its_copy() -> None:
    """Sending the card writes the receipt to the row: the copy, which has none, goes."""
    if not postgres_url():
        pytest.skip("only PostgreSQL keeps copies: set COSIGNER_TEST_POSTGRES_URL")
    async with slack_app(DEFAULT_POLICY, secret="s" * 32, app_id="A0COPY", database_kind="postgres") as (
        h,
        emu,
    ):
        key = await h.create_tenant("acme")
        body = await start(
            h,
            key,
            call_id="slack",
            surface={"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
        )
        aid = body["approvalId"]
        await until(lambda: [m for m in emu.messages if m.method == "chat.postMessage"])
        await h.delivered(aid)
        assert h.parts.db.known.get(aid) is None


async def test_server_sent_events(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = (await start(h, key))["approvalId"]

        async def read() -> list[tuple[str, dict[str, Any]]]:
            events = []
            async with h.client.stream("GET", f"/v1/approvals/{aid}/events", headers=h.auth(key)) as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                name = ""
                async for line in r.aiter_lines():
                    if line.startswith("event: "):
                        name = line[7:]
                    elif line.startswith("data: "):
                        events.append((name, json.loads(line[6:])))
            return events

        task = asyncio.create_task(read())
        await h.waiters(1)
        await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "approve", "userId": "u_1"},
        )
        events = await asyncio.wait_for(task, 5)
        assert [e[0] for e in events] == ["approval_start", "approval_decided"]
        assert events[1][1]["status"] == "approved"


async def test_grant_verifies_offline_against_published_key(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        params = {"orderId": "ord_1", "amountCents": 12900, "cardToken": "tok_live_secret"}
        aid = (await start(h, key, params=params))["approvalId"]
        r = await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "approve", "userId": "u_1"},
        )
        jwks = (await h.client.get("/v1/keys")).json()
        claims = verify_grant(
            r.json()["grant"],
            jwks,
            tool_name="issue_refund",
            parameters=params,
            tool_call_id="c1",
            tenant="acme",
        )
        assert claims.approval_id == aid


async def test_cancel_result_and_audit_trail(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        a1 = (await start(h, key))["approvalId"]
        r = await h.client.post(f"/v1/approvals/{a1}/cancel", headers=h.auth(key))
        assert r.json()["status"] == "cancelled" and r.json()["decidedBy"] == {"kind": "agent"}
        again = await h.client.post(f"/v1/approvals/{a1}/cancel", headers=h.auth(key))
        assert (again.status_code, again.json()["error"]["code"]) == (409, "ALREADY_DECIDED")
        late = await h.client.post(
            f"/v1/approvals/{a1}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "approve", "userId": "u_1"},
        )
        assert late.json()["error"]["code"] == "ALREADY_DECIDED"
        a2 = (await start(h, key, call_id="c2"))["approvalId"]
        no_result = await h.client.post(
            f"/v1/approvals/{a2}/result", headers=h.auth(key), json={"result": {"ok": True}}
        )
        assert no_result.status_code == 409, "a pending call has not run"
        await h.client.post(
            f"/v1/approvals/{a2}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "approve", "userId": "u_1"},
        )
        r = await h.client.post(
            f"/v1/approvals/{a2}/result",
            headers=h.auth(key),
            json={"outcome": "succeeded", "result": {"refundId": "re_1", "apiKey": "sk_live_abcdefgh1234"}},
        )
        assert r.json() == {"approvalId": a2, "recorded": True}
        audit = (await h.client.get(f"/v1/approvals/{a2}/audit", headers=h.auth(key))).json()
        names = [e["event"] for e in audit["events"]]
        assert names == ["requested", "approved", "result"]
        assert [e["seq"] for e in audit["events"]] == [1, 2, 3]
        assert audit["events"][1]["actor"]["userId"] == "u_1"
        assert "sk_live_abcdefgh1234" not in json.dumps(audit)
        first = audit["events"][0]
        assert first["data"]["reason"] == "Customer says the discount was not applied"
        assert first["data"]["parameters"]["cardToken"] == "[REDACTED]"
        assert audit["events"][1]["prevHash"] == first["hash"]


async def test_refused_decisions_are_audited(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = (await start(h, key))["approvalId"]
        r = await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "approve", "userId": "u_intruder"},
        )
        assert (r.status_code, r.json()["error"]["code"]) == (403, "NOT_AN_APPROVER")
        audit = (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).json()
        refused = audit["events"][-1]
        assert refused["event"] == "decision_refused"
        assert refused["data"]["code"] == "NOT_AN_APPROVER"
        assert refused["actor"]["userId"] == "u_intruder"
        state = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))
        assert state.json()["status"] == "pending"


async def test_expiry_means_deny_and_late_answers_change_nothing(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        body = await start(h, key, timeoutSeconds=1)
        aid = body["approvalId"]
        assert body["timeout"] == 1000
        poll = asyncio.create_task(h.client.get(f"/v1/approvals/{aid}?wait=10", headers=h.auth(key)))
        await h.waiters(1)
        h.advance(1.0)
        r = await asyncio.wait_for(poll, 30)
        assert r.json()["status"] == "expired"
        assert r.json()["decidedBy"] == {"kind": "timeout"}
        late = await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "approve", "userId": "u_1"},
        )
        assert (late.status_code, late.json()["error"]["code"]) == (409, "APPROVAL_EXPIRED")
        audit = (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).json()
        assert [e["event"] for e in audit["events"]].count("expired") == 1


async def test_answer_arriving_after_expires_at_expires_instead(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind, run_workers=False) as h:
        key = await h.create_tenant("acme")
        aid = (await start(h, key, timeoutSeconds=1))["approvalId"]
        h.advance(1.1)
        late = await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "approve", "userId": "u_1"},
        )
        assert late.json()["error"]["code"] == "APPROVAL_EXPIRED"
        r = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))
        assert r.json()["status"] == "expired"


async def test_operations_endpoints(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        await start(h, key)
        assert (await h.client.get("/healthz")).json() == {"status": "ok"}
        ready = (await h.client.get("/readyz")).json()
        assert ready["status"] == "ready" and ready["database"] in ("sqlite", "postgresql")
        metrics = (await h.client.get("/metrics")).text
        assert 'cosigner_approvals_total{event="created",status="pending"} 1.0' in metrics
        assert 'cosigner_http_requests_total{method="POST",route="create",status="201"}' in metrics
        spec = (await h.client.get("/openapi.json")).json()
        assert "/v1/approvals" in spec["paths"]
        assert "ApprovalRequest" in spec["components"]["schemas"]
        missing = await h.client.get("/nope")
        assert missing.status_code == 404 and "error" in missing.json()


async def test_allow_below_never_approves_negative_or_ambiguous_amounts(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        for i, params in enumerate(
            [
                {"orderId": "o", "amountCents": -10_000_000},
                {"orderId": "o", "amountCents": 10, "AmountCents": 10_000_000},
                {"orderId": "o", "amountCents": 10, "ａmountCents": 10_000_000},
            ]
        ):
            r = await h.client.post(
                "/v1/approvals", headers=h.auth(key), json=call(call_id=f"amb{i}", params=params)
            )
            assert r.status_code == 201, (params, r.text)
        zero = await h.client.post(
            "/v1/approvals", headers=h.auth(key), json=call(call_id="zero", params={"amountCents": 0})
        )
        assert zero.status_code == 200


def test_half_configured_surfaces_are_named() -> None:
    from bot.http.app import partial_configuration
    from tests.harness import make_settings

    assert partial_configuration(make_settings()) == []
    warnings = partial_configuration(make_settings(slack_signing_secret="s", twilio_auth_token="t"))
    assert any("Slack is off" in w and "SLACK_BOT_TOKEN" in w for w in warnings)
    assert any("SMS is off" in w and "TWILIO_ACCOUNT_SID" in w for w in warnings)
    assert not any("WhatsApp" in w for w in warnings)
    half = partial_configuration(
        make_settings(
            twilio_account_sid="AC" + "0" * 32, twilio_auth_token="t", twilio_whatsapp_from="+15550000001"
        )
    )
    assert half == ["WhatsApp is off: TWILIO_WHATSAPP_CONTENT_SID is not set"]


async def test_result_reports_are_refused_for_other_tenants_and_unrun_calls(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key, other = await h.create_tenant("acme"), await h.create_tenant("globex")
        read = await h.client.post(
            "/v1/approvals",
            headers=h.auth(key),
            json=call("lookup_order", call_id="r1", params={"orderId": "o1"}),
        )
        aid = read.json()["approvalId"]

        async def report(approval_id: str, api_key: str = key) -> tuple[int, dict[str, Any]]:
            r = await h.client.post(
                f"/v1/approvals/{approval_id}/result", headers=h.auth(api_key), json={"result": "o1 shipped"}
            )
            return r.status_code, dict(r.json())

        status, body = await report(aid, other)
        assert (status, body["error"]["code"]) == (404, "APPROVAL_NOT_FOUND")
        missing = await report("apv_" + "x" * 20)
        assert (missing[0], missing[1]["error"]["code"]) == (404, "APPROVAL_NOT_FOUND")
        pending = (await start(h, key, call_id="p1"))["approvalId"]
        status, body = await report(pending)
        assert (status, body["error"]["code"], body["error"]["status"]) == (
            409,
            "APPROVAL_PENDING",
            "pending",
        )
        await h.client.post(f"/v1/approvals/{pending}/cancel", headers=h.auth(key))
        status, body = await report(pending)
        assert (status, body["error"]["code"], body["error"]["status"]) == (
            409,
            "ALREADY_DECIDED",
            "cancelled",
        )
        assert await report(aid) == (200, {"approvalId": aid, "recorded": True})
        assert await report(aid) == (200, {"approvalId": aid, "recorded": True}), "each report is recorded"
        audit = (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).json()
        assert [e["event"] for e in audit["events"]] == ["requested", "approved", "result", "result"]
        assert audit["events"][2]["data"] == {"outcome": "succeeded", "result": "o1 shipped", "error": None}
        assert [e["prevHash"] for e in audit["events"][1:]] == [e["hash"] for e in audit["events"][:-1]]
        got = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
        assert got["status"] == "approved" and got["grant"] == read.json()["grant"]
