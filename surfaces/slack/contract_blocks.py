"""Block Kit for an operation's card: the application's preview is what a person approves.

The agent's request and reason are shown below it, labelled as the agent's claim; once the
application executed the contract, its outcome is added to the closed card. A preview too
long for the card is cut with a note, and `preview_blocks` says so: the card then offers
*See the full call*, whose modal (`full_call.py`) shows the preview whole.
"""

from __future__ import annotations

import json

from slack_sdk.models.blocks import Block, HeaderBlock, PlainTextObject, SectionBlock
from slack_sdk.models.blocks.basic_components import MarkdownTextObject

from contracts.ports import ApprovalCard
from surfaces.slack import mrkdwn

SECTION_LIMIT = 3000
FIELD_LIMIT = 2000
TITLE_LIMIT = 150  # a header block's plain text
PREFIX = "cosigner:"


def _md(text: str) -> MarkdownTextObject:
    return MarkdownTextObject(text=text, verbatim=True)


def _fit_escaped(escaped: str, limit: int) -> tuple[str, bool]:
    """Already escaped mrkdwn within `limit` characters (never escaped twice), with the note
    saying how much was cut; and whether anything was."""
    if len(escaped) <= limit:
        return escaped, False
    kept, dropped = mrkdwn.truncate(escaped, limit - len(mrkdwn.cut_note(len(escaped))) - 1)
    return f"{kept}\n{mrkdwn.cut_note(dropped)}", True


def preview_blocks(card: ApprovalCard) -> tuple[list[Block], bool]:
    """The preview (title, labelled fields, effects), then the agent's request as its claim;
    and whether any of the preview had to be cut (the full call then shows it whole)."""
    preview = card.preview
    assert preview is not None
    lines = [f"*{mrkdwn.fit(f.label, 200)}:* {mrkdwn.fit(f.value, 500)}" for f in preview.fields]
    effects = [f"• {mrkdwn.fit(e, 500)}" for e in preview.effects]
    cut = any(len(mrkdwn.escape(f.label)) > 200 or len(mrkdwn.escape(f.value)) > 500 for f in preview.fields)
    cut = cut or any(len(mrkdwn.escape(e)) > 500 for e in preview.effects)
    label = "*You approve exactly this* (prepared by the application; it carries it out once)\n"
    what, cut_what = _fit_escaped(label + ("\n".join(lines) or "_no fields_"), FIELD_LIMIT)
    title = preview.title
    if len(title) > TITLE_LIMIT:
        title = title[: TITLE_LIMIT - 1] + "…"
    blocks: list[Block] = [
        HeaderBlock(text=PlainTextObject(text=title, emoji=False)),
        SectionBlock(block_id=f"{PREFIX}preview", text=_md(what)),
    ]
    cut = cut or cut_what or title != preview.title
    if effects:
        text, cut_effects = _fit_escaped("*Effects*\n" + "\n".join(effects), SECTION_LIMIT)
        cut = cut or cut_effects
        blocks.append(SectionBlock(block_id=f"{PREFIX}effects", text=_md(text)))
    request = json.dumps(card.parameters, indent=2, ensure_ascii=False, default=str)
    claim = f"*Agent's request* (its claim, unverified: {mrkdwn.fit(card.tool_name, 128)})\n"
    reason = mrkdwn.fit(card.reason, 1500) if card.reason else "_none given_"
    blocks.append(
        SectionBlock(
            block_id=f"{PREFIX}claim",
            text=_md(claim + mrkdwn.fenced(request, 1200) + f"\n*Agent's stated reason*\n{reason}"),
        )
    )
    return blocks, cut


def result_blocks(card: ApprovalCard) -> list[Block]:
    """The application's outcome on a closed card, or that it is being carried out."""
    if card.preview is None or card.status.value != "approved":
        return []
    if card.result is None:
        return [SectionBlock(block_id=f"{PREFIX}result", text=_md("*Executing…*"))]
    line = mrkdwn.fit(card.result.summary(), 1000)
    return [SectionBlock(block_id=f"{PREFIX}result", text=_md(f"*Outcome:* {line}"))]
