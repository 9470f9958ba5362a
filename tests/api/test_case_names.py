"""Tool and operation names match case-insensitively wherever a rule or a standing deny is
looked up: a change of case never escapes a deny, and the name as sent is what is shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.policy.rules import load_policy
from contracts.errors import PolicyError
from tests.api.test_approvals import call
from tests.harness import cosigner_app

DASHBOARD = {"type": "dashboard", "userId": "u_1"}


@pytest.mark.parametrize("name", ["Delete_account", "DELETE_ACCOUNT", "delete_Account"])
async def test_a_change_of_case_is_refused_by_the_tools_deny(name: str) -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        r = await h.client.post("/v1/approvals", json=call(name, params={}), headers=h.auth(key))
        assert r.status_code == 403, r.text
        error = r.json()["error"]
        assert error["code"] == "PERMISSION_DENIED" and "support staff only" in error["message"]


async def test_a_change_of_case_gets_the_tools_rule_and_keeps_the_name_as_sent() -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        read = await h.client.post(
            "/v1/approvals", json=call("Lookup_Order", params={"orderId": "o1"}), headers=h.auth(key)
        )
        assert read.status_code == 200 and read.json()["decidedBy"]["rule"].startswith("tools.lookup_order.")
        assert read.json()["toolName"] == "Lookup_Order"
        asked = await h.client.post(
            "/v1/approvals", json=call("ISSUE_CREDIT", call_id="c2", surface=DASHBOARD), headers=h.auth(key)
        )
        assert asked.status_code == 201 and asked.json()["toolName"] == "ISSUE_CREDIT"
        record = await h.engine.record(asked.json()["approvalId"], "acme")
        assert record.mode.value == "ask", "the write tool's rule, not an unknown tool's danger"


async def test_an_always_deny_stops_the_same_tool_in_another_case() -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        first = await h.client.post(
            "/v1/approvals", json=call("issue_credit", surface=DASHBOARD), headers=h.auth(key)
        )
        denied = await h.client.post(
            f"/v1/approvals/{first.json()['approvalId']}/decision",
            json={"decision": "always_deny", "userId": "u_1"},
            headers=h.auth(h.approver_of(key)),
        )
        assert denied.status_code == 200, denied.text
        for n, name in enumerate(["Issue_credit", "ISSUE_CREDIT"]):
            r = await h.client.post(
                "/v1/approvals", json=call(name, call_id=f"x{n}", surface=DASHBOARD), headers=h.auth(key)
            )
            assert r.status_code == 403, r.text
            assert r.json()["error"]["denial"]["toolName"] == "issue_credit"
        admit = {"executionId": "run_2", "surface": DASHBOARD, "tools": ["Issue_Credit"]}
        admitted = await h.client.post("/v1/runs/admit", json=admit, headers=h.auth(key))
        assert admitted.status_code == 200, admitted.text
        assert [d["toolName"] for d in admitted.json()["standingDenies"]] == ["issue_credit"]


async def test_admit_looks_rules_up_case_insensitively() -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("globex")  # no headless route: a tool needing a person is refused
        admit = {
            "executionId": "run_1",
            "surface": {"type": "schedule"},
            "tools": ["LOOKUP_ORDER", "Delete_Account"],
        }
        r = await h.client.post("/v1/runs/admit", json=admit, headers=h.auth(key))
        assert r.status_code == 200, r.text
        refused = {**admit, "tools": ["Issue_Refund"]}
        r = await h.client.post("/v1/runs/admit", json=refused, headers=h.auth(key))
        assert r.status_code == 422 and r.json()["error"]["policy"] == ["tools.issue_refund"]


CLASHES = [
    (
        '[tools.issue_credit]\nkind = "read"\n[tools.Issue_Credit]\nkind = "danger"\n',
        "tools.Issue_Credit",
        "tools.issue_credit",
    ),
    (
        '[tools.a]\nkind = "read"\n[tenants.acme.tools.Refund]\nkind = "read"\n'
        '[tenants.acme.tools.REFUND]\nkind = "danger"\n',
        "tenants.acme.tools.REFUND",
        "tenants.acme.tools.Refund",
    ),
    (
        '[operations.refund]\nurl = "https://app.example/ops"\nsecret_env = "S"\nkind = "danger"\n'
        '[operations.Refund]\nurl = "https://app.example/ops"\nsecret_env = "S"\nkind = "danger"\n',
        "operations.Refund",
        "operations.refund",
    ),
]


@pytest.mark.parametrize(("text", "path", "other"), CLASHES)
def test_a_policy_naming_one_tool_twice_in_two_cases_is_refused(text: str, path: str, other: str) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy(text)
    assert any(p.startswith(f"{path}:") and other in p and "case" in p for p in info.value.problems), (
        info.value.problems
    )


def test_a_tenant_override_in_another_case_overrides_the_tool() -> None:
    policy = load_policy(
        '[tools.issue_refund]\nkind = "danger"\n[tenants.acme.tools.Issue_Refund]\ndeny = true\n'
    )
    assert policy.rule_for("acme", "ISSUE_REFUND").deny
    assert not policy.rule_for("globex", "issue_refund").deny


def test_policy_check_and_serve_refuse_two_tools_differing_by_case(tmp_path: Path) -> None:
    from tests.ops.test_cli_errors import run

    bad = tmp_path / "policy.toml"
    bad.write_text(CLASHES[0][0])
    checked = run({}, "policy", "check", str(bad), tmp_path=tmp_path)
    assert checked.returncode == 2 and "tools.Issue_Credit:" in checked.stderr, checked.stderr
    served = run({"COSIGNER_POLICY": str(bad)}, "serve", "--port", "1", tmp_path=tmp_path)
    assert served.returncode == 2 and "tools.Issue_Credit:" in served.stderr, served.stderr
