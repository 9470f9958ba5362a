"""Edit before approve in Slack: the Edit button, the typed form, the confirm step, the grant.

Through the real app and the Slack emulator, with really signed clicks and submissions; the
grant is checked with the SDK's own `verify_grant` against the server's keys.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from cosigner.digest import parameters_digest
from cosigner.grants import GrantRefused, verify_grant
from surfaces.slack.emulated_methods import Recorded
from surfaces.slack.emulator import SlackEmulator
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere
from tests.harness import Harness, slack_app, until

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, SLACK_STATE)

SECRET = "edit-signing-secret"
APP_ID = "A0COSIGNER"
POLICY = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
redact = ["cardToken"]
editable = ["amountCents", "note", "currency"]
deny_above = { parameter = "amountCents", value = 100000 }

[tools.wire_money]
kind = "danger"

[tenants.acme]
slack_team = "T0ACME"
"""
SCHEMA = {
    "type": "object",
    "properties": {
        "orderId": {"type": "string"},
        "amountCents": {"type": "integer", "minimum": 1, "maximum": 500000, "description": "In cents"},
        "note": {"type": "string", "maxLength": 40},
        "currency": {"enum": ["EUR", "USD"]},
        "cardToken": {"type": "string"},
    },
    "required": ["orderId", "amountCents"],
    "additionalProperties": False,
}
CALL = {
    "orderId": "ord_4421",
    "amountCents": 40000,
    "note": "refund",
    "currency": "EUR",
    "cardToken": "tok_x",
}


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, str]]:
    async with slack_app(POLICY, secret=SECRET, app_id=APP_ID, database_kind=db_kind) as (h, emu):
        yield h, emu, await h.create_tenant("acme")


async def ask(
    h: Harness, key: str, *, call: str = "call_1", tool: str = "issue_refund", **extra: Any
) -> dict[str, Any]:
    body = {
        "executionId": "run_1",
        "toolCallId": call,
        "toolName": tool,
        "parameters": CALL,
        "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
        "acceptsEdits": True,
        "parametersSchema": SCHEMA,
        **extra,
    }
    response = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert response.status_code == 201, response.text
    start: dict[str, Any] = response.json()
    return start


async def card_of(h: Harness, emu: SlackEmulator, approval_id: str) -> Recorded:
    await h.delivered(approval_id)
    return [m for m in emu.messages if m.method == "chat.postMessage"][-1]


def buttons(card: Recorded) -> list[str]:
    return [e["action_id"] for b in card.blocks if b["type"] == "actions" for e in b["elements"]]


async def open_edit(h: Harness, emu: SlackEmulator, card: Recorded, user: str = "U1") -> dict[str, Any]:
    before = len(emu.views)
    response = await emu.click(
        h.client, channel=card.channel, ts=card.ts, action_id="cosigner.edit", secret=SECRET, user=user
    )
    assert response.status_code == 200
    views = await until(lambda: emu.views if len(emu.views) > before else None)
    view: dict[str, Any] = views[-1].view
    return view


def number(value: str) -> dict[str, Any]:
    return {"value": {"type": "number_input", "value": value}}


def text(value: str) -> dict[str, Any]:
    return {"value": {"type": "plain_text_input", "value": value}}


def choice(index: int) -> dict[str, Any]:
    return {"value": {"type": "static_select", "selected_option": {"value": str(index)}}}


