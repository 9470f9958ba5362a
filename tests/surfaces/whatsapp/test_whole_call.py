"""WhatsApp follows the SMS rules for what a YES may approve: only a call the texts show
whole, and a typed bare YES only when no other request was sent to the number lately. A tap
carries its own request, so it is never bare; an Approve tap on a call too long to show
whole is refused all the same, and a Deny tap counts."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.databases import DESK, TEXT_STATE, postgres_elsewhere
from tests.surfaces.sms.test_whole_call import LONG_CALL
from tests.surfaces.whatsapp.test_end_to_end import (
    WA_ALICE,
    WA_BOT,
    World,
    button,
    refusals,
    request,
    status,
    whatsapp_app,
)

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, TEXT_STATE)


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[World]:
    async with whatsapp_app(db_kind) as w:
        yield w


async def test_an_approve_tap_or_a_yes_on_a_call_too_long_to_show_whole_is_refused(world: World) -> None:
    h, emu, phone, key = world
    approval_id = await request(h, key, parameters=LONG_CALL)
    (sent,) = emu.sent
    assert "Too long to text whole, so YES cannot approve it." in sent.body, sent.body
    assert "\nReply NO to deny.\n" in sent.body and "Reply YES or NO." not in sent.body

    tapped = await phone.tap(
        WA_ALICE, WA_BOT, title="Approve", payload=button(sent, "Approve"), replied_to=sent.sid
    )
    assert "too long to show whole by text, so YES cannot approve it" in tapped.text, tapped.text
    typed = await phone.text(WA_ALICE, WA_BOT, "YES", path="/whatsapp/inbound")
    assert "too long to show whole by text" in typed.text, typed.text
    assert (await status(h, key, approval_id))["status"] == "pending"
    assert await refusals(h, key, approval_id) == [("APPROVAL_MODE_UNSUPPORTED", WA_ALICE, "whatsapp")] * 2

    await phone.tap(WA_ALICE, WA_BOT, title="Deny", payload=button(sent, "Deny"), replied_to=sent.sid)
    closed = await status(h, key, approval_id)
    assert closed["status"] == "denied" and closed["grant"] is None


async def test_a_typed_bare_yes_after_a_cancel_and_a_new_request_is_refused_a_tap_counts(
    world: World,
) -> None:
    h, emu, phone, key = world
    first = await request(h, key, "c1")
    await h.client.post(f"/v1/approvals/{first}/cancel", headers=h.auth(key))
    second = await request(h, key, "c2", parameters={"orderId": "ord_2", "amountCents": 90000})
    code = (await status(h, key, second))["shortCode"]
    typed = await phone.text(WA_ALICE, WA_BOT, "YES", path="/whatsapp/inbound")
    assert f"reply YES {code} (or NO {code})" in typed.text, typed.text
    assert (await status(h, key, second))["status"] == "pending"

    sent = next(t for t in emu.sent if t.content_sid is not None and second in button(t, "Approve"))
    await phone.tap(WA_ALICE, WA_BOT, title="Approve", payload=button(sent, "Approve"), replied_to=sent.sid)
    assert (await status(h, key, second))["status"] == "approved"
