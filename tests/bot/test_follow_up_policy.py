"""`remind_after` and `escalate` in the policy: merged per tenant, refused with key paths
when they could never run, explained, and carried out on the dashboard through the API."""

from __future__ import annotations

from typing import Any

import pytest

from bot.policy.decision import rule_on
from bot.policy.rules import load_policy
from contracts.enums import ApproverKind
from contracts.errors import PolicyError
from contracts.ports import SlackRoute
from contracts.wire import SlackSurface
from tests.harness import cosigner_app, until_async

BASE = """
[defaults]
timeout = "5m"
sms_timeout = "1h"

[tools.issue_refund]
kind = "danger"
timeout = "1h"
remind_after = "5m"
escalate = [{ after = "10m", to = "tenant_admins" }, { after = "30m", to = "staff" }]

[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ADMIN"], dashboard = ["u_admin"] }
admin_channel = "C0ADMINS"

[staff]
slack_team = "T0OPS"
channel = "C0STAFF"
users = ["U0OPS1"]
"""
SLACK = SlackSurface(type="slack", teamId="T0ACME", channelId="C1", userId="U1")


def problems_of(text: str) -> list[str]:
    with pytest.raises(PolicyError) as info:
        load_policy(text)
    return list(info.value.problems)


def test_the_keys_merge_per_tool_with_tenant_overrides() -> None:
    policy = load_policy(
        BASE
        + """
[tenants.acme.tools.issue_refund]
remind_after = "2m"
escalate = [{ after = "20m", to = "staff" }]

[tenants.globex]
[tenants.globex.tools.issue_refund]
escalate = []
"""
    )
    own = policy.rule_for("acme", "issue_refund")
    assert own.remind_after == 120.0
    assert [(s.after, s.to) for s in own.escalate] == [(1200.0, ApproverKind.STAFF)]
    assert own.origin("escalate") == "tenants.acme.tools.issue_refund.escalate"
    assert policy.rule_for("globex", "issue_refund").escalate == ()  # turned off for one tenant
    assert policy.rule_for("globex", "issue_refund").remind_after == 300.0  # kept from the tool
    default = policy.rule_for("other", "issue_refund")
    assert [s.to for s in default.escalate] == [ApproverKind.TENANT_ADMINS, ApproverKind.STAFF]


def test_operations_take_the_same_keys() -> None:
    policy = load_policy(
        BASE
        + """
[operations.refund]
url = "https://orders.example/cosigner"
secret_env = "ORDERS_SECRET"
timeout = "1h"
remind_after = "5m"

[tenants.acme.operations.refund]
escalate = [{ after = "10m", to = "tenant_admins" }]
"""
    )
    op = policy.operation_rule("acme", "refund")
    assert op is not None and op.remind_after == 300.0 and op.escalate[0].to is ApproverKind.TENANT_ADMINS
    problems = problems_of(
        BASE
        + """
[operations.refund]
url = "https://orders.example/cosigner"
secret_env = "ORDERS_SECRET"
escalate = [{ after = "10m", to = "tenant_admins" }]
"""
    )
    assert any(p.startswith("operations.refund.escalate[0].after: 10m is not before") for p in problems)


