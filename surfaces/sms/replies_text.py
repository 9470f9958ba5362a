"""What Cosigner texts back: the outcome of a request, and the short replies to answers.

Every function here is pure and returns a string.
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts.enums import ApprovalStatus
from contracts.ports import ApprovalCard
from surfaces.sms.fit import cut

HELP = (
    "Reply YES or NO (plus the code when asked), or NEVER to deny and always deny this tool for you. "
    "MORE texts the whole call. Nothing was decided."
)


def to_outcome_text(card: ApprovalCard) -> str:
    """The confirmation texted to each approver once an approval closed."""
    label = f"{card.preview.title if card.preview else card.tool_name} ({card.short_code})"
    outcome = card.outcome
    if card.status == ApprovalStatus.APPROVED:
        if card.result is not None:
            return f"Approved {label}: {cut(card.result.summary(), 200)}"
        return f"Approved {label}."
    if card.status == ApprovalStatus.DENIED:
        if outcome is not None and outcome.decider_kind == "system":
            why = f" ({outcome.decider})" if outcome.decider else ""
            return f"Denied {label} by Cosigner{why}. Nothing was done."
        return f"Denied {label}. Nothing was done."
    if card.status == ApprovalStatus.EXPIRED:
        return f"Expired {label}: nobody answered in time, nothing was done."
    if card.status == ApprovalStatus.CANCELLED:
        return f"Cancelled {label} by the agent, nothing was done."
    return f"Request {label} is still pending."


def counted_text(card: ApprovalCard) -> str:
    """The reply to a YES that counted toward a quorum still short: `1 of 2 approvals`."""
    label = f"{card.preview.title if card.preview else card.tool_name} ({card.short_code})"
    more = card.quorum - len(card.approvals)
    return (
        f"You approved {label}: {card.progress()} approvals. Nothing runs until "
        f"{more} more approver{'s' if more != 1 else ''} say{'s' if more == 1 else ''} YES."
    )


HANDOFF_HELP = "Reply DONE once you have done the step, or NO to cancel. Nothing was decided."


def help_text(codes: Sequence[str] = (), *, handoffs: Sequence[str] = ()) -> str:
    """The reply to anything that is not an exact answer; names the codes when several wait.

    `handoffs` are the codes among them that are handed-off steps (answered DONE or NO)."""
    if len(codes) > 1:
        listed = ", ".join(codes)
        done = f", DONE or NO for a handed-off step ({', '.join(handoffs)})," if handoffs else ""
        return (
            f"Several requests are pending ({listed}): reply YES, NO or NEVER (always deny){done} "
            f"followed by the code, e.g. YES {codes[0]}. Nothing was decided."
        )
    if handoffs:
        return HANDOFF_HELP
    return HELP


def standing_text(card: ApprovalCard) -> str:
    """The reply to NEVER once it was applied: what is refused from now on, and how to undo it."""
    return (
        f"Always deny set: {card.tool_name} requests you approve are refused from now on, "
        "without a text. To lift it, ask your team's admin (Cosigner lists it under denials)."
    )


def unknown_code_text(code: str, codes: Sequence[str]) -> str:
    """The reply to an answer whose code matches no pending request."""
    listed = ", ".join(codes) if codes else "none"
    return f"No pending request has code {code} (pending: {listed}). Nothing was decided."


def closed_text(card: ApprovalCard) -> str:
    """The reply to an answer that arrives after its request closed."""
    if card.status == ApprovalStatus.EXPIRED:
        return f"Request {card.short_code} expired, nothing was done."
    if card.status == ApprovalStatus.CANCELLED:
        return f"Request {card.short_code} was cancelled, nothing was done."
    return f"Request {card.short_code} is already {card.status.value}. Nothing changed."


def edited_text(card: ApprovalCard) -> str:
    """The reply to an answer to a call an approver edited after it was texted: the call
    texted is not the one asked now, so the answer is not counted; the edited call is texted
    to the same number (`SmsAdapter.retext`), and an answer to that text counts."""
    return (
        f"Not accepted: request {card.short_code} was edited by an approver after it was texted "
        "to you, so your answer was not counted. The edited call has been texted to you (or will "
        "be in a moment): answer that text. Nothing was decided."
    )


def refusal_text(message: str) -> str:
    """The reply when the engine refuses an answer; the message says why."""
    message = cut(message.strip(), 100)
    if not message.endswith((".", "!", "?", ")")):
        message += "."
    return f"Not accepted: {message} Nothing was decided."
