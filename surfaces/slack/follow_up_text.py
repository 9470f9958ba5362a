"""What Slack shows of a request's follow-ups: the escalation line on its cards, and the
reminder posted in the card's thread."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import Block, ContextBlock, MarkdownTextObject

from contracts.ports import ApprovalCard, EscalationNote
from surfaces.slack import mrkdwn

_WHO = {"tenant_admins": "tenant admins", "staff": "staff", "requester": "the requester"}


def time_token(note: EscalationNote) -> str:
    """The step's time as a Slack date token (the reader's own clock), UTC as fallback."""
    epoch = int(note.at.timestamp())
    return f"<!date^{epoch}^{{time}}|{note.at.strftime('%H:%M UTC')}>"


def escalation_blocks(card: ApprovalCard) -> list[Block]:
    """One context line per escalation step taken: "Escalated to tenant admins at 10:52"."""
    if not card.escalations:
        return []
    lines = [f"Escalated to {_WHO.get(n.to.value, n.to.value)} at {time_token(n)}" for n in card.escalations]
    text = MarkdownTextObject(text=" · ".join(lines), verbatim=True)
    return [ContextBlock(block_id="cosigner:escalations", elements=[text])]


def reminder_text(card: ApprovalCard, approvers: Sequence[str]) -> str:
    """The thread reply that reminds the approvers still to answer (only well-formed user ids
    become mentions; the tool name is escaped)."""
    mentions = " ".join(m for a in approvers if (m := mrkdwn.mention(a)))
    what = mrkdwn.fit(card.tool_name, 150)
    lead = f"{mentions} " if mentions else ""
    return (
        f"{lead}Reminder: *{what}* ({card.short_code}) is still waiting for an answer on the card "
        f"above. It expires {mrkdwn.date_token(card.expires_at)}; expiry means deny."
    )
