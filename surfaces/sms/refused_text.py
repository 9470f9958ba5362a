"""The replies to an answer that a text could not bind: a YES to a call too long to text
whole, and a bare YES soon after another request's text. Pure, like `text`."""

from __future__ import annotations

from contracts.ports import ApprovalCard
from surfaces.sms.fit import cut


def too_long_text(card: ApprovalCard, inbox: str | None) -> str:
    """The reply to a YES refused because the call was too long to text whole."""
    where = f" Read it whole at {inbox} ." if inbox else ""
    return (
        f"Not accepted: request {card.short_code} is too long to show whole by text, so YES "
        f"cannot approve it.{where} Reply NO {card.short_code} to deny it. Nothing was decided."
    )


def code_needed_text(card: ApprovalCard, word: str) -> str:
    """The reply to a bare answer refused because another request was texted to the number
    lately: it could be meant for that one, so the code is asked for."""
    what = card.preview.title if card.preview is not None else card.tool_name
    code = card.short_code
    return (
        f"Not accepted: another request was texted to you lately, so a bare {word} could be meant "
        f"for it. To answer {cut(what, 60)} ({code}), reply {word} {code} (or NO {code}). "
        "Nothing was decided."
    )
