"""`quorum` and `separate_duties` in the policy file: per tool and operation, tenant overrides,
and the problems of a quorum that could never be met (with their key paths)."""

from __future__ import annotations

from pathlib import Path

from bot.policy import load_policy, rule_on
from contracts.enums import ApproverKind
from contracts.errors import ApprovalModeUnsupported
from contracts.ports import Route
from contracts.wire import SlackSurface
from tests.bot.test_policy import REPO, has_problem, problems_of

BASE = """
[tools.delete_account]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2

[tools.issue_refund]
kind = "danger"
approvers = ["requester", "tenant_admins"]

[operations."order.refund"]
url = "https://orders.example/cosigner"
secret_env = "ORDERS_SECRET"
approvers = ["tenant_admins"]
quorum = 2

[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ANN", "U0BOB", "U0CAT"] }
admin_channel = "C0ADMINS"

[tenants.acme.tools.issue_refund]
quorum = 2
separate_duties = false
"""


def test_quorum_and_separate_duties_per_tool_with_tenant_overrides() -> None:
    policy = load_policy(BASE)
    rule = policy.rule_for("acme", "delete_account")
    assert (rule.quorum, rule.separate_duties) == (2, True), "separate_duties defaults to true above 1"
    assert rule.origin("quorum") == "tools.delete_account.quorum"
    override = policy.rule_for("acme", "issue_refund")
    assert (override.quorum, override.separate_duties) == (2, False)
    assert override.origin("quorum") == "tenants.acme.tools.issue_refund.quorum"
    plain = policy.rule_for("other", "issue_refund")
    assert (plain.quorum, plain.separate_duties) == (1, False)
    op = policy.operation_rule("acme", "order.refund")
    assert op is not None and (op.quorum, op.separate_duties) == (2, True)


def test_the_ruling_carries_the_quorum_and_refuses_a_route_too_small_for_it() -> None:
    policy = load_policy(BASE)
    # Ann, an admin, asks in the admin channel: only Bob and Cat may count.
    ann = SlackSurface(type="slack", teamId="T0ACME", channelId="C0ADMINS", userId="U0ANN")
    ruling = rule_on(policy, "acme", "delete_account", {}, ann, enabled=("slack",))
    assert ruling.quorum == 2 and ruling.separate_duties and isinstance(ruling.route, Route)
    assert ruling.to_json()["quorum"] == 2
    assert any(
        s.path == "tools.delete_account.quorum"
        and s.says
        == "2 distinct approvers must approve, never the requester (separate_duties); one Deny vetoes"
        for s in ruling.steps
    )
    three = load_policy(
        BASE.replace("quorum = 2\n\n[tools.issue_refund]", "quorum = 3\n\n[tools.issue_refund]")
    )
    refused = rule_on(three, "acme", "delete_account", {}, ann, enabled=("slack",))
    assert isinstance(refused.route, ApprovalModeUnsupported)
    assert refused.route.details["policy"] == "tools.delete_account.quorum"


def test_a_quorum_above_the_reachable_approvers_is_a_problem_with_its_path() -> None:
    problems = problems_of(
        BASE.replace("quorum = 2\n\n[tools.issue_refund]", "quorum = 4\n\n[tools.issue_refund]")
    )
    assert has_problem(
        problems, "tools.delete_account.quorum", "quorum 4", "3 distinct approvers", "tenant acme"
    )
    # The requester alone can never make two, and never counts with separate_duties.
    alone = problems_of('[tools.x]\nkind = "danger"\nquorum = 2\n')
    assert has_problem(alone, "tools.x.quorum", "0 distinct approvers", "separate_duties")
    assert has_problem(
        problems_of('[tools.x]\nkind = "danger"\nquorum = 2\nseparate_duties = false\n'),
        "tools.x.quorum",
        "1 distinct approver",
    )
    over = problems_of(BASE + '\n[tenants.acme.operations."order.refund"]\nquorum = 5\n')
    assert has_problem(over, 'tenants.acme.operations."order.refund".quorum', "quorum 5")


def test_staff_count_where_no_tenant_is_named() -> None:
    staff = """
[tools.deploy]
kind = "danger"
approvers = ["staff"]
quorum = 2

[staff]
slack_team = "T0OPS"
channel = "C0STAFF"
users = ["U0OPS1", "U0OPS2"]
"""
    assert load_policy(staff).rule_for("any", "deploy").approvers == (ApproverKind.STAFF,)
    assert has_problem(
        problems_of(staff.replace("quorum = 2", "quorum = 3")), "tools.deploy.quorum", "2 distinct"
    )


def test_a_quorum_on_a_handoff_is_a_problem() -> None:
    problems = problems_of("""
[tools.publish]
kind = "danger"
quorum = 2
separate_duties = false
approvers = ["tenant_admins"]
[tools.publish.handoff]
reason = "only a person can"
steps = ["Press Publish"]
expect = { url = "https://app.example/expect", secret_env = "APP_SECRET" }
""")
    assert has_problem(problems, "tools.publish.quorum", "handoff", "remove quorum")


def test_bad_values_are_refused_by_type() -> None:
    problems = problems_of('[tools.x]\nkind = "danger"\nquorum = 0\nseparate_duties = "yes"\n')
    assert has_problem(problems, "tools.x.quorum", "≥ 1")
    assert has_problem(problems, "tools.x.separate_duties", "true or false")
    assert has_problem(problems_of('[tools.x]\nkind = "danger"\nquorum = true\n'), "tools.x.quorum")
    assert has_problem(problems_of('[tools.x]\nkind = "danger"\nquorum = 2.0\n'), "tools.x.quorum")


def test_policy_check_and_serve_refuse_a_quorum_that_can_never_be_met(tmp_path: Path) -> None:
    from tests.ops.test_cli_errors import run

    bad = tmp_path / "policy.toml"
    bad.write_text(
        (REPO / "policy.example.toml").read_text() + '\n[tools.nuke]\nkind = "danger"\nquorum = 2\n'
    )
    checked = run({}, "policy", "check", str(bad), tmp_path=tmp_path)
    assert checked.returncode == 2, checked.stdout
    assert "tools.nuke.quorum:" in checked.stderr
    served = run({"COSIGNER_POLICY": str(bad)}, "serve", "--port", "1", tmp_path=tmp_path)
    assert served.returncode == 2 and "tools.nuke.quorum:" in served.stderr
    assert "Traceback" not in checked.stderr + served.stderr
