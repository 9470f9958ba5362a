"""A tenant's own WhatsApp sender (`whatsapp_from`) and WhatsApp admins (`admins.whatsapp`):
policy errors, and the routes they make."""

from __future__ import annotations

import pytest

from bot.policy import load_policy
from bot.policy.routing import SmsSender, route_for
from contracts.enums import SurfaceType
from contracts.errors import ApprovalModeUnsupported, PolicyError
from contracts.ports import SmsRoute
from contracts.wire import ApiSurface, WhatsAppSurface

ALL = {SurfaceType.SLACK, SurfaceType.SMS, SurfaceType.WHATSAPP, SurfaceType.DASHBOARD}
OPERATOR = SmsSender(whatsapp_from="+15550000100")

POLICY = """
[tools.issue_refund]
kind = "danger"
approvers = ["requester", "tenant_admins"]

[tenants.acme]
whatsapp_from = "+15550000001"
admins = { whatsapp = ["+15550000002"] }

[tenants.acme.headless]
route = "tenant_admins"

[tenants.globex]
admins = { whatsapp = ["+15550000003"] }

[tenants.globex.headless]
route = "tenant_admins"
"""


def route(policy_text: str, tenant: str, surface: object, sms: SmsSender = OPERATOR) -> SmsRoute:
    policy = load_policy(policy_text)
    got = route_for(policy, tenant, policy.rule_for(tenant, "issue_refund"), surface, ALL, sms)
    assert isinstance(got, SmsRoute)
    return got


def test_a_tenants_own_sender_and_admins_make_its_whatsapp_route() -> None:
    # A run started on WhatsApp: sent from the tenant's number, to the requester and admins.
    got = route(POLICY, "acme", WhatsAppSurface(type="whatsapp", phone="+15550000009"))
    assert got.surface is SurfaceType.WHATSAPP and got.from_number == "whatsapp:+15550000001"
    assert got.approvers == ("whatsapp:+15550000009", "whatsapp:+15550000002")
    # A headless run routed to the tenant's admins reaches them on WhatsApp.
    got = route(POLICY, "acme", ApiSurface(type="api"))
    assert got.surface is SurfaceType.WHATSAPP and got.approvers == ("whatsapp:+15550000002",)
    # A tenant without its own sender falls back to the operator's.
    got = route(POLICY, "globex", ApiSurface(type="api"))
    assert got.from_number == "whatsapp:+15550000100" and got.approvers == ("whatsapp:+15550000003",)


def test_without_any_sender_the_refusal_names_both_fixes() -> None:
    with pytest.raises(ApprovalModeUnsupported) as info:
        route(POLICY, "globex", ApiSurface(type="api"), SmsSender())
    assert "tenants.globex.whatsapp_from or TWILIO_WHATSAPP_FROM" in info.value.message


def test_the_tenant_is_found_by_its_whatsapp_sender() -> None:
    policy = load_policy(POLICY)
    assert policy.tenant_for_org(SurfaceType.WHATSAPP, "whatsapp:+15550000001") == "acme"
    assert policy.tenant_for_org(SurfaceType.SMS, "+15550000001") is None


@pytest.mark.parametrize(
    ("section", "path", "words"),
    [
        ('whatsapp_from = "whatsapp:+15550000001"', "tenants.acme.whatsapp_from", ('without "whatsapp:"',)),
        ('whatsapp_from = "555-0001"', "tenants.acme.whatsapp_from", ("E.164",)),
        ("whatsapp_from = 15550000001", "tenants.acme.whatsapp_from", ("E.164",)),
        ('admins = { whatsapp = ["whatsapp:+15550000002"] }', "tenants.acme.admins.whatsapp", ("E.164",)),
        ('admins = { whatsapp = "+15550000002" }', "tenants.acme.admins.whatsapp", ("list",)),
    ],
)
def test_a_malformed_sender_or_admin_number_is_refused_naming_the_key(
    section: str, path: str, words: tuple[str, ...]
) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy(f"[tenants.acme]\n{section}\n")
    problems = info.value.problems
    assert any(p.startswith(f"{path}:") and all(w in p for w in words) for p in problems), problems


def test_two_tenants_cannot_claim_one_whatsapp_sender() -> None:
    with pytest.raises(PolicyError) as info:
        load_policy(
            '[tenants.acme]\nwhatsapp_from = "+15550000001"\n'
            '[tenants.globex]\nwhatsapp_from = "+15550000001"\n'
        )
    assert any("also claimed by" in p and "tenants.globex" in p for p in info.value.problems)
    # One tenant may use the same number for SMS and WhatsApp, as Twilio allows.
    load_policy('[tenants.acme]\nsms_from = "+15550000001"\nwhatsapp_from = "+15550000001"\n')
