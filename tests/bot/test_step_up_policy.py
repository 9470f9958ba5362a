"""`step_up` in the policy file: on a tool, a tenant's override, an operation and a `when`
block; what `policy explain` says of it; and the places `policy check` refuses it."""

from __future__ import annotations

import pytest

from bot.policy import load_policy, rule_on
from contracts.wire import DashboardSurface
from tests.bot.test_policy import REPO, problems_of

BASE = """
[tools.wire]
kind = "danger"
step_up = true

[tools.pay]
kind = "danger"
[[tools.pay.when]]
match = { amountCents = { above = 100000 } }
then = "ask"
step_up = true

[tools.refund]
kind = "danger"

[operations."order.refund"]
url = "https://orders.example/cosigner"
secret_env = "ORDERS_SECRET"
step_up = true

[tenants.acme]
admins = { dashboard = ["ann@acme.example"] }

[tenants.acme.tools.refund]
step_up = true

[tenants.acme.tools.wire]
step_up = false
"""


def test_step_up_is_read_from_a_tool_a_tenant_override_an_operation_and_a_when_block() -> None:
    policy = load_policy(BASE)
    assert policy.rule_for("", "wire").step_up
    assert not policy.rule_for("acme", "wire").step_up  # the tenant turned it off
    assert policy.rule_for("acme", "refund").step_up and not policy.rule_for("", "refund").step_up
    op = policy.operation_rule("acme", "order.refund")
    assert op is not None and op.step_up
    surface = DashboardSurface(type="dashboard", userId="ann@acme.example")
    big = rule_on(policy, "acme", "pay", {"amountCents": 500000}, surface, enabled={"dashboard"})
    small = rule_on(policy, "acme", "pay", {"amountCents": 500}, surface, enabled={"dashboard"})
    assert big.rule.step_up and not small.rule.step_up
    assert big.to_json()["stepUp"] is True and small.to_json()["stepUp"] is False
    assert "[tools.pay.when[0].step_up] true: an Approve counts only once" in big.explain()
    assert "step_up" not in small.explain()


def test_explain_names_the_tenant_override_that_set_step_up() -> None:
    policy = load_policy(BASE)
    surface = DashboardSurface(type="dashboard", userId="ann@acme.example")
    said = rule_on(policy, "acme", "refund", {}, surface, enabled={"dashboard"}).explain()
    assert (
        "[tenants.acme.tools.refund.step_up] true: an Approve counts only once the approver confirms it"
        in said
    )


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('[tools.a]\nkind = "read"\nstep_up = true\n', "tools.a.step_up: a never asks a person"),
        ('[tools.b]\nkind = "write"\nconfirm = true\nstep_up = true\n', "tools.b.step_up: b is in mode ask"),
        (
            '[tools.c]\nkind = "danger"\n[[tools.c.when]]\nmatch = { x = { equals = 1 } }\n'
            'then = "allow"\nstep_up = true\n',
            'tools.c.when[0].step_up: only a block with then = "ask" takes step_up',
        ),
        ('[tools.d]\nkind = "danger"\nstep_up = "yes"\n', "tools.d.step_up:"),
        (
            '[tools.e]\nkind = "danger"\nstep_up = true\n[tools.e.handoff]\nreason = "r"\nsteps = ["s"]\n'
            'expect = { url = "https://app.example/x", secret_env = "APP_SECRET" }\n',
            "tools.e.step_up: a handoff is done or cancelled, never approved",
        ),
    ],
)
def test_step_up_where_no_passkey_could_confirm_an_approve_is_refused(body: str, said: str) -> None:
    found = problems_of(body)
    assert any(p.startswith(said) for p in found), found


def test_the_documented_example_is_a_valid_policy() -> None:
    page = (REPO / "docs" / "policy.md").read_text()
    section = page.split("## Step-up: a passkey for the calls that matter most")[1]
    example = section.split("```toml\n")[1].split("```")[0]
    policy = load_policy(example + '\n[tenants.acme]\nadmins = { dashboard = ["ann@acme.example"] }\n')
    assert policy.rule_for("acme", "wire_funds").step_up
    assert not policy.rule_for("acme", "pay_invoice").step_up  # only its `when` block's outcome
