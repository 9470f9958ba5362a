"""The batch card: several waiting requests for one tool, answered together or one by one.

Each call is listed with every parameter as its own card shows it (redacted, masked in place,
sorted by name) and its digest. Nothing is cut: a call whose parameters do not fit whole in
one section, or a list whose ids and digests do not fit in a button's value, is not offered
as a batch at all (`batch_blocks` answers None) and each request is answered on its own
card. The buttons carry the exact (approval id, digest) list they answer; the desk refuses a
press whose list is not what waits now.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    HeaderBlock,
    PlainTextObject,
    SectionBlock,
)

from contracts.batches import MAX_BATCH, MIN_BATCH, Batch, BatchAnswer, Listed
from contracts.enums import SurfaceType, Verdict
from contracts.errors import InvalidRequest
from contracts.ports import ApprovalCard, SlackRoute
from contracts.shown import fields, hidden, render
from surfaces.slack import mrkdwn
from surfaces.slack.blocks import ACTION_PREFIX, SECTION_LIMIT, VALUE_SEPARATOR, md
from surfaces.slack.parse import _mapping, _match, _who

BATCH_APPROVE = f"{ACTION_PREFIX}batch_approve"
BATCH_DENY = f"{ACTION_PREFIX}batch_deny"
BATCH_ACTIONS = {BATCH_APPROVE: Verdict.APPROVE, BATCH_DENY: Verdict.DENY}
BATCH_BLOCK = "cosigner:batch"
ITEM_SEPARATOR = ","
BUTTON_VALUE_LIMIT = 2000  # Slack's limit on a button's value

_SLACK_ID = re.compile(r"^[A-Z0-9]{2,64}$")
_TS = re.compile(r"^\d{1,12}\.\d{1,8}$")
_APPROVAL_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def listed_value(listed: Listed) -> str:
    """The button value: `id|digest,id|digest,…` in the card's order."""
    return ITEM_SEPARATOR.join(f"{a}{VALUE_SEPARATOR}{d}" for a, d in listed)


def parse_listed(value: Any) -> Listed:
    """The (approval id, digest) list a batch button carries; `InvalidRequest` when malformed."""
    if not isinstance(value, str) or not value or len(value) > BUTTON_VALUE_LIMIT:
        raise InvalidRequest("`actions.value` is missing or malformed", field="actions.value")
    pairs: list[tuple[str, str]] = []
    for item in value.split(ITEM_SEPARATOR):
        approval_id, _, digest = item.partition(VALUE_SEPARATOR)
        pairs.append(
            (
                _match(approval_id, _APPROVAL_ID, "actions.value"),
                _match(digest, _DIGEST, "actions.value"),
            )
        )
    ids = [a for a, _ in pairs]
    if not MIN_BATCH <= len(pairs) <= MAX_BATCH or len(set(ids)) != len(ids):
        raise InvalidRequest(
            f"a batch answer lists {MIN_BATCH} to {MAX_BATCH} different requests", field="actions.value"
        )
    return tuple(pairs)


def parse_batch_action(payload: Mapping[str, Any]) -> BatchAnswer:
    """A press of *Approve all* or *Deny all* as a `BatchAnswer`; `InvalidRequest` when malformed."""
    if payload.get("type") != "block_actions":
        raise InvalidRequest("expected a block_actions payload", field="type")
    actions = payload.get("actions")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict):
        raise InvalidRequest("expected exactly one action", field="actions")
    action = actions[0]
    verdict = BATCH_ACTIONS.get(action.get("action_id", ""))
    if verdict is None:
        raise InvalidRequest("not a Cosigner batch button", field="actions.action_id")
    if action.get("block_id") not in (None, BATCH_BLOCK):
        raise InvalidRequest("the button is not on a batch card", field="actions.block_id")
    container = _mapping(payload, "container")
    if container.get("type") != "message" or container.get("is_ephemeral"):
        raise InvalidRequest("buttons count only on a posted card", field="container.type")
    return BatchAnswer(
        surface=SurfaceType.SLACK,
        verdict=verdict,
        listed=parse_listed(action.get("value")),
        conversation=_match(container.get("channel_id"), _SLACK_ID, "container.channel_id"),
        message_ref=_match(container.get("message_ts"), _TS, "container.message_ts"),
        **_who(payload),
    )


