"""The intake decision, without a database: every combination of call and snapshot.

`bot.approvals.intake.weigh` is pure, so Hypothesis walks its whole input space (earlier call,
policy deny, mode, threshold, route or refusal, count against the cap, run grant, standing
deny) and each answer is checked against the rules the API promises.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.approvals.intake import Admit, Call, Refuse, Replay, question, weigh
from contracts.answers import PolicyDecider
from contracts.denials import Scope
from contracts.enums import ApprovalMode, ApprovalStatus, SurfaceType, ToolKind
from contracts.errors import ApprovalModeUnsupported, ParametersMismatch, ToolCallCapExceeded
from contracts.ports import DashboardRoute, SlackRoute
from contracts.wire import DashboardSurface
from storage.denials import StandingDeny
from storage.intake import RunGrant, Snapshot
from storage.records import Record

DIGEST = "sha256:" + "a" * 64
DASHBOARD = DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=("u_1",))
SLACK = SlackRoute(
    surface=SurfaceType.SLACK,
    team_id="T1",
    enterprise_id=None,
    channel_id="C1",
    thread_ts=None,
    approvers=("U1",),
    approver_teams=("T1",),
)
UNSUPPORTED = ApprovalModeUnsupported("nobody can be asked on this surface")
STANDING = StandingDeny(
    id="den_" + "x" * 20,
    scope=Scope("acme", "issue_refund", SurfaceType.DASHBOARD, "u_1", "dashboard:u_2"),
    approver_team=None,
    approval_id="apv_before",
    created_at=1000.0,
    lifted_at=None,
    lifted_by=None,
)


def earlier(tool: str, digest: str) -> Record:
    return Record(
        id="apv_earlier",
        tenant="acme",
        execution_id="run_1",
        tool_call_id="call_1",
        tool_name=tool,
        kind=ToolKind.WRITE,
        mode=ApprovalMode.ASK,
        status=ApprovalStatus.PENDING,
        parameters={},
        digest=digest,
        reason=None,
        surface=DashboardSurface(type="dashboard", userId="u_2"),
        route=DASHBOARD,
        delivered=None,
        short_code="1234",
        policy_rule="tools.issue_refund",
        callback_url=None,
        created_at=1000.0,
        expires_at=2000.0,
        decided_at=None,
        decided_by=None,
        comment=None,
        audit_seq=1,
        audit_head="0" * 64,
    )


calls = st.builds(
    Call,
    tool_name=st.just("issue_refund"),
    digest=st.just(DIGEST),
    execution_id=st.just("run_1"),
    tool_call_id=st.just("call_1"),
    mode=st.sampled_from(ApprovalMode),
    kind=st.sampled_from([k.value for k in ToolKind]),
    deny=st.booleans(),
    rule_path=st.just("tools.issue_refund"),
    threshold=st.sampled_from([None, "tools.issue_refund.allow_below.amount"]),
    routed=st.sampled_from([None, DASHBOARD, SLACK, UNSUPPORTED]),
    cap=st.integers(0, 3),
)
snapshots = st.builds(
    Snapshot,
    earlier=st.sampled_from(
        [
            None,
            earlier("issue_refund", DIGEST),
            earlier("issue_refund", "sha256:" + "b" * 64),
            earlier("other", DIGEST),
        ]
    ),
    gated=st.integers(0, 4),
    grant=st.sampled_from([None, RunGrant("apv_granting", "dashboard:u_1")]),
    standing=st.sampled_from([None, STANDING]),
)


@settings(max_examples=2000, deadline=None)
@given(calls, snapshots)
def test_every_call_is_replayed_refused_or_admitted_as_the_rules_say(call: Call, snap: Snapshot) -> None:
    out = weigh(call, snap)
    asks = not call.deny and call.mode is not ApprovalMode.NONE
    # An earlier call with these ids decides alone: replayed when it is the same call.
    if snap.earlier is not None:
        same = snap.earlier.digest == call.digest and snap.earlier.tool_name == call.tool_name
        if same:
            assert out == Replay(snap.earlier)
        else:
            assert isinstance(out, Refuse) and isinstance(out.error, ParametersMismatch)
            assert out.error.details["approvalId"] == "apv_earlier"
        return
    if isinstance(out, Replay):
        raise AssertionError("a replay without an earlier call")
    if isinstance(out, Refuse):
        # Refused only over the cap, or when a person is needed and none can be reached.
        assert asks and snap.standing is None
        if isinstance(out.error, ToolCallCapExceeded):
            assert snap.gated >= call.cap
        else:
            assert out.error is UNSUPPORTED and call.routed is UNSUPPORTED and snap.gated < call.cap
            assert call.threshold is None and not (call.mode is ApprovalMode.ASK and snap.grant)
        return
    assert isinstance(out, Admit)
    # Only a pending approval has a route, and it is the one the policy found.
    assert out.route is None or out.status is ApprovalStatus.PENDING
    assert (out.decided_by is None) == (out.status is ApprovalStatus.PENDING)
    if out.status is ApprovalStatus.PENDING:
        assert asks and out.route is call.routed and snap.standing is None and snap.gated < call.cap
        assert call.threshold is None and not (call.mode is ApprovalMode.ASK and snap.grant)
    if call.deny:
        assert out == Admit(ApprovalStatus.DENIED, PolicyDecider(rule="tools.issue_refund"), None)
    elif call.mode is ApprovalMode.NONE:
        assert out.status is ApprovalStatus.APPROVED
        assert out.decided_by == PolicyDecider(rule=f"tools.issue_refund: {call.kind} → none")
    elif snap.standing is not None:
        # A person's standing no is never turned into a yes, whatever the threshold or grant.
        assert out.status is ApprovalStatus.DENIED and out.standing is snap.standing
        assert isinstance(out.decided_by, PolicyDecider) and STANDING.id in out.decided_by.rule
    else:
        assert snap.gated < call.cap
        if call.threshold is not None:
            assert out.decided_by == PolicyDecider(rule=call.threshold)
        elif call.mode is ApprovalMode.ASK and snap.grant is not None:
            assert out.status is ApprovalStatus.APPROVED
            assert out.decided_by == PolicyDecider(
                rule="approved for this run by dashboard:u_1 (apv_granting)"
            )


@settings(max_examples=500, deadline=None)
@given(calls)
def test_the_question_asks_only_what_the_decision_reads(call: Call) -> None:
    surface: dict[str, Any] = {"type": "dashboard", "userId": "u_2"}
    q = question("acme", call, surface)
    asks = not call.deny and call.mode is not ApprovalMode.NONE
    assert (q.tenant, q.execution_id, q.tool_call_id) == ("acme", "run_1", "call_1")
    assert q.count == asks
    wants_grant = asks and call.threshold is None and call.mode is ApprovalMode.ASK
    assert (q.grant is not None) == wants_grant
    if q.grant is not None:
        assert q.grant == ("issue_refund", "dashboard:u_2")
    if q.scope is not None:
        # Only a request that would be asked somewhere can be covered by a standing deny.
        assert not call.deny and call.routed in (DASHBOARD, SLACK)
