"""`approvers = ["email"]`: the tenant's `admins.email` asked by email, each bad use refused by name."""

from __future__ import annotations

import pytest

from bot.policy import load_policy
from bot.policy.routing import SmsSender, route_for, route_to
from contracts.enums import ApproverKind, SurfaceType
from contracts.errors import ApprovalModeUnsupported, PolicyError
from contracts.ports import DashboardRoute
from contracts.reach import carrier
from contracts.wire import DashboardSurface, SlackSurface

ADA, CY = "ada@acme.example", "cy@acme.example"
POLICY = f"""
[tools.issue_refund]
kind = "danger"
approvers = ["email"]

[tenants.acme]
admins = {{ email = ["{ADA}"], dashboard = ["u_42"] }}
"""
ON = {SurfaceType.DASHBOARD, "email"}
ASKER = DashboardSurface(type="dashboard", userId="u_1")


def test_email_is_a_route_of_the_tenants_addresses_alone_answered_in_the_inbox() -> None:
    policy = load_policy(POLICY)
    route = route_for(policy, "acme", policy.rule_for("acme", "issue_refund"), ASKER, ON, SmsSender())
    # The dashboard's ids are not asked: `email` names the addresses, each emailed.
    assert route == DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=(ADA,), email=(ADA,))
    assert carrier(route) == "email"
    slack = SlackSurface(type="slack", teamId="T1", channelId="C1", userId="U1")
    assert route_for(policy, "acme", policy.rule_for("acme", "issue_refund"), slack, ON, SmsSender()) == route


def test_email_beside_tenant_admins_adds_the_addresses_where_the_admins_answer() -> None:
    policy = load_policy(POLICY.replace('["email"]', '["tenant_admins", "email"]'))
    route = route_for(policy, "acme", policy.rule_for("acme", "issue_refund"), ASKER, ON, SmsSender())
    assert route == DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=("u_42", ADA), email=(ADA,))


def test_without_smtp_an_email_route_is_refused_at_create_naming_the_variables() -> None:
    policy = load_policy(POLICY)
    with pytest.raises(ApprovalModeUnsupported) as refused:
        route_for(policy, "acme", policy.rule_for("acme", "issue_refund"), ASKER, {"dashboard"}, SmsSender())
    assert "set COSIGNER_SMTP_URL and COSIGNER_SMTP_FROM" in refused.value.message
    # A tenant without a section lists no addresses: refused, naming the key to set.
    unnamed = route_to(policy, "globex", ApproverKind.EMAIL, ASKER, ON, SmsSender())
    assert isinstance(unnamed, list) and "tenants.globex.admins.email" in unnamed[0]


@pytest.mark.parametrize(
    ("policy", "path"),
    [
        (POLICY.replace(f'email = ["{ADA}"], ', ""), "tools.issue_refund.approvers"),
        (
            POLICY.replace(f'email = ["{ADA}"], ', "").replace(
                '["email"]', '["requester"]\nescalate = [{ after = "1m", to = "email" }]'
            ),
            "tools.issue_refund.escalate[0].to",
        ),
        (
            POLICY.replace(f'email = ["{ADA}"], ', "") + '\n[tenants.acme.headless]\nroute = "email"\n',
            "tenants.acme.headless.route",
        ),
        (
            POLICY.replace('["email"]', '["requester"]')
            + '\n[tenants.beta]\n[tenants.beta.tools.issue_refund]\napprovers = ["email"]\n',
            "tenants.beta.tools.issue_refund.approvers",
        ),
    ],
)
def test_a_tenant_without_addresses_cannot_be_asked_by_email(policy: str, path: str) -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(policy)
    said = str(refused.value)
    assert f'{path}: names "email"' in said and "admins.email lists nobody" in said
    assert "add admins = { email = [" in said


def test_an_unknown_approver_names_email_among_the_choices() -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(POLICY.replace('["email"]', '["mail"]'))
    assert (
        '"mail" is not an approver; use "requester", "tenant_admins", "staff", "email" or an on-call'
        in str(refused.value)
    )


def test_a_quorum_of_email_counts_the_tenants_addresses() -> None:
    two = POLICY.replace('approvers = ["email"]', 'approvers = ["email"]\nquorum = 2')
    with pytest.raises(PolicyError) as refused:
        load_policy(two)
    assert "quorum 2 is more than the 1 distinct approver" in str(refused.value)
    load_policy(two.replace(f'email = ["{ADA}"]', f'email = ["{ADA}", "{CY}"]'))


NOTIFY = POLICY.replace('approvers = ["email"]', 'approvers = ["tenant_admins"]\nnotify = ["email"]')


def test_notify_email_is_kept_on_the_rule_beside_its_route() -> None:
    policy = load_policy(NOTIFY)
    rule = policy.rule_for("acme", "issue_refund")
    assert rule.notify == ("email",) and rule.approvers == (ApproverKind.TENANT_ADMINS,)


@pytest.mark.parametrize(
    ("notify", "said"),
    [
        ('["slack"]', '"slack" is not a channel to notify; use "email"'),
        ('["push"]', '"push" is not a channel to notify; use "email"'),
        ('["email", "email"]', '"email" is listed twice; name each channel once'),
        ('"email"', 'must be a list, e.g. ["email"]'),
    ],
)
def test_a_bad_notify_is_refused_by_its_key(notify: str, said: str) -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(NOTIFY.replace('notify = ["email"]', f"notify = {notify}"))
    assert f"tools.issue_refund.notify: {said}" in str(refused.value)


def test_notify_email_where_the_route_is_email_already_is_refused() -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(NOTIFY.replace('approvers = ["tenant_admins"]', 'approvers = ["email"]'))
    said = str(refused.value)
    assert 'tools.issue_refund.notify: "email" is how this request is asked already' in said
    assert 'remove "email" from notify' in said


def test_notify_email_for_a_tenant_without_addresses_is_refused() -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(NOTIFY.replace(f'email = ["{ADA}"], ', ""))
    assert 'tools.issue_refund.notify: names "email", and tenants.acme.admins.email lists nobody' in str(
        refused.value
    )


def test_a_notice_skips_the_addresses_the_route_emails_already() -> None:
    from bot.workers.notices import to_notify

    policy = load_policy(NOTIFY)
    # Asked from the dashboard, acme's admins are the inbox's, its address emailed by the route:
    route = route_for(policy, "acme", policy.rule_for("acme", "issue_refund"), ASKER, ON, SmsSender())
    assert isinstance(route, DashboardRoute) and route.email == (ADA,)
    assert to_notify(route, (ADA, CY)) == (CY,)
    assert to_notify(DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=("u_1",)), (ADA,)) == (ADA,)
