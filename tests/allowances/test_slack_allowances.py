"""Allow for … on a Slack card, end to end: really signed clicks through Bolt, the emulator's
cards, the agent's API, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import jwt
import pytest

from surfaces.slack.emulator import SlackEmulator
from surfaces.slack.home_allowances import REVOKE_ACTION
from surfaces.slack.interactions import block_actions_payload, send_signed, send_signed_event
from tests.allowance_world import (
    SECRET,
    allowances,
    ask,
    buttons,
    call,
    card_for,
    press,
    press_forged,
    slack_world,
    status_of,
)
from tests.databases import ALLOWANCES, DESK, postgres_elsewhere
from tests.harness import Harness, database, until, until_async

# On PostgreSQL, the storage path of the tests marked runs in the tests these name.
POSTGRES_ELSEWHERE = postgres_elsewhere(DESK, ALLOWANCES)

ALLOW_1H = "cosigner.allow_for.1h"


@pytest.fixture
async def slack(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, str]]:
    async with database(db_kind) as db, SlackEmulator.running(team_id="T0ACME", app_id="A0COSIGNER") as emu:
        async with slack_world(db, emu) as h:
            yield h, emu, await h.create_tenant("acme")


async def approved(h: Harness, key: str, approval_id: str) -> bool:
    return await status_of(h, key, approval_id) == "approved"


async def denials(h: Harness) -> list[object]:
    r = await h.client.get("/v1/denials", headers=h.auth(h.approver_key("acme")))
    return list(r.json()["denials"])


async def granted(h: Harness, emu: SlackEmulator, key: str) -> str:
    """Ask call_1, press Allow for 1h on its card; the standing allow's id."""
    approval_id, card = await card_for(h, emu, key, call(1))
    offered = [a for a in buttons(card) if a.startswith("cosigner.allow_for.")]
    assert offered == ["cosigner.allow_for.15m", ALLOW_1H]  # up to the 1h cap, never 8h
    r = await press(h, emu, card, ALLOW_1H)
    assert r.status_code == 200, r.text
    await until_async(lambda: approved(h, key, approval_id))
    (held,) = await allowances(h)
    assert held["grantedBy"]["userId"] == "U1" and held["approvalId"] == approval_id
    assert held["match"] == {"customerId": "cus_1"} and held["atMost"] == {"amountCents": 1500.0}
    return str(held["allowanceId"])


@POSTGRES_ELSEWHERE
async def test_a_call_inside_the_allowance_is_approved_at_once(
    slack: tuple[Harness, SlackEmulator, str],
) -> None:
    h, emu, key = slack
    allowance_id = await granted(h, emu, key)
    before = len(emu.messages)
    r = await ask(h, key, call(2, amount=900))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "approved"
    assert body["decidedBy"] == {
        "kind": "allowance",
        "allowanceId": allowance_id,
        "surface": "slack",
        "userId": "U1",
        "teamId": "T0ACME",
    }
    claims = jwt.decode(body["grant"], options={"verify_signature": False})
    assert claims["allowance"] == {"id": allowance_id, "grantedBy": "slack:U1"}
    assert len([m for m in emu.messages[before:] if m.method == "chat.postMessage"]) == 0  # nobody asked
    audit = await h.client.get(f"/v1/approvals/{body['approvalId']}/audit", headers=h.auth(key))
    used = [e for e in audit.json()["events"] if e["event"] == "allowance_used"]
    assert used and used[0]["data"]["allowanceId"] == allowance_id and used[0]["data"]["use"] == 1
    (held,) = await allowances(h)
    assert held["uses"] == 1


