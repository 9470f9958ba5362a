"""Block Kit for approval cards: the pending card, the closed card and the deny-comment modal.

Everything an agent or a tenant controls (parameters, reason, names, comments) is escaped
and length-fitted by `mrkdwn`; buttons carry only the approval id and the verdict.
"""

from __future__ import annotations

import json
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    HeaderBlock,
    InputBlock,
    MarkdownTextObject,
    PlainTextInputElement,
    PlainTextObject,
    SectionBlock,
)
from slack_sdk.models.views import View

from contracts.enums import ApprovalMode, ApprovalStatus, ToolKind, Verdict
from contracts.ports import ApprovalCard, Outcome, SlackRoute
from surfaces.slack import mrkdwn
from surfaces.slack.contract_blocks import preview_blocks, result_blocks

SECTION_LIMIT = 3000
ACTION_PREFIX = "cosigner."
ACTIONS = {f"{ACTION_PREFIX}{v.value}": v for v in Verdict}
BLOCK_PREFIX = "cosigner:"
DENY_CALLBACK = "cosigner.deny_comment"
COMMENT_BLOCK = "comment"
COMMENT_ACTION = "comment"
COMMENT_MAX = 2000

_STATUS_WORDS = {
    ApprovalStatus.APPROVED: "Approved",
    ApprovalStatus.DENIED: "Denied",
    ApprovalStatus.EXPIRED: "Expired",
    ApprovalStatus.CANCELLED: "Cancelled",
    ApprovalStatus.PENDING: "Pending",
}


def md(text: str) -> MarkdownTextObject:
    """A mrkdwn text object with Slack's auto-linking turned off."""
    return MarkdownTextObject(text=text, verbatim=True)


def to_blocks(card: ApprovalCard, route: SlackRoute) -> tuple[list[Block], str]:
    """The pending approval card and its escaped notification text."""
    return [*_body(card, route), _buttons(card, route)], _fallback(card, "Approval needed")


def to_closed_blocks(card: ApprovalCard, route: SlackRoute) -> tuple[list[Block], str]:
    """The same card with its buttons gone and the outcome shown."""
    word = _STATUS_WORDS[card.status]
    return [*_body(card, route), *_outcome(card), *result_blocks(card)], _fallback(card, word)


def deny_modal(card_id: str, tool_name: str, channel_id: str, message_ts: str) -> View:
    """The modal asking for an optional comment before a deny is recorded."""
    metadata = json.dumps({"a": card_id, "c": channel_id, "t": message_ts}, separators=(",", ":"))
    return View(
        type="modal",
        callback_id=DENY_CALLBACK,
        title=PlainTextObject(text="Deny request"),
        submit=PlainTextObject(text="Deny"),
        close=PlainTextObject(text="Cancel"),
        private_metadata=metadata,
        blocks=[
            SectionBlock(text=md(f"Deny *{mrkdwn.fit(tool_name, 200)}*? The agent sees your comment.")),
            InputBlock(
                block_id=COMMENT_BLOCK,
                label=PlainTextObject(text="Comment (optional)"),
                element=PlainTextInputElement(
                    action_id=COMMENT_ACTION, multiline=True, max_length=COMMENT_MAX
                ),
                optional=True,
            ),
        ],
    )


def _body(card: ApprovalCard, route: SlackRoute) -> list[Block]:
    if card.preview is not None:
        return [*preview_blocks(card), *_context(card, route)]
    tool = card.tool_name[:150]
    params = json.dumps(card.parameters, indent=2, ensure_ascii=False, default=str)
    label = "*Parameters* (redacted as shown to you; the decision binds to exactly this call)\n"
    trigger = mrkdwn.mention(route.requester) or mrkdwn.fit(card.triggered_by, 200)
    reason = mrkdwn.fit(card.reason, 2800) if card.reason else "_none given_"
    policy = mrkdwn.fit(card.policy_rule, 1000)
    expires = mrkdwn.date_token(card.expires_at)
    ids = mrkdwn.fit(f"{card.short_code} · run {card.execution_id} · call {card.tool_call_id}", 600)
    return [
        HeaderBlock(text=PlainTextObject(text=tool, emoji=False)),
        SectionBlock(
            block_id=f"{BLOCK_PREFIX}params",
            text=md(label + mrkdwn.fenced(params, SECTION_LIMIT - len(label))),
        ),
        SectionBlock(
            fields=[
                md(f"*Triggered by*\n{trigger}"),
                md(f"*Kind*\n{card.kind.value} · {card.mode.value}"),
            ]
        ),
        SectionBlock(text=md(f"*Agent's stated reason (unverified claim)*\n{reason}")),
        ContextBlock(
            elements=[
                md(f"*Policy:* {policy}"),
                md(f"*Expires:* {expires}"),
                md(ids),
            ]
        ),
    ]


def _context(card: ApprovalCard, route: SlackRoute) -> list[Block]:
    """Who triggered it, the policy, the expiry and the ids, under an operation's preview."""
    trigger = mrkdwn.mention(route.requester) or mrkdwn.fit(card.triggered_by, 200)
    ids = mrkdwn.fit(f"{card.short_code} · run {card.execution_id} · call {card.tool_call_id}", 600)
    return [
        ContextBlock(
            elements=[
                md(f"*Triggered by:* {trigger}"),
                md(f"*Policy:* {mrkdwn.fit(card.policy_rule, 1000)}"),
                md(f"*Expires:* {mrkdwn.date_token(card.expires_at)}"),
                md(ids),
            ]
        )
    ]