@pytest.mark.parametrize(
    ("section", "path", "words", "more"),
    [
        # The request's timeout: the tool's own, else the surface's (a Slack request has 5m).
        ('timeout = "20m"\nremind_after = "20m"', "tools.t.remind_after", "20m is not before", "20m"),
        (
            'escalate = [{ after = "10m", to = "tenant_admins" }]',
            "tools.t.escalate[0].after",
            "timeout of 5m",
            "defaults.timeout, on",
        ),
        (
            'timeout = "1h"\nescalate = [{ after = "30m", to = "staff" },\n'
            '  { after = "10m", to = "tenant_admins" }]',
            "tools.t.escalate[1].after",
            "not after the step before it",
            "30m",
        ),
        (
            'timeout = "1h"\nescalate = [{ after = "10m", to = "staff" }, { after = "30m", to = "staff" }]',
            "tools.t.escalate[1].to",
            "escalated to already",
            "escalate[0]",
        ),
        (
            'timeout = "1h"\napprovers = ["tenant_admins"]\n'
            'escalate = [{ after = "10m", to = "tenant_admins" }]',
            "tools.t.escalate[0].to",
            "asked of tenant_admins already",
            "",
        ),
        (
            'timeout = "1h"\nescalate = [{ after = "10m", to = "requester" }]',
            "tools.t.escalate.to",
            "must be",
            "",
        ),
        ('timeout = "1h"\nescalate = [{ after = "10m" }]', "tools.t.escalate.to", "missing", "escalate ="),
        (
            'timeout = "1h"\nescalate = { after = "10m", to = "staff" }',
            "tools.t.escalate",
            "must be a list",
            "",
        ),
        (
            'timeout = "1h"\nescalate = [{ after = 600, to = "staff" }]',
            "tools.t.escalate.after",
            "with a unit",
            "",
        ),
        (
            'timeout = "1h"\nescalate = [{ after = "10m", to = "staff", who = 1 }]',
            "tools.t.escalate.who",
            "unknown key",
            "after, to",
        ),
    ],
)
def test_a_step_that_could_never_run_is_refused_with_its_key_path(
    section: str, path: str, words: str, more: str
) -> None:
    text = BASE + f'\n[tools.t]\nkind = "danger"\n{section}\n'
    problems = problems_of(text)
    assert any(p.startswith(f"{path}:") and words in p and more in p for p in problems), problems


def test_sms_timeout_counts_for_a_route_that_is_only_sms() -> None:
    # Admins reachable by SMS only: the request has the SMS timeout (1h), so 30m fits.
    policy = load_policy(
        """
[defaults]
timeout = "5m"
sms_timeout = "1h"

[tools.t]
kind = "danger"
approvers = ["tenant_admins"]
remind_after = "30m"

[tenants.acme]
sms_from = "+15550000001"
admins = { sms = ["+15550000002"] }
"""
    )
    assert policy.rule_for("acme", "t").remind_after == 1800.0
    problems = problems_of(
        """
[defaults]
timeout = "5m"
sms_timeout = "1h"

[tools.t]
kind = "danger"
approvers = ["tenant_admins"]
remind_after = "30m"

[tenants.acme]
sms_from = "+15550000001"
admins = { sms = ["+15550000002"], dashboard = ["u_1"] }
"""
    )
    assert any("tools.t.remind_after: 30m is not before" in p and "on dashboard" in p for p in problems)


def test_a_route_a_tenant_does_not_have_and_a_tool_that_never_asks_are_refused() -> None:
    problems = problems_of(
        """
[tools.t]
kind = "danger"
timeout = "1h"
escalate = [{ after = "10m", to = "tenant_admins" }, { after = "20m", to = "staff" }]

[tools.lookup]
kind = "read"
remind_after = "1m"

[tools.gone]
kind = "danger"
deny = true
escalate = [{ after = "1m", to = "tenant_admins" }]

[tenants.bare]
"""
    )
    assert any(
        p.startswith("tools.t.escalate[0].to: tenant bare lists no reachable admins") for p in problems
    )
    assert any(
        p.startswith('tools.t.escalate[1].to: names "staff" but there is no [staff]') for p in problems
    )
    assert any(p.startswith("tools.lookup.remind_after: can never run") for p in problems)
    assert any(p.startswith("tools.gone.escalate: can never run") for p in problems)


def test_a_read_tool_a_tenant_gates_may_remind() -> None:
    policy = load_policy(
        """
[tools.lookup]
kind = "read"
remind_after = "1m"

[tenants.acme]
gate_all = true
"""
    )
    assert policy.rule_for("acme", "lookup").remind_after == 60.0


def test_a_handoff_is_never_escalated() -> None:
    problems = problems_of(
        BASE
        + """
[tools.publish]
kind = "danger"
escalate = [{ after = "1m", to = "staff" }]

[tools.publish.handoff]
reason = "Publishing needs the owner's code"
steps = ["Enter the code"]
expect = { url = "https://app.example/expect", secret_env = "APP_SECRET" }
"""
    )
    assert any(p.startswith("tools.publish.escalate: a handoff") for p in problems), problems


