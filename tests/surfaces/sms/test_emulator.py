"""The Twilio emulator, driven by the real twilio client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from twilio.base.exceptions import TwilioRestException
from twilio.rest import Client

from surfaces.sms.emulator import TwilioEmulator
from surfaces.sms.transport import HttpxTwilioClient


@pytest.fixture
async def client(emu: TwilioEmulator, kit: Any) -> AsyncIterator[Client]:
    http = HttpxTwilioClient()
    twilio = Client(kit.account, kit.token, http_client=http)
    twilio.api.base_url = emu.api_url
    yield twilio
    await http.close()


async def test_create_returns_twilios_resource(client: Client, emu: TwilioEmulator, kit: Any) -> None:
    message = await client.messages.create_async(
        to=kit.alice, from_=kit.bot, body="hello", status_callback=kit.public + "/sms/status"
    )
    assert message.sid is not None and message.sid.startswith("SM") and len(message.sid) == 34
    assert message.status == "queued"
    assert (message.to, message.from_, message.body) == (kit.alice, kit.bot, "hello")
    assert message.direction == "outbound-api"
    [sent] = emu.sent
    assert (sent.sid, sent.to, sent.from_, sent.body) == (message.sid, kit.alice, kit.bot, "hello")
    assert sent.status_callback == "https://cosigner.example.com/sms/status"


async def test_messaging_service_is_accepted(client: Client, emu: TwilioEmulator, kit: Any) -> None:
    message = await client.messages.create_async(
        to=kit.alice, messaging_service_sid="MG" + "1" * 32, body="hi"
    )
    assert message.status == "accepted"
    assert emu.sent[0].messaging_service_sid == "MG" + "1" * 32


@pytest.mark.parametrize(("to", "code"), [("5550000002", 21211), ("+0123", 21211), ("+1555abc0000", 21211)])
async def test_invalid_to(client: Client, emu: TwilioEmulator, kit: Any, to: str, code: int) -> None:
    with pytest.raises(TwilioRestException) as caught:
        await client.messages.create_async(to=to, from_=kit.bot, body="hi")
    assert (caught.value.status, caught.value.code) == (400, code)
    assert emu.sent == []


async def test_opted_out_number(client: Client, emu: TwilioEmulator, kit: Any) -> None:
    emu.opt_out(kit.alice)
    with pytest.raises(TwilioRestException) as caught:
        await client.messages.create_async(to=kit.alice, from_=kit.bot, body="hi")
    assert caught.value.code == 21610
    emu.opt_in(kit.alice)
    await client.messages.create_async(to=kit.alice, from_=kit.bot, body="hi")
    assert len(emu.texts_to(kit.alice)) == 1


async def test_bad_credentials(emu: TwilioEmulator, kit: Any) -> None:
    http = HttpxTwilioClient()
    twilio = Client(kit.account, "wrong-token", http_client=http)
    twilio.api.base_url = emu.api_url
    try:
        with pytest.raises(TwilioRestException) as caught:
            await twilio.messages.create_async(to=kit.alice, from_=kit.bot, body="hi")
    finally:
        await http.close()
    assert (caught.value.status, caught.value.code) == (401, 20003)


async def test_injected_failure_then_recovery(client: Client, emu: TwilioEmulator, kit: Any) -> None:
    emu.fail_next(status=503, code=20503, message="Service unavailable")
    with pytest.raises(TwilioRestException) as caught:
        await client.messages.create_async(to=kit.alice, from_=kit.bot, body="hi")
    assert (caught.value.status, caught.value.code) == (503, 20503)
    await client.messages.create_async(to=kit.alice, from_=kit.bot, body="hi")
    assert len(emu.sent) == 1


async def test_error_shape(emu: TwilioEmulator, kit: Any) -> None:
    async with httpx.AsyncClient(base_url=emu.api_url) as raw:
        response = await raw.post(
            f"/2010-04-01/Accounts/{kit.account}/Messages.json",
            data={"To": "nope", "From": kit.bot, "Body": "x"},
            auth=(kit.account, kit.token),
        )
    assert response.status_code == 400
    assert response.json() == {
        "code": 21211,
        "message": "The 'To' number nope is not a valid phone number.",
        "more_info": "https://www.twilio.com/docs/errors/21211",
        "status": 400,
    }


async def test_two_emulators_get_their_own_ports(kit: Any) -> None:
    async with (
        TwilioEmulator.running(kit.account, kit.token) as one,
        TwilioEmulator.running(kit.account, kit.token) as two,
    ):
        assert one.api_url != two.api_url
        assert one.api_url.startswith("http://127.0.0.1:")


async def test_a_whatsapp_template_is_rendered_with_its_quick_replies(
    client: Client, emu: TwilioEmulator, kit: Any
) -> None:
    sid = emu.add_template("Hello {{1}}, please answer.", [("Yes", "y:{{2}}"), ("No", "n:{{2}}")])
    message = await client.messages.create_async(
        to=f"whatsapp:{kit.alice}",
        from_=f"whatsapp:{kit.bot}",
        content_sid=sid,
        content_variables='{"1": "Alice", "2": "apv_1"}',
    )
    assert message.body == "Hello Alice, please answer."
    [sent] = emu.sent
    assert sent.content_sid == sid and sent.buttons == (("Yes", "y:apv_1"), ("No", "n:apv_1"))


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"content_sid": "HX" + "0" * 32}, 21655),
        ({"content_sid": "known", "content_variables": "not json"}, 21656),
        ({"body": "hi", "from_": "+15550000001"}, 63007),
    ],
)
async def test_whatsapp_mistakes_get_twilios_errors(
    client: Client, emu: TwilioEmulator, kit: Any, fields: dict[str, str], code: int
) -> None:
    known = emu.add_template("Hi {{1}}.", [])
    if fields.get("content_sid") == "known":
        fields = {**fields, "content_sid": known}
    with pytest.raises(TwilioRestException) as caught:
        await client.messages.create_async(
            **{"to": f"whatsapp:{kit.alice}", "from_": f"whatsapp:{kit.bot}", **fields}
        )
    assert caught.value.code == code
