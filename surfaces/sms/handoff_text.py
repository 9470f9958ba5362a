"""What Cosigner texts for a handoff: the steps, how to answer, and the outcome.

The only answers offered are `DONE` and `NO`. CANCEL, STOP, END and QUIT are Twilio opt-out
words: a person who replied one would be unsubscribed from every later text, so no text
here ever asks for them. Like `text`, every function is pure and gets a card whose
parameters are already redacted.
"""

from __future__ import annotations

from datetime import UTC

from contracts.enums import ApprovalStatus
from contracts.handoff import HandoffCard
from contracts.ports import ApprovalCard
from surfaces.sms.fit import compact_parameters, cut, sms_length

BUDGET = 459  # three concatenated GSM-7 segments: the steps must be readable
STEP_MAX = 120
MIN_PARAMS = 24


def _handoff(card: ApprovalCard) -> HandoffCard:
    if card.handoff is None:
        raise ValueError(f"{card.approval_id} is not a handoff")
    return card.handoff


def how_to_answer(code: str | None) -> str:
    """The answer line: exact keywords, with the short code when several requests wait."""
    if code is None:
        return "Reply DONE when finished, or NO to cancel."
    return (
        f"Reply DONE {code} when finished, or NO {code} to cancel "
        "(code needed: several requests are pending)."
    )


def _expiry(card: ApprovalCard) -> str:
    at, ref = card.expires_at.astimezone(UTC), card.created_at.astimezone(UTC)
    return at.strftime("%H:%M UTC" if at.date() == ref.date() else "%b %d %H:%M UTC")


def to_handoff_text(card: ApprovalCard, *, code_required: bool) -> str:
    """The request text: why, the numbered steps, the redacted parameters, expiry, how to answer."""
    handoff = _handoff(card)
    expiry = _expiry(card)
    head = f"Cosigner {card.short_code}: {card.tool_name} needs you. {cut(handoff.reason, 160)}"
    steps = [f"{i}. {cut(step, STEP_MAX)}" for i, step in enumerate(handoff.steps, 1)]
    how = how_to_answer(card.short_code if code_required else None)
    tail = [f"Expires {expiry}.", how, "Done is checked with the app before it counts."]
    fixed = [head, *tail]
    room = BUDGET - sum(sms_length(line) + 1 for line in fixed)
    shown: list[str] = []
    for step in steps:
        if sms_length(step) + 1 > room - MIN_PARAMS:
            shown.append(cut(f"(+{len(steps) - len(shown)} more steps: see the app)", room))
            break
        shown.append(step)
        room -= sms_length(step) + 1
    params = cut("Params: " + compact_parameters(card.parameters), max(room - 1, MIN_PARAMS))
    return "\n".join([head, *shown, params, *tail])


def to_handoff_outcome_text(card: ApprovalCard) -> str:
    """The confirmation texted to each person once a handoff closed."""
    handoff = _handoff(card)
    label = f"{card.tool_name} ({card.short_code})"
    said = f" {cut(handoff.detail, 120)}" if handoff.detail else ""
    if card.status is ApprovalStatus.COMPLETED:
        return f"Done and confirmed by the app: {label}.{said}"
    if card.status is ApprovalStatus.FAILED:
        return f"Not confirmed: {label}.{said} It does not count as done."
    if card.status is ApprovalStatus.EXPIRED:
        return f"Expired {label}: nobody replied DONE in time."
    if card.status is ApprovalStatus.CANCELLED:
        return f"Called off: {label}. Nothing more to do."
    return f"Request {label} is still waiting for DONE."
