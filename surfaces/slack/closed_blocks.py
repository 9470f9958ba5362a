"""Block Kit for a closed approval card: the same card, its buttons gone, the outcome shown.

Who or what decided and when, the comment, the edit that ran, a quorum's approvals and an
operation's result; everything an agent or a tenant controls is escaped by `mrkdwn`.
"""

from __future__ import annotations

from slack_sdk.models.blocks import Block, SectionBlock

from contracts.enums import ApprovalStatus
from contracts.ports import ApprovalCard, Ending, SlackRoute
from surfaces.slack import mrkdwn
from surfaces.slack.blocks import (
    BLOCK_PREFIX,
    SECTION_LIMIT,
    body_blocks,
    edited_text,
    fallback_text,
    md,
    quorum_blocks,
)
from surfaces.slack.contract_blocks import result_blocks
from surfaces.slack.follow_up_text import escalation_blocks

STATUS_WORDS = {
    ApprovalStatus.APPROVED: "Approved",
    ApprovalStatus.DENIED: "Denied",
    ApprovalStatus.EXPIRED: "Expired",
    ApprovalStatus.CANCELLED: "Cancelled",
    ApprovalStatus.PENDING: "Pending",
}


def to_closed_blocks(card: ApprovalCard, route: SlackRoute) -> tuple[list[Block], str]:
    """The same card with its buttons gone and the outcome shown."""
    word = STATUS_WORDS[card.status]
    body, _ = body_blocks(card, route)
    return [
        *body,
        *escalation_blocks(card),
        *_outcome(card),
        *quorum_blocks(card),
        *result_blocks(card),
    ], fallback_text(card, word)


def _outcome(card: ApprovalCard) -> list[Block]:
    outcome = card.outcome
    word = STATUS_WORDS[card.status]
    if outcome is None:
        return [SectionBlock(text=md(f"*{word}*"))]
    line = f"*{word}* by {_decider(outcome)} · {mrkdwn.date_token(outcome.decided_at)}"
    blocks: list[Block] = [SectionBlock(block_id=f"{BLOCK_PREFIX}outcome", text=md(line))]
    if card.edited is not None and card.status is ApprovalStatus.APPROVED:
        blocks.append(SectionBlock(text=md(edited_text(card))))
    if outcome.comment:
        comment = mrkdwn.fit(outcome.comment, SECTION_LIMIT - 20)
        blocks.append(SectionBlock(text=md(f"*Comment*\n{comment}")))
    return blocks


def _decider(outcome: Ending) -> str:
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
