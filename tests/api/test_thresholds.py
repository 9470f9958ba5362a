"""A threshold compares numbers: a parameter that is no JSON number is refused as invalid
(`400 INVALID_REQUEST` naming the parameter and the rule), never let through, unless the
rule declares `digits = true`, when a string of digits 0-9 is compared as its number."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.policy import ENABLED, load_policy, rule_on
from bot.policy.cases import Case, run_case
from tests.harness import Harness, cosigner_app

POLICY = """
[tools.refund_lite]
kind = "write"
deny_above = { parameter = "amountCents", value = 100000 }

[tools.refund_text]
kind = "write"
deny_above = { parameter = "amountCents", value = 100000, digits = true }

[tools.credit]
kind = "write"
confirm = true
allow_below = { parameter = "amountCents", value = 5000 }

[tools.credit_text]
kind = "write"
confirm = true
allow_below = { parameter = "amountCents", value = 5000, digits = true }

[tools.transfer]
kind = "danger"
deny_above = { parameter = "amount.cents", value = 100000 }

[tools.payout]
kind = "danger"
editable = ["amountCents"]
deny_above = { parameter = "amountCents", value = 100000 }

[tenants.acme]
admins = { dashboard = ["u_1"] }
"""
SURFACE = {"type": "dashboard", "userId": "u_1"}


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, str]]:
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        yield h, await h.create_tenant("acme")


async def ask(h: Harness, key: str, tool: str, params: dict[str, Any], call: str = "c1", **extra: Any) -> Any:
    body = {
        "executionId": "run_1",
        "toolCallId": call,
        "toolName": tool,
        "parameters": {"orderId": "ord_1", **params},
        "surface": SURFACE,
        **extra,
    }
    return await h.client.post("/v1/approvals", json=body, headers=h.auth(key))


def refused_as_invalid(response: Any, rule: str, parameter: str = "amountCents") -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "INVALID_REQUEST", error
    assert (error["field"], error["policy"]) == (f"parameters.{parameter}", rule), error
    message: str = error["message"]
    assert rule in message and "send it as a JSON number" in message, message
    return message


@pytest.mark.parametrize(
    ("amount", "sent"),
    [("5000000", "a string"), (True, "a boolean"), (None, "null"), ({"cents": 5000000}, "an object")],
    ids=["numeric string", "true", "null", "object"],
)
async def test_a_deny_above_parameter_that_is_no_number_is_a_400_and_nothing_runs(
    world: tuple[Harness, str], amount: Any, sent: str
) -> None:
    h, key = world
    message = refused_as_invalid(
        await ask(h, key, "refund_lite", {"amountCents": amount}), "tools.refund_lite.deny_above"
    )
    assert f"parameters.amountCents is {sent}" in message
    if isinstance(amount, str):
        assert "digits = true in tools.refund_lite.deny_above" in message
        assert amount not in message, "the value sent is never echoed"
    # Nothing was stored: the same ids make a new call once it is sent right.
    over = await ask(h, key, "refund_lite", {"amountCents": 5000000})
    assert over.status_code == 403 and over.json()["error"]["code"] == "PERMISSION_DENIED", over.text
    within = await ask(h, key, "refund_lite", {"amountCents": 5000}, call="c2")
    assert within.status_code == 200 and within.json()["status"] == "approved", within.text


async def test_an_absent_deny_above_parameter_is_not_refused_by_it(world: tuple[Harness, str]) -> None:
    h, key = world
    r = await ask(h, key, "refund_lite", {})
    assert r.status_code == 200 and r.json()["status"] == "approved", r.text


@pytest.mark.parametrize(
    ("tool", "params", "sent", "rule"),
    [
        ("refund_lite", {"AmountCents": 5000000}, "AmountCents", "tools.refund_lite.deny_above"),
        (
            "refund_lite",
            {"ａｍｏｕｎｔＣｅｎｔｓ": 5000000},
            "ａｍｏｕｎｔＣｅｎｔｓ",
            "tools.refund_lite.deny_above",
        ),
        ("transfer", {"Amount": {"cents": 5000000}}, "Amount", "tools.transfer.deny_above"),
        ("transfer", {"amount": {"Cents": 5000000}}, "amount.Cents", "tools.transfer.deny_above"),
        ("credit", {"amountcents": 10}, "amountcents", "tools.credit.allow_below"),
    ],
    ids=["case", "width", "nested outer", "nested inner", "allow_below"],
)
async def test_a_threshold_parameter_spelled_only_otherwise_is_a_400_and_nothing_runs(
    world: tuple[Harness, str], tool: str, params: dict[str, Any], sent: str, rule: str
) -> None:
    # An executor that folds case would read the amount the threshold never saw.
    h, key = world
    parameter = "amount.cents" if tool == "transfer" else "amountCents"
    r = await ask(h, key, tool, params)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert (error["code"], error["field"], error["policy"]) == (
        "INVALID_REQUEST",
        f"parameters.{parameter}",
        rule,
    ), error
    assert f"parameters.{sent} differs from parameters.{parameter}" in error["message"], error
    assert f"send it as {parameter}" in error["message"], error
    assert "5000000" not in error["message"]


async def test_declared_digits_are_compared_as_the_number_they_spell(world: tuple[Harness, str]) -> None:
    h, key = world
    over = await ask(h, key, "refund_text", {"amountCents": "5000000"})
    assert over.status_code == 403, over.text
    error = over.json()["error"]
    assert error["code"] == "PERMISSION_DENIED" and "tools.refund_text.deny_above" in error["message"]
    assert "amountCents 5e+06 > 100000" in error["message"]
    huge = await ask(h, key, "refund_text", {"amountCents": "9" * 5000}, call="c2")
    assert huge.status_code == 403, huge.text
    within = await ask(h, key, "refund_text", {"amountCents": "0004000"}, call="c3")
    assert within.status_code == 200 and within.json()["status"] == "approved", within.text
    as_number = await ask(h, key, "refund_text", {"amountCents": 100001}, call="c4")
    assert as_number.status_code == 403, as_number.text
    for i, amount in enumerate(["-5", "5000.5", " 5000", "5e9", "５０００", "٥٠٠٠", "", True]):
        message = refused_as_invalid(
            await ask(h, key, "refund_text", {"amountCents": amount}, call=f"bad{i}"),
            "tools.refund_text.deny_above",
        )
        assert "or a string of digits 0-9 (no sign, point or spaces)" in message


async def test_allow_below_lets_no_numeric_string_through(world: tuple[Harness, str]) -> None:
    h, key = world
    small = await ask(h, key, "credit", {"amountCents": 10})
    assert small.status_code == 200 and "allow_below" in small.json()["decidedBy"]["rule"], small.text
    for i, amount in enumerate(["10", False, None]):
        refused_as_invalid(
            await ask(h, key, "credit", {"amountCents": amount}, call=f"s{i}"), "tools.credit.allow_below"
        )
    declared = await ask(h, key, "credit_text", {"amountCents": "10"}, call="d1")
    assert declared.status_code == 200, declared.text
    assert declared.json()["decidedBy"]["rule"] == "tools.credit_text.allow_below (amountCents < 5000)"
    large = await ask(h, key, "credit_text", {"amountCents": "7000"}, call="d2")
    assert large.status_code == 201 and large.json()["status"] == "pending", "above it a person is asked"
    absent = await ask(h, key, "credit", {}, call="a1")
    assert absent.status_code == 201, "without the parameter a person is asked"


async def test_a_nested_threshold_parameter_is_checked_alike(world: tuple[Harness, str]) -> None:
    h, key = world
    refused_as_invalid(
        await ask(h, key, "transfer", {"amount": {"cents": "5000000"}}),
        "tools.transfer.deny_above",
        parameter="amount.cents",
    )


async def test_an_edit_into_a_string_is_refused_like_the_call(world: tuple[Harness, str]) -> None:
    h, key = world
    schema = {"type": "object", "properties": {"amountCents": {"type": ["integer", "string"]}}}
    start = await ask(h, key, "payout", {"amountCents": 40000}, acceptsEdits=True, parametersSchema=schema)
    assert start.status_code == 201 and start.json()["editable"] == ["amountCents"], start.text
    aid = start.json()["approvalId"]
    edited = await h.client.post(
        f"/v1/approvals/{aid}/decision",
        json={"decision": "approve", "userId": "u_1", "edit": {"amountCents": "5000000"}},
        headers=h.auth(h.approver_key()),
    )
    assert edited.status_code == 400, edited.text
    error = edited.json()["error"]
    assert error["code"] == "INVALID_REQUEST" and "tools.payout.deny_above" in error["message"]
    assert error["problems"][0]["field"] == "amountCents"
    still = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))
    assert still.json()["status"] == "pending"


def test_explain_and_policy_test_say_invalid() -> None:
    policy = load_policy(POLICY)
    ruling = rule_on(policy, "acme", "refund_lite", {"amountCents": "5000000"}, None, enabled=ENABLED)
    assert ruling.label == "invalid" and not ruling.runs_unasked and not ruling.deny
    assert ruling.to_json()["decision"] == "invalid"
    assert "refused as invalid (400 INVALID_REQUEST), by tools.refund_lite.deny_above" in ruling.explain()
    case = {"name": "text", "tenant": "acme", "tool": "refund_lite", "params": {"amountCents": "5"}}
    failed = run_case(policy, Case.model_validate({**case, "expect": {"mode": "none"}}))
    assert failed.failures[0].startswith("the call is refused as invalid (400): parameters.amountCents")
    passed = run_case(policy, Case.model_validate({**case, "expect": {"invalid": True}}))
    assert passed.failures == ()


@pytest.mark.parametrize("digits", ['"yes"', "1"])
def test_digits_must_be_true_or_false(digits: str) -> None:
    from contracts.errors import PolicyError

    toml = f'[tools.x]\nkind = "write"\ndeny_above = {{ parameter = "a", value = 1, digits = {digits} }}\n'
    with pytest.raises(PolicyError) as refused:
        load_policy(toml)
    assert refused.value.problems == ["tools.x.deny_above.digits: must be true or false"]


def test_replay_counts_a_redacted_threshold_parameter_as_absent() -> None:
    """The audit record keeps parameters as shown: a redacted amount is unknown, not a string."""
    from bot.policy.replay import unhidden

    policy = load_policy(POLICY)
    recorded = {"orderId": "ord_1", "amount": {"cents": "[REDACTED]"}}
    params = unhidden(policy, "acme", "transfer", recorded)
    assert params == {"orderId": "ord_1", "amount": {}} and recorded["amount"] == {"cents": "[REDACTED]"}
    assert rule_on(policy, "acme", "transfer", params, None, enabled=ENABLED).invalid is None
    sent = {"amount": {"cents": "5000000"}}
    assert unhidden(policy, "acme", "transfer", sent) is sent, "a string the agent sent stays one"
