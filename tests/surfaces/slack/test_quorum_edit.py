"""Edit before approve under a quorum, in Slack: through the real app and the Slack emulator,
with really signed clicks and submissions.

An edit is the editor's Approve of the edited call; every Approve of the call it replaced
is set aside; the card shows the edited call (old → new, who edited it, the count) and its
buttons answer that call only. A click from a card made before the edit is refused.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cosigner.digest import parameters_digest
from cosigner.grants import GrantRefused, verify_grant
from surfaces.slack.emulated_methods import Recorded
from surfaces.slack.emulator import SlackEmulator
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere
from tests.harness import Harness, press, slack_app, until

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, SLACK_STATE)

SECRET = "quorum-edit-signing-secret"
APP_ID = "A0COSIGNER"
POLICY = """
[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
editable = ["amountCents", "note"]
deny_above = { parameter = "amountCents", value = 100000 }

[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ANN", "U0BOB", "U0CAT"] }
admin_channel = "C0ADMINS"
"""
CALL = {"orderId": "ord_4421", "amountCents": 40000, "note": "refund"}
EDITED = {**CALL, "amountCents": 4000}


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, str]]:
    async with slack_app(POLICY, secret=SECRET, app_id=APP_ID, database_kind=db_kind) as (h, emu):
        yield h, emu, await h.create_tenant("acme")


async def ask(h: Harness, key: str) -> str:
    body = {
        "executionId": "run_1",
        "toolCallId": "call_1",
        "toolName": "issue_refund",
        "parameters": CALL,
        "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
        "acceptsEdits": True,
    }
    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert r.status_code == 201, r.text
    assert r.json()["quorum"] == 2 and r.json()["editable"] == ["amountCents", "note"]
    return str(r.json()["approvalId"])


async def posted(h: Harness, emu: SlackEmulator, approval_id: str) -> Recorded:
    await h.delivered(approval_id)
    card = [m for m in emu.messages if m.method == "chat.postMessage"][-1]
    assert card.channel == "C0ADMINS"
    return card


def click(h: Harness, card: Any, user: str, action: str = "cosigner.approve") -> Any:
    """A click on `card` as it was rendered (the blocks recorded then, even if since updated)."""
    return press(h.client, card, action, secret=SECRET, app_id=APP_ID, user=user, team="T0ACME")


def buttons(blocks: list[dict[str, Any]]) -> dict[str, str]:
    return {
        e["action_id"]: e.get("value", "") for b in blocks if b["type"] == "actions" for e in b["elements"]
    }


async def edit(h: Harness, emu: SlackEmulator, card: Recorded, user: str, **values: Any) -> Any:
    """Open the Edit form as `user`, review the changes, and confirm: the submission's answer."""
    before = len(emu.views)
    opened = await emu.click(
        h.client, channel=card.channel, ts=card.ts, action_id="cosigner.edit", secret=SECRET, user=user
    )
    assert opened.status_code == 200
    await until(lambda: len(emu.views) > before)
    state = {
        f"edit:{name}": {
            "value": {"type": "number_input" if isinstance(v, int) else "plain_text_input", "value": str(v)}
        }
        for name, v in values.items()
    }
    review = await emu.submit_view(h.client, secret=SECRET, values=state, user=user)
    assert review.json().get("response_action") == "update", review.text
    return await emu.submit_view(h.client, secret=SECRET, values={}, user=user)


async def state(h: Harness, key: str, approval_id: str) -> dict[str, Any]:
    body: dict[str, Any] = (await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))).json()
    return body


async def trail(h: Harness, key: str, approval_id: str) -> list[dict[str, Any]]:
    r = await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))
    events: list[dict[str, Any]] = r.json()["events"]
    return events


async def updated(emu: SlackEmulator, card: Recorded, *needles: str) -> Recorded:
    """The card as last updated in place, once it shows every one of `needles`."""

    def shown() -> Recorded | None:
        m = emu.latest(card.channel, card.ts)
        text = json.dumps(m.blocks, ensure_ascii=False) if m is not None else ""
        return m if m is not None and m.method == "chat.update" and all(n in text for n in needles) else None

    return await until(shown)


