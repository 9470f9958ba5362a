"""Twilio's WhatsApp webhooks: quick-reply taps, typed answers and delivery statuses.

Every request is verified first, exactly as for SMS (`X-Twilio-Signature` over the public
URL and every field). A typed message is read by the SMS reader: exact `YES` / `NO`, with
the short code when the number has more than one request pending. A tap (`ButtonPayload`)
counts only when its nonce is the one sent to the tapping number for that approval, and
when it answers the message that carried it (`OriginalRepliedMessageSid`); then it goes
through the same answer checks as every surface. A tap that fails the nonce or message
check is handed to the desk all the same, marked as such: it decides nothing, and the
refusal goes on the approval's audit record, as a refused Slack click does.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

from starlette.datastructures import ImmutableMultiDict
from starlette.responses import Response

from contracts.enums import ApprovalStatus, ErrorCode, SurfaceType
from contracts.errors import CosignerError
from contracts.ports import Answer, Placed, SmsDesk
from contracts.sms import SmsStore
from surfaces.sms.refused_text import too_long_text
from surfaces.sms.replies_text import closed_text, edited_text, help_text, refusal_text
from surfaces.sms.webhook import SmsWebhooks, twiml
from surfaces.whatsapp.template import Tap, nonce_key, parse_tap

if TYPE_CHECKING:
    from surfaces.sms.adapter import SmsConfig

logger = logging.getLogger("cosigner.whatsapp")
NOT_YOURS = "This button was not sent to this number for this request; it decides nothing."
EDITED_SINCE = "the tap answers a message of this request sent before an approver edited its call"


class WhatsAppWebhooks(SmsWebhooks):
    """`POST /whatsapp/inbound` and `POST /whatsapp/status`: SMS's handlers, plus taps."""

    def __init__(self, config: SmsConfig, desk: SmsDesk, store: SmsStore) -> None:
        super().__init__(config, desk, store, SurfaceType.WHATSAPP)

    async def _handle(
        self, form: ImmutableMultiDict[str, str], message_sid: str, sender: str, to: str
    ) -> tuple[Response, bool]:
        """A tap is checked here; anything typed is read exactly as an SMS reply."""
        button = form.get("ButtonPayload")
        if button is None:
            return await super()._handle(form, message_sid, sender, to)
        tap = parse_tap(button)
        if tap is None:
            return twiml(help_text()), False
        placed = await self.desk.placed(tap.approval_id)
        if placed is None:
            logger.info("whatsapp tap refused approval=%s: no such request", tap.approval_id)
            return twiml(NOT_YOURS), False
        mismatch = await self._foreign(placed, tap, sender, to, form.get("OriginalRepliedMessageSid"))
        answer = Answer(
            approval_id=tap.approval_id,
            surface=SurfaceType.WHATSAPP,
            verdict=tap.verdict,
            actor=sender,
            org=to,
            actor_org=None,
            conversation=to,
            message_id=message_sid,
            mismatch=mismatch,
            seen=await self.store.texted_digest(tap.approval_id, sender),
            # A call too long to show whole by text: Approve is refused, Deny counts.
            unshown=await self.unshown(placed.card, sender),
        )
        try:
            await self.desk.answer(answer)
        except CosignerError as exc:
            logger.info("whatsapp tap refused approval=%s code=%s", tap.approval_id, exc.code)
            if mismatch == EDITED_SINCE and placed.card.status is ApprovalStatus.PENDING:
                return twiml(edited_text(placed.card)), True
            if mismatch is not None:
                return twiml(NOT_YOURS), True
            placed = await self.desk.placed(tap.approval_id)
            if placed is not None and placed.card.status is not ApprovalStatus.PENDING:
                return twiml(closed_text(placed.card)), True
            if placed is not None and exc.code == ErrorCode.PARAMETERS_MISMATCH:
                return twiml(edited_text(placed.card)), True
            if placed is not None and exc.code == ErrorCode.APPROVAL_MODE_UNSUPPORTED and answer.unshown:
                return twiml(too_long_text(placed.card, self.config.inbox_url)), True
            return twiml(refusal_text(exc.message)), True
        logger.info("whatsapp tap handled approval=%s verdict=%s", tap.approval_id, tap.verdict)
        return twiml(), True  # the engine's show_outcome tells every approver

    async def _foreign(
        self, placed: Placed, tap: Tap, sender: str, to: str, replied: str | None
    ) -> str | None:
        """Why a tap is not this number's answer to this request, or None when it is."""
        if placed.delivered is None or placed.route.surface is not SurfaceType.WHATSAPP:
            return "no WhatsApp request with this id was sent"
        if placed.delivered.conversation != to:
            return "the tap was sent to another sender number"
        expected = placed.delivered.extra.get(nonce_key(sender))
        if expected is None or not secrets.compare_digest(expected, tap.nonce):
            return "the nonce was not sent to this number"
        sent = await self.store.sent_sid(tap.approval_id, sender)
        if replied is not None and sent is not None and replied != sent:
            if await self.store.approval_of_sid(replied) == tap.approval_id:
                return EDITED_SINCE  # the edited call was sent since (`WhatsAppAdapter.retext`)
            return "the tap answers another message"
        return None
