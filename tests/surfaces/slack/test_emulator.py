"""The emulator driven by the real slack_sdk AsyncWebClient, with Cosigner's retries."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from contracts.errors import SurfaceUnavailable
from surfaces.slack.emulator import SlackEmulator
from surfaces.slack.web_client import build_client, translated


async def test_serves_on_a_free_loopback_port() -> None:
    async with SlackEmulator.running() as one, SlackEmulator.running() as two:
        assert one.api_url.startswith("http://127.0.0.1:") and one.api_url.endswith("/api/")
        assert one.port != two.port


async def test_post_update_and_records(emu: SlackEmulator) -> None:
    client = AsyncWebClient(token="xoxb-1", base_url=emu.api_url)
    auth = await client.auth_test()
    assert auth["team_id"] == "T1" and auth["bot_id"]
    posted = await client.chat_postMessage(channel="C1", text="hi", blocks=[{"type": "divider"}])
    ts = posted["ts"]
    assert posted["channel"] == "C1"
    whole, frac = ts.split(".")
    assert len(frac) == 6 and whole.isdigit()
    await client.chat_update(channel="C1", ts=ts, text="bye", blocks=[])
    assert [m.method for m in emu.messages] == ["chat.postMessage", "chat.update"]
    latest = emu.latest("C1", ts)
    assert latest is not None and latest.text == "bye"
    again = await client.chat_postMessage(channel="C1", text="two")
    assert float(again["ts"]) > float(ts)


async def test_ephemeral_dm_users_and_views(emu: SlackEmulator) -> None:
    client = AsyncWebClient(token="xoxb-1", base_url=emu.api_url)
    eph = await client.chat_postEphemeral(channel="C1", user="U1", text="only you")
    assert eph["message_ts"] and emu.ephemerals[0].user == "U1"
    opened = await client.conversations_open(users="U1")
    assert opened["channel"]["id"].startswith("D")
    assert (await client.conversations_open(users="U1"))["channel"]["id"] == opened["channel"]["id"]
    dm = await client.chat_postMessage(channel="U1", text="to a user id")
    assert dm["channel"] == opened["channel"]["id"]
    info = await client.users_info(user="U1")
    assert info["user"]["id"] == "U1" and info["user"]["team_id"] == "T1"
    view = {"type": "modal", "title": {"type": "plain_text", "text": "x"}, "blocks": []}
    shown = await client.views_open(trigger_id="1.2.3", view=view)
    assert shown["view"]["id"].startswith("V") and emu.views[0].trigger_id == "1.2.3"


async def test_slack_error_shapes(emu: SlackEmulator) -> None:
    with pytest.raises(SlackApiError) as caught:
        await AsyncWebClient(base_url=emu.api_url).chat_postMessage(channel="C1", text="x")
    assert caught.value.response["error"] == "not_authed"
    with pytest.raises(SlackApiError) as caught:
        await AsyncWebClient(token="xoxp-bad", base_url=emu.api_url).auth_test()
    assert caught.value.response["error"] == "invalid_auth"
    client = AsyncWebClient(token="xoxb-1", base_url=emu.api_url)
    with pytest.raises(SlackApiError) as caught:
        await client.chat_update(channel="C1", ts="1.000001", text="x")
    assert caught.value.response["error"] == "message_not_found"
    emu.missing_channels.add("C404")
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel="C404", text="x")
    assert caught.value.response["error"] == "channel_not_found"
    big = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel="C1", text="x", blocks=big)
    assert caught.value.response["error"] == "invalid_blocks"


async def test_form_bodies_and_bearer_are_both_accepted(emu: SlackEmulator) -> None:
    async with httpx.AsyncClient() as http:
        form = await http.post(
            emu.api_url + "chat.postMessage", data={"token": "xoxb-1", "channel": "C1", "text": "f"}
        )
        bearer = await http.post(
            emu.api_url + "chat.postMessage",
            json={"channel": "C1", "text": "j"},
            headers={"Authorization": "Bearer xoxb-1"},
        )
    assert form.json()["ok"] and bearer.json()["ok"]
    assert [m.text for m in emu.messages] == ["f", "j"]


async def test_plain_client_does_not_retry_429(emu: SlackEmulator) -> None:
    emu.fail_next("chat.postMessage", status=429, retry_after=1)
    with pytest.raises(SlackApiError) as caught:
        await AsyncWebClient(token="xoxb-1", base_url=emu.api_url).chat_postMessage(channel="C1", text="x")
    assert caught.value.response.status_code == 429
    assert caught.value.response["error"] == "ratelimited"
    assert caught.value.response.headers["Retry-After"] == "1"


async def test_429_then_success_honours_retry_after(emu: SlackEmulator) -> None:
    emu.fail_next("chat.postMessage", status=429, retry_after=1)
    client = build_client("xoxb-1", emu.api_url, None)
    started = time.monotonic()
    posted = await client.chat_postMessage(channel="C1", text="x")
    assert posted["ok"]
    assert time.monotonic() - started >= 1.0
    assert [m for m, _ in emu.calls].count("chat.postMessage") == 2


async def test_500s_then_surface_unavailable(emu: SlackEmulator) -> None:
    emu.fail_next("chat.postMessage", status=500, times=5)
    client = build_client("xoxb-1", emu.api_url, None)
    with pytest.raises(SurfaceUnavailable) as caught:
        async with translated("chat.postMessage", "C1"):
            await client.chat_postMessage(channel="C1", text="x")
    assert caught.value.details["slackError"] == "internal_error"
    assert [m for m, _ in emu.calls].count("chat.postMessage") == 3  # one try, two retries
    assert emu.messages == []


async def test_one_500_is_retried(emu: SlackEmulator) -> None:
    emu.fail_next("chat.postMessage", status=503)
    client = build_client("xoxb-1", emu.api_url, None)
    assert (await client.chat_postMessage(channel="C1", text="x"))["ok"]


async def test_unreachable_slack_is_surface_unavailable() -> None:
    async with SlackEmulator.running() as gone:
        url = gone.api_url
    client = build_client("xoxb-1", url, None)
    with pytest.raises(SurfaceUnavailable, match="could not be reached"):
        async with translated("chat.postMessage", "C1"):
            await client.chat_postMessage(channel="C1", text="x")


async def test_slow_answers(emu: SlackEmulator) -> None:
    emu.fail_next("auth.test", status=200, delay=0.3)
    started = time.monotonic()
    await AsyncWebClient(token="xoxb-1", base_url=emu.api_url).auth_test()
    assert time.monotonic() - started >= 0.3


async def test_error_answers_with_status_200(emu: SlackEmulator) -> None:
    emu.fail_next("chat.postMessage", status=200, error="not_in_channel")
    with pytest.raises(SurfaceUnavailable, match="invite the Cosigner app"):
        async with translated("chat.postMessage", "C1"):
            await build_client("xoxb-1", emu.api_url, None).chat_postMessage(channel="C1", text="x")


# slack_sdk builds aiohttp.BasicAuth for oauth.v2.access, which aiohttp 3.14 deprecates.
@pytest.mark.filterwarnings("ignore:BasicAuth is deprecated:DeprecationWarning")
async def test_oauth_code_exchange(emu: SlackEmulator) -> None:
    code = emu.issue_oauth_code("T2")
    client = AsyncWebClient(base_url=emu.api_url)
    got = await client.oauth_v2_access(client_id="cid", client_secret="cs", code=code)
    assert got["team"]["id"] == "T2" and got["access_token"].startswith("xoxb-")
    assert (await client.auth_test(token=got["access_token"]))["team_id"] == "T2"
    with pytest.raises(SlackApiError) as caught:
        await client.oauth_v2_access(client_id="cid", client_secret="cs", code=code)
    assert caught.value.response["error"] == "invalid_code"


async def test_concurrent_calls(emu: SlackEmulator) -> None:
    client = AsyncWebClient(token="xoxb-1", base_url=emu.api_url)
    posted = await asyncio.gather(*(client.chat_postMessage(channel="C1", text=str(i)) for i in range(10)))
    assert len({p["ts"] for p in posted}) == 10