async def test_an_edit_counts_as_the_editors_approval_and_a_second_approver_runs_the_edited_call(
    world: Any,
) -> None:
    h, emu, key = world
    aid = await ask(h, key)
    card = await posted(h, emu, aid)
    assert parameters_digest(CALL) in buttons(card.blocks)["cosigner.approve"]

    done = await edit(h, emu, card, "U0ANN", amountCents=4000)
    assert done.json() == {"response_action": "clear"}, done.text
    pending = await state(h, key, aid)
    assert pending["status"] == "pending" and [a["by"] for a in pending["approvals"]] == ["U0ANN"]
    assert pending["parametersDigest"] == parameters_digest(CALL), "the agent's own call is kept"
    assert pending["currentCall"] == {
        "parameters": EDITED,
        "editedFields": ["amountCents"],
        "digest": parameters_digest(EDITED),
        "editedBy": "U0ANN",
        "editedOn": "slack",
    }

    # The card, updated in place: the edited call, old → new, who edited it, 1 of 2.
    now = await updated(emu, card, "Edited by <@U0ANN>", "*Approved 1 of 2* — <@U0ANN>")
    text = json.dumps(now.blocks, ensure_ascii=False)
    assert "amountCents: 40000 → 4000" in text and '\\"amountCents\\": 4000\\n' in text
    assert parameters_digest(EDITED) in buttons(now.blocks)["cosigner.approve"]

    # Ann cannot approve again to reach the quorum.
    await click(h, now, "U0ANN")
    assert [a["by"] for a in (await state(h, key, aid))["approvals"]] == ["U0ANN"]

    assert (await click(h, now, "U0BOB")).status_code == 200
    body = await state(h, key, aid)
    assert body["status"] == "approved" and body["edited"] is True
    assert [a["by"] for a in body["approvals"]] == ["U0ANN", "U0BOB"]
    assert body["parameters"] == EDITED and body["editedFields"] == ["amountCents"]
    assert body["digest"] == body["parametersDigest"] == parameters_digest(EDITED)
    assert body["originalDigest"] == parameters_digest(CALL)
    keys = (await h.client.get("/v1/keys")).json()
    claims = verify_grant(body["grant"], keys, parameters=EDITED, tool_name="issue_refund")
    assert claims.digest == parameters_digest(EDITED)
    with pytest.raises(GrantRefused, match="parameters differ"):
        verify_grant(body["grant"], keys, parameters=CALL, tool_name="issue_refund")

    events = await trail(h, key, aid)
    names = [e["event"] for e in events]
    assert names[:4] == ["requested", "delivered", "call_edited", "approval_counted"]
    edited = next(e for e in events if e["event"] == "call_edited")
    assert edited["actor"]["userId"] == "U0ANN"
    assert edited["data"]["edited"]["digest"] == parameters_digest(EDITED)
    assert edited["data"]["edited"]["originalDigest"] == parameters_digest(CALL)
    closed = await updated(emu, card, "Approved with an edit")
    assert "cosigner.approve" not in buttons(closed.blocks)


async def test_a_click_from_a_card_made_before_the_edit_is_refused_and_not_counted(world: Any) -> None:
    h, emu, key = world
    aid = await ask(h, key)
    card = await posted(h, emu, aid)
    await edit(h, emu, card, "U0ANN", amountCents=4000)
    await updated(emu, card, "Edited by <@U0ANN>")

    # Bob's click comes from the card as it was before the edit (its buttons name the old call).
    before = len(emu.ephemerals)
    assert (await click(h, card, "U0BOB")).status_code == 200
    (note,) = (await until(lambda: emu.ephemerals[before:] or None))[-1:]
    assert note.user == "U0BOB" and "edited by <@U0ANN>" in (note.text or "")
    assert "card now shows the edited call" in (note.text or "")
    # And a click whose button names no call at all (a card from before buttons carried one).
    old_style = dict(card.__dict__)
    old_style["blocks"] = json.loads(json.dumps(card.blocks).replace(f"|{parameters_digest(CALL)}", ""))
    assert (await click(h, Recorded(**old_style), "U0CAT")).status_code == 200
    await until(lambda: len(emu.ephemerals) >= before + 2)
    # A deny from the old card does not decide either: it was not given for this call.
    body = await state(h, key, aid)
    assert body["status"] == "pending" and [a["by"] for a in body["approvals"]] == ["U0ANN"]
    refusals = [e for e in await trail(h, key, aid) if e["event"] == "decision_refused"]
    assert [(r["actor"]["userId"], r["data"]["code"]) for r in refusals] == [
        ("U0BOB", "PARAMETERS_MISMATCH"),
        ("U0CAT", "PARAMETERS_MISMATCH"),
    ]


