"""Socket Mode frames that are not envelopes: a keepalive PING whose payload is not UTF-8
(0xb4, as a random keepalive payload may be) is answered, and logs no error, even with
Cosigner's loggers at DEBUG as `cosigner dev` sets them."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator

import pytest
from websockets.asyncio.server import ServerConnection, serve

from contracts.ports import ApprovalDesk
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.emulator import APP_TOKEN, SlackEmulator
from tests.harness import DEFAULT_POLICY, cosigner_app

APP_ID = "A0COSIGNER"
PAYLOAD = b"\xb4\x9f\x00\x01"  # not UTF-8: starts with a continuation byte


class FakeSlack:
    """A Socket Mode server: hello, then a PING with `PAYLOAD`, whose PONG it waits for."""

    def __init__(self) -> None:
        self.ponged: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def handle(self, ws: ServerConnection) -> None:
        await ws.send(
            json.dumps({"type": "hello", "num_connections": 1, "connection_info": {"app_id": APP_ID}})
        )
        pong = await ws.ping(PAYLOAD)
        await pong
        self.ponged.set_result(None)
        await ws.wait_closed()


@pytest.fixture
def debug_logs() -> Iterator[None]:
    ours = logging.getLogger("cosigner")
    was = ours.level
    ours.setLevel(logging.DEBUG)  # what `cosigner dev` does (bot.observability.logs.configure)
    try:
        yield
    finally:
        ours.setLevel(was)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeSlack, str]]:
    slack = FakeSlack()
    async with serve(slack.handle, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield slack, f"ws://127.0.0.1:{port}/"


async def test_a_ping_that_is_not_utf8_is_answered_and_logs_no_error(
    debug_logs: None, fake: tuple[FakeSlack, str], caplog: pytest.LogCaptureFixture
) -> None:
    slack, url = fake
    caplog.set_level(logging.DEBUG, logger="cosigner")
    async with SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu:
        emu.socket_url = lambda: url  # type: ignore[method-assign]  # apps.connections.open answers ours
        config = SlackConfig(
            signing_secret="", bot_token="xoxb-acme", api_url=emu.api_url, app_id=APP_ID, app_token=APP_TOKEN
        )

        def factory(desk: ApprovalDesk) -> SlackAdapter:
            return SlackAdapter(config, desk)

        async with cosigner_app(DEFAULT_POLICY, surfaces=[factory]):
            await asyncio.wait_for(slack.ponged, 10)
    failed = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not failed, failed
    assert not any("UnicodeDecodeError" in r.getMessage() for r in caplog.records)
