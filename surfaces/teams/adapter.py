"""The Teams surface: Adaptive Cards sent through the Bot Connector, answered by `Action.Execute`.

`deliver` posts the card to the route's conversation and `show_outcome` replaces it with
the closed card, both through the Agents SDK's `ConnectorClient` (aiohttp) pointed at the
Bot Connector's service URL, with our app token (`auth.ClientCredentials`). Bot Connector
and network errors never leave this module: they become `SurfaceUnavailable`, which makes
the engine fail the request closed. `POST /teams/messages` receives activities: the JWT is
checked (`auth.ConnectorAuth`), a card action parsed (`activity.py`) and handed to the
desk, which runs the same answer checks as every surface; the invoke is answered with the
card the clicker should now see.
"""

from __future__ import annotations

import enum
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import httpx
from microsoft_agents.activity import Activity
from microsoft_agents.hosting.core.connector.client import ConnectorClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from contracts.enums import ApprovalStatus, SurfaceType
from contracts.errors import CosignerError, InvalidRequest, InvalidSignature, SurfaceUnavailable
from contracts.ports import ApprovalCard, ApprovalDesk, Delivered, TeamsRoute
from contracts.ports import Route as ApprovalRoute
from surfaces.bodies import read_body, refuse_deep
from surfaces.teams.activity import Click, Malformed, NotACardAction, parse_click, read_activity
from surfaces.teams.auth import ClientCredentials, ConnectorAuth
from surfaces.teams.card import Verb, attachment, invoke_card, invoke_error, to_card, to_closed_card
from surfaces.teams.certificate import ClientCertificate

logger = logging.getLogger("cosigner.teams")

SERVICE_URL = "https://smba.trafficmanager.net/teams/"
OPENID_URL = "https://login.botframework.com/v1/.well-known/openidconfiguration"
LOGIN_URL = "https://login.microsoftonline.com"
MULTI_TENANT = "botframework.com"  # where a multi-tenant bot gets its tokens
SEND_TIMEOUT = 10.0  # seconds; a durable job worker calls deliver, so a slow Bot Connector may retry
# An activity is a few KB: an Action.Execute invoke carries the card's small `data`, and a
# Teams message (which the bot ignores) is at most about 28 KB.
MAX_BODY = 256 * 1024


class TeamsConfigError(ValueError):
    """The Teams settings are incomplete or malformed; the message names the variable to fix."""


@dataclass(frozen=True)
class TeamsConfig:
    """The bot's app registration, and where the Bot Connector and Entra ID are (or their emulator)."""

    app_id: str
    app_password: str | None = field(repr=False)
    app_tenant_id: str
    api_url: str | None = None  # None = Microsoft itself; else the base URL of the emulator
    clock: Callable[[], float] = time.time
    certificate: ClientCertificate | None = None  # instead of the password
    # The inbox (`…/inbox/`) when sign-in is configured: a step-up card links there instead of Approve.
    inbox_url: str | None = None

    def __post_init__(self) -> None:
        problems = []
        if not _is_guid(self.app_id):
            problems.append("MICROSOFT_APP_ID must be the bot's app (client) id, a GUID")
        if not self.app_password and self.certificate is None:
            problems.append("set MICROSOFT_APP_PASSWORD or MICROSOFT_APP_CERTIFICATE (the app's credential)")
        if self.app_password and self.certificate is not None:
            problems.append(
                "set MICROSOFT_APP_PASSWORD or MICROSOFT_APP_CERTIFICATE, not both: "
                "which one the app proves itself with would be a guess"
            )
        if not (_is_guid(self.app_tenant_id) or self.app_tenant_id == MULTI_TENANT):
            problems.append(
                "MICROSOFT_APP_TENANT_ID must be the bot's home tenant id (a GUID), "
                f"or {MULTI_TENANT} for a multi-tenant bot"
            )
        if problems:
            raise TeamsConfigError("; ".join(problems))

    @property
    def service_url(self) -> str:
        """Where cards are posted (the Bot Connector for Teams, or the emulator)."""
        return self.api_url.rstrip("/") + "/" if self.api_url else SERVICE_URL

    @property
    def openid_url(self) -> str:
        """The OpenID configuration naming the JWKS the Bot Connector signs activities with."""
        base = self.api_url.rstrip("/") if self.api_url else None
        return f"{base}/v1/.well-known/openidconfiguration" if base else OPENID_URL

    @property
    def token_url(self) -> str:
        """Entra ID's token endpoint for the bot's home tenant."""
        base = self.api_url.rstrip("/") if self.api_url else LOGIN_URL
        return f"{base}/{self.app_tenant_id}/oauth2/v2.0/token"


