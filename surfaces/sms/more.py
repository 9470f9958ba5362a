"""MORE: the whole call in numbered texts, and whether the texts can show a call whole.

MORE texts the call (redacted, never cut) in at most `MORE_PARTS` parts; a call even that
cannot text whole (`unshown`) cannot be approved by text (`not_texted_whole` says why).
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.ports import ApprovalCard
from surfaces.sms.fit import BUDGET, CLAIM_LABEL, PLAIN, compact_parameters, preview_line, sms_length

MORE_PARTS = 15  # texts one MORE answers with at most (about 4,000 characters)


@dataclass(frozen=True)
class MoreParts:
    """The answer to MORE, and how many characters of the call itself no part carries (0:
    the texts show the whole call, which can then be approved by text)."""

    texts: list[str]
    unshown: int


def _more_stream(card: ApprovalCard) -> tuple[str, str, str, int]:
    """What MORE texts: the call, then the claim after it; each part's label, and the room a
    part has for them."""
    what = card.preview.title if card.preview is not None else card.tool_name
    claim = " ".join((card.reason or "").translate(PLAIN).split())
    if card.preview is not None:
        call = f"Preview: {preview_line(card)}"
        claim = " ".join(f"{compact_parameters(card.parameters)}. {claim}".translate(PLAIN).split())
    else:
        call = f"Params: {compact_parameters(card.asked())}"
    after = f' {CLAIM_LABEL}"{claim}"' if claim else ""
    label = f"{card.short_code} {what} "
    return call, after, label, BUDGET - sms_length(f"{label}({MORE_PARTS}/{MORE_PARTS}): ")


# The longest note the last part can end with, for `unshown`'s shortcut.
_NOTE_MAX = len("... (+99,999,999 chars not texted: too long for SMS)")


def more_parts(card: ApprovalCard) -> MoreParts:
    """The answer to MORE: the whole call (redacted, never cut) in numbered parts.

    At most `MORE_PARTS` texts of `BUDGET` each; what still does not fit is named in the
    last. The call comes first (an operation's preview, then the agent's request as its
    claim), the agent's reason last: a reason too long to text leaves the call whole."""
    call, after, label, room = _more_stream(card)
    chunks: list[str] = []
    rest = call + after
    while rest and len(chunks) < MORE_PARTS:
        take = _fitting(rest, room)
        chunks.append(rest[:take])
        rest = rest[take:]
    if rest:
        # Sized for the most characters it can name, so the count is exact once it is added.
        note = f"... (+{len(rest) + room:,} chars not texted: too long for SMS)"
        keep = _fitting(chunks[-1], room - sms_length(note))
        rest = chunks[-1][keep:] + rest
        chunks[-1] = chunks[-1][:keep] + f"... (+{len(rest):,} chars not texted: too long for SMS)"
    texts = [f"{label}({i}/{len(chunks)}): {chunk}" for i, chunk in enumerate(chunks, 1)]
    return MoreParts(texts, max(len(rest) - len(after), 0))


def more_texts(card: ApprovalCard) -> list[str]:
    """The answer to MORE: the whole call in numbered parts (see `more_parts`)."""
    return more_parts(card).texts


def unshown(card: ApprovalCard) -> int:
    """How many characters of the call neither the request text nor MORE can text: above
    0, the call is not shown whole by text, so a YES cannot approve it."""
    call, _, _, room = _more_stream(card)
    # Each part holds at least room - 1 units (a character counts 2 at most), and the last
    # may give up a note's length: a call within that is whole without cutting the parts.
    if sms_length(call) <= MORE_PARTS * (room - 1) - _NOTE_MAX:
        return 0
    return more_parts(card).unshown


def not_texted_whole(card: ApprovalCard) -> str | None:
    """Why the texts cannot show this call whole (recorded with each text, and refusing a
    YES to it), or None when they can."""
    left = unshown(card)
    if not left:
        return None
    return (
        f"request {card.short_code} is too long to text whole ({left:,} characters of the call "
        f"do not fit in {MORE_PARTS} texts)"
    )


def _fitting(text: str, budget: int) -> int:
    """How many leading characters of `text` fit in `budget` septets (at least one)."""
    text = text[: max(budget, 1)]  # every character counts at least one: no more can fit
    if sms_length(text) <= budget:
        return len(text)
    low, high = 1, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if sms_length(text[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    return low
