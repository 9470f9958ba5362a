"""The *See the full call* modal: every parameter, uncut, paged to fit Slack's modal limits.

The parameters are the redacted ones the card shows (policy paths and secret-named keys
replaced, credential-looking spans masked in place), never cut: a long value runs over as
many code blocks and pages as it needs. For an operation, what is approved is the
application's preview: it comes first, whole (title, every field, every effect), then the
agent's request as its claim. A page holds `PIECES_PER_PAGE` code blocks of at
most `PIECE` escaped characters; *Next page* and *Previous page* swap the view in place
(`views.update`), each press checked again like the first.
"""

from __future__ import annotations

import json

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    PlainTextObject,
    SectionBlock,
)
from slack_sdk.models.views import View

from contracts.ports import ApprovalCard
from surfaces.slack import mrkdwn
from surfaces.slack.blocks import ACTION_PREFIX, md

FULL_CALL_CALLBACK = f"{ACTION_PREFIX}full_call"
NEXT_ACTION = f"{ACTION_PREFIX}full_call_next"
PREVIOUS_ACTION = f"{ACTION_PREFIX}full_call_previous"
PAGE_ACTIONS = frozenset({NEXT_ACTION, PREVIOUS_ACTION})
PAGE_BLOCK = "cosigner:pages"
# `break_fences` may double a run of backticks, so a piece of 1,400 escaped characters
# stays under a section's 3,000 with its fence.
PIECE = 1400
PIECES_PER_PAGE = 12  # of a modal's 100 blocks; about 17,000 characters a page


def _whole(card: ApprovalCard) -> str:
    """Everything the approver approves, as plain text: the call, or an operation's preview
    followed by the agent's request."""
    call = card.asked()
    ordered = {name: call[name] for name in sorted(call, key=str)}
    text = json.dumps(ordered, indent=2, ensure_ascii=False, default=str)
    if card.preview is None:
        return text
    preview = card.preview
    lines = [preview.title, *(f"{f.label}: {f.value}" for f in preview.fields)]
    lines += ["Effects:", *(f"- {e}" for e in preview.effects)] if preview.effects else []
    return "\n".join([*lines, "", "Agent's request (its claim, unverified):", text])


def pages(card: ApprovalCard) -> list[list[str]]:
    """The call as pages of fenced code-block texts, each within Slack's section limit."""
    escaped = mrkdwn.escape(_whole(card))
    pieces = []
    while escaped:
        cut = mrkdwn.safe_cut(escaped, PIECE) or PIECE
        pieces.append(f"```\n{mrkdwn.break_fences(escaped[:cut])}\n```")
        escaped = escaped[cut:]
    return [pieces[i : i + PIECES_PER_PAGE] for i in range(0, len(pieces), PIECES_PER_PAGE)] or [
        ["```\n{}\n```"]
    ]


def full_call_modal(card: ApprovalCard, page: int, channel_id: str, message_ts: str) -> View:
    """Page `page` (from 0) of the whole call, bound by its metadata to the card it was opened from."""
    book = pages(card)
    page = min(max(page, 0), len(book) - 1)
    metadata = json.dumps({"a": card.approval_id, "c": channel_id, "t": message_ts}, separators=(",", ":"))
    what = (
        "every parameter as the agent sent it"
        if card.preview is None
        else "the application's preview, whole (what you approve), then the agent's request"
    )
    lead = (
        f"*{mrkdwn.fit(card.tool_name, 150)}* ({mrkdwn.fit(card.short_code, 20)}): {what}. Values "
        "the policy hides read `[REDACTED]`; credential-looking text is masked in place and never "
        "shown. The decision binds to exactly this call."
    )
    blocks: list[Block] = [SectionBlock(text=md(lead))]
    blocks += [SectionBlock(text=md(piece)) for piece in book[page]]
    if len(book) > 1:
        blocks.append(ContextBlock(elements=[md(f"Page {page + 1} of {len(book)}")]))
        buttons = []
        if page > 0:
            buttons.append(_page_button("Previous page", PREVIOUS_ACTION, page - 1))
        if page < len(book) - 1:
            buttons.append(_page_button("Next page", NEXT_ACTION, page + 1))
        blocks.append(ActionsBlock(block_id=PAGE_BLOCK, elements=buttons))
    return View(
        type="modal",
        callback_id=FULL_CALL_CALLBACK,
        title=PlainTextObject(text="Full call"),
        close=PlainTextObject(text="Close"),
        private_metadata=metadata,
        blocks=blocks,
    )


def _page_button(label: str, action_id: str, page: int) -> ButtonElement:
    return ButtonElement(text=PlainTextObject(text=label), action_id=action_id, value=str(page))