def _is_guid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36


class _State(enum.Enum):
    NEW = "new"
    STARTED = "started"
    STOPPED = "stopped"


class TeamsAdapter:
    """The `teams` surface adapter (implements `contracts.ports.SurfaceAdapter`)."""

    name = "teams"

    def __init__(
        self, config: TeamsConfig, desk: ApprovalDesk, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self.desk = desk
        self.transport = transport
        self._state = _State.NEW
        self._http: httpx.AsyncClient | None = None
        self._session: aiohttp.ClientSession | None = None
        self._auth: ConnectorAuth | None = None
        self._credentials: ClientCredentials | None = None

    def routes(self) -> list[Any]:
        """`POST /teams/messages`: the Bot Connector's activities (card actions)."""
        return [Route("/teams/messages", self.messages, methods=["POST"])]

    async def start(self) -> None:
        """Open the HTTP clients inside the running loop."""
        if self._state is _State.STARTED:
            return
        self._http = httpx.AsyncClient(timeout=SEND_TIMEOUT, transport=self.transport)
        self._session = aiohttp.ClientSession(
            base_url=self.config.service_url, timeout=aiohttp.ClientTimeout(total=SEND_TIMEOUT)
        )
        self._auth = ConnectorAuth(self.config.app_id, self.config.openid_url, self._http, self.config.clock)
        self._credentials = ClientCredentials(
            self.config.token_url,
            self.config.app_id,
            self.config.app_password,
            self._http,
            self.config.clock,
            self.config.certificate,
        )
        self._state = _State.STARTED

    async def stop(self) -> None:
        """Close the HTTP clients."""
        if self._session is not None:
            await self._session.close()
        if self._http is not None:
            await self._http.aclose()
        self._http = self._session = None
        self._auth = self._credentials = None
        self._state = _State.STOPPED

    async def _connector(self) -> ConnectorClient:
        if self._session is None or self._credentials is None:
            if self._state is _State.STOPPED:
                raise SurfaceUnavailable("the Teams surface is stopped; no card can be sent")
            raise SurfaceUnavailable("the Teams surface was not started: call start() first")
        token = await self._credentials.token()
        return ConnectorClient(self.config.service_url, token, session=self._session)

    def _linked(self, card: ApprovalCard) -> ApprovalCard:
        """The card with the inbox's address, which a step-up card links to instead of Approve."""
        return replace(card, inbox_url=self.config.inbox_url) if card.step_up else card

    async def deliver(self, card: ApprovalCard, route: ApprovalRoute) -> Delivered:
        """Post the card to the route's conversation; `SurfaceUnavailable` if it cannot be."""
        if not isinstance(route, TeamsRoute):
            raise SurfaceUnavailable(f"the teams surface cannot deliver a {route.surface} route")
        if card.handoff is not None or card.preview is not None:
            raise SurfaceUnavailable(
                "Teams cards show tool calls only; "
                "route handoffs and operations to Slack, SMS or the dashboard"
            )
        if not route.approvers:
            raise SurfaceUnavailable("no approver to ask in Teams: the policy names none")
        content = to_card(self._linked(card), route.approvers)
        activity = _message(content, route, "Approval needed: " + card.tool_name[:100])
        connector = await self._connector()
        try:
            sent = await connector.conversations.send_to_conversation(route.conversation_id, activity)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise SurfaceUnavailable(_failure("post the card", exc)) from exc
        if not sent.id:
            raise SurfaceUnavailable("the Bot Connector accepted the card but returned no activity id")
        logger.info("teams card posted approval=%s", card.approval_id)
        return Delivered(
            surface=SurfaceType.TEAMS,
            conversation=route.conversation_id,
            message_refs=(sent.id,),
            app_id=self.config.app_id,
            extra={"serviceUrl": self.config.service_url},
        )

    async def show_outcome(self, card: ApprovalCard, route: ApprovalRoute, delivered: Delivered) -> None:
        """Replace every copy of the card with the closed one; a failure is logged only."""
        if not isinstance(route, TeamsRoute) or card.status is ApprovalStatus.PENDING:
            return
        activity = _message(to_closed_card(card), route, f"{card.status.value}: {card.tool_name[:100]}")
        try:
            connector = await self._connector()
            for message_id in delivered.message_refs:
                activity.id = message_id
                await connector.conversations.update_activity(delivered.conversation, message_id, activity)
        except (aiohttp.ClientError, TimeoutError, ValueError, SurfaceUnavailable) as exc:
            # The decision already stands; the card's refresh action shows it on next view.
            logger.warning("teams card not updated approval=%s: %s", card.approval_id, type(exc).__name__)

    async def messages(self, request: Request) -> Response:
        """Handle one activity: verify its JWT, then answer a card action (or acknowledge)."""
        if self._auth is None:
            return JSONResponse(
                SurfaceUnavailable("the Teams surface is not started").body(), status_code=503
            )
        try:
            raw = await read_body(request, MAX_BODY)
            # No activity nests that deep; json.loads would recurse past Python's limit (a 500).
            refuse_deep(raw)
        except InvalidRequest as exc:  # BodyTooLarge (413), a malformed Content-Length, too deep
            logger.warning("teams activity refused: %s", exc.message)
            return JSONResponse(exc.body(), status_code=exc.status)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        # Only the two strings the token vouches for are read before it is checked: the
        # SDK's model logs what fails to validate, and an unverified body is not logged.
        fields = body if isinstance(body, dict) else {}
        service_url, channel_id = fields.get("serviceUrl"), fields.get("channelId")
        try:
            await self._auth.verify(
                request.headers.get("authorization"),
                service_url if isinstance(service_url, str) else None,
                channel_id if isinstance(channel_id, str) else None,
            )
        except InvalidSignature as exc:
            logger.warning("teams activity refused: %s", exc.message)
            # 403, as the Bot Connector expects for a token that does not verify.
            return JSONResponse(exc.body(), status_code=403)
        try:
            click = parse_click(read_activity(body))
        except NotACardAction:
            return Response(status_code=200)  # messages, installs, typing: nothing to do
        except Malformed as exc:
            return JSONResponse(invoke_error(400, "INVALID_REQUEST", str(exc)))
        return JSONResponse(await self._answer(click))

    async def _answer(self, click: Click) -> Mapping[str, Any]:
        """The invoke response: the card the clicker now sees, or why nothing was decided."""
        try:
            if click.verb is Verb.REFRESH or click.verb is Verb.FULL_CALL:
                # Reading decides nothing, but only an approver where the card was shown may.
                card = await self.desk.full_call(click.look())
                if card.status is not ApprovalStatus.PENDING:
                    return invoke_card(to_closed_card(card))
                # A refreshed card is the clicker's own view, so it refreshes for them.
                full = click.verb is Verb.FULL_CALL
                return invoke_card(to_card(self._linked(card), (click.actor,), full=full, page=click.page))
            card = await self.desk.answer(click.answer())
        except CosignerError as exc:
            logger.info("teams answer refused approval=%s code=%s", click.approval_id, exc.code)
            return invoke_error(403 if exc.status in (401, 403) else 400, exc.code, exc.message)
        logger.info("teams answer handled approval=%s verb=%s", click.approval_id, click.verb.value)
        return invoke_card(to_closed_card(card))


def _message(content: dict[str, Any], route: TeamsRoute, summary: str) -> Activity:
    return Activity.model_validate(
        {
            "type": "message",
            "summary": summary,
            "attachments": [attachment(content)],
            "conversation": {"id": route.conversation_id, "tenantId": route.tenant_id},
            "channelData": {"tenant": {"id": route.tenant_id}},
        }
    )


def _failure(what: str, exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientResponseError):
        hint = {
            401: "check MICROSOFT_APP_ID and MICROSOFT_APP_PASSWORD",
            403: "the bot is not installed in that conversation; add the app to the team or chat",
            404: "no such conversation; check surface.conversationId",
        }.get(exc.status, "retry later")
        return f"the Bot Connector refused to {what}: HTTP {exc.status} ({hint})"
    return f"could not reach the Bot Connector to {what} ({type(exc).__name__}); check the network"
