"""One decision path: what `rule_on` explains is what `POST /v1/approvals` does and records."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from bot.policy.decision import differences, rule_on
from bot.policy.rules import load_policy
from contracts.wire import DashboardSurface, ScheduleSurface, SlackSurface
from storage import raw
from storage.tables import audit_events
from tests.harness import DEFAULT_POLICY, EDITABLE_LINE, Harness, cosigner_app

DASH = {"type": "dashboard", "userId": "u_1"}


async def requested(h: Harness, approval_id: str) -> dict[str, Any]:
    async with raw.read(h.parts.db) as conn:
        row = (
            await conn.execute(
                sa.select(audit_events.c.data).where(
                    audit_events.c.approval_id == approval_id, audit_events.c.event == "requested"
                )
            )
        ).one()
    return dict(json.loads(row.data))


async def test_create_decides_and_records_what_explain_says(db_kind: str) -> None:
    calls: list[tuple[str, dict[str, Any], int, str]] = [
        ("lookup_order", {"orderId": "o1"}, 200, "tools.lookup_order.kind"),
        ("issue_refund", {"amountCents": 4000}, 200, "tenants.acme.tools.issue_refund.allow_below"),
        ("issue_refund", {"amountCents": 9000}, 201, "tools.issue_refund.kind"),
        ("issue_credit", {"amountCents": 1}, 201, "tools.issue_credit.confirm"),
        ("delete_account", {"id": "a1"}, 403, "tools.delete_account.deny"),
        ("never_named", {}, 201, "tools.never_named.kind"),
    ]
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        for i, (tool, params, status, path) in enumerate(calls):
            body = {
                "executionId": "run_1",
                "toolCallId": f"c{i}",
                "toolName": tool,
                "parameters": params,
                "surface": DASH,
            }
            r = await h.client.post("/v1/approvals", headers=h.auth(key), json=body)
            assert r.status_code == status, r.text
            ruling = rule_on(
                h.engine.policy,
                "acme",
                tool,
                params,
                DashboardSurface.model_validate(DASH),
                enabled=h.engine.surfaces,
            )
            assert ruling.decided_by == path, ruling.explain()
            approval_id = r.json()["approvalId"] if status != 403 else r.json()["error"]["approvalId"]
            recorded = await requested(h, approval_id)
            assert recorded["rule"] == path and recorded["decision"] == ruling.label
            got = (await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))).json()
            if status != 201:  # decided by the policy: GET names the rule's key path first
                assert got["decidedBy"]["kind"] == "policy", got
                assert got["decidedBy"]["rule"].split(" ")[0].removesuffix(":") == path, got


def test_explanation_names_each_section_and_field_that_spoke() -> None:
    policy = load_policy(DEFAULT_POLICY)
    small = rule_on(policy, "acme", "issue_refund", {"amountCents": 4000}, None, enabled=())
    text = small.explain()
    assert "runs with nobody asked, by tenants.acme.tools.issue_refund.allow_below" in text
    assert "[tenants.acme.tools.issue_refund.allow_below] amountCents 4000 < 5000: nobody is asked" in text
    assert "[tools.issue_refund], overridden key by key by [tenants.acme.tools.issue_refund]" in text
    slack = SlackSurface(type="slack", teamId="T0ACME", channelId="C0OPS", userId="U0ALICE")
    big = rule_on(
        policy,
        "acme",
        "issue_refund",
        {"amountCents": 9000, "customer": {"email": "a@example.com"}},
        slack,
        enabled=("slack",),
    )
    lines = big.explain().splitlines()
    assert '[tools.issue_refund.kind] kind = "danger" → ask_always' in lines[2]
    assert any(
        "[tools.issue_refund.approvers] requester via slack T0ACME/C0OPS: U0ALICE may answer" in x
        for x in lines
    )
    assert any("[defaults.timeout] a person has 5m to answer" in x for x in lines)
    assert any("of these parameters: customer.email" in x for x in lines)
    assert any(x.endswith("; one answer decides") for x in lines), "the explanation must not imply a quorum"
    assert big.to_json()["quorum"] == 1 and big.to_json()["approvers"] == ["U0ALICE"]


def test_a_headless_run_names_the_route_or_the_refusal() -> None:
    policy = load_policy(DEFAULT_POLICY)
    routed = rule_on(policy, "acme", "issue_refund", {}, ScheduleSurface(type="schedule"), enabled=())
    assert routed.kinds and routed.kinds[0].value == "tenant_admins"
    assert any(s.path == "tenants.acme.headless.route" for s in routed.steps)
    refused = rule_on(policy, "globex", "issue_refund", {}, ScheduleSurface(type="schedule"), enabled=())
    assert refused.unsupported and refused.label == "unsupported"
    assert "cannot host one" in (refused.to_json()["refused"] or "")


def test_differences_mark_a_loosening() -> None:
    live = load_policy(DEFAULT_POLICY)
    loose = load_policy(
        DEFAULT_POLICY.replace(EDITABLE_LINE, "").replace(
            'kind = "danger"\napprovers', 'kind = "read"\napprovers'
        )
    )
    surface = DashboardSurface.model_validate(DASH)
    before = rule_on(live, "globex", "issue_refund", {}, surface, enabled=())
    after = rule_on(loose, "globex", "issue_refund", {}, surface, enabled=())
    found = differences(before, after)
    assert found is not None and found["loosens"] is True
    assert (found["from"], found["to"]) == ("ask_always:dashboard", "none")
    assert differences(before, before) is None
    assert differences(after, before) is not None and differences(after, before)["loosens"] is False  # type: ignore[index]
