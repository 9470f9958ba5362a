"""Block Kit for an operation's card: the application's preview is what a person approves.

The agent's request and reason are shown below it, labelled as the agent's claim; once the
application executed the contract, its outcome is added to the closed card.
"""

from __future__ import annotations

import json

from slack_sdk.models.blocks import Block, HeaderBlock, PlainTextObject, SectionBlock
from slack_sdk.models.blocks.basic_components import MarkdownTextObject

from contracts.ports import ApprovalCard
from surfaces.slack import mrkdwn

SECTION_LIMIT = 3000
FIELD_LIMIT = 2000
PREFIX = "cosigner:"


def _md(text: str) -> MarkdownTextObject:
    return MarkdownTextObject(text=text, verbatim=True)


def preview_blocks(card: ApprovalCard) -> list[Block]:
    """The preview (title, labelled fields, effects), then the agent's request as its claim."""
    preview = card.preview
    assert preview is not None
    lines = [f"*{mrkdwn.fit(f.label, 200)}:* {mrkdwn.fit(f.value, 500)}" for f in preview.fields]
    effects = [f"• {mrkdwn.fit(e, 500)}" for e in preview.effects]
    label = "*You approve exactly this* (prepared by the application; it carries it out once)\n"
    what = "\n".join(lines) or "_no fields_"
    blocks: list[Block] = [
        HeaderBlock(text=PlainTextObject(text=preview.title[:150], emoji=False)),
        SectionBlock(block_id=f"{PREFIX}preview", text=_md(mrkdwn.fit(label + what, FIELD_LIMIT))),
    ]
    if effects:
        text = "*Effects*\n" + "\n".join(effects)
        blocks.append(SectionBlock(block_id=f"{PREFIX}effects", text=_md(text[:SECTION_LIMIT])))
    request = json.dumps(card.parameters, indent=2, ensure_ascii=False, default=str)
    claim = f"*Agent's request* (its claim, unverified: {mrkdwn.fit(card.tool_name, 128)})\n"
    reason = mrkdwn.fit(card.reason, 1500) if card.reason else "_none given_"
    blocks.append(
        SectionBlock(
            block_id=f"{PREFIX}claim",
            text=_md(claim + mrkdwn.fenced(request, 1200) + f"\n*Agent's stated reason*\n{reason}"),
        )
    )
    return blocks


def result_blocks(card: ApprovalCard) -> list[Block]:
    """The application's outcome on a closed card, or that it is being carried out."""
    if card.preview is None or card.status.value != "approved":
        return []
    if card.result is None:
        return [SectionBlock(block_id=f"{PREFIX}result", text=_md("*Executing…*"))]
    line = mrkdwn.fit(card.result.summary(), 1000)
    return [SectionBlock(block_id=f"{PREFIX}result", text=_md(f"*Outcome:* {line}"))]