async def test_an_approval_of_the_call_before_the_edit_no_longer_counts(world: Any) -> None:
    h, emu, key = world
    aid = await ask(h, key)
    card = await posted(h, emu, aid)
    await click(h, card, "U0CAT")
    progress = await updated(emu, card, "*Approved 1 of 2* — <@U0CAT>")

    await edit(h, emu, progress, "U0ANN", amountCents=4000)
    body = await state(h, key, aid)
    assert body["status"] == "pending" and [a["by"] for a in body["approvals"]] == ["U0ANN"]
    set_aside = [e for e in await trail(h, key, aid) if e["event"] == "approvals_set_aside"]
    assert len(set_aside) == 1 and set_aside[0]["data"]["approvers"] == [{"by": "U0CAT", "surface": "slack"}]
    assert set_aside[0]["data"]["approvedDigest"] == parameters_digest(CALL)
    assert set_aside[0]["data"]["digest"] == parameters_digest(EDITED)

    # Cat approves again, the edited call this time: that makes the quorum.
    now = await updated(emu, card, "Edited by <@U0ANN>")
    await click(h, now, "U0CAT")
    done = await state(h, key, aid)
    assert done["status"] == "approved" and done["parameters"] == EDITED
    assert [a["by"] for a in done["approvals"]] == ["U0ANN", "U0CAT"]


async def test_a_second_edit_is_a_new_version_and_sets_the_first_editors_approval_aside(world: Any) -> None:
    h, emu, key = world
    aid = await ask(h, key)
    card = await posted(h, emu, aid)
    await edit(h, emu, card, "U0ANN", amountCents=4000)
    first = await updated(emu, card, "Edited by <@U0ANN>")
    await edit(h, emu, first, "U0BOB", note="partial refund")
    second = await updated(emu, card, "Edited by <@U0BOB>")
    twice = {**EDITED, "note": "partial refund"}
    body = await state(h, key, aid)
    assert [a["by"] for a in body["approvals"]] == ["U0BOB"]
    assert body["currentCall"]["parameters"] == twice
    assert body["currentCall"]["editedFields"] == ["amountCents", "note"]
    text = json.dumps(second.blocks, ensure_ascii=False)
    assert "amountCents: 40000 → 4000" in text and 'note: \\"refund\\" → \\"partial refund\\"' in text

    # Ann's click on the first version's card is refused; on the current one it counts.
    await click(h, first, "U0ANN")
    assert [a["by"] for a in (await state(h, key, aid))["approvals"]] == ["U0BOB"]
    await click(h, second, "U0ANN")
    done = await state(h, key, aid)
    assert done["status"] == "approved" and done["parameters"] == twice
    assert done["digest"] == parameters_digest(twice) and done["editedFields"] == ["amountCents", "note"]


async def test_an_edit_that_crosses_a_deny_rule_denies_under_a_quorum_too(world: Any) -> None:
    h, emu, key = world
    aid = await ask(h, key)
    card = await posted(h, emu, aid)
    await edit(h, emu, card, "U0ANN", amountCents=400000)
    body = await state(h, key, aid)
    assert body["status"] == "denied" and body["grant"] is None and "edited" not in body
    assert body["decidedBy"] == {"kind": "policy", "rule": "tools.issue_refund.deny_above"}


