"""The WhatsApp surface: sends each approval as a Content API template through Twilio.

The account, the twilio client, the signature check and the typed-answer reader are the
SMS surface's; what differs is the sending (`ContentSid` + `ContentVariables`, because a
business-initiated WhatsApp message outside the 24-hour session must be an approved
template) and the quick-reply taps (`webhook.py`). Twilio errors become
`SurfaceUnavailable`, which makes the engine fail the request closed.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.routing import Route
from twilio.base.exceptions import TwilioException, TwilioRestException
from twilio.rest import Client

from contracts.enums import ApprovalStatus, SurfaceType
from contracts.errors import SurfaceUnavailable
from contracts.ports import ApprovalCard, Delivered, Retexted, SmsDesk, SmsRoute
from contracts.ports import Route as ApprovalRoute
from contracts.sms import SmsStore
from surfaces.sms.adapter import SEND_TIMEOUT, SmsConfig, SmsConfigError, mask
from surfaces.sms.more import not_texted_whole
from surfaces.sms.replies_text import to_outcome_text
from surfaces.sms.text import to_sms_text
from surfaces.sms.transport import HttpxTwilioClient
from surfaces.whatsapp.template import content_variables, new_nonce, nonce_key
from surfaces.whatsapp.webhook import WhatsAppWebhooks

logger = logging.getLogger("cosigner.whatsapp")

WHATSAPP_NUMBER = re.compile(r"^whatsapp:\+[1-9][0-9]{6,14}$")
CONTENT_SID = re.compile(r"^HX[0-9a-fA-F]{32}$")


class WhatsAppConfigError(ValueError):
    """The WhatsApp settings are incomplete or malformed; the message names the variable."""


@dataclass(frozen=True)
class WhatsAppConfig:
    """The Twilio account (shared with SMS), the WhatsApp sender and the approval template."""

    twilio: SmsConfig
    from_number: str  # E.164, the WhatsApp sender registered with Twilio
    content_sid: str  # HX…, the approved quick-reply template

    def __post_init__(self) -> None:
        problems = []
        if not WHATSAPP_NUMBER.match(f"whatsapp:{self.from_number}"):
            problems.append("TWILIO_WHATSAPP_FROM must be E.164, e.g. +15550000001 (no whatsapp: prefix)")
        if not CONTENT_SID.match(self.content_sid):
            problems.append("TWILIO_WHATSAPP_CONTENT_SID must be a Content SID (HX and 32 hex digits)")
        if problems:
            raise WhatsAppConfigError("; ".join(problems))

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WhatsAppConfig:
        """Read the Twilio variables, TWILIO_WHATSAPP_FROM and TWILIO_WHATSAPP_CONTENT_SID."""
        missing = [n for n in ("TWILIO_WHATSAPP_FROM", "TWILIO_WHATSAPP_CONTENT_SID") if not env.get(n)]
        if missing:
            raise WhatsAppConfigError(f"set {', '.join(missing)} to enable the WhatsApp surface")
        try:
            twilio = SmsConfig.from_env(env)
        except SmsConfigError as exc:
            raise WhatsAppConfigError(str(exc)) from exc
        return cls(twilio, env["TWILIO_WHATSAPP_FROM"], env["TWILIO_WHATSAPP_CONTENT_SID"])


class WhatsAppAdapter:
    """The `whatsapp` surface adapter (implements `contracts.ports.SurfaceAdapter`)."""

    name = "whatsapp"

    def __init__(
        self,
        config: WhatsAppConfig,
        desk: SmsDesk,
        store: SmsStore,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.desk = desk
        self.store = store  # SMS's: opt-outs and texts are kept per number, as SMS keeps them
        self.transport = transport
        self.webhooks = WhatsAppWebhooks(config.twilio, desk, store)
        self._http: HttpxTwilioClient | None = None
        self._client: Client | None = None

    def routes(self) -> list[Any]:
        """`POST /whatsapp/inbound` (taps and typed answers), `POST /whatsapp/status`."""
        return [
            Route("/whatsapp/inbound", self.webhooks.inbound, methods=["POST"]),
            Route("/whatsapp/status", self.webhooks.status, methods=["POST"]),
        ]

    async def start(self) -> None:
        """Open the Twilio client inside the running loop."""
        if self._client is not None:
            return
        self._http = HttpxTwilioClient(timeout=SEND_TIMEOUT, transport=self.transport)
        client = Client(self.config.twilio.account_sid, self.config.twilio.auth_token, http_client=self._http)
        client.edge = None  # see SmsAdapter.start: the environment must not reroute an emulator
        client.region = None
        if self.config.twilio.api_url:
            client.api.base_url = self.config.twilio.api_url.rstrip("/")
        self._client = client

    async def stop(self) -> None:
        """Close the Twilio client's HTTP session."""
        if self._http is not None:
            await self._http.close()
        self._http = self._client = None

    async def deliver(self, card: ApprovalCard, route: ApprovalRoute) -> Delivered:
        """Send the template to every approver, each with their own nonce; all or nothing."""
        if not isinstance(route, SmsRoute) or route.surface is not SurfaceType.WHATSAPP:
            raise SurfaceUnavailable(f"the whatsapp surface cannot deliver a {route.surface} route")
        if card.handoff is not None:
            raise SurfaceUnavailable(
                "a handoff cannot be sent by WhatsApp yet: start the run from Slack or SMS"
            )
        client = self._live()
        sender = route.from_number or ""
        if not route.approvers:
            raise SurfaceUnavailable("no approver number to message: the policy names none")
        for number in (sender, *route.approvers):
            if not WHATSAPP_NUMBER.match(number):
                raise SurfaceUnavailable(f"{mask(number)} is not a WhatsApp number (whatsapp:+E164)")
            if await self.store.opted_out(number):
                raise SurfaceUnavailable(f"approver {mask(number)} opted out by STOP")
        # A retried delivery keeps the nonces of templates already sent, so their taps count.
        placed = await self.desk.placed(card.approval_id)
        kept = placed.delivered.extra if placed is not None and placed.delivered is not None else {}
        nonces = {nonce_key(n): kept.get(nonce_key(n)) or new_nonce() for n in route.approvers}
        await self.desk.sending(
            card.approval_id, Delivered(surface=SurfaceType.WHATSAPP, conversation=sender, extra=nonces)
        )
        status_callback = self.config.twilio.public_url.rstrip("/") + "/whatsapp/status"
        sids = []
        for number in route.approvers:
            sid = await self.store.sent_sid(card.approval_id, number)
            if sid is None:
                variables = await self._variables(card, sender, number, nonces[nonce_key(number)])
                await self.store.mark_texting(
                    card.approval_id, number, card.digest or None, not_texted_whole(card)
                )
                sid = await self._send(
                    client,
                    to=number,
                    from_=sender,
                    content_sid=self.config.content_sid,
                    content_variables=json.dumps(variables),
                    status_callback=status_callback,
                )
                await self.store.record_sent(card.approval_id, number, sid)
                logger.info("whatsapp request sent approval=%s sid=%s", card.approval_id, sid)
            sids.append(sid)
        return Delivered(
            surface=SurfaceType.WHATSAPP, conversation=sender, message_refs=tuple(sids), extra=nonces
        )

    async def show_outcome(self, card: ApprovalCard, route: ApprovalRoute, delivered: Delivered) -> None:
        """Message each approver how the request ended; a failure is logged only.

        A free-form message reaches only a number inside its 24-hour session (one that
        answered); the others cannot be told outside a template, and Twilio says so (63016).
        """
        if not isinstance(route, SmsRoute) or card.status is ApprovalStatus.PENDING:
            return
        try:
            client = self._live()
        except SurfaceUnavailable as exc:
            logger.warning("whatsapp outcome not sent approval=%s: %s", card.approval_id, exc.message)
            return
        interim = card.result is not None and not card.result.final
        once = f"{card.approval_id}#reconciling" if interim else card.approval_id
        for number in route.approvers:
            if await self.store.opted_out(number) or not await self.store.first_outcome(once, number):
                continue
            try:
                await self._send(client, to=number, from_=delivered.conversation, body=to_outcome_text(card))
            except SurfaceUnavailable as exc:
                # The decision already stands; a lost confirmation must not undo it.
                logger.warning(
                    "whatsapp outcome not sent approval=%s to=%s: %s",
                    card.approval_id,
                    mask(number),
                    exc.message,
                )

    async def retext(self, card: ApprovalCard, route: ApprovalRoute, delivered: Delivered) -> Retexted:
        """Send the template again, showing the edited call, to each approver of `route` who
        was sent another version; as `SmsAdapter.retext`, once per number and version.

        It is the same approved template (the call is its `{{1}}`), so it reaches a number
        outside its 24-hour session too. The number keeps its nonce; the new message becomes
        the one its taps must answer (`OriginalRepliedMessageSid`), so a tap on the message
        sent before the edit is refused and told the call was edited."""
        if not isinstance(route, SmsRoute) or route.surface is not SurfaceType.WHATSAPP:
            raise SurfaceUnavailable(f"the whatsapp surface cannot message a {route.surface} route")
        client = self._live()
        sender = delivered.conversation
        texted, in_flight, problems = [], [], []
        for number in route.approvers:
            if not await self.store.was_texted(card.approval_id, number):
                continue
            if await self.store.texted_digest(card.approval_id, number) == card.digest:
                continue
            if await self.store.opted_out(number):
                problems.append(f"{mask(number)} cannot be messaged (opted out by STOP)")
                continue
            nonce = delivered.extra.get(nonce_key(number))
            if nonce is None or await self.store.sent_sid(card.approval_id, number) is None:
                in_flight.append(number)  # its first message is being sent: not after it
                continue
            variables = await self._variables(card, sender, number, nonce)
            try:
                sid = await self._send(
                    client,
                    to=number,
                    from_=sender,
                    content_sid=self.config.content_sid,
                    content_variables=json.dumps(variables),
                )
            except SurfaceUnavailable as exc:
                problems.append(exc.message)
                continue
            await self.store.mark_texting(
                card.approval_id, number, card.digest or None, not_texted_whole(card)
            )
            await self.store.record_sent(card.approval_id, number, sid)
            logger.info("whatsapp edited call sent approval=%s sid=%s", card.approval_id, sid)
            texted.append(number)
        return Retexted(tuple(texted), tuple(in_flight), tuple(problems))

    async def _variables(self, card: ApprovalCard, sender: str, number: str, nonce: str) -> dict[str, str]:
        """The template's variables for `number`: the request's text (with its short code when
        that number has another request pending from `sender`) and the number's nonce."""
        pending = await self.desk.pending_for_number(sender, number)
        others = any(p.card.approval_id != card.approval_id for p in pending)
        text = to_sms_text(card, code_required=others, inbox=self.config.twilio.inbox_url)
        return content_variables(card, text, nonce)

    def _live(self) -> Client:
        if self._client is None:
            raise SurfaceUnavailable("the WhatsApp surface is not started: call start() first")
        return self._client

    async def _send(self, client: Client, **fields: Any) -> str:
        """Create one message; every Twilio or network failure becomes `SurfaceUnavailable`."""
        try:
            message = await client.messages.create_async(**fields)
        except TwilioRestException as exc:
            if exc.code == 21610:
                await self.store.set_opted_out(str(fields["to"]), True)
            raise SurfaceUnavailable(
                f"Twilio refused the WhatsApp message to {mask(str(fields['to']))}: error {exc.code}"
                + (
                    " (the template is missing or not approved: check TWILIO_WHATSAPP_CONTENT_SID)"
                    if exc.code in (21655, 21656, 63016)
                    else ""
                ),
                twilioCode=exc.code,
            ) from exc
        except (TimeoutError, TwilioException, httpx.HTTPError, OSError, ValueError) as exc:
            raise SurfaceUnavailable(
                f"could not reach Twilio ({type(exc).__name__}); check TWILIO_API_URL and the network"
            ) from exc
        if not message.sid:
            raise SurfaceUnavailable("Twilio accepted the WhatsApp message but returned no MessageSid")
        return str(message.sid)
