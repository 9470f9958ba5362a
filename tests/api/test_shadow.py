"""COSIGNER_POLICY_SHADOW: a second policy decided alongside that acts on nothing; where it
differs, the difference is logged once per request, counted in /metrics and audited."""

from __future__ import annotations

import json
import logging

import pytest
import sqlalchemy as sa

from storage import raw
from storage.tables import audit_events
from tests.harness import DEFAULT_POLICY, EDITABLE_LINE, cosigner_app

# The shadow lets refunds run unasked (a loosening) and sends credits to the tenant admins.
SHADOW = DEFAULT_POLICY.replace(EDITABLE_LINE, "").replace(
    'kind = "danger"\napprovers = ["requester"]', 'kind = "read"\napprovers = ["requester"]'
)
SHADOW = SHADOW.replace("confirm = true\n", 'confirm = true\napprovers = ["tenant_admins"]\n', 1)


def call(tool: str, call_id: str) -> dict[str, object]:
    return {
        "executionId": "run_1",
        "toolCallId": call_id,
        "toolName": tool,
        "parameters": {"amountCents": 9000},
        "surface": {"type": "dashboard", "userId": "u_1"},
    }


async def test_the_shadow_acts_on_nothing_and_reports_each_difference_once(
    db_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cosigner.engine")
    async with cosigner_app(database_kind=db_kind, shadow_toml=SHADOW) as h:
        key = await h.create_tenant("acme")
        for _ in range(2):  # the same call twice: the second is a replay, not a new request
            r = await h.client.post("/v1/approvals", headers=h.auth(key), json=call("issue_refund", "c1"))
            assert r.status_code == 201, "the live policy still asks: the shadow decides nothing"
        refund = r.json()["approvalId"]
        credit = await h.client.post("/v1/approvals", headers=h.auth(key), json=call("issue_credit", "c2"))
        assert credit.status_code == 201
        same = await h.client.post("/v1/approvals", headers=h.auth(key), json=call("lookup_order", "c3"))
        assert same.status_code == 200

        metrics = (await h.client.get("/metrics")).text
        loosening = (
            "cosigner_policy_shadow_differences_total"
            '{from="ask_always:dashboard",to="none",tool="issue_refund"} 1.0'
        )
        assert loosening in metrics, metrics
        assert 'tool="issue_credit"' in metrics and 'tool="lookup_order"' not in metrics

        async with raw.read(h.parts.db) as conn:
            rows = (
                await conn.execute(
                    sa.select(audit_events.c.approval_id, audit_events.c.data).where(
                        audit_events.c.event == "requested"
                    )
                )
            ).all()
        recorded = {r.approval_id: json.loads(r.data) for r in rows}
        shadow = recorded[refund]["shadow"]
        assert shadow["loosens"] is True and shadow["to"] == "none"
        assert shadow["changed"]["mode"] == {"from": "ask_always", "to": "none"}
        credit_shadow = recorded[credit.json()["approvalId"]]["shadow"]
        assert credit_shadow["loosens"] is False and "approvers" in credit_shadow["changed"]
        assert "shadow" not in recorded[same.json()["approvalId"]]

    logged = [r for r in caplog.records if r.getMessage().startswith("the shadow policy decides")]
    assert [getattr(r, "tool", None) for r in logged] == ["issue_refund", "issue_credit"]
    assert getattr(logged[0], "shadow_loosens", None) is True


async def test_without_a_shadow_nothing_is_counted_or_recorded() -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        r = await h.client.post("/v1/approvals", headers=h.auth(key), json=call("issue_refund", "c1"))
        assert r.status_code == 201
        assert "cosigner_policy_shadow_differences_total{" not in (await h.client.get("/metrics")).text


async def test_tools_no_policy_names_share_one_label() -> None:
    """An agent picks its tool names: each may not become a new time series in /metrics."""
    shadow = DEFAULT_POLICY.replace('[tenants.acme.headless]\nroute = "tenant_admins"\n', "")
    assert shadow != DEFAULT_POLICY  # the shadow refuses headless runs the live policy routes
    async with cosigner_app(shadow_toml=shadow) as h:
        key = await h.create_tenant("acme")
        for i in range(3):
            body = call(f"made_up_{i}", f"c{i}") | {"surface": {"type": "api"}}
            await h.client.post("/v1/approvals", headers=h.auth(key), json=body)
        metrics = (await h.client.get("/metrics")).text
        assert "made_up" not in metrics
        assert 'tool="(unnamed)"} 3.0' in metrics, metrics
