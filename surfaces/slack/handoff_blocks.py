"""Block Kit for handoff cards: why a person must act, the numbered steps, Done and Cancel.

A handoff is never approved or denied, so its card has no Approve, Deny or "Approve for this
run": only **Done** (which Cosigner checks against the application before it counts) and
**Cancel**. Parameters and every other text an agent or tenant controls are escaped and
length-fitted by `mrkdwn`, as on approval cards.
"""

from __future__ import annotations

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from contracts.enums import ApprovalStatus, Verdict
from contracts.handoff import HandoffCard
from contracts.ports import ApprovalCard, Ending, SlackRoute
from contracts.shown import Hidden
from surfaces.slack import mrkdwn
from surfaces.slack.blocks import FULL_CALL_ACTION, notice_block, parameter_sections

SECTION_LIMIT = 3000
ACTION_PREFIX = "cosigner."  # as on approval cards, so one parser reads both
BLOCK_PREFIX = "cosigner:"
MAX_STEPS_SHOWN = 10  # 10 steps of at most 280 characters fit one section

_WORDS = {
    ApprovalStatus.COMPLETED: "Done and confirmed",
    ApprovalStatus.FAILED: "Not confirmed",
    ApprovalStatus.CANCELLED: "Cancelled",
    ApprovalStatus.EXPIRED: "Expired",
    ApprovalStatus.PENDING: "Pending",
}


def _md(text: str) -> MarkdownTextObject:
    return MarkdownTextObject(text=text, verbatim=True)


def to_handoff_blocks(card: ApprovalCard, route: SlackRoute) -> tuple[list[Block], str]:
    """The pending handoff card (Done / Cancel) and its escaped notification text."""
    body, left_out = _body(card, route)
    notice = [notice_block(left_out)] if left_out else []
    return [*body, *notice, _buttons(card)], _fallback(card, "Your action needed")


def to_closed_handoff_blocks(card: ApprovalCard, route: SlackRoute) -> tuple[list[Block], str]:
    """The same card with its buttons gone and the outcome (and what the application said) shown."""
    word = _WORDS.get(card.status, card.status.value.capitalize())
    return [*_body(card, route)[0], *_outcome(card, word)], _fallback(card, word)


def _handoff(card: ApprovalCard) -> HandoffCard:
    if card.handoff is None:
        raise ValueError(f"{card.approval_id} is not a handoff")
    return card.handoff


def _body(card: ApprovalCard, route: SlackRoute) -> tuple[list[Block], Hidden]:
    handoff = _handoff(card)
    steps = "\n".join(
        f"{i}. {mrkdwn.fit(step, 280)}" for i, step in enumerate(handoff.steps[:MAX_STEPS_SHOWN], 1)
    )
    if len(handoff.steps) > MAX_STEPS_SHOWN:
        steps += f"\n… and {len(handoff.steps) - MAX_STEPS_SHOWN} more"
    # Every parameter, as on approval cards: masked in place, cut to a fixed length, said.
    params, left_out = parameter_sections(card)
    who = ", ".join(mrkdwn.mention(a) or mrkdwn.fit(a, 80) for a in route.approvers[:10]) or "nobody"
    claim = mrkdwn.fit(card.reason, 1000) if card.reason else "_none given_"
    ids = mrkdwn.fit(f"{card.short_code} · run {card.execution_id} · call {card.tool_call_id}", 600)
    return [
        HeaderBlock(text=PlainTextObject(text=f"Handoff: {card.tool_name}"[:150], emoji=False)),
        SectionBlock(text=_md(f"*Why a person must do this*\n{mrkdwn.fit(handoff.reason, 2000)}")),
        SectionBlock(block_id=f"{BLOCK_PREFIX}steps", text=_md(f"*Steps*\n{steps}")),
        *params,
        SectionBlock(
            fields=[
                _md(f"*Who must do it*\n{who}"),
                _md(f"*Expires*\n{mrkdwn.date_token(card.expires_at)}"),
            ]
        ),
        ContextBlock(
            elements=[
                _md(
                    "Press *Done* once you have done every step: Cosigner then asks the "
                    "application whether it really happened. Pressing Done proves nothing by itself."
                ),
                _md(f"*Agent's stated reason (unverified claim):* {claim}"),
                _md(f"*Policy:* {mrkdwn.fit(card.policy_rule, 1000)} · {ids}"),
            ]
        ),
    ], left_out


def _buttons(card: ApprovalCard) -> ActionsBlock:
    return ActionsBlock(
        block_id=f"{BLOCK_PREFIX}{card.approval_id}",
        elements=[
            ButtonElement(
                text=PlainTextObject(text="Done"),
                action_id=f"{ACTION_PREFIX}{Verdict.DONE.value}",
                value=card.approval_id,
                style="primary",
            ),
            ButtonElement(
                text=PlainTextObject(text="Cancel"),
                action_id=f"{ACTION_PREFIX}{Verdict.CANCEL.value}",
                value=card.approval_id,
                style="danger",
            ),
            ButtonElement(
                text=PlainTextObject(text="See the full call"),
                action_id=FULL_CALL_ACTION,
                value=card.approval_id,
            ),
        ],
    )


def _outcome(card: ApprovalCard, word: str) -> list[Block]:
    outcome = card.outcome
    handoff = _handoff(card)
    line = f"*{word}*"
    if outcome is not None:
        line += f" · {_who(card, outcome)} · {mrkdwn.date_token(outcome.decided_at)}"
    blocks: list[Block] = [SectionBlock(block_id=f"{BLOCK_PREFIX}outcome", text=_md(line))]
    if handoff.detail:
        said = "The application confirmed" if card.status is ApprovalStatus.COMPLETED else "The check said"
        blocks.append(SectionBlock(text=_md(f"*{said}*\n{mrkdwn.fit(handoff.detail, SECTION_LIMIT - 40)}")))
    return blocks


def _who(card: ApprovalCard, outcome: Ending) -> str:
    if outcome.decider_kind == "person":
        person = mrkdwn.mention(outcome.decider) if outcome.surface in (None, "slack") else None
        person = person or mrkdwn.fit(f"{outcome.decider or 'a person'} ({outcome.surface})", 200)
        if card.status in (ApprovalStatus.COMPLETED, ApprovalStatus.FAILED):
            return f"Done pressed by {person}, checked with the application"
        return f"by {person}"
    if outcome.decider_kind == "timeout":
        return "nobody pressed Done in time"
    if outcome.decider_kind == "agent":
        return "the agent withdrew it"
    return "Cosigner " + mrkdwn.fit(f"({outcome.decider})" if outcome.decider else "(system)", 200)


def _fallback(card: ApprovalCard, lead: str) -> str:
    text = f"{lead}: {card.tool_name} ({card.short_code}), expires {mrkdwn.utc(card.expires_at)}"
    return mrkdwn.fit(text, 300)
