"""The SMS surface: texts approvals out through Twilio and serves Twilio's two webhooks.

`deliver` and `show_outcome` talk to Twilio with the official `twilio.rest.Client` on an
httpx-based HTTP client (`transport.py`), opened in `start()` and closed in `stop()`.
Twilio errors never leave this module: they become `SurfaceUnavailable`, which makes the
engine fail the request closed.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Mapping, Sequence
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
from surfaces.sms.follow_up_text import reminder_text
from surfaces.sms.handoff_text import to_handoff_outcome_text, to_handoff_text
from surfaces.sms.more import not_texted_whole
from surfaces.sms.replies_text import to_outcome_text
from surfaces.sms.text import to_sms_text
from surfaces.sms.transport import HttpxTwilioClient, twilio_client
from surfaces.sms.webhook import SmsWebhooks

logger = logging.getLogger("cosigner.sms")

E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")
SEND_TIMEOUT = 10.0  # seconds; a durable job worker calls deliver, so a slow Twilio may retry


class SmsConfigError(ValueError):
    """The SMS settings are incomplete or malformed; the message names the variable to fix."""


@dataclass(frozen=True)
class SmsConfig:
    """Twilio credentials, default sender, API base URL and the public URL Twilio calls."""

    account_sid: str
    auth_token: str
    from_number: str | None
    messaging_service_sid: str | None
    api_url: str | None  # None = Twilio itself; else the base URL of an emulator
    public_url: str  # e.g. https://cosigner.example.com; signatures are checked against it
    # Where a call too long to text whole can be read (the inbox's page, when it is on).
    inbox_url: str | None = None

    def __post_init__(self) -> None:
        problems = []
        if not self.account_sid.startswith("AC"):
            problems.append("TWILIO_ACCOUNT_SID must be an account SID (AC…)")
        if not self.auth_token:
            problems.append("TWILIO_AUTH_TOKEN is empty")
        if self.from_number is not None and not E164.match(self.from_number):
            problems.append("TWILIO_FROM_NUMBER must be E.164, e.g. +15550000001")
        if self.messaging_service_sid is not None and not self.messaging_service_sid.startswith("MG"):
            problems.append("TWILIO_MESSAGING_SERVICE_SID must be a Messaging Service SID (MG…)")
        if not self.public_url.startswith(("https://", "http://")):
            problems.append("COSIGNER_PUBLIC_URL must be the absolute URL Twilio calls")
        if problems:
            raise SmsConfigError("; ".join(problems))

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SmsConfig:
        """Read the usual Twilio variables and COSIGNER_PUBLIC_URL (see docs/sms.md)."""
        missing = [
            name
            for name in ("TWILIO_ACCOUNT_SID", "TWILIO_AUTH_TOKEN", "COSIGNER_PUBLIC_URL")
            if not env.get(name)
        ]
        if missing:
            raise SmsConfigError(f"set {', '.join(missing)} to enable the SMS surface")
        return cls(
            account_sid=env["TWILIO_ACCOUNT_SID"],
            auth_token=env["TWILIO_AUTH_TOKEN"],
            from_number=env.get("TWILIO_FROM_NUMBER") or None,
            messaging_service_sid=env.get("TWILIO_MESSAGING_SERVICE_SID") or None,
            api_url=env.get("TWILIO_API_URL") or None,
            public_url=env["COSIGNER_PUBLIC_URL"].rstrip("/"),
        )


class _State(enum.Enum):
    NEW = "new"
    STARTED = "started"
    STOPPED = "stopped"


def mask(number: str) -> str:
    """A phone number with all but its last four digits hidden, for messages and logs."""
    return f"…{number[-4:]}" if len(number) > 4 else "…"


def sender_of(conversation: str) -> tuple[str | None, str | None]:
    """Whom a request's texts come from, as stored in its receipt: (number, None), or (None,
    the Messaging Service SID) when a service sends them."""
    return (None, conversation) if conversation.startswith("MG") else (conversation, None)


class SmsAdapter:
    """The `sms` surface adapter (implements `contracts.ports.SurfaceAdapter`)."""

    name = "sms"

    def __init__(
        self,
        config: SmsConfig,
        desk: SmsDesk,
        store: SmsStore,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.desk = desk
        self.store = store  # what the surface keeps itself: opt-outs, texts sent and shown
        self.transport = transport  # tests may hand in an httpx.MockTransport
        self.webhooks = SmsWebhooks(config, desk, store)
        self._state = _State.NEW
        self._http: HttpxTwilioClient | None = None
        self._client: Client | None = None

    def routes(self) -> list[Any]:
        """`POST /sms/inbound` (texts from approvers) and `POST /sms/status` (delivery)."""
        return [
            Route("/sms/inbound", self.webhooks.inbound, methods=["POST"]),
            Route("/sms/status", self.webhooks.status, methods=["POST"]),
        ]

    async def start(self) -> None:
        """Open the Twilio client inside the running loop."""
        if self._state is _State.STARTED:
            return
        self._http = HttpxTwilioClient(timeout=SEND_TIMEOUT, transport=self.transport)
        config = self.config
        self._client = twilio_client(config.account_sid, config.auth_token, config.api_url, self._http)
        self._state = _State.STARTED

    async def stop(self) -> None:
        """Close the Twilio client's HTTP session."""
        if self._http is not None:
            await self._http.close()
        self._http = None
        self._client = None
        self._state = _State.STOPPED

    async def _request_text(self, card: ApprovalCard, conversation: str, number: str) -> str:
        """The request's text to `number`: with its short code when that number has another
        request pending from `conversation`."""
        pending = await self.desk.pending_for_number(conversation, number)
        others = any(p.card.approval_id != card.approval_id for p in pending)
        if card.handoff:
            return to_handoff_text(card, code_required=others)
        return to_sms_text(card, code_required=others, inbox=self.config.inbox_url)

    @staticmethod
    def _unshown(card: ApprovalCard) -> str | None:
        """Why the texts cannot show the call whole (recorded with the text: a YES to it is
        refused), or None. A handoff approves no call: DONE is checked by its application."""
        return None if card.handoff else not_texted_whole(card)

    def _live_client(self) -> Client:
        if self._client is None:
            if self._state is _State.STOPPED:
                raise SurfaceUnavailable("the SMS surface is stopped; nothing can be texted")
            raise SurfaceUnavailable("the SMS surface was not started: call start() first")
        return self._client

    def _sender(self, route: SmsRoute) -> tuple[str | None, str | None]:
        """(From number, Messaging Service SID) to send from; the route wins over config."""
        service = route.messaging_service_sid or (
            None if route.from_number else self.config.messaging_service_sid
        )
        number = route.from_number or (None if service else self.config.from_number)
        if service is None and number is None:
            raise SurfaceUnavailable(
                "no sender: set sms_from for the tenant or TWILIO_FROM_NUMBER / TWILIO_MESSAGING_SERVICE_SID"
            )
        return number, service

    async def deliver(self, card: ApprovalCard, route: ApprovalRoute) -> Delivered:
        """Text the request to every approver; all or nothing, else `SurfaceUnavailable`."""
        if not isinstance(route, SmsRoute):
            raise SurfaceUnavailable(f"the sms surface cannot deliver a {route.surface} route")
        client = self._live_client()
        from_number, service = self._sender(route)
        # The number when one is used (a Messaging Service may still pick it as sender),
        # else the service: the same key the engine files the request under.
        conversation = from_number or service or ""
        if not route.approvers:
            raise SurfaceUnavailable("no approver number to text: the policy names none")
        for number in route.approvers:
            if not E164.match(number):
                raise SurfaceUnavailable(f"approver number {mask(number)} is not E.164 (+ and 7–15 digits)")
        # Check every number before texting any, so an opted-out approver does not leave
        # the others holding a request that is about to fail closed.
        for number in route.approvers:
            if await self.store.opted_out(number):
                raise SurfaceUnavailable(
                    f"approver {mask(number)} opted out by STOP; they must text START "
                    "to the sender before they can be asked again"
                )
        status_callback = self.config.public_url.rstrip("/") + "/sms/status"
        # Before any text leaves, record where the request goes and to whom: a reply can
        # arrive before this method returns and the engine stores the full receipt.
        await self.desk.sending(
            card.approval_id, Delivered(surface=SurfaceType.SMS, conversation=conversation)
        )
        sids = []
        for number in route.approvers:
            sid = await self.store.sent_sid(card.approval_id, number)
            if sid is None:
                body = await self._request_text(card, conversation, number)
                await self.store.mark_texting(
                    card.approval_id, number, card.digest or None, self._unshown(card)
                )
                sid = await self._send(client, number, from_number, service, body, status_callback)
                await self.store.record_sent(card.approval_id, number, sid)
                logger.info("sms request texted approval=%s sid=%s", card.approval_id, sid)
            sids.append(sid)
        return Delivered(surface=SurfaceType.SMS, conversation=conversation, message_refs=tuple(sids))

    async def show_outcome(self, card: ApprovalCard, route: ApprovalRoute, delivered: Delivered) -> None:
        """Text each reachable approver how the request ended; failures are logged only."""
        if not isinstance(route, SmsRoute) or card.status is ApprovalStatus.PENDING:
            return
        try:
            client = self._live_client()
        except SurfaceUnavailable as exc:
            logger.warning("sms outcome not texted approval=%s: %s", card.approval_id, exc)
            return
        from_number, service = sender_of(delivered.conversation)
        body = (to_handoff_outcome_text if card.handoff else to_outcome_text)(card)
        # Each approver is told each outcome once: an operation whose outcome needed
        # reconciliation is told that first, and its final outcome once it is known.
        interim = card.result is not None and not card.result.final
        once = f"{card.approval_id}#reconciling" if interim else card.approval_id
        for number in route.approvers:
            if not E164.match(number) or await self.store.opted_out(number):
                continue
            if not await self.store.first_outcome(once, number):
                continue
            try:
                await self._send(client, number, from_number, service, body, None)
            except SurfaceUnavailable as exc:
                # The decision already stands; a lost confirmation must not undo it.
                logger.warning(
                    "sms outcome not texted approval=%s to=%s: %s",
                    card.approval_id,
                    mask(number),
                    exc.message,
                )

    async def remind(
        self, card: ApprovalCard, route: ApprovalRoute, delivered: Delivered, approvers: Sequence[str]
    ) -> None:
        """Text the reminder to each approver still to answer who can be reached; raises
        `SurfaceUnavailable` when none could be."""
        if not isinstance(route, SmsRoute):
            raise SurfaceUnavailable(f"the sms surface cannot remind on a {route.surface} route")
        client = self._live_client()
        from_number, service = sender_of(delivered.conversation)
        sent, problems = 0, []
        for number in approvers:
            if not E164.match(number) or await self.store.opted_out(number):
                problems.append(f"{mask(number)} cannot be texted")
                continue
            try:
                await self._send(client, number, from_number, service, reminder_text(card), None)
                # A bare YES soon after must not be taken for another request's.
                await self.store.shown(card.approval_id, number)
                sent += 1
            except SurfaceUnavailable as exc:
                problems.append(exc.message)
        if not sent:
            raise SurfaceUnavailable("no reminder was texted: " + ("; ".join(problems) or "no approver"))

    async def show_escalated(self, card: ApprovalCard, route: ApprovalRoute, delivered: Delivered) -> None:
        """A text already sent cannot change: the escalated approvers get their own."""
        return

    async def retext(self, card: ApprovalCard, route: ApprovalRoute, delivered: Delivered) -> Retexted:
        """Text the edited call to each approver of `route` who was texted another version.

        A number is texted once per version: its latest text's digest (`texted_digest`) is
        written once Twilio accepted the text, so a retried job skips it. Until then a YES
        from it still names the version texted before, and is refused as such; a crash
        between the two texts it again (at least once, as a delivery does)."""
        if not isinstance(route, SmsRoute):
            raise SurfaceUnavailable(f"the sms surface cannot text a {route.surface} route")
        client = self._live_client()
        from_number, service = sender_of(delivered.conversation)
        conversation = delivered.conversation
        texted, in_flight, problems = [], [], []
        for number in route.approvers:
            if not await self.store.was_texted(card.approval_id, number):
                continue  # never shown: a text still to come shows the current call
            if await self.store.texted_digest(card.approval_id, number) == card.digest:
                continue  # shows this version already
            if not E164.match(number) or await self.store.opted_out(number):
                problems.append(f"{mask(number)} cannot be texted (opted out by STOP)")
                continue
            if await self.store.sent_sid(card.approval_id, number) is None:
                in_flight.append(number)  # its first text is being sent: not after it
                continue
            body = await self._request_text(card, conversation, number)
            try:
                sid = await self._send(client, number, from_number, service, body, None)
            except SurfaceUnavailable as exc:
                problems.append(exc.message)
                continue
            await self.store.mark_texting(card.approval_id, number, card.digest or None, self._unshown(card))
            logger.info("sms edited call texted approval=%s sid=%s", card.approval_id, sid)
            texted.append(number)
        return Retexted(tuple(texted), tuple(in_flight), tuple(problems))

    async def _send(
        self,
        client: Client,
        to: str,
        from_number: str | None,
        service: str | None,
        body: str,
        status_callback: str | None,
    ) -> str:
        """Create one message; every Twilio or network failure becomes `SurfaceUnavailable`."""
        kwargs: dict[str, Any] = {"to": to, "body": body}
        if from_number:
            kwargs["from_"] = from_number
        if service:
            kwargs["messaging_service_sid"] = service
        if status_callback:
            kwargs["status_callback"] = status_callback
        try:
            message = await client.messages.create_async(**kwargs)
        except TwilioRestException as exc:
            hint = ""
            if exc.code == 21610:
                # Twilio knows of a STOP we never saw (sent before this bot existed, or to
                # another webhook): remember it so we stop trying this number.
                await self.store.set_opted_out(to, True)
                hint = " (the number opted out by STOP)"
            raise SurfaceUnavailable(
                f"Twilio refused the text to {mask(to)}: error {exc.code}{hint}",
                twilioCode=exc.code,
            ) from exc
        except (TimeoutError, TwilioException, httpx.HTTPError, OSError, ValueError) as exc:
            raise SurfaceUnavailable(
                f"could not reach Twilio ({type(exc).__name__}); check TWILIO_API_URL and the network"
            ) from exc
        if not message.sid:
            raise SurfaceUnavailable("Twilio accepted the text but returned no MessageSid")
        return str(message.sid)
