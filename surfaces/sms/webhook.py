"""Twilio's two webhooks: inbound texts (answers, STOP…) and delivery status callbacks.

Both are verified before anything is read: `X-Twilio-Signature` over the URL Twilio
called, rebuilt from the configured public URL (behind a TLS-terminating proxy
`request.url` is not what Twilio signed), and over every form field received.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from starlette.datastructures import ImmutableMultiDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from twilio.request_validator import RequestValidator
from twilio.twiml.messaging_response import MessagingResponse

from contracts.audit_events import SmsStatus, written
from contracts.enums import ApprovalStatus, AuditEvent, ErrorCode, SurfaceType, Verdict
from contracts.errors import CosignerError, InvalidRequest, InvalidSignature
from contracts.ports import Answer, ApprovalCard, Placed, SmsDesk
from contracts.sms import SmsStore
from surfaces.bodies import read_body
from surfaces.sms.allow_for_text import allowed_text
from surfaces.sms.more import more_texts, not_texted_whole
from surfaces.sms.refused_text import code_needed_text, too_long_text
from surfaces.sms.replies_text import (
    closed_text,
    counted_text,
    edited_text,
    help_text,
    refusal_text,
    standing_text,
    unknown_code_text,
)
from surfaces.sms.reply import (
    BARE_WINDOW,
    is_help,
    is_opt_in,
    is_opt_out,
    needs_code,
    parse_more,
    parse_reply,
)

if TYPE_CHECKING:
    from surfaces.sms.adapter import SmsConfig

logger = logging.getLogger("cosigner.sms")

# A text is at most 1,600 characters; with Twilio's other fields (and up to ten media URLs)
# a webhook is a few KB.
MAX_BODY = 64 * 1024
UNDELIVERED = frozenset({"failed", "undelivered"})


def twiml(*messages: str) -> Response:
    """A TwiML answer: empty (`<Response />`) or reply `<Message>`s, texted in order."""
    response = MessagingResponse()
    for message in messages:
        response.message(message)
    return Response(str(response), media_type="application/xml")


def _forbidden(reason: str, path: str) -> Response:
    # Only the path and the reason: a forged request's body is not worth a log line.
    logger.warning("sms webhook refused path=%s: %s", path, reason)
    error = InvalidSignature("X-Twilio-Signature does not verify; check COSIGNER_PUBLIC_URL")
    return JSONResponse(error.body(), status_code=403)


def signed_url(public_url: str, request: Request) -> str:
    """The URL Twilio signed: the public base URL plus the request's path and query."""
    query = request.url.query
    return public_url.rstrip("/") + request.url.path + (f"?{query}" if query else "")


async def read_signed_form(
    request: Request, public_url: str, auth_token: str
) -> ImmutableMultiDict[str, str] | Response:
    """The form fields of a request Twilio really signed, or the response refusing it."""
    path = request.url.path
    signature = request.headers.get("x-twilio-signature")
    if not signature:
        return _forbidden("no signature", path)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        return _forbidden("not a form", path)
    try:
        raw = await read_body(request, MAX_BODY)
    except InvalidRequest as exc:  # BodyTooLarge (413), or a malformed Content-Length
        logger.warning("sms webhook refused path=%s: %s", path, exc.message)
        return JSONResponse(exc.body(), status_code=exc.status)
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=500)
    except (UnicodeDecodeError, ValueError):
        return _forbidden("unreadable form", path)
    # A multi-dict: Twilio signs every value of a repeated key.
    params = ImmutableMultiDict(pairs)
    url = signed_url(public_url, request)
    if not RequestValidator(auth_token).validate(url, params, signature):
        return _forbidden("signature mismatch", path)
    return params


