"""The Bolt listener for a batch card's buttons: parse, hand to the desk, tell the clicker.

Like a press on a card, the desk has recorded (or refused) every answer before Slack gets
its 200 (`process_before_response`); the notice to the clicker runs after the ack.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from contracts.batches import BatchAnswer, BatchDesk
from contracts.enums import ApprovalStatus, ErrorCode, Verdict
from contracts.errors import CosignerError, InvalidRequest
from contracts.ports import ApprovalCard, ApprovalDesk
from surfaces.slack import mrkdwn
from surfaces.slack.batch import BATCH_APPROVE, BATCH_DENY, parse_batch_action

logger = logging.getLogger("cosigner.slack.clicks")

BATCH_BUTTONS = re.compile(rf"^({re.escape(BATCH_APPROVE)}|{re.escape(BATCH_DENY)})$")
Tell = Callable[[AsyncWebClient, dict[str, Any], str], Awaitable[None]]
Later = Callable[[Awaitable[None]], None]
Ack = Callable[..., Awaitable[Any]]


def stale_text(error: CosignerError) -> str:
    """What a clicker reads when the batch changed since the card they pressed was shown."""
    reason = mrkdwn.fit(error.message, 500)
    return f":arrows_counterclockwise: Nothing was decided ({error.code}): {reason}"


def batch_done_text(answer: BatchAnswer, cards: tuple[ApprovalCard, ...]) -> str:
    """What the clicker reads once every call of the batch was answered: what each came to."""
    if answer.verdict is Verdict.DENY:
        return f":no_entry_sign: You denied all {len(cards)} requests listed."
    closed = sum(1 for c in cards if c.status is ApprovalStatus.APPROVED)
    counted = [c for c in cards if c.status is ApprovalStatus.PENDING]
    text = f":white_check_mark: You approved all {len(cards)} requests listed"
    if counted:
        more = ", ".join(f"{c.short_code} ({c.progress()})" for c in counted[:10])
        text += f": {closed} approved; counted toward a quorum, still waiting for more approvers: {more}"
    return text + "."


def register(app: AsyncApp, desk: ApprovalDesk, tell: Tell, later: Later) -> None:
    """Attach the Approve all / Deny all listener (before the cards' catch-all)."""

    async def on_batch(ack: Ack, body: dict[str, Any], client: AsyncWebClient) -> None:
        try:
            if not isinstance(desk, BatchDesk):
                raise InvalidRequest("this server does not take batch answers; answer each card")
            answer = parse_batch_action(body)
            cards = await desk.answer_batch(answer)
            later(tell(client, body, batch_done_text(answer, cards)))
        except CosignerError as error:
            if error.code == ErrorCode.PARAMETERS_MISMATCH:
                later(tell(client, body, stale_text(error)))
            else:
                reason = mrkdwn.fit(error.message, 500)
                later(
                    tell(client, body, f":no_entry: Your batch answer was refused ({error.code}): {reason}")
                )
        except Exception:
            logger.exception("Recording a Slack batch answer failed")
            later(tell(client, body, ":warning: Cosigner could not record your answers. Try again."))
        await ack()

    app.action(BATCH_BUTTONS)(on_batch)
