"""Events API deliveries: every signed one is acknowledged (Slack turns off endpoints that fail)."""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx
import pytest

from surfaces.slack import SlackAdapter, SlackEmulator
from surfaces.slack.interactions import send_signed_event

CANARY = "canary-7f3e words a member typed"
MESSAGE_EVENT = {
    "token": "deprecated-verification-token",
    "team_id": "T1",
    "api_app_id": "A1",
    "event": {"type": "message", "channel": "C1", "user": "U2", "text": CANARY, "ts": "1700000000.000100"},
    "type": "event_callback",
    "event_id": "Ev0CANARY",
    "event_time": 1700000000,
    "authorizations": [{"enterprise_id": None, "team_id": "T1", "user_id": "U0BOT", "is_bot": True}],
    "is_ext_shared_channel": False,
}
RATE_LIMITED = {
    "token": "deprecated-verification-token",
    "type": "app_rate_limited",
    "team_id": "T1",
    "minute_rate_limited": 1700000000,
    "api_app_id": "A1",
}
UNKNOWN = {"type": "some_future_delivery", "team_id": "T1", "note": CANARY}


@pytest.mark.parametrize(
    ("payload", "logged"),
    [
        (MESSAGE_EVENT, "event_callback/message"),
        (RATE_LIMITED, "app_rate_limited"),
        (UNKNOWN, "some_future_delivery"),
        ({**UNKNOWN, "type": "Robert'); <script>"}, "unrecognized"),
    ],
)
async def test_a_signed_event_is_acknowledged_and_only_its_type_logged(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    caplog: pytest.LogCaptureFixture,
    payload: dict[str, Any],
    logged: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    response = await send_signed_event(http, "/slack/events", payload, secret=secret)
    assert response.status_code == 200, "Slack retries anything else, then disables the endpoint"
    assert desk.answers == [] and emu.messages == []
    assert any(logged in r.getMessage() for r in caplog.records if r.name.startswith("cosigner.slack"))
    for part in (CANARY, "Ev0CANARY", "<script>", "U0BOT"):
        assert part not in caplog.text, "an event body never reaches the log"


async def test_a_retried_event_is_acknowledged_too(
    adapter: SlackAdapter, http: httpx.AsyncClient, secret: str
) -> None:
    response = await send_signed_event(http, "/slack/events", RATE_LIMITED, secret=secret, retry=1)
    assert response.status_code == 200


async def test_url_verification_still_answers_the_challenge(
    adapter: SlackAdapter, http: httpx.AsyncClient, secret: str
) -> None:
    payload = {
        "token": "deprecated",
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        "type": "url_verification",
    }
    response = await send_signed_event(http, "/slack/events", payload, secret=secret)
    assert response.status_code == 200
    assert response.json() == {"challenge": payload["challenge"]}


@pytest.mark.parametrize("payload", [MESSAGE_EVENT, RATE_LIMITED, UNKNOWN])
async def test_a_forged_or_stale_event_gets_401(
    adapter: SlackAdapter, http: httpx.AsyncClient, secret: str, payload: dict[str, Any]
) -> None:
    forged = await send_signed_event(http, "/slack/events", payload, secret="not-the-signing-secret")
    assert forged.status_code == 401 and forged.json()["error"]["code"] == "INVALID_SIGNATURE"
    stale = await send_signed_event(
        http, "/slack/events", payload, secret=secret, timestamp=str(int(time.time()) - 600)
    )
    assert stale.status_code == 401