def test_explain_says_each_step_and_where_it_goes() -> None:
    policy = load_policy(BASE)
    ruling = rule_on(policy, "acme", "issue_refund", {}, SLACK, enabled={"slack"})
    says = {s.path: s.says for s in ruling.steps}
    assert "one reminder" in says["tools.issue_refund.remind_after"]
    assert "also to tenant_admins (U0ADMIN)" in says["tools.issue_refund.escalate[0]"]
    assert "also to staff (U0OPS1)" in says["tools.issue_refund.escalate[1]"]
    assert ruling.follow_ups is not None
    routes = [s.route for s in ruling.follow_ups.steps]
    assert isinstance(routes[0], SlackRoute) and routes[0].channel_id == "C0ADMINS"
    assert isinstance(routes[1], SlackRoute) and routes[1].channel_id == "C0STAFF"
    assert ruling.to_json()["followUps"]["escalate"][0] == {
        "step": 0,
        "afterSeconds": 600.0,
        "to": "tenant_admins",
        "route": "slack T0ACME/C0ADMINS",
    }
    short = rule_on(policy, "acme", "issue_refund", {}, SLACK, enabled={"slack"}, requested_timeout=900)
    assert short.follow_ups is not None and [s.step for s in short.follow_ups.steps] == [0]
    assert (
        "not before this request's timeout (15m)"
        in {s.path: s.says for s in short.steps}["tools.issue_refund.escalate[1]"]
    )


async def test_a_tenant_without_admins_is_refused_when_it_asks(db_kind: str) -> None:
    """A tenant with no section of its own is checked when its request arrives: fail closed."""
    async with cosigner_app(BASE, database_kind=db_kind) as h:
        key = await h.create_tenant("initech")
        response = await h.client.post(
            "/v1/approvals",
            headers=h.auth(key),
            json={
                "executionId": "r1",
                "toolCallId": "c1",
                "toolName": "issue_refund",
                "parameters": {},
                "surface": {"type": "dashboard", "userId": "u_1"},
            },
        )
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "APPROVAL_MODE_UNSUPPORTED"
        assert error["policy"] == "tools.issue_refund.escalate[0].to"
        assert "tenant_admins" in error["message"]


DASHBOARD = """
[defaults]
timeout = "1h"

[tools.issue_refund]
kind = "danger"
remind_after = "5m"
escalate = [{ after = "10m", to = "tenant_admins" }]

[tenants.acme]
admins = { dashboard = ["u_admin"] }
"""


async def test_on_the_dashboard_an_admin_may_decide_once_escalated_and_not_before(db_kind: str) -> None:
    async with cosigner_app(DASHBOARD, database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        approver = h.approver_key("acme")
        created = await h.client.post(
            "/v1/approvals",
            headers=h.auth(key),
            json={
                "executionId": "r1",
                "toolCallId": "c1",
                "toolName": "issue_refund",
                "parameters": {"amountCents": 1},
                "surface": {"type": "dashboard", "userId": "u_1"},
            },
        )
        approval_id = created.json()["approvalId"]

        async def decide_as(user: str) -> Any:
            return await h.client.post(
                f"/v1/approvals/{approval_id}/decision",
                headers=h.auth(approver),
                json={"decision": "approve", "userId": user},
            )

        early = await decide_as("u_admin")
        assert early.status_code == 403 and early.json()["error"]["code"] == "NOT_AN_APPROVER"

        async def audit() -> list[str]:
            body = (await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))).json()
            return [e["event"] for e in body["events"]]

        h.advance(5 * 60)
        await until_async(lambda: _has(audit, "reminded"))
        events = (await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))).json()[
            "events"
        ]
        (reminded,) = [e for e in events if e["event"] == "reminded"]
        assert reminded["data"]["sent"] is False and "dashboard" in reminded["data"]["why"]

        h.advance(5 * 60)
        await until_async(lambda: _has(audit, "escalated"))
        late = await decide_as("u_admin")
        assert late.status_code == 200, late.text
        assert late.json()["status"] == "approved" and late.json()["decidedBy"]["userId"] == "u_admin"


async def _has(audit: Any, name: str) -> bool:
    return name in await audit()