@POSTGRES_ELSEWHERE
async def test_other_match_arguments_are_asked(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    await granted(h, emu, key)
    r = await ask(h, key, call(2, customer="cus_2", amount=100))
    assert r.status_code == 201, r.text


@POSTGRES_ELSEWHERE
async def test_a_number_above_the_approved_one_is_asked(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    await granted(h, emu, key)
    assert (await ask(h, key, call(2, amount=1501))).status_code == 201
    assert (await ask(h, key, call(3, amount="900"))).status_code == 201  # not a JSON number
    assert (await ask(h, key, call(4, amount=1500))).status_code == 200  # equal is at most


@POSTGRES_ELSEWHERE
async def test_used_up_is_asked(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    await granted(h, emu, key)
    for n in (2, 3, 4):  # allow_for_uses = 3
        assert (await ask(h, key, call(n, amount=10))).status_code == 200
    assert (await ask(h, key, call(5, amount=10))).status_code == 201
    assert await allowances(h) == []  # no longer in force


@POSTGRES_ELSEWHERE
async def test_concurrent_calls_never_overrun_the_uses(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    await granted(h, emu, key)
    answers = await asyncio.gather(*(ask(h, key, call(n, amount=10)) for n in range(2, 10)))
    codes = sorted(r.status_code for r in answers)
    assert codes == [200, 200, 200, 201, 201, 201, 201, 201]  # allow_for_uses = 3, then asked


@POSTGRES_ELSEWHERE
async def test_expired_is_asked(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    await granted(h, emu, key)
    h.advance(3599)
    assert (await ask(h, key, call(2))).status_code == 200
    h.advance(2)
    assert (await ask(h, key, call(3))).status_code == 201


async def test_revoked_is_asked_from_the_next_call(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    allowance_id = await granted(h, emu, key)
    agent = await h.client.delete(f"/v1/allowances/{allowance_id}", headers=h.auth(key))
    assert agent.status_code == 403 and agent.json()["error"]["code"] == "KEY_SCOPE"
    r = await h.client.delete(f"/v1/allowances/{allowance_id}", headers=h.auth(h.approver_key("acme")))
    assert r.status_code == 200, r.text
    assert r.json()["revokedBy"] == "api"
    assert (await ask(h, key, call(2))).status_code == 201
    again = await h.client.delete("/v1/allowances/alw_" + "x" * 20, headers=h.auth(h.approver_key("acme")))
    assert again.status_code == 404 and again.json()["error"]["code"] == "ALLOWANCE_NOT_FOUND"


@POSTGRES_ELSEWHERE
async def test_a_standing_deny_wins(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    await granted(h, emu, key)
    _, other = await card_for(h, emu, key, call(2, customer="cus_9"))
    assert (await press(h, emu, other, "cosigner.always_deny")).status_code == 200
    await until_async(lambda: denials(h))
    r = await ask(h, key, call(3))  # inside the allowance, but the same person denies the tool now
    assert r.status_code == 403 and r.json()["error"]["code"] == "PERMISSION_DENIED"


@POSTGRES_ELSEWHERE
async def test_other_requester_or_conversation_is_asked(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    await granted(h, emu, key)
    assert (await ask(h, key, call(2, user="U2"))).status_code == 201
    elsewhere = call(3)
    elsewhere["surface"]["channelId"] = "C2"
    assert (await ask(h, key, elsewhere)).status_code == 201


# --- bad input: refused like any answer, nothing created ------------------------------------


@POSTGRES_ELSEWHERE
async def test_longer_than_the_cap_is_refused(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    approval_id, card = await card_for(h, emu, key, call(1))
    value = buttons(card)[ALLOW_1H]["value"]
    r = await press_forged(h, emu, card, "cosigner.allow_for.8h", value)
    assert r.status_code == 200
    told = await until(lambda: list(emu.ephemerals))
    assert "not offered" in (told[-1].text or "") and "1h" in (told[-1].text or "")
    assert await status_of(h, key, approval_id) == "pending"
    assert await allowances(h) == []


@POSTGRES_ELSEWHERE
async def test_on_a_tool_without_allow_for_is_refused(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    approval_id, card = await card_for(h, emu, key, call(1, tool="issue_refund"))
    assert not [a for a in buttons(card) if a.startswith("cosigner.allow_for.")]
    value = buttons(card)["cosigner.approve"]["value"]
    assert (await press_forged(h, emu, card, "cosigner.allow_for.15m", value)).status_code == 200
    told = await until(lambda: list(emu.ephemerals))
    assert "sets no allow_for" in (told[-1].text or "")
    assert await status_of(h, key, approval_id) == "pending"
    assert await allowances(h) == []


@POSTGRES_ELSEWHERE
async def test_from_someone_not_an_approver_is_refused(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    approval_id, card = await card_for(h, emu, key, call(1))
    assert (await press(h, emu, card, ALLOW_1H, user="U2")).status_code == 200
    told = await until(lambda: list(emu.ephemerals))
    assert "NOT_AN_APPROVER" in (told[-1].text or "")
    assert await status_of(h, key, approval_id) == "pending"
    assert await allowances(h) == []


@POSTGRES_ELSEWHERE
async def test_replayed_is_refused(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    approval_id, card = await card_for(h, emu, key, call(1))
    value = buttons(card)[ALLOW_1H]["value"]
    assert (await press(h, emu, card, ALLOW_1H)).status_code == 200
    await until_async(lambda: approved(h, key, approval_id))
    assert (await press_forged(h, emu, card, ALLOW_1H, value)).status_code == 200
    told = await until(lambda: [m for m in emu.ephemerals if "ALREADY_DECIDED" in (m.text or "")])
    assert told
    assert len(await allowances(h)) == 1


@POSTGRES_ELSEWHERE
async def test_the_home_tab_lists_them_and_revokes(slack: tuple[Harness, SlackEmulator, str]) -> None:
    h, emu, key = slack
    allowance_id = await granted(h, emu, key)
    assert (await open_home(h, "U1")).status_code == 200
    home = emu.home_tabs["U1"]
    listed = json.dumps(home)
    assert "Your standing allows" in listed and "customerId = cus_1" in listed and "used 0 of 3" in listed
    await open_home(h, "U9")
    assert "Your standing allows" not in json.dumps(emu.home_tabs["U9"])  # only the granter's own
    (button,) = [
        b["accessory"] for b in home["blocks"] if b.get("accessory", {}).get("action_id") == REVOKE_ACTION
    ]
    action = {"type": "button", "block_id": "x", "action_id": REVOKE_ACTION, "value": button["value"]}

    async def revoke(user: str) -> None:
        payload = block_actions_payload(
            action=action,
            blocks=home["blocks"],
            channel="D1",
            ts="1.1",
            user=user,
            team="T0ACME",
            app_id="A0COSIGNER",
        )
        assert (await send_signed(h.client, "/slack/events", payload, secret=SECRET)).status_code == 200

    await revoke("U9")  # someone else's Revoke finds nothing
    assert [a["allowanceId"] for a in await allowances(h)] == [allowance_id]
    await revoke("U1")
    await until_async(lambda: none_left(h))
    assert "Your standing allows" not in json.dumps(emu.home_tabs["U1"])
    assert (await ask(h, key, call(2))).status_code == 201


async def none_left(h: Harness) -> bool:
    return await allowances(h) == []


async def open_home(h: Harness, user: str) -> Any:
    payload = {
        "type": "event_callback",
        "team_id": "T0ACME",
        "api_app_id": "A0COSIGNER",
        "event_id": f"Ev{user}",
        "event_time": 1,
        "event": {"type": "app_home_opened", "user": user, "channel": "D1", "tab": "home"},
    }
    return await send_signed_event(h.client, "/slack/events", payload, secret=SECRET)