def inputs(**changed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The form's state: every field as it was filled in, with `changed` replacing some."""
    state = {"edit:amountCents": number("40000"), "edit:note": text("refund"), "edit:currency": choice(0)}
    state.update({f"edit:{k}": v for k, v in changed.items()})
    return state


async def decided(h: Harness, key: str, approval_id: str) -> dict[str, Any]:
    response = await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
    body: dict[str, Any] = response.json()
    return body


async def test_edit_one_field_confirm_old_to_new_and_the_grant_binds_the_edited_call(world: Any) -> None:
    h, emu, key = world
    start = await ask(h, key)
    card = await card_of(h, emu, start["approvalId"])
    assert "cosigner.edit" in buttons(card)
    form = await open_edit(h, emu, card)
    assert form["callback_id"] == "cosigner.edit"
    blocks = {b["block_id"]: b for b in form["blocks"] if b["type"] == "input"}
    # Typed from the schema; the redacted cardToken and the non-editable orderId are not there.
    assert set(blocks) == {"edit:amountCents", "edit:note", "edit:currency"}
    assert blocks["edit:amountCents"]["element"]["type"] == "number_input"
    assert blocks["edit:amountCents"]["element"]["is_decimal_allowed"] is False
    assert blocks["edit:amountCents"]["element"]["initial_value"] == "40000"
    assert blocks["edit:currency"]["element"]["type"] == "static_select"
    assert "tok_x" not in str(form)

    review = await emu.submit_view(
        h.client, secret=SECRET, values=inputs(amountCents=number("4000")), user="U1"
    )
    assert review.status_code == 200 and review.json()["response_action"] == "update"
    confirm = emu.views[-1].view
    assert confirm["callback_id"] == "cosigner.edit_confirm"
    shown = " ".join(b["text"]["text"] for b in confirm["blocks"] if b["type"] == "section")
    assert "*amountCents*: `40000` → `4000`" in shown
    assert "note" not in shown  # only what changed
    assert (await decided(h, key, start["approvalId"]))["status"] == "pending"  # nothing decided yet

    done = await emu.submit_view(h.client, secret=SECRET, values={}, user="U1")
    assert done.status_code == 200 and done.json() == {"response_action": "clear"}
    body = await decided(h, key, start["approvalId"])
    edited_call = {**CALL, "amountCents": 4000}
    assert body["status"] == "approved" and body["edited"] is True
    assert body["editedFields"] == ["amountCents"]
    assert body["parameters"] == {**edited_call, "cardToken": "[REDACTED]"}
    assert body["digest"] == body["parametersDigest"] == parameters_digest(edited_call)
    assert body["originalDigest"] == start["parametersDigest"] == parameters_digest(CALL)

    keys = (await h.client.get("/v1/keys")).json()
    claims = verify_grant(body["grant"], keys, parameters=edited_call, tool_name="issue_refund")
    assert claims.digest == parameters_digest(edited_call)
    with pytest.raises(GrantRefused, match="parameters differ"):
        verify_grant(body["grant"], keys, parameters=CALL, tool_name="issue_refund")

    # Both calls are on the audit record; the original's secret stays redacted there too.
    trail = (await h.client.get(f"/v1/approvals/{start['approvalId']}/audit", headers=h.auth(key))).json()
    events = {e["event"]: e for e in trail["events"]}
    assert events["requested"]["data"]["parameters"]["amountCents"] == 40000
    assert events["approved"]["data"]["edited"]["parameters"]["amountCents"] == 4000
    assert events["approved"]["data"]["edited"]["originalDigest"] == parameters_digest(CALL)
    assert "tok_x" not in str(trail)
    # The card closes showing the edit.
    closed = await until(lambda: [m for m in emu.messages if m.method == "chat.update"])
    assert "Approved with an edit" in str(closed[-1].blocks) and "40000 → 4000" in str(closed[-1].blocks)


async def test_a_value_that_violates_the_schema_is_refused_in_the_modal_with_the_reason(world: Any) -> None:
    h, emu, key = world
    start = await ask(h, key)
    card = await card_of(h, emu, start["approvalId"])
    await open_edit(h, emu, card)
    too_long = await emu.submit_view(h.client, secret=SECRET, values=inputs(note=text("n" * 41)), user="U1")
    body = too_long.json()
    assert body["response_action"] == "errors"
    assert body["errors"]["edit:note"] == "must be at most 40 characters long (maxLength)"
    not_whole = await emu.submit_view(
        h.client, secret=SECRET, values=inputs(amountCents=number("12.5")), user="U1"
    )
    assert "whole number" in not_whole.json()["errors"]["edit:amountCents"]
    below = await emu.submit_view(h.client, secret=SECRET, values=inputs(amountCents=number("0")), user="U1")
    assert "minimum" in below.json()["errors"]["edit:amountCents"]
    assert (await decided(h, key, start["approvalId"]))["status"] == "pending"


@pytest.mark.parametrize("field", ["cardToken", "orderId", "toolName"])
async def test_a_crafted_submission_cannot_change_a_redacted_or_non_editable_field(
    world: Any, field: str
) -> None:
    h, emu, key = world
    start = await ask(h, key)
    card = await card_of(h, emu, start["approvalId"])
    await open_edit(h, emu, card)
    crafted = inputs(amountCents=number("4000"), **{field: text("tok_attacker")})
    review = await emu.submit_view(h.client, secret=SECRET, values=crafted, user="U1")
    body = review.json()
    assert body["response_action"] == "errors"
    assert f"{field} cannot be edited" in str(body["errors"])
    # The confirm step's own values are checked again by the engine, whatever the view says.
    await emu.submit_view(h.client, secret=SECRET, values=inputs(amountCents=number("4000")), user="U1")
    confirm = emu.views[-1]
    assert confirm.view["callback_id"] == "cosigner.edit_confirm"
    meta = confirm.view["private_metadata"].replace(
        '"v":{"amountCents":4000}', f'"v":{{"{field}":"tok_attacker"}}'
    )
    confirm.view = {**confirm.view, "private_metadata": meta}
    refused = await emu.submit_view(h.client, secret=SECRET, values={}, user="U1")
    assert refused.json()["response_action"] == "errors"
    assert "cannot be edited" in refused.json()["errors"]["comment"]
    assert (await decided(h, key, start["approvalId"]))["status"] == "pending"


async def test_someone_else_cannot_submit_the_edit_and_a_non_approver_cannot_open_it(world: Any) -> None:
    h, emu, key = world
    start = await ask(h, key)
    card = await card_of(h, emu, start["approvalId"])
    response = await emu.click(
        h.client, channel=card.channel, ts=card.ts, action_id="cosigner.edit", secret=SECRET, user="U9"
    )
    assert response.status_code == 200
    note = await until(lambda: emu.ephemerals)
    assert "NOT_AN_APPROVER" in (note[-1].text or "")
    await open_edit(h, emu, card)
    await emu.submit_view(h.client, secret=SECRET, values=inputs(amountCents=number("4000")), user="U1")
    refused = await emu.submit_view(h.client, secret=SECRET, values={}, user="U9")
    assert "opened by someone else" in refused.json()["errors"]["comment"]
    assert (await decided(h, key, start["approvalId"]))["status"] == "pending"


async def test_an_edit_that_crosses_a_deny_rule_is_denied(world: Any) -> None:
    h, emu, key = world
    start = await ask(h, key)
    card = await card_of(h, emu, start["approvalId"])
    await open_edit(h, emu, card)
    await emu.submit_view(h.client, secret=SECRET, values=inputs(amountCents=number("400000")), user="U1")
    done = await emu.submit_view(h.client, secret=SECRET, values={}, user="U1")
    assert done.status_code == 200
    body = await decided(h, key, start["approvalId"])
    assert body["status"] == "denied" and body["grant"] is None and "edited" not in body
    assert body["decidedBy"] == {"kind": "policy", "rule": "tools.issue_refund.deny_above"}
    assert "U1 edited the call" in body["comment"]


async def test_no_edit_button_without_accepts_edits_or_editable_fields(world: Any) -> None:
    h, emu, key = world
    plain = await ask(h, key, call="call_2", acceptsEdits=False)
    assert "cosigner.edit" not in buttons(await card_of(h, emu, plain["approvalId"]))
    other = await ask(h, key, call="call_3", tool="wire_money")
    assert "cosigner.edit" not in buttons(await card_of(h, emu, other["approvalId"]))
