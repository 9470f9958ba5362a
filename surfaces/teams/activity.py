"""What an inbound Bot Connector activity means: a card action, parsed into a `Click`.

The activity is read with the Agents SDK's own model (`microsoft_agents.activity.Activity`);
only an `invoke` named `adaptiveCard/action` carrying an `Action.Execute` of ours becomes a
`Click`. Everything the desk checks (tenant, conversation, message, who) is taken from the
activity as Teams sent it; the JWT that vouches for it is checked before this runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from microsoft_agents.activity import Activity, AdaptiveCardInvokeValue
from pydantic import ValidationError

from contracts.allowances import choice_named
from contracts.enums import SurfaceType
from contracts.ports import Answer, Look
from surfaces.teams.card import ALLOW_FOR_PREFIX, COMMENT_INPUT, COMMENT_MAX, VERDICTS, Verb

INVOKE = "invoke"
CARD_ACTION = "adaptiveCard/action"


class NotACardAction(ValueError):
    """The activity is not a card action Cosigner answers (a message, a typing event, …)."""


class Malformed(ValueError):
    """A card action missing what Teams always sends; the message names the field."""


@dataclass(frozen=True)
class Click:
    """A press of a card's button, as Teams described it."""

    approval_id: str
    verb: Verb
    actor: str  # from.aadObjectId
    tenant_id: str
    conversation_id: str
    message_id: str  # replyToId: the card's activity id
    app_id: str | None  # recipient.id without Teams' `28:` prefix
    comment: str | None
    page: int = 0  # the page of the whole call to show (Show the full call, Next page)

    def answer(self) -> Answer:
        """The click as an answer for the desk; only for verbs that decide."""
        return Answer(
            approval_id=self.approval_id,
            surface=SurfaceType.TEAMS,
            verdict=VERDICTS[self.verb],
            actor=self.actor,
            org=self.tenant_id,
            actor_org=self.tenant_id,
            conversation=self.conversation_id,
            message_ref=self.message_id,
            app_id=self.app_id,
            comment=self.comment,
            allow_for=allow_for_seconds(self.verb),
        )

    def look(self) -> Look:
        """The click as a request to read the card (refresh, Show the full call)."""
        return Look(
            approval_id=self.approval_id,
            surface=SurfaceType.TEAMS,
            actor=self.actor,
            org=self.tenant_id,
            actor_org=self.tenant_id,
            conversation=self.conversation_id,
            message_ref=self.message_id,
            app_id=self.app_id,
        )


def read_activity(body: Any) -> Activity:
    """The activity a JSON body holds, or `Malformed`."""
    if not isinstance(body, dict):
        raise Malformed("the body must be a JSON object (a Bot Connector activity)")
    try:
        return Activity.model_validate(body)
    except ValidationError as exc:
        raise Malformed(f"not a Bot Connector activity ({exc.error_count()} problems)") from exc


def parse_click(activity: Activity) -> Click:
    """The card action an activity carries; `NotACardAction` or `Malformed` otherwise."""
    if activity.type != INVOKE or activity.name != CARD_ACTION:
        raise NotACardAction(f"{activity.type} {activity.name or ''}".strip())
    try:
        value = AdaptiveCardInvokeValue.model_validate(activity.value)
    except ValidationError as exc:
        raise Malformed("value.action is missing or malformed") from exc
    action = value.action
    if action.type != "Action.Execute":
        raise Malformed(f"value.action.type is {action.type!r}, not Action.Execute")
    try:
        verb = Verb(action.verb or "")
    except ValueError as exc:
        raise NotACardAction(f"verb {action.verb!r}") from exc
    approval_id = action.data.get("approvalId")
    if not isinstance(approval_id, str) or not approval_id:
        raise Malformed("value.action.data.approvalId is missing")
    sender = activity.from_property
    actor = sender.aad_object_id if sender is not None else None
    if not actor:
        raise Malformed("from.aadObjectId is missing")
    conversation = activity.conversation
    if conversation is None or not conversation.id:
        raise Malformed("conversation.id is missing")
    tenant = _tenant(activity)
    if not activity.reply_to_id:
        raise Malformed("replyToId (the card's message id) is missing")
    recipient = activity.recipient.id if activity.recipient is not None else None
    comment = action.data.get(COMMENT_INPUT)
    text = comment.strip()[:COMMENT_MAX] if isinstance(comment, str) else ""
    page = action.data.get("page", 0)
    if not isinstance(page, int) or isinstance(page, bool) or page < 0:
        raise Malformed("value.action.data.page must be a whole number from 0")
    return Click(
        approval_id=approval_id,
        verb=verb,
        actor=actor,
        tenant_id=tenant,
        conversation_id=conversation.id,
        message_id=activity.reply_to_id,
        app_id=recipient.removeprefix("28:") if recipient else None,
        comment=text or None,
        page=page,
    )


def _tenant(activity: Activity) -> str:
    """The AAD tenant the action happened in; the two places Teams names it must agree."""
    named = activity.conversation.tenant_id if activity.conversation is not None else None
    data = activity.channel_data
    channel = (
        data.get("tenant", {}).get("id")
        if isinstance(data, dict) and isinstance(data.get("tenant"), dict)
        else None
    )
    if named and channel and named != channel:
        raise Malformed("conversation.tenantId and channelData.tenant.id disagree")
    tenant = named or channel
    if not tenant:
        raise Malformed("the tenant id (conversation.tenantId) is missing")
    return str(tenant)


def allow_for_seconds(verb: Verb) -> float | None:
    """The length an "Allow for …" verb asks for (`allow_for_1h`), None for any other verb."""
    if not verb.value.startswith(ALLOW_FOR_PREFIX):
        return None
    choice = choice_named(verb.value.removeprefix(ALLOW_FOR_PREFIX))
    return choice.seconds if choice is not None else None
