"""The Slack surface: posts approval cards, updates them when they close, and takes clicks.

Inbound requests are served by Bolt behind one Starlette route per path; outbound calls go
through `web_client` (retries, error translation) and `pacing` (about one post per second
per channel). One workspace runs on `SLACK_BOT_TOKEN`; many run on OAuth installs kept in
the installation store the config carries. With an app-level token (`SLACK_APP_TOKEN`) the
same Bolt app also takes clicks over Socket Mode (`socket_mode.py`), with no public URL.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization.async_authorize import AsyncInstallationStoreAuthorize
from slack_sdk.errors import SlackApiError
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route as StarletteRoute

from contracts.batches import Batch, BatchShown
from contracts.enums import ApprovalStatus, SurfaceType
from contracts.errors import InvalidRequest, InvalidSignature, SurfaceUnavailable
from contracts.ports import ApprovalCard, ApprovalDesk, Delivered, Route, SlackRoute
from surfaces.bodies import limited
from surfaces.slack import batch_clicks
from surfaces.slack.batch import batch_blocks, withdrawn_blocks
from surfaces.slack.blocks import to_blocks
from surfaces.slack.clicks import Clicks
from surfaces.slack.closed_blocks import to_closed_blocks
from surfaces.slack.commands import Commands
from surfaces.slack.follow_up_text import reminder_text
from surfaces.slack.handoff_blocks import to_closed_handoff_blocks, to_handoff_blocks
from surfaces.slack.home import HOME_EVENT, Pending
from surfaces.slack.installs import INSTALL_PATH, REDIRECT_PATH, Installs
from surfaces.slack.pacing import ChannelPacer
from surfaces.slack.parse import event_type
from surfaces.slack.shape import bolt_body
from surfaces.slack.socket_mode import SocketMode
from surfaces.slack.web_client import (
    SCOPES,
    TIMEOUT_SECONDS,
    bot_scopes,
    build_client,
    translated,
)

__all__ = ["SCOPES", "SlackAdapter", "SlackConfig", "SlackConfigError"]

logger = logging.getLogger("cosigner.slack")
EVENTS_PATH = "/slack/events"
# A click on a card is 50 to 120 KB form-encoded; the largest body Cosigner's own views can
# bring back is an edit modal's submission (40 inputs of 3,000 characters, each in the view
# and in its state: about 310 KB of ASCII, more with non-ASCII text sent as \u escapes).
MAX_BODY = 1024 * 1024


class SlackConfigError(ValueError):
    """The Slack settings cannot work together; the message names the variable to set."""


@dataclass(frozen=True)
class SlackConfig:
    """Slack settings, as read from `SLACK_*` environment variables."""

    signing_secret: str
    bot_token: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    api_url: str | None = None
    app_id: str | None = None
    scopes: tuple[str, ...] = field(default_factory=bot_scopes)
    # Where OAuth installs are kept; required when client_id and client_secret are set.
    installations: AsyncInstallationStore | None = None
    oauth_states: AsyncOAuthStateStore | None = None
    # An app-level token (xapp-…): clicks then arrive over Socket Mode, not POST /slack/events.
    app_token: str | None = None
    # The inbox (`…/inbox/`) when sign-in is configured: a step-up card links there instead of Approve.
    inbox_url: str | None = None

    @property
    def multi_workspace(self) -> bool:
        """True when installs come through OAuth rather than one bot token."""
        return bool(self.client_id and self.client_secret)


class SlackAdapter:
    """`SurfaceAdapter` for Slack."""

    name = "slack"

    def __init__(self, config: SlackConfig, desk: ApprovalDesk) -> None:
        if not config.signing_secret.strip() and not config.app_token:
            raise SlackConfigError(
                "set SLACK_SIGNING_SECRET (requests to /slack/events) or SLACK_APP_TOKEN (Socket Mode)"
            )
        if not config.multi_workspace and not config.bot_token:
            raise SlackConfigError(
                "set SLACK_BOT_TOKEN (one workspace) or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET"
            )
        self.config = config
        self._desk = desk
        self._home = Pending(desk)
        # None under Socket Mode alone: `/slack/events` is then not served at all.
        self._verifier = SignatureVerifier(config.signing_secret) if config.signing_secret.strip() else None
        self._pacer = ChannelPacer(rate=1.0, burst=3)
        self._clicks = Clicks(desk)
        self._commands = Commands(desk)
        self._installs: Installs | None = None
        if config.client_id and config.client_secret:
            if config.installations is None or config.oauth_states is None:
                raise SlackConfigError(
                    "multi-workspace Slack (SLACK_CLIENT_ID) needs an installation store "
                    "and an OAuth state store"
                )
            self._installs = Installs(
                config.client_id,
                config.client_secret,
                config.scopes,
                config.installations,
                config.oauth_states,
                lambda org: desk.tenant_for_org(SurfaceType.SLACK, org),
            )
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None
        self._handler: AsyncSlackRequestHandler | None = None
        self._socket: SocketMode | None = None
        if config.app_token is not None:
            try:
                self._socket = SocketMode(config.app_token)
            except ValueError as exc:
                raise SlackConfigError(str(exc)) from exc

    def routes(self) -> list[Any]:
        """`POST /slack/events` (when a signing secret is set), and the two OAuth routes."""
        routes = [
            StarletteRoute(INSTALL_PATH, self._oauth, methods=["GET"]),
            StarletteRoute(REDIRECT_PATH, self._oauth, methods=["GET"]),
        ]
        if self.config.signing_secret.strip():
            # Without a secret nothing could be verified: the route is not served at all.
            routes.insert(0, StarletteRoute(EVENTS_PATH, self._events, methods=["POST"]))
        return routes

    async def start(self) -> None:
        """Open the HTTP session and the Bolt app inside the running loop."""
        if self._handler is not None:
            return
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS))
        token = None if self._installs else self.config.bot_token
        self._client = build_client(token, self.config.api_url, self._session)
        bolt_logger = logging.getLogger("cosigner.slack.bolt")
        bolt_logger.addFilter(_quiet_token_notice)
        authorize = None
        if self._installs is not None:
            # Cached so a click costs no auth.test round trip to Slack before it is acked.
            authorize = AsyncInstallationStoreAuthorize(
                logger=bolt_logger, installation_store=self._installs.store, cache_enabled=True
            )
        app = AsyncApp(
            name="cosigner.slack.bolt",  # its per-request logger is `bolt_logger`, not ours
            logger=bolt_logger,
            signing_secret=self.config.signing_secret,
            client=self._client,
            authorize=authorize,  # type: ignore[arg-type]  # Bolt accepts AsyncAuthorize objects
            oauth_flow=self._installs.flow if self._installs else None,
            process_before_response=True,
            # `_events` has already verified the signature with slack_sdk's SignatureVerifier
            # (the check Bolt runs) before Bolt sees the request; a second HMAC per click
            # would only add latency.
            request_verification_enabled=False,
        )
        self._commands.register(app)  # before the clicks' catch-all listener
        self._home.register(app)
        batch_clicks.register(app, self._desk, self._clicks.tell, self._clicks.later)
        self._clicks.register(app)
        self._handler = AsyncSlackRequestHandler(app)
        if self._socket is not None:
            try:
                await self._socket.open(app, self._client)
            except SurfaceUnavailable:
                await self.stop()
                raise

    async def stop(self) -> None:
        """Close Socket Mode, let follow-up tasks finish, then close the HTTP session."""
        if self._socket is not None:
            await self._socket.close()
        await self._clicks.drain()
        await self._home.drain()
        if self._session is not None:
            await self._session.close()
        self._session = self._client = self._handler = None

    def _linked(self, card: ApprovalCard) -> ApprovalCard:
        """The card with the inbox's address, which a step-up card links to instead of Approve."""
        return replace(card, inbox_url=self.config.inbox_url) if card.step_up else card

    async def deliver(self, card: ApprovalCard, route: Route) -> Delivered:
        """Post the card in the route's channel (or thread); raises `SurfaceUnavailable`."""
        slack_route = _slack(route)
        card = self._linked(card)
        blocks, text = (to_handoff_blocks if card.handoff else to_blocks)(card, slack_route)
        client, app_id = await self._client_for(slack_route)
        channel = slack_route.channel_id
        if channel[:1] in ("U", "W"):
            # A user id as channel means "DM them"; the receipt must hold the D… id clicks carry.
            async with translated("conversations.open", channel):
                opened = await client.conversations_open(users=channel)
            channel = opened["channel"]["id"]
        await self._pacer.wait(channel)
        async with translated("chat.postMessage", channel):
            posted = await client.chat_postMessage(
                channel=channel,
                thread_ts=slack_route.thread_ts,
                text=text,
                blocks=blocks,
                unfurl_links=False,
                unfurl_media=False,
            )
        self._home.refresh_soon(client, slack_route, {card.approval_id: (posted["channel"], posted["ts"])})
        return Delivered(
            surface=SurfaceType.SLACK,
            conversation=posted["channel"],
            message_refs=(posted["ts"],),
            app_id=app_id,
        )

    async def show_outcome(self, card: ApprovalCard, route: Route, delivered: Delivered) -> None:
        """Replace the card in place with its closed form (no buttons, the outcome shown), or
        while a quorum is still short, with its progress (the buttons stay for the others)."""
        slack_route = _slack(route)
        if not delivered.message_refs:
            return
        if card.status is ApprovalStatus.PENDING:
            blocks, text = to_blocks(self._linked(card), slack_route)
        else:
            blocks, text = (to_closed_handoff_blocks if card.handoff else to_closed_blocks)(card, slack_route)
        client, _ = await self._client_for(slack_route)
        async with translated("chat.update", delivered.conversation):
            await client.chat_update(
                channel=delivered.conversation,
                ts=delivered.message_refs[0],
                text=text,
                blocks=blocks,
            )
        self._home.refresh_soon(client, slack_route)

    async def show_batch(self, batch: Batch, route: Route, delivered: Delivered | None) -> BatchShown:
        """Post or update the batch card in the requests' conversation (`contracts.batches`)."""
        slack_route = _slack(route)
        made = batch_blocks(batch, slack_route) if batch.cards else None
        if made is None and delivered is None:
            return BatchShown(None, offered=False)  # nothing to withdraw, nothing posted
        blocks, text = made or withdrawn_blocks(batch.tool_name)
        client, app_id = await self._client_for(slack_route)
        if delivered is not None and delivered.message_refs:
            async with translated("chat.update", delivered.conversation):
                await client.chat_update(
                    channel=delivered.conversation, ts=delivered.message_refs[0], text=text, blocks=blocks
                )
            return BatchShown(delivered, offered=made is not None)
        channel = batch.conversation
        await self._pacer.wait(channel)
        async with translated("chat.postMessage", channel):
            posted = await client.chat_postMessage(
                channel=channel, thread_ts=slack_route.thread_ts, text=text, blocks=blocks, unfurl_links=False
            )
        receipt = Delivered(SurfaceType.SLACK, posted["channel"], (posted["ts"],), app_id=app_id)
        return BatchShown(receipt, offered=True)

    async def remind(
        self, card: ApprovalCard, route: Route, delivered: Delivered, approvers: Sequence[str]
    ) -> None:
        """Reply in the card's thread, mentioning the approvers still to answer."""
        slack_route = _slack(route)
        if not delivered.message_refs:
            raise SurfaceUnavailable("the card was never posted, so there is no thread to remind in")
        client, _ = await self._client_for(slack_route)
        channel = delivered.conversation
        # A card posted in a thread is answered in that thread: Slack threads are one level.
        thread = slack_route.thread_ts or delivered.message_refs[0]
        await self._pacer.wait(channel)
        async with translated("chat.postMessage", channel):
            await client.chat_postMessage(
                channel=channel,
                thread_ts=thread,
                text=reminder_text(card, approvers),
                unfurl_links=False,
                unfurl_media=False,
            )

    async def show_escalated(self, card: ApprovalCard, route: Route, delivered: Delivered) -> None:
        """Update the pending card in place so it says where it was escalated to."""
        slack_route = _slack(route)
        if not delivered.message_refs or card.handoff is not None:
            return
        blocks, text = to_blocks(self._linked(card), slack_route)
        client, _ = await self._client_for(slack_route)
        async with translated("chat.update", delivered.conversation):
            await client.chat_update(
                channel=delivered.conversation, ts=delivered.message_refs[0], text=text, blocks=blocks
            )

    async def permalink(self, route: Route, delivered: Delivered) -> str | None:
        """A link to a delivered card (`contracts.pending.Permalinks`); None if Slack gives none."""
        if not delivered.message_refs:
            return None
        client, _ = await self._client_for(_slack(route))
        try:
            answer = await client.chat_getPermalink(
                channel=delivered.conversation, message_ts=delivered.message_refs[0]
            )
        except SlackApiError:
            return None
        link = answer.get("permalink")
        return link if isinstance(link, str) else None

    async def _client_for(self, route: SlackRoute) -> tuple[AsyncWebClient, str | None]:
        if self._client is None or self._session is None:
            raise SurfaceUnavailable("the Slack surface is not started; call start() first")
        if self._installs is None:
            return self._client, self.config.app_id
        where = route.enterprise_id or route.team_id
        try:
            bot = await self._installs.find_bot(route.team_id, route.enterprise_id)
        except SurfaceUnavailable:
            raise
        except Exception as exc:  # the store's SQLAlchemy errors stop at this boundary
            raise SurfaceUnavailable(f"reading the Slack installation for {where} failed") from exc
        if bot is None or not bot.bot_token:
            raise SurfaceUnavailable(
                f"Cosigner is not installed in Slack workspace {where}; install it via {INSTALL_PATH}",
                team=route.team_id,
            )
        client = build_client(bot.bot_token, self.config.api_url, self._session)
        return client, self.config.app_id or bot.app_id

    async def _events(self, request: Request) -> Response:
        if self._handler is None:
            return PlainTextResponse("The Slack surface is not started.", status_code=503)
        # Read once, at most MAX_BODY bytes; Bolt is handed this same request, body read.
        bounded = limited(request, MAX_BODY)
        try:
            body = await bounded.body()
        except InvalidRequest as exc:  # BodyTooLarge (413), or a malformed Content-Length
            logger.warning("Refused a Slack request: %s", exc.message)
            return JSONResponse(exc.body(), status_code=exc.status)
        if not self._signed(body, request):
            # Never log the body: it can carry card content and personal data.
            logger.warning(
                "Refused a Slack request: bad or stale signature "
                "(check SLACK_SIGNING_SECRET and the server clock)"
            )
            refused = InvalidSignature(
                "the request is not signed with this app's signing secret, or is older than 5 minutes"
            )
            return JSONResponse(refused.body(), status_code=refused.status)
        try:
            # Bolt would fail (500) on a payload Slack never sends: refused here, naming the field.
            bolt_body(body, _content_type(request))
        except InvalidRequest as exc:
            logger.warning("Refused a signed Slack request: %s", exc.message)
            return JSONResponse(exc.body(), status_code=exc.status)
        kind = event_type(body)
        if kind is not None and kind != HOME_EVENT:
            # Cosigner acts on no event but the Home tab's, but a non-2xx makes Slack retry and, in the end,
            # turn the endpoint off; so every signed event is acknowledged.
            logger.info(
                "Acknowledged a Slack event (%s) and ignored it; Cosigner needs no event "
                "subscription (see Event Subscriptions in the Slack app settings)",
                kind,
            )
            return Response(status_code=200)
        return await self._handler.handle(bounded)

    async def _oauth(self, request: Request) -> Response:
        if self._handler is None:
            return PlainTextResponse("The Slack surface is not started.", status_code=503)
        if self._installs is None:
            return PlainTextResponse(
                "This Cosigner serves one Slack workspace (SLACK_BOT_TOKEN); installs are off. "
                "Set SLACK_CLIENT_ID and SLACK_CLIENT_SECRET to install into many workspaces.",
                status_code=404,
            )
        try:
            # Bolt reads the body of these GETs too (and uses none of it): bounded like any.
            return await self._handler.handle(limited(request, MAX_BODY))
        except InvalidRequest as exc:
            return JSONResponse(exc.body(), status_code=exc.status)

    def _signed(self, body: bytes, request: Request) -> bool:
        # Checked here as well as in Bolt: Bolt's own check raises (500) on a non-numeric
        # timestamp and logs the raw body on failure.
        timestamp = request.headers.get("x-slack-request-timestamp")
        signature = request.headers.get("x-slack-signature")
        if self._verifier is None:
            return False
        try:
            return self._verifier.is_valid(body, timestamp, signature)
        except (ValueError, TypeError, OverflowError):
            return False


def _content_type(request: Request) -> str | None:
    """The Content-Type as Bolt reads it: the header up to its first `;`, as sent."""
    header = request.headers.get("content-type")
    return header.split(";")[0] if header else None


def _quiet_token_notice(record: logging.LogRecord) -> bool:
    # Bolt reads SLACK_BOT_TOKEN from the environment by itself and then warns that the
    # client we pass (with retry handlers) wins; that is intended, so the notice is noise.
    return "will be unused" not in record.getMessage()


def _slack(route: Route) -> SlackRoute:
    if not isinstance(route, SlackRoute):
        raise SurfaceUnavailable(f"the Slack surface cannot deliver to a {route.surface} route")
    return route
