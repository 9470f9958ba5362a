"""The SMS reminder: one text to each approver still to answer."""

from __future__ import annotations

from contracts.ports import ApprovalCard
from surfaces.sms.more import unshown


def reminder_text(card: ApprovalCard) -> str:
    """A short reminder naming the request's code, which any answer may carry."""
    what = card.preview.title if card.preview is not None else card.tool_name
    code = card.short_code
    expires = card.expires_at.strftime("%H:%M UTC")
    # A call too long to text whole cannot be approved by text: the reminder offers NO only.
    answers = (
        f"It is too long to approve by text: reply NO {code} to deny"
        if unshown(card)
        else f"Reply YES {code} or NO {code}"
    )
    return (
        f"Reminder: Cosigner request {code} ({what[:60]}) still waits for your answer; it expires "
        f"{expires} (expiry means deny). {answers}, or MORE {code} to see it again."
    )