def batch_blocks(batch: Batch, route: SlackRoute) -> tuple[list[Block], str] | None:
    """The batch card with its buttons, or None when it cannot list every call whole."""
    cards = batch.cards
    if not MIN_BATCH <= len(cards) <= MAX_BATCH:
        return None
    value = listed_value(batch.listed)
    if len(value) > BUTTON_VALUE_LIMIT:
        return None
    items: list[Block] = []
    masked = 0
    for i, card in enumerate(cards, 1):
        section = _call_section(i, card)
        if section is None:
            return None
        items.append(section)
        items.append(_call_context(card))
        masked += len(hidden(fields(dict(card.asked())), SECTION_LIMIT).masked)
    n, tool = len(cards), mrkdwn.fit(batch.tool_name, 128)
    who = " or ".join(filter(None, (mrkdwn.mention(a) for a in route.approvers[:5]))) or "an approver"
    lead = SectionBlock(
        text=md(
            f"*{n} requests for `{tool}` wait for {who} in this conversation.* Approve or deny them "
            "all at once here, or one by one on their own cards. Each call is decided on its own, "
            "with its own grant, and the buttons answer exactly the calls listed."
        )
    )
    notice: list[Block] = []
    if masked:
        notice = [
            SectionBlock(
                text=md(
                    f":warning: *{masked} value{'s' if masked != 1 else ''} partly hidden "
                    "(credential-looking text)*: masked here as on each card"
                )
            )
        ]
    header = HeaderBlock(text=PlainTextObject(text=f"{n} waiting: {batch.tool_name}"[:150], emoji=False))
    blocks: list[Block] = [header, lead, *items, *notice, _buttons(n, batch.tool_name, value)]
    return blocks, mrkdwn.fit(f"{n} requests for {batch.tool_name} wait for approval", 300)


def withdrawn_blocks(tool_name: str) -> tuple[list[Block], str]:
    """The card once its batch is no longer offered: no buttons, and why."""
    text = (
        f"*Batch no longer offered for `{mrkdwn.fit(tool_name, 128)}`*: the requests it listed were "
        "answered, expired, or no longer fit on one card. Answer each on its own card."
    )
    return [SectionBlock(block_id=f"{BATCH_BLOCK}.closed", text=md(text))], mrkdwn.fit(
        f"Batch no longer offered: {tool_name}", 300
    )


def _call_section(i: int, card: ApprovalCard) -> SectionBlock | None:
    """One call's parameters, whole; None when they do not fit in one section."""
    shown = fields(dict(card.asked()))
    lines = [mrkdwn.break_fences(mrkdwn.escape(f"{render(f.name)}: {f.text}")) for f in shown] or ["(none)"]
    ids = f"run {mrkdwn.fit(card.execution_id, 200)} · call {mrkdwn.fit(card.tool_call_id, 200)}"
    label = f"*{i}.* `{card.short_code}` · {ids}\n"
    text = label + "```\n" + "\n".join(lines) + "\n```"
    if len(text) > SECTION_LIMIT:
        return None
    return SectionBlock(block_id=f"{BATCH_BLOCK}.{i}", text=md(text))


def _call_context(card: ApprovalCard) -> ContextBlock:
    reason = mrkdwn.fit(card.reason, 300) if card.reason else "_none given_"
    progress = f" · approved {card.progress()}" if card.quorum > 1 else ""
    return ContextBlock(
        elements=[
            md(f"*Digest:* `{card.digest}`{progress}"),
            md(f"*Agent's stated reason (unverified claim):* {reason}"),
        ]
    )


def _buttons(n: int, tool_name: str, value: str) -> ActionsBlock:
    tool = mrkdwn.fit(tool_name, 100)
    approve = ConfirmObject(
        title=PlainTextObject(text=f"Approve all {n}?"),
        text=md(
            f"Each of the {n} `{tool}` calls listed runs with exactly the parameters shown. "
            "Cosigner cannot undo it."
        ),
        confirm=PlainTextObject(text=f"Approve all {n}"),
        deny=PlainTextObject(text="Cancel"),
    )
    deny = ConfirmObject(
        title=PlainTextObject(text=f"Deny all {n}?"),
        text=md(f"Each of the {n} `{tool}` calls listed is denied."),
        confirm=PlainTextObject(text="Deny all"),
        deny=PlainTextObject(text="Cancel"),
        style="danger",
    )
    return ActionsBlock(
        block_id=BATCH_BLOCK,
        elements=[
            ButtonElement(
                text=PlainTextObject(text=f"Approve all {n}"),
                action_id=BATCH_APPROVE,
                value=value,
                style="primary",
                confirm=approve,
            ),
            ButtonElement(
                text=PlainTextObject(text="Deny all"),
                action_id=BATCH_DENY,
                value=value,
                style="danger",
                confirm=deny,
            ),
        ],
    )
