"""The scope an Always deny covers, and where it is not offered at all."""

from __future__ import annotations

from contracts.denials import Scope, requester_of, scope_of
from contracts.enums import ApprovalMode, SurfaceType
from contracts.ports import DashboardRoute, SlackRoute, SmsRoute

SLACK_RUN = {"type": "slack", "teamId": "T1", "channelId": "C1", "userId": "U1"}


def slack_route(*approvers: str) -> SlackRoute:
    return SlackRoute(SurfaceType.SLACK, "T1", None, "C1", None, approvers, ("T1",), "U1")


def test_the_requester_approving_their_own_run_is_the_common_case() -> None:
    scope = scope_of("acme", "issue_refund", ApprovalMode.ASK_ALWAYS, slack_route("U1"), SLACK_RUN)
    assert scope == Scope("acme", "issue_refund", SurfaceType.SLACK, "U1", "slack:U1")


def test_one_admin_for_one_requester_covers_only_that_requesters_runs() -> None:
    scope = scope_of("acme", "issue_refund", ApprovalMode.ASK, slack_route("U0ADMIN"), SLACK_RUN)
    assert scope is not None and (scope.approver, scope.requester) == ("U0ADMIN", "slack:U1")


def test_not_offered_without_one_approver_and_an_identified_requester() -> None:
    rule = ("acme", "issue_refund")
    assert scope_of(*rule, ApprovalMode.NONE, slack_route("U1"), SLACK_RUN) is None
    assert scope_of(*rule, ApprovalMode.ASK_ALWAYS, None, SLACK_RUN) is None
    assert scope_of(*rule, ApprovalMode.ASK_ALWAYS, slack_route("U1", "U0ADMIN"), SLACK_RUN) is None
    admins = DashboardRoute(SurfaceType.DASHBOARD, ("u_admin",))
    for headless in ({"type": "schedule"}, {"type": "api"}, {"type": "web_widget", "tokenKind": "client"}):
        assert scope_of(*rule, ApprovalMode.ASK_ALWAYS, admins, headless) is None


def test_requesters_are_named_by_surface_and_id() -> None:
    assert requester_of({"type": "sms", "phone": "+15550000002"}) == "sms:+15550000002"
    assert requester_of({"type": "dashboard", "userId": "u_1"}) == "dashboard:u_1"
    assert requester_of({"type": "batch"}) is None
    sms = SmsRoute(SurfaceType.SMS, "+15550000001", None, ("+15550000002",))
    run = {"type": "sms", "phone": "+15550000002"}
    scope = scope_of("acme", "t", ApprovalMode.ASK_ALWAYS, sms, run)
    assert scope is not None and scope.surface is SurfaceType.SMS
