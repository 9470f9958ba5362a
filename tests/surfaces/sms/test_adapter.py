"""SmsAdapter.deliver and show_outcome against the emulator, through the real twilio client."""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest

from contracts.enums import ApprovalStatus, SurfaceType
from contracts.errors import SurfaceUnavailable
from contracts.ports import Delivered, SlackRoute
from surfaces.sms import SmsAdapter, SmsConfig, SmsConfigError
from surfaces.sms.emulator import TwilioEmulator


async def test_deliver_texts_each_approver(
    adapter: SmsAdapter, emu: TwilioEmulator, desk: Any, kit: Any
) -> None:
    card = kit.card()
    receipt = await adapter.deliver(card, kit.route(kit.alice, kit.bob))
    assert receipt.surface == "sms" and receipt.conversation == kit.bot
    assert receipt.message_refs == tuple(text.sid for text in emu.sent)
    assert [text.to for text in emu.sent] == [kit.alice, kit.bob]
    for text in emu.sent:
        assert text.from_ == kit.bot
        assert text.status_callback == "https://cosigner.example.com/sms/status"
        assert "issue_refund" in text.body and text.body.endswith("Reply YES or NO.")
        assert desk.store.sids[text.sid] == card.approval_id


async def test_deliver_asks_for_the_code_when_another_request_is_pending(
    adapter: SmsAdapter, emu: TwilioEmulator, desk: Any, kit: Any
) -> None:
    desk.add(kit.card("apr_0", "1111"), kit.route(kit.alice))
    card = kit.card("apr_1", "4821")
    desk.add(card, kit.route(kit.alice), conversation=None)  # pending, not yet delivered
    await adapter.deliver(card, kit.route(kit.alice))
    assert "Reply YES 4821 or NO 4821" in emu.sent[-1].body


async def test_deliver_through_a_messaging_service(
    adapter: SmsAdapter, emu: TwilioEmulator, kit: Any
) -> None:
    service = "MG" + "a" * 32
    route = kit.route(kit.alice, from_number=None, service=service)
    receipt = await adapter.deliver(kit.card(), route)
    assert receipt.conversation == service
    assert emu.sent[0].messaging_service_sid == service and emu.sent[0].from_ is None


async def test_a_retried_delivery_texts_nobody_twice(
    adapter: SmsAdapter, emu: TwilioEmulator, kit: Any
) -> None:
    first = await adapter.deliver(kit.card(), kit.route(kit.alice))
    again = await adapter.deliver(kit.card(), kit.route(kit.alice))
    assert first == again and len(emu.sent) == 1


async def test_opted_out_approver_is_unavailable_before_anything_is_sent(
    adapter: SmsAdapter, emu: TwilioEmulator, desk: Any, kit: Any
) -> None:
    await desk.store.set_opted_out(kit.bob, True)
    with pytest.raises(SurfaceUnavailable, match="opted out"):
        await adapter.deliver(kit.card(), kit.route(kit.alice, kit.bob))
    assert emu.sent == []


async def test_twilio_21610_is_unavailable_and_remembered(
    adapter: SmsAdapter, emu: TwilioEmulator, desk: Any, kit: Any
) -> None:
    emu.opt_out(kit.alice)
    with pytest.raises(SurfaceUnavailable) as caught:
        await adapter.deliver(kit.card(), kit.route(kit.alice))
    assert caught.value.details == {"twilioCode": 21610}
    assert isinstance(caught.value.__cause__, Exception)
    assert await desk.store.opted_out(kit.alice)


@pytest.mark.parametrize(("status", "code"), [(500, None), (429, 20429), (400, 21211)])
async def test_twilio_errors_are_unavailable(
    adapter: SmsAdapter, emu: TwilioEmulator, kit: Any, status: int, code: int | None
) -> None:
    emu.fail_next(status=status, code=code)
    with pytest.raises(SurfaceUnavailable, match="Twilio refused"):
        await adapter.deliver(kit.card(), kit.route(kit.alice))


async def test_unreachable_twilio_is_unavailable(desk: Any, kit: Any) -> None:
    config = SmsConfig(kit.account, kit.token, kit.bot, None, "http://127.0.0.1:9", kit.public)
    adapter = SmsAdapter(config, desk, desk.store)
    await adapter.start()
    try:
        with pytest.raises(SurfaceUnavailable, match="could not reach Twilio"):
            await adapter.deliver(kit.card(), kit.route(kit.alice))
    finally:
        await adapter.stop()


async def test_a_mock_transport_can_stand_in_for_twilio(desk: Any, kit: Any) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"code": 20003, "message": "Authenticate", "status": 401})

    config = SmsConfig(kit.account, kit.token, kit.bot, None, None, kit.public)
    adapter = SmsAdapter(config, desk, desk.store, transport=httpx.MockTransport(refuse))
    await adapter.start()
    try:
        with pytest.raises(SurfaceUnavailable, match="error 20003"):
            await adapter.deliver(kit.card(), kit.route(kit.alice))
    finally:
        await adapter.stop()


