"""`WhatsAppAdapter.retext`: the edited call sent again to each WhatsApp number that was
sent an earlier version, as the same approved template (a business-initiated message
needs one), once per number and version; a tap on the message sent before the edit is
refused and answered that the call was edited, a tap on the new one answers the edited
call. The real adapter and webhooks against the Twilio emulator, really signed taps, and
this directory's in-memory desk (no route to WhatsApp is edited today: edits are offered on
Slack and dashboard routes, and escalations do not go to WhatsApp; see docs/whatsapp.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
from starlette.applications import Starlette

from contracts.enums import SurfaceType
from contracts.ports import SmsRoute
from cosigner.digest import parameters_digest
from surfaces.sms import SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator
from surfaces.whatsapp import WhatsAppAdapter, WhatsAppConfig
from surfaces.whatsapp.template import TEMPLATE_ACTIONS, TEMPLATE_BODY

CALL = {"orderId": "ord_4421", "amountCents": 12900}
EDITED = {**CALL, "amountCents": 4000}


async def test_the_edited_call_is_sent_again_once_and_only_its_taps_count(
    emu: TwilioEmulator, config: SmsConfig, desk: Any, kit: Any
) -> None:
    bot, alice = f"whatsapp:{kit.bot}", f"whatsapp:{kit.alice}"
    wa = WhatsAppAdapter(
        WhatsAppConfig(config, kit.bot, emu.add_template(TEMPLATE_BODY, TEMPLATE_ACTIONS)), desk, desk.store
    )
    await wa.start()
    try:
        route = SmsRoute(
            surface=SurfaceType.WHATSAPP, from_number=bot, messaging_service_sid=None, approvers=(alice,)
        )
        card = dataclasses.replace(kit.card(parameters=CALL), digest=parameters_digest(CALL), quorum=2)
        desk.add(card, route, conversation=None)
        delivered = await wa.deliver(card, route)
        desk.approvals[card.approval_id] = dataclasses.replace(
            desk.approvals[card.approval_id], delivered=delivered
        )
        edited = dataclasses.replace(card, edited=EDITED, edited_by="u_ann", digest=parameters_digest(EDITED))
        desk.approvals[card.approval_id] = dataclasses.replace(desk.approvals[card.approval_id], card=edited)

        done = await wa.retext(edited, route, delivered)
        assert done.texted == (alice,) and not done.in_flight and not done.problems
        assert (await wa.retext(edited, route, delivered)).texted == ()  # once per version
        first, second = emu.texts_to(alice)
        assert second.content_sid == first.content_sid and second.content_variables is not None
        assert first.content_variables is not None
        shown = second.content_variables["1"]
        assert "(edited by an approver" in shown and "amountCents=4000," in shown, shown
        assert "Changed: amountCents 12900->4000." in shown
        # The number keeps its nonce: the buttons differ only by the message they are on.
        assert second.content_variables["2"] == first.content_variables["2"]

        app = Starlette(routes=wa.routes())
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://internal") as c:
            phone = TwilioCaller(c, public_url=kit.public, account_sid=kit.account, auth_token=kit.token)
            approve = first.content_variables["2"]
            old = await phone.tap(alice, bot, title="Approve", payload=approve, replied_to=first.sid)
            assert "was edited by an approver after it was texted to you" in old.text, old.text
            assert desk.answers == []
            new = await phone.tap(alice, bot, title="Approve", payload=approve, replied_to=second.sid)
            assert new.status_code == 200 and "Not accepted" not in new.text, new.text
            (answer,) = desk.answers
            assert answer.actor == alice and answer.seen == parameters_digest(EDITED)
    finally:
        await wa.stop()
