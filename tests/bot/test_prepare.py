"""The pure intake (`bot.approvals.prepare`): what a request becomes before anything is
stored, decided from plain data alone (no database, no clock, no seal drawn inside)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.approvals.prepare import NO_HANDOFFS, Given, Prepared, Sealed, needs_on_call, prepare, rule_of
from bot.policy import ENABLED, json_limits, load_policy, redact
from bot.policy.rules import Policy
from contracts.digest import digest_of_canonical
from contracts.errors import CosignerError, InvalidRequest
from contracts.wire import ApprovalRequest
from storage.operations import OperationRecord

POLICY = """
[tools.pay]
kind = "danger"
approvers = ["requester"]
redact = ["cardToken"]
editable = ["amountCents", "note"]
deny_above = { parameter = "amountCents", value = 100000 }

[tools.lookup]
kind = "read"

[tools.publish]
kind = "danger"
approvers = ["requester"]
[tools.publish.handoff]
reason = "Publishing needs the owner's code"
steps = ["Open Settings", "Enter the code"]
expect = { url = "https://app.example/expect", secret_env = "APP_SECRET" }

[tenants.acme]
admins = { dashboard = ["u_1", "u_2"] }
"""

SHADOW = POLICY.replace('editable = ["amountCents", "note"]\n', "").replace(
    '[tools.pay]\nkind = "danger"', '[tools.pay]\nkind = "read"'
)
NOW = 1_700_000_000.0


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy(POLICY)


def request(tool: str = "pay", params: dict[str, Any] | None = None, **extra: Any) -> ApprovalRequest:
    return ApprovalRequest.model_validate(
        {
            "executionId": "run_1",
            "toolCallId": "call_1",
            "toolName": tool,
            "parameters": {"amountCents": 500, "cardToken": "tok_abc"} if params is None else params,
            "surface": {"type": "dashboard", "userId": "u_1"},
            **extra,
        }
    )


def prepared(policy: Policy, req: ApprovalRequest, **given: Any) -> Prepared:
    return prepare(Given("acme", req, policy, NOW, surfaces=ENABLED, **given))


def test_the_intake_carries_the_digest_of_the_call_and_shows_it_redacted(policy: Policy) -> None:
    req = request(reason="the card is tok_abc, password=hunter2hunter2")
    out = prepared(policy, req).intake
    assert out.call.digest == digest_of_canonical(json_limits(req.parameters))
    assert out.shown == redact(req.parameters, ["cardToken"]) and out.shown["cardToken"] != "tok_abc"
    assert out.req.reason == redact(req.reason)
    assert out.coalesce is not None and out.handoff is None and out.contract is None


def test_a_call_the_policy_cannot_read_is_refused_before_anything_is_stored(policy: Policy) -> None:
    with pytest.raises(InvalidRequest) as caught:
        prepared(policy, request(params={"amountCents": "12"}))
    assert caught.value.details["field"] == "parameters.amountCents"


def test_a_handoff_needs_its_parameters_sealed_beforehand(policy: Policy) -> None:
    req = request("publish", {"site": "main"})
    with pytest.raises(InvalidRequest, match=NO_HANDOFFS):
        prepared(policy, req)
    out = prepared(policy, req, sealed=Sealed(handoff="sealed:h")).intake
    assert out.handoff is not None and out.handoff.sealed == "sealed:h"
    assert list(out.handoff.steps) == ["Open Settings", "Enter the code"]
    assert out.coalesce is None, "a handoff is never coalesced with a twin"


def test_an_edit_of_a_call_shown_redacted_is_offered_only_with_its_parameters_sealed(policy: Policy) -> None:
    req = request(acceptsEdits=True)
    assert prepared(policy, req).intake.edit is None
    edit = prepared(policy, req, sealed=Sealed(edit="sealed:e")).intake.edit
    assert edit is not None and edit.sealed == "sealed:e" and set(edit.fields) == {"amountCents"}
    plain = prepared(policy, request(params={"amountCents": 5, "note": "x"}, acceptsEdits=True)).intake.edit
    assert plain is not None and plain.sealed is None, "nothing hidden: nothing sealed is needed"


def test_an_operation_is_neither_coalesced_nor_offered_for_edit(policy: Policy) -> None:
    contract = OperationRecord(
        name="pay",
        sealed_arguments="sealed:a",
        preview={},
        arguments_digest="d" * 64,
        url="https://app.example/op",
        secret_env="APP_SECRET",
        execute_timeout=10,
    )
    rule = rule_of(policy, "acme", request(), None)
    out = prepared(
        policy, request(acceptsEdits=True), rule=rule, contract=contract, sealed=Sealed(edit="sealed:e")
    ).intake
    assert out.coalesce is None and out.edit is None and out.contract is contract


def test_the_shadow_policy_is_decided_alongside_only_for_a_tool_call(policy: Policy) -> None:
    shadow = load_policy(SHADOW)
    out = prepared(policy, request(), shadow=shadow)
    assert out.intake.shadow is not None and out.shadow_failed is None
    assert out.ruling.decided_by == out.intake.call.rule_path  # the live ruling stands
    own = prepared(policy, request(), shadow=shadow, rule=rule_of(policy, "acme", request(), None))
    assert own.intake.shadow is None


def test_on_call_is_looked_up_only_where_a_person_would_be_asked(policy: Policy) -> None:
    assert not needs_on_call(rule_of(policy, "acme", request(), None))  # names no rotation
    assert not needs_on_call(rule_of(policy, "acme", request("lookup", {}), None))


values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["pay", "lookup", "unknown_tool"]),
    st.dictionaries(st.text(min_size=1, max_size=8), values, max_size=4),
    st.booleans(),
)
def test_prepare_is_a_function_of_its_inputs(tool: str, params: dict[str, Any], edits: bool) -> None:
    """The same plain data in, the same intake out (or the same refusal); the digest is of
    the call's content, whatever the order of its keys; what is shown has the call's keys."""
    policy = load_policy(POLICY)
    req = request(tool, params, acceptsEdits=edits)
    swapped = request(tool, dict(reversed(list(params.items()))), acceptsEdits=edits)
    outcomes: list[Prepared | type[CosignerError]] = []
    for r in (req, req, swapped):
        try:
            outcomes.append(prepared(policy, r, sealed=Sealed(edit="sealed:e")))
        except CosignerError as exc:
            outcomes.append(type(exc))
    first, again, other = outcomes
    if isinstance(first, Prepared):
        assert isinstance(again, Prepared) and isinstance(other, Prepared)
        assert first.intake == again.intake and first.ruling == again.ruling
        assert first.intake.call.digest == other.intake.call.digest
        assert set(first.intake.shown) == set(params)
        assert json.dumps(first.intake.shown, sort_keys=True) == json.dumps(
            other.intake.shown, sort_keys=True
        )
    else:
        assert first == again == other