@pytest.mark.parametrize("number", ["5550000002", "+0555", "+1 555 000 0002", ""])
async def test_invalid_approver_numbers_are_refused(
    adapter: SmsAdapter, emu: TwilioEmulator, kit: Any, number: str
) -> None:
    with pytest.raises(SurfaceUnavailable, match=r"E\.164"):
        await adapter.deliver(kit.card(), kit.route(number))
    assert emu.sent == []


async def test_other_routes_and_lifecycle_misuse(desk: Any, kit: Any, config: SmsConfig) -> None:
    adapter = SmsAdapter(config, desk, desk.store)
    with pytest.raises(SurfaceUnavailable, match="not started"):
        await adapter.deliver(kit.card(), kit.route(kit.alice))
    await adapter.start()
    slack = SlackRoute(SurfaceType.SLACK, "T1", None, "C1", None, ("U1",), ("T1",))
    with pytest.raises(SurfaceUnavailable, match="slack"):
        await adapter.deliver(kit.card(), slack)
    await adapter.stop()
    with pytest.raises(SurfaceUnavailable, match="stopped"):
        await adapter.deliver(kit.card(), kit.route(kit.alice))


async def test_edge_and_region_from_the_environment_are_ignored(
    config: SmsConfig, desk: Any, emu: TwilioEmulator, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(os.environ, "TWILIO_EDGE", "sydney")
    monkeypatch.setitem(os.environ, "TWILIO_REGION", "au1")
    adapter = SmsAdapter(config, desk, desk.store)
    await adapter.start()
    try:
        await adapter.deliver(kit.card(), kit.route(kit.alice))
    finally:
        await adapter.stop()
    assert len(emu.sent) == 1


async def test_show_outcome_texts_each_reachable_approver_once(
    adapter: SmsAdapter, emu: TwilioEmulator, desk: Any, kit: Any
) -> None:
    route = kit.route(kit.alice, kit.bob)
    receipt = Delivered(SurfaceType.SMS, kit.bot, ("SM1", "SM2"))
    await desk.store.set_opted_out(kit.bob, True)
    card = kit.card(status=ApprovalStatus.APPROVED)
    await adapter.show_outcome(card, route, receipt)
    await adapter.show_outcome(card, route, receipt)  # the engine retried
    assert [(text.to, text.body) for text in emu.sent] == [(kit.alice, "Approved issue_refund (4821).")]
    assert emu.sent[0].status_callback is None


async def test_show_outcome_swallows_send_errors(adapter: SmsAdapter, emu: TwilioEmulator, kit: Any) -> None:
    emu.fail_next(status=500)
    card = kit.card(status=ApprovalStatus.EXPIRED)
    await adapter.show_outcome(card, kit.route(kit.alice), Delivered(SurfaceType.SMS, kit.bot))
    assert emu.sent == []


async def test_show_outcome_uses_the_messaging_service_it_was_sent_from(
    adapter: SmsAdapter, emu: TwilioEmulator, kit: Any
) -> None:
    service = "MG" + "b" * 32
    card = kit.card(status=ApprovalStatus.DENIED)
    await adapter.show_outcome(card, kit.route(kit.alice), Delivered(SurfaceType.SMS, service))
    assert emu.sent[0].messaging_service_sid == service


def test_config_is_validated(kit: Any) -> None:
    with pytest.raises(SmsConfigError, match="TWILIO_ACCOUNT_SID"):
        SmsConfig("nope", kit.token, None, None, None, kit.public)
    with pytest.raises(SmsConfigError, match="COSIGNER_PUBLIC_URL"):
        SmsConfig(kit.account, kit.token, None, None, None, "cosigner.example.com")
    with pytest.raises(SmsConfigError, match="TWILIO_FROM_NUMBER"):
        SmsConfig(kit.account, kit.token, "5550001", None, None, kit.public)
    with pytest.raises(SmsConfigError, match="COSIGNER_PUBLIC_URL"):
        SmsConfig.from_env({"TWILIO_ACCOUNT_SID": kit.account, "TWILIO_AUTH_TOKEN": "t"})
    config = SmsConfig.from_env(
        {
            "TWILIO_ACCOUNT_SID": kit.account,
            "TWILIO_AUTH_TOKEN": kit.token,
            "TWILIO_FROM_NUMBER": kit.bot,
            "TWILIO_API_URL": "",
            "COSIGNER_PUBLIC_URL": "https://cosigner.example.com/",
        }
    )
    assert config.public_url == "https://cosigner.example.com"
    assert config.api_url is None and config.messaging_service_sid is None
