"""What texts say of "Allow for …": the line a request text adds where the policy offers it,
and the reply once an `ALLOW 1H` counted."""

from __future__ import annotations

from contracts.allowances import Choice, choice_named
from contracts.ports import ApprovalCard


def allow_line(card: ApprovalCard, code: str) -> str:
    """` ALLOW 1H also allows calls like it for 1 hour.` with the longest length offered (the
    shorter ones are accepted too); nothing where none is offered. `code` is ` 1234` or ""."""
    choices = [c for c in (choice_named(n) for n in card.allow_for) if c is not None]
    if not choices:
        return ""
    longest = choices[-1]
    return f" ALLOW {longest.name.upper()}{code} also allows calls like it for {longest.words}."


def allowed_text(card: ApprovalCard, choice: Choice) -> str:
    """The reply to ALLOW once it counted: what runs without a text now, and how to stop it."""
    return (
        f"Allowed for {choice.words}: later {card.tool_name} calls like this one, from the same "
        "requester, run without a text until then. Revoke it in the Cosigner inbox."
    )
