"""Inbound Slack requests are verified before anything acts on them: real signatures only."""

from __future__ import annotations

import json
import logging
import time
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from surfaces.slack import SlackAdapter
from surfaces.slack.adapter import MAX_BODY
from surfaces.slack.emulator import SlackEmulator
from surfaces.slack.interactions import block_actions_payload, send_signed, signed_headers
from tests.api.test_error_bodies import error_body


async def posted_card(adapter: SlackAdapter, make_card: Any, make_route: Any) -> tuple[str, str]:
    delivered = await adapter.deliver(make_card(), make_route())
    return delivered.conversation, delivered.message_refs[0]


async def test_a_really_signed_click_is_accepted(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    make_card: Any,
    make_route: Any,
) -> None:
    channel, ts = await posted_card(adapter, make_card, make_route)
    response = await emu.click(http, channel=channel, ts=ts, action_id="cosigner.approve", secret=secret)
    assert response.status_code == 200
    assert len(desk.answers) == 1


@pytest.mark.parametrize(
    "forgery",
    [
        {"signature": "v0=" + "0" * 64},
        {"signature": "nonsense"},
        {"secret": "not-the-signing-secret"},
        {"timestamp_offset": "-310"},  # offsets: collection may run minutes before the test
        {"timestamp_offset": "400"},
        {"timestamp": "not-a-number"},
        {"timestamp": "1e9"},
        {"timestamp": ""},
    ],
)
async def test_forged_or_stale_requests_get_401(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    make_card: Any,
    make_route: Any,
    forgery: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    channel, ts = await posted_card(adapter, make_card, make_route)
    options = {"secret": secret, **forgery}
    if "timestamp_offset" in options:
        options["timestamp"] = str(int(time.time()) + int(options.pop("timestamp_offset")))
    caplog.set_level(logging.DEBUG)
    response = await emu.click(http, channel=channel, ts=ts, action_id="cosigner.approve", **options)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "INVALID_SIGNATURE"
    assert desk.answers == []
    assert "block_actions" not in caplog.text  # the body is never logged


async def test_missing_headers_get_401(adapter: SlackAdapter, http: httpx.AsyncClient) -> None:
    body = urlencode({"payload": json.dumps({"type": "block_actions"})})
    response = await http.post(
        "/slack/events", content=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert response.status_code == 401


async def test_a_body_changed_after_signing_gets_401(
    adapter: SlackAdapter, http: httpx.AsyncClient, secret: str, desk: Any
) -> None:
    signed_for = urlencode({"payload": json.dumps({"type": "block_actions", "n": 1})}).encode()
    sent = urlencode({"payload": json.dumps({"type": "block_actions", "n": 2})}).encode()
    response = await http.post("/slack/events", content=sent, headers=signed_headers(signed_for, secret))
    assert response.status_code == 401


async def test_a_signed_but_malformed_click_is_refused_to_the_clicker(
    adapter: SlackAdapter, emu: SlackEmulator, http: httpx.AsyncClient, secret: str, desk: Any
) -> None:
    payload = block_actions_payload(
        action={"type": "button", "action_id": "cosigner.approve", "value": "apr 01 <!channel>"},
        blocks=[],
        channel="C1",
        ts="1700000000.000100",
        app_id="A1",
    )
    response = await send_signed(http, "/slack/events", payload, secret=secret)
    assert response.status_code == 200
    assert desk.answers == []
    await adapter.stop()
    (note,) = emu.ephemerals
    assert note.text is not None and "INVALID_REQUEST" in note.text


async def test_routes_before_start_answer_503(desk: Any) -> None:
    from starlette.applications import Starlette

    from surfaces.slack import SlackConfig

    slack = SlackAdapter(SlackConfig(signing_secret="s", bot_token="xoxb-1"), desk)
    app = Starlette(routes=slack.routes())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://x") as client:
        assert (await client.post("/slack/events", content=b"")).status_code == 503
        assert (await client.get("/slack/install")).status_code == 503


async def test_single_workspace_mode_has_no_install_page(
    adapter: SlackAdapter, http: httpx.AsyncClient
) -> None:
    response = await http.get("/slack/install")
    assert response.status_code == 404
    assert "SLACK_CLIENT_ID" in response.text


async def test_an_oversized_body_is_refused_before_verification(
    adapter: SlackAdapter, http: httpx.AsyncClient, secret: str
) -> None:
    body = b"payload=" + b"x" * MAX_BODY
    response = await http.post("/slack/events", content=body, headers=signed_headers(body, secret))
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "INVALID_REQUEST"
    assert response.json()["error"]["limit"] == MAX_BODY


async def test_its_refusals_are_error_bodies(adapter: SlackAdapter, http: httpx.AsyncClient) -> None:
    unsigned = await http.post("/slack/events", content=b"payload=%7B%7D")
    too_large = await http.post("/slack/events", content=b"x" * (MAX_BODY + 1))
    assert unsigned.status_code == 401 and error_body(unsigned) == "INVALID_SIGNATURE"
    assert too_large.status_code == 413 and error_body(too_large) == "INVALID_REQUEST"
