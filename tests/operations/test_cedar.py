"""Operations on a Cedar policy: `Cosigner::Action::"operation"` on the agent's request decides
whether the application is asked to prepare at all (a real contract application on loopback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import cosigner_app
from tests.operations.application import OPERATION, SECRET, SECRET_ENV, contract_application, policy_for
from tests.operations.test_lifecycle import ALLOW, proposal, propose

SCHEMA = """namespace Cosigner {
  entity Tenant;
  entity Agent in [Tenant];
  entity Tool;
  type Context = {
    parameters: { orderId?: String },
    surface: String,
    requester: String,
    time: Long,
  };
  action "call", "operation" appliesTo { principal: [Agent], resource: [Tool], context: Context };
}
"""

POLICIES = f"""@id("refunds")
@approval("ask_always")
permit (principal, action == Cosigner::Action::"operation", resource == Cosigner::Tool::"{OPERATION}");

@id("frozen-order")
@reason("order ord_0001 is frozen")
forbid (principal, action == Cosigner::Action::"operation", resource)
when {{ context.parameters has orderId && context.parameters.orderId == "ord_0001" }};
"""


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)


async def test_cedar_refuses_an_operation_before_the_application_prepares_it_and_asks_others(
    tmp_path: Path,
) -> None:
    (tmp_path / "agents.cedar").write_text(POLICIES, encoding="utf-8")
    (tmp_path / "agents.cedarschema").write_text(SCHEMA, encoding="utf-8")
    with contract_application() as app:
        toml = f'[cedar]\npolicies = "{tmp_path / "agents.cedar"}"\n' + policy_for(app.url).replace(
            'approvers = ["requester"]\n', ""
        )
        async with cosigner_app(toml, callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            refused = await propose(h, key, proposal(order="ord_0001"))
            assert refused.status_code == 403, refused.text
            err = refused.json()["error"]
            assert (err["code"], err["policy"]) == ("PERMISSION_DENIED", "agents.cedar#frozen-order")
            assert app.shop.calls["prepare"] == 0
            asked = await propose(h, key, proposal(call="c2"))
            assert asked.status_code == 201, asked.text
            assert app.shop.calls["prepare"] == 1


def test_a_deciding_key_of_an_operation_beside_cedar_is_refused(tmp_path: Path) -> None:
    from bot.policy import load_policy
    from contracts.errors import PolicyError

    (tmp_path / "agents.cedar").write_text(POLICIES, encoding="utf-8")
    (tmp_path / "agents.cedarschema").write_text(SCHEMA, encoding="utf-8")
    toml = f'[cedar]\npolicies = "{tmp_path / "agents.cedar"}"\n' + policy_for(
        "https://orders.example/cosigner"
    )
    with pytest.raises(PolicyError) as caught:
        load_policy(toml)
    assert caught.value.problems == [
        f"operations.{OPERATION}.approvers: decided by the Cedar policies named in [cedar]; write it there "
        "(`cosigner policy to-cedar` shows how), or remove [cedar]"
    ]
