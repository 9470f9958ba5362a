"""Edit before approve through the SDK: `gate(allow_edits=True)` runs the edited call once,
`request_approval` hands back the call to run, and a gate without `allow_edits` never asks for
an edit (and would refuse one).

Against the harness app on loopback, decided by the tenant's app with an approver key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import cosigner
from cosigner import Cosigner
from cosigner.digest import parameters_digest
from cosigner.errors import InvalidRequest, ParametersMismatch
from tests.loopback import LiveServer, loopback_server
from tests.sdk.conftest import SURFACE, USER, Polling
from tests.sdk.test_outcomes import in_background

EDIT_POLICY = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
redact = ["card_token"]
editable = ["amount_cents", "note"]

[tools.refund_twice]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
separate_duties = false
editable = ["amount_cents"]

[tenants.acme.headless]
route = "tenant_admins"

[tenants.acme]
admins = { dashboard = ["u_1", "u_2"] }
"""


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with loopback_server(EDIT_POLICY) as server:
        yield server


@pytest.fixture(scope="module")
def keys(live: LiveServer) -> tuple[str, str]:
    agent = live.call(live.harness.create_tenant("acme"))
    return agent, live.harness.approver_key("acme")


def test_an_edited_call_runs_once_with_exactly_the_edited_arguments(
    live: LiveServer, keys: tuple[str, str]
) -> None:
    agent_key, approver_key = keys
    ran: list[dict[str, Any]] = []
    polling = Polling()
    with (
        Cosigner(url=live.url, api_key=agent_key, transport=polling) as agent,
        Cosigner(url=live.url, api_key=agent_key) as finder,
        Cosigner(url=live.url, api_key=approver_key) as person,
    ):

        @agent.gate(surface=SURFACE, allow_edits=True)
        def issue_refund(order_id: str, amount_cents: int, card_token: str, note: str = "") -> str:
            ran.append(
                {"order_id": order_id, "amount_cents": amount_cents, "card_token": card_token, "note": note}
            )
            return f"refunded {amount_cents}"

        def run() -> str:
            with cosigner.execution("run_edit"), cosigner.tool_call("call_1"):
                return issue_refund("ord_1", 40000, card_token="tok_x")

        outcome = in_background(run)  # type: ignore[arg-type]
        assert polling.polling.wait(30)
        original = {"order_id": "ord_1", "amount_cents": 40000, "card_token": "tok_x", "note": ""}
        pending = finder.request_approval(
            execution_id="run_edit",
            tool_call_id="call_1",
            tool_name="issue_refund",
            parameters=original,
            surface=SURFACE,
            wait=False,
            accepts_edits=True,
        )
        assert pending.editable == ("amount_cents", "note")
        decided = person.decide(pending, decision="approve", user_id=USER, edit={"amount_cents": 4000})
        returned: object = outcome.result(timeout=30)
        assert returned == "refunded 4000"
        requested = finder.audit(decided)[0]["data"]
    edited_call = {**original, "amount_cents": 4000}
    assert ran == [edited_call]  # once, and never with the original amount
    assert decided.edited and decided.edited_fields == ("amount_cents",)
    assert decided.parameters == {**edited_call, "card_token": "[REDACTED]"}  # the secret stays hidden
    assert decided.with_original(original).parameters == edited_call
    assert decided.parameters_digest == parameters_digest(edited_call)
    assert decided.original_digest == parameters_digest(original)
    # The request said it accepts edits: the audit record lists what could be edited.
    assert requested["editable"] == ["amount_cents", "note"]


def test_a_gate_without_allow_edits_asks_without_an_edit_and_cannot_be_edited(
    live: LiveServer, keys: tuple[str, str]
) -> None:
    agent_key, approver_key = keys
    ran: list[int] = []
    polling = Polling()
    with (
        Cosigner(url=live.url, api_key=agent_key, transport=polling) as agent,
        Cosigner(url=live.url, api_key=agent_key) as finder,
        Cosigner(url=live.url, api_key=approver_key) as person,
    ):

        @agent.gate(surface=SURFACE)
        def issue_refund(order_id: str, amount_cents: int, card_token: str, note: str = "") -> None:
            ran.append(amount_cents)

        def run() -> None:
            with cosigner.execution("run_plain"), cosigner.tool_call("call_1"):
                issue_refund("ord_1", 40000, card_token="tok_x")

        outcome = in_background(run)  # type: ignore[arg-type]
        assert polling.polling.wait(30)
        pending = finder.request_approval(
            execution_id="run_plain",
            tool_call_id="call_1",
            tool_name="issue_refund",
            parameters={"order_id": "ord_1", "amount_cents": 40000, "card_token": "tok_x", "note": ""},
            surface=SURFACE,
            wait=False,
        )
        assert pending.editable == ()
        with pytest.raises(InvalidRequest, match="offers no edit"):
            person.decide(pending, decision="approve", user_id=USER, edit={"amount_cents": 4000})
        person.decide(pending, decision="approve", user_id=USER)
        outcome.result(timeout=30)
    assert ran == [40000]


def test_under_a_quorum_an_edit_is_one_approval_and_each_answer_names_the_call_it_was_shown(
    live: LiveServer, keys: tuple[str, str]
) -> None:
    agent_key, approver_key = keys
    ran: list[int] = []
    polling = Polling()
    with (
        Cosigner(url=live.url, api_key=agent_key, transport=polling) as agent,
        Cosigner(url=live.url, api_key=agent_key) as finder,
        Cosigner(url=live.url, api_key=approver_key) as person,
    ):

        @agent.gate(surface=SURFACE, allow_edits=True)
        def refund_twice(order_id: str, amount_cents: int) -> str:
            ran.append(amount_cents)
            return f"refunded {amount_cents}"

        def run() -> str:
            with cosigner.execution("run_quorum_edit"), cosigner.tool_call("call_1"):
                return refund_twice("ord_1", 40000)

        outcome = in_background(run)  # type: ignore[arg-type]
        assert polling.polling.wait(30)
        original = {"order_id": "ord_1", "amount_cents": 40000}

        def look() -> cosigner.Decision:
            return finder.request_approval(
                execution_id="run_quorum_edit",
                tool_call_id="call_1",
                tool_name="refund_twice",
                parameters=original,
                surface=SURFACE,
                wait=False,
                accepts_edits=True,
            )

        pending = look()
        assert pending.quorum == 2 and pending.current_digest is None
        edited = person.decide(
            pending,
            decision="approve",
            user_id="u_1",
            edit={"amount_cents": 4000},
            parameters_digest=pending.parameters_digest,
        )
        assert edited.pending and [a.by for a in edited.approvals] == ["u_1"]
        now = look()
        assert now.current_parameters == {**original, "amount_cents": 4000}
        assert now.current_digest == parameters_digest({**original, "amount_cents": 4000})
        with pytest.raises(ParametersMismatch) as stale:
            person.decide(now, decision="approve", user_id="u_2", parameters_digest=now.parameters_digest)
        assert stale.value.details["digest"] == now.current_digest
        decided = person.decide(now, decision="approve", user_id="u_2", parameters_digest=now.current_digest)
        assert decided.approved and decided.edited
        returned: object = outcome.result(timeout=30)
        assert returned == "refunded 4000"
    assert ran == [4000]