async def test_an_edit_and_an_approve_at_once_have_one_consistent_outcome(world: Any) -> None:
    h, emu, key = world
    aid = await ask(h, key)
    card = await posted(h, emu, aid)
    await click(h, card, "U0CAT")  # 1 of 2: Bob's Approve of the agent's call would close it
    progress = await updated(emu, card, "*Approved 1 of 2* — <@U0CAT>")
    before = len(emu.views)
    await emu.click(
        h.client, channel=card.channel, ts=card.ts, action_id="cosigner.edit", secret=SECRET, user="U0ANN"
    )
    await until(lambda: len(emu.views) > before)
    values = {"edit:amountCents": {"value": {"type": "number_input", "value": "4000"}}}
    assert (await emu.submit_view(h.client, secret=SECRET, values=values, user="U0ANN")).status_code == 200

    confirmed, clicked = await asyncio.gather(
        emu.submit_view(h.client, secret=SECRET, values={}, user="U0ANN"), click(h, progress, "U0BOB")
    )
    assert confirmed.status_code == 200 and clicked.status_code == 200
    body = await state(h, key, aid)
    if body["status"] == "approved":
        # Bob's Approve won: the agent's own call runs, and Ann's edit was refused.
        assert "edited" not in body and body["parametersDigest"] == parameters_digest(CALL)
        assert sorted(a["by"] for a in body["approvals"]) == ["U0BOB", "U0CAT"]
        assert confirmed.json()["response_action"] == "errors"
    else:
        # Ann's edit won: Bob's Approve was of the call it replaced, and is not counted.
        assert body["status"] == "pending" and [a["by"] for a in body["approvals"]] == ["U0ANN"]
        assert body["currentCall"]["digest"] == parameters_digest(EDITED)
        assert confirmed.json() == {"response_action": "clear"}
    events = [e["event"] for e in await trail(h, key, aid)]
    assert events.count("approved") + events.count("call_edited") == 1


ESCALATING = """
[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
editable = ["amountCents", "note"]
timeout = "1h"
escalate = [{ after = "10m", to = "staff" }]

[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ANN", "U0BOB"] }
admin_channel = "C0ADMINS"

[staff]
slack_team = "T0ACME"
channel = "C0STAFF"
users = ["U0OPS"]
"""


async def test_an_escalated_card_shows_the_edited_call_and_answers_only_it(db_kind: str) -> None:
    async with slack_app(ESCALATING, secret=SECRET, app_id=APP_ID, database_kind=db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        aid = await ask(h, key)
        card = await posted(h, emu, aid)
        h.advance(10 * 60.0)
        (staff,) = await until(
            lambda: [m for m in emu.messages if m.method == "chat.postMessage" and m.channel == "C0STAFF"]
        )
        assert parameters_digest(CALL) in buttons(staff.blocks)["cosigner.approve"]

        await edit(h, emu, card, "U0ANN", amountCents=4000)
        shown = await updated(emu, staff, "Edited by <@U0ANN>", "*Approved 1 of 2* — <@U0ANN>")
        assert parameters_digest(EDITED) in buttons(shown.blocks)["cosigner.approve"]
        # The staff card as first posted answers the call before the edit: refused.
        await click(h, staff, "U0OPS")
        assert [a["by"] for a in (await state(h, key, aid))["approvals"]] == ["U0ANN"]
        await click(h, shown, "U0OPS")
        body = await state(h, key, aid)
        assert body["status"] == "approved" and body["parameters"] == EDITED
        assert [a["by"] for a in body["approvals"]] == ["U0ANN", "U0OPS"]


async def test_a_card_names_its_call_by_a_digest_that_tests_no_guess_of_a_hidden_value(db_kind: str) -> None:
    # A button's value travels through Slack: a digest of the real call there would let anyone
    # who reads the message test guesses of the card token against it.
    policy = POLICY.replace("deny_above", 'redact = ["cardToken"]\ndeny_above')
    secret_call = {**CALL, "cardToken": "tok_4242"}
    async with slack_app(policy, secret=SECRET, app_id=APP_ID, database_kind=db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        body = {
            "executionId": "run_1",
            "toolCallId": "call_1",
            "toolName": "issue_refund",
            "parameters": secret_call,
            "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
            "acceptsEdits": True,
        }
        r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
        assert r.status_code == 201, r.text
        aid = str(r.json()["approvalId"])
        card = await posted(h, emu, aid)
        sent = json.dumps(card.blocks)
        assert parameters_digest(secret_call) not in sent and "tok_4242" not in sent
        shown = parameters_digest({**secret_call, "cardToken": "[REDACTED]"})
        assert buttons(card.blocks)["cosigner.approve"] == f"{aid}|{shown}"
        # The click names the call as the card showed it, and counts.
        assert (await click(h, card, "U0ANN")).status_code == 200
        assert [a["by"] for a in (await state(h, key, aid))["approvals"]] == ["U0ANN"]
