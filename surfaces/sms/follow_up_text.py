"""The SMS reminder: one text to each approver still to answer."""

from __future__ import annotations

from contracts.ports import ApprovalCard


def reminder_text(card: ApprovalCard) -> str:
    """A short reminder naming the request's code, which any answer may carry."""
    what = card.preview.title if card.preview is not None else card.tool_name
    code = card.short_code
    expires = card.expires_at.strftime("%H:%M UTC")
    return (
        f"Reminder: Cosigner request {code} ({what[:60]}) still waits for your answer; it expires "
        f"{expires} (expiry means deny). Reply YES {code} or NO {code}, or MORE {code} to see it again."
    )
