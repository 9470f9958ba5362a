"""The intake decision with standing allows, without a database: what a standing allow
approves, and everything that comes before it (a standing deny above all)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.approvals.allowances import covered_by
from bot.approvals.intake import Admit, Call, question, weigh
from bot.policy import load_policy
from bot.policy.allow_for import Terms
from bot.policy.decision import rule_on
from contracts.answers import AllowanceDecider
from contracts.denials import Scope as DenyScope
from contracts.enums import ApprovalMode, ApprovalStatus, SurfaceType
from contracts.ports import DashboardRoute
from contracts.wire import DashboardSurface
from storage.allowances import Scope, StandingAllow
from storage.denials import StandingDeny
from storage.intake import Snapshot

ROUTE = DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=("u_1",))
KEY = "sha256:" + "b" * 64


def held(limit: float = 1500.0, uses: int = 0) -> StandingAllow:
    return StandingAllow(
        id="alw_" + "a" * 20,
        scope=Scope("acme", "issue_credit", "dashboard:u_1", KEY),
        match_shown={"customerId": "cus_1"},
        at_most={"amountCents": limit},
        surface=SurfaceType.DASHBOARD,
        granted_by="u_1",
        granted_team=None,
        approval_id="apv_granted",
        created_at=1000.0,
        expires_at=4600.0,
        uses=uses,
        max_uses=20,
    )


def call(amount: float, *, deny: bool = False, threshold: str | None = None) -> Call:
    return Call(
        tool_name="issue_credit",
        digest="sha256:" + "c" * 64,
        execution_id="run_1",
        tool_call_id="call_2",
        mode=ApprovalMode.ASK_ALWAYS,
        kind="write",
        deny=deny,
        rule_path="tools.issue_credit",
        threshold=threshold,
        routed=ROUTE,
        cap=50,
        allow=Terms(KEY, {"customerId": "cus_1"}, {"amountCents": amount}),
        requester="dashboard:u_1",
    )


STANDING = StandingDeny(
    id="den_" + "x" * 20,
    scope=DenyScope("acme", "issue_credit", SurfaceType.DASHBOARD, "u_1", "dashboard:u_1"),
    approver_team=None,
    approval_id="apv_before",
    created_at=1000.0,
    lifted_at=None,
    lifted_by=None,
)


@given(st.floats(min_value=0, max_value=3000, allow_nan=False))
def test_a_standing_allow_approves_only_numbers_at_most_its_own(amount: float) -> None:
    outcome = weigh(call(amount), Snapshot(allowances=(held(),)))
    assert isinstance(outcome, Admit)
    if amount <= 1500:
        assert outcome.status is ApprovalStatus.APPROVED and outcome.allowance == held()
        assert outcome.decided_by == AllowanceDecider(
            allowanceId=held().id, surface=SurfaceType.DASHBOARD, userId="u_1"
        )
    else:
        assert outcome.status is ApprovalStatus.PENDING and outcome.allowance is None


def test_a_standing_deny_wins_over_a_standing_allow() -> None:
    outcome = weigh(call(10), Snapshot(allowances=(held(),), standing=STANDING))
    assert isinstance(outcome, Admit)
    assert outcome.status is ApprovalStatus.DENIED and outcome.allowance is None


def test_a_policy_deny_or_threshold_decides_first() -> None:
    denied = weigh(call(10, deny=True), Snapshot(allowances=(held(),)))
    assert isinstance(denied, Admit) and denied.status is ApprovalStatus.DENIED and denied.allowance is None
    below = weigh(call(10, threshold="allow_below"), Snapshot(allowances=(held(),)))
    assert isinstance(below, Admit) and below.allowance is None


def test_the_question_asks_for_standing_allows_of_exactly_this_scope_at_now() -> None:
    q = question("acme", call(10), {"type": "dashboard", "userId": "u_1"}, now=2000.0)
    assert q.allowance == Scope("acme", "issue_credit", "dashboard:u_1", KEY) and q.now == 2000.0
    none = question("acme", call(10, threshold="allow_below"), {"type": "dashboard", "userId": "u_1"})
    assert none.allowance is None


STEPPED = """
[tools.pay_invoice]
kind = "write"
confirm = true
allow_for = "1h"

[[tools.pay_invoice.when]]
match = { amountCents = { above = 1000000 } }
then = "ask"
step_up = true

[tenants.acme]
admins = { dashboard = ["u_1"] }
"""


def test_a_call_a_when_block_steps_up_is_never_covered_by_a_standing_allow() -> None:
    # A standing allow granted on a small invoice must not let a large one, whose Approve needs
    # a passkey, through without one.
    policy = load_policy(STEPPED)
    surface = DashboardSurface(type="dashboard", userId="u_2")
    small = rule_on(policy, "acme", "pay_invoice", {"amountCents": 500}, surface, enabled={"dashboard"})
    large = rule_on(policy, "acme", "pay_invoice", {"amountCents": 2_000_000}, surface, enabled={"dashboard"})
    assert not small.rule.step_up and large.rule.step_up
    assert covered_by(small, {"amountCents": 500}, {"amountCents": 500}, "dashboard") is not None
    assert covered_by(large, {"amountCents": 2_000_000}, {"amountCents": 2_000_000}, "dashboard") is None
