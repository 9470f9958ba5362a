"""`admins.email` and `[staff] email`: who is told by email, and each bad value refused by name."""

from __future__ import annotations

import pytest

from bot.policy import load_policy
from bot.policy.routing import SmsSender, route_for, route_to
from bot.settings import Settings, SettingsError, load_settings
from contracts.enums import ApproverKind, SurfaceType
from contracts.errors import ApprovalModeUnsupported, PolicyError
from contracts.ports import DashboardRoute
from contracts.reach import carrier, delivered_by_worker
from contracts.wire import DashboardSurface, SlackSurface

POLICY = """
[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]

[tenants.acme]
admins = { email = ["ada@acme.example"], dashboard = ["u_42"] }

[staff]
email = ["ops@operator.example"]
"""
ON = {SurfaceType.DASHBOARD, "email"}
ASKER = DashboardSurface(type="dashboard", userId="u_1")


def test_admins_told_by_email_are_a_dashboard_route_with_their_addresses() -> None:
    policy = load_policy(POLICY)
    route = route_for(policy, "acme", policy.rule_for("acme", "issue_refund"), ASKER, ON, SmsSender())
    assert route == DashboardRoute(
        surface=SurfaceType.DASHBOARD, approvers=("u_42", "ada@acme.example"), email=("ada@acme.example",)
    )
    assert carrier(route) == "email" and delivered_by_worker(route)
    staff = route_to(policy, "acme", ApproverKind.STAFF, ASKER, ON, SmsSender())
    assert isinstance(staff, DashboardRoute) and staff.email == ("ops@operator.example",)


def test_without_smtp_the_addresses_are_not_emailed_and_a_route_of_them_alone_is_refused() -> None:
    policy = load_policy(POLICY)
    route = route_for(
        policy, "acme", policy.rule_for("acme", "issue_refund"), ASKER, {SurfaceType.DASHBOARD}, SmsSender()
    )
    # The tenant's app and the inbox still list it for its admins; nobody is told by email.
    assert route == DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=("u_42", "ada@acme.example"))
    assert carrier(route) == "dashboard" and not delivered_by_worker(route)
    only_email = load_policy(POLICY.replace(', dashboard = ["u_42"]', ""))
    slack = SlackSurface(type="slack", teamId="T1", channelId="C1", userId="U1")
    with pytest.raises(ApprovalModeUnsupported) as refused:
        route_for(only_email, "acme", only_email.rule_for("acme", "issue_refund"), slack, set(), SmsSender())
    assert "set COSIGNER_SMTP_URL and COSIGNER_SMTP_FROM" in refused.value.message


@pytest.mark.parametrize(
    "bad",
    [
        '"Ada <ada@acme.example>"',
        '"ada@acme.example, eve@evil.example"',
        '"ada"',
        '"ada@acme.example\\nBcc: x@y.z"',
    ],
)
def test_an_address_that_is_not_one_plain_address_is_refused_by_its_key(bad: str) -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(POLICY.replace('email = ["ada@acme.example"]', f"email = [{bad}]"))
    assert "tenants.acme.admins.email" in str(refused.value)
    assert 'write it as "alice@acme.example"' in str(refused.value)


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"COSIGNER_SMTP_URL": "http://user:hunter22@mail.example.com"}, "smtp://HOST[:PORT] (STARTTLS)"),
        ({"COSIGNER_SMTP_URL": "smtp://"}, "smtp://HOST[:PORT] (STARTTLS)"),
        ({"COSIGNER_SMTP_FROM": "Cosigner <c@acme.example>"}, "must be one email address"),
    ],
)
def test_a_bad_smtp_setting_names_the_variable_and_quotes_no_password(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], names: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert next(iter(env)) in str(refused.value) and names in str(refused.value)
    assert "hunter22" not in str(refused.value)


def test_email_is_on_with_both_settings_only() -> None:
    assert Settings(smtp_url="smtps://mail.example.com", smtp_from="c@acme.example").email_enabled
    assert not Settings(smtp_url="smtps://mail.example.com").email_enabled
