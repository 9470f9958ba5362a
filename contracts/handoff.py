"""A handoff's wire models (from the agent SDK, `cosigner.handoff`) and what the server keeps of one.

`HandoffState` is stored with the approval (the policy's reason, steps and `expect` target
as they were when the request came in, who pressed Done, and the application's answer);
`HandoffCard` is what a surface may show of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from contracts.enums import ApprovalStatus, ErrorCode
from cosigner.handoff import DETAIL_MAX, ExpectAnswer, ExpectCall, HandoffReceipt, HandoffStart

__all__ = [
    "CODES",
    "DETAIL_MAX",
    "UNVERIFIED",
    "ExpectAnswer",
    "ExpectCall",
    "HandoffCard",
    "HandoffReceipt",
    "HandoffStart",
    "HandoffState",
]

UNVERIFIED = "could not be verified"
"""The detail of a handoff whose check did not get an answer: it fails closed."""

CODES = {
    ApprovalStatus.FAILED: ErrorCode.HANDOFF_FAILED,
    ApprovalStatus.CANCELLED: ErrorCode.HANDOFF_CANCELLED,
    ApprovalStatus.EXPIRED: ErrorCode.HANDOFF_TIMEOUT,
}
"""The code a closed handoff's decision carries, by status (completed carries none)."""


class HandoffState(BaseModel):
    """A handoff as stored with its approval (JSON in `approvals.handoff`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str
    steps: tuple[str, ...]
    url: str
    secret_env: str
    sealed: str  # the unredacted parameters, sealed under COSIGNER_SECRET for the check only
    done_by: str | None = None  # the PersonDecider JSON of who pressed Done
    done_at: float | None = None
    delivery: str | None = None  # the webhook-id of the signed expect call
    receipt: HandoffReceipt | None = None
    detail: str | None = None

    def card(self) -> HandoffCard:
        """What a surface may show."""
        return HandoffCard(
            reason=self.reason,
            steps=self.steps,
            checking=self.done_by is not None,
            detail=self.receipt.detail if self.receipt is not None else self.detail,
        )


@dataclass(frozen=True)
class HandoffCard:
    """A handoff as a card shows it: why, the steps, and once checked what the application said."""

    reason: str
    steps: tuple[str, ...]
    checking: bool = False
    detail: str | None = None