def _buttons(card: ApprovalCard, route: SlackRoute) -> ActionsBlock:
    confirm = None
    if card.kind == ToolKind.DANGER:
        confirm = ConfirmObject(
            title=PlainTextObject(text="Approve this call?"),
            text=md(
                f"*{mrkdwn.fit(card.tool_name, 150)}* will run with exactly the parameters shown. "
                "Cosigner cannot undo it."
                if card.preview is None
                else "The application will carry out exactly what the preview shows. Cosigner cannot undo it."
            ),
            confirm=PlainTextObject(text="Approve"),
            deny=PlainTextObject(text="Cancel"),
        )
    buttons = [_button("Approve", Verdict.APPROVE, card.approval_id, "primary", confirm)]
    if card.mode == ApprovalMode.ASK:
        buttons.append(
            _button(
                "Approve for this run", Verdict.APPROVE_FOR_RUN, card.approval_id, None, _for_run(card, route)
            )
        )
    buttons.append(_button("Deny", Verdict.DENY, card.approval_id, "danger"))
    if card.offers_always_deny:
        buttons.append(_always_deny(card))
    return ActionsBlock(block_id=f"{BLOCK_PREFIX}{card.approval_id}", elements=buttons)


def _for_run(card: ApprovalCard, route: SlackRoute) -> ConfirmObject:
    """Say whom the run grant covers: only the same requester, in this conversation."""
    tool = mrkdwn.fit(card.tool_name, 128)
    who = mrkdwn.mention(route.requester) or mrkdwn.fit(card.triggered_by, 200)
    return ConfirmObject(
        title=PlainTextObject(text="Approve for this run?"),
        text=md(
            f"Later calls of `{tool}` in this run by {who} in this conversation will run without "
            "asking. Calls from anyone else, or from another conversation, are still asked."
        ),
        confirm=PlainTextObject(text="Approve for this run"),
        deny=PlainTextObject(text="Cancel"),
    )


def _always_deny(card: ApprovalCard) -> ButtonElement:
    """The third button: deny, and refuse this tool from now on for requests this person approves."""
    tool = mrkdwn.fit(card.tool_name, 128)
    confirm = ConfirmObject(
        title=PlainTextObject(text="Always deny?"),
        text=md(
            f"Deny `{tool}` for requests you approve, now and from now on: later ones are refused "
            "without asking you. Lift it with /cosigner."
        ),
        confirm=PlainTextObject(text="Always deny"),
        deny=PlainTextObject(text="Cancel"),
        style="danger",
    )
    return _button("Always deny", Verdict.ALWAYS_DENY, card.approval_id, confirm=confirm)


def _button(
    label: str,
    verdict: Verdict,
    approval_id: str,
    style: str | None = None,
    confirm: ConfirmObject | None = None,
) -> ButtonElement:
    return ButtonElement(
        text=PlainTextObject(text=label),
        action_id=f"{ACTION_PREFIX}{verdict.value}",
        value=approval_id,
        style=style,
        confirm=confirm,
    )


def _outcome(card: ApprovalCard) -> list[Block]:
    outcome = card.outcome
    word = _STATUS_WORDS[card.status]
    if outcome is None:
        return [SectionBlock(text=md(f"*{word}*"))]
    line = f"*{word}* by {_decider(outcome)} · {mrkdwn.date_token(outcome.decided_at)}"
    blocks: list[Block] = [SectionBlock(block_id=f"{BLOCK_PREFIX}outcome", text=md(line))]
    if outcome.comment:
        comment = mrkdwn.fit(outcome.comment, SECTION_LIMIT - 20)
        blocks.append(SectionBlock(text=md(f"*Comment*\n{comment}")))
    return blocks


def _decider(outcome: Outcome) -> str:
    who = outcome.decider
    if outcome.decider_kind == "person":
        if outcome.surface in (None, "slack"):
            return mrkdwn.mention(who) or mrkdwn.fit(who or "a person", 200)
        return mrkdwn.fit(f"{who or 'a person'} ({outcome.surface})", 200)
    if outcome.decider_kind == "timeout":
        return "timeout (nobody answered in time; expiry means deny)"
    if outcome.decider_kind == "policy":
        return "policy rule " + mrkdwn.fit(who or "?", 500)
    if outcome.decider_kind == "agent":
        return "the agent (cancelled)"
    return "Cosigner " + mrkdwn.fit(f"({who})" if who else "(system)", 200)


def _fallback(card: ApprovalCard, lead: str) -> str:
    what = card.preview.title if card.preview is not None else card.tool_name
    text = f"{lead}: {what} ({card.short_code}), expires {mrkdwn.utc(card.expires_at)}"
    return mrkdwn.fit(text, 300)


def as_dicts(blocks: list[Block]) -> list[dict[str, Any]]:
    """Block objects as the JSON Slack receives (validates Block Kit limits on the way)."""
    return [b.to_dict() for b in blocks]
