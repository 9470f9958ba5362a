"""The one policy merge: tools and operations read a tenant's override over the file alike."""

from __future__ import annotations

from bot.policy.merge import Layers
from bot.policy.rules import load_policy
from bot.policy.schema import ToolSection

POLICY = """
[tools.issue_refund]
kind = "write"
timeout = "300s"
redact = ["cardToken"]

[operations.refund]
url = "https://shop.example/cosigner"
secret_env = "SHOP_SECRET"
kind = "write"
timeout = "300s"
redact = ["cardToken"]

[tenants.acme.tools.issue_refund]
timeout = "60s"
redact = ["customer.email"]

[tenants.acme.operations.refund]
timeout = "60s"
redact = ["customer.email"]
"""


def test_a_tool_and_an_operation_merge_their_tenant_override_the_same_way() -> None:
    policy = load_policy(POLICY)
    tool = policy.rule_for("acme", "issue_refund")
    operation = policy.operation_rule("acme", "refund")
    assert operation is not None
    assert (tool.timeout, tool.kind, tool.redact) == (60, operation.kind, operation.redact)
    assert operation.timeout == 60 and operation.redact == ("cardToken", "customer.email")
    # A key the override leaves unset is the file's, for both.
    other = policy.rule_for("other", "issue_refund")
    assert other.timeout == 300 and policy.operation_rule("other", "refund").timeout == 300  # type: ignore[union-attr]


def test_the_first_section_that_sets_a_key_decides_and_is_named_as_its_origin() -> None:
    over = ToolSection.model_validate({"kind": "write", "timeout": "60s"})
    base = ToolSection.model_validate({"kind": "read", "timeout": "300s", "deny": True})
    layers = Layers((over, "tenants.acme.tools.t"), (None, "nowhere"), (base, "tools.t"))
    assert layers.pick("timeout", None) == over.timeout
    assert layers.pick("deny", False) is True
    assert layers.pick("confirm", "default") == "default"
    assert layers.origins == {"timeout": "tenants.acme.tools.t", "deny": "tools.t"}
