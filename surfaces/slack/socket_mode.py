"""Slack over Socket Mode: clicks arrive on a WebSocket the bot opens, so no public URL.

Bolt's `AsyncSocketModeHandler` (on slack_sdk's aiohttp Socket Mode client) dispatches each
envelope to the same Bolt app, listeners and answer checks as `POST /slack/events`, and
acknowledges it with what the listener answered, so a click is acknowledged only after its
decision is committed (the app runs with `process_before_response`). Envelopes carry no
HTTP signature: the conversation, message, tenant and approver checks are what protect them,
and the socket itself is opened with the app-level token only Slack and the operator hold.
An envelope whose payload Bolt would fail on (`shape.check`) is acknowledged, logged with
the field at fault, and goes no further: nothing is decided, and Slack does not resend it.
(A payload that is not a JSON object at all never gets this far: slack_sdk drops it, logged.)
"""

from __future__ import annotations

import asyncio
import logging

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from contracts.errors import InvalidRequest, SurfaceUnavailable
from surfaces.slack.shape import check
from surfaces.slack.web_client import translated

logger = logging.getLogger("cosigner.slack.socket_mode")
# slack_sdk's client, at DEBUG, logs every frame it receives and decodes a binary one as
# UTF-8 first: a keepalive PING carries arbitrary bytes (uvicorn's and websockets' are
# random), so with DEBUG on (`cosigner dev` sets it on Cosigner's loggers) the decode
# raised `UnicodeDecodeError`, logged as a failed receive, and the PING went unanswered.
# Its DEBUG lines would also print each envelope whole, a call's parameters included. So the
# client logs under its own name, never below INFO, whatever level Cosigner's loggers have.
client_logger = logging.getLogger("cosigner.slack.socket_mode.client")
client_logger.setLevel(logging.INFO)
APP_TOKEN_PREFIX = "xapp-"
CONNECT_SECONDS = 10.0  # slack_sdk retries a failed connect forever; start-up must not hang


class _CheckedHandler(AsyncSocketModeHandler):
    """Bolt's Socket Mode handler, but a payload Bolt would fail on is refused before it."""

    async def handle(self, connection: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        try:
            check(req.payload)
        except InvalidRequest as exc:
            logger.warning("Refused a Slack Socket Mode envelope (type %s): %s", req.type, exc.message)
            # Acknowledged, so Slack does not resend what would be refused again.
            await connection.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        await super().handle(connection, req)


class SocketMode:
    """One Socket Mode connection for a Bolt app, opened by `open` and closed by `close`."""

    def __init__(self, app_token: str) -> None:
        if not app_token.startswith(APP_TOKEN_PREFIX):
            raise ValueError(
                "SLACK_APP_TOKEN must be an app-level token starting with xapp- "
                "(Basic Information → App-Level Tokens, scope connections:write)"
            )
        self._app_token = app_token
        self._handler: AsyncSocketModeHandler | None = None

    async def open(self, app: AsyncApp, client: AsyncWebClient) -> None:
        """Ask Slack for a WebSocket URL and connect; raises `SurfaceUnavailable` if it cannot."""
        if self._handler is not None:
            return
        # The first URL is asked for here, so a wrong token or an unreachable Slack is one
        # clear error at start-up rather than the client's endless retry loop.
        async with translated("apps.connections.open", "Socket Mode"):
            opened = await client.apps_connections_open(app_token=self._app_token)
        handler = _CheckedHandler(app, self._app_token, logger=client_logger, web_client=client)
        handler.client.wss_uri = str(opened["url"])
        try:
            await asyncio.wait_for(handler.connect_async(), CONNECT_SECONDS)  # type: ignore[no-untyped-call]
        except TimeoutError as exc:
            await handler.close_async()  # type: ignore[no-untyped-call]
            raise SurfaceUnavailable(
                "could not open the Slack Socket Mode WebSocket within "
                f"{CONNECT_SECONDS:.0f} s; check the network (and SLACK_API_URL)"
            ) from exc
        self._handler = handler
        logger.info("Slack Socket Mode connected")

    async def close(self) -> None:
        """Close the WebSocket and the client's own HTTP session."""
        if self._handler is not None:
            await self._handler.close_async()  # type: ignore[no-untyped-call]
        self._handler = None