class SmsWebhooks:
    """The handlers behind `POST /sms/inbound` and `POST /sms/status`."""

    def __init__(
        self, config: SmsConfig, desk: SmsDesk, store: SmsStore, surface: SurfaceType = SurfaceType.SMS
    ) -> None:
        self.config = config
        self.desk = desk
        self.store = store
        self.surface = surface  # WhatsApp reads typed answers exactly as SMS does

    async def inbound(self, request: Request) -> Response:
        """Handle a text from an approver: STOP/START/HELP, an exact answer, or help."""
        form = await read_signed_form(request, self.config.public_url, self.config.auth_token)
        if isinstance(form, Response):
            return form
        message_sid = form.get("MessageSid") or form.get("SmsSid")
        sender, to = form.get("From"), form.get("To")
        if not message_sid or not sender or not to:
            return Response("MessageSid, From and To are required", status_code=400)
        # Twilio retries a webhook it thinks failed, and a copy of a handled message must
        # decide nothing. The id is recorded only once the message is handled (an answer
        # records it in its own transaction), so a failed attempt leaves the retry to decide.
        if await self.store.message_seen(message_sid):
            return twiml()
        response, recorded = await self._handle(form, message_sid, sender, to)
        if not recorded and not await self.store.mark_message_seen(message_sid):
            return twiml()  # a concurrent copy was handled first
        return response

    async def _handle(
        self, form: ImmutableMultiDict[str, str], message_sid: str, sender: str, to: str
    ) -> tuple[Response, bool]:
        """The reply to a text, and whether the desk already recorded its MessageSid."""
        body = form.get("Body") or ""
        # With Advanced Opt-Out Twilio names the keyword class itself (custom keywords too).
        opt_type = (form.get("OptOutType") or "").upper()
        service = form.get("MessagingServiceSid") or None
        conversations = [c for c in (to, service) if c]

        if opt_type == "STOP" or is_opt_out(body):
            await self._opt_out(sender, conversations)
            return twiml(), False  # Twilio sends its own confirmation
        reply = parse_reply(body)
        if opt_type == "START" or is_opt_in(body):
            if await self.store.opted_out(sender):
                await self.store.set_opted_out(sender, False)
            if reply is None:
                return twiml(), False
        if opt_type == "HELP" or is_help(body):
            return twiml(), False
        conversation, pending = await self._pending(conversations, sender)
        codes = [p.card.short_code for p in pending]
        handoffs = [p.card.short_code for p in pending if p.card.handoff]
        more = parse_more(body)
        if more is not None:
            return await self._more(pending, sender, more.code, codes, handoffs), False
        if reply is None:
            return twiml(help_text(codes, handoffs=handoffs)), False
        if not pending:
            latest = await self._latest(conversations, sender)
            if latest is not None and latest.card.status is not ApprovalStatus.PENDING:
                if reply.code is None or reply.code == latest.card.short_code:
                    return twiml(closed_text(latest.card)), False
            return twiml(help_text()), False
        if reply.code is None:
            if len(pending) > 1:
                return twiml(help_text(codes, handoffs=handoffs)), False
            target = pending[0]
            if needs_code(reply) and await self.store.texted_other(
                sender, target.card.approval_id, BARE_WINDOW
            ):
                # Another request was texted lately: the YES may be meant for it.
                logger.info("sms bare answer refused approval=%s: code needed", target.card.approval_id)
                return twiml(code_needed_text(target.card, reply.word)), False
        else:
            matches = [p for p in pending if p.card.short_code == reply.code]
            if len(matches) != 1:
                # Two pending requests sharing a code is ambiguous: decide neither.
                return twiml(unknown_code_text(reply.code, codes)), False
            target = matches[0]

        answer = Answer(
            approval_id=target.card.approval_id,
            surface=self.surface,
            verdict=Verdict.CANCEL
            if target.card.handoff and reply.verdict is Verdict.DENY
            else reply.verdict,
            actor=sender,
            org=conversation,
            actor_org=None,
            conversation=conversation,
            message_ref=None,
            message_id=message_sid,
            # The call this number's text showed: an answer to a call edited since is refused.
            seen=await self.store.texted_digest(target.card.approval_id, sender),
            # A call too long to text whole: a YES to it is refused, a NO counts.
            unshown=await self.unshown(target.card, sender),
            allow_for=reply.allow_for.seconds if reply.allow_for is not None else None,
        )
        try:
            card = await self.desk.answer(answer)
        except CosignerError as exc:
            # The refusal is recorded with the message id, so a retry repeats nothing.
            logger.info("sms answer refused approval=%s code=%s", target.card.approval_id, exc.code)
            if exc.code == ErrorCode.PARAMETERS_MISMATCH:
                return twiml(edited_text(target.card)), True
            if exc.code == ErrorCode.APPROVAL_MODE_UNSUPPORTED and answer.unshown is not None:
                return twiml(too_long_text(target.card, self.config.inbox_url)), True
            return twiml(refusal_text(exc.message)), True
        logger.info("sms answer handled approval=%s verdict=%s", answer.approval_id, reply.verdict)
        if reply.verdict is Verdict.ALWAYS_DENY:
            return twiml(standing_text(target.card)), True
        if reply.allow_for is not None and card.status is ApprovalStatus.APPROVED:
            return twiml(allowed_text(card, reply.allow_for)), True
        if card.status is ApprovalStatus.PENDING and card.approved_by(sender):
            # A YES toward a quorum still short: only this approver is told; the outcome is
            # texted to every approver once the quorum is met (or at a NO).
            return twiml(counted_text(card)), True
        # No TwiML confirmation: the engine calls show_outcome, which texts every approver.
        return twiml(), True

    async def unshown(self, card: ApprovalCard, sender: str) -> str | None:
        """Why the texts to `sender` could not show the call whole: as recorded with its text,
        or (a text recorded before texts said so) as the call stands, which a text of another
        version could not be answered for anyway. A handoff approves no call."""
        recorded = await self.store.texted_unshown(card.approval_id, sender)
        return recorded or (None if card.handoff else not_texted_whole(card))

    async def _more(
        self, pending: Sequence[Placed], sender: str, code: str | None, codes: list[str], handoffs: list[str]
    ) -> Response:
        """The whole call, in parts, for an approver it was texted to; it decides nothing."""
        if not pending:
            return twiml(help_text())
        if code is None:
            if len(pending) > 1:
                return twiml(help_text(codes, handoffs=handoffs))
            target = pending[0]
        else:
            matches = [p for p in pending if p.card.short_code == code]
            if len(matches) != 1:
                return twiml(unknown_code_text(code, codes))
            target = matches[0]
        logger.info("sms full call texted approval=%s", target.card.approval_id)
        # A text of this request: a bare YES soon after must not be taken for another's.
        await self.store.shown(target.card.approval_id, sender)
        return twiml(*more_texts(target.card))

    async def _pending(self, conversations: Sequence[str], sender: str) -> tuple[str, list[Placed]]:
        """The first conversation (the number texted, then its service) with requests for `sender`.

        A number inside a Messaging Service reports the service's SID on inbound texts even
        when the request was sent from the bare number, and a request sent through a service
        arrives from one of its numbers, so both are tried, the exact number first; the desk
        still checks that the answer's conversation is the one the request was delivered to.
        """
        for conversation in conversations:
            found = await self.desk.pending_for_number(conversation, sender)
            # A request still queued for texting was never seen: it must not make a bare
            # YES ambiguous, nor be answered by one. One texted a moment ago counts,
            # although its receipt may not be stored yet.
            pending = [p for p in found if await self._texted(p, sender)]
            if pending:
                return conversation, pending
        return conversations[-1], []

    async def _texted(self, placed: Placed, sender: str) -> bool:
        """True once the request was texted (or was being texted) to `sender`."""
        if placed.delivered is None:
            return False
        if sender not in placed.route.approvers:
            # A number the request was escalated to: texted by that step, not the first one.
            return await self.store.was_texted(placed.card.approval_id, sender)
        if placed.delivered.message_refs:
            return True  # the full receipt: every approver was texted
        return await self.store.was_texted(placed.card.approval_id, sender)

    async def _latest(self, conversations: Sequence[str], sender: str) -> Placed | None:
        for conversation in conversations:
            latest = await self.desk.latest_for_number(conversation, sender)
            if latest is not None:
                return latest
        return None

    async def _opt_out(self, sender: str, conversations: Sequence[str]) -> None:
        """Remember the opt-out and fail closed what this number was asked to decide."""
        await self.store.set_opted_out(sender, True)
        for conversation in conversations:
            for placed in await self.desk.pending_for_number(conversation, sender):
                await self.desk.fail_closed(
                    placed.card.approval_id, "SURFACE_UNAVAILABLE", "approver opted out by STOP"
                )
                logger.info("sms approver opted out approval=%s", placed.card.approval_id)

    async def status(self, request: Request) -> Response:
        """Handle a delivery status: audit it, and fail closed on `failed`/`undelivered`."""
        form = await read_signed_form(request, self.config.public_url, self.config.auth_token)
        if isinstance(form, Response):
            return form
        message_sid = form.get("MessageSid") or form.get("SmsSid")
        status = form.get("MessageStatus") or form.get("SmsStatus")
        if not message_sid or not status:
            return Response("MessageSid and MessageStatus are required", status_code=400)
        approval_id = await self.store.approval_of_sid(message_sid)
        if approval_id is None:
            return Response(status_code=204)  # an outcome text, or not ours
        error_code = form.get("ErrorCode") or None
        reported = SmsStatus(messageSid=message_sid, status=status, errorCode=error_code)
        await self.desk.note(approval_id, AuditEvent.SMS_STATUS, written(reported))
        if status in UNDELIVERED:
            placed = await self.desk.placed(approval_id)
            if placed is not None and placed.card.status is ApprovalStatus.PENDING:
                await self.desk.fail_closed(
                    approval_id, "SURFACE_UNAVAILABLE", f"text undelivered: ErrorCode {error_code}"
                )
                logger.info("sms text undelivered approval=%s", approval_id)
        return Response(status_code=204)
