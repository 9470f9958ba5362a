"""`editable` and `deny_above` in the policy: what they mean, and where they can never apply."""

from __future__ import annotations

import pytest

from bot.policy.decision import rule_on
from bot.policy.rules import load_policy
from contracts.errors import PolicyError

BASE = """
[tools.issue_refund]
kind = "danger"
redact = ["cardToken", "customer.email"]
editable = ["amountCents", "note"]
deny_above = { parameter = "amountCents", value = 100000 }

[tools.lookup_order]
kind = "read"

[tenants.acme]
slack_team = "T0ACME"

[tenants.acme.tools.issue_refund]
editable = true
"""


def test_editable_is_per_tool_with_tenant_overrides() -> None:
    policy = load_policy(BASE)
    assert policy.rule_for("globex", "issue_refund").editable == ("amountCents", "note")
    acme = policy.rule_for("acme", "issue_refund")
    assert acme.editable is True and acme.origin("editable") == "tenants.acme.tools.issue_refund.editable"
    assert policy.rule_for("acme", "lookup_order").editable is False  # default: not editable


@pytest.mark.parametrize(
    ("section", "says"),
    [
        ('[tools.lookup_order]\nkind = "read"\neditable = ["orderId"]', "never asks a person"),
        (
            '[tools.x]\nkind = "danger"\nredact = ["cardToken"]\neditable = ["cardToken"]',
            "is hidden by tools.x.redact",
        ),
        ('[tools.x]\nkind = "danger"\nredact = ["customer.email"]\neditable = ["customer"]', "is hidden by"),
        ('[tools.x]\nkind = "danger"\neditable = ["apiKey"]', "names a secret"),
        ('[tools.x]\nkind = "danger"\neditable = ["customer.email"]', "top-level parameters"),
        ('[tools.x]\nkind = "danger"\neditable = []', "non-empty list"),
        ('[tools.x]\nkind = "danger"\neditable = "amountCents"', "must be true"),
    ],
)
def test_editable_where_no_edit_can_happen_is_a_policy_error_with_its_key_path(
    section: str, says: str
) -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(section)
    assert says in str(refused.value) and "editable" in str(refused.value)


def test_a_tenant_override_that_hides_an_editable_field_is_refused_at_its_path() -> None:
    text = BASE + '\n[tenants.globex.tools.issue_refund]\nredact = ["note"]\n'
    with pytest.raises(PolicyError, match=r'tools\.issue_refund\.editable: "note" is hidden'):
        load_policy(text)


@pytest.mark.parametrize(
    ("amount", "denied"), [(100000, False), (100001, True), (-5, False), ("lots", False), (99999.5, False)]
)
def test_deny_above_refuses_a_call_over_its_value(amount: object, denied: bool) -> None:
    policy = load_policy(BASE)
    ruling = rule_on(policy, "globex", "issue_refund", {"amountCents": amount}, None, enabled=())
    assert ruling.deny is denied
    if denied:
        assert ruling.decided_by == "tools.issue_refund.deny_above"


def test_deny_above_refuses_keys_that_differ_only_by_case() -> None:
    policy = load_policy(BASE)
    ruling = rule_on(
        policy, "globex", "issue_refund", {"amountCents": 1, "AmountCents": 900000}, None, enabled=()
    )
    assert ruling.deny and "ambiguous" in ruling.explain()
